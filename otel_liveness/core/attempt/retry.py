"""Retry decisions (sans-I/O): a failure in, a decision out (the engine turns it into a command).

``decide(state, failure, policy, wall_now=..., jitter=...)`` returns one :data:`Decision`:

- :class:`Retry` ``(delay, reason, source)`` -- sleep ``delay`` seconds, then attempt again;
- :class:`GiveUp` ``(reason, rate_limited)`` -- the budget for this kind of failure is spent;
- :class:`Reject` ``(reason)`` -- the provider refused the request (4xx, ``x-should-retry: false``);
  retrying cannot help;
- :class:`Truncate` ``(reason)`` -- content was already released and the stream died: keep the
  prefix, never retry;
- :class:`Relay` ``(reason)`` -- content was already released and the provider ended the reply
  with its own error frame: that is its answer, passed to the caller as sent.

Rules, in order (the project's policy table in ``docs/configuration.md`` and the SDKs'
``_should_retry``):

=============================================  ==============================================
failure                                        decision
=============================================  ==============================================
an in-band error after content was released    Relay (the provider's answer, as sent)
anything else after content was released       Truncate
``x-should-retry: true`` / ``false``           retry / reject, whatever the status
408, 409, 5xx (529 = overloaded)               retry, transient budget
429                                            retry, patient budget (``max_rate_limit_attempts``)
other status                                   reject
connect error (server never got the request)   retry
read error, raw silence, first-byte timeout,   retry (nothing was released, so a re-send cannot
EOF before content                             duplicate what the caller saw)
in-band error: overloaded/api/server/timeout   retry; ``rate_limit_error`` -> patient budget
in-band error whose code is an HTTP status     as that status (OpenRouter's ``"code": 502``)
in-band error: any other type                  reject
semantic timeout before content                retry
the HTTP library refused to send the request   never retried: its own exception, as it came
(a rejected header value, an unknown scheme)
=============================================  ==============================================

Delays: ``retry-after-ms``, then ``retry-after`` as (float) seconds, then as an HTTP date
(relative to ``wall_now``, epoch seconds supplied by the driver); a value that is garbage,
non-finite, zero or negative is ignored; a positive one is capped at ``policy.max_retry_after``.
Otherwise :func:`backoff`.

A host's retry budget (:mod:`.budget`) then has its say on a failure before content that the
table retries (:func:`budgeted`).
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from ..outcome import AttemptOutcome, DelaySource, Phase, RetryReason
from ..policy import Policy
from .clocks import RawSilenceExpired, SemanticTimeoutExpired, Terminal

if TYPE_CHECKING:
    from ..memory.budget import HostBudget

__all__ = [
    "Decision",
    "Failure",
    "FailureKind",
    "GiveUp",
    "Reject",
    "Relay",
    "Retry",
    "RetryState",
    "Truncate",
    "attempt_outcome",
    "backoff",
    "budgeted",
    "decide",
    "failure_kind",
    "failure_reason",
    "retry_after",
    "settle",
    "throttling",
    "verdict_outcome",
]


class FailureKind(StrEnum):
    STATUS = "status"  # an HTTP error status before any body was released
    CONNECT_ERROR = "connect_error"
    READ_ERROR = "read_error"
    RAW_SILENCE = "raw_silence"
    FIRST_BYTE_TIMEOUT = "first_byte_timeout"  # raw silence before the first body byte
    ERROR_EVENT = "error_event"
    EOF = "eof"  # the stream ended without an end frame
    SEMANTIC_TIMEOUT = "semantic_timeout"
    WALL_BUDGET = "wall_budget"  # never retried: the wall budget ends the request
    MALFORMED = "malformed"  # the body is not the wire format (a frame over the bound...): never retried
    LOCAL_ERROR = "local_error"  # the HTTP library refused to send the request: never retried, raised as it came


@dataclass(frozen=True, slots=True)
class Failure:
    """What went wrong with one attempt. ``headers`` keys are lower-case."""

    kind: FailureKind
    phase: Phase = Phase.AWAITING_HEADERS
    committed: bool = False
    status: int | None = None
    headers: Mapping[str, str] | None = None
    error_type: str | None = None

    @property
    def cause(self) -> str:
        """A short, low-cardinality description: ``status_529``, ``error_event:overloaded_error``..."""
        if self.kind is FailureKind.STATUS:
            return f"status_{self.status}"
        if self.kind is FailureKind.ERROR_EVENT:
            return f"error_event:{self.error_type or 'unknown'}"
        return self.kind.value


@dataclass(frozen=True, slots=True)
class Retry:
    delay: float
    reason: RetryReason
    source: DelaySource
    rate_limited: bool = False


@dataclass(frozen=True, slots=True)
class GiveUp:
    reason: RetryReason
    rate_limited: bool = False
    budget: bool = False  # a retry was due, but the host's retry budget denied it


@dataclass(frozen=True, slots=True)
class Reject:
    reason: str


@dataclass(frozen=True, slots=True)
class Truncate:
    reason: str


@dataclass(frozen=True, slots=True)
class Relay:
    reason: str


Decision = Retry | GiveUp | Reject | Truncate | Relay


@dataclass(frozen=True, slots=True)
class RetryState:
    """Immutable record of the failures so far (urllib3 ``Retry`` style: each failure makes a new
    value with an appended history)."""

    history: tuple[tuple[Failure, Decision], ...] = ()

    @property
    def transient_failures(self) -> int:
        return sum(1 for _, d in self.history if not getattr(d, "rate_limited", False))

    @property
    def rate_limit_failures(self) -> int:
        return sum(1 for _, d in self.history if getattr(d, "rate_limited", False))

    def record(self, failure: Failure, decision: Decision) -> RetryState:
        return RetryState((*self.history, (failure, decision)))


_RETRYABLE_ERROR_TYPES = {
    "overloaded_error": RetryReason.OVERLOADED,
    "api_error": RetryReason.SERVER_ERROR,
    "server_error": RetryReason.SERVER_ERROR,
    "internal_error": RetryReason.SERVER_ERROR,
    "internal_server_error": RetryReason.SERVER_ERROR,
    "service_unavailable": RetryReason.SERVER_ERROR,
    "timeout_error": RetryReason.REQUEST_TIMEOUT,
    "rate_limit_error": RetryReason.RATE_LIMITED,
    "rate_limit_exceeded": RetryReason.RATE_LIMITED,
    # AWS Bedrock's in-band exceptions (validationException and the like: rejected)
    "throttlingException": RetryReason.RATE_LIMITED,
    "internalServerException": RetryReason.SERVER_ERROR,
    "serviceUnavailableException": RetryReason.OVERLOADED,
    "modelStreamErrorException": RetryReason.SERVER_ERROR,
    "modelTimeoutException": RetryReason.REQUEST_TIMEOUT,
    # Google's status names (Gemini errors in the stream)
    "UNAVAILABLE": RetryReason.OVERLOADED,
    "INTERNAL": RetryReason.SERVER_ERROR,
    "RESOURCE_EXHAUSTED": RetryReason.RATE_LIMITED,
    "DEADLINE_EXCEEDED": RetryReason.REQUEST_TIMEOUT,
}
# botocore looks Bedrock's exception types up in camelCase; some gateways send them capitalised
_RETRYABLE_ERROR_TYPES.update({name[0].upper() + name[1:]: reason for name, reason in _RETRYABLE_ERROR_TYPES.items()
                               if name.endswith("Exception")})

_KIND_REASON = {
    FailureKind.CONNECT_ERROR: RetryReason.CONNECT_ERROR,
    FailureKind.READ_ERROR: RetryReason.READ_ERROR,
    FailureKind.RAW_SILENCE: RetryReason.RAW_SILENCE,
    FailureKind.FIRST_BYTE_TIMEOUT: RetryReason.FIRST_BYTE_TIMEOUT,
    FailureKind.EOF: RetryReason.EOF_BEFORE_CONTENT,
    FailureKind.SEMANTIC_TIMEOUT: RetryReason.SEMANTIC_TIMEOUT,
}


def _status_reason(status: int, should_retry: str | None) -> RetryReason | None:
    """The SDKs' ``_should_retry``: the ``x-should-retry`` header wins, then the status."""
    if should_retry == "false":
        return None
    if status == 408:
        return RetryReason.REQUEST_TIMEOUT
    if status == 409:
        return RetryReason.CONFLICT
    if status == 429:
        return RetryReason.RATE_LIMITED
    if status == 529:
        return RetryReason.OVERLOADED
    if status >= 500:
        return RetryReason.SERVER_ERROR
    return RetryReason.SHOULD_RETRY_HEADER if should_retry == "true" else None


