"""The simulated provider answers a request without ``"stream": true`` as the API does -- one JSON
body (an Anthropic ``Message``, an OpenAI ``ChatCompletion`` or ``Response``) -- under every
scenario that applies: an error status with its headers, an in-band error before content (its
status), a slow first byte, a dead socket (a body that never completes)."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai
import pytest

import otel_liveness
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.nonstreaming import as_json_reply, streams
from otel_liveness.testing.scripts import anthropic_error, anthropic_status, openai_chat_reply, openai_responses_reply

from .conftest import FAST

MESSAGES: Any = [{"role": "user", "content": "hi"}]


def claude(url: str, policy: Any = FAST) -> anthropic.Anthropic:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, telemetry=False)
    return anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport))


def test_a_non_streaming_message_is_a_message_with_thinking_tool_use_and_usage(provider: Any) -> None:
    url = provider.add("msg", [[s.Headers(), *anthropic_reply("Done.", thinking="plan", think_pings=2)]])
    message = claude(url).messages.create(model="m", max_tokens=64, messages=MESSAGES)
    assert isinstance(message, anthropic.types.Message)
    assert [b.type for b in message.content] == ["thinking", "text"] and message.content[1].text == "Done."
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    assert provider.requests("msg")[0].body and b'"stream"' not in provider.requests("msg")[0].body


def test_statuses_and_a_slow_first_byte_apply_to_a_non_streaming_call(provider: Any) -> None:
    url = provider.add("slow", [[anthropic_status(529, "overloaded_error")],
                                [s.Sleep(5.0), s.Headers(), *anthropic_reply("After a slow prefill.")]])
    message = claude(url).messages.create(model="m", max_tokens=64, messages=MESSAGES)
    assert message.content[0].text == "After a slow prefill." and provider.attempts("slow") == 2


def test_an_in_band_error_before_content_is_its_status_without_a_stream(provider: Any) -> None:
    url = provider.add("inband", [[s.Headers(), anthropic_reply()[0], s.Raw(anthropic_error("overloaded_error"))]])
    with pytest.raises(anthropic.APIStatusError) as info:
        claude(url, FAST.replace(max_attempts=1)).messages.create(model="m", max_tokens=64, messages=MESSAGES)
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"  # type: ignore[attr-defined]


def test_a_dead_socket_is_a_body_that_never_completes(provider: Any) -> None:
    url = provider.add("dead", [[s.Headers(), *anthropic_reply("abc", stall_after=1), s.Reset()]])
    with pytest.raises(anthropic.APIConnectionError):
        claude(url, FAST.replace(max_attempts=1)).messages.create(model="m", max_tokens=64, messages=MESSAGES)


def test_openai_chat_and_responses_without_a_stream(provider: Any) -> None:
    chat = provider.add("chat", [[s.Headers(), *openai_chat_reply("Chat reply.")]])
    client = openai.OpenAI(base_url=chat + "/v1", api_key="k", max_retries=0)
    completion = client.chat.completions.create(model="m", messages=MESSAGES)
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    assert completion.choices[0].message.content == "Chat reply." and completion.choices[0].finish_reason == "stop"
    responses = provider.add("resp", [[s.Headers(), *openai_responses_reply("Responses reply.", reasoning=True)]])
    client = openai.OpenAI(base_url=responses + "/v1", api_key="k", max_retries=0)
    response = client.responses.create(model="m", input="hi")
    assert response.output_text == "Responses reply." and response.usage is not None


def test_what_is_not_a_json_generation_request_plays_as_scripted() -> None:
    script = [s.Headers(), *anthropic_reply("x")]
    assert streams(b'{"stream": true}') and streams(b"not json") and streams(b"[1]") and streams(b"")
    assert not streams(b'{"model": "m"}') and not streams(b'{"model": "m", "stream": false}')
    assert as_json_reply(script, "/v1/embeddings") == script  # not a wire it folds
    status = [anthropic_status(400, "invalid_request_error")]
    assert as_json_reply(status, "/v1/messages") == status


def test_a_scenario_can_opt_out(provider: Any) -> None:
    provider.json_replies = False
    url = provider.add("raw", [[s.Headers(), *anthropic_reply("sse")]])
    with httpx2.Client() as client:
        response = client.post(url + "/v1/messages", json={"model": "m"})
    assert response.headers["content-type"] == "text/event-stream" and b"event: message_start" in response.content
