"""The real anthropic SDK against the simulated provider, for each row of the policy table
(docs/configuration.md, "The policy table"), under every way an agent drives it: sync, asyncio
and trio. What the SDK's caller gets is checked exactly: the text and message, the typed error
and its exact prefix bytes, the outcome report, and -- for server-supplied delays -- the delay the
transport measured against the header and the time the call really took.

Time: 1 provider second = 10 ms (``provider`` fixture); policies are in real seconds.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anthropic
import anyio
import httpx2
import pytest

import otel_liveness
from otel_liveness import Policy, ProviderError, RateLimited, StreamTruncated, WallTimeout
from otel_liveness.core.events import AttemptEnded, RequestEnded, RetryScheduled, SemanticNotice
from otel_liveness.testing import anthropic_reply, sse_event
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_error, anthropic_status

from .conftest import FAST

KINDS = ["sync", "asyncio", "trio"]
MESSAGES: Any = [{"role": "user", "content": "What is the weather in Paris?"}]
pytestmark = pytest.mark.parametrize("kind", KINDS)


@dataclass
class Call:
    """What one SDK call gave its caller."""

    text: str = ""
    message: Any = None
    error: BaseException | None = None
    report: dict[str, Any] | None = None
    events: list[Any] = field(default_factory=list)
    elapsed: float = 0.0
    deltas: int = 0

    @property
    def liveness(self) -> Any:
        return otel_liveness.liveness_error(self.error)

    def ended(self) -> list[str]:
        return [e.record.outcome.value for e in self.events if isinstance(e, AttemptEnded)]

    def stop_reason(self) -> str:
        (end,) = [e for e in self.events if isinstance(e, RequestEnded)]
        return str(end.stop_reason.value)


class HostBug(Exception):
    pass


def sdk(kind: str, url: str, policy: Policy = FAST, *, messages: Any = MESSAGES, stop_after: int | None = None,
        cancel_after: int | None = None, raise_after: int | None = None) -> Call:
    """Stream one message with the real SDK (``kind``: sync, asyncio or trio). ``stop_after``: the
    caller stops reading after that many text deltas and leaves the stream (closing it);
    ``cancel_after``: once that many text deltas were read, the caller's task is cancelled (sync:
    another thread closes the stream under the reader);
    ``raise_after``: the caller's own code raises after that many text deltas."""
    call = Call()
    hooks = [call.events.append]
    started = time.monotonic()

    cancel: list[Any] = []  # what cancels the caller once ``cancel_after`` deltas were read

    def on_event(event: Any) -> bool:
        if event.type == "text":
            call.text += event.text
            call.deltas += 1
            if cancel_after is not None and call.deltas == cancel_after:
                cancel[0]()
            if raise_after is not None and call.deltas >= raise_after:
                raise HostBug("the agent's own code failed")
            if stop_after is not None and call.deltas >= stop_after:
                return False
        return True

    if kind == "sync":
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, hooks=hooks)
        with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                 http_client=httpx2.Client(transport=transport)) as client:
            try:
                with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=messages) as stream:
                    call.report = stream.response.extensions["liveness"]
                    # A sync caller's cancel: another thread closes the stream under the reader.
                    cancel.append(lambda: threading.Thread(target=stream.close).start())
                    finished = True
                    for event in stream:
                        if not on_event(event):
                            finished = False
                            break
                    if finished:
                        call.message = stream.get_final_message()
            except Exception as exc:
                call.error = exc
    else:
        async def main() -> None:
            transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), policy, hooks=hooks)
            async with anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                                http_client=httpx2.AsyncClient(transport=transport)) as client:
                with anyio.CancelScope() as scope:
                    cancel.append(scope.cancel)
                    try:
                        async with client.messages.stream(model="claude-sim-1", max_tokens=64,
                                                          messages=messages) as stream:
                            call.report = stream.response.extensions["liveness"]
                            finished = True
                            async for event in stream:
                                if not on_event(event):
                                    finished = False
                                    break
                            if finished:
                                call.message = await stream.get_final_message()
                    except Exception as exc:
                        call.error = exc

        anyio.run(main, backend=kind)
    call.elapsed = time.monotonic() - started
    return call


