"""The replay: the engine that judges live streams, driven by a recording instead of a socket.

A replay is a driver of :class:`~otel_liveness.core.request.engine.Engine` -- the same code that judges
live streams -- that reads a recording (:mod:`.recording`) with no pause between reads: between
two records it lets the engine wake where a live read would (notices, deadlines), so a recording
and the stream it was taken from cannot disagree. ``otel-liveness analyze`` and ``whatif`` read
their answers from it, and so does the policy canary (:mod:`.canary`), live, at the end of every
attempt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..attempt.clocks import wake_at
from ..capture.recording import Chunk
from ..commands import COMPLETE, READ, Command, Fail, Release, Reraise, Respond, Sleep
from ..events import Event, Verdict
from ..outcome import AttemptOutcome, AttemptRecord
from ..policy import Policy
from ..request.engine import Engine, IOFailure
from ..request.facts import RequestFacts

__all__ = ["VERDICTS", "Judged", "judge", "replay", "verdict_of"]

#: The verdict names of a replayed attempt.
VERDICTS = (
    "completed",
    "redirected",
    "first_byte_timeout",
    "raw_silence",
    "semantic_timeout",
    "wall_budget",
    "provider_error",
    "rejected",
    "eof_without_end",
    "read_error",
    "malformed",
    "incomplete",
)

_SSE_200: dict[str, str | int] = {"status": 200, "content-type": "text/event-stream"}


def verdict_of(record: AttemptRecord, cause: str | None) -> str:
    """The verdict name of an attempt that ended as ``record`` says (``cause``: its failure's)."""
    outcome = record.outcome
    if outcome is AttemptOutcome.COMPLETED:
        return "completed"
    if outcome is AttemptOutcome.REDIRECTED:
        return "redirected"
    if outcome is AttemptOutcome.MALFORMED:
        return "malformed"
    if outcome is AttemptOutcome.WALL_BUDGET:
        return "wall_budget"
    if outcome is AttemptOutcome.SEMANTIC_TIMEOUT:
        return "semantic_timeout"
    if outcome is AttemptOutcome.RAW_SILENCE:
        return "first_byte_timeout" if record.error_type == "first_byte_timeout" else "raw_silence"
    if outcome is AttemptOutcome.CONNECTION_ERROR:
        return "read_error"
    if outcome is AttemptOutcome.REJECTED and record.error_type and record.error_type.isdigit():
        return "rejected"
    reason = (cause or record.error_type or "").split(":")[0]
    if reason in ("raw_silence", "semantic_timeout", "read_error", "first_byte_timeout"):
        return reason
    if reason == "eof":
        return "eof_without_end"
    return "provider_error"


def replay(chunks: list[Chunk], provider: str, policy: Policy, body_size: int | None,
           hook: Callable[[Event], None], *, silent_after: bool = False) -> tuple[Engine, float, str]:
    """Replay ``chunks`` through a new engine under ``policy`` (enforced, recorder off, no
    candidates): the engine, when the attempt ended and its verdict name (``incomplete`` when the
    capture ended first). ``silent_after``: a recording that ends with its attempt (``end``: no
    read result) is taken to stay silent after, until the engine's next verdict of silence (a
    clock that would have ended it later than it ended)."""
    policy = policy.replace(provider=provider, shadow=False, capture_dir=None, candidates=None)
    engine = Engine(policy, RequestFacts(streaming=True, body_size=body_size), 0.0, provider=provider,
                    hooks=[hook], jitter=lambda: 0.0)
    ended_at = _replay(engine, chunks, silent_after)
    record = engine.report.attempts[0]
    if record.outcome is AttemptOutcome.CANCELLED:
        return engine, ended_at, "incomplete"
    return engine, ended_at, verdict_of(record, engine.report.cause)


@dataclass(frozen=True, slots=True)
class Judged:
    """What the engine made of one recorded attempt under one policy: the verdict name, when an
    enforced verdict fell (``None``: no clock verdict), whether content had been released."""

    verdict: str
    at: float | None
    committed: bool


def judge(chunks: list[Chunk], provider: str, policy: Policy, body_size: int | None = None, *,
          silent_after: bool = False) -> Judged:
    """The verdict of the replay of ``chunks`` under ``policy`` (what ``whatif`` counts;
    ``silent_after``: see :func:`replay`)."""
    verdicts: list[Verdict] = []

    def keep(event: Event) -> None:
        if type(event) is Verdict and event.enforced:
            verdicts.append(event)

    engine, _, verdict = replay(chunks, provider, policy, body_size, keep, silent_after=silent_after)
    at = verdicts[-1].at if verdicts else None
    return Judged(verdict, at, engine.report.attempts[0].committed)


def _replay(engine: Engine, chunks: list[Chunk], silent_after: bool = False) -> float:
    """Drive ``engine`` through ``chunks`` as a live driver would have, reading without pauses;
    return when the attempt ended (the capture's last time when it did not: the attempt is then
    closed, as incomplete)."""
    command: Command | bytes = engine.start(0.0)
    start = read_start = 0.0  # when the read in progress began: the previous record's time
    headers_seen = False
    for chunk in chunks:
        if isinstance(chunk.data, bytes) and not headers_seen:
            command = _deliver(engine, start, Chunk(chunk.t, _SSE_200))  # a capture without its headers record
            headers_seen = True
            if _over(engine, command):
                return chunk.t
        headers_seen = headers_seen or isinstance(chunk.data, Mapping)
        command = _deliver(engine, start, chunk)
        if _over(engine, command):
            return engine.since(_end_time(engine, chunk.t))
        read_start, start = start, chunk.t
    last = chunks[-1].t if chunks else 0.0
    if silent_after and chunks and chunks[-1].data == "end":
        ended = _silence(engine, read_start)  # (the read the attempt ended in began before its end)
        if ended is not None:
            return ended
    engine.closed(last)
    return last


#: How many wake-ups a silence past a recording's end is followed for (notices fall due on the way).
_SILENCE_WAKES = 10_000


def _silence(engine: Engine, start: float) -> float | None:
    """Follow a read begun at ``start`` that never returns: wake where the engine says until a
    verdict of silence ends the attempt (its time), or nothing more falls due (``None``)."""
    for _ in range(_SILENCE_WAKES):
        wake = wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, start)
        if not math.isfinite(wake):
            return None
        if engine.woke(wake, start):
            _over(engine, engine.timed_out(wake, TimeoutError("replayed read timeout")))
            return wake
    return None


