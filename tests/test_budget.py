"""The retry budget (core/memory/budget.py): a pure state the engine consults with the time passed in --
tested with a fake clock, then through engines that share it as the transports of a process do."""

from __future__ import annotations

from typing import Any

import pytest

from otel_liveness import Policy
from otel_liveness.core import errors as E
from otel_liveness.core.commands import READ, Fail, Respond, Send, Sleep
from otel_liveness.core.events import RetryDenied
from otel_liveness.core.memory.budget import BudgetRule, HostBudget, RetryBudgets
from otel_liveness.core.request.engine import Engine, IOFailure
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.testing.scripts import anthropic_error, sse_event

RULE = BudgetRule(capacity=10.0, ratio=0.1, window=10.0, pause_initial=0.5, pause_max=60.0)
SSE = {"content-type": "text/event-stream"}
START = sse_event("message_start", {"type": "message_start", "message": {"id": "m", "model": "m"}})
BLOCK = sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})
END = sse_event("message_stop", {"type": "message_stop"})
POLICY = Policy(raw_idle_timeout=1.0, first_byte_timeout=None, semantic_notice_interval=None, backoff_initial=0.01,
                backoff_max=0.02, max_retry_after=5.0)


# -- the budget alone ---------------------------------------------------------------------------------


def test_failures_drain_it_and_retries_stop_at_half() -> None:
    budget = HostBudget(RULE, 0.0)
    granted = []
    for _ in range(8):
        budget.failed(0.0)
        granted.append(budget.grant(0.0))
    # 10 -> 9 ... each failure a token; a retry goes while the level is above 5
    assert granted == [True, True, True, True, False, False, False, False]
    assert (budget.granted, budget.denied) == (4, 4) and budget.fill(0.0) == pytest.approx(0.2)


def test_answers_give_back_a_tenth_each() -> None:
    budget = HostBudget(RULE, 0.0)
    for _ in range(6):
        budget.failed(0.0)
    assert budget.fill(0.0) == pytest.approx(0.4) and not budget.grant(0.0)
    for _ in range(10):
        budget.answered(0.0)
    assert budget.fill(0.0) == pytest.approx(0.5) and not budget.grant(0.0)  # at half: still no retry
    budget.answered(0.0)
    assert budget.grant(0.0)


def test_time_refills_only_while_the_host_answers() -> None:
    budget = HostBudget(RULE, 0.0)
    for t in range(10):
        budget.failed(float(t))
    assert budget.fill(10.0) == 0.0
    # A host that keeps failing, however slowly, never refills by time.
    assert budget.fill(10_000.0) == 0.0
    budget.failed(10_000.0)
    assert budget.fill(20_000.0) == 0.0
    # One answer and it is healthy: the whole capacity back within one window.
    budget.answered(20_000.0)
    assert budget.fill(20_000.0) == pytest.approx(0.01)
    assert budget.fill(20_005.0) == pytest.approx(0.51)
    assert budget.fill(20_010.0) == 1.0
    # A failure ends the healthy spell: no refill after it.
    budget.failed(20_010.0)
    assert budget.fill(20_100.0) == pytest.approx(0.9)


def test_a_throttling_answer_pauses_every_retry_to_the_host() -> None:
    budget = HostBudget(RULE, 0.0)
    assert budget.wait(0.0) == 0.0
    assert budget.throttled(1.0, 3.0) == 4.0  # the answer's Retry-After
    assert budget.wait(2.0) == 2.0 and budget.wait(4.5) == 0.0
    # Without one, the pause doubles with each throttling answer in a row, capped.
    pauses = []
    for t in range(10, 19):
        pauses.append(budget.throttled(float(t), None) - t)
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]  # (the second in a row: 0.5 x 2)
    budget.answered(100.0)  # an answer ends the run
    assert budget.throttled(200.0, None) - 200.0 == 0.5


def test_hosts_are_kept_apart_and_one_host_is_one_budget() -> None:
    budgets = RetryBudgets()
    a = budgets.for_host("api.anthropic.com", RULE, 0.0, "anthropic")
    assert budgets.for_host("API.Anthropic.com", RULE, 5.0) is a
    b = budgets.for_host("api.openai.com", RULE, 0.0, "openai")
    for _ in range(10):
        a.failed(0.0)
    assert a.fill(0.0) == 0.0 and b.fill(0.0) == 1.0
    other_rule = budgets.for_host("api.anthropic.com", BudgetRule(capacity=4.0), 0.0)
    assert other_rule is not a and other_rule.fill(0.0) == 1.0  # a different configuration, its own budget
    assert sorted(host for host, _ in budgets.items()) == ["api.anthropic.com", "api.anthropic.com", "api.openai.com"]


