"""The ending sequence, and the errors a request ends with.

Every attempt ends exactly once and every request exactly once, in one order -- the attempt's
record filled in, the recorder's capture closed, :class:`~.events.AttemptEnded` to the hooks;
then, when the request is over, its report's stop reason and duration, the published report
refreshed, :class:`~.events.RequestEnded` to the hooks. :class:`Reporter` runs that sequence and
owns what it writes: the :class:`~.outcome.RequestReport`, the published dict the caller holds as
``response.extensions["liveness"]``, and the hooks (a hook that raises is counted, never felt by
the application).

The functions below name what the engine decided: the outcome and ``error.type`` of a failure,
the stop reason of a decision, and the typed error (a :class:`~.commands.Fail`) a request ends
with -- exhausted, rejected, rate limited, truncated, out of wall budget, malformed, or with a
body that cannot be sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import errors as E
from ..attempt.attempt import Attempt
from ..attempt.clocks import Notice
from ..attempt.retry import Decision, Failure, FailureKind, GiveUp, Reject, Retry, attempt_outcome, failure_kind, verdict_outcome
from ..capture.recording import recording_meta
from ..capture.timing import TimingCapture
from ..commands import Fail
from ..events import (
    AttemptEnded,
    CandidateVerdict,
    CaptureItem,
    Event,
    Heartbeats,
    Hook,
    RequestEnded,
    RetryScheduled,
    SemanticNotice,
    Verdict,
)
from ..memory.caches import CadenceMemory
from ..outcome import AttemptOutcome, AttemptRecord, NoticeKind, Phase, RequestReport, StopReason
from ..wire.providers import semconv_provider

if TYPE_CHECKING:
    from ..policy import Policy
    from .facts import RequestFacts

#: The candidate policies' judge of an ended attempt (:func:`~.canary.judge_candidates` with the
#: candidates bound): (its capture, its recording's meta) -> each candidate's verdict. Never raises.
Canary = Callable[[Sequence[tuple[float, CaptureItem]], Mapping[str, Any]], tuple[CandidateVerdict, ...]]

__all__ = [
    "Reporter",
    "error_type",
    "failure_kind",
    "malformed",
    "not_replayable",
    "observed_stop",
    "provider_error",
    "stop_reason",
    "truncation",
    "verdict_outcome",
    "wall_timeout",
]


class Reporter:
    """The ending sequence of one request and its attempts (see the module docstring)."""

    __slots__ = ("_beat_hooks", "body_size", "cadence", "canary", "hook_errors", "hooks", "host", "observed",
                 "on_hook_error", "published", "report", "start_time")

    def __init__(self, report: RequestReport, start_time: float, hooks: tuple[Hook, ...],
                 on_hook_error: Callable[[Hook, Exception], None] | None, cadence: CadenceMemory | None,
                 host: str, canary: Canary | None = None, body_size: int | None = None) -> None:
        self.report = report
        self.start_time = start_time
        self.hooks = hooks
        self.on_hook_error = on_hook_error
        self.hook_errors = 0
        self.cadence = cadence
        self.host = host
        #: The candidate policies' judge (``Policy.candidates``): asked at the end of every attempt.
        self.canary = canary
        self.body_size = body_size
        #: Shadow mode: the first failure observed -- what enforcement would have acted on, in the
        #: request's one attempt (shadow mode retries nothing) -- reported as its outcome.
        self.observed: Failure | None = None
        self.published: dict[str, Any] = {}
        #: (the hooks, those of them that take this request's Heartbeats), asked at the first heartbeat
        self._beat_hooks: tuple[tuple[Hook, ...], tuple[Hook, ...]] | None = None
        self.publish()

    @classmethod
    def for_request(cls, provider: str, facts: RequestFacts, policy: Policy, start_time: float, hooks: tuple[Hook, ...],
                    on_hook_error: Callable[[Hook, Exception], None] | None, cadence: CadenceMemory | None,
                    canary: Canary | None = None, *, shadow: bool = False) -> Reporter:
        """The reporter of a request about to start (its report's provider, streaming, wall budget
        and model from the request and the policy; ``shadow``: the engine's mode)."""
        report = RequestReport(provider=provider, streaming=facts.streaming, wall_budget=policy.wall_timeout,
                               shadow=shadow, model=facts.model,
                               provider_name=semconv_provider(provider, facts.host))
        return cls(report, start_time, hooks, on_hook_error, cadence, facts.host, canary, facts.body_size)

    def emit(self, event: Event) -> None:
        self._emit_to(self.hooks, event)

    def observe(self, failure: Failure) -> Failure:
        """Shadow mode: ``failure`` was observed (the engine's clocks and judging, the attempt's
        in-band error frames); the first is kept. Answers the one kept."""
        if self.observed is None:
            self.observed = failure
        return self.observed

    def verdict(self, at: float, attempt: int, outcome: AttemptOutcome, phase: Phase, committed: bool) -> None:
        """The one maker of :class:`~..events.Verdict`: a verdict on attempt ``attempt`` at ``at`` (a
        clock that ran out, an in-band error), enforced unless the request is in shadow mode. The
        engine's, and the attempt's for the in-band errors it finds as it reads."""
        self.emit(Verdict(self.report, attempt, at - self.start_time, outcome, phase, committed, not self.report.shadow))

    def notice(self, record: AttemptRecord, item: Notice) -> None:
        """A semantic notice (``item``) in the attempt of ``record``: counted on the record, and a
        :class:`~..events.SemanticNotice` emitted."""
        record.notices += 1
        if item.kind is NoticeKind.PREFILL:
            record.prefill_notices += 1
        self.emit(SemanticNotice(self.report, record.index, item.at - self.start_time, item.number, item.semantic_idle,
                                 item.raw_idle, item.heartbeats_since_semantic, item.phase, item.kind))

    def retried(self, record: AttemptRecord, at: float, decision: Retry) -> None:
        """The failure of the attempt ``record`` is retried (``decision``): on the record, and a
        :class:`~..events.RetryScheduled` emitted."""
        record.retry_delay = decision.delay
        record.retry_reason = decision.reason
        record.delay_source = decision.source
        self.emit(RetryScheduled(self.report, record.index, at - self.start_time, decision.delay, decision.reason,
                                 decision.source, decision.rate_limited))

    def heartbeats(self, attempt: int, at: float, count: int, total: int) -> None:
        """``count`` heartbeat frames of one read of attempt ``attempt`` (``total`` in it so far),
        ``at`` seconds into the request: a :class:`~.events.Heartbeats` to the hooks that take this
        request's (:class:`~.events.TakesHeartbeats`, asked once, and again if the hooks change) --
        and none made when no hook does."""
        hooks = self.hooks
        taking = self._beat_hooks
        if taking is None or taking[0] is not hooks:
            taking = self._beat_hooks = (hooks, tuple(hook for hook in hooks if self._takes_heartbeats(hook)))
        if taking[1]:
            self._emit_to(taking[1], Heartbeats(self.report, attempt, at, count, total))

    def _takes_heartbeats(self, hook: Hook) -> bool:
        takes = getattr(hook, "takes_heartbeats", None)
        if takes is None:
            return True
        try:
            return bool(takes(self.report))
        except Exception as exc:  # noqa: BLE001 - counted as a hook's error; the hook gets them all
            self._hook_failed(hook, exc)
            return True

    def _emit_to(self, hooks: tuple[Hook, ...], event: Event) -> None:
        for hook in hooks:
            try:
                hook(event)
            except Exception as exc:  # noqa: BLE001 - a hook must never change what the application receives
                self._hook_failed(hook, exc)

    def _hook_failed(self, hook: Hook, exc: Exception) -> None:
        self.hook_errors += 1
        if self.on_hook_error is not None:
            self.on_hook_error(hook, exc)

    def publish(self) -> None:
        """Refresh :attr:`published` in place (the caller holds a reference to it)."""
        published = self.published
        published.clear()
        published.update(self.report.to_dict())

    def end_attempt(self, now: float, attempt: Attempt, outcome: AttemptOutcome, error_type: str | None) -> None:
        """The attempt is over (the caller runs this once per attempt): its lane closed, its
        capture closed, its record filled in, :class:`~.events.AttemptEnded` emitted."""
        attempt.lane.close()
        attempt.capture_end(now)
        self._finish_record(now, attempt, outcome, error_type)
        candidates: tuple[CandidateVerdict, ...] = ()
        capture = attempt.capture
        if self.canary is not None and capture is not None:
            meta = recording_meta("timing" if isinstance(capture, TimingCapture) else "full", self.report,
                                  attempt.record, capture, host=self.host, model=None, body_size=self.body_size)
            candidates = self.canary(capture, meta)
        self.emit(AttemptEnded(self.report, attempt.record, capture, candidates))

    def end_request(self, now: float, stop: StopReason, cause: str | None) -> None:
        """The request is over (the caller runs this once per request)."""
        report = self.report
        report.stop_reason = stop
        if cause is not None:
            report.cause = cause
        elif stop is StopReason.COMPLETED or stop is StopReason.REDIRECTED:
            report.cause = None
        report.duration = now - self.start_time
        self.publish()
        self.emit(RequestEnded(report, stop))

    def _finish_record(self, now: float, attempt: Attempt, outcome: AttemptOutcome, error_type: str | None) -> None:
        clock = attempt.clock
        record = attempt.record
        raw_bound = clock.raw_bound()
        max_heartbeat_gap = clock.max_heartbeat_gap
        if clock.adaptive and clock.heartbeat_gaps and self.cadence is not None:
            self.cadence.remember(self.host, max_heartbeat_gap)
        record.raw_idle = now - clock.last_raw  # before finished(), which counts the end as raw progress
        clock.finished(now)
        record.outcome = outcome
        record.error_type = error_type
        record.phase = Phase.DONE if attempt.done else clock.phase
        record.duration = now - clock.started
        record.time_to_first_byte = clock.first_byte
        record.time_to_first_semantic = clock.first_semantic
        record.semantic_idle = 0.0 if attempt.done else now - clock.last_semantic
        record.max_raw_gap = clock.max_raw_gap
        record.max_semantic_gap = clock.max_semantic_gap
        record.max_heartbeat_gap = max_heartbeat_gap
        record.raw_bound = raw_bound
        record.heartbeats = clock.heartbeats
        record.frames = clock.frames
        record.bytes_received = clock.bytes
        record.completion = attempt.ledger.completion if outcome is AttemptOutcome.COMPLETED else None
        record.committed = attempt.committed
        facts = attempt.framer.facts
        record.response_id = facts.response_id
        record.usage = dict(facts.usage)
        record.stop_detail = facts.stop_reason
        record.unrecognised = facts.unrecognised
        if facts.model and not self.report.model:
            self.report.model = facts.model
        if facts.stop_reason:
            self.report.stop_detail = facts.stop_reason


# -- naming what was decided ----------------------------------------------------------------------


_OBSERVED_STOP = {
    AttemptOutcome.WALL_BUDGET: StopReason.WALL_BUDGET,
    AttemptOutcome.MALFORMED: StopReason.MALFORMED,
    AttemptOutcome.TRUNCATED: StopReason.TRUNCATED,
    AttemptOutcome.REJECTED: StopReason.REJECTED,
}


def observed_stop(failure: Failure) -> StopReason:
    """Shadow mode: why the request would have stopped, had ``failure`` been enforced without retries
    (the attempt's outcome names it; every other outcome would have been retried to exhaustion)."""
    if failure.committed and failure.kind is FailureKind.ERROR_EVENT:
        return StopReason.TRUNCATED  # the provider's error after content, relayed
    return _OBSERVED_STOP.get(attempt_outcome(failure), StopReason.EXHAUSTED)


def stop_reason(decision: Decision) -> StopReason:
    """Why a request whose last failure got ``decision`` (not a retry) stopped."""
    if isinstance(decision, GiveUp):
        if decision.budget:
            return StopReason.RETRY_BUDGET
        return StopReason.RATE_LIMITED if decision.rate_limited else StopReason.EXHAUSTED
    if isinstance(decision, Reject):
        return StopReason.REJECTED
    return StopReason.TRUNCATED


def error_type(failure: Failure) -> str:
    """The ``error.type`` value: the in-band error type, the status code, or the failure kind."""
    if failure.kind is FailureKind.STATUS:
        return str(failure.status)
    if failure.kind is FailureKind.ERROR_EVENT:
        return failure.error_type or "error_event"
    return failure.kind.value


# -- the errors a request ends with ---------------------------------------------------------------


def _plural(attempts: int) -> str:
    return f"{attempts} attempt{'s' if attempts != 1 else ''}"


def provider_error(failure: Failure, decision: GiveUp | Reject, attempts: int, exc: BaseException | None = None) -> Fail:
    """Retries ran out (or the failure is not retried): :class:`~.errors.ProviderError`, or
    :class:`~.errors.RateLimited` when the last answer was a rate limit; ``exc`` is the HTTP
    library's exception the last attempt ended in, if any (its class and the chain are kept)."""
    rate_limited = isinstance(decision, GiveUp) and decision.rate_limited
    verb = "failed" if isinstance(decision, GiveUp) else "rejected the request"
    denied = "; a retry was due but the host's retry budget is spent" if isinstance(decision, GiveUp) and decision.budget else ""
    return Fail(
        E.RateLimited if rate_limited else E.ProviderError,
        failure.kind.value,
        (f"provider {verb} after {_plural(attempts)}{denied}; last cause: {failure.cause}",),
        {"attempts": attempts, "last_cause": failure.cause, "status": failure.status,
         "error_type": failure.error_type},
        exc,
    )


def not_replayable(failure: Failure, problem: str, attempts: int, limit: int, exc: BaseException | None = None) -> Fail:
    """A retry was due but the request body cannot be sent again."""
    return Fail(
        E.BodyNotReplayable,
        failure.kind.value,
        (f"provider failed after {_plural(attempts)} (last cause: {failure.cause}) "
         f"and the request body cannot be sent again: a stream longer than the {limit}-byte replay bound",),
        {"attempts": attempts, "last_cause": failure.cause, "status": failure.status,
         "error_type": failure.error_type, "reason": problem, "limit": limit},
        exc,
    )


def truncation(attempt: Attempt, failure: Failure, attempts: int, exc: BaseException | None = None) -> Fail:
    """Content was released and the stream failed: :class:`~.errors.StreamTruncated`, with the
    released count, the raw head kept and the decoded partial message."""
    cause = failure.cause
    prefix = b"".join(attempt.ledger.prefix)
    return Fail(
        E.StreamTruncated,
        cause.split(":")[0],
        (f"stream truncated after {attempt.ledger.released} bytes of content; cause: {cause}",),
        {"prefix": prefix, "cause": cause, "partial": attempt.framer.partial(prefix), "attempts": attempts,
         "error_type": failure.error_type, "released": attempt.ledger.released},
        exc,
    )


def wall_timeout(budget: float, attempt: Attempt | None, attempts: int) -> Fail:
    """The wall-clock budget ran out (during an attempt, or in a backoff: ``attempt`` None)."""
    committed = bool(attempt is not None and attempt.committed)
    return Fail(
        E.WallTimeout,
        "wall_budget",
        (f"wall-clock budget of {budget:g}s expired" + (" after content was released" if committed
                                                           else " before any content"),),
        {"budget": budget, "attempts": attempts, "committed": committed,
         "prefix": b"".join(attempt.ledger.prefix) if attempt is not None else b""},
    )


def malformed(exc: Exception) -> Fail:
    """The body could not be read as its framing says (a frame over the bound, a corrupt frame,
    an encoding that fails)."""
    if isinstance(exc, E.FrameTooLarge):
        return Fail(E.FrameTooLarge, "malformed", (exc.size, exc.limit), {"what": exc.what})
    if isinstance(exc, E.CorruptFrame):
        return Fail(E.CorruptFrame, "malformed", (exc.what, exc.detail), {
            "offset": exc.offset, "expected": exc.expected, "actual": exc.actual})
    message = str(exc) if isinstance(exc, E.MalformedStream) else f"the body could not be decoded: {exc}"
    return Fail(type(exc) if isinstance(exc, E.MalformedStream) else E.MalformedStream, "malformed", (message,), {})
