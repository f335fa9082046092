"""The steady lane: the per-read hot path of a live stream, as a small state object.

After content, nearly every read of a healthy stream holds only content frames -- one, or many
when the reads carry many events -- and makes nothing due on any clock. For such a read the
attempt needs no decision: the bytes go to the caller as they are, the clocks move forward, the
released prefix keeps a reference. The lane does exactly that much, counting in its own fields;
the engine applies the counts to the attempt (:meth:`.attempt.Attempt.absorb_lane`, called by
the engine's ``_settle``, first thing in every input method) before anything else looks at it.
Every other read takes the general path (:meth:`~otel_liveness.core.request.engine.Engine.received`
and the other inputs).

The lane reads through the attempt's bulk scanner (:meth:`PyLane.attach`, :mod:`.bulk`): a read
is admitted when the scanner admits it (:meth:`~.bulk.PyScanner.admit`: every frame it completes
is a semantic or a heartbeat frame by its head -- it may complete none, a network read that ended
inside a frame; a frame in progress may stay pending). The framing is the scanner's alone: without
one the lane admits nothing. The heartbeats of an admitted read (a ping inside a run of deltas,
or a read of pings alone) are recorded as ``(time, count)`` (:meth:`PyLane.take_beats`): the attempt counts and
announces them as the general path would. A read without content -- heartbeats alone, or part of a
frame -- moves the raw clock only: the semantic one -- the time of the last content, and with it
the horizon, since every deadline the horizon stands for is semantic (wire silence is judged per
read) -- stays where the last content left it.

The interface is one declared thing, :class:`LaneLike`; two classes provide exactly it:
:class:`PyLane` here, the reference implementation, and ``_lane.c``'s ``Lane``, the same class in C
(built when a compiler is available; ``NATIVE`` says which one :data:`Lane` is; ``OTEL_LIVENESS_PURE=1``
selects the reference), kept equal to this one by ``tests/test_lane.py`` (the same members and
signatures, and the same answers and observables after every call of a scripted run). Pure: the
caller passes the time of each read.
"""

from __future__ import annotations

from typing import Any, Protocol

from .bulk import PURE

__all__ = ["NATIVE", "Lane", "LaneLike", "PyLane"]

_INF = float("inf")


class LaneLike(Protocol):
    """The steady lane's interface: what :class:`PyLane` and the C ``Lane`` both provide, and all
    they provide (``tests/test_lane.py`` checks their public members and signatures against this
    class).

    The counts of admitted reads are kept here, in the lane, and handed over by :meth:`take` and
    :meth:`take_beats` alone -- to :meth:`.attempt.Attempt.absorb_lane`, whichever road stepped the
    lane (a driver's ``step``)."""

    def __init__(self, keep: list[bytes]) -> None:
        """Keep the admitted bytes in ``keep`` while the room lasts. Closed until opened, and
        admits nothing until a scanner is attached."""

    @property
    def reads(self) -> int:
        """Admitted reads since the last :meth:`take`."""

    @property
    def frames(self) -> int:
        """Frames of those reads."""

    @property
    def heartbeats(self) -> int:
        """Heartbeat frames of the reads :meth:`take_beats` holds."""

    @property
    def since(self) -> int:
        """Heartbeat frames after the last semantic frame (counted on from :meth:`open`'s ``since``
        while reads of heartbeats alone are admitted)."""

    @property
    def horizon(self) -> float:
        """Reads before this time need no decision (``-inf``: the lane is closed)."""

    @property
    def room(self) -> int:
        """Prefix bytes that may still be kept."""

    @property
    def last(self) -> float:
        """The time of the last read."""

    @property
    def semantic(self) -> float:
        """The time of the last read that held a semantic frame."""

    def attach(self, scanner: Any, /) -> None:
        """Admit reads through ``scanner`` (a :mod:`.bulk` scanner; ``None`` detaches)."""

    def open(self, horizon: float, step: float, wall: float, last: float, room: int, since: int = 0, /) -> None:
        """Re-arm after the general path (``horizon=-inf`` closes the lane); the last read, at
        ``last``, held content, and ``since`` heartbeats after it."""

    def close(self) -> None:
        """Close the lane: it admits nothing until opened again."""

    def step(self, chunk: bytes, now: float, /) -> bool:
        """Admit ``chunk`` read at ``now`` (counted, kept) or not (nothing changed)."""

    def take(self) -> tuple[int, int, float, float, int, int, float, float]:
        """``(reads, nbytes, last, max_gap, room, frames, semantic, max_semantic_gap)`` since the
        last take (``max_gap`` between reads, ``max_semantic_gap`` between reads that held
        content); resets the counts."""

    def take_beats(self) -> list[tuple[float, int]]:
        """``(time, count)`` of each admitted read that held heartbeats since the last call;
        resets :attr:`heartbeats`."""


