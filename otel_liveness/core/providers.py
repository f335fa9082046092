"""Provider classification: each SSE frame becomes one :class:`~.outcome.FrameKind`.

A profile classifies by the event name (a dict lookup) and looks into the payload only for the
few frames telemetry needs -- the response id and model (once), the stop reason, usage and error
type -- so a text delta costs no JSON parse.

=================  ======================  ===============================  ==================
provider           heartbeat               preamble / semantic              end / error
=================  ======================  ===============================  ==================
anthropic          ``ping``, comments      ``message_start`` / block        ``message_stop`` /
                                           start/delta/stop, message_delta  ``error``
openai-chat        comments                role-only first chunk / chunks   ``[DONE]`` /
                                           with content, tool calls,        ``{"error": ...}``
                                           reasoning or a finish reason
openai-responses   comments, ``keepalive``  ``response.created``,            ``response.completed``,
                                           ``.in_progress`` / the rest      ``.incomplete`` /
                                                                            ``response.failed``, ``error``
sse (generic)      comments, ``ping``,     - / any data frame               ``[DONE]`` or EOF /
                   ``keepalive``,                                           ``error``
                   ``heartbeat``
=================  ======================  ===============================  ==================
"""

from __future__ import annotations

import json
import operator
import re
from typing import Any, ClassVar

from .outcome import FrameKind
from .sse import COMMENT, Frame, parse_block

__all__ = [
    "PROFILES",
    "AnthropicProfile",
    "GenericSSEProfile",
    "OpenAIChatProfile",
    "OpenAIResponsesProfile",
    "ProviderProfile",
    "StreamFacts",
    "profile_for",
    "select_provider",
]

HEARTBEAT = FrameKind.HEARTBEAT
PREAMBLE = FrameKind.PREAMBLE
SEMANTIC = FrameKind.SEMANTIC
END = FrameKind.END
ERROR = FrameKind.ERROR
UNKNOWN = FrameKind.UNKNOWN

_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
)


class StreamFacts:
    """The few facts about a response that telemetry records. Never content."""

    __slots__ = ("error_type", "model", "response_id", "stop_reason", "usage")

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.error_type: str | None = None

    def take_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for key in _USAGE_KEYS:
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.usage[key] = value

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _str(value: Any, limit: int = 128) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _error_type(payload: Any) -> str:
    """``{"type":"error","error":{"type":"overloaded_error"}}`` / ``{"error":{"type"|"code":...}}``."""
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        if isinstance(err, dict):
            for key in ("type", "code"):
                value = _str(err.get(key), 64)
                if value and value != "error":  # the envelope's own type, not the error's
                    return value
    return "unknown"


class ProviderProfile:
    """Base profile. ``keepalives`` says whether the provider sends bytes while a model thinks
    (it decides which raw-idle bound applies); ``eof_is_end`` whether a clean EOF completes a
    reply that has no end frame."""

    name = "sse"
    keepalives = True
    eof_is_end = False
    #: Blocks whose first :data:`PREFIX` bytes are a key here are classified without parsing: only
    #: frequent events that carry no fact (pings, content deltas) belong in it.
    fast: ClassVar[dict[bytes, FrameKind]] = {}

    @property
    def semantic_keys(self) -> tuple[bytes, ...]:
        """The :attr:`fast` prefixes of semantic frames: what the steady lane admits."""
        return tuple(key for key, kind in self.fast.items() if kind is FrameKind.SEMANTIC)

    def classify(self, frame: Frame, facts: StreamFacts) -> FrameKind:  # pragma: no cover - abstract
        raise NotImplementedError

    def classify_blocks(self, blocks: list[bytes], facts: StreamFacts) -> list[FrameKind]:
        """Kinds of the frames in ``blocks`` (from :meth:`SSEScanner.feed_blocks`), in order.

        Same answer as parsing every block and calling :meth:`classify`, but a block that matches
        :attr:`fast` costs one slice and one dict lookup.
        """
        fast = self.fast
        if len(blocks) == 1:  # a live stream delivers about one frame per read: skip the listcomp
            kind = fast.get(blocks[0][:PREFIX])
            if kind is not None:
                return [kind]
        elif not blocks:
            return []
        if fast:
            kinds = list(map(fast.get, map(_PREFIX_OF, blocks)))  # all in C: no Python frame per block
            if None not in kinds:
                return kinds  # type: ignore[return-value]
        else:
            kinds = [None] * len(blocks)
        out: list[FrameKind] = []
        frames: list[Frame] = []
        for block, kind in zip(blocks, kinds, strict=True):
            if kind is not None:
                out.append(kind)
                continue
            frames.clear()
            parse_block(block, frames)
            out.extend(self.classify(frame, facts) for frame in frames)
        return out


PREFIX = 27  # len(b"event: content_block_delta\n")
_PREFIX_OF = operator.itemgetter(slice(0, PREFIX))