def _deliver(engine: Engine, start: float, chunk: Chunk) -> Command | bytes:
    """Wait as a read begun at ``start`` would have -- waking at the engine's hints, where notices
    fall due and deadlines end reads -- until ``chunk``'s time, then deliver it."""
    t = chunk.t
    while True:
        wake = wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, start)
        if wake > t:
            break  # (what falls due at the record's own time comes first, as the clocks order it)
        if engine.woke(wake, start):
            return engine.timed_out(wake, TimeoutError("replayed read timeout"))
        if wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, start) <= wake:
            break  # nothing more falls due before the record
    data = chunk.data
    if isinstance(data, Mapping):
        headers = {k: str(v) for k, v in data.items() if k != "status"}
        return engine.headers(t, int(data["status"]), headers)
    if data is None:
        return engine.eof(t)
    if data == "end":
        # The attempt ended here with no read result: the read was ended at a deadline (judged, as
        # on the wire, with the engine's tolerance for a wake-up a hair early) or the caller left.
        if engine.woke(t, start):
            return engine.timed_out(t, TimeoutError("replayed read timeout"))
        return READ
    if isinstance(data, str):
        kind = IOFailure.CONNECT if data == "connect_error" else IOFailure.READ
        return engine.io_error(t, kind, ConnectionError(data))
    return engine.received(t, data)


def _over(engine: Engine, command: Command | bytes) -> bool:
    """Whether the attempt is over after ``command`` (a response's body goes on as it says)."""
    if isinstance(command, Respond):
        command = command.then
    if isinstance(command, Release):
        command = command.then
    if isinstance(command, (Fail, Reraise, Sleep)) or command is COMPLETE:
        return True
    return engine.report.attempts[0].outcome is not None


def _end_time(engine: Engine, fallback: float) -> float:
    record = engine.report.attempts[0]
    if record.duration is None:
        return fallback
    return record.started + record.duration


