"""A streamed script answered as the API answers a request that did not ask for a stream.

Half of what agents send is non-streaming (``messages.create(...)`` without ``stream=True``): the
real APIs answer it with one JSON body -- an Anthropic ``Message``, an OpenAI ``ChatCompletion``,
an OpenAI Responses ``Response`` -- after the whole generation. :func:`as_json_reply` turns an
attempt script written as a stream into that answer, under the same scenario:

- what comes before the stream's headers stays (a slow first byte is a ``Sleep``, a blackhole a
  ``HangBeforeHeaders``, an error status a ``Status`` -- already JSON);
- the stream's pauses stay (a non-streaming reply arrives after the whole generation);
- the events are folded into the reply's JSON, sent as one ``200`` (``content-length``);
- an in-band error event before content becomes the error status the API would send with it
  (``overloaded_error`` 529, ``rate_limit_error`` 429, other errors 500; OpenAI's 500);
- a stream that dies (a ``Stall``, a ``Reset``) dies the same way, before any byte of the
  response: a non-streaming reply's head is sent with its body, when the generation is done.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core.wire.sse import COMMENT, SSEScanner
from .steps import Close, HangBeforeHeaders, Headers, Raw, Reset, Sleep, Stall, Status, Trickle

__all__ = ["as_json_reply", "streams"]

_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "invalid_request_error": 400,
                 "authentication_error": 401, "permission_error": 403, "not_found_error": 404, "api_error": 500}


def streams(body: bytes) -> bool:
    """Whether a request body asks for a stream: a JSON object with ``"stream": true`` -- or a
    body that is not a JSON object at all (not a generation request: played as scripted)."""
    try:
        payload = json.loads(body) if body else None
    except ValueError:
        return True
    return not isinstance(payload, dict) or payload.get("stream") is True


def _events(data: bytes) -> list[tuple[str | None, Any]]:
    """The (event name, parsed data) of each SSE event in ``data`` (the core's scanner frames it;
    comments are left out)."""
    scanner = SSEScanner()
    out: list[tuple[str | None, Any]] = []
    for frame in [*scanner.feed(data), *scanner.close()]:
        if frame.event == COMMENT:
            continue
        try:
            out.append((frame.event, json.loads(frame.data)))
        except ValueError:
            out.append((frame.event, frame.data.decode("utf-8", "replace")))
    return out


def _anthropic(events: list[tuple[str | None, Any]]) -> tuple[int, Any] | None:
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type", name)
        if kind == "error":
            error = data.get("error") or {}
            if not blocks:
                return _ERROR_STATUS.get(str(error.get("type")), 500), data
            return None
        if kind == "message_start":
            message = dict(data.get("message") or {})
        elif kind == "content_block_start":
            blocks[data["index"]] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            block = blocks.setdefault(data["index"], {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif delta.get("type") == "input_json_delta":
                partial_json[data["index"]] = partial_json.get(data["index"], "") + delta.get("partial_json", "")
        elif kind == "message_delta" and message is not None:
            message.update({k: v for k, v in (data.get("delta") or {}).items() if k in ("stop_reason", "stop_sequence")})
            message["usage"] = {**(message.get("usage") or {}), **(data.get("usage") or {})}
    if message is None:
        return None
    for index, text in partial_json.items():
        blocks[index]["input"] = json.loads(text) if text else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return 200, message


def _openai_chat(events: list[tuple[str | None, Any]]) -> tuple[int, Any] | None:
    reply: dict[str, Any] | None = None
    text = ""
    finish = None
    usage = None
    tools: dict[int, dict[str, Any]] = {}
    for _, data in events:
        if not isinstance(data, dict):
            continue
        if data.get("error"):
            return (500, data) if not text and not tools else None
        if reply is None:
            reply = {"id": data.get("id"), "object": "chat.completion", "created": data.get("created", 0),
                     "model": data.get("model"), "system_fingerprint": data.get("system_fingerprint")}
        usage = data.get("usage") or usage
        for choice in data.get("choices") or ():
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                entry = tools.setdefault(call.get("index", 0), {"id": call.get("id"), "type": "function",
                                                                 "function": {"name": "", "arguments": ""}})
                function = call.get("function") or {}
                entry["function"]["name"] += function.get("name") or ""
                entry["function"]["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    if reply is None:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if tools:
        message["tool_calls"] = [tools[i] for i in sorted(tools)]
    reply["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish or "stop"}]
    reply["usage"] = usage
    return 200, reply


def _responses(events: list[tuple[str | None, Any]]) -> tuple[int, Any] | None:
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type", name)
        if kind in ("response.completed", "response.incomplete"):
            return 200, data.get("response")
        if kind in ("error", "response.failed"):
            return 500, {"error": {"message": data.get("message", "The server had an error."), "type": "server_error",
                                   "param": None, "code": data.get("code")}}
    return None


def as_json_reply(script: Sequence[Any], path: str) -> list[Any]:
    """``script`` (an attempt written as a stream) as the answer to the same request without
    ``stream: true`` on the wire ``path`` names (Anthropic ``/messages``, OpenAI
    ``/chat/completions`` and ``/responses``); a script that is not a 200 stream, or a path of
    another wire, is played as it is."""
    fold = (_anthropic if path.endswith("/messages") else _openai_chat if path.endswith("/chat/completions")
            else _responses if path.endswith("/responses") else None)
    at = next((i for i, step in enumerate(script) if isinstance(step, (Headers, Status))), None)
    if fold is None or at is None or not isinstance(script[at], Headers) or script[at].status != 200:
        return list(script)
    head = script[at]
    out: list[Any] = list(script[:at])
    body = b""
    for step in script[at + 1:]:
        if isinstance(step, Raw):
            body += step.data
        elif isinstance(step, Trickle):
            body += step.data
        elif isinstance(step, Sleep):
            out.append(step)
        elif isinstance(step, (Stall, Reset, HangBeforeHeaders)):
            # The generation died: a non-streaming reply's head comes with its body, at the end --
            # so the death comes before any byte of the response (a silent socket, or its reset).
            return [*out, step]
        elif isinstance(step, Close):
            break
    folded = fold(_events(body))
    if folded is None:  # an error after content, or a stream that never started: it ends as it did
        return [*out, Headers(200, head.headers, "application/json"), Reset()]
    status, payload = folded
    return [*out, Status(status, json.dumps(payload).encode(), head.headers)]
