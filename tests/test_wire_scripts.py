"""The simulated provider's new wires, read by the SDKs' own decoders (Bedrock, Gemini, OpenAI
Responses keep-alives, OpenRouter's mid-stream error)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_liveness.core.wire.eventstream import CONTENT_TYPE, EventStreamScanner, decode_chunk
from otel_liveness.core.wire.sse import SSEScanner
from otel_liveness.testing.scripts import (
    BEDROCK_HEADERS,
    OPENROUTER_PROCESSING,
    bedrock_converse_reply,
    bedrock_reply,
    bedrock_status,
    gemini_reply,
    gemini_status,
    openai_responses_reply,
    openrouter_reply,
)
from otel_liveness.testing.steps import Raw, Sleep


def wire(steps: list[Any]) -> bytes:
    return b"".join(s.data for s in steps if isinstance(s, Raw))


def sse_frames(steps: list[Any]) -> list[tuple[str | None, bytes]]:
    scanner = SSEScanner()
    frames = scanner.feed(wire(steps)) + scanner.close()
    return [(f.event, f.data) for f in frames]


def bedrock_events(steps: list[Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """What the anthropic SDK's Bedrock decoder (botocore's EventStreamBuffer + the bedrock-runtime
    model) yields: (SSE event name, data) per message."""
    from anthropic.lib.bedrock._stream_decoder import AWSEventStreamDecoder

    return [(sse.event, json.loads(sse.data)) for sse in AWSEventStreamDecoder().iter_bytes(iter([wire(steps)]))]


# -- Bedrock -------------------------------------------------------------------------------------


def test_bedrock_reply_is_the_anthropic_event_sequence_in_chunk_messages() -> None:
    steps = bedrock_reply("Hello there!", thinking="hmm", deltas=3)
    events = bedrock_events(steps)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop" and "ping" not in names
    text = "".join(d["delta"].get("text", "") for n, d in events if n == "content_block_delta")
    assert text == "Hello there!"
    assert events[-1][1]["amazon-bedrock-invocationMetrics"]["outputTokenCount"] == 12
    messages = EventStreamScanner().feed(wire(steps))
    assert {m.event_type for m in messages} == {"chunk"}
    assert all(json.loads(m.payload).get("p") is not None for m in messages)
    assert [json.loads(decode_chunk(m.payload) or b"")["type"] for m in messages] == names
    assert BEDROCK_HEADERS.content_type == CONTENT_TYPE == "application/vnd.amazon.eventstream"


def test_bedrock_reply_pings_only_when_asked() -> None:
    steps = bedrock_reply("Hi", think_pings=2, ping_every=3.0)
    assert [n for n, _ in bedrock_events(steps)].count("ping") == 2
    assert sum(s.seconds for s in steps if isinstance(s, Sleep)) == 6.0


@pytest.mark.parametrize("exception", ["throttlingException", "internalServerException", "modelStreamErrorException",
                                       "serviceUnavailableException", "validationException", "modelTimeoutException"])
def test_bedrock_reply_in_band_exception(exception: str) -> None:
    events = bedrock_events(bedrock_reply("abcdef", deltas=6, error_after=2, exception_type=exception,
                                          exception_message="why"))
    assert events[-1] == ("error", {"type": "error", "error": {"type": exception, "message": "why"}})
    deltas = [d["delta"]["text"] for n, d in events if n == "content_block_delta"]
    assert deltas == ["a", "b"]
    (last,) = EventStreamScanner().feed(wire(bedrock_reply("ab", error_after=0, exception_type=exception)))[-1:]
    assert (last.message_type, last.exception_type) == ("exception", exception)


def test_bedrock_reply_stall_and_no_stop() -> None:
    events = bedrock_events(bedrock_reply("abcdef", deltas=6, stall_after=3))
    assert [n for n, _ in events][-1] == "content_block_delta"
    assert "message_stop" not in [n for n, _ in bedrock_events(bedrock_reply("abc", stop=False))]


def test_bedrock_converse_reply_parses_with_the_service_model() -> None:
    from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]
    from botocore.loaders import Loader  # type: ignore[import-untyped]
    from botocore.model import ServiceModel  # type: ignore[import-untyped]
    from botocore.parsers import EventStreamJSONParser  # type: ignore[import-untyped]

    shape = ServiceModel(Loader().load_service_model("bedrock-runtime", "service-2")).shape_for("ConverseStreamOutput")
    parser = EventStreamJSONParser()

    def parse(steps: list[Any]) -> list[dict[str, Any]]:
        buffer = EventStreamBuffer()
        buffer.add_data(wire(steps))
        return [parser.parse(m.to_response_dict(), shape) for m in buffer]

    events = parse(bedrock_converse_reply("Hello!", thinking="hmm", deltas=2))
    assert [next(iter(e)) for e in events] == ["messageStart", "contentBlockDelta", "contentBlockDelta",
                                               "contentBlockStop", "contentBlockDelta", "contentBlockDelta",
                                               "contentBlockStop", "messageStop", "metadata"]
    assert "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e) == "Hello!"
    assert events[-2] == {"messageStop": {"stopReason": "end_turn"}}
    failed = parse(bedrock_converse_reply("abc", deltas=3, error_after=1, exception_type="throttlingException"))
    assert failed[-1]["Error"]["Code"] == "throttlingException"
    assert sum("contentBlockDelta" in e for e in failed) == 1


def test_bedrock_status() -> None:
    status = bedrock_status(429, "throttlingException", "Too many tokens")
    assert status.status == 429 and json.loads(status.body) == {"message": "Too many tokens"}
    assert dict(status.headers)["x-amzn-errortype"] == "ThrottlingException"


# -- Gemini --------------------------------------------------------------------------------------


def test_gemini_reply_chunks_validate_as_generate_content_responses() -> None:
    from google.genai import types

    steps = gemini_reply("Hello Gemini", deltas=3, thinking="plan", function_call=("get_weather", {"city": "Paris"}))
    assert all(s.data.endswith(b"\r\n\r\n") for s in steps if isinstance(s, Raw))  # CRLF, as Google sends
    frames = sse_frames(steps)
    assert all(event is None for event, _ in frames)  # bare data: lines
    chunks = [types.GenerateContentResponse.model_validate(json.loads(data)) for _, data in frames]
    parts = [p for c in chunks for p in c.candidates[0].content.parts]  # type: ignore[index, union-attr]
    assert parts[0].thought is True and parts[0].text == "plan"
    assert "".join(p.text for p in parts[1:-1] if p.text) == "Hello Gemini"
    assert parts[-1].function_call is not None and parts[-1].function_call.args == {"city": "Paris"}
    assert [c.candidates[0].finish_reason for c in chunks][-1] == types.FinishReason.STOP  # type: ignore[index]
    assert all(c.candidates[0].finish_reason is None for c in chunks[:-1])  # type: ignore[index]
    tokens = [c.usage_metadata.candidates_token_count for c in chunks]  # type: ignore[union-attr]
    assert tokens == sorted(tokens)  # cumulative


def test_gemini_reply_error_stall_and_silence() -> None:
    frames = sse_frames(gemini_reply("abcdef", deltas=6, error_after=2, crlf=False))
    assert json.loads(frames[-1][1]) == {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                                                   "status": "UNAVAILABLE"}}
    assert len(frames) == 3
    assert len(sse_frames(gemini_reply("abcdef", deltas=6, stall_after=4))) == 4
    steps = gemini_reply("abc", think_seconds=40.0)
    assert steps[0] == Sleep(40.0)  # silent while thinking: Gemini sends no keep-alive
    status = gemini_status(429, "RESOURCE_EXHAUSTED")
    assert status.status == 429 and json.loads(status.body)["error"]["status"] == "RESOURCE_EXHAUSTED"


# -- OpenAI Responses ----------------------------------------------------------------------------


def test_openai_responses_reply_with_keepalives() -> None:
    from openai._streaming import SSEDecoder

    steps = openai_responses_reply("Hi there", reasoning=True, keepalives=3, keepalive_every=30.0, deltas=2)
    events = list(SSEDecoder().iter_bytes(iter([wire(steps)])))
    datas = [json.loads(e.data) for e in events]
    assert all(e.event == d["type"] for e, d in zip(events, datas, strict=True))  # event: line = type, keep-alives too
    keepalives = [d for d in datas if d["type"] == "keepalive"]
    assert keepalives == [{"type": "keepalive", "sequence_number": n} for n in (3, 4, 5)]
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert [s.seconds for s in steps if isinstance(s, Sleep)] == [30.0, 30.0, 30.0]
    assert "".join(d["delta"] for d in datas if d["type"] == "response.output_text.delta") == "Hi there"
    assert datas[-1]["type"] == "response.completed" and datas[-1]["response"]["status"] == "completed"
    bare = list(SSEDecoder().iter_bytes(iter([wire(openai_responses_reply(keepalives=1, keepalive_event_line=False))])))
    assert [e.event for e in bare if json.loads(e.data)["type"] == "keepalive"] == [None]


def test_openai_responses_reply_error_and_stall() -> None:
    datas = [json.loads(d) for _, d in sse_frames(openai_responses_reply("abcd", deltas=4, error_after=2))]
    assert [d["type"] for d in datas[-2:]] == ["error", "response.failed"]
    assert datas[-1]["response"]["error"]["code"] == "server_error"
    stalled = [json.loads(d)["type"] for _, d in sse_frames(openai_responses_reply("abcd", deltas=4, stall_after=1))]
    assert stalled[-1] == "response.output_text.delta" and stalled.count("response.output_text.delta") == 1


# -- OpenRouter ----------------------------------------------------------------------------------


def test_openrouter_reply_processing_comments_and_mid_stream_error() -> None:
    steps = openrouter_reply("abcdef", deltas=6, processing=2, error_after=3, error_code=502)
    assert wire(steps).count(OPENROUTER_PROCESSING) == 2
    frames = sse_frames(steps)
    last = json.loads(frames[-1][1])
    assert last["error"] == {"code": 502, "message": "Provider returned error"}
    assert last["choices"][0]["finish_reason"] == "error"
    contents = [json.loads(d)["choices"][0]["delta"].get("content") for e, d in frames[2:-1]]
    assert contents == ["", "a", "b", "c"] and b"[DONE]" not in wire(steps)
    everything = sse_frames(openrouter_reply("ab", deltas=2, error_after=2))
    assert [json.loads(d)["choices"][0]["finish_reason"] for _, d in everything] == [None, None, None, "error"]
    clean = sse_frames(openrouter_reply("ab", deltas=2))
    assert clean[-1] == (None, b"[DONE]")


# -- the simulated provider serves them ----------------------------------------------------------


def test_simulated_provider_serves_an_event_stream_and_redacts_cloud_credentials() -> None:
    import httpx2

    from otel_liveness.testing import SimulatedProvider

    with SimulatedProvider() as sim:
        url = sim.add("bedrock", [[BEDROCK_HEADERS, *bedrock_reply("Hi", deltas=2)]])
        with httpx2.Client() as client:
            response = client.post(f"{url}/model/m/invoke-with-response-stream", content=b"{}",
                                   headers={"x-goog-api-key": "secret-1", "x-amz-security-token": "secret-2",
                                            "authorization": "secret-3"})
        assert response.headers["content-type"] == CONTENT_TYPE
        # start, block start, 2 deltas, block stop, message delta, stop
        assert [m.event_type for m in EventStreamScanner().feed(response.content)] == ["chunk"] * 7
        (log,) = sim.requests("bedrock")
        assert "secret" not in json.dumps(log.headers)
        assert log.path == "/s/bedrock/model/m/invoke-with-response-stream"
