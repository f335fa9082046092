"""``otel-liveness replay``: would the transport have been transparent on my own recorded traffic?

It reads VCR cassettes -- the YAML that vcrpy and pytest-recording write (``.yaml``, ``.yml``,
and the same gzip-compressed, ``.yaml.gz``) -- and replays every streamed response in them
through :func:`otel_liveness.wrap` on loopback, next to a plain client reading the same bytes:

- twice per stream: split at its frames (an SSE event, an event-stream message: "as recorded",
  which a cassette does not keep), and re-split at random byte offsets (seeded: ``--seed``);
- per replay: whether the bytes the caller read are identical to the plain client's, the
  verdict (the report's ``stop_reason``; ``completed``, or the provider's own error relayed),
  attempts, heartbeats, the provider's stop reason and the usage the report parsed.

A **difference** is any of: bytes not identical; more than one attempt (the transport retried
a stream that was there); an error the plain client did not get; a verdict other than
``completed`` on a stream that is not the provider's own error. A cassette may carry what its
wire says under a top-level ``liveness: expect:`` mapping (``stop_detail``, ``heartbeats``,
``usage``, ``ends``: the project's wire corpus does); each value that differs is a difference too.

Requests in a cassette that are not streams (a JSON reply, an error status) are skipped and
counted. A cassette that cannot be read -- not YAML, no ``interactions``, a response without a
body -- is reported with its reason, and the others are still replayed. Exit status: 0 when no
replay differs, 1 when one does (each named, with why), 2 when no cassette could be read.
Nothing of a stream's content is printed, and request headers that carry credentials are not
sent to the loopback server (``authorization``, ``x-api-key``, ``x-goog-api-key``...).
"""

from __future__ import annotations

import gzip
import os
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..core.wire.providers import select_provider

__all__ = ["CassetteError", "Stream", "load_cassettes", "render", "replay", "replay_stream", "split"]

#: Response content types that stream (a cassette's other responses are skipped).
STREAM_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream", "application/x-ndjson",
                "application/jsonl")
#: Request headers never re-sent: credentials, and what the loopback request sets itself.
_DROPPED = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "proxy-authorization",
                      "x-amz-security-token", "x-amz-date", "x-amz-content-sha256", "host", "content-length",
                      "transfer-encoding", "connection", "accept-encoding"})
#: Response headers the loopback server sets itself.
_SERVED = frozenset({"content-type", "content-length", "transfer-encoding", "connection", "date", "keep-alive"})


class CassetteError(ValueError):
    """A cassette that cannot be replayed, and why (naming the file and the interaction)."""


@dataclass
class Stream:
    """One streamed response of a cassette."""

    source: str  # the file, "#" and the interaction's index
    method: str
    uri: str
    request_body: bytes
    request_headers: dict[str, str]
    status: int
    headers: list[tuple[str, str]]
    content_type: str
    body: bytes
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def provider(self) -> str:
        url = urlsplit(self.uri)
        return select_provider(url.hostname or "", url.path)


# -- reading cassettes ----------------------------------------------------------------------------


def _loader() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - the extra is missing
        raise CassetteError("reading cassettes needs PyYAML: pip install 'otel-liveness[replay]'") from None
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc,valid-type]
        """Safe YAML, plus the two tags old vcrpy cassettes carry for plain strings."""

    for tag in ("tag:yaml.org,2002:python/unicode", "tag:yaml.org,2002:python/str"):
        Loader.add_constructor(tag, lambda loader, node: loader.construct_scalar(node))
    return yaml, Loader


def iter_cassettes(paths: Iterable[str]) -> Iterator[str]:
    """The cassette files under ``paths`` (a file, or a folder searched recursively), sorted."""
    for path in paths:
        if os.path.isdir(path):
            found: list[str] = []
            for root, _dirs, files in os.walk(path):
                found.extend(os.path.join(root, f) for f in files if f.endswith((".yaml", ".yml", ".yaml.gz", ".yml.gz")))
            yield from sorted(found)
        else:
            yield path


