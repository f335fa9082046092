"""Retry decisions: every row of the policy table (docs/configuration.md) that is about failures."""

from __future__ import annotations

import pytest

from otel_liveness.core.attempt.retry import (
    Failure,
    FailureKind,
    GiveUp,
    Reject,
    Relay,
    Retry,
    RetryState,
    Truncate,
    attempt_outcome,
    backoff,
    decide,
    failure_reason,
    retry_after,
)
from otel_liveness.core.outcome import AttemptOutcome, DelaySource, Phase, RetryReason
from otel_liveness.core.policy import Policy

NOW = 1_700_000_000.0  # a fixed "wall clock" for HTTP dates
POLICY = Policy()


def status(code: int, **headers: str) -> Failure:
    return Failure(FailureKind.STATUS, status=code, headers=headers)


EMPTY = RetryState()


def d(failure: Failure, state: RetryState = EMPTY, policy: Policy = POLICY, jitter: float = 0.0):  # type: ignore[no-untyped-def]
    return decide(state, failure, policy, wall_now=NOW, jitter=jitter)


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (status(500), RetryReason.SERVER_ERROR),
        (status(503), RetryReason.SERVER_ERROR),
        (status(529), RetryReason.OVERLOADED),
        (status(408), RetryReason.REQUEST_TIMEOUT),
        (status(409), RetryReason.CONFLICT),
        (status(400, **{"x-should-retry": "true"}), RetryReason.SHOULD_RETRY_HEADER),
        (Failure(FailureKind.CONNECT_ERROR, phase=Phase.CONNECTING), RetryReason.CONNECT_ERROR),
        (Failure(FailureKind.READ_ERROR, phase=Phase.PREAMBLE), RetryReason.READ_ERROR),
        (Failure(FailureKind.RAW_SILENCE, phase=Phase.AWAITING_HEADERS), RetryReason.RAW_SILENCE),
        (Failure(FailureKind.RAW_SILENCE, phase=Phase.PREAMBLE), RetryReason.RAW_SILENCE),
        (Failure(FailureKind.EOF, phase=Phase.PREAMBLE), RetryReason.EOF_BEFORE_CONTENT),
        (Failure(FailureKind.ERROR_EVENT, error_type="overloaded_error"), RetryReason.OVERLOADED),
        (Failure(FailureKind.ERROR_EVENT, error_type="api_error"), RetryReason.SERVER_ERROR),
        (Failure(FailureKind.SEMANTIC_TIMEOUT, phase=Phase.PREAMBLE), RetryReason.SEMANTIC_TIMEOUT),
    ],
)
def test_pre_content_failures_retry_with_backoff(failure: Failure, reason: RetryReason) -> None:
    decision = d(failure)
    assert decision == Retry(0.5, reason, DelaySource.BACKOFF, False)


@pytest.mark.parametrize(
    "failure",
    [
        status(400),
        status(401),
        status(403),
        status(404),
        status(413),
        status(499),  # not a server error: nginx's "client closed the request"
        status(500, **{"x-should-retry": "false"}),  # x-should-retry wins over the status
        status(429, **{"x-should-retry": "false"}),
        Failure(FailureKind.ERROR_EVENT, error_type="invalid_request_error"),
        Failure(FailureKind.ERROR_EVENT, error_type=None),
    ],
)
def test_rejections_are_never_retried(failure: Failure) -> None:
    assert isinstance(d(failure), Reject)
    assert d(failure).reason == failure.cause


@pytest.mark.parametrize(
    "kind", [FailureKind.RAW_SILENCE, FailureKind.READ_ERROR, FailureKind.EOF, FailureKind.SEMANTIC_TIMEOUT]
)
def test_a_stream_that_died_after_content_is_a_truncation(kind: FailureKind) -> None:
    failure = Failure(kind, phase=Phase.STREAMING, committed=True, error_type="overloaded_error")
    assert d(failure) == Truncate(failure.cause)
    assert attempt_outcome(failure) is AttemptOutcome.TRUNCATED


@pytest.mark.parametrize("error_type", ["overloaded_error", "invalid_request_error", "rate_limit_error", None])
def test_an_error_frame_after_content_is_the_providers_answer_relayed(error_type: str | None) -> None:
    # retryable or not, before the budget or after: after content the provider's error is its answer
    failure = Failure(FailureKind.ERROR_EVENT, phase=Phase.STREAMING, committed=True, error_type=error_type)
    assert d(failure) == Relay(f"error_event:{error_type or 'unknown'}")
    assert attempt_outcome(failure) is AttemptOutcome.PROVIDER_ERROR


