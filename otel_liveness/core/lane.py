"""The steady lane: the per-read hot path of a live stream, as a small state object.

After content, nearly every read of a healthy stream holds exactly one content frame and makes
nothing due on any clock. For such a read the attempt needs no decision: the bytes go to the
caller as they are, the clocks move forward, the released prefix keeps a reference. The lane does
exactly that much, counting in its own fields; :meth:`AttemptSession.absorb
<otel_liveness.core.engine.AttemptSession.absorb>` applies the counts to the attempt before
anything else looks at it. Every other read takes the general path
(:meth:`~otel_liveness.core.engine.AttemptSession.feed` and friends).

:class:`Lane` here is the reference implementation. ``_lane.c`` is the same class in C (built when
a compiler is available; ``NATIVE`` says which one is in use), kept equal to this one by
``tests/test_lane.py``. Pure: the caller passes the time of each read.
"""

from __future__ import annotations

from .sse import whole_frame

__all__ = ["NATIVE", "Lane", "PyLane"]

_INF = float("inf")


class PyLane:
    """``step(chunk, now)`` admits ``chunk`` (returns True, counts it, keeps it in ``keep`` while
    ``room`` lasts) when ``now < horizon``, ``chunk`` is exactly one LF-framed block within
    ``max_frame`` bytes (:func:`~otel_liveness.core.sse.whole_frame`) and its first ``prefix``
    bytes are one of ``keys`` (the profile's semantic prefixes); it then moves the horizon to
    ``min(now + step, wall)``. Otherwise it returns False and changes nothing."""

    __slots__ = (
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
        "step_",
        "wall",
    )

    def __init__(self, keys: tuple[bytes, ...], prefix: int, max_frame: int, keep: list[bytes]) -> None:
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

    def open(self, horizon: float, step: float, wall: float, last: float, room: int) -> None:
        """Re-arm after the general path: nothing is due before ``horizon``; the last read was
        at ``last``; ``room`` prefix bytes may still be kept. ``horizon=-inf`` closes the lane."""
        self.horizon = horizon
        self.step_ = step
        self.wall = wall
        self.last = last
        self.room = room

    def close(self) -> None:
        self.horizon = -_INF

    def step(self, chunk: bytes, now: float) -> bool:
        if not (now < self.horizon) or type(chunk) is not bytes:
            return False
        if not whole_frame(chunk, self.max_frame) or chunk[: self.prefix] not in self.keys:
            return False
        n = len(chunk)
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

    def take(self) -> tuple[int, int, float, float, int]:
        """``(reads, nbytes, last, max_gap, room)`` since the last take; resets the counts."""
        out = (self.reads, self.nbytes, self.last, self.max_gap, self.room)
        self.reads = 0
        self.nbytes = 0
        self.max_gap = 0.0
        return out


Lane: type[PyLane]
try:
    from ._lane import Lane as _NativeLane

    Lane = _NativeLane  # type: ignore[assignment]  # the same interface (_lane.pyi), in C
    NATIVE = True
except ImportError:  # no compiler at install time: the reference implementation
    Lane = PyLane
    NATIVE = False