def raw(steps: list[Any]) -> bytes:
    """The bytes the provider sends for ``steps``."""
    return b"".join(step.data for step in steps if isinstance(step, s.Raw))


REPLY = anthropic_reply("Sunny, 21 degrees.", msg_id="msg_ok", deltas=4)


def assert_completed(call: Call, text: str = "Sunny, 21 degrees.", msg_id: str = "msg_ok") -> None:
    assert call.error is None, call.error
    assert call.text == text and call.message.id == msg_id and call.message.stop_reason == "end_turn"
    assert call.report is not None and call.report["stop_reason"] == "completed"


# -- no raw progress before content: retried invisibly ---------------------------------------------


@pytest.mark.parametrize(
    "dead",
    [[s.HangBeforeHeaders()], [s.Headers(), *REPLY[:1], s.Stall()], [s.Headers(), *REPLY[:1], s.Reset()]],
    ids=["before-headers", "after-message-start", "reset"],
)
def test_dead_before_content_is_retried_invisibly(kind, provider, dead) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("dead", [dead, [s.Headers(), *REPLY]])
    call = sdk(kind, url)
    assert_completed(call)
    assert provider.attempts("dead") == 2 and call.ended()[1] == "completed"
    (retry,) = [e for e in call.events if isinstance(e, RetryScheduled)]
    assert retry.reason.value == ("read_error" if dead[-1] == s.Reset() else "raw_silence")


# -- heartbeats, no semantic frame: keep waiting, notices --------------------------------------------


def test_long_think_with_pings_completes_with_notices(kind, provider) -> None:  # type: ignore[no-untyped-def]
    # 60 provider-seconds of pings (0.6 s): twice the raw bound, six notice intervals.
    url = provider.add("think", [[s.Headers(), *anthropic_reply("Sunny, 21 degrees.", msg_id="msg_ok", thinking="hmm",
                                                               think_pings=12, ping_every=5.0)]])
    call = sdk(kind, url)
    assert_completed(call)
    assert [b.type for b in call.message.content] == ["thinking", "text"] and call.message.content[0].thinking == "hmm"
    (attempt,) = call.report["attempts"]  # type: ignore[index]
    assert attempt["heartbeats"] == 12 and attempt["time_to_first_semantic"] >= 0.6
    notices = [e for e in call.events if isinstance(e, SemanticNotice)]
    assert len(notices) == attempt["notices"] >= 3 and provider.attempts("think") == 1


# -- content released, then raw silence: StreamTruncated with the exact prefix ------------------------


def test_truncation_after_content_carries_the_exact_prefix_bytes(kind, provider) -> None:  # type: ignore[no-untyped-def]
    sent = [s.Headers(), *anthropic_reply("Partial answer", thinking="plan", deltas=4, stall_after=2)]
    url = provider.add("stall", [[*sent, s.Stall()]])
    call = sdk(kind, url)
    error = call.liveness
    assert isinstance(error, StreamTruncated) and error.cause == "raw_silence"
    assert error.prefix == raw(sent) and error.released == len(raw(sent))  # every byte sent, nothing else
    assert call.text == "Partial "  # what the SDK decoded from those bytes
    assert [(b["type"], b["complete"]) for b in error.partial["content"]] == [("thinking", True), ("text", False)]
    assert otel_liveness.continuation_message(error.partial) == {
        "role": "assistant", "content": [{"type": "thinking", "thinking": "plan", "signature": "sig_sim"}]}
    assert provider.attempts("stall") == 1 and call.ended() == ["truncated"] and call.stop_reason() == "truncated"


def test_in_band_error_after_content_is_the_sdks_own_error(kind, provider) -> None:  # type: ignore[no-untyped-def]
    # The provider's error frame after content reaches the SDK as sent: it raises its own error with
    # the provider's type and message, exactly as without the transport; the report says how it ended.
    sent = [s.Headers(), *anthropic_reply("abcdef", deltas=3, error_after=2)]
    url = provider.add("late-error", [sent])
    call = sdk(kind, url)
    assert call.liveness is None
    assert isinstance(call.error, anthropic.APIStatusError) and not isinstance(call.error, anthropic.APIConnectionError)
    assert call.error.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    report = otel_liveness.liveness_report(call.error)
    assert report is not None and (report["stop_reason"], report["cause"]) == ("truncated", "error_event:overloaded_error")
    assert call.text == "abcd" and provider.attempts("late-error") == 1
    assert call.ended() == ["provider_error"]


