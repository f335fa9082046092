"""The steady lane: the per-read hot path of a live stream, as a small state object.

After content, nearly every read of a healthy stream holds only content frames -- one, or many
when the reads carry many events -- and makes nothing due on any clock. For such a read the
attempt needs no decision: the bytes go to the caller as they are, the clocks move forward, the
released prefix keeps a reference. The lane does exactly that much, counting in its own fields;
the engine applies the counts to the attempt (:meth:`.attempt.Attempt.absorb_lane`, called by
the engine's ``_input`` wrapper first thing in every input method) before anything else looks at
it. Every other read takes the general path
(:meth:`~otel_liveness.core.engine.Engine.received` and the other inputs).

With a bulk scanner attached (:meth:`PyLane.attach`, :mod:`.bulk`), a read is admitted when the
scanner admits it (:meth:`~.bulk.PyScanner.admit`: every frame it completes is a semantic or a
heartbeat frame by its head, at least one semantic; a frame in progress may stay pending);
without one, only a read that is exactly one whole semantic frame is. The heartbeats of an
admitted read (a ping inside a run of deltas) are recorded as ``(time, count)``
(:meth:`PyLane.take_beats`): the attempt counts and announces them as the general path would. A
read of heartbeats alone is never admitted: the semantic clock does not move on it.

:class:`Lane` here is the reference implementation. ``_lane.c`` is the same class in C (built when
a compiler is available; ``NATIVE`` says which one is in use; ``OTEL_LIVENESS_PURE=1`` selects the
reference), kept equal to this one by ``tests/test_lane.py``. Pure: the caller passes the time of
each read.
"""

from __future__ import annotations

from typing import Any

from .bulk import PURE
from .sse import whole_frame

__all__ = ["NATIVE", "Lane", "PyLane"]

_INF = float("inf")


class PyLane:
    """``step(chunk, now)`` admits ``chunk`` (returns True, counts it, keeps it in ``keep`` while
    ``room`` lasts) when ``now < horizon``, ``chunk`` is exactly one LF-framed block within
    ``max_frame`` bytes (:func:`~otel_liveness.core.sse.whole_frame`) and its first ``prefix``
    bytes are one of ``keys`` (the profile's semantic prefixes) -- or, with a scanner attached,
    when the scanner admits it; it then moves the horizon to ``min(now + step, wall)``. Otherwise
    it returns False and changes nothing. A call made while ``step`` is in the scanner's
    ``admit`` (a call back into the lane, or another thread) raises ``RuntimeError``."""

    __slots__ = (
        "_beats",
        "_busy",
        "frames",
        "heartbeats",
        "horizon",
        "keep",
        "keys",
        "last",
        "max_frame",
        "max_gap",
        "nbytes",
        "prefix",
        "reads",
        "room",
        "scanner",
        "since",
        "step_",
        "wall",
    )

    def __init__(self, keys: tuple[bytes, ...], prefix: int, max_frame: int, keep: list[bytes]) -> None:
        if getattr(self, "_busy", False):
            _refuse()
        self.keys = frozenset(keys)
        self.prefix = prefix
        self.max_frame = max_frame
        self.keep = keep
        self.horizon = -_INF
        self.step_ = 0.0
        self.wall = _INF
        self.last = 0.0
        self.room = 0
        self.reads = 0
        self.nbytes = 0
        self.max_gap = 0.0
        self.frames = 0
        self.heartbeats = 0
        self.since = 0
        self._beats: list[tuple[float, int]] = []
        self.scanner: Any = None
        self._busy = False  # step() is in the scanner's admit(): the lane is not to be used meanwhile

    def attach(self, scanner: Any) -> None:
        """Admit reads through ``scanner`` (a :mod:`.bulk` scanner; ``None`` detaches)."""
        if self._busy:
            _refuse()
        self.scanner = scanner

    def open(self, horizon: float, step: float, wall: float, last: float, room: int) -> None:
        """Re-arm after the general path: nothing is due before ``horizon``; the last read was
        at ``last``; ``room`` prefix bytes may still be kept. ``horizon=-inf`` closes the lane."""
        if self._busy:
            _refuse()
        self.horizon = horizon
        self.step_ = step
        self.wall = wall
        self.last = last
        self.room = room

    def close(self) -> None:
        if self._busy:
            _refuse()
        self.horizon = -_INF

    def step(self, chunk: bytes, now: float) -> bool:
        if self._busy:
            _refuse()
        if not (now < self.horizon) or type(chunk) is not bytes:
            return False
        scanner = self.scanner
        if scanner is not None:
            self._busy = True
            try:
                frames = scanner.admit(chunk)
            finally:
                self._busy = False
            if frames < 0:
                return False
            beats, trailing = (getattr(scanner, "beats", 0), getattr(scanner, "trailing", 0)) if frames > 1 else (0, 0)
        elif not whole_frame(chunk, self.max_frame) or chunk[: self.prefix] not in self.keys:
            return False
        else:
            frames = 1
            beats = trailing = 0
        if beats > 0:
            self._beats.append((now, beats))
        self.heartbeats += beats
        self.since = trailing
        n = len(chunk)
        self.frames += frames
        self.reads += 1
        self.nbytes += n
        gap = now - self.last
        if gap > self.max_gap:
            self.max_gap = gap
        self.last = now
        horizon = now + self.step_
        self.horizon = horizon if horizon < self.wall else self.wall
        room = self.room
        if room >= n:
            self.keep.append(chunk)
            self.room = room - n
        elif room > 0:
            self.keep.append(chunk[:room])
            self.room = 0
        return True

    def take(self) -> tuple[int, int, float, float, int, int]:
        """``(reads, nbytes, last, max_gap, room, frames)`` since the last take; resets the counts."""
        if self._busy:
            _refuse()
        out = (self.reads, self.nbytes, self.last, self.max_gap, self.room, self.frames)
        self.reads = 0
        self.frames = 0
        self.nbytes = 0
        self.max_gap = 0.0
        return out

    def take_beats(self) -> list[tuple[float, int]]:
        """``(time, count)`` of each admitted read that held heartbeats (``count`` of them) since
        the last call; resets :attr:`heartbeats`. (:attr:`since`: the heartbeats after the last
        semantic frame of the last admitted read.)"""
        if self._busy:
            _refuse()
        out, self._beats = self._beats, []
        self.heartbeats = 0
        return out


def _refuse() -> None:
    raise RuntimeError("Lane is busy: step() is in progress (called back from the scanner's admit())")


Lane: type[PyLane]
NATIVE = False
if PURE:
    Lane = PyLane
else:
    try:
        from ._lane import Lane as _NativeLane

        Lane = _NativeLane  # type: ignore[assignment]  # the same interface (_lane.pyi), in C
        NATIVE = True
    except ImportError:  # no compiler at install time: the reference implementation
        Lane = PyLane
