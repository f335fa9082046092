"""The liveness clocks of one attempt (sans-I/O, no clock of its own).

The engine feeds it what happened and *when* (``now`` is any monotonic seconds value the driver
chooses) and asks two kinds of question:

- :meth:`AttemptClock.poll` -- "what is due at ``now``?": notices and the *time-based* verdicts
  (wall budget, semantic timeout). One item per call, earliest first, like h11's ``next_event``;
  the caller loops until :data:`CONTINUE`. A terminal verdict ends the machine (later polls repeat
  it). Notices never end anything.
- :meth:`AttemptClock.expired` -- "a read that started at ``start`` is still waiting at ``now``:
  is that a verdict?". Wire silence is judged only this way, on a read that waited: bytes that
  were waiting in the socket while the caller did not read are progress the moment they are read,
  so a paused reader is never mistaken for a dead wire.

=====================  ========================================  ==================================
clock                  reset by                                  on expiry
=====================  ========================================  ==================================
first byte             the first byte of the body                :class:`RawSilenceExpired`
                       (bound from the request being sent)       (``first_byte=True``)
raw silence            every byte (data, ping, comment);         :class:`RawSilenceExpired`
                       measured per read, from its start
semantic silence       semantic and end frames                   :class:`Notice` (re-armed)
semantic timeout       semantic and end frames (if configured)   :class:`SemanticTimeoutExpired`
wall budget            never (absolute deadline of the request)  :class:`WallBudgetExpired`
=====================  ========================================  ==================================

The raw bound is fixed (``raw_idle``) or, with ``adaptive=(floor, learned)``, learned from the
heartbeat cadence: once two heartbeats were seen, ``max(floor, 3 x the largest heartbeat gap)``
(the gap also taking ``learned``, remembered from recent attempts to the host), never above
``raw_idle``. Only heartbeat-to-heartbeat gaps teach it: content cadence is not a keep-alive
cadence. A notice before the first body byte is a *prefill* notice (:attr:`NoticeKind.PREFILL`).

This module is the one place that derives bounds and verdicts: which bound a read is judged by
(:meth:`AttemptClock.wire_bound`: the first-byte one before the body's first byte, then the raw
one), when a waiting read must wake (:class:`Hints`, :func:`wake_at`), the socket timeout an
attempt's request carries (:meth:`AttemptClock.socket_bound`), the verdict of a read that waited
out its bound (:meth:`AttemptClock.expired`, :meth:`AttemptClock.wire_silence`) and the one a
gap would have been in shadow mode (:meth:`AttemptClock.observed_gap`). The engine, the drivers
and ``otel-liveness analyze`` ask; nothing outside this module writes a clock's fields (a test
reads every module's syntax tree for an assignment to one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from ..outcome import FrameKind, Notice, NoticeKind, Phase

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..policy import Policy

__all__ = [
    "CONTINUE",
    "NO_HINTS",
    "TOLERANCE",
    "AttemptClock",
    "Continue",
    "Due",
    "Hints",
    "Notice",
    "RawSilenceExpired",
    "SemanticTimeoutExpired",
    "Terminal",
    "WallBudgetExpired",
    "raw_bound_for",
    "stop_at",
    "wake_at",
]

#: How many of the largest heartbeat gaps the learned raw bound allows.
ADAPTIVE_FACTOR: Final = 3.0
#: A read cut this close before a deadline is judged at the deadline (timers may fire a hair early).
TOLERANCE: Final = 0.005


@dataclass(frozen=True, slots=True)
class Continue:
    """Nothing is due."""


CONTINUE: Final = Continue()


@dataclass(frozen=True, slots=True)
class RawSilenceExpired:
    at: float
    idle: float  # the bound that ran out
    phase: Phase
    first_byte: bool = False  # the first-byte bound (no body byte yet), not the raw one


@dataclass(frozen=True, slots=True)
class SemanticTimeoutExpired:
    at: float
    idle: float
    phase: Phase


@dataclass(frozen=True, slots=True)
class WallBudgetExpired:
    at: float
    budget: float
    phase: Phase


Terminal = RawSilenceExpired | SemanticTimeoutExpired | WallBudgetExpired
Due = Continue | Notice | Terminal

_INF = float("inf")


class Hints(NamedTuple):
    """For a read that waits below the HTTP library (the drivers' waking network stream): wake no
    later than ``wake`` (the next notice), end no later than ``stop`` (an absolute terminal
    deadline: semantic timeout, wall budget, first byte) or ``raw`` seconds after the read started
    (the raw bound, once the body started). ``inf`` for none; in shadow mode nothing ends a read.
    A read's own times are :func:`stop_at` and :func:`wake_at`."""

    wake: float = _INF
    stop: float = _INF
    raw: float = _INF


#: Nothing to wake for: no attempt, an attempt over, or a clock whose verdict is given.
NO_HINTS: Final = Hints()


def stop_at(stop: float, raw: float, start: float) -> float:
    """When a read that started at ``start`` must end, given the hints' ``stop`` and ``raw``."""
    at = start + raw
    return stop if stop < at else at


def wake_at(wake: float, stop: float, raw: float, start: float) -> float:
    """When a read that started at ``start`` must wake: its :func:`stop_at` or the next notice."""
    at = start + raw
    if stop < at:
        at = stop
    return wake if wake < at else at
_H, _S, _E = FrameKind.HEARTBEAT, FrameKind.SEMANTIC, FrameKind.END


def raw_bound_for(policy: Policy, streaming: bool, keepalives: bool) -> float | None:
    """The fixed raw-silence bound of an attempt (the learned one's ceiling): the non-streaming
    bound for a body that is not a stream, else the provider's -- shorter for a wire that carries
    heartbeats, the no-keep-alive bound for one that stays silent while the model thinks."""
    if not streaming:
        return policy.raw_idle_timeout_non_streaming
    return policy.raw_idle_timeout if keepalives else policy.raw_idle_timeout_no_keepalive


class AttemptClock:
    """Liveness state of one attempt.

    ``raw_idle``: the raw-silence bound, the ceiling of the learned one (``None`` = exempt, e.g.
    non-streaming); ``keepalive_idle``: for a wire-silent provider, the (shorter) bound that
    applies once a heartbeat was seen; ``first_byte``: the bound from the request being sent to the first body byte
    (``None``: the raw bound applies from the start); ``notice_every``: notice cadence (``None`` =
    no notices); ``semantic_timeout`` (``None`` = never fail on semantic silence);
    ``wall_deadline``/``wall_budget``: the request's absolute deadline on the same time base and
    the configured budget it came from; ``adaptive``: ``(floor, learned gap or None)`` to learn
    the raw bound from the heartbeat cadence.
    """

    __slots__ = (
        "adaptive_floor",
        "body_started",
        "bytes",
        "first_byte",
        "first_byte_bound",
        "first_semantic",
        "frames",
        "heartbeat_gaps",
        "heartbeats",
        "heartbeats_since_semantic",
        "keepalive_idle",
        "last_heartbeat",
        "last_raw",
        "last_semantic",
        "learned_gap",
        "max_heartbeat_gap",
        "max_raw_gap",
        "max_semantic_gap",
        "next_notice",
        "notice_every",
        "notices",
        "phase",
        "raw_idle",
        "semantic_timeout",
        "sent_at",
        "sent_bound",
        "started",
        "terminal",
        "wall_budget",
        "wall_deadline",
    )

    def __init__(
        self,
        now: float,
        *,
        raw_idle: float | None,
        keepalive_idle: float | None = None,
        first_byte: float | None = None,
        notice_every: float | None = None,
        semantic_timeout: float | None = None,
        wall_deadline: float | None = None,
        wall_budget: float | None = None,
        adaptive: tuple[float, float | None] | None = None,
    ) -> None:
        self.raw_idle = raw_idle
        self.keepalive_idle = keepalive_idle
        self.first_byte_bound = first_byte
        self.notice_every = notice_every
        self.semantic_timeout = semantic_timeout
        self.wall_deadline = wall_deadline
        self.wall_budget = wall_budget
        self.adaptive_floor = adaptive[0] if adaptive is not None else None
        self.learned_gap = adaptive[1] if adaptive is not None else None
        self.phase = Phase.CONNECTING
        self.started = now
        self.sent_at = now
        self.body_started = False
        self.last_raw = now
        self.last_semantic = now
        self.last_heartbeat: float | None = None
        self.next_notice = now + notice_every if notice_every is not None else _INF
        self.notices = 0
        self.heartbeats = 0
        self.heartbeats_since_semantic = 0
        self.heartbeat_gaps = 0
        self.max_heartbeat_gap = 0.0
        self.frames = 0
        self.bytes = 0
        self.max_raw_gap = 0.0
        self.max_semantic_gap = 0.0
        self.first_byte: float | None = None
        self.first_semantic: float | None = None
        self.terminal: Terminal | None = None
        #: Our bound the attempt's request carries as its socket read timeout (:meth:`read_timeout`;
        #: ``None``: the caller's own, or none).
        self.sent_bound: float | None = None

    @classmethod
    def for_attempt(cls, now: float, policy: Policy, *, streaming: bool, keepalives: bool,
                    body_size: int | None, learned: float | None, wall_deadline: float | None) -> AttemptClock:
        """The clock of an attempt sent at ``now`` under ``policy``: ``streaming`` (judged as a
        stream), ``keepalives`` (the provider's wire carries heartbeats while the model thinks),
        ``body_size`` (the request body's, for the first-byte bound), ``learned`` (the heartbeat
        gap remembered for the host, when adaptive), ``wall_deadline`` (the request's)."""
        raw = raw_bound_for(policy, streaming, keepalives)
        adaptive = policy.raw_idle_adaptive and streaming
        return cls(
            now,
            raw_idle=raw,
            keepalive_idle=policy.raw_idle_timeout if streaming and not keepalives else None,
            first_byte=policy.first_byte_bound(body_size, raw) if streaming else None,
            notice_every=policy.semantic_notice_interval,
            semantic_timeout=policy.semantic_timeout,
            wall_deadline=wall_deadline,
            wall_budget=policy.wall_timeout,
            adaptive=(policy.raw_idle_floor, learned) if adaptive else None,
        )

    # -- inputs ---------------------------------------------------------------------------------

    def request_sent(self, now: float) -> None:
        """The request is on its way: waiting for the first byte."""
        if self.phase is Phase.CONNECTING:
            self.phase = Phase.AWAITING_HEADERS
            self.sent_at = now
            self._raw(now)

    def headers(self, now: float) -> None:
        """Response headers arrived (raw progress; the first-byte wait goes on until the body's
        first byte: a gateway may flush headers before the provider answers)."""
        if self.phase in (Phase.CONNECTING, Phase.AWAITING_HEADERS):
            self.phase = Phase.PREAMBLE
        self._raw(now)

    def received(self, now: float, nbytes: int) -> None:
        """``nbytes`` of body arrived (resets the raw clock, whatever they hold)."""
        self.bytes += nbytes
        self._raw(now)
        if not self.body_started and nbytes:
            self.body_started = True
            self.first_byte = now - self.started

    def frames_at(self, now: float, kinds: list[FrameKind]) -> None:
        """The frames of ``kinds`` were decoded at ``now`` (one read; call after :meth:`received`
        for its bytes). Counted by C-level list methods, not a call per frame."""
        if not kinds:
            return
        heartbeats = kinds.count(_H)
        self.frames += len(kinds)
        if heartbeats:
            self._heartbeat(now, heartbeats)
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

    def _heartbeat(self, now: float, count: int) -> None:
        """``count`` heartbeat frames read at ``now`` (one read): counted, their gaps measured."""
        self.heartbeats += count
        last = self.last_heartbeat
        if last is not None:
            gap = now - last
            self.heartbeat_gaps += 1
            if gap > self.max_heartbeat_gap:
                self.max_heartbeat_gap = gap
        if count > 1:
            self.heartbeat_gaps += count - 1  # several in one read: gaps of zero
        self.last_heartbeat = now

    def steady_reads(self, nbytes: int, last: float, max_gap: float, frames: int,
                     beats: Sequence[tuple[float, int]], since: int, semantic: float, max_semantic_gap: float) -> None:
        """The steady lane's reads since its last take (:meth:`.attempt.Attempt.absorb_lane`, their
        one hand-over): ``frames`` frames in all, ``nbytes`` bytes, the last read at ``last``, the
        longest gap between consecutive reads ``max_gap``; the last read that held content at
        ``semantic``, the longest gap between such reads ``max_semantic_gap``; ``beats`` the
        ``(time, count)`` of each read that held heartbeats, ``since`` the heartbeats after the last
        semantic frame. The same effect as :meth:`received` + :meth:`frames_at` for each read,
        applied at once (the lane admits only reads of a live stream after content: no first byte,
        first content or end frame among them)."""
        self.frames += frames
        self.bytes += nbytes
        if max_gap > self.max_raw_gap:
            self.max_raw_gap = max_gap
        if max_semantic_gap > self.max_semantic_gap:
            self.max_semantic_gap = max_semantic_gap
        self.last_raw = last
        for at, count in beats:
            self._heartbeat(at, count)
        self.heartbeats_since_semantic = since
        if semantic != self.last_semantic:
            self.last_semantic = semantic
            if self.notice_every is not None:
                self.next_notice = semantic + self.notice_every

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

    def finished(self, now: float) -> None:
        """The attempt is over (EOF, close, error): stop every clock."""
        gap = now - self.last_semantic
        if self.phase is not Phase.DONE and gap > self.max_semantic_gap:
            self.max_semantic_gap = gap
        self._raw(now)
        self.raw_idle = None
        self.keepalive_idle = None
        self.first_byte_bound = None
        self.notice_every = None
        self.semantic_timeout = None
        self.wall_deadline = None
        self.next_notice = _INF

    def _raw(self, now: float) -> None:
        gap = now - self.last_raw
        if gap > self.max_raw_gap:
            self.max_raw_gap = gap
        self.last_raw = now

    # -- bounds ---------------------------------------------------------------------------------

    @property
    def adaptive(self) -> bool:
        return self.adaptive_floor is not None

    def raw_bound(self) -> float | None:
        """The raw-silence bound a read is judged by now (``None``: none). A wire-silent provider's
        (``keepalive_idle`` set) becomes the keep-alive bound once its wire showed a heartbeat."""
        ceiling = self.raw_idle
        if self.keepalive_idle is not None and self.heartbeats and ceiling is not None:
            ceiling = min(ceiling, self.keepalive_idle)
        if ceiling is None or self.adaptive_floor is None or self.heartbeat_gaps == 0:
            return ceiling
        gap = self.max_heartbeat_gap
        if self.learned_gap is not None and self.learned_gap > gap:
            gap = self.learned_gap
        return min(ceiling, max(self.adaptive_floor, ADAPTIVE_FACTOR * gap))

    def wire_bound(self) -> tuple[float | None, bool]:
        """``(bound, first_byte)``: the wire-silence bound a read is judged by now -- before the
        first body byte the first-byte bound (``first_byte`` True, counted from the request being
        sent), after it :meth:`raw_bound` (counted from each read's start); ``None``: none."""
        if not self.body_started and self.first_byte_bound is not None:
            return self.first_byte_bound, True
        return self.raw_bound(), False

    def read_deadline(self, start: float) -> float:
        """When a read that started at ``start`` and got nothing is a wire-silence verdict:
        before the first body byte, the first-byte deadline (from the request being sent); after
        it, ``start`` plus the raw bound (``inf``: none). After the end frame too: the reply is
        whole, a silent or broken rest of the body only holds the connection."""
        if self.terminal is not None:
            return _INF
        bound, first_byte = self.wire_bound()
        if bound is None:
            return _INF
        return self.sent_at + bound if first_byte else start + bound

    def hints(self, enforce: bool) -> tuple[float, float, float]:
        """The :class:`Hints` for the reads that follow, as a plain ``(wake, stop, raw)`` (in
        shadow mode, ``enforce`` False, only the notices: nothing ends a read)."""
        if self.terminal is not None:
            return NO_HINTS
        wake, stop = self._wake_stop()
        if not enforce:
            return wake, _INF, _INF
        bound, first_byte = self.wire_bound()
        if first_byte:
            first = self.sent_at + (bound or 0.0)
            return wake, stop if stop < first else first, _INF
        return wake, stop, _INF if bound is None else bound

    def socket_bound(self, now: float) -> float | None:
        """The read timeout an attempt's request carries at ``now`` (``None``: none): the largest
        of its bounds -- the waking network stream, where a driver has one, ends reads earlier at
        the phase's own bound -- never past the wall budget's remainder."""
        bounds = [b for b in (self.first_byte_bound, self.raw_idle) if b is not None]
        ours = max(bounds) if bounds else None
        if self.wall_deadline is not None:
            remaining = self.wall_deadline - now
            ours = remaining if ours is None else min(ours, remaining)
        return ours

    def read_timeout(self, now: float, caller: float | None) -> float | None:
        """The socket read timeout for the attempt's request sent at ``now``: ours
        (:meth:`socket_bound`), never above the caller's own (``caller``). Records which it is
        (:attr:`sent_bound`): a read that hits ours waited out our bound, not the caller's."""
        self.sent_bound = None
        ours = self.socket_bound(now)
        if ours is None:
            return None
        if caller is not None and caller < ours:
            return caller
        self.sent_bound = ours = max(ours, 0.001)
        return ours

    def opaque(self, policy: Policy) -> None:
        """The reply is not a stream (a JSON body, an HTML page): judged by the non-streaming raw
        bound alone, with no first-byte phase."""
        self.raw_idle = raw_bound_for(policy, False, False)
        self.first_byte_bound = None

    def _deadlines(self) -> tuple[float, float, float]:
        """(semantic deadline, wall deadline, next notice): the time-based ones."""
        if self.phase is Phase.DONE:
            return _INF, _INF, _INF
        sem = self.last_semantic + self.semantic_timeout if self.semantic_timeout is not None else _INF
        wall = self.wall_deadline if self.wall_deadline is not None else _INF
        return sem, wall, self.next_notice

    def _wake_stop(self) -> tuple[float, float]:
        """(the next notice, if before every time-based terminal deadline; the earliest of those
        deadlines) -- ``inf`` for none."""
        sem, wall, notice = self._deadlines()
        stop = sem if sem < wall else wall
        if self.notice_every is None or notice >= stop:
            return _INF, stop
        return notice, stop

    def next_notice_at(self) -> float:
        """When the next notice falls due, if that is before every time-based terminal deadline
        (``inf`` otherwise)."""
        if self.terminal is not None:
            return _INF
        return self._wake_stop()[0]

    def steady(self) -> tuple[float, float, float]:
        """For the steady lane: ``(horizon, step, wall)``. A read arriving before ``horizon`` makes
        nothing due; one that holds content moves the horizon to ``min(read time + step, wall)``,
        one without (heartbeats alone, or part of a frame) leaves it. The horizon is ``-inf`` (lane
        closed) unless the last read was semantic and the stream is live. Wire silence is judged
        per read (:meth:`expired`), so it takes no part here."""
        if self.terminal is not None or self.phase is not Phase.STREAMING or self.last_raw != self.last_semantic:
            return -_INF, 0.0, _INF
        sem, wall, notice = self._deadlines()
        step = min(
            _INF if self.semantic_timeout is None else self.semantic_timeout,
            _INF if self.notice_every is None else self.notice_every,
        )
        return min(sem, wall, notice), step, wall

    # -- questions ------------------------------------------------------------------------------

    def expired(self, now: float, start: float) -> Terminal | None:
        """A read started at ``start`` has got nothing until ``now``: the terminal verdict due
        (time-based ones first, then wire silence), or ``None``. Records it."""
        if self.terminal is not None:
            return self.terminal
        due = self.poll_terminal(now)
        if due is not None:
            return due
        deadline = self.read_deadline(start)
        if now < deadline:
            return None
        bound, first_byte = self.wire_bound()
        if first_byte:
            verdict = RawSilenceExpired(deadline, bound or 0.0, self.phase, True)
        else:
            verdict = RawSilenceExpired(deadline, deadline - start, self.phase)
        self.terminal = verdict
        return verdict

    def waited_bound(self, now: float) -> bool:
        """Whether the wire has been silent for the whole bound of the phase at ``now``: a read
        timeout that came sooner was not the socket timeout the transport set (a mock's, a
        proxy's), and says nothing of wire silence."""
        bound, _ = self.wire_bound()
        return bound is None or now - self.last_raw >= bound - TOLERANCE

    def read_verdict(self, now: float) -> Terminal | None:
        """A read timed out at ``now``: the verdict it ended at -- a waking read's (recorded,
        :attr:`terminal`), or at our socket timeout (:attr:`sent_bound`) a terminal deadline or,
        when it waited the whole bound, wire silence -- else ``None`` (sooner than our bound: a
        broken read; or the caller's timeout)."""
        expired = self.terminal
        if expired is None and self.sent_bound is not None:
            expired = self.poll_terminal(now + TOLERANCE)
            if expired is None and self.waited_bound(now):
                expired = self.wire_silence(now)
        return expired

    def wire_silence(self, now: float) -> RawSilenceExpired:
        """A read that waited the whole socket timeout set for it got nothing (the HTTP library
        ended it, not a waking read): the wire-silence verdict at ``now``. Records it."""
        bound, first_byte = self.wire_bound()
        verdict = RawSilenceExpired(now, bound or 0.0, self.phase, first_byte)
        self.terminal = verdict
        return verdict

    def observed_gap(self, now: float) -> RawSilenceExpired | None:
        """Shadow mode: bytes (or an end) arrive at ``now``; if the silence before them ran past
        the bound -- the first-byte one, or the raw one (learned, when adaptive) -- the verdict
        that bound would have given, at its deadline (not recorded: shadow mode only reports).
        Judged when the bytes arrive, so a paused reader can overstate the silence."""
        if self.phase is Phase.DONE:
            return None
        bound, first_byte = self.wire_bound()
        if bound is None:
            return None
        deadline = (self.sent_at if first_byte else self.last_raw) + bound
        if now < deadline:
            return None
        return RawSilenceExpired(deadline, bound, self.phase, first_byte)

    def poll_terminal(self, now: float) -> Terminal | None:
        """The time-based terminal verdict due at ``now`` (notices left for :meth:`poll`)."""
        if self.terminal is not None:
            return self.terminal
        sem, wall, _ = self._deadlines()
        if now < sem and now < wall:
            return None
        verdict: Terminal
        if wall <= sem:
            verdict = WallBudgetExpired(wall, self.wall_budget or 0.0, self.phase)
        else:
            verdict = SemanticTimeoutExpired(sem, self.semantic_timeout or 0.0, self.phase)
        self.terminal = verdict
        return verdict

    def poll(self, now: float) -> Due:
        """The earliest item due at ``now`` (one per call): a notice, or a time-based verdict."""
        if self.terminal is not None:
            return self.terminal
        if (now < self.next_notice and (
            (self.semantic_timeout is None or now < self.last_semantic + self.semantic_timeout)
            and (self.wall_deadline is None or now < self.wall_deadline)
        )) or self.phase is Phase.DONE:
            return CONTINUE  # the fast path, taken on nearly every read
        sem, wall, notice = self._deadlines()
        if notice <= now and notice < sem and notice < wall:
            return self._notice(notice)
        return self.poll_terminal(now) or CONTINUE

    def poll_notice(self, now: float) -> Notice | None:
        """The notice due at ``now``, if one is (never a terminal verdict)."""
        at = self.next_notice_at()
        if now < at:
            return None
        return self._notice(at)

    def _notice(self, at: float) -> Notice:
        self.notices += 1
        self.next_notice = at + (self.notice_every or _INF)
        return Notice(
            at=at,
            number=self.notices,
            semantic_idle=at - self.last_semantic,
            raw_idle=max(0.0, at - self.last_raw),
            heartbeats_since_semantic=self.heartbeats_since_semantic,
            phase=self.phase,
            kind=NoticeKind.PREFILL if self.first_byte is None or self.started + self.first_byte >= at else NoticeKind.SEMANTIC,
        )
