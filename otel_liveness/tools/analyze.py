"""``otel-liveness analyze``: replay a timestamped capture through the liveness policy.

Capture format (JSON Lines, one record per received chunk, written by the flight recorder)::

    {"t": 0.013, "data": "event: message_start\\ndata: {...}\\n\\n"}
    {"t": 5.002, "b64": "ZXZlbnQ6IHBpbmcKZGF0YTogeyJ0eXBlIjogInBpbmcifQoK"}
    {"t": 912.4, "eof": true}

``t`` is seconds since the attempt started, non-decreasing. ``data`` is UTF-8 text, ``b64`` raw
bytes; a last ``eof`` record says the connection closed. The replay answers "what would the
policy have done?" and "when would a decoded-event watchdog (one that ignores heartbeats) have
fired?".
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.clocks import AttemptClock, Notice, RawSilenceExpired, SemanticTimeoutExpired, WallBudgetExpired
from ..core.errors import FrameTooLarge
from ..core.outcome import FrameKind
from ..core.providers import StreamFacts, profile_for
from ..core.sse import SSEScanner

__all__ = ["CaptureError", "Chunk", "analyze", "parse_capture", "render"]

VERDICTS = (
    "completed",
    "raw_silence",
    "semantic_timeout",
    "wall_budget",
    "provider_error",
    "eof_without_end",
    "malformed",
    "incomplete",
)


class CaptureError(ValueError):
    """A capture record is invalid; the message names the record (1-based line number)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    t: float
    data: bytes | None  # None for the eof record


