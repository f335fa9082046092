"""One logical request and its attempts, as a sans-I/O state machine.

The transport drivers own every socket, sleep and clock read; they feed this module what
happened (``sent``, ``headers``, ``feed(chunk)``, ``eof``, a timeout) with a timestamp and act
on what it answers: which bytes to release to the caller now, which failure occurred, what the
retry policy decides. Hooks are called from here, so the sync and async drivers emit exactly the
same facts.

Holding rule (DESIGN.md, "One attempt visible"): before the first semantic frame, every byte of a
streaming attempt is held; the chunk that carries the first semantic (or end) frame releases the
held bytes and itself, in order. From then on each chunk is released as it arrives, except the
bytes from an in-band error frame onwards, which become a truncation instead. In shadow mode
nothing is held and nothing is enforced: verdicts are only reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .clocks import AttemptClock, Notice, RawSilenceExpired, SemanticTimeoutExpired, WallBudgetExpired
from .errors import MalformedStream
from .events import (
    AttemptEnded,
    AttemptStarted,
    Event,
    Heartbeats,
    RequestEnded,
    RequestStarted,
    RetryScheduled,
    SemanticNotice,
    Verdict,
)
from .outcome import AttemptOutcome, AttemptRecord, FrameKind, Phase, RequestReport, StopReason
from .lane import Lane
from .policy import Policy
from .providers import PREFIX, StreamFacts, profile_for
from .retry import Decision, Failure, FailureKind, Retry, RetryState, decide
from .sse import SSEScanner, parse_block

__all__ = ["AttemptSession", "RequestSession", "Terminal"]

Terminal = RawSilenceExpired | SemanticTimeoutExpired | WallBudgetExpired
Hook = Callable[[Event], None]

_HEARTBEAT = FrameKind.HEARTBEAT
_SEMANTIC = FrameKind.SEMANTIC
_END = FrameKind.END
_ERROR = FrameKind.ERROR
_INF = float("inf")



class RequestSession:
    """State of one logical request across its attempts."""

    def __init__(
        self,
        policy: Policy,
        *,
        provider: str,
        streaming: bool,
        now: float,
        method: str = "POST",
        host: str = "",
        port: int | None = None,
        path: str = "",
        model: str | None = None,
        hooks: Iterable[Hook] = (),
        on_hook_error: Callable[[Hook, Exception], None] | None = None,
        carrier: Mapping[str, str] | None = None,
    ) -> None:
        self.policy = policy
        self.on_hook_error = on_hook_error
        self.profile = profile_for(provider)
        self.streaming = streaming
        self.start = now
        self.wall_deadline = now + policy.wall_timeout if policy.wall_timeout is not None else None
        self.report = RequestReport(
            provider=provider,
            streaming=streaming,
            wall_budget=policy.wall_timeout,
            shadow=policy.shadow,
            model=model,
        )
        self.retry_state = RetryState()
        self.hooks = tuple(hooks)
        self.hook_errors = 0
        self.ended = False
        self.emit(RequestStarted(self.report, method, host, port, path, model, dict(carrier or {})))

    # -- hooks ----------------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        for hook in self.hooks:
            try:
                hook(event)
            except Exception as exc:  # a hook must never change what the application receives
                self.hook_errors += 1
                if self.on_hook_error is not None:
                    self.on_hook_error(hook, exc)

    # -- clocks ---------------------------------------------------------------------------------

    @property
    def raw_idle(self) -> float | None:
        """The raw-silence bound that applies to this request's attempts."""
        policy = self.policy
        if not self.streaming:
            return policy.raw_idle_timeout_non_streaming
        return policy.raw_idle_timeout if self.profile.keepalives else policy.raw_idle_timeout_no_keepalive

    def wall_remaining(self, now: float) -> float | None:
        return None if self.wall_deadline is None else self.wall_deadline - now

    def since(self, now: float) -> float:
        return now - self.start

    # -- attempts -------------------------------------------------------------------------------

    def attempt(self, now: float) -> AttemptSession:
        attempt = AttemptSession(self, len(self.report.attempts), now)
        self.report.attempts.append(attempt.record)
        self.emit(AttemptStarted(self.report, attempt.index, self.since(now), attempt.inject))
        return attempt

    def failed(self, attempt: AttemptSession, failure: Failure, now: float, *, wall_now: float, jitter: float) -> Decision:
        """Ask the retry policy about ``failure``; record and announce the decision."""
        decision = decide(self.retry_state, failure, self.policy, wall_now=wall_now, jitter=jitter)
        self.retry_state = self.retry_state.record(failure, decision)
        self.report.cause = failure.cause
        if isinstance(decision, Retry):
            record = attempt.record
            record.retry_delay = decision.delay
            record.retry_reason = decision.reason
            record.delay_source = decision.source
            self.emit(
                RetryScheduled(
                    self.report,
                    attempt.index,
                    self.since(now),
                    decision.delay,
                    decision.reason,
                    decision.source,
                    decision.rate_limited,
                )
            )
        return decision

    def end(self, now: float, stop_reason: StopReason, cause: str | None = None) -> None:
        """The request is over (exactly once; later calls are ignored)."""
        if self.ended:
            return
        self.ended = True
        self.report.stop_reason = stop_reason
        if cause is not None:
            self.report.cause = cause
        elif stop_reason is StopReason.COMPLETED:
            self.report.cause = None
        self.report.duration = self.since(now)
        self.emit(RequestEnded(self.report, stop_reason))


