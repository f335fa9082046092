"""The engine: one logical request and its provider attempts, as a sans-I/O state machine.

A driver (``otel_liveness/transport``) turns every I/O outcome into one call here and executes
the :mod:`command <otel_liveness.core.commands>` it gets back -- h11's ``Connection``, with
commands instead of events::

    engine = Engine(policy, facts, now, ...)
    command = engine.start(now)                 # Send
    # ... send;                                 engine.headers(now, status, headers)
    # ... read a chunk;                         engine.received(now, chunk)
    # ... end of body;                          engine.eof(now)
    # ... a read timed out;                     engine.timed_out(now, exc)
    # ... connect/read error;                   engine.io_error(now, IOFailure.READ, exc)
    # ... slept after Sleep;                    engine.slept(now)
    # ... the caller closed / was cancelled;    engine.closed(now) / engine.abandoned(now, exc)

The request is in one :class:`~.state.State` at a time; :mod:`.state` holds which input is legal
in which state (else :class:`~.errors.IllegalInput`) and which state may follow which. The engine
decides; its parts keep the books (``docs/architecture.md`` maps them): :mod:`.attempt` one
attempt's, :mod:`.clocks` every bound and verdict and when a waiting read wakes, :mod:`.retry`
which failures are retried, when, and within the host's budget, :mod:`.report` the ending
sequence and the typed errors. Shadow mode is read once, at the request's start (no retry
budget, no exhausted-call cache): where a failure is decided it is observed and reported, never
acted on, and each attempt keeps nothing back (``Attempt(keeps=False)``: it retries nothing).

Liveness is judged on the wire: bytes count as progress the moment they are read, so a caller
that paused between reads is never mistaken for a dead provider; wire silence is a verdict only
for a read that waited the whole bound. The steady lane (:mod:`.lane`) takes the per-read hot
path of a live stream; every input applies its counts first (``_settle``, which
:func:`~.state.input_method` calls).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, ParamSpec

from .. import errors as E
from ..attempt.attempt import HOLD_VERBATIM_BYTES, JSON_PROBE_BYTES, Attempt
from ..attempt.clocks import NO_HINTS, TOLERANCE, AttemptClock, Terminal, WallBudgetExpired
from ..attempt.retry import (
    Failure,
    FailureKind,
    GiveUp,
    Reject,
    Relay,
    Retry,
    RetryState,
    attempt_outcome,
    failure_kind,
    settle,
    verdict_outcome,
)
from ..commands import COMPLETE, READ, Command, Complete, Fail, Read, Release, Reraise, Respond, Send, Sleep
from ..events import AttemptStarted, Hook, RequestStarted, RetryDenied
from ..memory.budget import HostBudget, RetryBudgets
from ..memory.caches import CadenceMemory, ExhaustedCache
from ..outcome import AttemptOutcome, StopReason
from ..policy import Policy
from ..wire.lane import Lane, LaneLike
from ..wire.providers import profile_for, response_profile, semconv_provider
from . import report as R
from .facts import RequestFacts
from .state import TRANSITIONS, IOFailure, State, input_method

__all__ = ["HOLD_VERBATIM_BYTES", "JSON_PROBE_BYTES", "TOLERANCE", "Engine", "IOFailure", "State"]

_IDLE, _SENDING, _HOLDING, _RESPONDED, _SLEEPING, _EXPIRING, _ENDED = State

P = ParamSpec("P")


class Engine:
    """One logical request across its attempts (see the module docstring).

    Inputs are the methods marked :func:`~.state.input_method`; outputs are the commands they return, the
    hooks they call, and :attr:`published` -- the JSON-serialisable report the caller sees as
    ``response.extensions["liveness"]``, refreshed in place. ``wall_now`` and ``jitter`` are
    the caller's sources of epoch time (for HTTP dates) and backoff jitter in ``[0, 1)``;
    ``keep_body`` is the driver's way to keep a streamed request body for a retry (up to
    ``Policy.max_replay_body_bytes``), called here unless in shadow mode, which retries nothing;
    it answers :attr:`body_replayable`, asked when a retry is due (past the bound a retry becomes
    :class:`~.errors.BodyNotReplayable`, never an empty or partial re-send); ``lock`` (re-entrant)
    serialises the inputs when more than one thread may call them.
    """

    def __init__(
        self,
        policy: Policy,
        facts: RequestFacts,
        now: float,
        *,
        provider: str,
        hooks: Iterable[Hook] = (),
        on_hook_error: Callable[[Hook, Exception], None] | None = None,
        wall_now: Callable[[], float] = lambda: 0.0,
        jitter: Callable[[], float] = lambda: 0.0,
        exhausted: ExhaustedCache[Fail] | None = None,
        cadence: CadenceMemory | None = None,
        keep_body: Callable[[], Callable[[], str | None] | None] | None = None,
        lock: AbstractContextManager[object] | None = None,
        budgets: RetryBudgets | None = None,
        canary: R.Canary | None = None,
    ) -> None:
        #: Held by every input (re-entrant: ``timed_out`` answers through ``io_error``).
        self._lock: AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        self.policy = policy
        self.facts = facts
        self.profile = profile_for(provider)
        self.wall_now = wall_now
        self.jitter = jitter
        #: Shadow mode (read here once): every failure is only observed and reported, never acted on.
        self.shadow = shadow = policy.shadow
        #: An SDK retry of a call this transport exhausted gets its error again (never in shadow mode).
        self.exhausted = exhausted if not shadow else None
        self.cadence = cadence
        #: Asked when a retry is due: ``None`` when the request body can be sent again, else why not.
        self.body_replayable = keep_body() if keep_body is not None and not shadow else None
        #: The request's host's retry budget (shadow mode retries nothing: none).
        rule = policy.budget_rule()
        self.budget: HostBudget | None = (
            budgets.for_host(facts.host, rule, now, semconv_provider(provider, facts.host))
            if budgets is not None and rule is not None and not shadow else None)
        self.start_time = now
        self.wall_deadline = now + policy.wall_timeout if policy.wall_timeout is not None else None
        self.state = _IDLE
        self.reporter = R.Reporter.for_request(provider, facts, policy, now, tuple(hooks), on_hook_error, cadence,
                                               canary, shadow=shadow)
        self.report = self.reporter.report
        self.published: dict[str, Any] = self.reporter.published
        self._emit = self.reporter.emit
        self.retry_state = RetryState()
        self.attempt: Attempt | None = None
        self._first: list[bytes] = []  # released before the response: its first bytes
        #: :class:`~.clocks.Hints` for reads that wait below the HTTP library, refreshed after every
        #: input: a read started at ``start`` wakes at ``clocks.wake_at(*hints, start)``.
        self.wake_hint, self.stop_hint, self.raw_hint = NO_HINTS

    # -- facts about this request ---------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.state is _ENDED

    @property
    def hooks(self) -> tuple[Hook, ...]:
        return self.reporter.hooks

    @hooks.setter
    def hooks(self, hooks: Iterable[Hook]) -> None:
        self.reporter.hooks = tuple(hooks)

    @property
    def hook_errors(self) -> int:
        return self.reporter.hook_errors

    @property
    def lane(self) -> LaneLike:
        """The current attempt's steady lane: ``lane.step(chunk, now)`` True releases the chunk as
        is; otherwise the driver calls :meth:`received`. Re-armed after every input."""
        return self._current().lane

    def since(self, now: float) -> float:
        return now - self.start_time

    def _to(self, state: State) -> None:
        """Move to ``state`` (one of :data:`~.state.TRANSITIONS`; staying is no move)."""
        if state is not self.state:
            if state not in TRANSITIONS[self.state]:
                raise E.IllegalInput(f"(a move to {state.value})", self.state.value)
            self.state = state

    # -- inputs ---------------------------------------------------------------------------------

    @input_method
    def start(self, now: float) -> Command:
        """Begin: the first attempt -- or, for an SDK retry of a call this transport already
        exhausted, the same error again at once (no attempt, no telemetry: it was all reported).
        A fresh call (not an SDK retry) ends what the cache remembers for its key first."""
        facts = self.facts
        if self.exhausted is not None and facts.key is not None:
            cached = self.exhausted.began(facts.key, facts.sdk_retry, now)
            if cached is not None:
                self._to(_ENDED)
                return cached
        self._emit(RequestStarted(self.report, facts.method, facts.host, facts.port, facts.path, facts.model,
                                  dict(facts.carrier), facts.body_size, facts.propagate, self.policy.propagate_baggage,
                                  facts.sdk_traced))
        return self._send(now)

    @input_method
    def headers(self, now: float, status: int, headers: Mapping[str, str]) -> Command:
        """The attempt's response headers arrived (``headers`` keys lower-case)."""
        self._to(_HOLDING)
        attempt = self._current()
        clock = attempt.clock
        attempt.headers_arrived(now, status, headers)
        if status >= 400 or (headers.get("x-should-retry") == "true" and status >= 300):
            failure = Failure(FailureKind.STATUS, clock.phase, status=status, headers=dict(headers))
            return self._failed(now, failure, status_response=True)
        if 300 <= status < 400:
            self._conclude(now, AttemptOutcome.REDIRECTED, None, StopReason.REDIRECTED, None)
            return self._respond(passthrough=True)
        content_type = headers.get("content-type", "").lower()
        profile = response_profile(self.profile, content_type)
        if profile is not self.profile:  # the response says what the URL did not
            self.profile = profile
            self.report.provider = self.profile.name
            self.report.provider_name = semconv_provider(self.profile.name, self.facts.host)
        if attempt.read_as(content_type, headers.get("content-encoding"), self.profile, self.policy):
            self._refresh_hints()
            return READ  # held: the caller gets the response at the first content
        return self._respond()

    @input_method
    def received(self, now: float, chunk: bytes) -> Command | bytes:
        """A chunk of the body was read. Before the response, answers a command (``READ`` while
        holding, :class:`Respond` at the first content, or the failure's command); after it, the
        bytes to release (possibly none) or a terminal command. After the request ended (a close
        raced the read), the chunk as it came."""
        state = self.state
        if state is _ENDED:
            return chunk
        attempt = self._current()
        clock = attempt.clock
        if attempt.capture is not None:
            attempt.capture_item(now, chunk)
        self._observe_gap(now, attempt)
        clock.received(now, len(chunk))
        release = self._judged(now, attempt, chunk, attempt.read, now, chunk)
        if isinstance(release, Fail):
            return release
        if attempt.error is not None:
            return self._answer(state, release, self._failed(now, attempt.error))
        terminal = attempt.poll(now)
        if terminal is not None:
            if self.shadow:
                self._observe(now, attempt, terminal)
            else:
                return self._answer(state, release, self._expire(now, terminal))
        if state is _HOLDING:
            if release:
                self._first.append(release)
            if attempt.committed or attempt.done:
                return self._respond()
            self._refresh_hints()
            return READ
        self._arm_lane()
        return release

    @input_method
    def eof(self, now: float) -> Command | bytes:
        """The body ended cleanly (after the request ended: answered as it came, complete)."""
        state = self.state
        if state is _ENDED:
            return COMPLETE
        attempt = self._current()
        attempt.capture_item(now, None)
        self._observe_gap(now, attempt)
        if attempt.scanned:
            release = self._judged(now, attempt, b"", attempt.end_of_body, now, self.profile.eof_is_end)
            if isinstance(release, Fail):
                return release
        else:
            release, probed = attempt.unframed_end(now)
            if probed is not None:  # a probed JSON body that is an error object
                return self._failed(now, probed, at_eof=True)
        if not attempt.done:
            failure = attempt.error if attempt.error is not None else Failure(
                FailureKind.EOF, attempt.clock.phase, attempt.committed)
            return self._answer(state, release, self._failed(now, failure, at_eof=True))
        self._complete(now)
        return self._answer(state, release, COMPLETE)

    @input_method
    def timed_out(self, now: float, exc: BaseException) -> Command:
        """A read (of headers or body) timed out; ``exc`` is what the HTTP library raised."""
        attempt = self._read_failed(now, exc)
        if not isinstance(attempt, Attempt):
            return attempt
        if self.shadow:  # shadow mode ends no read: the timeout is the caller's or the network's
            return self.io_error(now, IOFailure.READ, exc)
        expired = attempt.clock.read_verdict(now)
        if expired is None and attempt.callers_timeout(self.facts.read_timeout):
            # The caller's own read timeout, shorter than our bound: the caller's verdict on the
            # wait, not the provider's failure -- not retried (that would multiply the wait the
            # caller bounded); the request ends as the caller ended it, the timeout raised as it came.
            self._conclude(now, AttemptOutcome.CANCELLED, "caller_timeout", StopReason.CANCELLED, "caller_timeout")
            return Reraise(exc)
        if expired is None:  # a broken read (a truncation after content, of the timeout's class)
            return self.io_error(now, IOFailure.READ, exc)
        return self._expire(now, expired, exc)

    @input_method
    def io_error(self, now: float, kind: IOFailure, exc: BaseException) -> Command:
        """The connection failed (``CONNECT``: before the server got the request), or the HTTP
        library refused to send it (``LOCAL``: never retried, raised as it came)."""
        attempt = self._read_failed(now, exc)
        if not isinstance(attempt, Attempt):
            return attempt
        if kind is IOFailure.LOCAL:
            self._conclude_failure(now, Failure(FailureKind.LOCAL_ERROR, attempt.clock.phase, attempt.committed))
            return Reraise(exc)
        self._observe_gap(now, attempt)
        failure_kind = FailureKind.CONNECT_ERROR if kind is IOFailure.CONNECT else FailureKind.READ_ERROR
        attempt.capture_item(now, failure_kind.value)
        opaque = attempt.breaks_as_opaque(self.state is _RESPONDED)
        failure = Failure(failure_kind, attempt.clock.phase, attempt.committed)
        if opaque:
            self._conclude_failure(now, failure)
            return Reraise(exc)
        return self._failed(now, failure, exc=exc)

    @input_method
    def slept(self, now: float) -> Command:
        """The :class:`Sleep` is over: the next attempt, or the wall budget's end."""
        if self.state is _EXPIRING:
            return self._wall_timeout(now, None)
        return self._send(now)

    @input_method
    def closed(self, now: float) -> None:
        """The caller closed the body before its end. After the reply's stop reason (its finish
        reason was on the wire and released) that is a completed reply, not a cancellation:
        clients close once they have what they need (litellm's sync Anthropic path closes after
        ``message_delta``, before ``message_stop``, on every call)."""
        self._cancelled(now, "closed", "closed", whole=True)

    @input_method
    def abandoned(self, now: float, exc: BaseException) -> None:
        """An exception that is not the engine's answer escaped the driver (the task was cancelled,
        the host raised): the attempt and request end as cancelled, once -- or as completed when
        the reply's stop reason had already arrived (as :meth:`closed`)."""
        self._cancelled(now, type(exc).__name__, "cancelled", whole=self.state is _RESPONDED)

    @input_method
    def woke(self, now: float, start: float) -> bool:
        """A read that started at ``start`` woke at ``now`` -- at :func:`~.clocks.wake_at` -- with nothing
        read: deliver the notices due, and answer True when a terminal deadline has passed (the
        read must end; :meth:`timed_out` then answers the verdict). Refreshes the hints."""
        attempt = self._notices(now)
        if attempt is None:
            return False
        if not self.shadow and attempt.clock.expired(now + TOLERANCE, start) is not None:
            return True  # recorded by the clock: timed_out answers it (AttemptClock.read_verdict)
        self._refresh_hints()
        return False

    @input_method
    def notify(self, now: float) -> None:
        """Deliver the notices due at ``now`` and refresh the hints; never a verdict. For a driver
        that wakes on behalf of a stream it does not read for (an HTTP/2 sibling waiting for the
        shared connection, whose next bytes may already be queued): its deadlines are its own
        reader's to judge, with :meth:`woke`."""
        if self._notices(now) is not None:
            self._refresh_hints()

    # -- what the inputs share ------------------------------------------------------------------

    def _judged(self, now: float, attempt: Attempt, unjudged: bytes,
                judge: Callable[P, bytes], *args: P.args, **kwargs: P.kwargs) -> bytes | Fail:
        """Judge the body (``judge``: the attempt's :meth:`~.attempt.Attempt.read` or
        :meth:`~.attempt.Attempt.end_of_body`): the bytes to release. A body that cannot be
        judged (a frame over the bound, a corrupt frame, an encoding that fails) ends the request
        as malformed; any other error of the judging is a bug, raised. Shadow mode never kills:
        the malformed body it would have been is observed, and the body goes on unjudged from
        here, ``unjudged`` (the read's chunk) released as it came (:meth:`~.attempt.Attempt.unjudged`)
        -- whatever the judging raised, a fault of the judging itself included."""
        try:
            return judge(*args, **kwargs)
        except Exception as exc:
            if self.shadow:
                self.reporter.observe(Failure(FailureKind.MALFORMED, attempt.clock.phase, attempt.committed))
                return attempt.unjudged(unjudged)
            if isinstance(exc, (E.MalformedStream, ValueError)):
                return self._malformed(now, exc)
            raise

    def _cancelled(self, now: float, error_type: str, cause: str, *, whole: bool) -> None:
        """What :meth:`closed` and :meth:`abandoned` do: end the live attempt and the request as
        cancelled -- or completed, when ``whole`` may hold and the reply's stop reason arrived."""
        attempt = self.attempt
        if attempt is None or self.state is _ENDED:
            return
        if whole and attempt.finished_reply():
            self._complete(now)
        else:
            self._conclude(now, AttemptOutcome.CANCELLED, error_type, StopReason.CANCELLED, cause)

    def _read_failed(self, now: float, exc: BaseException) -> Attempt | Command:
        """What :meth:`timed_out` and :meth:`io_error` open with: the command when the failed
        read is no failure -- the request already ended (the caller closed the body, or abandoned
        it, and the read under it failed: not the provider's failure, and the request's verdict is
        already given; raised as it came), or the reply was whole (after the end frame nothing was
        lost: complete) -- else the attempt the failure is judged for."""
        if self.state is _ENDED:
            return Reraise(exc)
        attempt = self._current()
        if attempt.done:
            self._complete(now)
            return COMPLETE
        return attempt

    def _notices(self, now: float) -> Attempt | None:
        """Deliver the notices due at ``now`` (:meth:`woke`, :meth:`notify`): the live attempt, or
        ``None`` when there is none (before the first, or after the last attempt ended)."""
        attempt = self.attempt
        if attempt is None or attempt.ended:
            return None
        attempt.notices(now)
        return attempt

    # -- the attempt ----------------------------------------------------------------------------

    def _settle(self) -> None:
        """First thing in every input (``state.input_method``): the steady lane's reads since the
        last input, handed over to the attempt (:meth:`~..attempt.attempt.Attempt.absorb_lane`)."""
        attempt = self.attempt
        if attempt is not None:
            attempt.absorb_lane()

    def _current(self) -> Attempt:
        attempt = self.attempt
        if attempt is None:  # only start() and the inputs legal in IDLE run without one
            raise E.IllegalInput("(an attempt's input)", self.state.value)
        return attempt

    def _send(self, now: float) -> Send:
        self._to(_SENDING)
        policy, facts = self.policy, self.facts
        streaming = facts.streaming
        learned = None
        if policy.raw_idle_adaptive and self.cadence is not None:
            learned = self.cadence.learned(facts.host)
        clock = AttemptClock.for_attempt(now, policy, streaming=streaming, keepalives=self.profile.keepalives,
                                         body_size=facts.body_size, learned=learned,
                                         wall_deadline=self.wall_deadline)
        attempt = Attempt(len(self.report.attempts), now - self.start_time, clock, policy, self.profile,
                          streaming=streaming, lane_class=Lane, reporter=self.reporter, keeps=not self.shadow)
        self.attempt = attempt
        self.report.attempts.append(attempt.record)
        self._first = []
        inject: dict[str, str] = {}  # headers the hooks add to this attempt's request
        self._emit(AttemptStarted(self.report, attempt.index, self.since(now), inject))
        clock.request_sent(now)
        self._refresh_hints()
        # Shadow mode sets no socket read timeout of its own: it never ends a read.
        timeout = None if self.shadow else clock.read_timeout(now, self.facts.read_timeout)
        return Send(timeout, dict(inject))

    # -- clocks ---------------------------------------------------------------------------------

    def _arm_lane(self) -> None:
        """Re-arm the lane for the reads that follow (:meth:`.attempt.Attempt.arm_lane`)."""
        attempt = self.attempt
        if attempt is not None:
            attempt.arm_lane()
        self._refresh_hints()

    def _refresh_hints(self) -> None:
        attempt = self.attempt
        if attempt is None or attempt.ended:
            self.wake_hint, self.stop_hint, self.raw_hint = NO_HINTS
        else:
            self.wake_hint, self.stop_hint, self.raw_hint = attempt.clock.hints(not self.shadow)

    # -- decisions ------------------------------------------------------------------------------

    def _observe(self, now: float, attempt: Attempt, verdict: Terminal | None) -> None:
        """Shadow mode: a clock ran out (``verdict``, found at ``now``); the first failure is kept as
        the reporter's ``observed`` and its verdict reported, and nothing else changes."""
        if verdict is None or self.reporter.observed is not None:
            return
        self.reporter.observe(Failure(failure_kind(verdict), verdict.phase, attempt.committed))
        self.reporter.verdict(min(now, verdict.at), attempt.index, verdict_outcome(verdict), verdict.phase,
                              attempt.committed)

    def _observe_gap(self, now: float, attempt: Attempt) -> None:
        """Shadow mode: bytes arrived at ``now`` after a silence longer than the bound (the clock's
        ``observed_gap``): the verdict enforcement would have given -- or a wall or semantic
        deadline met before it, first -- reported (:meth:`_observe`). Enforcing, such a silence ended
        the read: nothing to observe."""
        if not self.shadow or self.reporter.observed is not None:
            return
        verdict = attempt.clock.observed_gap(now)
        if verdict is not None:
            self._observe(verdict.at, attempt, attempt.poll(verdict.at))
            self._observe(now, attempt, verdict)

    def _expire(self, now: float, verdict: Terminal, exc: BaseException | None = None) -> Command:
        """A clock ran out (enforced)."""
        attempt = self._current()
        self.reporter.verdict(now, attempt.index, verdict_outcome(verdict), verdict.phase, attempt.committed)
        if isinstance(verdict, WallBudgetExpired):
            return self._wall_timeout(now, attempt)
        return self._failed(now, Failure(failure_kind(verdict), verdict.phase, attempt.committed), exc=exc)

    def _failed(self, now: float, failure: Failure, *, status_response: bool = False,
                exc: BaseException | None = None, at_eof: bool = False) -> Command:
        """The one place a failure becomes a command. Shadow mode, as one rule: a failure the
        attempt only observes changes nothing the caller sees -- everything passes through as it
        came, and what would have happened is reported; otherwise the retry policy decides.
        ``at_eof``: the body has ended."""
        attempt = self._current()
        if self.shadow:
            observed = self.reporter.observe(failure)
            self._conclude_failure(now, observed)  # the first failure: what enforcement would have acted on
            if status_response:
                return self._respond(passthrough=True)
            if exc is not None:
                return Reraise(exc)
            # the body goes on as it comes (an error frame), or it ended as it came (EOF): reported as observed
            return COMPLETE if at_eof else READ
        if status_response and (self.facts.statuses_above or self.facts.once or not self.policy.retry_statuses):
            # An SDK component above recovers from this status itself (its refusal-fallback
            # middleware's requests; every request with retry_statuses off), or the request must
            # not be sent twice (facts.once): its to act on, at once.
            self._conclude(now, attempt_outcome(failure), R.error_type(failure), StopReason.DEFERRED, failure.cause)
            return self._respond(passthrough=True)
        decision, denied = settle(self.retry_state, failure, self.policy, now, wall_now=self.wall_now(),
                                  jitter=self.jitter(), once=self.facts.once, budget=self.budget)
        if denied is not None and self.budget is not None:
            self._emit(RetryDenied(self.report, attempt.index, self.since(now), denied.reason, self.budget.fill(now)))
        problem = None
        if isinstance(decision, Retry) and self.body_replayable is not None:
            problem = self.body_replayable()
            if problem is not None:
                decision = GiveUp(decision.reason, decision.rate_limited)
        self.retry_state = self.retry_state.record(failure, decision)
        self.report.cause = failure.cause
        if isinstance(decision, Retry):
            return self._retry(now, attempt, failure, decision)
        outcome, error_type = attempt_outcome(failure), R.error_type(failure)
        if problem is not None:
            # A retry was due but the body cannot be sent again: the request ends here, typed (a
            # status response too: the caller gets the error, not the response of a request that
            # could not be retried).
            self._conclude(now, outcome, error_type, StopReason.NOT_REPLAYABLE, failure.cause)
            return R.not_replayable(failure, problem, len(self.report.attempts), self.policy.max_replay_body_bytes, exc)
        if status_response:
            mark = isinstance(decision, GiveUp) and self.policy.mark_exhausted_responses
            self._conclude(now, outcome, error_type, R.stop_reason(decision), failure.cause)
            return self._respond(passthrough=True, replace=(("x-should-retry", "false"),) if mark else ())
        if failure.kind is FailureKind.ERROR_EVENT and not failure.committed and attempt.scanned:
            # The provider's error frame before content, not (or no longer) retried: the caller gets
            # the attempt as sent (held bytes, the error, the rest), so the SDK raises its own status
            # error. (A 2xx JSON error object on a streaming request ends as the typed error below.)
            self._conclude(now, outcome, error_type, R.stop_reason(decision), failure.cause)
            self._first = [attempt.take_held()]
            return self._respond(then=COMPLETE if at_eof else READ)
        if isinstance(decision, Relay):
            # The provider's error frame after content: its answer, passed on as sent (the read
            # that carried it was released whole; what follows goes on as it comes, the request
            # over) -- the SDK raises its own error from it. Not a truncation: nothing died.
            self._conclude(now, outcome, error_type, StopReason.TRUNCATED, failure.cause)
            return COMPLETE if at_eof else READ
        if not isinstance(decision, (GiveUp, Reject)):  # Truncate: content was released
            self._conclude(now, AttemptOutcome.TRUNCATED, error_type, StopReason.TRUNCATED, failure.cause)
            return R.truncation(attempt, failure, len(self.report.attempts), exc)
        self._conclude(now, outcome, error_type, R.stop_reason(decision), failure.cause)
        return self._remember(now, R.provider_error(failure, decision, len(self.report.attempts), exc))

    def _retry(self, now: float, attempt: Attempt, failure: Failure, decision: Retry) -> Command:
        self.reporter.retried(attempt.record, now, decision)
        self._conclude(now, attempt_outcome(failure), R.error_type(failure), None, None)
        delay = decision.delay
        if self.wall_deadline is not None and now + delay >= self.wall_deadline:
            self._to(_EXPIRING)  # the backoff reaches the budget's end: slept() ends the request
            return Sleep(max(self.wall_deadline - now, 0.0))
        self._to(_SLEEPING)
        return Sleep(delay)

    def _wall_timeout(self, now: float, attempt: Attempt | None) -> Fail:
        if attempt is not None:
            self._conclude(now, AttemptOutcome.WALL_BUDGET, "wall_budget", StopReason.WALL_BUDGET, "wall_budget")
        else:
            self._end(now, StopReason.WALL_BUDGET, "wall_budget")
        return self._remember(now, R.wall_timeout(self.policy.wall_timeout or 0.0, attempt, len(self.report.attempts)))

    def _malformed(self, now: float, exc: Exception) -> Fail:
        self._conclude(now, AttemptOutcome.MALFORMED, "malformed", StopReason.MALFORMED, "malformed")
        return self._remember(now, R.malformed(exc))

    def _remember(self, now: float, fail: Fail) -> Fail:
        """An error the request ended with: an SDK retry of the same call gets it again (never
        in shadow mode: no cache)."""
        if self.exhausted is not None and self.facts.key is not None:
            self.exhausted.put(self.facts.key, fail, now)
        return fail

    def _answer(self, before: State, release: bytes, command: Command) -> Command | bytes:
        """``command`` after ``release``, for an input that began in state ``before``: in the
        body, a :class:`Release` when there are bytes; before the response, the bytes join its
        first bytes, and a failure or the end after released content becomes the response, whose
        body then ends that way."""
        if before is _HOLDING:
            if release:
                self._first.append(release)
            if isinstance(command, Complete) or (isinstance(command, (Fail, Read)) and self._first):
                return self._respond(then=command)
            return command
        if isinstance(command, Read):  # the body goes on: the bytes now
            return release
        if release and isinstance(command, (Fail, Reraise, Complete)):
            return Release(release, command)
        return command

    def _respond(self, *, then: Read | Complete | Fail = READ, passthrough: bool = False,
                 replace: tuple[tuple[str, str], ...] = ()) -> Respond:
        if self.state is not _ENDED:
            self._to(_RESPONDED)
        first = b"".join(self._first)
        self._first = []
        self.reporter.publish()
        if not passthrough and self.attempt is not None:
            self._arm_lane()
        return Respond(first, then, passthrough, replace)

    # -- the ending sequence (:mod:`.report` runs it) --------------------------------------------

    def _complete(self, now: float) -> None:
        if self.budget is not None:
            self.budget.answered(now)
        self._conclude(now, AttemptOutcome.COMPLETED, None, StopReason.COMPLETED, None)

    def _conclude_failure(self, now: float, failure: Failure) -> None:
        """End the attempt and the request with ``failure`` as observed (not retried)."""
        self._conclude(now, attempt_outcome(failure), R.error_type(failure), R.observed_stop(failure), failure.cause)

    def _conclude(self, now: float, outcome: AttemptOutcome, error_type: str | None,
                  stop: StopReason | None, cause: str | None) -> None:
        """End the current attempt (exactly once) and, when ``stop`` is given, the request. In
        shadow mode an attempt that completed on the wire but would have failed is reported with
        the failure it would have had."""
        attempt = self._current()
        if not attempt.ended:
            observed = self.reporter.observed
            if outcome is AttemptOutcome.COMPLETED and observed is not None:  # (shadow mode's only)
                outcome, error_type = attempt_outcome(observed), R.error_type(observed)
                stop, cause = R.observed_stop(observed), observed.cause
            self.reporter.end_attempt(now, attempt, outcome, error_type)
            self._refresh_hints()
        if stop is not None:
            self._end(now, stop, cause)

    def _end(self, now: float, stop: StopReason, cause: str | None) -> None:
        """The request is over (exactly once; later calls are ignored)."""
        if self.state is _ENDED:
            return
        self._to(_ENDED)
        self.reporter.end_request(now, stop, cause)
