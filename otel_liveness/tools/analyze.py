"""``otel-liveness analyze``: replay a timestamped capture through the engine.

Capture format (JSON Lines, written by the flight recorder, ``Policy.capture_dir``)::

    {"t": 0.011, "headers": 200}
    {"t": 0.013, "data": "event: message_start\\ndata: {...}\\n\\n"}
    {"t": 5.002, "b64": "ZXZlbnQ6IHBpbmcKZGF0YTogeyJ0eXBlIjogInBpbmcifQoK"}
    {"t": 912.4, "eof": true}

``t`` is seconds since the attempt's request was sent, non-decreasing. ``data`` is UTF-8 text,
``b64`` raw bytes; ``headers`` the response status, with ``content_type`` and
``content_encoding`` when the response had them (optional: without it, a ``text/event-stream``
200 is taken to arrive with the first body record); the last record may be ``eof`` (the body ended),
``error`` (``read_error``/``connect_error``: the connection failed) or ``end`` (the attempt ended
without either: nothing was read after it, e.g. a verdict of silence).

The replay is a driver of :class:`~otel_liveness.core.request.engine.Engine` -- the same code that judges
live streams -- that reads the capture instead of a socket, with no pause between reads: between
two records it lets the engine wake where a live read would (notices, deadlines), so a capture
and the stream it was taken from cannot disagree. It answers "what would the policy have done?"
and "when would a decoded-event watchdog (one that ignores heartbeats) have fired?". The frames
of the timeline are the engine's too: the body decoded as the response's ``content_encoding``
says, framed by the framer the engine chose for the response (SSE, or the AWS event stream).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.capture.recording import CaptureError, Chunk, parse_recording
from ..core.errors import MalformedStream
from ..core.events import Event, SemanticNotice, Verdict
from ..core.outcome import FrameKind
from ..core.policy import Policy
from ..core.tuning.replay import _SSE_200, VERDICTS, Judged, judge, replay, verdict_of
from ..core.wire.encoding import UnsupportedEncoding, decoder_for
from ..core.wire.eventstream import EventStreamScanner, Message
from ..core.wire.framing import EventStreamFramer, Framer, framer_for
from ..core.wire.providers import ProviderProfile
from ..core.wire.sse import DEFAULT_MAX_FRAME_BYTES, SSEScanner

__all__ = ["VERDICTS", "CaptureError", "Chunk", "Judged", "analyze", "judge", "parse_capture", "render", "verdict_of"]

def parse_capture(lines: Iterable[str]) -> list[Chunk]:
    """Parse and validate JSON Lines (a full capture or a timing-only recording, see
    :mod:`.recordings`); raise :class:`CaptureError` naming the bad record."""
    return parse_recording(lines).chunks


class _Timeline:
    """A hook that keeps what a timeline shows: notices and verdicts."""

    def __init__(self) -> None:
        self.events: list[SemanticNotice | Verdict] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, (SemanticNotice, Verdict)):
            self.events.append(event)


def analyze(
    chunks: list[Chunk],
    *,
    provider: str = "anthropic",
    policy: Policy | None = None,
    body_size: int | None = None,
    raw_idle: float | None = None,
    first_byte: float | str | None = "auto",
    notice_every: float | None = 30.0,
    semantic_timeout: float | None = None,
    wall: float | None = None,
    event_watchdog: float | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> dict[str, Any]:
    """Replay ``chunks`` and return the verdict object. ``policy`` (as the transport had it) wins
    over the clock options; ``raw_idle`` ``None`` keeps the provider's default bound."""
    if policy is None:
        changes: dict[str, Any] = {
            "first_byte_timeout": first_byte, "semantic_notice_interval": notice_every,
            "semantic_timeout": semantic_timeout, "wall_timeout": wall, "max_frame_bytes": max_frame_bytes,
        }
        if raw_idle is not None:
            changes["raw_idle_timeout"] = changes["raw_idle_timeout_no_keepalive"] = raw_idle
        policy = Policy(**changes)
    timeline = _Timeline()
    engine, ended_at, verdict = replay(chunks, provider, policy, body_size, timeline)
    record = engine.report.attempts[0]
    incomplete = verdict == "incomplete"
    counts, items, decoded_times, end_frame_at = _frames(chunks, engine.profile, policy.max_frame_bytes, ended_at)
    at: float | None = None if incomplete else ended_at
    if verdict == "completed" and end_frame_at is not None:
        at = end_frame_at
    for event in timeline.events:
        if isinstance(event, SemanticNotice):
            items.append({"t": event.at, "what": "notice", "kind": event.kind.value, "semantic_idle": event.semantic_idle,
                          "raw_idle": event.raw_idle, "heartbeats": event.heartbeats_since_semantic})
        elif isinstance(event, Verdict) and event.enforced:
            at = event.at
            items.append({"t": event.at, "what": verdict, "phase": event.phase.value})
    if verdict in ("eof_without_end", "malformed", "read_error") and at is not None:
        items.append({"t": at, "what": verdict})
    # What falls due at a time comes before the frames read at that time (as the engine orders them).
    items.sort(key=lambda item: (item["t"], "event" in item or item["what"] == "malformed"))
    end_t = at if at is not None else ended_at
    return {
        "verdict": verdict,
        "at": at,
        "committed": record.committed,
        "provider": provider,
        "frames": dict(sorted(counts.items())),
        "notices": [e.at for e in timeline.events if isinstance(e, SemanticNotice)],
        "first_byte_bound": record.first_byte_bound,
        "raw_bound": record.raw_bound,
        "max_semantic_gap": round(record.max_semantic_gap, 6),
        "max_raw_gap": round(record.max_raw_gap, 6),
        "event_watchdog": _watchdog(decoded_times, end_t, event_watchdog),
        "bytes": record.bytes_received,
        "facts": {"response_id": record.response_id, "model": engine.report.model, "stop_reason": record.stop_detail,
                  "error_type": record.error_type if verdict in ("provider_error", "rejected") else None,
                  "usage": record.usage},
        "timeline": items,
    }