# -- 5xx, 529, in-band overload before content: retried ------------------------------------------------


@pytest.mark.parametrize("failed", [anthropic_status(500, "api_error"), anthropic_status(529, "overloaded_error"),
                                    [s.Headers(), *REPLY[:1], s.Raw(anthropic_error("overloaded_error"))]],
                         ids=["500", "529", "in-band-overload"])
def test_provider_errors_before_content_are_retried(kind, provider, failed) -> None:  # type: ignore[no-untyped-def]
    first = failed if isinstance(failed, list) else [failed]
    url = provider.add("flaky", [first, first, [s.Headers(), *REPLY]])
    call = sdk(kind, url)
    assert_completed(call)
    assert provider.attempts("flaky") == 3
    assert call.ended() == ["provider_error", "provider_error", "completed"]
    retries = [e for e in call.events if isinstance(e, RetryScheduled)]
    assert [(r.source.value, r.rate_limited) for r in retries] == [("backoff", False)] * 2
    assert all(r.delay <= FAST.backoff_max for r in retries)


# -- 429 with Retry-After: the patient tier, the server's delay honoured ------------------------------


def test_rate_limit_retry_after_is_waited_for(kind, provider) -> None:  # type: ignore[no-untyped-def]
    limited = anthropic_status(429, "rate_limit_error", (("retry-after", "1"),))
    url = provider.add("limited", [[limited], [s.Headers(), *REPLY]])
    call = sdk(kind, url, FAST.replace(max_retry_after=5.0, max_attempts=1))  # the patient tier has its own budget
    assert_completed(call)
    first, second = call.report["attempts"]  # type: ignore[index]
    assert (first["outcome"], first["retry_delay"], first["delay_source"]) == ("rate_limited", 1.0, "retry_after")
    # Measured: the second attempt started no earlier than the header said, and the call took that long.
    assert second["started"] - (first["started"] + first["duration"]) >= 1.0
    assert call.elapsed >= 1.0 and second["started"] <= call.elapsed


def test_rate_limit_retry_after_is_capped(kind, provider) -> None:  # type: ignore[no-untyped-def]
    limited = anthropic_status(429, "rate_limit_error", (("retry-after", "3600"),))
    url = provider.add("limited-long", [[limited], [s.Headers(), *REPLY]])
    call = sdk(kind, url, FAST.replace(max_retry_after=0.2))
    assert_completed(call)
    first, second = call.report["attempts"]  # type: ignore[index]
    assert (first["retry_delay"], first["delay_source"]) == (0.2, "retry_after")
    assert second["started"] - (first["started"] + first["duration"]) >= 0.2 and call.elapsed < 3.0


# -- budgets spent ------------------------------------------------------------------------------------


