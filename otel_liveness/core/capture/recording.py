"""Reading the flight recorder's files -- full captures and timing-only recordings -- into what a
replay through the engine needs (the flight recorder's format: :mod:`otel_liveness.transport._recorder`).

A full capture is fed to the engine byte for byte. A timing-only recording has no content: each
of its frames is rebuilt as a canonical frame of the same kind on the recording's own wire
(:func:`frame_bytes`: an Anthropic ``ping`` for a heartbeat, a ``content_block_delta`` for
content, ``[DONE]`` for an OpenAI stop...), padded to the recorded size, and the frames of one
read (one ``t``) are delivered together. Liveness verdicts depend only on when frames arrive and
what kind they are, so the engine judges the rebuilt stream as it judged the original one.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events import CaptureItem
from ..wire.eventstream import CONTENT_TYPE as EVENTSTREAM
from ..wire.eventstream import bedrock_chunk, bedrock_exception, converse_event, encode_message
from ..wire.providers import PROFILES
from ..wire.sse import DEFAULT_MAX_FRAME_BYTES
from .timing import TimingCapture

__all__ = [
    "BROKE_WITHIN",
    "KINDS",
    "SILENCE_OUTCOMES",
    "CaptureError",
    "Chunk",
    "Recording",
    "capture_records",
    "frame_bytes",
    "parse_recording",
    "recording_meta",
    "recording_of",
    "timing_records",
]

#: The frame kinds of a timing-only recording.
KINDS = ("heartbeat", "comment", "preamble", "content", "stop", "error", "other", "partial")

#: Outcomes of a recording-time kill of silence: a recording ended by one (in enforce mode) is
#: *censored* -- it cannot tell whether the wire would have recovered.
SILENCE_OUTCOMES = ("raw_silence", "semantic_timeout")
_MARKERS = ("read_error", "connect_error")
#: Outcomes that say the wire did not go silent for good: the reply completed, or the recording-time
#: policy's wall budget cut an attempt that may still have been speaking.
_NOT_SILENT = ("completed", "wall_budget")
#: A connection error within this many seconds of the last wire event is the wire breaking (a
#: reset); later, it ends a silence (a client's read timeout, a proxy's idle timeout).
BROKE_WITHIN = 1.0


#: What a replay feeds the engine (a capture item, never :data:`~otel_liveness.core.events.FrameSizes`:
#: timing records are rebuilt as bytes).
ChunkItem = bytes | Mapping[str, str | int] | str | None


class CaptureError(ValueError):
    """A capture record is invalid; the message names the record (1-based line number)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One capture record (:data:`~otel_liveness.core.events.CaptureItem`): body bytes, the
    headers (a mapping with ``status``), ``None`` (the body ended) or a marker string
    (``"end"``, ``"read_error"``, ``"connect_error"``)."""

    t: float
    data: ChunkItem


@dataclass
class Recording:
    """One attempt's recording: ``meta`` (the first record's description, empty for a capture
    written before it existed), the ``chunks`` a replay feeds the engine, the time of every wire
    event (``activity``: headers, body reads, the end of the body) and of the ``first_byte`` of the body, how it
    ended (``ending``: ``eof``, ``error``, ``end``, or ``None`` when the file stops without an end
    record) and when (``end``), and the kinds of frames it saw (``kinds``; timing recordings)."""

    source: str
    meta: dict[str, Any]
    chunks: list[Chunk]
    activity: list[float] = field(default_factory=list)
    first_byte: float | None = None
    end: float = 0.0
    ending: str | None = None
    kinds: set[str] = field(default_factory=set)
    timing: bool = False
    fallback_provider: str = "anthropic"  # the wire of a recording that does not name one
    _scanned: bool = field(default=False, repr=False)

    def frame_kinds(self) -> set[str]:
        """The kinds of the recording's frames (a full capture's are found by framing its bytes)."""
        if not self.timing and not self._scanned:
            self._scanned = True
            self.kinds |= _kinds_of_capture(self)
        return self.kinds

    @property
    def provider(self) -> str:
        name = self.meta.get("provider")
        return name if isinstance(name, str) and name in PROFILES else self.fallback_provider

    @property
    def host(self) -> str | None:
        host = self.meta.get("host")
        return host if isinstance(host, str) else None

    @property
    def body_bytes(self) -> int | None:
        size = self.meta.get("body_bytes")
        return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None

    @property
    def last_activity(self) -> float:
        return self.activity[-1] if self.activity else 0.0

    @property
    def censored(self) -> bool:
        """Cut by the recording-time policy's own kill of silence (enforced, not shadow; before
        content, or after it as a truncation): what the wire would have done after it is unknown.
        A capture without a description that ends with ``end`` is taken as censored (nothing says
        otherwise)."""
        if self.ending != "end":
            return False
        if not self.meta:
            return True
        outcome = self.meta.get("outcome")
        if outcome == "truncated":  # (a reply cut after content: by what, its error type says)
            outcome = self.meta.get("error_type")
        return not self.meta.get("shadow") and outcome in SILENCE_OUTCOMES

    @property
    def went_silent(self) -> bool:
        """The truth ``whatif`` measures detection against: the wire went silent for good -- the
        attempt ended with nothing more read (no end of body, no stop or error frame, not
        completed; a connection error only after :data:`BROKE_WITHIN` seconds of silence -- a
        client's or a proxy's timeout -- since one right after a byte is the wire breaking, not
        going silent), the provider did not answer with an error status (a 429 or a 5xx whose body
        was left unread is an answer), and no clock of the recording-time policy cut it short (a
        kill of silence -- :attr:`censored` -- or the wall budget)."""
        if self.ending == "error":
            ended_silent = self.end - self.last_activity >= BROKE_WITHIN
        else:
            ended_silent = self.ending == "end"
        return (ended_silent and not self.censored and self.meta.get("outcome") not in _NOT_SILENT
                and not self.answered_with_status() and not self.frame_kinds() & {"stop", "error"})

    def answered_with_status(self) -> bool:
        """The provider answered with a status other than 2xx (a rate limit, an overload, an
        error): an answer, whatever the body did after."""
        return any(isinstance(c.data, Mapping) and not 200 <= int(c.data.get("status", 200)) < 300
                   for c in self.chunks)


# -- canonical frames for a timing-only replay -----------------------------------------------------

def _sse(event: str | None, data: str) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + b"data: " + data.encode() + b"\n\n"


_ANTHROPIC = {
    "heartbeat": _sse("ping", '{"type":"ping"}'),
    "preamble": _sse("message_start", '{"type":"message_start","message":{"id":"msg_replay","type":"message",'
                     '"role":"assistant","model":"replay","content":[],"usage":{"input_tokens":0,"output_tokens":0}}}'),
    "content": _sse("content_block_delta", '{"type":"content_block_delta","index":0,'
                    '"delta":{"type":"text_delta","text":"x"}}'),
    "stop": _sse("message_stop", '{"type":"message_stop"}'),
    "error": _sse("error", '{"type":"error","error":{"type":"overloaded_error","message":"replay"}}'),
    "other": _sse("replay_other", "{}"),
}
_OPENAI_CHAT = {
    "preamble": _sse(None, '{"id":"chatcmpl-replay","object":"chat.completion.chunk","choices":'
                     '[{"index":0,"delta":{"role":"assistant"}}]}'),
    "content": _sse(None, '{"id":"chatcmpl-replay","choices":[{"index":0,"delta":{"content":"x"}}]}'),
    "stop": _sse(None, "[DONE]"),
    "error": _sse(None, '{"error":{"type":"server_error","message":"replay"}}'),
    "other": _sse(None, "replay"),
}
_RESPONSES = {
    "heartbeat": _sse("keepalive", '{"type":"keepalive","sequence_number":0}'),
    "preamble": _sse("response.created", '{"type":"response.created","response":{"id":"resp_replay"}}'),
    "content": _sse("response.output_text.delta", '{"type":"response.output_text.delta","delta":"x"}'),
    "stop": _sse("response.completed", '{"type":"response.completed","response":{"status":"completed"}}'),
    "error": _sse("error", '{"type":"error","code":"server_error"}'),
    "other": _sse("replay_other", "{}"),
}
_GEMINI = {
    "preamble": _sse(None, '{"candidates":[]}'),
    "content": _sse(None, '{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}'),
    "error": _sse(None, '{"error":{"code":503,"status":"UNAVAILABLE"}}'),
    "other": _sse(None, "replay"),
}
_COHERE = {  # Cohere v2 chat: no keep-alive (a heartbeat is rebuilt as a comment)
    "preamble": _sse("message-start", '{"type":"message-start","id":"replay","delta":{"message":'
                     '{"role":"assistant"}}}'),
    "content": _sse("content-delta", '{"type":"content-delta","index":0,"delta":{"message":'
                    '{"content":{"text":"x"}}}}'),
    "stop": _sse("message-end", '{"type":"message-end","delta":{"finish_reason":"COMPLETE"}}'),
    "error": _sse("message-end", '{"type":"message-end","delta":{"finish_reason":"ERROR"}}'),
}
_GENERIC = {
    "heartbeat": _sse("ping", "{}"),
    "content": _sse(None, '{"x":1}'),
    "stop": _sse(None, "[DONE]"),
    "error": _sse("error", '{"error":{"type":"server_error"}}'),
}
_SSE_FORMS: dict[str, dict[str, bytes]] = {
    "anthropic": _ANTHROPIC, "vertex": _ANTHROPIC, "openai-chat": _OPENAI_CHAT, "openrouter": _OPENAI_CHAT,
    "openai-responses": _RESPONSES, "gemini": _GEMINI, "cohere": _COHERE, "sse": _GENERIC,
}
_COMMENT = b": keepalive\n\n"


def _inner(event: bytes) -> bytes:
    return event.split(b"data: ", 1)[1].rstrip(b"\n")


_BEDROCK = {
    "heartbeat": _inner(_ANTHROPIC["heartbeat"]), "preamble": _inner(_ANTHROPIC["preamble"]),
    "content": _inner(_ANTHROPIC["content"]), "stop": _inner(_ANTHROPIC["stop"]),
}
_CONVERSE: dict[str, tuple[str, dict[str, Any]]] = {
    "preamble": ("messageStart", {"role": "assistant"}),
    "content": ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}),
    "stop": ("messageStop", {"stopReason": "end_turn"}),
}


def _pad_sse(frame: bytes, size: int) -> bytes:
    """``frame`` grown to ``size`` bytes by an ignored field line (``x: ...``) before its blank line."""
    room = size - len(frame) - 4  # "x: " + LF
    if room < 0:
        return frame
    return frame[:-1] + b"x: " + b"p" * room + b"\n\n"


def _message(provider: str, kind: str, pad: str) -> bytes:
    """An event-stream message of ``kind`` whose payload carries ``pad`` (bytes for bytes)."""
    if kind == "error":
        return bedrock_exception("internalServerException", pad)
    if provider == "bedrock-converse" and kind in _CONVERSE:
        event_type, body = _CONVERSE[kind]
        return converse_event(event_type, body, padding=pad)
    if provider != "bedrock-converse" and kind in _BEDROCK:
        return bedrock_chunk(_BEDROCK[kind], padding=pad)
    if kind in ("comment", "partial", "heartbeat"):
        # No frame-less bytes on this wire, and a message no profile knows is content (fail
        # open): raw progress is rebuilt as framing -- a ping where the wire has one, else a preamble.
        if provider == "bedrock-converse":
            event_type, body = _CONVERSE["preamble"]
            return converse_event(event_type, body, padding=pad)
        return bedrock_chunk(_BEDROCK["heartbeat" if kind == "comment" else "preamble"], padding=pad)
    return encode_message({":event-type": "replayProgress", ":content-type": "application/json",
                           ":message-type": "event"}, b"{}" + b" " * len(pad))


def frame_bytes(provider: str, kind: str, size: int = 0, *, eventstream: bool = False) -> bytes:
    """A frame the engine classifies as ``kind`` on ``provider``'s wire, about ``size`` bytes.
    A kind the wire has no frame for (a heartbeat on OpenAI Chat Completions is a comment; a
    preamble on a generic SSE server...) is the nearest one that means the same to the clocks:
    a comment for a heartbeat, a frame-less block (raw progress only) otherwise."""
    if eventstream:
        base = _message(provider, kind, "")
        return _message(provider, kind, "p" * (size - len(base))) if size > len(base) else base
    forms = _SSE_FORMS.get(provider, _GENERIC)
    if kind == "comment" or (kind == "heartbeat" and kind not in forms):
        frame = _COMMENT
    elif kind in forms:
        frame = forms[kind]
    else:  # "partial", or a kind this wire has none of: a block without a frame, raw progress only
        return b"x: " + b"p" * max(0, size - 5) + b"\n\n"
    return _pad_sse(frame, size)


# -- parsing ---------------------------------------------------------------------------------------

def _number(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def parse_recording(lines: Iterable[str], source: str | None = None) -> Recording:
    """Parse and validate the JSON Lines of one recording (either format); raise
    :class:`CaptureError` naming ``source`` and the bad line (``record N`` without a source). A
    last line cut short (no line end, not JSON: the process was killed while writing it) is left
    out, the records before it read; an empty capture is an error (it holds no attempt)."""

    def records() -> Iterator[tuple[int, Any]]:
        cut: tuple[int, ValueError] | None = None  # a line that is not JSON: the last one, cut, or an error
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if cut is not None:  # not the last line after all: the capture is corrupt
                raise CaptureError(f"{source}: line {cut[0]}: not JSON ({cut[1]})" if source
                                   else f"record {cut[0]}: not JSON ({cut[1]})")
            try:
                record = json.loads(line)
            except ValueError as exc:
                if line.endswith("\n"):  # a whole line that is not JSON
                    raise CaptureError(f"{source}: line {number}: not JSON ({exc})" if source
                                       else f"record {number}: not JSON ({exc})") from None
                cut = (number, exc)  # the last line, unterminated: written by a process killed mid-line
                continue
            yield number, record

    return build_recording(records(), source)


def recording_of(capture: Sequence[tuple[float, CaptureItem]], meta: Mapping[str, Any], *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Recording:
    """The recording the flight recorder would write of an attempt's ``capture`` (a timing one,
    as in ``capture_mode="timing"``, when ``meta["format"]`` says so), built without a file: the
    same records, the same parsing -- what a replay of it reads is what ``whatif`` reads from disk."""
    head: list[dict[str, Any]] = [{"t": 0.0, "meta": dict(meta)}]
    provider = str(meta.get("provider") or "anthropic")
    body = (timing_records(capture, provider, max_frame_bytes) if meta.get("format") == "timing"
            else capture_records(capture))
    return build_recording(enumerate((*head, *body), 1), None)


def recording_meta(fmt: str, report: Any, record: Any, capture: Sequence[tuple[float, CaptureItem]] | None, *,
                   host: str | None, model: str | None, body_size: int | None) -> dict[str, Any]:
    """The first record of an attempt's recording: what it was, without a secret or content
    (``report``/``record``: the request's :class:`~.outcome.RequestReport` and the attempt's
    :class:`~.outcome.AttemptRecord`)."""
    headers: Mapping[str, str | int] = {}
    for _, item in capture or ():
        if isinstance(item, Mapping):
            headers = item
            break
    return {
        "format": fmt,
        "provider": report.provider,
        "host": host,
        "model": model or report.model,
        "body_bytes": body_size,
        "shadow": report.shadow,
        "attempt": record.index,
        "outcome": record.outcome.value if record.outcome else None,
        "error_type": record.error_type,
        "status": record.status,
        "content_type": headers.get("content-type"),
        "content_encoding": headers.get("content-encoding"),
        "raw_bound": record.raw_bound,
        "first_byte_bound": record.first_byte_bound,
    }


def capture_records(capture: Sequence[tuple[float, CaptureItem]]) -> Iterator[dict[str, Any]]:
    """The records of a full capture, after its meta record (the flight recorder's format)."""
    for t, data in capture:
        record: dict[str, Any] = {"t": round(t, 6)}
        if data is None:
            record["eof"] = True
        elif isinstance(data, Mapping):
            record["headers"] = data["status"]
            for name in ("content-type", "content-encoding"):
                if name in data:
                    record[name.replace("-", "_")] = data[name]
        elif isinstance(data, tuple):  # a timing capture's read: no bytes to write
            record["kind"] = "partial"
            record["size"] = sum(size for _, size in data)
        elif data == "end":
            record["end"] = True
        elif isinstance(data, str):
            record["error"] = data
        else:
            try:
                record["data"] = data.decode("utf-8")
            except UnicodeDecodeError:
                record["b64"] = base64.b64encode(data).decode()
        yield record


def timing_records(capture: Sequence[tuple[float, CaptureItem]], provider: str,
                   max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Iterator[dict[str, Any]]:
    """The records of a timing-only recording, after its meta record: every body read as its
    frames' kinds and sizes (reduced here when ``capture`` still holds the bytes)."""
    if not isinstance(capture, TimingCapture):
        reduced = TimingCapture(provider, max_frame_bytes)
        for item in capture:
            reduced.append(item)
        capture = reduced
    for t, data in capture:
        if isinstance(data, tuple):
            for kind, size in data:
                yield {"t": round(t, 6), "kind": kind, "size": size}
        else:
            yield from capture_records([(t, data)])


def build_recording(records: Iterable[tuple[int, Any]], source: str | None = None) -> Recording:
    """A recording from its decoded records, each with its 1-based line number (for errors)."""
    rec = Recording(source or "<capture>", {}, [])
    last_t = 0.0
    eventstream = False
    pending: list[tuple[str, int]] = []  # the timing frames of the read at pending_t
    pending_t = 0.0
    ended = False

    def fail(number: int, message: str) -> CaptureError:
        return CaptureError(f"{source}: line {number}: {message}" if source else f"record {number}: {message}")

    def flush() -> None:
        if pending:
            data = b"".join(frame_bytes(rec.provider, kind, size, eventstream=eventstream) for kind, size in pending)
            rec.chunks.append(Chunk(pending_t, data))
            pending.clear()

    for number, record in records:
        if not isinstance(record, dict):
            raise fail(number, f"expected an object, got {type(record).__name__}")
        if "meta" in record:
            if rec.chunks or pending or rec.meta:
                raise fail(number, "\"meta\" must be the first record")
            if not isinstance(record["meta"], dict):
                raise fail(number, "\"meta\" is not an object")
            rec.meta = dict(record["meta"])
            continue
        t = _number(record, "t")
        if t is None:
            raise fail(number, "missing or non-numeric \"t\"")
        if t < 0:
            raise fail(number, f"\"t\" is negative ({t})")
        if t < last_t:
            raise fail(number, f"time goes backwards ({t} < {last_t})")
        if ended:
            raise fail(number, f"record after the {rec.ending} record")
        last_t = t
        if "kind" in record:
            kind, size = record["kind"], record.get("size", 0)
            if kind not in KINDS:
                raise fail(number, f"unknown \"kind\" {kind!r} (known: {', '.join(KINDS)})")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise fail(number, f"\"size\" must be a byte count, got {size!r}")
            if pending and t != pending_t:
                flush()
            pending_t = t
            pending.append((kind, size))
            rec.kinds.add(kind)
            if rec.first_byte is None:
                rec.first_byte = t
            if not rec.activity or rec.activity[-1] != t:
                rec.activity.append(t)
            continue
        flush()
        status = record.get("headers")
        if record.get("eof") is True:
            rec.chunks.append(Chunk(t, None))
            rec.ending, ended = "eof", True
            rec.activity.append(t)  # the body's end arrived: the wire was alive until then
        elif record.get("end") is True:
            rec.chunks.append(Chunk(t, "end"))
            rec.ending, ended = "end", True
        elif record.get("error") in _MARKERS:
            rec.chunks.append(Chunk(t, str(record["error"])))
            rec.ending, ended = "error", True
        elif isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
            headers: dict[str, str | int] = {"status": status}
            for name in ("content_type", "content_encoding"):
                if isinstance(record.get(name), str):
                    headers[name.replace("_", "-")] = record[name]
            for name in ("provider", "body_bytes", "host", "model"):  # a header record may describe the attempt
                if name in record and name not in rec.meta:
                    rec.meta[name] = record[name]
            eventstream = str(headers.get("content-type", "")).startswith(EVENTSTREAM)
            rec.chunks.append(Chunk(t, headers))
            rec.activity.append(t)
        elif isinstance(record.get("data"), str):
            rec.chunks.append(Chunk(t, record["data"].encode("utf-8")))
            rec.first_byte = t if rec.first_byte is None else rec.first_byte
            rec.activity.append(t)
        elif isinstance(record.get("b64"), str):
            try:
                rec.chunks.append(Chunk(t, base64.b64decode(record["b64"], validate=True)))
            except (binascii.Error, ValueError):
                raise fail(number, "\"b64\" is not valid base64") from None
            rec.first_byte = t if rec.first_byte is None else rec.first_byte
            rec.activity.append(t)
        else:
            raise fail(number, "needs \"data\", \"b64\", \"kind\", \"headers\", \"eof\", \"error\" or \"end\"")
    flush()
    if not rec.chunks:
        raise CaptureError(f"{source}: no records: an empty capture holds no attempt" if source
                           else "no records: an empty capture holds no attempt")
    rec.end = last_t
    rec.timing = rec.meta.get("format") == "timing" or bool(rec.kinds)
    if rec.timing:  # rebuilt frames are not encoded, whatever the response's encoding was
        rec.chunks = [Chunk(c.t, {k: v for k, v in c.data.items() if k != "content-encoding"})
                      if isinstance(c.data, Mapping) else c for c in rec.chunks]
    return rec


def _kinds_of_capture(rec: Recording) -> set[str]:
    """The kinds of a full capture's frames (which says whether the wire carried a stop or an error)."""
    kinds: set[str] = set()
    for record in timing_records([(c.t, c.data) for c in rec.chunks], rec.provider):  # the recorder's reduction
        kind = record.get("kind")
        if kind:
            kinds.add(kind)
    return kinds