def parse_capture(lines: Iterable[str]) -> list[Chunk]:
    """Parse and validate JSON Lines; raise :class:`CaptureError` naming the bad record."""
    chunks: list[Chunk] = []
    last_t = 0.0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise CaptureError(f"record {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise CaptureError(f"record {number}: expected an object, got {type(record).__name__}")
        t = record.get("t")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise CaptureError(f"record {number}: missing or non-numeric \"t\"")
        if t < 0:
            raise CaptureError(f"record {number}: \"t\" is negative ({t})")
        if t < last_t:
            raise CaptureError(f"record {number}: time goes backwards ({t} < {last_t})")
        if chunks and chunks[-1].data is None:
            raise CaptureError(f"record {number}: record after the eof record")
        last_t = float(t)
        if record.get("eof") is True:
            chunks.append(Chunk(last_t, None))
        elif isinstance(record.get("data"), str):
            chunks.append(Chunk(last_t, record["data"].encode("utf-8")))
        elif isinstance(record.get("b64"), str):
            try:
                chunks.append(Chunk(last_t, base64.b64decode(record["b64"], validate=True)))
            except (binascii.Error, ValueError):
                raise CaptureError(f"record {number}: \"b64\" is not valid base64") from None
        else:
            raise CaptureError(f"record {number}: needs \"data\", \"b64\" or \"eof\": true")
    return chunks


def analyze(
    chunks: list[Chunk],
    *,
    provider: str = "anthropic",
    raw_idle: float | None = 60.0,
    notice_every: float | None = 30.0,
    semantic_timeout: float | None = None,
    wall: float | None = None,
    event_watchdog: float | None = None,
    max_frame_bytes: int = 4 * 1024 * 1024,
) -> dict[str, Any]:
    """Replay ``chunks`` and return the verdict object (see the module docstring)."""
    profile = profile_for(provider)
    facts = StreamFacts()
    scanner = SSEScanner(max_frame_bytes)
    clock = AttemptClock(
        0.0,
        raw_idle=raw_idle,
        notice_every=notice_every,
        semantic_timeout=semantic_timeout,
        wall_deadline=wall,
        wall_budget=wall,
    )
    clock.request_sent(0.0)
    frames: Counter[str] = Counter()
    notices: list[float] = []
    timeline: list[dict[str, Any]] = []
    verdict: str | None = None
    at: float | None = None
    committed = False
    last_decoded = 0.0  # for the event watchdog: last frame an SDK would have yielded
    watchdog_at: float | None = None
    got_headers = False

    def due(now: float) -> bool:
        """Apply everything due at ``now``; return True if a terminal verdict fell."""
        nonlocal verdict, at
        while True:
            item = clock.poll(now)
            if isinstance(item, Notice):
                notices.append(item.at)
                timeline.append(
                    {
                        "t": item.at,
                        "what": "notice",
                        "semantic_idle": item.semantic_idle,
                        "raw_idle": item.raw_idle,
                        "heartbeats": item.heartbeats_since_semantic,
                    }
                )
                continue
            if isinstance(item, (RawSilenceExpired, SemanticTimeoutExpired, WallBudgetExpired)):
                verdict = {
                    RawSilenceExpired: "raw_silence",
                    SemanticTimeoutExpired: "semantic_timeout",
                    WallBudgetExpired: "wall_budget",
                }[type(item)]
                at = item.at
                timeline.append({"t": item.at, "what": verdict, "phase": item.phase.value})
                return True
            return False

    def watchdog(now: float) -> None:
        nonlocal watchdog_at
        if event_watchdog is not None and watchdog_at is None and now - last_decoded > event_watchdog:
            watchdog_at = last_decoded + event_watchdog

    def _consume(frames_: list[Any], t: float) -> None:
        nonlocal verdict, at, committed, last_decoded
        for frame in frames_:
            kind = profile.classify(frame, facts)
            frames[kind.value] += 1
            clock.frame(t, kind)
            if kind is not FrameKind.HEARTBEAT:
                last_decoded = t
            timeline.append({"t": t, "what": kind.value, "event": frame.event})
            if kind is FrameKind.SEMANTIC:
                committed = True
                clock.released()
            elif kind is FrameKind.END and verdict is None:
                verdict, at = "completed", t
            elif kind is FrameKind.ERROR and verdict is None:
                verdict, at = "provider_error", t

    for chunk in chunks:
        if due(chunk.t):
            break
        watchdog(chunk.t)
        if chunk.data is None:
            tail = scanner.close()
            _consume(tail, chunk.t)
            if verdict is None:
                verdict = "completed" if profile.eof_is_end and committed else "eof_without_end"
                at = chunk.t
                timeline.append({"t": chunk.t, "what": "eof"})
            break
        if not got_headers:
            clock.headers(chunk.t)
            got_headers = True
        clock.received(chunk.t, len(chunk.data))
        try:
            new = scanner.feed(chunk.data)
        except FrameTooLarge as exc:
            verdict, at = "malformed", chunk.t
            timeline.append({"t": chunk.t, "what": "malformed", "detail": str(exc)})
            break

        _consume(new, chunk.t)
        if verdict is not None:
            break

    end_t = at if at is not None else (chunks[-1].t if chunks else 0.0)
    watchdog(end_t)
    if verdict is None:
        verdict = "incomplete"
    semantic_gap = clock.max_semantic_gap
    if verdict != "completed" and chunks:
        semantic_gap = max(semantic_gap, end_t - clock.last_semantic)
    return {
        "verdict": verdict,
        "at": at,
        "committed": committed,
        "provider": provider,
        "frames": dict(sorted(frames.items())),
        "notices": notices,
        "max_semantic_gap": round(semantic_gap, 6),
        "max_raw_gap": round(max(clock.max_raw_gap, end_t - clock.last_raw), 6),
        "event_watchdog": watchdog_at,
        "bytes": clock.bytes,
        "facts": {k: v for k, v in facts.to_dict().items() if k != "usage"} | {"usage": facts.usage},
        "timeline": timeline,
    }


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
            detail = (
                f"NOTICE semantic idle {item['semantic_idle']:.1f}s, raw idle {item['raw_idle']:.1f}s, "
                f"{item['heartbeats']} heartbeats since content"
            )
        elif what in ("raw_silence", "semantic_timeout", "wall_budget"):
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
    if event_watchdog is not None:
        fired = result["event_watchdog"]
        lines.append(
            f"a {event_watchdog:g}s decoded-event watchdog "
            + (f"would have killed this stream at {fired:.3f}s" if fired is not None else "would not have fired")
        )
    return "\n".join(lines)