# -- engines sharing it --------------------------------------------------------------------------------


def engine(budgets: RetryBudgets, now: float, policy: Policy = POLICY, events: list[Any] | None = None,
           host: str = "api.anthropic.com") -> Engine:
    hooks = [events.append] if events is not None else []
    return Engine(policy, RequestFacts(streaming=True, body_size=10, host=host), now, provider="anthropic",
                  hooks=hooks, wall_now=lambda: 1e9, budgets=budgets)


def call(budgets: RetryBudgets, now: float, fail: Any, policy: Policy = POLICY,
         events: list[Any] | None = None, host: str = "api.anthropic.com") -> tuple[int, Any, Engine]:
    """One call whose every attempt fails with ``fail(engine, now)``: (attempts, the last command, engine)."""
    e = engine(budgets, now, policy, events, host)
    command: Any = e.start(now)
    attempts = 0
    while True:
        assert isinstance(command, Send), command
        attempts += 1
        command = fail(e, now)
        if isinstance(command, Sleep):
            now += command.seconds
            command = e.slept(now)
            continue
        return attempts, command, e


def dead(e: Engine, now: float) -> Any:
    return e.io_error(now, IOFailure.CONNECT, ConnectionRefusedError("refused"))


def ok_call(budgets: RetryBudgets, now: float, host: str = "api.anthropic.com") -> Engine:
    e = engine(budgets, now, host=host)
    assert isinstance(e.start(now), Send)
    assert e.headers(now, 200, SSE) is READ
    command = e.received(now, START + BLOCK + END)
    assert isinstance(command, Respond)
    e.eof(now)
    assert e.report.stop_reason == "completed"
    return e


def test_a_provider_that_is_down_gets_about_one_attempt_a_call() -> None:
    budgets = RetryBudgets()
    events: list[Any] = []
    attempts = [call(budgets, float(i), dead, events=events)[0] for i in range(100)]
    # Three retries of the first calls bring the budget to half; every later call is one attempt.
    assert attempts[:2] == [3, 2] and set(attempts[2:]) == {1} and sum(attempts) / len(attempts) <= 1.05
    denied = [e for e in events if isinstance(e, RetryDenied)]
    assert len(denied) == 99 and all(d.fill <= 0.5 for d in denied)
    _, command, e = call(budgets, 200.0, dead)
    assert isinstance(command, Fail) and command.error is E.ProviderError
    assert "retry budget is spent" in command.args[0] and e.report.stop_reason == "retry_budget"
    assert [a.outcome for a in e.report.attempts] == ["connection_error"]


def test_the_budget_comes_back_within_a_window_of_the_providers_return() -> None:
    budgets = RetryBudgets()
    for i in range(20):
        call(budgets, float(i), dead)
    assert call(budgets, 30.0, dead)[0] == 1  # still down: no retry
    ok_call(budgets, 31.0)  # the provider is back: a first attempt always goes
    assert call(budgets, 31.0 + POLICY.retry_budget_window, dead)[0] == 3  # retries again, one window later


def test_isolated_failures_of_a_healthy_host_are_still_retried() -> None:
    # One attempt in a hundred dead, the rest answered: every failed call is retried to success.
    budgets = RetryBudgets()
    retried = 0
    for i in range(2000):
        now = i * 0.5
        if i % 100 == 7:
            e = engine(budgets, now)
            assert isinstance(e.start(now), Send)
            command = dead(e, now)
            assert isinstance(command, Sleep), "a retry was denied on a healthy host"
            assert isinstance(e.slept(now + command.seconds), Send)
            retried += 1
        else:
            ok_call(budgets, now)
    assert retried == 20


def test_a_hosts_budget_is_its_own() -> None:
    budgets = RetryBudgets()
    for i in range(20):
        call(budgets, float(i), dead, host="api.anthropic.com")
    assert call(budgets, 30.0, dead, host="api.anthropic.com")[0] == 1
    assert call(budgets, 30.0, dead, host="bedrock-runtime.us-east-1.amazonaws.com")[0] == POLICY.max_attempts


def test_a_retry_after_pauses_the_other_requests_retries_within_their_wall_budget() -> None:
    budgets = RetryBudgets()
    a, b = engine(budgets, 0.0), engine(budgets, 0.0, POLICY.replace(wall_timeout=10.0))
    assert isinstance(a.start(0.0), Send) and isinstance(b.start(0.0), Send)
    first = a.headers(0.0, 429, {"retry-after": "4"})
    assert isinstance(first, Sleep) and first.seconds == 4.0
    # b's 529 would back off 10 ms: it waits for the host until 4 s, as a was told.
    second = b.headers(0.5, 529, {"content-type": "application/json"})
    assert isinstance(second, Sleep) and second.seconds == pytest.approx(3.5)
    assert b.report.attempts[0].delay_source == "host_pause"
    # A request whose wall budget ends before the host's pause ends at its budget, not after it.
    c = engine(budgets, 1.0, POLICY.replace(wall_timeout=2.0))
    assert isinstance(c.start(1.0), Send)
    third = c.headers(1.2, 500, {"content-type": "application/json"})
    assert isinstance(third, Sleep) and third.seconds == pytest.approx(1.8)  # to the wall budget's end
    assert isinstance(c.slept(3.0), Fail)


