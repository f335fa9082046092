"""Builders for provider-shaped attempt scripts."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .steps import Headers, Raw, Sleep, Status

__all__ = ["PING", "anthropic_error", "anthropic_reply", "compressed", "openai_chat_reply", "sse_event"]


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