def failure_reason(failure: Failure) -> RetryReason | None:
    """Why a failure may be retried, or ``None`` when retrying cannot help (the request was
    rejected: a final status, ``x-should-retry: false``, an in-band error of a final type). The
    one place these rules live; the commitment (content released) is not looked at here."""
    if failure.kind is FailureKind.STATUS:
        headers = failure.headers or {}
        return _status_reason(failure.status or 0, headers.get("x-should-retry"))
    if failure.kind is FailureKind.ERROR_EVENT:
        error_type = failure.error_type or ""
        if error_type.isdigit():  # an error code that is an HTTP status (OpenRouter's: 502, 429...)
            return _status_reason(int(error_type), None) if len(error_type) == 3 else None
        return _RETRYABLE_ERROR_TYPES.get(error_type)
    return _KIND_REASON.get(failure.kind)


_KIND_OUTCOME = {
    FailureKind.CONNECT_ERROR: AttemptOutcome.CONNECTION_ERROR,
    FailureKind.READ_ERROR: AttemptOutcome.CONNECTION_ERROR,
    FailureKind.RAW_SILENCE: AttemptOutcome.RAW_SILENCE,
    FailureKind.FIRST_BYTE_TIMEOUT: AttemptOutcome.RAW_SILENCE,
    FailureKind.SEMANTIC_TIMEOUT: AttemptOutcome.SEMANTIC_TIMEOUT,
    FailureKind.ERROR_EVENT: AttemptOutcome.PROVIDER_ERROR,
    FailureKind.EOF: AttemptOutcome.PROVIDER_ERROR,
    FailureKind.STATUS: AttemptOutcome.PROVIDER_ERROR,
}