def test_throttling_answers_slow_the_hosts_retries_and_never_six_attempts_a_call() -> None:
    # A 429 storm with a short retry-after-ms: each call's retries wait for the host, the host's
    # pause doubles while the answers keep throttling, and the budget ends the retrying.
    budgets = RetryBudgets()
    now = 0.0
    totals = []
    for _ in range(40):
        attempts, command, e = call(budgets, now, lambda e, t: e.headers(t, 429, {"retry-after-ms": "50"}))
        totals.append(attempts)
        assert isinstance(command, Respond) and command.passthrough  # the last 429, as it came
        assert ("x-should-retry", "false") in command.replace
        now = e.since(now) + now + 0.01
    assert max(totals) <= 5 and sum(totals) / len(totals) < 1.2


def test_an_in_band_error_denied_a_retry_reaches_the_caller_as_sent() -> None:
    budgets = RetryBudgets()
    for i in range(10):
        call(budgets, float(i), dead)
    e = engine(budgets, 20.0)
    assert isinstance(e.start(20.0), Send)
    assert e.headers(20.0, 200, SSE) is READ
    command = e.received(20.1, START + anthropic_error("overloaded_error"))
    assert isinstance(command, Respond) and command.first == START + anthropic_error("overloaded_error")
    assert e.report.stop_reason == "retry_budget"


def test_shadow_mode_and_no_budget_leave_retries_as_the_table_says() -> None:
    budgets = RetryBudgets()
    for i in range(10):
        call(budgets, float(i), dead)
    assert call(budgets, 20.0, dead, POLICY.replace(retry_budget=None))[0] == POLICY.max_attempts
    shadow = engine(budgets, 20.0, POLICY.replace(shadow=True))
    assert shadow.budget is None


def test_settle_applies_the_table_then_once_then_the_budget() -> None:
    """retry.settle: decide()'s decision, cut to one attempt for a request not to send twice,
    then the host's budget -- a retry it denies is answered beside the give-up it became."""
    from otel_liveness.core.attempt.retry import Failure, FailureKind, GiveUp, Retry, RetryState, settle

    failure = Failure(FailureKind.STATUS, status=503)
    policy = Policy()
    decision, denied = settle(RetryState(), failure, policy, 0.0, wall_now=0.0, jitter=0.0, once=False, budget=None)
    assert isinstance(decision, Retry) and denied is None
    decision, denied = settle(RetryState(), failure, policy, 0.0, wall_now=0.0, jitter=0.0, once=True, budget=None)
    assert isinstance(decision, GiveUp) and not decision.budget and denied is None
    empty = HostBudget(BudgetRule(capacity=0.0, ratio=0.0, window=10.0, pause_initial=0.5, pause_max=60.0), 0.0)
    decision, denied = settle(RetryState(), failure, policy, 0.0, wall_now=0.0, jitter=0.0, once=False, budget=empty)
    assert isinstance(decision, GiveUp) and decision.budget
    assert isinstance(denied, Retry) and denied.reason == decision.reason
    # A request not to send twice gives up before the budget is asked for a token: none denied.
    decision, denied = settle(RetryState(), failure, policy, 0.0, wall_now=0.0, jitter=0.0, once=True, budget=empty)
    assert isinstance(decision, GiveUp) and not decision.budget and denied is None


@pytest.mark.parametrize(("status", "throttles"), [(503, True), (529, True), (429, True), (500, False), (502, False)])
def test_which_statuses_pause_the_hosts_retries(status: int, throttles: bool) -> None:
    """A 503, like a 429 or 529, is the provider asking every caller of the host to slow down: its
    retries pause (the other requests' too); a 500 or 502 spends a token and pauses nothing."""
    from otel_liveness.core.attempt.retry import Failure, FailureKind, Retry, RetryState, budgeted, decide, throttling

    failure = Failure(FailureKind.STATUS, status=status)
    assert throttling(failure) is throttles
    budget = HostBudget(RULE, 0.0)
    decision = decide(RetryState(), failure, Policy(), wall_now=0.0, jitter=0.0)
    assert isinstance(budgeted(budget, 0.0, failure, decision), Retry)
    assert (budget.wait(0.0) > 0) is throttles
