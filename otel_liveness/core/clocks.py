"""The three-clock liveness state machine of one attempt (sans-I/O, no clock of its own).

The driver feeds it what happened and *when* (``now`` is any monotonic seconds value it chooses)
and asks two questions: :meth:`AttemptClock.poll` -- "what is due at ``now``?" -- and
:meth:`AttemptClock.next_deadline` -- "when should I look again?".

======================  ==========================================  ============================
clock                   reset by                                    on expiry
======================  ==========================================  ============================
raw silence             every byte (data, ping, comment)            :class:`RawSilenceExpired`
semantic silence        semantic and end frames                     :class:`Notice` (re-armed)
semantic timeout        semantic and end frames                     :class:`SemanticTimeoutExpired`
                        (only if configured)
wall budget             never (absolute deadline for the request)   :class:`WallBudgetExpired`
======================  ==========================================  ============================

``poll`` returns the *earliest* due item first (an item due at ``t`` is delivered before input
fed at ``t``), one per call, like h11's ``next_event``: the
driver loops until it gets :data:`CONTINUE`. A terminal verdict ends the machine (later polls
repeat it). Notices never end anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .outcome import FrameKind, Phase

__all__ = [
    "CONTINUE",
    "AttemptClock",
    "Continue",
    "Notice",
    "RawSilenceExpired",
    "SemanticTimeoutExpired",
    "Verdict",
    "WallBudgetExpired",
]


@dataclass(frozen=True, slots=True)
class Continue:
    """Nothing is due."""


CONTINUE: Final = Continue()


@dataclass(frozen=True, slots=True)
class Notice:
    """The model has been semantically silent for another ``semantic_notice_interval``."""

    at: float  # when it became due
    number: int  # 1 for the first notice of this silence... counted over the attempt
    semantic_idle: float
    raw_idle: float
    heartbeats_since_semantic: int
    phase: Phase


@dataclass(frozen=True, slots=True)
class RawSilenceExpired:
    at: float
    idle: float  # the configured bound that ran out
    phase: Phase
    committed: bool


@dataclass(frozen=True, slots=True)
class SemanticTimeoutExpired:
    at: float
    idle: float
    phase: Phase
    committed: bool


@dataclass(frozen=True, slots=True)
class WallBudgetExpired:
    at: float
    budget: float
    phase: Phase
    committed: bool


Verdict = Continue | Notice | RawSilenceExpired | SemanticTimeoutExpired | WallBudgetExpired
Terminal = RawSilenceExpired | SemanticTimeoutExpired | WallBudgetExpired

_INF = float("inf")
_H, _S, _E = FrameKind.HEARTBEAT, FrameKind.SEMANTIC, FrameKind.END


class AttemptClock:
    """Liveness state of one attempt.

    ``raw_idle``: raw-silence bound (``None`` = exempt, e.g. non-streaming); ``notice_every``:
    semantic notice cadence (``None`` = no notices); ``semantic_timeout`` (``None`` = never fail on
    semantic silence); ``wall_deadline``/``wall_budget``: the request's absolute deadline on the
    same time base and the configured budget it came from.
    """

    __slots__ = (
        "raw_idle",
        "notice_every",
        "semantic_timeout",
        "wall_deadline",
        "wall_budget",
        "phase",
        "committed",
        "started",
        "last_raw",
        "last_semantic",
        "next_notice",
        "notices",
        "heartbeats",
        "heartbeats_since_semantic",
        "frames",
        "bytes",
        "max_raw_gap",
        "max_semantic_gap",
        "first_byte",
        "first_semantic",
        "terminal",
    )

    def __init__(
        self,
        now: float,
        *,
        raw_idle: float | None,
        notice_every: float | None = None,
        semantic_timeout: float | None = None,
        wall_deadline: float | None = None,
        wall_budget: float | None = None,
    ) -> None:
        self.raw_idle = raw_idle
        self.notice_every = notice_every
        self.semantic_timeout = semantic_timeout
        self.wall_deadline = wall_deadline
        self.wall_budget = wall_budget
        self.phase = Phase.CONNECTING
        self.committed = False
        self.started = now
        self.last_raw = now
        self.last_semantic = now
        self.next_notice = now + notice_every if notice_every is not None else _INF
        self.notices = 0
        self.heartbeats = 0
        self.heartbeats_since_semantic = 0
        self.frames = 0
        self.bytes = 0
        self.max_raw_gap = 0.0
        self.max_semantic_gap = 0.0
        self.first_byte: float | None = None
        self.first_semantic: float | None = None
        self.terminal: Terminal | None = None

    # -- inputs ---------------------------------------------------------------------------------

    def request_sent(self, now: float) -> None:
        """The request left (connection established): now waiting for headers."""
        if self.phase is Phase.CONNECTING:
            self.phase = Phase.AWAITING_HEADERS
            self._raw(now)

    def headers(self, now: float) -> None:
        """Response headers arrived."""
        if self.phase in (Phase.CONNECTING, Phase.AWAITING_HEADERS):
            self.phase = Phase.PREAMBLE
        self._raw(now)
        if self.first_byte is None:
            self.first_byte = now - self.started

    def received(self, now: float, nbytes: int) -> None:
        """``nbytes`` of body arrived (resets the raw clock, whatever they hold)."""
        self.bytes += nbytes
        self._raw(now)
        if self.first_byte is None:
            self.first_byte = now - self.started

    def frame(self, now: float, kind: FrameKind) -> None:
        """A frame of ``kind`` was decoded (call after :meth:`received` for its bytes)."""
        self.frames += 1
        if kind is FrameKind.HEARTBEAT:
            self.heartbeats += 1
            self.heartbeats_since_semantic += 1
        elif kind is FrameKind.SEMANTIC or kind is FrameKind.END:
            self.heartbeats_since_semantic = 0
            self._semantic(now, kind is FrameKind.END)

    def steady(self) -> tuple[float, float, float]:
        """For the transport's steady lane: ``(horizon, step, wall)``. A read that holds exactly
        one semantic frame, arriving before ``horizon`` while the previous read was semantic too,
        makes nothing due; it moves the horizon to ``min(read time + step, wall)``. The horizon
        is ``-inf`` (lane closed) unless the last read was semantic and the stream is live."""
        if (
            self.terminal is not None
            or self.phase is not Phase.STREAMING
            or self.last_raw != self.last_semantic
        ):
            return -_INF, 0.0, _INF
        raw, sem, wall, notice = self._deadlines()
        step = min(
            _INF if self.raw_idle is None else self.raw_idle,
            _INF if self.semantic_timeout is None else self.semantic_timeout,
            _INF if self.notice_every is None else self.notice_every,
        )
        return min(raw, sem, wall, notice), step, wall

    def semantic_reads(self, reads: int, nbytes: int, last: float, max_gap: float) -> None:
        """``reads`` steady-lane reads (one semantic frame each, ``nbytes`` in all), the last at
        ``last``, the longest gap between consecutive reads ``max_gap``: the same effect as
        :meth:`received` + :meth:`frame` for each, applied at once."""
        self.frames += reads
        self.bytes += nbytes
        if max_gap > self.max_raw_gap:
            self.max_raw_gap = max_gap
        if max_gap > self.max_semantic_gap:
            self.max_semantic_gap = max_gap
        self.last_raw = self.last_semantic = last
        self.heartbeats_since_semantic = 0
        if self.notice_every is not None:
            self.next_notice = last + self.notice_every

    def frames_at(self, now: float, kinds: list[FrameKind]) -> None:
        """All ``kinds`` decoded at ``now`` (one read): same effect as :meth:`frame` for each, with
        the counting done by C-level list methods instead of a call per frame."""
        if not kinds:
            return
        heartbeats = kinds.count(_H)
        self.frames += len(kinds)
        self.heartbeats += heartbeats
        end = _E in kinds
        if not end and _S not in kinds:
            self.heartbeats_since_semantic += heartbeats
            return
        if heartbeats:  # heartbeats after the last semantic/end frame of this read
            last = len(kinds) - 1
            while kinds[last] is not _S and kinds[last] is not _E:
                last -= 1
            self.heartbeats_since_semantic = kinds[last:].count(_H)
        else:
            self.heartbeats_since_semantic = 0
        self._semantic(now, end)

    def _semantic(self, now: float, end: bool) -> None:
        """Content (or the end) arrived at ``now``: reset the semantic clock and re-arm notices."""
        gap = now - self.last_semantic
        if gap > self.max_semantic_gap:
            self.max_semantic_gap = gap
        self.last_semantic = now
        if self.notice_every is not None:
            self.next_notice = now + self.notice_every
        if self.first_semantic is None:
            self.first_semantic = now - self.started
        if end:
            self.phase = Phase.DONE
        elif self.phase is not Phase.DONE:
            self.phase = Phase.STREAMING

    def released(self) -> None:
        """Content left the transport for the caller: failures from now on are truncations."""
        self.committed = True

    def finished(self, now: float) -> None:
        """The attempt is over (EOF, close, error): stop every clock."""
        gap = now - self.last_semantic
        if self.phase is not Phase.DONE and gap > self.max_semantic_gap:
            self.max_semantic_gap = gap
        self._raw(now)
        self.raw_idle = None
        self.notice_every = None
        self.semantic_timeout = None
        self.wall_deadline = None
        self.next_notice = _INF

    def _raw(self, now: float) -> None:
        gap = now - self.last_raw
        if gap > self.max_raw_gap:
            self.max_raw_gap = gap
        self.last_raw = now

    # -- questions ------------------------------------------------------------------------------

    def _deadlines(self) -> tuple[float, float, float, float]:
        done = self.phase is Phase.DONE
        raw = self.last_raw + self.raw_idle if self.raw_idle is not None and not done else _INF
        sem = (
            self.last_semantic + self.semantic_timeout
            if self.semantic_timeout is not None and not done
            else _INF
        )
        wall = self.wall_deadline if self.wall_deadline is not None and not done else _INF
        notice = self.next_notice if not done else _INF
        return raw, sem, wall, notice

    def next_deadline(self) -> float | None:
        """The next time :meth:`poll` could return something other than :data:`CONTINUE`."""
        if self.terminal is not None:
            return None
        soonest = min(self._deadlines())
        return None if soonest == _INF else soonest

    def terminal_deadline(self) -> float | None:
        """The next time a *terminal* verdict could fall due (ignores notices): the bound a
        blocking read may wait for without losing a failure."""
        if self.terminal is not None:
            return None
        raw, sem, wall, _ = self._deadlines()
        soonest = min(raw, sem, wall)
        return None if soonest == _INF else soonest

    def hints(self) -> tuple[float, float]:
        """``(next notice, semantic deadline)`` for a blocking read to wake or stop at; ``inf``
        when none can fall due (after a verdict, at the end, or unset). Each only moves later."""
        if self.terminal is not None:
            return _INF, _INF
        _, sem, _, notice = self._deadlines()
        return notice, sem

    def wake_at(self) -> float | None:
        """When the next notice falls due, if that is before every terminal deadline: the time a
        blocking read may wake at to deliver it (:meth:`poll_notice`) and then wait on."""
        if self.terminal is not None or self.notice_every is None:
            return None
        raw, sem, wall, notice = self._deadlines()
        return notice if notice < min(raw, sem, wall) else None

    def poll_notice(self, now: float) -> Notice | None:
        """The notice due at ``now``, if one is (never a terminal verdict: those are the read's)."""
        at = self.wake_at()
        if at is None or now < at:
            return None
        return self._notice(at)

    def _notice(self, at: float) -> Notice:
        self.notices += 1
        self.next_notice = at + self.notice_every  # type: ignore[operator]
        return Notice(
            at=at,
            number=self.notices,
            semantic_idle=at - self.last_semantic,
            raw_idle=max(0.0, at - self.last_raw),
            heartbeats_since_semantic=self.heartbeats_since_semantic,
            phase=self.phase,
        )

    def poll(self, now: float) -> Verdict:
        """The earliest item due at ``now`` (one per call)."""
        if self.terminal is not None:
            return self.terminal
        # Fast path, taken on nearly every read: nothing is due yet.
        if (
            now < self.next_notice
            and (self.raw_idle is None or now < self.last_raw + self.raw_idle)
            and (self.wall_deadline is None or now < self.wall_deadline)
            and (self.semantic_timeout is None or now < self.last_semantic + self.semantic_timeout)
        ) or self.phase is Phase.DONE:
            return CONTINUE
        raw, sem, wall, notice = self._deadlines()
        soonest = min(raw, sem, wall, notice)
        if soonest > now:
            return CONTINUE
        if notice == soonest and notice < min(raw, sem, wall):
            return self._notice(notice)
        verdict: Terminal
        if wall == soonest:
            verdict = WallBudgetExpired(wall, self.wall_budget or 0.0, self.phase, self.committed)
        elif raw == soonest:
            verdict = RawSilenceExpired(raw, self.raw_idle or 0.0, self.phase, self.committed)
        else:
            verdict = SemanticTimeoutExpired(sem, self.semantic_timeout or 0.0, self.phase, self.committed)
        self.terminal = verdict
        return verdict