def _frames(chunks: list[Chunk], profile: ProviderProfile, max_frame_bytes: int,
            until: float) -> tuple[Counter[str], list[dict[str, Any]], list[float], float | None]:
    """The frames of the capture by kind, up to ``until`` (for the timeline and the watchdog):
    counts, timeline items, times of decoded (non-heartbeat) frames, the first end frame's time.

    The kinds are the engine's own: the body, decoded as its ``content-encoding`` says, is fed to
    the framer the engine judged it with (:func:`~otel_liveness.core.wire.framing.framer_for`: SSE, or
    the AWS event stream of a Bedrock response), whose end of body counts a last frame as the
    engine's does. Each frame is labelled with its event name (an event-stream message with its
    ``:event-type``, a Bedrock ``chunk`` with the Anthropic event inside it)."""
    content_type, encoding = _content(chunks)
    framer = framer_for(profile, max_frame_bytes, content_type)
    labels = _Labels(profile, framer, max_frame_bytes)
    counts: Counter[str] = Counter()
    items: list[dict[str, Any]] = []
    decoded_times: list[float] = [0.0]
    end_at: float | None = None
    try:
        decoder = decoder_for(encoding)
    except UnsupportedEncoding:
        return counts, items, decoded_times, end_at  # the engine does not scan a body it cannot decode
    for chunk in chunks:
        if chunk.t > until:
            break
        data = chunk.data
        if data is not None and not isinstance(data, bytes):
            continue  # the headers, a connection failure, the end of the attempt
        try:
            if data is None:  # the end of the body: what the decoder and the framer still held
                rest = decoder.flush() if decoder is not None else b""
                kinds = (framer.feed(rest) if rest else []) + framer.close()
                names: list[str | None] = [None] * len(kinds)
            else:
                if decoder is not None:
                    data = decoder.decode(data)
                kinds = framer.feed(data)
                names = labels.feed(data, len(kinds))
        except (MalformedStream, ValueError) as exc:  # a frame too large, a corrupt message, undecodable bytes
            items.append({"t": chunk.t, "what": "malformed", "detail": str(exc)})
            break
        for kind, name in zip(kinds, names, strict=True):
            counts[kind.value] += 1
            items.append({"t": chunk.t, "what": kind.value, "event": name})
            if kind is not FrameKind.HEARTBEAT:
                decoded_times.append(chunk.t)
            if kind is FrameKind.END and end_at is None:
                end_at = chunk.t
    return counts, items, decoded_times, end_at