def _header_map(raw: Any, where: str) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise CassetteError(f"{where}: headers are not a mapping")
    out = []
    for name, values in raw.items():
        for value in values if isinstance(values, list) else [values]:
            out.append((str(name), str(value)))
    return out


def _body(raw: Any, where: str) -> bytes:
    """A cassette body: ``{"string": ...}`` (text or ``!!binary`` bytes), or the bare value."""
    if isinstance(raw, Mapping):
        if "string" not in raw:
            raise CassetteError(f"{where}: no body string")
        raw = raw["string"]
    if raw is None:
        return b""
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, str):
        return raw.encode("utf-8", "surrogateescape")
    raise CassetteError(f"{where}: the body is a {type(raw).__name__}, not text or bytes")


def read_cassette(path: str) -> tuple[list[Stream], list[dict[str, str]]]:
    """The streamed responses of one cassette, and the interactions skipped (each with why)."""
    yaml, loader = _loader()
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                text = fh.read()
        else:
            with open(path, "rb") as fh:
                text = fh.read()
        data = yaml.load(text, Loader=loader)
    except OSError as exc:
        raise CassetteError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise CassetteError(f"{path}: not YAML{where}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("interactions"), list):
        raise CassetteError(f"{path}: not a VCR cassette (no 'interactions' list)")
    meta = data.get("liveness")
    expect = dict(meta.get("expect") or {}) if isinstance(meta, Mapping) else {}
    streams: list[Stream] = []
    skipped: list[dict[str, str]] = []
    for index, interaction in enumerate(data["interactions"]):
        where = f"{path}#{index}"
        if not isinstance(interaction, Mapping) or not isinstance(interaction.get("request"), Mapping) \
                or not isinstance(interaction.get("response"), Mapping):
            raise CassetteError(f"{where}: an interaction without a request and a response")
        request, response = interaction["request"], interaction["response"]
        headers = _header_map(response.get("headers"), where)
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        status = response.get("status")
        code = status.get("code") if isinstance(status, Mapping) else status
        if not isinstance(code, int):
            raise CassetteError(f"{where}: the response has no status code")
        if content_type.split(";")[0].strip().lower() not in STREAM_TYPES:
            skipped.append({"stream": where, "why": f"not a stream ({content_type or 'no content type'})"})
            continue
        if not 200 <= code < 300:
            skipped.append({"stream": where, "why": f"status {code}"})
            continue
        if "body" not in response:
            raise CassetteError(f"{where}: the response has no body")
        uri = request.get("uri")
        if not isinstance(uri, str) or not uri.startswith(("http://", "https://")):
            raise CassetteError(f"{where}: the request has no http(s) uri")
        sent = {k: v for k, v in _header_map(request.get("headers"), where) if k.lower() not in _DROPPED}
        streams.append(Stream(
            source=where, method=str(request.get("method") or "POST"), uri=uri,
            request_body=_body(request.get("body"), f"{where} request"), request_headers=sent, status=code,
            headers=[(k, v) for k, v in headers if k.lower() not in _SERVED], content_type=content_type,
            body=_body(response["body"], f"{where} response"), expect=expect,
        ))
    return streams, skipped


def load_cassettes(paths: Iterable[str]) -> tuple[list[Stream], list[dict[str, str]], list[dict[str, str]]]:
    """Every streamed response under ``paths``; the interactions skipped; the unreadable files."""
    streams: list[Stream] = []
    skipped: list[dict[str, str]] = []
    errors: list[dict[str, str]] = []
    for path in iter_cassettes(paths):
        try:
            found, passed = read_cassette(path)
        except CassetteError as exc:
            errors.append({"file": path, "error": str(exc)})
            continue
        streams.extend(found)
        skipped.extend(passed)
    return streams, skipped, errors


# -- splitting -------------------------------------------------------------------------------------


def _frames(body: bytes, content_type: str) -> list[bytes]:
    """``body`` cut after each frame: event-stream messages by their length prelude, SSE events
    after their blank line, NDJSON after each line (what is left is the last piece)."""
    pieces: list[bytes] = []
    if "amazon.eventstream" in content_type:
        at = 0
        while at + 4 <= len(body):
            size = int.from_bytes(body[at:at + 4], "big")
            if size < 16:
                break
            pieces.append(body[at:at + size])
            at += size
        if at < len(body):
            pieces.append(body[at:])
        return pieces
    start = 0
    marks = (b"\n",) if "json" in content_type else (b"\r\n\r\n", b"\n\n", b"\r\r")
    while start < len(body):
        ends = [i + len(m) for m in marks if (i := body.find(m, start)) >= 0]
        if not ends:
            pieces.append(body[start:])
            break
        end = min(ends)
        pieces.append(body[start:end])
        start = end
    return pieces


def split(body: bytes, content_type: str, how: str, seed: int = 0) -> list[bytes]:
    """``body`` in the chunks a replay sends: ``"frames"`` (at each frame's end), or ``"random"``
    (at random offsets from ``seed``: chunks of 1 byte to twice a mean of ~1/24 of the body)."""
    if how == "frames":
        return [p for p in _frames(body, content_type) if p] or [body]
    rng = random.Random(seed)
    mean = max(1, len(body) // 24)
    out, at = [], 0
    while at < len(body):
        step = rng.randint(1, 2 * mean)
        out.append(body[at:at + step])
        at += step
    return out or [body]


# -- replaying -------------------------------------------------------------------------------------


def _read(client: Any, stream: Stream, url: str) -> tuple[bytes, str | None, dict[str, Any] | None]:
    """What a raw reader reads of the stream through ``client``: its bytes, the error it got (type
    and message), and the transport's report when there is one."""
    from ..core.errors import liveness_report

    chunks: list[bytes] = []
    try:
        with client.stream(stream.method, url, content=stream.request_body or None,
                           headers=stream.request_headers) as response:
            for chunk in response.iter_bytes():
                chunks.append(chunk)
        report = response.extensions.get("liveness")
        return b"".join(chunks), None, report if isinstance(report, dict) else None
    except Exception as exc:  # noqa: BLE001 - what the caller would have got, reported
        return b"".join(chunks), f"{type(exc).__name__}: {exc}", liveness_report(exc)


def replay_stream(server: Any, stream: Stream, name: str, chunks: Sequence[bytes], policy: Any) -> dict[str, Any]:
    """One replay of ``stream``, sent as ``chunks``, plain and wrapped; the row that says how it went."""
    import httpx2

    from .. import wrap
    from ..testing import steps as s

    script = [s.Headers(stream.status, tuple(stream.headers), stream.content_type), *(s.Raw(c) for c in chunks)]
    # Twice: a retry the transport should not have made is counted, not served a 404.
    server.add(name, [script, script, script])
    target = urlsplit(stream.uri)
    url = server.base_url(name) + target.path + (f"?{target.query}" if target.query else "")
    with httpx2.Client(timeout=30) as plain:
        expected, plain_error, _ = _read(plain, stream, url)
    served = server.attempts(name)
    with httpx2.Client(transport=wrap(httpx2.HTTPTransport(), policy), timeout=30) as client:
        got, error, report = _read(client, stream, url)
    attempts = server.attempts(name) - served
    last = (report or {}).get("attempts") or [{}]
    row: dict[str, Any] = {
        "stream": stream.source, "provider": policy.provider, "bytes": len(expected),
        "identical": got == expected and error == plain_error, "verdict": (report or {}).get("stop_reason"),
        "outcome": last[-1].get("outcome"), "attempts": attempts, "heartbeats": last[-1].get("heartbeats"),
        "stop_detail": (report or {}).get("stop_detail"), "usage": last[-1].get("usage") or {},
        "unrecognised": last[-1].get("unrecognised", 0), "error": error,
    }
    row["differences"] = _differences(row, stream.expect, plain_error)
    return row


def _differences(row: Mapping[str, Any], expect: Mapping[str, Any], plain_error: str | None) -> list[str]:
    why = []
    if not row["identical"]:
        why.append("the bytes read differ from a plain client's" if row["error"] == plain_error
                   else f"raised {row['error']} (plain: {plain_error or 'no error'})")
    if row["attempts"] != 1:
        why.append(f"{row['attempts']} attempts")
    if row["verdict"] is None:
        why.append("no report: the transport did not judge the stream")
    elif row["outcome"] != "provider_error" and row["verdict"] != "completed":
        why.append(f"verdict {row['verdict']}")
    ends = expect.get("ends")
    if ends == "provider_error" and row["outcome"] != "provider_error":
        why.append(f"the provider's error frame not relayed as such (outcome {row['outcome']})")
    if ends == "completed" and row["outcome"] != "completed":
        why.append(f"outcome {row['outcome']}, the wire completed")
    if "heartbeats" in expect and expect["heartbeats"] != row["heartbeats"]:
        why.append(f"{row['heartbeats']} heartbeats, the wire has {expect['heartbeats']} keep-alives")
    if "stop_detail" in expect and expect["stop_detail"] != row["stop_detail"]:
        why.append(f"stop reason {row['stop_detail']!r}, the wire says {expect['stop_detail']!r}")
    for key, value in (expect.get("usage") or {}).items():
        if row["usage"].get(key) != value:
            why.append(f"usage {key} {row['usage'].get(key)}, the wire says {value}")
    return why


def replay(streams: Sequence[Stream], *, seed: int = 0, splits: Sequence[str] = ("frames", "random"),
           policy: Any = None) -> list[dict[str, Any]]:
    """Replay every stream once per split on one loopback server; a row per replay."""
    from ..core.policy import Policy
    from ..testing import SimulatedProvider

    base = policy or Policy()
    rows: list[dict[str, Any]] = []
    with SimulatedProvider(time_scale=0.001) as server:
        for number, stream in enumerate(streams):
            for how in splits:
                chunks = split(stream.body, stream.content_type, how, seed + number)
                row = replay_stream(server, stream, f"replay-{number}-{how}", chunks,
                                    base.replace(provider=stream.provider))
                row["split"] = how
                rows.append(row)
    return rows


def render(rows: Sequence[Mapping[str, Any]], skipped: Sequence[Mapping[str, str]],
           errors: Sequence[Mapping[str, str]]) -> str:
    """The table: a line per replay, then every difference and unreadable file, named."""
    head = f"{'stream':<48} {'split':<6} {'provider':<17} {'bytes':>7} {'same':<4} {'verdict':<10} " \
           f"{'att':>3} {'beats':>5} {'stop':<16} usage"
    lines = [head]
    for row in rows:
        usage = ",".join(f"{k}={v}" for k, v in sorted(row["usage"].items())) or "-"
        name = row["stream"] if len(row["stream"]) <= 48 else "..." + row["stream"][-45:]
        verdict = row["verdict"] if row["outcome"] != "provider_error" else "prov_error"
        lines.append(f"{name:<48} {row['split']:<6} {row['provider']:<17} {row['bytes']:>7} "
                     f"{'yes' if row['identical'] else 'NO':<4} {verdict or '-':<10} {row['attempts']:>3} "
                     f"{row['heartbeats'] if row['heartbeats'] is not None else '-':>5} "
                     f"{(row['stop_detail'] or '-')[:16]:<16} {usage}")
    different = [row for row in rows if row["differences"]]
    lines.append("")
    lines.append(f"{len(rows)} replays of {len({r['stream'] for r in rows})} streams: {len(different)} differ; "
                 f"{len(skipped)} interactions skipped (not streams); {len(errors)} files unreadable")
    for row in different:
        lines.append(f"DIFFERS {row['stream']} ({row['split']}): {'; '.join(row['differences'])}")
    for error in errors:
        lines.append(f"UNREADABLE {error['error']}")
    return "\n".join(lines)