def throttling(failure: Failure) -> bool:
    """Whether ``failure`` is the provider asking the host's callers to slow down: a 429, 503 or
    529, or an in-band rate-limit or overloaded error."""
    if failure.kind is FailureKind.STATUS:
        return failure.status in (429, 503, 529)
    return failure_reason(failure) in (RetryReason.RATE_LIMITED, RetryReason.OVERLOADED)


def attempt_outcome(failure: Failure) -> AttemptOutcome:
    """How an attempt that ended in ``failure`` is reported."""
    if failure.kind is FailureKind.WALL_BUDGET:
        return AttemptOutcome.WALL_BUDGET
    if failure.kind is FailureKind.MALFORMED:
        return AttemptOutcome.MALFORMED
    if failure.committed:
        # the provider's error frame after content ended the reply (relayed); anything else died
        return AttemptOutcome.PROVIDER_ERROR if failure.kind is FailureKind.ERROR_EVENT else AttemptOutcome.TRUNCATED
    reason = failure_reason(failure)
    if reason is None:
        return AttemptOutcome.REJECTED
    if reason is RetryReason.RATE_LIMITED:
        return AttemptOutcome.RATE_LIMITED
    return _KIND_OUTCOME[failure.kind]


def backoff(retries_so_far: int, jitter: float, *, initial: float = 0.5, maximum: float = 8.0) -> float:
    """The SDKs' backoff: ``min(initial · 2ⁿ, maximum) × (1 − 0.25 · jitter)``.

    ``n`` is the number of retries already made (0 before the first retry); ``jitter`` in
    ``[0, 1)`` is supplied by the caller (``random.random()`` in production, fixed in tests).
    """
    n = min(max(retries_so_far, 0), 1000)
    return min(initial * 2.0**n, maximum) * (1.0 - 0.25 * jitter)


def retry_after(headers: Mapping[str, str] | None, *, wall_now: float, cap: float) -> tuple[float, DelaySource] | None:
    """A server-supplied delay from ``retry-after-ms`` / ``retry-after``, capped at ``cap``.

    Returns ``None`` when no usable value is present (absent, garbage, non-finite, <= 0, a date in
    the past). ``wall_now`` is the current time in epoch seconds, for HTTP dates.
    """
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        value = _positive_float(ms)
        if value is not None:
            return min(value / 1000.0, cap), DelaySource.RETRY_AFTER_MS
    raw = headers.get("retry-after")
    if raw is None:
        return None
    value = _positive_float(raw)
    if value is not None:
        return min(value, cap), DelaySource.RETRY_AFTER
    parsed = email.utils.parsedate_tz(raw.strip())
    if parsed is None:
        return None
    try:
        delta = float(email.utils.mktime_tz(parsed)) - wall_now
    except (OverflowError, ValueError):
        return None
    if not math.isfinite(delta) or delta <= 0:
        return None
    return min(delta, cap), DelaySource.RETRY_AFTER_DATE


