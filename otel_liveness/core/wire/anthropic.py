"""Anthropic Messages: the partial content of a truncated reply, and an assistant message an
agent can append to continue from it (complete blocks only; nothing invented).

Nothing is decoded per delta on the hot path. A live stream's bulk scanner (:mod:`.bulk`) keeps a
*journal* of the content events (:mod:`.journal`: its writer and its reader,
:func:`~.journal.replay_journal`, which decodes it into the partial message once, when a
truncation is raised). :func:`decode_partial` decodes the same from raw SSE bytes. Both go
through :class:`PartialMessage`, so they agree frame for frame.
"""

from __future__ import annotations

import json
from typing import Any

from .sse import SSEScanner

__all__ = ["PartialMessage", "continuation_message", "decode_partial"]

_EVENTS = frozenset(("message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta"))
_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature",
                 "input_json_delta": "partial_json"}


def _index(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class PartialMessage:
    """The message as far as the frames fed so far go (see :func:`decode_partial` for the shape).

    ``size`` counts the data bytes fed; past ``limit`` the message stops growing and
    :meth:`snapshot` says ``"clipped": True`` (blocks still open then stay incomplete).
    """

    __slots__ = ("_blocks", "clipped", "limit", "message", "size")

    def __init__(self, limit: int | None = None) -> None:
        self.message: dict[str, Any] = {"id": None, "model": None, "stop_reason": None, "content": []}
        self._blocks: dict[int, dict[str, Any]] = {}
        self.size = 0
        self.limit = limit
        self.clipped = False

    def _room(self, n: int) -> bool:
        if self.clipped:
            return False
        if self.limit is not None and self.size + n > self.limit:
            self.clipped = True
            return False
        self.size += n
        return True

    def frame(self, event: str | None, data: bytes) -> None:
        """One SSE frame of the reply (frames of other events are ignored)."""
        if event not in _EVENTS or not self._room(len(data)):
            return
        try:
            payload = json.loads(data)
        except ValueError:
            return  # a frame cut by the truncation
        if not isinstance(payload, dict):
            return
        blocks = self._blocks
        kind = payload.get("type", event)
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            self.message["id"] = payload["message"].get("id")
            self.message["model"] = payload["message"].get("model")
        elif kind == "content_block_start":
            index = _index(payload.get("index", len(blocks)))
            content_block = payload.get("content_block") or {}
            if index is None or not isinstance(content_block, dict):
                return
            block = dict(content_block)
            block["complete"] = False
            if block.get("type") in ("tool_use", "server_tool_use"):
                block.setdefault("partial_json", "")
            blocks[index] = block
        elif kind == "content_block_delta":
            index = _index(payload.get("index", -1))
            delta = payload.get("delta") or {}
            open_block = blocks.get(index) if index is not None else None
            if open_block is None or not isinstance(delta, dict):
                return
            block = open_block
            dtype = delta.get("type")
            field = _DELTA_FIELDS.get(dtype) if isinstance(dtype, str) else None
            if field is not None:
                value, current = delta.get(field, ""), block.get(field, "")
                if isinstance(value, str) and isinstance(current, str):
                    block[field] = current + value
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            index = _index(payload.get("index", -1))
            stopped = blocks.get(index) if index is not None else None
            if stopped is not None:
                stopped["complete"] = True
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            self.message["stop_reason"] = delta.get("stop_reason") if isinstance(delta, dict) else None

    def delta(self, index: int, field: str, text: str, size: int) -> None:
        """A ``content_block_delta`` that extends ``field`` of block ``index`` by ``text``
        (``size``: the bytes of its frame's data, for the limit)."""
        if not self._room(size):
            return
        block = self._blocks.get(index)
        current = block.get(field, "") if block is not None else None
        if block is not None and isinstance(current, str):
            block[field] = current + text

    def snapshot(self) -> dict[str, Any]:
        out = dict(self.message)
        out["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        if self.clipped:
            out["clipped"] = True
        return out


def decode_partial(prefix: bytes) -> dict[str, Any]:
    """The message as far as ``prefix`` goes::

        {"id": ..., "model": ..., "stop_reason": ..., "content": [
            {"type": "text", "text": "...", "complete": True},
            {"type": "thinking", "thinking": "...", "signature": "...", "complete": True},
            {"type": "tool_use", "id": ..., "name": ..., "partial_json": "...", "complete": False},
        ]}

    (with ``"clipped": True`` when it was built from a journal that reached its bound).
    """
    partial = PartialMessage()
    scanner = SSEScanner(max(len(prefix), 1) + 16)
    for frame in scanner.feed(prefix) + scanner.close():
        partial.frame(frame.event, frame.data)
    return partial.snapshot()


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