def _content(chunks: list[Chunk]) -> tuple[str, str]:
    """The response's content type and content encoding, from the capture's headers record (a
    capture without one: an SSE stream, as :func:`_replay` takes it)."""
    for chunk in chunks:
        if isinstance(chunk.data, Mapping):
            return str(chunk.data.get("content-type", "")).lower(), str(chunk.data.get("content-encoding", ""))
        if isinstance(chunk.data, bytes):
            break
    return str(_SSE_200["content-type"]), ""


class _Labels:
    """The event names of the frames a read completed, read by a scanner of the same wire format
    beside the framer (the framer answers kinds only). A label is ``None`` where the two do not
    pair up frame for frame; labelling never changes a count or a verdict."""

    def __init__(self, profile: ProviderProfile, framer: Framer, max_frame_bytes: int) -> None:
        self._profile = profile
        self._messages = EventStreamScanner(max_frame_bytes) if isinstance(framer, EventStreamFramer) else None
        self._frames = SSEScanner(max_frame_bytes) if self._messages is None else None
        self._broken = False

    def feed(self, data: bytes, count: int) -> list[str | None]:
        names: list[str | None] = []
        if not self._broken:
            try:
                if self._messages is not None:
                    names = [self._message_name(message) for message in self._messages.feed(data)]
                elif self._frames is not None:
                    names = [frame.event for frame in self._frames.feed(data)]
            except MalformedStream:
                self._broken = True  # the framer says what is wrong with the stream
        return names if len(names) == count else [None] * count

    def _message_name(self, message: Message) -> str | None:
        inner = self._profile.inner_events(message)
        if inner is not None:
            return inner[0]
        return message.event_type or message.exception_type


def _watchdog(decoded_times: list[float], end_t: float, watchdog: float | None) -> float | None:
    """When a watchdog on decoded (non-heartbeat) events would have fired, if it would."""
    if watchdog is None:
        return None
    times = [*decoded_times, end_t]
    for previous, current in itertools.pairwise(times):
        if current - previous > watchdog:
            return previous + watchdog
    return None


def render(result: dict[str, Any], *, event_watchdog: float | None = None) -> str:
    """A readable timeline; runs of heartbeats are folded into one line."""
    lines: list[str] = []
    run: list[float] = []

    def flush() -> None:
        if run:
            span = f"{run[0]:10.3f}s" + (f" .. {run[-1]:.3f}s" if len(run) > 1 else "")
            lines.append(f"{span}  heartbeat x{len(run)}")
            run.clear()

    for item in result["timeline"]:
        if item["what"] == "heartbeat":
            run.append(item["t"])
            continue
        flush()
        what = item["what"]
        if what == "notice":
            label = "PREFILL WAIT" if item.get("kind") == "prefill" else "NOTICE"
            detail = (
                f"{label} semantic idle {item['semantic_idle']:.1f}s, raw idle {item['raw_idle']:.1f}s, "
                f"{item['heartbeats']} heartbeats since content"
            )
        elif what in ("raw_silence", "first_byte_timeout", "semantic_timeout", "wall_budget"):
            detail = f"{what.upper()} (phase {item['phase']})"
        else:
            detail = what + (f" ({item['event']})" if item.get("event") not in (None, ":") else "")
            if item.get("detail"):
                detail += f": {item['detail']}"
        lines.append(f"{item['t']:10.3f}s  {detail}")
    flush()
    at = result["at"]
    lines.append("")
    lines.append(
        f"verdict: {result['verdict']}" + (f" at {at:.3f}s" if at is not None else "")
        + (" (content had been released)" if result["committed"] else " (no content released)")
    )
    lines.append(
        "frames: " + ", ".join(f"{k}={v}" for k, v in result["frames"].items())
        + f"; max semantic gap {result['max_semantic_gap']:.3f}s; max raw gap {result['max_raw_gap']:.3f}s"
    )
    sources = result.get("bounds_from")
    if sources:
        def bound(value: float | None) -> str:
            return "off" if value is None else f"{value:g}s"

        lines.append(f"bounds: raw {bound(result['raw_bound'])} ({sources['raw']}), "
                     f"first byte {bound(result['first_byte_bound'])} ({sources['first_byte']})")
    if event_watchdog is not None:
        fired = result["event_watchdog"]
        lines.append(
            f"a {event_watchdog:g}s decoded-event watchdog "
            + (f"would have killed this stream at {fired:.3f}s" if fired is not None else "would not have fired")
        )
    return "\n".join(lines)