def _positive_float(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return value


def decide(
    state: RetryState,
    failure: Failure,
    policy: Policy,
    *,
    wall_now: float,
    jitter: float,
) -> Decision:
    """Decide what to do about ``failure`` given the failures so far in ``state``."""
    if failure.committed:
        return Relay(failure.cause) if failure.kind is FailureKind.ERROR_EVENT else Truncate(failure.cause)

    reason = failure_reason(failure)
    if reason is None:
        return Reject(failure.cause)

    rate_limited = reason is RetryReason.RATE_LIMITED
    if rate_limited:
        used, budget = state.rate_limit_failures + 1, policy.max_rate_limit_attempts
    else:
        used, budget = state.transient_failures + 1, policy.max_attempts
    if used >= budget:
        return GiveUp(reason, rate_limited)

    supplied = retry_after(failure.headers, wall_now=wall_now, cap=policy.max_retry_after)
    if supplied is not None:
        delay, source = supplied
    else:
        delay = backoff(used - 1, jitter, initial=policy.backoff_initial, maximum=policy.backoff_max)
        source = DelaySource.BACKOFF
    return Retry(delay, reason, source, rate_limited)


def budgeted(budget: HostBudget, now: float, failure: Failure, decision: Decision) -> Decision:
    """The host's retry budget on ``failure`` and its ``decision``: a failure before content that
    the table retries spends a token, a throttling answer pauses the host's retries, and a retry
    goes only while the budget allows -- after the host's pause, when that is longer; otherwise
    the request ends as it would at exhaustion (a :class:`GiveUp` with ``budget``). Any other
    failure leaves the budget and the decision as they are."""
    if failure.committed or failure_reason(failure) is None:
        return decision
    budget.failed(now)
    wait = budget.wait(now)  # (a pause other requests were told of: this one's own answer sets its delay)
    if throttling(failure):
        told = decision.delay if isinstance(decision, Retry) and decision.source is not DelaySource.BACKOFF else None
        budget.throttled(now, told)
    if not isinstance(decision, Retry):
        return decision
    if not budget.grant(now):
        return GiveUp(decision.reason, decision.rate_limited, budget=True)
    if wait > decision.delay:
        return Retry(wait, decision.reason, DelaySource.HOST_PAUSE, decision.rate_limited)
    return decision


def settle(state: RetryState, failure: Failure, policy: Policy, now: float, *, wall_now: float, jitter: float,
           once: bool, budget: HostBudget | None) -> tuple[Decision, Retry | None]:
    """The request's decision on ``failure``: :func:`decide`'s, then one attempt only for a
    request not to send twice (``once``), then the host's retry budget (:func:`budgeted`).
    Answers the decision and the retry the budget denied (``None``: none)."""
    decision = decide(state, failure, policy, wall_now=wall_now, jitter=jitter)
    if once and isinstance(decision, Retry):
        decision = GiveUp(decision.reason, decision.rate_limited)
    if budget is None:
        return decision, None
    allowed = budgeted(budget, now, failure, decision)
    return allowed, decision if isinstance(decision, Retry) and not isinstance(allowed, Retry) else None


def failure_kind(verdict: Terminal) -> FailureKind:
    """The failure a terminal clock verdict is."""
    if isinstance(verdict, RawSilenceExpired):
        return FailureKind.FIRST_BYTE_TIMEOUT if verdict.first_byte else FailureKind.RAW_SILENCE
    if isinstance(verdict, SemanticTimeoutExpired):
        return FailureKind.SEMANTIC_TIMEOUT
    return FailureKind.WALL_BUDGET


def verdict_outcome(verdict: Terminal) -> AttemptOutcome:
    """The outcome a terminal verdict names (the failure table's, before any commitment)."""
    return attempt_outcome(Failure(failure_kind(verdict)))
