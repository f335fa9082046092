"""Every wire production agents stream over, driven by the real clients users run against the
simulated provider (dummy credentials, loopback base URLs, no network): AWS Bedrock
(``anthropic.AnthropicBedrock``; ConverseStream through plain httpx2), Google Vertex AI
(``anthropic.AnthropicVertex``), Gemini (``google-genai``, which accepts a custom httpx2
transport through ``HttpOptions.client_args``), OpenAI Responses keep-alives (``openai``) and
OpenRouter (``openai`` chat completions)."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import anyio
import httpx2
import openai
import pytest
from google import genai
from google.genai import types as genai_types

import otel_liveness
from otel_liveness import Policy, StreamTruncated
from otel_liveness.core.errors import CorruptFrame
from otel_liveness.core.wire.eventstream import bedrock_chunk, bedrock_exception
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import (
    BEDROCK_HEADERS,
    anthropic_reply,
    bedrock_converse_reply,
    bedrock_reply,
    gemini_reply,
    openai_responses_reply,
    openrouter_reply,
)

from .clients import run
from .conftest import FAST

MESSAGES: Any = [{"role": "user", "content": "hi"}]
# Wire-silent providers: a short wire-silent bound too, so a stall is found in test time.
SILENT = FAST.replace(raw_idle_timeout_no_keepalive=0.5)


def events(transport_hooks: list[Any]) -> list[Any]:
    return transport_hooks


# -- AWS Bedrock ----------------------------------------------------------------------------------


def bedrock(url: str, policy: Policy, hooks: list[Any] | None = None) -> anthropic.AnthropicBedrock:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, hooks=hooks or [])
    return anthropic.AnthropicBedrock(aws_access_key="AKIDEXAMPLE", aws_secret_key="secret", aws_region="us-east-1",
                                      base_url=url, max_retries=0, http_client=httpx2.Client(transport=transport))


def bedrock_stream(url: str, policy: Policy = SILENT) -> tuple[str, dict[str, Any]]:
    with bedrock(url, policy) as client:
        with client.messages.stream(model="anthropic.claude-sim-v1:0", max_tokens=64, messages=MESSAGES) as stream:
            return stream.get_final_text(), stream.response.extensions["liveness"]


def test_bedrock_stream_completes_as_the_event_stream_profile(provider: Any) -> None:
    url = provider.add("bd-ok", [[BEDROCK_HEADERS, *bedrock_reply("Hello from Bedrock.", thinking="hmm")]])
    text, report = bedrock_stream(url)
    assert text == "Hello from Bedrock."
    assert (report["provider"], report["provider_name"], report["stop_reason"]) == ("bedrock", "aws.bedrock", "completed")
    attempt = report["attempts"][0]
    assert attempt["completion"] == "end_frame" and attempt["response_id"] == "msg_bdrk_sim_0001"
    assert provider.requests("bd-ok")[0].path.endswith("/invoke-with-response-stream")


def test_bedrock_async_stream_completes(provider: Any) -> None:
    url = provider.add("bd-async", [[BEDROCK_HEADERS, *bedrock_reply("Async Bedrock.")]])

    async def main() -> str:
        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), SILENT)
        async with anthropic.AsyncAnthropicBedrock(aws_access_key="AKIDEXAMPLE", aws_secret_key="secret",
                                                   aws_region="us-east-1", base_url=url, max_retries=0,
                                                   http_client=httpx2.AsyncClient(transport=transport)) as client:
            async with client.messages.stream(model="anthropic.claude-sim-v1:0", max_tokens=64,
                                              messages=MESSAGES) as stream:
                return await stream.get_final_text()

    assert anyio.run(main) == "Async Bedrock."


def test_bedrock_stall_after_text_is_a_truncation_with_the_decoded_partial(provider: Any) -> None:
    steps = [BEDROCK_HEADERS, *bedrock_reply("abcdef", deltas=3, stall_after=2), s.Stall()]
    url = provider.add("bd-stall", [steps])
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        bedrock_stream(url)
    error = otel_liveness.liveness_error(caught.value)
    assert isinstance(error, StreamTruncated) and error.cause == "raw_silence"
    assert time.monotonic() - started < 0.5 + 1.0  # the wire-silent bound, not the SDK's 10 minutes
    assert error.partial is not None and error.partial["content"][0]["text"] == "abcd"
    released = b"".join(step.data for step in steps if isinstance(step, s.Raw))
    assert error.prefix == released and provider.attempts("bd-stall") == 1  # the exact binary prefix


@pytest.mark.parametrize(("exception", "reason"), [("throttlingException", "rate_limited"),
                                                   ("internalServerException", "server_error"),
                                                   ("serviceUnavailableException", "overloaded"),
                                                   ("modelStreamErrorException", "server_error")])
def test_bedrock_in_band_exceptions_before_content_are_retried(provider: Any, exception: str, reason: str) -> None:
    failing = [BEDROCK_HEADERS, bedrock_reply("x")[0], s.Raw(bedrock_exception(exception, "try again"))]
    url = provider.add("bd-exc", [failing, [BEDROCK_HEADERS, *bedrock_reply("Second time.")]])
    text, report = bedrock_stream(url)
    assert text == "Second time." and provider.attempts("bd-exc") == 2
    assert report["attempts"][0]["retry_reason"] == reason
    assert report["attempts"][0]["error_type"] == exception


def test_bedrock_validation_exception_is_rejected_not_retried(provider: Any) -> None:
    url = provider.add("bd-invalid", [[BEDROCK_HEADERS, bedrock_reply("x")[0],
                                       s.Raw(bedrock_exception("validationException", "bad request"))]])
    # Not retried, and given to the SDK as Bedrock sent it: the SDK raises its own error for it.
    with pytest.raises(anthropic.APIError) as caught:
        bedrock_stream(url)
    assert otel_liveness.liveness_error(caught.value) is None and "bad request" in str(caught.value)
    assert provider.attempts("bd-invalid") == 1


def test_bedrock_corrupt_crc_is_a_typed_error(provider: Any) -> None:
    good = bedrock_chunk(b'{"type":"message_start","message":{"id":"m","model":"x","content":[]}}')
    corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])
    url = provider.add("bd-crc", [[BEDROCK_HEADERS, s.Raw(corrupt)]])
    with pytest.raises(Exception) as caught:
        bedrock_stream(url)
    error = otel_liveness.liveness_error(caught.value)
    assert isinstance(error, CorruptFrame) and error.what == "message_crc"


def test_bedrock_converse_stream_through_httpx2(provider: Any) -> None:
    url = provider.add("converse", [[BEDROCK_HEADERS, *bedrock_converse_reply("Conversed.", deltas=2)]])
    result = run(("httpx2", None), SILENT, url + "/model/anthropic.claude-sim/converse-stream",
                 body={"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    assert result.error is None and result.report is not None
    (attempt,) = result.report["attempts"]
    assert result.report["provider"] == "bedrock-converse" and attempt["completion"] == "end_frame"
    assert attempt["stop_detail"] == "end_turn" and attempt["usage"] == {"input_tokens": 25, "output_tokens": 12}


def test_bedrock_converse_stall_after_text_is_a_truncation(provider: Any) -> None:
    url = provider.add("converse-stall", [[BEDROCK_HEADERS, *bedrock_converse_reply("abcd", deltas=2, stall_after=1),
                                           s.Stall()]])
    result = run(("httpx2", "asyncio"), SILENT, url + "/model/anthropic.claude-sim/converse-stream",
                 body={"messages": []})
    assert isinstance(result.error, StreamTruncated) and result.error.prefix == result.body


# -- Google Vertex AI (Anthropic) -------------------------------------------------------------------


def vertex_stream(url: str, policy: Policy = FAST) -> tuple[str, dict[str, Any]]:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy)
    with anthropic.AnthropicVertex(region="us-east5", project_id="proj", access_token="dummy", base_url=url,
                                   max_retries=0, http_client=httpx2.Client(transport=transport)) as client:
        with client.messages.stream(model="claude-sim@1", max_tokens=64, messages=MESSAGES) as stream:
            return stream.get_final_text(), stream.response.extensions["liveness"]


def test_vertex_stream_completes_as_anthropic_on_vertex(provider: Any) -> None:
    url = provider.add("vx-ok", [[s.Headers(), *anthropic_reply("Hello from Vertex.")]])
    text, report = vertex_stream(url)
    assert text == "Hello from Vertex." and (report["provider"], report["provider_name"]) == ("vertex", "gcp.vertex_ai")
    assert provider.requests("vx-ok")[0].path.endswith(":streamRawPredict")


def test_vertex_death_after_message_start_is_retried_not_truncated(provider: Any) -> None:
    # message_start is preamble, not content: the first-party rule, also on Vertex.
    reply = anthropic_reply("Recovered.")
    url = provider.add("vx-dead", [[s.Headers(), reply[0], s.Stall()], [s.Headers(), *reply]])
    text, report = vertex_stream(url)
    assert text == "Recovered." and provider.attempts("vx-dead") == 2
    assert report["attempts"][0]["outcome"] == "raw_silence"


# -- Gemini (google-genai) -------------------------------------------------------------------------


def gemini_client(url: str, policy: Policy) -> genai.Client:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy)
    return genai.Client(api_key="test-key", http_options=genai_types.HttpOptions(
        base_url=url, client_args={"transport": transport}))


def test_gemini_stream_completes_through_google_genai(provider: Any) -> None:
    url = provider.add("gem-ok", [[s.Headers(), *gemini_reply("Hello from Gemini.", thinking="hmm", deltas=3)]])
    client = gemini_client(url, SILENT)
    chunks = list(client.models.generate_content_stream(model="gemini-sim", contents="hi"))
    text = "".join(part.text or "" for c in chunks for part in c.candidates[0].content.parts if not part.thought)
    assert text == "Hello from Gemini."
    log = provider.requests("gem-ok")[0]
    assert ":streamGenerateContent" in log.path and provider.attempts("gem-ok") == 1


def test_gemini_silence_after_text_is_a_truncation_not_a_hang(provider: Any) -> None:
    steps = gemini_reply("abcdef", deltas=3, stall_after=2)
    url = provider.add("gem-stall", [[s.Headers(), *steps, s.Stall()]])
    client = gemini_client(url, SILENT)
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        for _ in client.models.generate_content_stream(model="gemini-sim", contents="hi"):
            pass
    error = otel_liveness.liveness_error(caught.value)
    assert isinstance(error, StreamTruncated) and error.cause == "raw_silence"
    assert error.prefix == b"".join(step.data for step in steps if isinstance(step, s.Raw))
    assert time.monotonic() - started < 0.5 + 1.0


def test_gemini_in_band_unavailable_before_content_is_retried(provider: Any) -> None:
    url = provider.add("gem-503", [[s.Headers(), *gemini_reply("x", error_after=0)],
                                   [s.Headers(), *gemini_reply("Second.")]])
    result = run(("httpx2", None), SILENT, url + "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse",
                 body={"contents": []})
    assert result.error is None and provider.attempts("gem-503") == 2 and result.report is not None
    assert result.report["attempts"][0]["retry_reason"] == "overloaded"
    assert result.report["attempts"][1]["completion"] == "finish_then_eof"


# -- OpenAI Responses keep-alives --------------------------------------------------------------------


def responses_text(url: str, policy: Policy) -> tuple[str, dict[str, Any]]:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy)
    with openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0,
                       http_client=httpx2.Client(transport=transport)) as client:
        stream = client.responses.create(model="gpt-sim-1", input="hi", stream=True)
        text = "".join(getattr(e, "delta", "") for e in stream if e.type == "response.output_text.delta")
        return text, stream.response.extensions["liveness"]


@pytest.mark.parametrize("event_line", [True, False], ids=["event-line", "bare-data"])
def test_responses_long_reasoning_with_keepalives_completes(provider: Any, event_line: bool) -> None:
    reply = openai_responses_reply("Reasoned.", reasoning=True, keepalives=6, keepalive_every=30.0,
                                   keepalive_event_line=event_line)
    url = provider.add("resp-think", [[s.Headers(), *reply]])
    text, report = responses_text(url, FAST.replace(raw_idle_timeout=0.9, raw_idle_timeout_no_keepalive=60.0))
    assert text == "Reasoned." and report["attempts"][0]["heartbeats"] == 6


def test_responses_silence_after_keepalives_stop_is_judged_by_the_keepalive_bound(provider: Any) -> None:
    reply = openai_responses_reply("x", keepalives=2, keepalive_every=10.0)
    last = max(i for i, step in enumerate(reply) if b"keepalive" in getattr(step, "data", b""))
    dead = reply[: last + 1]  # response.created, in_progress, two keep-alives: then nothing
    url = provider.add("resp-dead", [[s.Headers(), *dead, s.Stall()], [s.Headers(), *openai_responses_reply("Back.")]])
    started = time.monotonic()
    text, report = responses_text(url, FAST.replace(raw_idle_timeout=0.3, raw_idle_timeout_no_keepalive=30.0))
    assert text == "Back." and provider.attempts("resp-dead") == 2
    first = report["attempts"][0]
    assert first["outcome"] == "raw_silence" and first["raw_bound"] == pytest.approx(0.3)
    assert time.monotonic() - started < 3.0  # not the 30 s wire-silent bound


# -- OpenRouter ------------------------------------------------------------------------------------

OPENROUTER = FAST.replace(provider="openrouter")


def test_openrouter_processing_comments_are_heartbeats(provider: Any) -> None:
    url = provider.add("or-ok", [[s.Headers(), *openrouter_reply("Routed.", processing=5, processing_every=10.0)]])
    result = run(("httpx2", None), OPENROUTER, url + "/api/v1/chat/completions")
    assert result.error is None and result.report is not None
    assert result.report["attempts"][0]["heartbeats"] == 5 and result.report["provider_name"] == "openrouter"


def test_openrouter_mid_stream_error_after_content_is_the_sdks_api_error(provider: Any) -> None:
    url = provider.add("or-err", [[s.Headers(), *openrouter_reply("abcdef", deltas=3, error_after=2)]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), OPENROUTER)
    with openai.OpenAI(base_url=url + "/api/v1", api_key="sk-or-test", max_retries=0,
                       http_client=httpx2.Client(transport=transport)) as client:
        stream = client.chat.completions.create(model="openrouter/sim-1", messages=MESSAGES, stream=True)
        text = ""
        with pytest.raises(openai.APIError) as caught:
            for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
    # the provider's own error, with its message -- not a connection error of ours
    assert not isinstance(caught.value, openai.APIConnectionError)
    assert otel_liveness.liveness_error(caught.value) is None
    assert "Provider returned error" in caught.value.message
    report = otel_liveness.liveness_report(caught.value)
    assert report is not None and report["stop_reason"] == "truncated" and report["cause"].startswith("error_event:")
    assert text == "abcd" and provider.attempts("or-err") == 1


def test_openrouter_error_before_content_is_retried(provider: Any) -> None:
    url = provider.add("or-pre", [[s.Headers(), *openrouter_reply("x", error_after=0)],
                                  [s.Headers(), *openrouter_reply("Second.")]])
    result = run(("httpx2", "asyncio"), OPENROUTER, url + "/api/v1/chat/completions")
    assert result.error is None and provider.attempts("or-pre") == 2