def test_exhausted_status_budget_reaches_the_sdk_as_the_final_response(kind, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("down", [[anthropic_status(529, "overloaded_error")]])
    call = sdk(kind, url)
    assert isinstance(call.error, anthropic.APIStatusError) and call.error.status_code == 529
    assert call.error.response.headers["x-should-retry"] == "false"  # an SDK retrying above us would multiply attempts
    report = call.error.response.extensions["liveness"]
    assert report["stop_reason"] == "exhausted" and report["cause"] == "status_529"
    assert len(report["attempts"]) == FAST.max_attempts == provider.attempts("down")


def test_exhausted_stream_budget_is_a_provider_error_never_content(kind, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("dead-all", [[s.Headers(), *REPLY[:1], s.Stall()]])
    call = sdk(kind, url)
    error = call.liveness
    assert isinstance(call.error, anthropic.APIConnectionError)  # the SDK wraps what fails before the response
    assert isinstance(error, ProviderError) and not isinstance(error, RateLimited)
    assert error.attempts == FAST.max_attempts and error.last_cause == "raw_silence"
    assert call.text == "" and call.report is None and call.stop_reason() == "exhausted"
    assert provider.attempts("dead-all") == FAST.max_attempts


def test_rate_limit_status_exhaustion_stops_as_rate_limited(kind, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("limited-all", [[anthropic_status(429, "rate_limit_error", (("retry-after-ms", "10"),))]])
    call = sdk(kind, url, FAST.replace(max_rate_limit_attempts=4))
    assert isinstance(call.error, anthropic.RateLimitError)  # the provider's last 429, as it came
    report = call.error.response.extensions["liveness"]
    assert report["stop_reason"] == "rate_limited" and call.stop_reason() == "rate_limited"
    assert [a["outcome"] for a in report["attempts"]] == ["rate_limited"] * 4 == call.ended()
    assert provider.attempts("limited-all") == 4  # the patient budget, beyond the transient one (3)


def test_in_band_rate_limit_error_is_retried_on_the_patient_tier(kind, provider) -> None:  # type: ignore[no-untyped-def]
    inband = [s.Headers(), *REPLY[:1], s.Raw(anthropic_error("rate_limit_error", "Rate limited"))]
    url = provider.add("inband-limited", [inband] * 4 + [[s.Headers(), *REPLY]])
    call = sdk(kind, url)  # 4 in-band rate limits: more than the transient budget of 3
    assert_completed(call)
    assert call.ended() == ["rate_limited"] * 4 + ["completed"]
    assert all(e.rate_limited and e.reason.value == "rate_limited" for e in call.events if isinstance(e, RetryScheduled))
    assert b"rate_limit_error" not in json.dumps(call.message.model_dump()).encode()


def test_in_band_rate_limit_exhaustion_is_the_sdks_rate_limit_error(kind, provider) -> None:  # type: ignore[no-untyped-def]
    # The last attempt's in-band error reaches the SDK as the provider sent it: the SDK raises its
    # own status error for it, whose response carries the report (the patient budget spent).
    inband = [s.Headers(), *REPLY[:1], s.Raw(anthropic_error("rate_limit_error", "Rate limited"))]
    url = provider.add("inband-limited-all", [inband])
    call = sdk(kind, url, FAST.replace(max_rate_limit_attempts=3))
    assert isinstance(call.error, anthropic.APIStatusError) and call.liveness is None
    assert call.error.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    report = call.error.response.extensions["liveness"]
    assert report["stop_reason"] == "rate_limited" and report["cause"] == "error_event:rate_limit_error"
    assert call.stop_reason() == "rate_limited" and provider.attempts("inband-limited-all") == 3


# -- wall budget ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("committed", [False, True], ids=["before-content", "after-content"])
def test_wall_budget_stops_the_call_and_reports_the_budget(kind, provider, committed) -> None:  # type: ignore[no-untyped-def]
    script = ([s.Headers(), *anthropic_reply("x" * 40, deltas=40, delta_every=2.0)] if committed
              else [s.HangBeforeHeaders()])
    url = provider.add("slow", [script])
    call = sdk(kind, url, FAST.replace(wall_timeout=0.4, raw_idle_timeout=5.0))
    error = call.liveness
    assert isinstance(error, WallTimeout) and error.budget == 0.4 and error.committed is committed
    assert 0.4 <= call.elapsed < 0.4 + 2.0
    assert provider.attempts("slow") == 1 and call.ended() == ["wall_budget"] and call.stop_reason() == "wall_budget"
    if committed:
        assert 0 < len(call.text) < 40 and error.prefix.endswith(b"\n\n")
    else:
        assert isinstance(call.error, anthropic.APIConnectionError) and call.text == ""


# -- the caller cancels or closes ---------------------------------------------------------------------


def test_caller_leaving_the_stream_early_cancels_the_attempt(kind, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("long", [[s.Headers(), *anthropic_reply("y" * 50, deltas=50, delta_every=1.0)]])
    call = sdk(kind, url, stop_after=3)
    assert call.error is None and call.text == "yyy"
    assert call.ended() == ["cancelled"] and call.stop_reason() == "cancelled"
    deadline = time.monotonic() + 2
    while not provider.requests("long")[0].disconnected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert provider.requests("long")[0].disconnected and provider.attempts("long") == 1


def test_the_callers_own_exception_cancels_the_attempt(kind, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("host-bug", [[s.Headers(), *anthropic_reply("z" * 20, deltas=20, delta_every=1.0)]])
    call = sdk(kind, url, raise_after=2)
    assert isinstance(call.error, HostBug) and call.liveness is None
    assert call.ended() == ["cancelled"] and call.stop_reason() == "cancelled"


def test_cancellation_cancels_the_attempt(kind, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("cancel", [[s.Headers(), *anthropic_reply("z" * 100, deltas=100, delta_every=1.0)]])
    call = sdk(kind, url, cancel_after=3)
    assert 3 <= len(call.text) < 100  # honoured before the stream's end (it would run 1 s more)
    if kind != "sync":
        assert call.error is None  # the cancel scope ended it, not an error
    assert call.liveness is None  # whatever the closed stream raised, it is not a liveness verdict
    assert call.ended() == ["cancelled"] and call.stop_reason() == "cancelled"
    deadline = time.monotonic() + 2
    while not provider.requests("cancel")[0].disconnected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert provider.requests("cancel")[0].disconnected  # the connection was let go, not left streaming


# -- tool use: a call cut mid-arguments, and the continuation an agent sends next ----------------------


def tool_use_reply(arguments: list[str], *, complete: bool) -> list[Any]:
    """A reply that says a sentence, then calls a tool whose JSON arguments arrive in pieces."""
    steps: list[Any] = [s.Raw(sse_event("message_start", {"type": "message_start", "message": {
        "id": "msg_tool", "type": "message", "role": "assistant", "model": "claude-sim-1", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 1}}}))]
    steps += [s.Raw(sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                      "content_block": {"type": "text", "text": ""}})),
              s.Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                      "delta": {"type": "text_delta", "text": "Checking the weather. "}})),
              s.Raw(sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})),
              s.Raw(sse_event("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
                  "type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}}))]
    for piece in arguments:
        steps.append(s.Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": 1,
                                                             "delta": {"type": "input_json_delta", "partial_json": piece}})))
    if complete:
        steps.append(s.Raw(sse_event("content_block_stop", {"type": "content_block_stop", "index": 1})))
    return steps


