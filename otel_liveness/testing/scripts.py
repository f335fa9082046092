"""Builders for provider-shaped attempt scripts."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.wire.eventstream import CONTENT_TYPE as EVENTSTREAM_CONTENT_TYPE
from ..core.wire.eventstream import bedrock_chunk, bedrock_exception, converse_event
from .steps import Headers, Raw, Sleep, Status

__all__ = [
    "BEDROCK_HEADERS",
    "OPENROUTER_PROCESSING",
    "PING",
    "anthropic_error",
    "anthropic_reply",
    "anthropic_status",
    "background_response",
    "bedrock_converse_reply",
    "bedrock_reply",
    "bedrock_status",
    "compressed",
    "gemini_reply",
    "gemini_status",
    "openai_chat_reply",
    "openai_responses_reply",
    "openrouter_error_chunk",
    "openrouter_reply",
    "sse_event",
]


def sse_event(event: str | None, payload: Any) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


PING = sse_event("ping", {"type": "ping"})


def compressed(steps: Sequence[Any], coding: str = "gzip") -> list[Any]:
    """``steps`` as a compressing provider or proxy sends them: ``Content-Encoding: <coding>``
    (``gzip`` or ``deflate``) on the headers, each ``Raw`` step compressed and flushed so that it
    can be decoded on arrival (what a streaming gzip proxy does)."""
    compressor = zlib.compressobj(wbits=31 if coding == "gzip" else 15)
    out: list[Any] = []
    for step in steps:
        if isinstance(step, Headers):
            step = replace(step, headers=(*step.headers, ("content-encoding", coding)))
        elif isinstance(step, Raw):
            step = Raw(compressor.compress(step.data) + compressor.flush(zlib.Z_SYNC_FLUSH))
        out.append(step)
    return out


def anthropic_reply(
    text: str = "Hello from the simulated provider.",
    *,
    msg_id: str = "msg_sim_0001",
    model: str = "claude-sim-1",
    thinking: str | None = None,
    think_pings: int = 0,
    ping_every: float = 5.0,
    deltas: int | None = None,
    stall_after: int | None = None,
    error_after: int | None = None,
    error_type: str = "overloaded_error",
    delta_every: float = 0.0,
    stop: bool = True,
) -> list[Any]:
    """An Anthropic Messages stream as steps.

    ``think_pings`` pings ``ping_every`` seconds apart come before any content (a long think);
    ``deltas`` splits ``text`` into that many deltas; ``stall_after=K`` stops after K text deltas
    (no more bytes: the caller adds ``Stall()``); ``error_after=K`` sends an in-band error after K
    deltas; ``stop=False`` omits ``message_stop``.
    """
    steps: list[Any] = [
        Raw(sse_event("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 1}}}))
    ]
    for _ in range(think_pings):
        steps += [Sleep(ping_every), Raw(PING)]
    index = 0
    if thinking is not None:
        steps += [
            Raw(sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                  "content_block": {"type": "thinking", "thinking": "", "signature": ""}})),
            Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                  "delta": {"type": "thinking_delta", "thinking": thinking}})),
            Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                  "delta": {"type": "signature_delta", "signature": "sig_sim"}})),
            Raw(sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})),
        ]
        index = 1
    steps.append(Raw(sse_event("content_block_start", {"type": "content_block_start", "index": index,
                                                       "content_block": {"type": "text", "text": ""}})))
    n = deltas or max(1, min(len(text), 8))
    size = -(-len(text) // n) if text else 1
    pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    for k, piece in enumerate(pieces):
        if stall_after is not None and k == stall_after:
            return steps
        if error_after is not None and k == error_after:
            steps.append(Raw(anthropic_error(error_type)))
            return steps
        if delta_every:
            steps.append(Sleep(delta_every))
        steps.append(Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": {"type": "text_delta", "text": piece}})))
    if error_after is not None and error_after >= len(pieces):
        steps.append(Raw(anthropic_error(error_type)))
        return steps
    steps += [
        Raw(sse_event("content_block_stop", {"type": "content_block_stop", "index": index})),
        Raw(sse_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                        "usage": {"output_tokens": 12}})),
    ]
    if stop:
        steps.append(Raw(sse_event("message_stop", {"type": "message_stop"})))
    return steps


def anthropic_error(error_type: str = "overloaded_error", message: str = "Overloaded") -> bytes:
    return sse_event("error", {"type": "error", "error": {"type": error_type, "message": message}})


def anthropic_status(status: int, error_type: str, headers: tuple[tuple[str, str], ...] = ()) -> Status:
    body = json.dumps({"type": "error", "error": {"type": error_type, "message": error_type}}).encode()
    return Status(status, body, headers)


def openai_chat_reply(
    text: str = "Hello from the simulated provider.",
    *,
    chat_id: str = "chatcmpl-sim-1",
    model: str = "gpt-sim-1",
    deltas: int | None = None,
    stall_after: int | None = None,
    think_seconds: float = 0.0,
) -> list[Any]:
    """An OpenAI Chat Completions stream as steps (wire-silent while "reasoning")."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse_event(None, {"id": chat_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    steps: list[Any] = [Raw(chunk({"role": "assistant", "content": ""}))]
    if think_seconds:
        steps.append(Sleep(think_seconds))
    n = deltas or max(1, min(len(text), 8))
    size = -(-len(text) // n) if text else 1
    for k, i in enumerate(range(0, len(text), size)):
        if stall_after is not None and k == stall_after:
            return steps
        steps.append(Raw(chunk({"content": text[i : i + size]})))
    steps += [Raw(chunk({}, "stop")), Raw(b"data: [DONE]\n\n")]
    return steps


# -- AWS Bedrock (application/vnd.amazon.eventstream) ---------------------------------------------

#: The response head of a Bedrock stream (``InvokeModelWithResponseStream`` and ``ConverseStream``):
#: a binary event stream, not SSE. Use it as the attempt's first step.
BEDROCK_HEADERS = Headers(content_type=EVENTSTREAM_CONTENT_TYPE,
                          headers=(("x-amzn-bedrock-content-type", "application/json"),))

_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _sse_data(raw: bytes) -> bytes:
    """The ``data:`` payload of one single-line SSE event built by :func:`sse_event`."""
    for line in raw.split(b"\n"):
        if line.startswith(b"data: "):
            return line[6:]
    raise ValueError(f"not an SSE data event: {raw[:60]!r}")


def bedrock_reply(
    text: str = "Hello from the simulated provider.",
    *,
    msg_id: str = "msg_bdrk_sim_0001",
    model: str = "claude-sim-1",
    thinking: str | None = None,
    think_pings: int = 0,
    ping_every: float = 5.0,
    deltas: int | None = None,
    stall_after: int | None = None,
    error_after: int | None = None,
    exception_type: str = "internalServerException",
    exception_message: str = "The system encountered an unexpected error during processing. Try your request again.",
    delta_every: float = 0.0,
    stop: bool = True,
    padding: bool = True,
) -> list[Any]:
    """An Anthropic Messages stream as Bedrock ``InvokeModelWithResponseStream`` steps.

    The same events as :func:`anthropic_reply` (same knobs), each carried base64'd in an
    event-stream ``chunk`` message; play it after :data:`BEDROCK_HEADERS`. ``error_after=K`` sends
    an in-band ``exception_type`` exception message after K text deltas (Bedrock's errors are
    exceptions, not Anthropic ``error`` events: ``throttlingException``,
    ``internalServerException``, ``serviceUnavailableException``, ``modelStreamErrorException``,
    ``validationException``, ``modelTimeoutException``). ``think_pings`` defaults to 0: the real
    service has been seen to send no pings (it is wire-silent while the model thinks); give it to
    script a hypothetical Bedrock that forwards them. ``padding`` adds the service's random-length
    ``"p"`` field to each chunk (deterministic here). The final ``message_stop`` carries Bedrock's
    ``amazon-bedrock-invocationMetrics``.
    """
    sse = anthropic_reply(text, msg_id=msg_id, model=model, thinking=thinking, think_pings=think_pings,
                          ping_every=ping_every, deltas=deltas, stall_after=stall_after, error_after=error_after,
                          delta_every=delta_every, stop=stop)
    steps: list[Any] = []
    for n, step in enumerate(sse):
        if not isinstance(step, Raw):
            steps.append(step)
            continue
        data = _sse_data(step.data)
        event = json.loads(data)
        if event.get("type") == "error":
            steps.append(Raw(bedrock_exception(exception_type, exception_message)))
            continue
        if event.get("type") == "message_stop":
            event["amazon-bedrock-invocationMetrics"] = {"inputTokenCount": 25, "outputTokenCount": 12,
                                                         "invocationLatency": 1234, "firstByteLatency": 321}
            data = json.dumps(event, separators=(",", ":")).encode()
        pad = _PADDING[: (n * 7) % len(_PADDING)] if padding else None
        steps.append(Raw(bedrock_chunk(data, padding=pad)))
    return steps


def bedrock_converse_reply(
    text: str = "Hello from the simulated provider.",
    *,
    thinking: str | None = None,
    deltas: int | None = None,
    stall_after: int | None = None,
    error_after: int | None = None,
    exception_type: str = "internalServerException",
    exception_message: str = "The system encountered an unexpected error during processing. Try your request again.",
    delta_every: float = 0.0,
    stop_reason: str = "end_turn",
    stop: bool = True,
    padding: bool = True,
) -> list[Any]:
    """A Bedrock ``ConverseStream`` reply as steps (play it after :data:`BEDROCK_HEADERS`).

    Events (bedrock-runtime's ``ConverseStreamOutput``): ``messageStart``; with ``thinking``, a
    reasoning block 0 (``reasoningContent`` text and signature deltas, ``contentBlockStop``); the
    text block's ``contentBlockDelta`` events (no ``contentBlockStart``: the service sends one only
    for tool use) and ``contentBlockStop``; ``messageStop`` with ``stop_reason``; ``metadata``
    (usage, latency). ``stall_after``/``error_after`` as in :func:`bedrock_reply`; ``stop=False``
    ends before ``messageStop``.
    """
    counter = iter(range(1 << 30))

    def event(kind: str, body: dict[str, Any]) -> Raw:
        pad = _PADDING[: (next(counter) * 7) % len(_PADDING)] if padding else None
        return Raw(converse_event(kind, body, padding=pad))

    steps: list[Any] = [event("messageStart", {"role": "assistant"})]
    index = 0
    if thinking is not None:
        steps += [
            event("contentBlockDelta", {"delta": {"reasoningContent": {"text": thinking}}, "contentBlockIndex": 0}),
            event("contentBlockDelta", {"delta": {"reasoningContent": {"signature": "sig_sim"}}, "contentBlockIndex": 0}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
        ]
        index = 1
    for k, piece in enumerate(_pieces(text, deltas)):
        if stall_after is not None and k == stall_after:
            return steps
        if error_after is not None and k == error_after:
            return [*steps, Raw(bedrock_exception(exception_type, exception_message))]
        if delta_every:
            steps.append(Sleep(delta_every))
        steps.append(event("contentBlockDelta", {"delta": {"text": piece}, "contentBlockIndex": index}))
    if error_after is not None and error_after >= len(_pieces(text, deltas)):
        return [*steps, Raw(bedrock_exception(exception_type, exception_message))]
    steps.append(event("contentBlockStop", {"contentBlockIndex": index}))
    if stop:
        steps += [
            event("messageStop", {"stopReason": stop_reason}),
            event("metadata", {"usage": {"inputTokens": 25, "outputTokens": 12, "totalTokens": 37},
                               "metrics": {"latencyMs": 1234}}),
        ]
    return steps


def bedrock_status(status: int, exception_type: str, message: str = "") -> Status:
    """A Bedrock error answered before the stream starts (``429`` throttlingException...): JSON
    ``{"message": ...}`` with the service's ``x-amzn-errortype`` header."""
    body = json.dumps({"message": message or exception_type}).encode()
    return Status(status, body, (("x-amzn-errortype", f"{exception_type[:1].upper()}{exception_type[1:]}"),))


def _pieces(text: str, deltas: int | None) -> list[str]:
    n = deltas or max(1, min(len(text), 8))
    size = -(-len(text) // n) if text else 1
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# -- Gemini (Gemini API and Vertex AI, alt=sse) ---------------------------------------------------


def gemini_reply(
    text: str = "Hello from the simulated provider.",
    *,
    model: str = "gemini-sim-1",
    response_id: str = "resp_gem_sim_0001",
    thinking: str | None = None,
    function_call: tuple[str, dict[str, Any]] | None = None,
    deltas: int | None = None,
    think_seconds: float = 0.0,
    stall_after: int | None = None,
    error_after: int | None = None,
    error_code: int = 503,
    error_status: str = "UNAVAILABLE",
    error_message: str = "The model is overloaded. Please try again later.",
    delta_every: float = 0.0,
    finish_reason: str | None = "STOP",
    crlf: bool = True,
) -> list[Any]:
    """A ``:streamGenerateContent?alt=sse`` reply (Gemini API or Gemini on Vertex) as steps.

    Each chunk is a bare ``data:`` line (no ``event:``) holding a ``GenerateContentResponse``:
    ``candidates[0].content.parts`` (``{"text"}``, ``{"text", "thought": true}`` for ``thinking``,
    ``{"functionCall": {"name", "args"}}`` for ``function_call``), cumulative ``usageMetadata``,
    ``modelVersion``, ``responseId``; the last chunk's candidate carries ``finishReason`` (None
    leaves it out: a stream that just ends). There is no end sentinel and no keep-alive: the
    stream ends when the body does, and it is silent while the model thinks (``think_seconds``).
    ``error_after=K`` sends ``data: {"error": {"code", "message", "status"}}`` after K text chunks,
    which google-genai raises as ``APIError``. ``crlf`` ends lines with CRLF, as Google's servers
    have been reported to (use ``crlf=False`` for LF).
    """
    eol = "\r\n" if crlf else "\n"
    tokens = 0

    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> Raw:
        nonlocal tokens
        tokens += max(1, sum(len(p.get("text", "")) for p in parts) // 4)
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        body = {"candidates": [candidate],
                "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": tokens,
                                  "totalTokenCount": 8 + tokens},
                "modelVersion": model, "responseId": response_id}
        return Raw(f"data: {json.dumps(body, separators=(',', ':'))}{eol}{eol}".encode())

    def error() -> Raw:
        body = {"error": {"code": error_code, "message": error_message, "status": error_status}}
        return Raw(f"data: {json.dumps(body, separators=(',', ':'))}{eol}{eol}".encode())

    steps: list[Any] = []
    if think_seconds:
        steps.append(Sleep(think_seconds))
    if thinking is not None:
        steps.append(chunk([{"text": thinking, "thought": True}]))
    pieces = _pieces(text, deltas)
    for k, piece in enumerate(pieces):
        if stall_after is not None and k == stall_after:
            return steps
        if error_after is not None and k == error_after:
            return [*steps, error()]
        if delta_every:
            steps.append(Sleep(delta_every))
        last = k == len(pieces) - 1 and function_call is None
        steps.append(chunk([{"text": piece}], finish_reason if last else None))
    if error_after is not None and error_after >= len(pieces):
        return [*steps, error()]
    if function_call is not None:
        name, args = function_call
        steps.append(chunk([{"functionCall": {"name": name, "args": args}}], finish_reason))
    return steps


def gemini_status(status: int, status_name: str = "UNAVAILABLE", message: str = "") -> Status:
    """A Gemini / Vertex error answered before the stream: ``{"error": {"code", "message", "status"}}``."""
    body = {"error": {"code": status, "message": message or status_name, "status": status_name}}
    return Status(status, json.dumps(body).encode())


# -- OpenAI Responses ---------------------------------------------------------------------------


def openai_responses_reply(
    text: str = "Hello from the simulated provider.",
    *,
    response_id: str = "resp_sim_0001",
    model: str = "gpt-sim-1",
    reasoning: bool = False,
    keepalives: int = 0,
    keepalive_every: float = 30.0,
    keepalive_event_line: bool = True,
    deltas: int | None = None,
    stall_after: int | None = None,
    error_after: int | None = None,
    error_code: str = "server_error",
    error_message: str = "The server had an error while processing your request.",
    delta_every: float = 0.0,
    stop: bool = True,
) -> list[Any]:
    """An OpenAI Responses stream (``POST /v1/responses``, ``stream: true``) as steps.

    Every event is ``event: <type>`` + ``data: {"type": <type>, "sequence_number": N, ...}``:
    ``response.created``, ``response.in_progress``; then ``keepalives`` keep-alive events
    ``keepalive_every`` seconds apart -- ``{"type": "keepalive", "sequence_number": N}``, sent by
    the service about every 30 s while a model reasons (``keepalive_event_line=False`` sends them
    as bare ``data:`` frames); with ``reasoning``, a reasoning output item around them; the message
    item (``output_item.added``, ``content_part.added``, ``output_text.delta``...,
    ``output_text.done``, ``content_part.done``, ``output_item.done``); ``response.completed``
    with usage. ``stall_after=K`` stops after K text deltas; ``error_after=K`` sends an ``error``
    event and ``response.failed`` after K deltas; ``stop=False`` omits ``response.completed``.
    """
    seq = iter(range(1 << 30))
    msg_id = "msg_" + response_id.removeprefix("resp_")
    output_index = 1 if reasoning else 0

    def ev(kind: str, body: dict[str, Any], *, line: bool = True) -> Raw:
        payload = {"type": kind, "sequence_number": next(seq), **body}
        return Raw(sse_event(kind if line else None, payload))

    def response(status: str, output: list[Any], **extra: Any) -> dict[str, Any]:
        return {"id": response_id, "object": "response", "created_at": 1700000000, "status": status,
                "model": model, "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": [], "error": None, "incomplete_details": None, "usage": None, **extra}

    def message(status: str, content: list[Any]) -> dict[str, Any]:
        return {"id": msg_id, "type": "message", "status": status, "role": "assistant", "content": content}

    def failed(sent: str) -> list[Any]:
        error = {"code": error_code, "message": error_message}
        return [ev("error", {"code": error_code, "message": error_message, "param": None}),
                ev("response.failed", {"response": response("failed", [message("incomplete", [
                    {"type": "output_text", "text": sent, "annotations": []}])], error=error)})]

    reasoning_item = {"id": "rs_" + response_id.removeprefix("resp_"), "type": "reasoning", "summary": []}
    steps: list[Any] = [
        ev("response.created", {"response": response("in_progress", [])}),
        ev("response.in_progress", {"response": response("in_progress", [])}),
    ]
    if reasoning:
        steps.append(ev("response.output_item.added", {"output_index": 0, "item": reasoning_item}))
    for _ in range(keepalives):
        steps += [Sleep(keepalive_every), ev("keepalive", {}, line=keepalive_event_line)]
    if reasoning:
        steps.append(ev("response.output_item.done", {"output_index": 0, "item": reasoning_item}))
    steps += [
        ev("response.output_item.added", {"output_index": output_index, "item": message("in_progress", [])}),
        ev("response.content_part.added", {"item_id": msg_id, "output_index": output_index, "content_index": 0,
                                           "part": {"type": "output_text", "text": "", "annotations": []}}),
    ]
    sent = ""
    pieces = _pieces(text, deltas)
    for k, piece in enumerate(pieces):
        if stall_after is not None and k == stall_after:
            return steps
        if error_after is not None and k == error_after:
            return [*steps, *failed(sent)]
        if delta_every:
            steps.append(Sleep(delta_every))
        steps.append(ev("response.output_text.delta", {"item_id": msg_id, "output_index": output_index,
                                                       "content_index": 0, "delta": piece, "logprobs": []}))
        sent += piece
    if error_after is not None and error_after >= len(pieces):
        return [*steps, *failed(sent)]
    part = {"type": "output_text", "text": text, "annotations": []}
    item = message("completed", [part])
    steps += [
        ev("response.output_text.done", {"item_id": msg_id, "output_index": output_index, "content_index": 0,
                                         "text": text, "logprobs": []}),
        ev("response.content_part.done", {"item_id": msg_id, "output_index": output_index, "content_index": 0,
                                          "part": part}),
        ev("response.output_item.done", {"output_index": output_index, "item": item}),
    ]
    if stop:
        usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9,
                 "output_tokens_details": {"reasoning_tokens": 64 if reasoning else 0}, "total_tokens": 21}
        output = [reasoning_item, item] if reasoning else [item]
        steps.append(ev("response.completed", {"response": response("completed", output, usage=usage)}))
    return steps


def background_response(text: str = "Hello from a background response.", *, die_after: int | None = None,
                        partial: bool = True, dead: Any = None, **reply: Any) -> Any:
    """An OpenAI Responses background response (``"background": true``) as a
    :class:`~.scenario.BackgroundScenario`: its events (:func:`openai_responses_reply`, ``reply``
    passed on) kept for ``GET .../responses/{id}?stream=true&starting_after=N``. The ``POST``'s
    stream plays them whole, or with ``die_after=K``, the first K events, then (``partial``) half
    of the next, then ``dead`` (a stall, by default): a stream that dies after content."""
    from .scenario import BackgroundScenario
    from .steps import Stall

    steps = openai_responses_reply(text, **reply)
    events = [step for step in steps if isinstance(step, Raw)]
    if die_after is None:
        first = [Headers(), *steps]
    else:
        first = [Headers(), *events[:die_after]]
        if partial and die_after < len(events):
            first.append(Raw(events[die_after].data[: len(events[die_after].data) // 2]))
        first.append(dead if dead is not None else Stall())
    return BackgroundScenario([first], events=events)


# -- OpenRouter ----------------------------------------------------------------------------------

#: OpenRouter's heartbeat: an SSE comment sent while the upstream model has not answered yet.
OPENROUTER_PROCESSING = b": OPENROUTER PROCESSING\n\n"


def openrouter_error_chunk(code: int | str = 502, message: str = "Provider returned error", *,
                           chat_id: str = "gen-sim-1", model: str = "openrouter/sim-1",
                           provider: str = "SimProvider") -> bytes:
    """OpenRouter's mid-stream error: a final Chat Completions ``data:`` chunk carrying ``error``
    (``code``, ``message``) beside a choice with ``finish_reason: "error"`` (the HTTP status is
    already 200). The openai SDK raises it as ``APIError`` (any chunk with an ``error`` key)."""
    return sse_event(None, {"id": chat_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                            "provider": provider, "error": {"code": code, "message": message},
                            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error",
                                         "native_finish_reason": "error"}]})


def openrouter_reply(
    text: str = "Hello from the simulated provider.",
    *,
    chat_id: str = "gen-sim-1",
    model: str = "openrouter/sim-1",
    processing: int = 0,
    processing_every: float = 5.0,
    deltas: int | None = None,
    stall_after: int | None = None,
    error_after: int | None = None,
    error_code: int | str = 502,
    error_message: str = "Provider returned error",
) -> list[Any]:
    """An OpenRouter Chat Completions stream: ``processing`` ``: OPENROUTER PROCESSING`` comments
    ``processing_every`` seconds apart before the first chunk, then :func:`openai_chat_reply`'s
    chunks; ``error_after=K`` ends after K content chunks with :func:`openrouter_error_chunk` (no
    ``[DONE]``)."""
    steps: list[Any] = []
    for _ in range(processing):
        steps += [Sleep(processing_every), Raw(OPENROUTER_PROCESSING)]
    pieces = len(_pieces(text, deltas))
    if error_after is not None and (stall_after is None or error_after < stall_after):
        chat = openai_chat_reply(text, chat_id=chat_id, model=model, deltas=deltas, stall_after=error_after)
        if error_after >= pieces:
            chat = chat[:-2]  # every content chunk went out: no finish chunk, no [DONE]
        return [*steps, *chat, Raw(openrouter_error_chunk(error_code, error_message, chat_id=chat_id, model=model))]
    return [*steps, *openai_chat_reply(text, chat_id=chat_id, model=model, deltas=deltas, stall_after=stall_after)]