class PyLane:
    """``step(chunk, now)`` admits ``chunk`` (returns True, counts it, keeps it in ``keep`` while
    ``room`` lasts) when ``now < horizon`` and the attached scanner admits it; a read that held a
    semantic frame then moves the horizon to ``min(now + step, wall)`` (a read of heartbeats
    alone leaves it). Otherwise it returns False and changes nothing. A call made while ``step``
    is in the scanner's ``admit`` (a call back into the lane, or another thread) raises
    ``RuntimeError``."""

    __slots__ = (
        "_beats",
        "_busy",
        "_keep",
        "_max_gap",
        "_max_semantic_gap",
        "_nbytes",
        "_scanner",
        "_step",
        "_wall",
        "frames",
        "heartbeats",
        "horizon",
        "last",
        "reads",
        "room",
        "semantic",
        "since",
    )

    def __init__(self, keep: list[bytes]) -> None:
        if getattr(self, "_busy", False):
            _refuse()
        self._keep = keep
        self.horizon = -_INF
        self._step = 0.0
        self._wall = _INF
        self.last = 0.0
        self.semantic = 0.0
        self.room = 0
        self.reads = 0
        self._nbytes = 0
        self._max_gap = 0.0
        self._max_semantic_gap = 0.0
        self.frames = 0
        self.heartbeats = 0
        self.since = 0
        self._beats: list[tuple[float, int]] = []
        self._scanner: Any = None
        self._busy = False  # step() is in the scanner's admit(): the lane is not to be used meanwhile

    def attach(self, scanner: Any, /) -> None:
        """Admit reads through ``scanner`` (a :mod:`.bulk` scanner; ``None`` detaches)."""
        if self._busy:
            _refuse()
        self._scanner = scanner

    def open(self, horizon: float, step: float, wall: float, last: float, room: int, since: int = 0, /) -> None:
        """Re-arm after the general path: nothing is due before ``horizon``; the last read was
        at ``last`` and held content, ``since`` heartbeats after it; ``room`` prefix bytes may
        still be kept. ``horizon=-inf`` closes the lane."""
        if self._busy:
            _refuse()
        self.horizon = horizon
        self._step = step
        self._wall = wall
        self.last = self.semantic = last
        self.room = room
        self.since = since

    def close(self) -> None:
        if self._busy:
            _refuse()
        self.horizon = -_INF

    def step(self, chunk: bytes, now: float, /) -> bool:
        if self._busy:
            _refuse()
        if not (now < self.horizon) or type(chunk) is not bytes:
            return False
        scanner = self._scanner
        if scanner is None:
            return False  # the framing is the scanner's alone
        self._busy = True
        try:
            frames = scanner.admit(chunk)
        finally:
            self._busy = False
        if frames < 0:
            return False
        beats, trailing = (getattr(scanner, "beats", 0), getattr(scanner, "trailing", 0)) if frames > 0 else (0, 0)
        if beats > 0:
            self._beats.append((now, beats))
        self.heartbeats += beats
        n = len(chunk)
        self.frames += frames
        self.reads += 1
        self._nbytes += n
        gap = now - self.last
        if gap > self._max_gap:
            self._max_gap = gap
        self.last = now
        if beats < frames:  # content: the semantic clock moves, and the horizon with it
            self.since = trailing
            gap = now - self.semantic
            if gap > self._max_semantic_gap:
                self._max_semantic_gap = gap
            self.semantic = now
            horizon = now + self._step
            self.horizon = horizon if horizon < self._wall else self._wall
        else:  # heartbeats alone
            self.since += beats
        room = self.room
        if room >= n:
            self._keep.append(chunk)
            self.room = room - n
        elif room > 0:
            self._keep.append(chunk[:room])
            self.room = 0
        return True

    def take(self) -> tuple[int, int, float, float, int, int, float, float]:
        """``(reads, nbytes, last, max_gap, room, frames, semantic, max_semantic_gap)`` since the
        last take; resets the counts."""
        if self._busy:
            _refuse()
        out = (self.reads, self._nbytes, self.last, self._max_gap, self.room, self.frames, self.semantic,
               self._max_semantic_gap)
        self.reads = 0
        self.frames = 0
        self._nbytes = 0
        self._max_gap = 0.0
        self._max_semantic_gap = 0.0
        return out

    def take_beats(self) -> list[tuple[float, int]]:
        """``(time, count)`` of each admitted read that held heartbeats (``count`` of them) since
        the last call; resets :attr:`heartbeats`. (:attr:`since`: the heartbeats after the last
        semantic frame.)"""
        if self._busy:
            _refuse()
        out, self._beats = self._beats, []
        self.heartbeats = 0
        return out


def _refuse() -> None:
    raise RuntimeError("Lane is busy: step() is in progress (called back from the scanner's admit())")


Lane: type[LaneLike]
NATIVE = False
if PURE:
    Lane = PyLane
else:
    try:
        from ._lane import Lane as _NativeLane

        Lane = _NativeLane  # the same interface (_lane.pyi), in C
        NATIVE = True
    except ImportError:  # no compiler at install time: the reference implementation
        Lane = PyLane