@pytest.mark.parametrize("complete", [False, True], ids=["cut-mid-arguments", "cut-after-the-call"])
def test_tool_use_continuation_after_a_truncated_tool_call(kind, provider, complete) -> None:  # type: ignore[no-untyped-def]
    sent = [s.Headers(), *tool_use_reply(['{"city": "Pa', 'ris", "unit": "celsius"}'][: 2 if complete else 1],
                                         complete=complete)]
    url = provider.add("tool", [[*sent, s.Stall()], [s.Headers(), *REPLY]])
    call = sdk(kind, url)
    error = call.liveness
    assert isinstance(error, StreamTruncated) and error.prefix == raw(sent)
    text_block, tool_block = error.partial["content"]
    assert text_block == {"type": "text", "text": "Checking the weather. ", "complete": True}
    assert tool_block["type"] == "tool_use" and tool_block["complete"] is complete
    assert tool_block["partial_json"] == ('{"city": "Paris", "unit": "celsius"}' if complete else '{"city": "Pa')
    continuation = otel_liveness.continuation_message(error.partial)
    # (A final text block loses its trailing whitespace: the API rejects it on a final assistant turn.)
    expected: list[dict[str, Any]] = [{"type": "text", "text": "Checking the weather. " if complete else "Checking the weather."}]
    if complete:  # a whole call is kept with its parsed input; a cut one is dropped, never repaired
        expected.append({"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                         "input": {"city": "Paris", "unit": "celsius"}})
    assert continuation == {"role": "assistant", "content": expected}
    # The agent continues from it: the provider receives exactly that assistant turn.
    follow_up = [*MESSAGES, continuation]
    if complete:
        follow_up.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "21C"}]})
    again = sdk(kind, url, messages=follow_up)
    assert_completed(again)
    sent_body = json.loads(provider.requests("tool")[1].body)
    assert sent_body["messages"][1] == continuation and len(sent_body["messages"]) == len(follow_up)
