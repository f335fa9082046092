"""The real anthropic and openai SDKs (httpx2) driving the transport against the simulated provider."""

from __future__ import annotations

import anthropic
import anyio
import httpx2
import openai
import pytest

import otel_liveness
from otel_liveness import Policy, ProviderError, StreamTruncated
from otel_liveness.testing import anthropic_reply, openai_chat_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_error, anthropic_status
from otel_liveness.transport._base import BUDGETS

from .conftest import FAST

MESSAGES = [{"role": "user", "content": "hi"}]


def sync_client(url: str, policy: Policy = FAST, max_retries: int = 0, events: list | None = None) -> anthropic.Anthropic:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, hooks=[events.append] if events is not None else ())
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=max_retries,
                               http_client=httpx2.Client(transport=transport))


def async_client(url: str, policy: Policy = FAST, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), policy)
    return anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=max_retries,
                                    http_client=httpx2.AsyncClient(transport=transport))


def test_sdk_long_think_completes(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("think", [[s.Headers(), *anthropic_reply("Thought hard.", thinking="hmm", think_pings=20)]])
    events: list = []
    with sync_client(url, events=events) as client:
        with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=MESSAGES) as stream:
            message = stream.get_final_message()
            report = stream.response.extensions["liveness"]
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].text == "Thought hard." and message.id == "msg_sim_0001"
    assert message.stop_reason == "end_turn"
    assert provider.attempts("think") == 1
    assert report["stop_reason"] == "completed" and report["attempts"][0]["heartbeats"] == 20
    assert any(type(e).__name__ == "SemanticNotice" for e in events)


@pytest.mark.parametrize(
    "failed",
    [
        [s.HangBeforeHeaders()],
        [s.Headers(), *anthropic_reply()[:1], s.Stall()],
        [s.Headers(), *anthropic_reply()[:1], s.Raw(anthropic_error())],
        [anthropic_status(529, "overloaded_error")],
    ],
    ids=["dead-before-headers", "dead-before-content", "in-band-overload", "529"],
)
def test_sdk_sees_one_attempt(provider, failed) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("flaky", [failed, failed, [s.Headers(), *anthropic_reply("ok", msg_id="msg_third")]])
    with sync_client(url) as client:
        message = client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True)
        events = list(message)
    assert provider.attempts("flaky") == 3
    starts = [e for e in events if e.type == "message_start"]
    assert len(starts) == 1 and starts[0].message.id == "msg_third"
    assert "".join(e.delta.text for e in events if e.type == "content_block_delta") == "ok"


def test_sdk_truncation_carries_prefix_and_a_continuation(provider) -> None:  # type: ignore[no-untyped-def]
    script = [s.Headers(), *anthropic_reply("Partial answer", thinking="plan", deltas=4, stall_after=2), s.Stall()]
    url = provider.add("stall", [script])
    seen = []
    with sync_client(url) as client:
        # anthropic >= 2.17 wraps a body-read error in its own (APITimeoutError for a timeout: ours
        # is a ReadTimeout too); liveness_error() finds the truncation inside
        with pytest.raises(anthropic.APITimeoutError) as info:
            with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=MESSAGES) as stream:
                for text in stream.text_stream:
                    seen.append(text)
    exc = otel_liveness.liveness_error(info.value)
    assert isinstance(exc, StreamTruncated)
    assert "".join(seen) == "Partial "
    kinds = [(b["type"], b["complete"]) for b in exc.partial["content"]]
    assert kinds == [("thinking", True), ("text", False)]
    continuation = otel_liveness.continuation_message(exc.partial)
    assert continuation == {"role": "assistant", "content": [{"type": "thinking", "thinking": "plan", "signature": "sig_sim"}]}
    assert provider.attempts("stall") == 1


def test_sdk_retries_do_not_multiply_attempts(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("down", [[anthropic_status(529, "overloaded_error")]])
    with sync_client(url, max_retries=2) as client:
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True)
    assert info.value.status_code == 529
    assert provider.attempts("down") == FAST.max_attempts  # not 3 x 3

    BUDGETS.clear()  # (a new outage: the host's retry budget, spent by the 529s above, full again)
    url = provider.add("dead", [[s.Headers(), *anthropic_reply()[:1], s.Stall()]])
    with sync_client(url, max_retries=2) as client:
        with pytest.raises(anthropic.APIConnectionError) as conn:
            client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True)
    cause = otel_liveness.liveness_error(conn.value)
    assert isinstance(cause, ProviderError) and cause.attempts == FAST.max_attempts
    assert provider.attempts("dead") == FAST.max_attempts


def test_sdk_async_under_asyncio_and_trio(provider, anyio_backend) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("flaky-async", [[s.Headers(), *anthropic_reply()[:1], s.Reset()],
                                       [s.Headers(), *anthropic_reply("async ok", think_pings=5)]])

    async def main() -> str:
        async with async_client(url) as client:
            async with client.messages.stream(model="claude-sim-1", max_tokens=8, messages=MESSAGES) as stream:
                return await stream.get_final_text()

    assert anyio.run(main, backend=anyio_backend) == "async ok"
    assert provider.attempts("flaky-async") == 2


def test_sdk_async_truncation(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("stall-async", [[s.Headers(), *anthropic_reply("abcdef", deltas=6, stall_after=2), s.Stall()]])

    async def main() -> StreamTruncated:
        async with async_client(url) as client:
            try:
                async with client.messages.stream(model="claude-sim-1", max_tokens=8, messages=MESSAGES) as stream:
                    async for _ in stream:
                        pass
            except anthropic.APITimeoutError as exc:  # (the SDK's wrapping of our ReadTimeout)
                found = otel_liveness.liveness_error(exc)
                assert isinstance(found, StreamTruncated)
                return found
        raise AssertionError("no truncation")

    exc = anyio.run(main)
    assert exc.partial["content"][0]["text"] == "ab"


def openai_client(url: str, policy: Policy = FAST) -> openai.OpenAI:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy)
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=transport))


def test_openai_chat_success_stall_and_5xx_retry(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("oa", [[s.Status(503, b'{"error":{"type":"server_error"}}')],
                              [s.Headers(), *openai_chat_reply("Hi there", think_seconds=40.0)]])
    # OpenAI is wire-silent while reasoning: 40 provider-seconds (0.4 s) of silence > raw_idle_timeout
    # (0.3 s) must not kill it, because its raw bound is raw_idle_timeout_no_keepalive.
    with openai_client(url, FAST.replace(raw_idle_timeout_no_keepalive=2.0)) as client:
        chunks = list(client.chat.completions.create(model="gpt-sim-1", messages=MESSAGES, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hi there"
    assert provider.attempts("oa") == 2

    url = provider.add("oa-stall", [[s.Headers(), *openai_chat_reply("abcdef", deltas=6, stall_after=2), s.Stall()]])
    with openai_client(url, FAST.replace(raw_idle_timeout_no_keepalive=0.3)) as client:
        with pytest.raises(openai.APITimeoutError) as info:  # openai wraps mid-stream timeouts
            for _ in client.chat.completions.create(model="gpt-sim-1", messages=MESSAGES, stream=True):
                pass
    exc = otel_liveness.liveness_error(info.value)
    assert isinstance(exc, StreamTruncated)
    assert exc.cause == "raw_silence" and exc.partial is None
    assert exc.prefix.count(b'"content":') == 3  # the role chunk and two content deltas, exactly
    assert provider.attempts("oa-stall") == 1