def test_rate_limit_is_the_patient_tier_with_its_own_budget() -> None:
    policy = Policy(max_attempts=2, max_rate_limit_attempts=4)
    state = RetryState()
    limited = status(429, **{"retry-after": "2"})
    for _ in range(3):
        decision = d(limited, state, policy)
        assert decision == Retry(2.0, RetryReason.RATE_LIMITED, DelaySource.RETRY_AFTER, True)
        state = state.record(limited, decision)
    # The transient budget is untouched by 429s: one 5xx may still be retried...
    five = d(status(500), state, policy)
    assert isinstance(five, Retry)
    # ...and the fourth 429 spends the patient budget.
    assert d(limited, state, policy) == GiveUp(RetryReason.RATE_LIMITED, True)
    assert (state.rate_limit_failures, state.transient_failures) == (3, 0)


def test_transient_budget_counts_attempts() -> None:
    state = RetryState()
    for expected in (Retry, Retry, GiveUp):
        decision = d(status(529), state)
        assert type(decision) is expected
        state = state.record(status(529), decision)
    assert len(state.history) == 3 and state.history[0][0].status == 529


def test_backoff_formula_and_cap() -> None:
    assert [backoff(n, 0.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff(0, 1.0) == 0.375  # up to 25 % jitter, downwards only
    assert backoff(10_000, 0.5) == 8.0 * 0.875  # no overflow
    state = RetryState().record(status(500), Retry(0.5, RetryReason.SERVER_ERROR, DelaySource.BACKOFF))
    assert d(status(500), state, jitter=0.5).delay == 1.0 * 0.875


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, (1.5, DelaySource.RETRY_AFTER_MS)),
        ({"retry-after-ms": "250.5", "retry-after": "9"}, (0.2505, DelaySource.RETRY_AFTER_MS)),  # ms first
        ({"retry-after-ms": "junk", "retry-after": "3"}, (3.0, DelaySource.RETRY_AFTER)),  # garbage ms skipped
        ({"retry-after": "1.25"}, (1.25, DelaySource.RETRY_AFTER)),  # float seconds
        ({"retry-after": "1"}, (1.0, DelaySource.RETRY_AFTER)),  # the common case: whole seconds
        ({"retry-after": "0.5"}, (0.5, DelaySource.RETRY_AFTER)),
        ({"retry-after": " 7 "}, (7.0, DelaySource.RETRY_AFTER)),
        ({"retry-after": "86400"}, (60.0, DelaySource.RETRY_AFTER)),  # huge: capped
        ({"retry-after-ms": "1e12"}, (60.0, DelaySource.RETRY_AFTER_MS)),
        ({"retry-after": "Tue, 14 Nov 2023 22:13:40 GMT"}, (20.0, DelaySource.RETRY_AFTER_DATE)),  # NOW + 20 s
        ({"retry-after": "Tue, 14 Nov 2023 22:13:00 GMT"}, None),  # a date in the past
        ({"retry-after": "Tue, 14 Nov 2023 22:13:20 GMT"}, None),  # now: no delay to honour
        ({"retry-after": "Tue, 14 Nov 2023 22:13:21 GMT"}, (1.0, DelaySource.RETRY_AFTER_DATE)),  # a second from now
        ({"retry-after": "Mon, 01 Jan 2024 00:00:00 GMT"}, (60.0, DelaySource.RETRY_AFTER_DATE)),  # far future: capped
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Tue, 14 Nov 99999 22:13:21 GMT"}, None),  # a year out of range (ValueError)
        ({"retry-after": "Tue, 14 Nov 9999999999 22:13:21 GMT"}, None),  # overflows the platform's time
        ({"retry-after": "-5"}, None),
        ({"retry-after": "0"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "-1"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], expected: tuple[float, DelaySource] | None) -> None:
    got = retry_after(headers, wall_now=NOW, cap=60.0)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got[0] == pytest.approx(expected[0]) and got[1] is expected[1]


def test_server_delay_used_for_retry_and_garbage_falls_back_to_backoff() -> None:
    assert d(status(503, **{"retry-after-ms": "1200"})) == Retry(1.2, RetryReason.SERVER_ERROR, DelaySource.RETRY_AFTER_MS)
    assert d(status(503, **{"retry-after": "garbage"})) == Retry(0.5, RetryReason.SERVER_ERROR, DelaySource.BACKOFF)


def test_cause_strings_are_low_cardinality() -> None:
    assert status(529).cause == "status_529"
    assert Failure(FailureKind.ERROR_EVENT, error_type="overloaded_error").cause == "error_event:overloaded_error"
    assert Failure(FailureKind.RAW_SILENCE).cause == "raw_silence"


@pytest.mark.parametrize(("code", "reason"), [
    ("502", RetryReason.SERVER_ERROR), ("529", RetryReason.OVERLOADED), ("429", RetryReason.RATE_LIMITED),
    ("408", RetryReason.REQUEST_TIMEOUT), ("400", None), ("4000", None),
])
def test_an_in_band_error_whose_code_is_an_http_status_is_judged_as_that_status(code: str,
                                                                               reason: RetryReason | None) -> None:
    """OpenRouter's mid-stream errors carry the upstream status as their code (``"code": 502``)."""
    assert failure_reason(Failure(FailureKind.ERROR_EVENT, error_type=code)) is reason
