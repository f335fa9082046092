"""Provider classification and the facts telemetry needs."""

from __future__ import annotations

import json

import pytest

from otel_liveness.core.outcome import FrameKind
from otel_liveness.core.wire.providers import PREFIX, PROFILES, StreamFacts, profile_for, select_provider
from otel_liveness.core.wire.sse import SSEScanner

H, P, S, E, X, U = (FrameKind.HEARTBEAT, FrameKind.PREAMBLE, FrameKind.SEMANTIC, FrameKind.END,
                    FrameKind.ERROR, FrameKind.UNKNOWN)


def classify(provider: str, wire: bytes) -> tuple[list[FrameKind], StreamFacts]:
    facts = StreamFacts()
    scanner = SSEScanner()
    profile = profile_for(provider)
    frames = scanner.feed(wire) + scanner.close()
    return [profile.classify(f, facts) for f in frames], facts


def ev(event: str | None, payload: object) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return (f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode()


ANTHROPIC = b"".join(
    [
        ev("message_start", {"type": "message_start", "message": {"id": "msg_01X", "model": "claude-opus-4-5",
                                                                   "usage": {"input_tokens": 42, "output_tokens": 1}}}),
        ev("ping", {"type": "ping"}),
        b": keep-alive\n\n",
        ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}}),
        ev("content_block_delta", {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "x"}}),
        ev("content_block_delta", {"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": "s"}}),
        ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ev("content_block_delta", {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{"}}),
        ev("content_block_delta", {"type": "content_block_delta", "delta": {"type": "citations_delta"}}),
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 99}}),
        ev("some_future_event", {}),
        ev("message_stop", {"type": "message_stop"}),
    ]
)


def test_anthropic_messages() -> None:
    kinds, facts = classify("anthropic", ANTHROPIC)
    assert kinds == [P, H, H, S, S, S, S, S, S, S, S, E]  # some_future_event: not recognised, taken for content
    assert facts.unrecognised == 1
    assert (facts.response_id, facts.model, facts.stop_reason) == ("msg_01X", "claude-opus-4-5", "tool_use")
    assert facts.usage == {"input_tokens": 42, "output_tokens": 99}