class AnthropicProfile(ProviderProfile):
    name = "anthropic"
    fast: ClassVar[dict[bytes, FrameKind]] = {
        b"event: content_block_delta\n": SEMANTIC,
        b"event: content_block_start\n": SEMANTIC,
        b"event: content_block_stop\nd": SEMANTIC,
        b'event: ping\ndata: {"type":': HEARTBEAT,
    }
    _KINDS: ClassVar[dict[str | None, FrameKind]] = {
        COMMENT: HEARTBEAT,
        "ping": HEARTBEAT,
        "content_block_delta": SEMANTIC,
        "content_block_start": SEMANTIC,
        "content_block_stop": SEMANTIC,
        "message_delta": SEMANTIC,
        "message_start": PREAMBLE,
        "message_stop": END,
        "error": ERROR,
    }

    def classify(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        kind = self._KINDS.get(frame.event, UNKNOWN)
        if kind is SEMANTIC:
            if frame.event == "message_delta":
                payload = _json(frame.data)
                if isinstance(payload, dict):
                    delta = payload.get("delta")
                    if isinstance(delta, dict):
                        facts.stop_reason = _str(delta.get("stop_reason")) or facts.stop_reason
                    facts.take_usage(payload.get("usage"))
        elif kind is PREAMBLE:
            payload = _json(frame.data)
            message = payload.get("message") if isinstance(payload, dict) else None
            if isinstance(message, dict):
                facts.response_id = _str(message.get("id"))
                facts.model = _str(message.get("model"))
                facts.take_usage(message.get("usage"))
        elif kind is ERROR:
            facts.error_type = _error_type(_json(frame.data))
        return kind


# A chunk carries content when one of these keys has a non-empty value.
_OPENAI_CONTENT = re.compile(
    rb'"(?:content|refusal|reasoning|reasoning_content|arguments)"\s*:\s*"[^"]'
    rb'|"(?:tool_calls|function_call)"\s*:\s*[\[{]'
    rb'|"finish_reason"\s*:\s*"'
)
_OPENAI_ERROR = re.compile(rb'^\s*\{\s*"error"\s*:')
_OPENAI_FINISH = re.compile(rb'"finish_reason"\s*:\s*"([a-z_]{1,32})"')


class OpenAIChatProfile(ProviderProfile):
    name = "openai-chat"
    keepalives = False  # wire-silent while reasoning models think

    def classify(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        if frame.event == COMMENT:
            return HEARTBEAT
        data = frame.data
        if data == b"[DONE]":
            return END
        if frame.event == "error" or _OPENAI_ERROR.match(data):
            facts.error_type = _error_type(_json(data))
            return ERROR
        if facts.response_id is None:
            payload = _json(data)
            if isinstance(payload, dict):
                facts.response_id = _str(payload.get("id"))
                facts.model = _str(payload.get("model"))
        if b'"usage":{' in data or b'"usage": {' in data:
            payload = _json(data)
            if isinstance(payload, dict):
                facts.take_usage(payload.get("usage"))
        if _OPENAI_CONTENT.search(data):
            finish = _OPENAI_FINISH.search(data)
            if finish:
                facts.stop_reason = finish.group(1).decode()
            return SEMANTIC
        return PREAMBLE if not data.strip() or data[:1] == b"{" else UNKNOWN


class OpenAIResponsesProfile(ProviderProfile):
    name = "openai-responses"
    keepalives = False
    _KINDS: ClassVar[dict[str | None, FrameKind]] = {
        COMMENT: HEARTBEAT,
        "keepalive": HEARTBEAT,
        "response.created": PREAMBLE,
        "response.in_progress": PREAMBLE,
        "response.queued": PREAMBLE,
        "response.completed": END,
        "response.incomplete": END,
        "response.failed": ERROR,
        "error": ERROR,
    }

    def classify(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        event = frame.event
        kind = self._KINDS.get(event)
        if kind is None:
            return SEMANTIC if event and event.startswith("response.") else UNKNOWN
        if kind is PREAMBLE or kind is END or event == "response.failed":
            payload = _json(frame.data)
            response = payload.get("response") if isinstance(payload, dict) else None
            if isinstance(response, dict):
                facts.response_id = _str(response.get("id")) or facts.response_id
                facts.model = _str(response.get("model")) or facts.model
                facts.take_usage(response.get("usage"))
                if kind is END:
                    facts.stop_reason = _str(response.get("status"))
                if event == "response.failed":
                    facts.error_type = _error_type(response)
        elif kind is ERROR:
            facts.error_type = _error_type(_json(frame.data))
        return kind


class GenericSSEProfile(ProviderProfile):
    name = "sse"
    eof_is_end = True  # Gemini alt=sse and most custom servers just close
    _KINDS: ClassVar[dict[str | None, FrameKind]] = {
        COMMENT: HEARTBEAT, "ping": HEARTBEAT, "keepalive": HEARTBEAT, "heartbeat": HEARTBEAT, "error": ERROR,
    }

    def classify(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        kind = self._KINDS.get(frame.event)
        if kind is None:
            return END if frame.data == b"[DONE]" else SEMANTIC
        if kind is ERROR:
            facts.error_type = _error_type(_json(frame.data))
        return kind


PROFILES: dict[str, ProviderProfile] = {
    p.name: p
    for p in (AnthropicProfile(), OpenAIChatProfile(), OpenAIResponsesProfile(), GenericSSEProfile())
}


def select_provider(host: str, path: str) -> str:
    """Choose a wire format from the request's host and path (override with ``Policy.provider``)."""
    host = host.lower()
    path = path.rstrip("/")
    if path.endswith("/messages") or "anthropic" in host:
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    return "sse"


def profile_for(name: str) -> ProviderProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(PROFILES)}") from None
