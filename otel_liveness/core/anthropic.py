"""Anthropic Messages: decode a released prefix into partial content, and turn that into an
assistant message an agent can append to continue (complete blocks only; nothing invented).

Decoding happens once, when a truncation is raised -- never per delta on the hot path.
"""

from __future__ import annotations

import json
from typing import Any

from .sse import SSEScanner

__all__ = ["continuation_message", "decode_partial"]


def decode_partial(prefix: bytes) -> dict[str, Any]:
    """The message as far as ``prefix`` goes::

        {"id": ..., "model": ..., "stop_reason": ..., "content": [
            {"type": "text", "text": "...", "complete": True},
            {"type": "thinking", "thinking": "...", "signature": "...", "complete": True},
            {"type": "tool_use", "id": ..., "name": ..., "partial_json": "...", "complete": False},
        ]}
    """
    message: dict[str, Any] = {"id": None, "model": None, "stop_reason": None, "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    scanner = SSEScanner(max(len(prefix), 1) + 16)
    for frame in scanner.feed(prefix) + scanner.close():
        if frame.event not in ("message_start", "content_block_start", "content_block_delta",
                               "content_block_stop", "message_delta"):
            continue
        try:
            payload = json.loads(frame.data)
        except ValueError:
            continue  # a frame cut by the truncation
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type", frame.event)
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            message["id"] = payload["message"].get("id")
            message["model"] = payload["message"].get("model")
        elif kind == "content_block_start":
            block = dict(payload.get("content_block") or {})
            block["complete"] = False
            if block.get("type") in ("tool_use", "server_tool_use"):
                block.setdefault("partial_json", "")
            blocks[int(payload.get("index", len(blocks)))] = block
        elif kind == "content_block_delta":
            open_block = blocks.get(int(payload.get("index", -1)))
            delta = payload.get("delta") or {}
            if open_block is None:
                continue
            block = open_block
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif dtype == "input_json_delta":
                block["partial_json"] = block.get("partial_json", "") + delta.get("partial_json", "")
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            stopped = blocks.get(int(payload.get("index", -1)))
            if stopped is not None:
                stopped["complete"] = True
        elif kind == "message_delta":
            message["stop_reason"] = (payload.get("delta") or {}).get("stop_reason")
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def continuation_message(partial: dict[str, Any]) -> dict[str, Any] | None:
    """An assistant message holding the *complete* blocks of ``partial`` in the API's input form,
    or ``None`` when no block was complete. Incomplete blocks are dropped, not repaired. Thinking
    blocks are kept only with their signature (the API rejects unsigned thinking). Trailing
    whitespace is trimmed from a final text block, since the API rejects a final assistant turn
    that ends in whitespace."""
    content: list[dict[str, Any]] = []
    for block in partial.get("content", []):
        if not block.get("complete"):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            item: dict[str, Any] = {"type": "text", "text": block["text"]}
            if block.get("citations"):
                item["citations"] = block["citations"]
            content.append(item)
        elif kind == "thinking" and block.get("signature"):
            content.append({"type": "thinking", "thinking": block.get("thinking", ""), "signature": block["signature"]})
        elif kind == "redacted_thinking" and block.get("data"):
            content.append({"type": "redacted_thinking", "data": block["data"]})
        elif kind in ("tool_use", "server_tool_use"):
            try:
                arguments = json.loads(block.get("partial_json") or "{}")
            except ValueError:
                continue
            content.append({"type": kind, "id": block.get("id"), "name": block.get("name"), "input": arguments})
    if content and content[-1]["type"] == "text":
        content[-1]["text"] = content[-1]["text"].rstrip()
        if not content[-1]["text"]:
            content.pop()
    return {"role": "assistant", "content": content} if content else None