def test_anthropic_in_band_error() -> None:
    kinds, facts = classify(
        "anthropic",
        ev("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    assert kinds == [X] and facts.error_type == "overloaded_error"


def test_anthropic_deltas_are_not_json_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    import otel_liveness.core.wire.providers as providers

    calls = []
    real = providers._json
    monkeypatch.setattr(providers, "_json", lambda data: calls.append(data) or real(data))
    classify("anthropic", ev("content_block_delta", {"delta": {"text": "hi"}}) * 50 + ev("ping", {}) * 10)
    assert calls == []


def test_openai_chat() -> None:
    wire = b"".join(
        [
            ev(None, {"id": "chatcmpl-1", "model": "gpt-5", "choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            b": ping\n\n",
            ev(None, {"id": "chatcmpl-1", "choices": [{"delta": {"reasoning_content": "hmm"}}]}),
            ev(None, {"id": "chatcmpl-1", "choices": [{"delta": {"content": "Hello"}}]}),
            ev(None, {"id": "chatcmpl-1", "choices": [{"delta": {"tool_calls": [{"index": 0}]}}]}),
            ev(None, {"id": "chatcmpl-1", "choices": [{"delta": {}, "finish_reason": "stop"}]}),
            ev(None, {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}}),
            b"data: [DONE]\n\n",
        ]
    )
    kinds, facts = classify("openai-chat", wire)
    assert kinds == [P, H, S, S, S, S, P, E]
    assert (facts.response_id, facts.model, facts.stop_reason) == ("chatcmpl-1", "gpt-5", "stop")
    assert facts.usage == {"prompt_tokens": 5, "completion_tokens": 7}


def test_openai_chat_error_object() -> None:
    kinds, facts = classify("openai-chat", ev(None, {"error": {"message": "boom", "type": "server_error"}}))
    assert kinds == [X] and facts.error_type == "server_error"


def test_openai_responses() -> None:
    wire = b"".join(
        [
            ev("response.created", {"response": {"id": "resp_1", "model": "o5", "status": "in_progress"}}),
            ev("response.in_progress", {"response": {"id": "resp_1"}}),
            ev("keepalive", {}),
            ev("response.output_text.delta", {"delta": "Hi"}),
            ev("response.output_item.done", {}),
            ev("response.completed", {"response": {"id": "resp_1", "status": "completed",
                                                    "usage": {"input_tokens": 3, "output_tokens": 4}}}),
        ]
    )
    kinds, facts = classify("openai-responses", wire)
    assert kinds == [P, P, H, S, S, E]
    assert (facts.response_id, facts.stop_reason, facts.usage) == ("resp_1", "completed", {"input_tokens": 3, "output_tokens": 4})
    kinds, facts = classify("openai-responses", ev("response.failed", {"response": {"error": {"code": "server_error"}}}))
    assert kinds == [X] and facts.error_type == "server_error"
    kinds, facts = classify("openai-responses", ev("error", {"type": "error", "code": "rate_limit_exceeded"}))
    assert kinds == [X] and facts.error_type == "rate_limit_exceeded"


def test_generic_sse() -> None:
    body = b": OPENROUTER PROCESSING\n\n" + ev(None, {"candidates": []}) + ev("ping", "") + b"data: [DONE]\n\n"
    kinds, _ = classify("sse", body)
    assert kinds == [H, S, H, E]


def test_error_facts_never_carry_the_message() -> None:
    _, facts = classify("anthropic", ev("error", {"type": "error", "error": {"type": "x" * 500, "message": "secret"}}))
    assert facts.error_type == "x" * 64 and "secret" not in json.dumps(facts.to_dict())


@pytest.mark.parametrize(
    ("host", "path", "provider"),
    [
        ("api.anthropic.com", "/v1/messages", "anthropic"),
        ("127.0.0.1", "/v1/messages", "anthropic"),
        ("bedrock-runtime.us-east-1.amazonaws.com", "/model/anthropic.claude-x/invoke-with-response-stream", "bedrock"),
        ("127.0.0.1", "/model/anthropic.claude-x/invoke-with-response-stream", "bedrock"),  # a proxy: by path
        ("bedrock-runtime.us-east-1.amazonaws.com", "/model/m/converse-stream", "bedrock-converse"),
        ("us-east5-aiplatform.googleapis.com",
         "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude:streamRawPredict", "vertex"),
        ("127.0.0.1", "/v1/projects/p/locations/r/publishers/anthropic/models/claude:streamRawPredict", "vertex"),
        ("api.openai.com", "/v1/chat/completions", "openai-chat"),
        ("openrouter.ai", "/api/v1/chat/completions", "openrouter"),
        ("api.openai.com", "/v1/responses", "openai-responses"),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", "gemini"),
        ("us-central1-aiplatform.googleapis.com",
         "/v1beta1/projects/p/locations/l/publishers/google/models/g:streamGenerateContent", "gemini"),
        ("127.0.0.1", "/some/custom/stream", "sse"),
        # Bedrock's OpenAI-compatible endpoints are SSE of OpenAI's wire, on the runtime host
        ("bedrock-runtime.us-east-1.amazonaws.com", "/openai/v1/chat/completions", "openai-chat"),
        ("bedrock-runtime.us-east-1.amazonaws.com", "/openai/v1/responses", "openai-responses"),
    ],
)
def test_select_provider(host: str, path: str, provider: str) -> None:
    assert select_provider(host, path) == provider


def test_unknown_provider() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        profile_for("nope")


def test_fast_block_classification_matches_frame_classification() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = [ANTHROPIC, b": c\n\n", b"event: ping\n\n", b"event: content_block_stopx\ndata: {}\n\n",
              b'event: ping\ndata: {"type": "ping"}\r\n\r\n', b"data: [DONE]\n\n",
              b'data: {"error": {"type": "server_error"}}\n\n', b"id: 3\n\n"]

    sse = sorted(name for name, profile in PROFILES.items() if profile.framing == "sse")

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.sampled_from(pieces), max_size=8), st.sampled_from(sse), st.integers(1, 64))
    def check(parts: list[bytes], provider: str, size: int) -> None:
        wire = b"".join(parts)
        slow_scanner, fast_scanner = SSEScanner(), SSEScanner()
        slow_facts, fast_facts = StreamFacts(), StreamFacts()
        profile = profile_for(provider)
        slow: list[FrameKind] = []
        fast: list[FrameKind] = []
        for i in range(0, len(wire), size):
            slow += [profile.classify(f, slow_facts) for f in slow_scanner.feed(wire[i : i + size])]
            fast += profile.classify_blocks(fast_scanner.feed_blocks(wire[i : i + size]), fast_facts)
        slow += [profile.classify(f, slow_facts) for f in slow_scanner.close()]
        fast += profile.classify_blocks(fast_scanner.close_blocks(), fast_facts)
        assert fast == slow
        assert fast_facts.to_dict() == slow_facts.to_dict()

    check()


def test_every_fast_key_is_a_whole_prefix_and_matches_the_recorded_ping() -> None:
    """A fast key shorter than PREFIX matches only a block of exactly its length: the Anthropic
    ping key once was, so every real ping took the slow path."""
    for name, profile in PROFILES.items():
        for key in profile.fast:
            assert len(key) == PREFIX, (name, key)
    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    assert PROFILES["anthropic"].fast[ping[:PREFIX]] is FrameKind.HEARTBEAT
    assert PROFILES["anthropic"].fast[b'event: ping\ndata: {"type":"ping"}\n\n'[:PREFIX]] is FrameKind.HEARTBEAT


@pytest.mark.parametrize("data", [
    b'{"a":1,"b":"\xc3\xa9"}',  # UTF-8
    b'\xef\xbb\xbf{"a":1}',  # a BOM: loads() takes it
    '{"a":1}'.encode("utf-16"),  # another encoding loads() detects
    b'{"a":"\xed\xa0\x80"}',  # a lone surrogate, as loads() passes it
    b'{"a":',  # not JSON
    b"\xff\xfe\x00",  # neither
])
def test_frame_json_answers_as_loads_does(data: bytes) -> None:
    from otel_liveness.core.wire.providers import _json

    try:
        expected = json.loads(data)
    except ValueError:
        expected = None
    assert _json(data) == expected