class AttemptSession:
    """One provider attempt: the scanner, the clocks, the hold buffer and the released prefix."""

    def __init__(self, session: RequestSession, index: int, now: float) -> None:
        policy = session.policy
        self.session = session
        self.index = index
        self.record = AttemptRecord(index=index, started=session.since(now))
        self.clock = AttemptClock(
            now,
            raw_idle=session.raw_idle,
            notice_every=policy.semantic_notice_interval,
            semantic_timeout=policy.semantic_timeout,
            wall_deadline=session.wall_deadline,
            wall_budget=policy.wall_timeout,
        )
        self.scanner = SSEScanner(policy.max_frame_bytes)
        self.facts = StreamFacts()
        self.streaming = session.streaming
        self.shadow = policy.shadow
        self.held: list[bytes] = []
        self.held_bytes = 0
        self.committed = False  # content was released to the caller
        self.done = False  # an end frame arrived
        self.failure: Failure | None = None  # an in-band error already seen
        # Released chunks (references, no copy) up to policy.max_prefix_bytes; joined on demand.
        self._prefix: list[bytes] = []
        self.prefix_room = policy.max_prefix_bytes
        self.released = 0
        self.ended = False
        self.capture: list[tuple[float, bytes]] | None = [] if policy.capture_dir else None
        self.inject: dict[str, str] = {}  # headers hooks add to this attempt's request
        self._lane = Lane(session.profile.semantic_keys, PREFIX, policy.max_frame_bytes, self._prefix)
        #: Times no later than the next notice and than the semantic timeout's deadline (``inf``
        #: for none; never in shadow mode, which enforces nothing): a blocking read may wait until
        #: the earlier without making either late. Refreshed by :meth:`notices`.
        self.wake_hint = self.stop_hint = _INF
        self._refresh_hints()

    # -- inputs ---------------------------------------------------------------------------------

    def sent(self, now: float) -> None:
        self.clock.request_sent(now)

    def headers(self, now: float, status: int, headers: Mapping[str, str]) -> None:
        self.clock.headers(now)
        self.record.status = status
        self.record.request_id = (headers.get("request-id") or headers.get("x-request-id") or "")[:128] or None
        content_type = headers.get("content-type", "")
        if not self.streaming and content_type.startswith("text/event-stream"):
            # Detected late (the request did not say): scan it, but keep the non-streaming raw bound.
            self.streaming = True

    def feed(self, now: float, chunk: bytes) -> bytes:
        """Consume one read; return the bytes to release to the caller now (possibly ``b""``).

        After the call, :attr:`failure` holds an in-band error frame's failure if one arrived
        (pre-content: retryable; after content: a truncation whose bytes were not released).
        Raises :class:`~otel_liveness.core.errors.FrameTooLarge` for an oversized frame.
        """
        self.absorb()
        if self.capture is not None:
            self.capture.append((now - self.clock.started, chunk))
        clock = self.clock
        clock.received(now, len(chunk))
        if not self.streaming:
            self.committed = True  # a JSON body is released as it arrives
            return self._release(chunk)
        kinds = self.session.profile.classify_blocks(self.scanner.feed_blocks(chunk), self.facts)
        if not kinds:
            return self._release(chunk) if self.committed or self.shadow else self._hold(chunk)
        clock.frames_at(now, kinds)
        heartbeats = kinds.count(_HEARTBEAT)
        if heartbeats:
            self.session.emit(Heartbeats(self.session.report, self.index, self.session.since(now), heartbeats, clock.heartbeats))
        if _END in kinds:
            self.done = True
        if _ERROR in kinds:
            return self._error(now, chunk, kinds)
        if self.committed:
            return self._release(chunk)
        if _SEMANTIC in kinds or _END in kinds:
            self._commit()
            return self._release(self._take_held() + chunk)
        return self._release(chunk) if self.shadow else self._hold(chunk)

    def lane(self) -> Lane:
        """Re-arm the steady lane (:mod:`otel_liveness.core.lane`) for the reads that follow and
        return it. Open while the stream is live after content, the previous read was semantic,
        nothing is pending in the scanner and no recorder is capturing; closed otherwise. The
        driver calls ``lane.step(chunk, now)`` on each read and takes the general path when it
        answers False; every method here applies the lane's counts first (:meth:`absorb`)."""
        lane = self._lane
        clock = self.clock
        if (
            self.committed
            and self.streaming
            and not self.done
            and self.failure is None
            and self.capture is None
            and not self.ended
            and self.scanner.idle
        ):
            horizon, step, wall = clock.steady()
            lane.open(horizon, step, wall, clock.last_raw, self.prefix_room)
        else:
            lane.close()
        return lane

    def absorb(self) -> None:
        """Apply the steady lane's reads to the clocks, the released count and the prefix room."""
        lane = self._lane
        if lane.reads:
            reads, nbytes, last, max_gap, room = lane.take()
            self.clock.semantic_reads(reads, nbytes, last, max_gap)
            self.released += nbytes
            self.prefix_room = room

    def eof(self, now: float) -> bytes:
        """The body ended. Returns bytes to release; sets :attr:`failure` if the reply is incomplete."""
        self.absorb()
        if self.capture is not None:
            self.capture.append((now - self.clock.started, b""))
        release = b""
        if self.streaming:
            blocks = self.scanner.close_blocks()
            kinds = self.session.profile.classify_blocks(blocks, self.facts) if blocks else []
            if kinds:
                self.clock.frames_at(now, kinds)
                if _END in kinds:
                    self.done = True
            if not self.done and self.session.profile.eof_is_end:
                self.done = True
            if self.done and not self.committed:
                release = self._release(self._take_held())
            if not self.done and self.failure is None:
                self.failure = Failure(FailureKind.EOF, self.clock.phase, self.committed)
        else:
            self.done = True
        return release

    def poll(self, now: float) -> Terminal | None:
        """Deliver due notices to the hooks; return a terminal clock verdict if one fell due."""
        self.absorb()
        while True:
            item = self.clock.poll(now)
            if isinstance(item, Notice):
                self._emit_notice(item)
                continue
            if isinstance(item, (RawSilenceExpired, SemanticTimeoutExpired, WallBudgetExpired)):
                return item
            return None

    def notices(self, now: float) -> None:
        """Deliver the notices due at ``now`` and nothing else, and refresh :attr:`wake_hint` and
        :attr:`stop_hint`: a blocking read woke and goes back to waiting (or, past the stop
        hint, ends as a timeout that the driver judges); terminal verdicts are not made here."""
        self.absorb()
        while not self.ended:
            item = self.clock.poll_notice(now)
            if item is None:
                break
            self._emit_notice(item)
        self._refresh_hints()

    def _refresh_hints(self) -> None:
        notice, stop = self.clock.hints()
        self.wake_hint = notice
        self.stop_hint = _INF if self.shadow else stop

    def _emit_notice(self, item: Notice) -> None:
        self.record.notices += 1
        session = self.session
        session.emit(
            SemanticNotice(
                session.report,
                self.index,
                session.since(item.at),
                item.number,
                item.semantic_idle,
                item.raw_idle,
                item.heartbeats_since_semantic,
                item.phase,
            )
        )

    def verdict(self, now: float, kind: AttemptOutcome, *, enforced: bool) -> None:
        """Announce a terminal verdict or in-band error (enforced or, in shadow mode, observed)."""
        self.absorb()
        self.session.emit(
            Verdict(self.session.report, self.index, self.session.since(now), kind, self.clock.phase,
                    self.committed, enforced)
        )

    def expired(self, now: float) -> Terminal | None:
        """A read timed out at the attempt's deadline: the verdict due then (``now`` may be a
        hair before the deadline the socket timeout was set for)."""
        deadline = self.deadline()
        return self.poll(max(now, deadline or now))

    def deadline(self) -> float | None:
        """When a terminal verdict could next fall due: the bound for the next blocking read."""
        self.absorb()
        return self.clock.terminal_deadline()

    def finish(self, now: float, outcome: AttemptOutcome, error_type: str | None = None) -> None:
        """Close the attempt's record (exactly once) and announce it."""
        self.absorb()
        if self.ended:
            return
        self.ended = True
        clock = self.clock
        clock.finished(now)
        record = self.record
        record.outcome = outcome
        record.error_type = error_type
        record.phase = Phase.DONE if self.done else clock.phase
        record.duration = now - clock.started
        record.time_to_first_byte = clock.first_byte
        record.time_to_first_semantic = clock.first_semantic
        record.raw_idle = now - clock.last_raw
        record.semantic_idle = 0.0 if self.done else now - clock.last_semantic
        record.max_raw_gap = clock.max_raw_gap
        record.max_semantic_gap = clock.max_semantic_gap
        record.heartbeats = clock.heartbeats
        record.frames = clock.frames
        record.bytes_received = clock.bytes
        record.response_id = self.facts.response_id
        record.usage = dict(self.facts.usage)
        record.stop_detail = self.facts.stop_reason
        session = self.session
        if self.facts.model and not session.report.model:
            session.report.model = self.facts.model
        if self.facts.stop_reason:
            session.report.stop_detail = self.facts.stop_reason
        session.emit(AttemptEnded(session.report, record))

    # -- internals ------------------------------------------------------------------------------

    def _hold(self, chunk: bytes) -> bytes:
        self.held.append(chunk)
        self.held_bytes += len(chunk)
        if self.held_bytes > self.session.policy.max_frame_bytes:
            raise MalformedStream(
                f"{self.held_bytes} bytes arrived before any content (bound {self.session.policy.max_frame_bytes})"
            )
        return b""

    def _take_held(self) -> bytes:
        held = b"".join(self.held)
        self.held.clear()
        self.held_bytes = 0
        return held

    @property
    def prefix(self) -> bytes:
        """The released bytes (up to ``max_prefix_bytes``), in order."""
        self.absorb()
        return b"".join(self._prefix)

    def _commit(self) -> None:
        self.committed = True
        self.clock.released()

    def _release(self, data: bytes) -> bytes:
        self.released += len(data)
        if self.prefix_room > 0:
            kept = data[: self.prefix_room]
            self._prefix.append(kept)
            self.prefix_room -= len(kept)
        return data

    def _error(self, now: float, chunk: bytes, kinds: list[FrameKind]) -> bytes:
        """An in-band error frame: content before it (in earlier reads or this one) is released;
        the error frame and anything after it is not (unless in shadow mode)."""
        first_error = kinds.index(_ERROR)
        content_first = _SEMANTIC in kinds[:first_error] or _END in kinds[:first_error]
        committed = self.committed or content_first
        self.failure = Failure(
            FailureKind.ERROR_EVENT, self.clock.phase, committed, error_type=self.facts.error_type
        )
        self.verdict(now, AttemptOutcome.PROVIDER_ERROR, enforced=not self.shadow)
        if self.shadow:
            if content_first:
                self._commit()
            return self._release(chunk)
        if not committed:
            return b""  # pre-content: the whole attempt is discarded and retried
        head = chunk[: self._error_offset(chunk)]
        if not self.committed:
            self._commit()
            head = self._take_held() + head
        return self._release(head)

    def _error_offset(self, chunk: bytes) -> int:
        """Where the first error frame starts in the raw ``chunk`` (0 if it began in an earlier read)."""
        profile = self.session.profile
        frames: list[Any] = []
        probe = StreamFacts()
        for block in SSEScanner(1 << 62).feed_blocks(chunk + b"\n\n"):
            frames.clear()
            parse_block(block, frames)
            if any(profile.classify(f, probe) is _ERROR for f in frames):
                for candidate in (block, block.replace(b"\n", b"\r\n"), block.replace(b"\n", b"\r")):
                    pos = chunk.find(candidate)
                    if pos >= 0:
                        return pos
                return 0
        return 0
