"""Provider classification: each SSE frame (or event-stream message) becomes one
:class:`~.outcome.FrameKind`.

A profile classifies by the event name (a dict lookup) and looks into the payload only for the
few frames telemetry needs -- the response id and model (once), the stop reason, usage and error
type -- so a text delta costs no JSON parse.

**Failing open** (:meth:`ProviderProfile.classify`): a frame the profile does not positively
recognise as a keep-alive, a preamble, an end or an error is the provider producing -- content,
released at once, never held for a retry that would hide it from the caller -- and a clean end
after such a frame is the reply's end. A profile's :meth:`~ProviderProfile.recognise` says
``UNKNOWN`` for what it does not know; ``classify`` turns that into ``SEMANTIC`` and counts it.

==================  ======================  ===============================  ==================
provider            heartbeat               preamble / semantic              end / error
==================  ======================  ===============================  ==================
anthropic, vertex   ``ping``, comments      ``message_start`` / block        ``message_stop`` /
                                            start/delta/stop, message_delta  ``error``
bedrock             (none observed)         per model family, inside         the family's end /
                                            ``chunk`` messages (Anthropic,   exception messages
                                            Nova, Titan, Llama, Mistral,
                                            Cohere, OpenAI-shaped)
bedrock-converse    (none observed)         ``messageStart`` / content       ``messageStop`` /
                                            block start/delta/stop;          exception messages
                                            ``metadata`` a trailer
openai-chat         comments                a chunk that carries nothing /   ``[DONE]`` /
(and compatible     (DeepSeek's             content, reasoning, tool calls,  ``{"error": ...}``,
servers)            ``: keep-alive``)       a finish reason                  ``event: error``
openrouter          comments                as openai-chat                   as openai-chat /
                                                                             ``finish_reason: error``
openai-responses    comments, ``keepalive``  ``response.created``,            ``response.completed``,
                                            ``.in_progress`` / the rest      ``.incomplete`` /
                                                                             ``response.failed``, ``error``
gemini              comments                no parts / parts (text,          (finish reason, then
                                            thought, functionCall)           EOF) / ``{"error"}``
cohere              comments                ``message-start`` / content,     ``message-end`` /
                                            tool plan, tool call, citation   ``finish_reason: ERROR``
sse (generic)       comments, ``ping``,     - / any data frame               ``[DONE]`` or EOF /
                    ``keepalive``,                                           ``error``
                    ``heartbeat``
==================  ======================  ===============================  ==================

A provider is chosen by :func:`select_provider` from the request's host and path (Bedrock's
``/model/{id}/invoke-with-response-stream`` and ``/converse-stream``, Vertex's
``:streamRawPredict``, Gemini's ``:streamGenerateContent``, ``openrouter.ai``, Cohere's
``/v2/chat``, ``/messages``, ``/chat/completions``, ``/responses``), unless ``Policy.provider``
names one.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..outcome import FrameKind
from .eventstream import Message, decode_chunk
from .resume import response_path_id
from .sse import COMMENT, Frame, parse_block

__all__ = [
    "HOST_PATTERNS",
    "PROFILES",
    "AnthropicProfile",
    "BedrockConverseProfile",
    "BedrockProfile",
    "CohereProfile",
    "GeminiProfile",
    "GenericSSEProfile",
    "OpenAIChatProfile",
    "OpenAIResponsesProfile",
    "OpenRouterProfile",
    "ProviderProfile",
    "StreamFacts",
    "VertexAnthropicProfile",
    "json_error_shaped",
    "json_error_type",
    "profile_for",
    "request_id",
    "response_profile",
    "select_provider",
    "semconv_provider",
    "streams_by_url",
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

    __slots__ = ("error_type", "model", "response_id", "stop_reason", "unrecognised", "usage")

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.error_type: str | None = None
        #: Frames the profile did not recognise (each taken for content: :meth:`ProviderProfile.classify`).
        self.unrecognised = 0

    def take_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for key in _USAGE_KEYS:
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.usage[key] = value

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _json(data: bytes) -> Any:
    """``json.loads(data)``, or ``None`` for what it rejects. A frame's data is UTF-8 (the SSE
    spec's only encoding): decoded as such and parsed as a string, without ``loads``' encoding
    detection; what that rejects (a BOM, another encoding) is given to ``loads`` as it came."""
    try:
        return _decode(data.decode("utf-8"))
    except ValueError:  # (UnicodeDecodeError included)
        try:
            return json.loads(data)
        except ValueError:
            return None


_decode = json.JSONDecoder().decode


def _str(value: Any, limit: int = 128) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _error_type(payload: Any) -> str:
    """``{"type":"error","error":{"type":"overloaded_error"}}`` / ``{"error":{"type"|"code":...}}``."""
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        if isinstance(err, dict):
            for key in ("type", "code"):
                code = err.get(key)
                value = str(code) if isinstance(code, int) and not isinstance(code, bool) else _str(code, 64)
                if value and value != "error":  # the envelope's own type, not the error's
                    return value
    return "unknown"


#: Keys of a reply object: a JSON body with one of these is a reply, whatever else it carries.
_REPLY_KEYS = frozenset(("choices", "content", "candidates", "output", "object", "id", "model", "completion",
                         "message", "usageMetadata"))


_JSON_STRING = re.compile(rb'"((?:[^"\\]|\\.){0,128})"')


def _json_string(data: bytes) -> tuple[bytes | None, bytes, bool]:
    """(the JSON string ``data`` starts with, what follows it, whether more bytes could tell):
    ``(None, b"", True)`` while the string is incomplete."""
    match = _JSON_STRING.match(data)
    if match is None:
        return None, b"", len(data) < 132
    return match.group(1), data[match.end():].lstrip(), True


def json_error_shaped(head: bytes) -> bool | None:
    """Whether a JSON body whose first bytes are ``head`` can be an error object: ``True`` when
    its first key is ``error``, or ``type`` with the value ``"error"`` (every error envelope we know
    starts so: Anthropic, OpenAI, Gemini -- also as a one-element array --, LiteLLM and other
    gateways); ``False`` when it cannot be (another first key: a reply; not a JSON object);
    ``None`` while ``head`` is too short to tell."""
    body = head.lstrip()
    if body[:1] == b"[":
        body = body[1:].lstrip()
    if not body:
        return None
    if body[:1] != b"{":
        return False
    body = body[1:].lstrip()
    if not body:
        return None
    if body[:1] != b'"':
        return False
    key, rest, more = _json_string(body)
    if key is None or not rest:
        return None if more else False
    if rest[:1] != b":":
        return False
    if key == b"error":
        return True
    if key != b"type":
        return False
    value = rest[1:].lstrip()
    if not value:
        return None
    if value[:1] != b'"':
        return False
    text, _, more = _json_string(value)
    if text is None:
        return None if more else False
    return text == b"error"


def json_error_type(body: bytes) -> str | None:
    """The error type of a JSON error object -- ``{"type": "error", "error": {...}}`` (Anthropic),
    ``{"error": {...}}`` (OpenAI, gateways, Gemini; also as Gemini's one-element array) -- or
    ``None`` when ``body`` is anything else (a reply, which may carry ``"error": null``, or not
    JSON). The type is the error's ``type``, ``code`` or ``status`` (``unknown`` when none is a
    string): the retry table's in-band error types apply to it."""
    stripped = body.strip()
    if stripped[:1] not in (b"{", b"[") or b'"error"' not in stripped:
        return None
    payload = _json(stripped)
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if not isinstance(error, dict) or not error:
        return None
    if payload.get("type") != "error" and not _REPLY_KEYS.isdisjoint(payload):
        return None
    for key in ("type", "code", "status"):
        value = _str(error.get(key), 64)
        if value and value != "error":
            return value
    return "unknown"


class ProviderProfile:
    """Base profile. ``keepalives`` says whether the provider sends bytes while a model thinks
    (it decides which raw-idle bound applies: a wire-silent provider gets the keep-alive bound
    only once its wire showed a keep-alive); ``eof_is_end`` whether a clean EOF completes a
    reply that has no end frame; ``framing`` is ``sse`` or ``eventstream``; ``semconv_name`` the
    GenAI conventions' ``gen_ai.provider.name``."""

    name = "sse"
    keepalives = True
    eof_is_end = False
    framing = "sse"
    semconv_name = "_OTHER"
    #: Blocks whose first :data:`PREFIX` bytes are a key here are classified without parsing: only
    #: frequent events that carry no fact (pings, content deltas) belong in it.
    fast: ClassVar[dict[bytes, FrameKind]] = {}

    @functools.cached_property
    def semantic_keys(self) -> tuple[bytes, ...]:
        """The :attr:`fast` prefixes of semantic frames: what the steady lane admits (computed once
        per profile: every attempt asks)."""
        return tuple(key for key, kind in self.fast.items() if kind is FrameKind.SEMANTIC)

    def classify(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        """The kind of one SSE frame, failing open: a frame :meth:`recognise` does not positively
        know as a keep-alive, a preamble, content, an end or an error is the provider producing --
        content (``SEMANTIC``: released, never held for a retry), counted in
        :attr:`StreamFacts.unrecognised`. ``UNKNOWN`` never leaves here."""
        kind = self.recognise(frame, facts)
        if kind is UNKNOWN:
            facts.unrecognised += 1
            return SEMANTIC
        return kind

    def classify_message(self, message: Message, facts: StreamFacts) -> FrameKind:
        """The kind of one event-stream message (``framing == "eventstream"`` profiles), failing
        open as :meth:`classify` does."""
        kind = self.recognise_message(message, facts)
        if kind is UNKNOWN:
            facts.unrecognised += 1
            return SEMANTIC
        return kind

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:  # pragma: no cover - abstract
        """What the profile knows ``frame`` to be; ``UNKNOWN`` for anything it does not positively
        recognise (:meth:`classify` takes that for content)."""
        raise NotImplementedError

    def recognise_message(self, message: Message, facts: StreamFacts) -> FrameKind:  # pragma: no cover
        """:meth:`recognise` for one event-stream message."""
        raise NotImplementedError

    def inner_events(self, message: Message) -> tuple[str, bytes] | None:  # pragma: no cover
        """An event-stream message's content as the SSE event it wraps (its name and data), if it
        wraps one."""
        return None

    def classify_block(self, block: bytes, facts: StreamFacts) -> list[FrameKind]:
        """Kinds of the frames of one block, by :meth:`classify` (the bulk scanner's slow path)."""
        frames: list[Frame] = []
        parse_block(block, frames)
        classify = self.classify
        return [classify(frame, facts) for frame in frames]

    def classify_blocks(self, blocks: list[bytes], facts: StreamFacts) -> list[FrameKind]:
        """Kinds of the frames in ``blocks`` (from :meth:`SSEScanner.feed_blocks`), in order.

        Same answer as parsing every block and calling :meth:`classify`, but a block that matches
        :attr:`fast` costs one slice and one dict lookup -- except for an event with two ``event:``
        fields (only a stream that lost a blank line has one): the fast table goes by its first
        line, the parse by its last (tests/test_bulk.py pins it).
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
                return kinds  # type: ignore[return-value]  # no None in it: every item is a FrameKind
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
    semconv_name = "anthropic"
    fast: ClassVar[dict[bytes, FrameKind]] = {
        b"event: content_block_delta\n": SEMANTIC,
        b"event: content_block_start\n": SEMANTIC,
        b"event: content_block_stop\nd": SEMANTIC,
        # PREFIX bytes: the SDK-recorded form (``{"type": "ping"}``) and the compact one.
        b'event: ping\ndata: {"type": ': HEARTBEAT,
        b'event: ping\ndata: {"type":"': HEARTBEAT,
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

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
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
    rb'|"(?:content|reasoning_details)"\s*:\s*\[\s*\{'  # Mistral's content parts, OpenRouter's reasoning details
    rb'|"finish_reason"\s*:\s*"'
)
_OPENAI_ERROR = re.compile(rb'^\s*\{\s*"error"\s*:')
_OPENAI_FINISH = re.compile(rb'"finish_reason"\s*:\s*"([a-z_]{1,32})"')

#: The members of a Chat Completions chunk that frame it (ids, usage, the providers' own metadata:
#: Groq's ``x_groq``, Azure's ``prompt_filter_results``, llama.cpp's ``timings``, Cerebras'
#: ``time_info``, OpenRouter's ``provider``; the padding of OpenAI's ``obfuscation`` and Mistral's
#: ``p``): a chunk of these alone, with choices that carry nothing, is positively a preamble (or a
#: usage trailer).
_CHAT_FRAMING = frozenset(("id", "object", "created", "model", "system_fingerprint", "service_tier", "usage",
                           "x_groq", "provider", "prompt_filter_results", "timings", "time_info", "obfuscation",
                           "p", "choices"))
#: The members of a choice that frame it (Azure's content filter results; vLLM's ``stop_reason``,
#: OpenRouter's ``native_finish_reason``: null before the end).
_CHOICE_FRAMING = frozenset(("index", "delta", "logprobs", "finish_reason", "content_filter_results",
                             "content_filter_offsets", "stop_reason", "native_finish_reason"))


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def _chat_framing(payload: Any) -> bool:
    """Whether a parsed Chat Completions chunk is positively one without content: an object of
    :data:`_CHAT_FRAMING` members whose choices (none at all: Azure's prompt filter results, a usage
    trailer) hold a delta of a role and empty values only, and no finish reason."""
    if not isinstance(payload, dict) or _CHAT_FRAMING.isdisjoint(payload):
        return False  # (an object of none of a chunk's members is not known as one)
    for key, value in payload.items():
        if key not in _CHAT_FRAMING and not _empty(value):
            return False
    choices = payload.get("choices")
    if choices is None:
        return True
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            return False
        for key, value in choice.items():
            if key not in _CHOICE_FRAMING and not _empty(value):
                return False
        if not _empty(choice.get("finish_reason")) or not _empty(choice.get("stop_reason")):
            return False
        delta = choice.get("delta")
        if delta is None:
            continue
        if not isinstance(delta, dict):
            return False
        if any(key != "role" and not _empty(value) for key, value in delta.items()):
            return False
    return True


def _chat_facts(payload: dict[str, Any], facts: StreamFacts) -> None:
    """The usage and finish reason of a parsed OpenAI-shaped chunk (Groq's usage is in ``x_groq``;
    a choice's ``stop_reason`` is the finish reason of DeepSeek and Mistral on Bedrock)."""
    facts.take_usage(payload.get("usage"))
    x_groq = payload.get("x_groq")
    if isinstance(x_groq, dict):
        facts.take_usage(x_groq.get("usage"))
    for choice in payload.get("choices") or ():
        if isinstance(choice, dict):
            finish = _str(choice.get("finish_reason"), 32) or _str(choice.get("stop_reason"), 32)
            if finish:
                facts.stop_reason = finish


class OpenAIChatProfile(ProviderProfile):
    """OpenAI Chat Completions, and the servers that speak it (Groq, DeepSeek, Mistral, xAI,
    Together, Fireworks, Cerebras, the HuggingFace router, Azure OpenAI, Ollama, vLLM, llama.cpp,
    LM Studio): a chunk is content when a content member (text, refusal, reasoning -- DeepSeek's
    ``reasoning_content`` too --, tool calls) is non-empty or it carries a finish reason; a
    preamble only when it is positively one (:func:`_chat_framing`); anything else is left
    unrecognised (content, failing open). Usage is read from ``usage`` and Groq's ``x_groq``."""

    name = "openai-chat"
    semconv_name = "openai"
    keepalives = False  # wire-silent while reasoning models think

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        if frame.event == COMMENT:
            return HEARTBEAT
        data = frame.data
        if data == b"[DONE]":
            return END
        if frame.event == "error" or _OPENAI_ERROR.match(data):
            facts.error_type = _error_type(_json(data))
            return ERROR
        payload: Any = None
        if b'"error"' in data:  # an error member beside a chunk's own (OpenRouter's upstream errors)
            payload = _json(data)
            if isinstance(payload, dict) and not _empty(payload.get("error")):
                facts.error_type = _error_type(payload)
                _chat_facts(payload, facts)
                return ERROR
        if facts.response_id is None:
            payload = _json(data)
            if isinstance(payload, dict):
                facts.response_id = _str(payload.get("id"))
                facts.model = _str(payload.get("model"))
        if b'"usage":{' in data or b'"usage": {' in data:
            if payload is None:
                payload = _json(data)
            if isinstance(payload, dict):
                _chat_facts(payload, facts)
        if _OPENAI_CONTENT.search(data):
            finish = _OPENAI_FINISH.search(data)
            if finish:
                facts.stop_reason = finish.group(1).decode()
            return SEMANTIC
        if not data.strip():
            return PREAMBLE
        if payload is None:
            payload = _json(data)
        return PREAMBLE if _chat_framing(payload) else UNKNOWN


class OpenAIResponsesProfile(ProviderProfile):
    """OpenAI Responses: typed events; ``keepalive`` events (``{"type": "keepalive",
    "sequence_number": N}``, about every 30 s while a model reasons) are heartbeats -- whether
    they come with an ``event:`` line or as a bare ``data:`` frame. A background response's
    stream (``GET /responses/{id}?stream=true``) is the same wire."""

    name = "openai-responses"
    keepalives = False  # wire-silent until a keep-alive shows (then the keep-alive bound applies)
    semconv_name = "openai"
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

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        event = frame.event
        if event is None and frame.data == b"[DONE]":
            return END  # (OpenAI-compatible servers, and a background request's stream, end so)
        if event is None and frame.data[:1] == b"{":  # a bare data frame: its type says what it is
            payload = _json(frame.data)
            event = _str(payload.get("type")) if isinstance(payload, dict) else None
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


class OpenRouterProfile(OpenAIChatProfile):
    """OpenAI Chat Completions as OpenRouter serves it: ``: OPENROUTER PROCESSING`` comments while
    a model works, and a mid-stream error as a chunk with ``error`` and ``finish_reason: "error"``."""

    name = "openrouter"
    keepalives = True
    semconv_name = "openrouter"

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        data = frame.data
        if frame.event != COMMENT and (b'"finish_reason":"error"' in data or b'"finish_reason": "error"' in data):
            facts.error_type = _error_type(_json(data))
            if facts.error_type == "unknown":
                facts.error_type = "server_error"  # a provider failure mid-stream (OpenRouter's own code)
            facts.stop_reason = "error"
            return ERROR
        return super().recognise(frame, facts)


#: The members of a Gemini chunk that frame it, and of a candidate with no parts and no finish.
_GEMINI_FRAMING = frozenset(("candidates", "usageMetadata", "modelVersion", "responseId", "createTime"))
_CANDIDATE_FRAMING = frozenset(("content", "index", "safetyRatings"))


class GeminiProfile(ProviderProfile):
    """Gemini ``:streamGenerateContent?alt=sse`` (the Gemini API and Gemini on Vertex AI): bare
    ``data:`` JSON chunks whose ``candidates[].content.parts`` hold text, thoughts and function
    calls, the last with a ``finishReason``; no end frame, no keep-alive (silent while thinking);
    errors as ``data: {"error": {...}}``; a blocked prompt as ``promptFeedback.blockReason`` (the
    reply's stop reason)."""

    name = "gemini"
    keepalives = False
    semconv_name = "gcp.gemini"

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        if frame.event == COMMENT:
            return HEARTBEAT
        payload = _json(frame.data)
        if not isinstance(payload, dict):
            return UNKNOWN
        error = payload.get("error")
        if isinstance(error, dict):
            facts.error_type = _str(error.get("status"), 64) or _str(str(error.get("code", "")), 64) or "unknown"
            return ERROR
        if facts.response_id is None:
            facts.response_id = _str(payload.get("responseId"))
            facts.model = _str(payload.get("modelVersion"))
        usage = payload.get("usageMetadata")
        if isinstance(usage, dict):
            facts.take_usage({"input_tokens": usage.get("promptTokenCount"),
                              "output_tokens": usage.get("candidatesTokenCount")})
        feedback = payload.get("promptFeedback")
        if isinstance(feedback, dict) and _str(feedback.get("blockReason"), 32):
            facts.stop_reason = _str(feedback.get("blockReason"), 32)
            return SEMANTIC
        kind = PREAMBLE
        for candidate in payload.get("candidates") or ():
            if not isinstance(candidate, dict):
                return UNKNOWN
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            if parts:
                kind = SEMANTIC
            finish = _str(candidate.get("finishReason"), 32)
            if finish:
                facts.stop_reason = finish
                kind = SEMANTIC
            elif kind is PREAMBLE and any(k not in _CANDIDATE_FRAMING and not _empty(v) for k, v in candidate.items()):
                return UNKNOWN
        if kind is PREAMBLE and any(k not in _GEMINI_FRAMING and not _empty(v) for k, v in payload.items()):
            return UNKNOWN
        return kind


class GenericSSEProfile(ProviderProfile):
    name = "sse"
    eof_is_end = True  # most custom servers just close
    semconv_name = "_OTHER"
    _KINDS: ClassVar[dict[str | None, FrameKind]] = {
        COMMENT: HEARTBEAT, "ping": HEARTBEAT, "keepalive": HEARTBEAT, "heartbeat": HEARTBEAT, "error": ERROR,
    }

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        kind = self._KINDS.get(frame.event)
        if kind is None:
            return END if frame.data == b"[DONE]" else SEMANTIC
        if kind is ERROR:
            facts.error_type = _error_type(_json(frame.data))
        return kind


def _bedrock_family(payload: dict[str, Any], facts: StreamFacts) -> FrameKind:
    """One decoded ``chunk`` of Bedrock's invoke stream for a model family that is not
    Anthropic's, by its shape (AWS's model parameter pages; docs/reference.md lists them):

    - Amazon Nova: ``messageStart`` (preamble), ``contentBlockStart``/``Delta``/``Stop``
      (content), ``messageStop.stopReason`` (end), ``metadata.usage`` (trailer);
    - Amazon Titan: ``outputText`` with ``completionReason`` and token counts;
    - Meta Llama: ``generation`` with ``stop_reason``, ``prompt_token_count``,
      ``generation_token_count``;
    - Mistral: ``outputs[].text`` with ``stop_reason``;
    - Cohere Command R: ``event_type`` (``stream-start`` a preamble, ``stream-end`` the end with
      ``finish_reason``, the rest content); Cohere Command: ``text``/``is_finished``/
      ``finish_reason`` or ``generations``;
    - OpenAI-shaped (AI21 Jamba, DeepSeek, Mistral's chat models, OpenAI's open-weight models):
      ``choices``, as Chat Completions reads them.

    Any other shape is ``UNKNOWN`` (content: failing open)."""
    if "messageStart" in payload:
        return PREAMBLE
    if "contentBlockDelta" in payload or "contentBlockStart" in payload or "contentBlockStop" in payload:
        return SEMANTIC
    stop = payload.get("messageStop")
    if isinstance(stop, dict):
        facts.stop_reason = _str(stop.get("stopReason"), 32) or facts.stop_reason
        return END
    metadata = payload.get("metadata")
    if isinstance(metadata, dict):
        usage = metadata.get("usage")
        if isinstance(usage, dict):
            facts.take_usage({"input_tokens": usage.get("inputTokens"), "output_tokens": usage.get("outputTokens")})
        return PREAMBLE
    if "outputText" in payload:
        facts.stop_reason = _str(payload.get("completionReason"), 32) or facts.stop_reason
        facts.take_usage({"input_tokens": payload.get("inputTextTokenCount"),
                          "output_tokens": payload.get("totalOutputTextTokenCount")})
        return SEMANTIC
    if "generation" in payload:
        facts.stop_reason = _str(payload.get("stop_reason"), 32) or facts.stop_reason
        facts.take_usage({"input_tokens": payload.get("prompt_token_count"),
                          "output_tokens": payload.get("generation_token_count")})
        return SEMANTIC
    outputs = payload.get("outputs")
    if isinstance(outputs, list):
        for output in outputs:
            if isinstance(output, dict):
                facts.stop_reason = _str(output.get("stop_reason"), 32) or facts.stop_reason
        return SEMANTIC
    event_type = payload.get("event_type")
    if isinstance(event_type, str):
        if event_type == "stream-start":
            facts.response_id = _str(payload.get("generation_id")) or facts.response_id
            return PREAMBLE
        if event_type == "stream-end":
            facts.stop_reason = _str(payload.get("finish_reason"), 32) or facts.stop_reason
            return END
        return UNKNOWN if not event_type else SEMANTIC
    if "is_finished" in payload or "generations" in payload:
        finish = _str(payload.get("finish_reason"), 32)
        for generation in payload.get("generations") or ():
            if isinstance(generation, dict):
                finish = _str(generation.get("finish_reason"), 32) or finish
        facts.stop_reason = finish or facts.stop_reason
        return SEMANTIC
    if isinstance(payload.get("choices"), list):
        if facts.response_id is None:
            facts.response_id = _str(payload.get("id"))
        _chat_facts(payload, facts)
        return PREAMBLE if _chat_framing(payload) else SEMANTIC
    return UNKNOWN


#: Bedrock's ``amazon-bedrock-invocationMetrics`` (on a stream's last chunk): token counts as usage.
_INVOCATION_METRICS = (("inputTokenCount", "input_tokens"), ("outputTokenCount", "output_tokens"),
                       ("cacheReadInputTokenCount", "cache_read_input_tokens"),
                       ("cacheWriteInputTokenCount", "cache_creation_input_tokens"))


class BedrockProfile(ProviderProfile):
    """AWS Bedrock ``InvokeModelWithResponseStream``: a binary ``application/vnd.amazon.eventstream``
    whose ``chunk`` events carry the model family's own JSON (base64 in ``{"bytes": ...}``) --
    Anthropic's events, judged by the Anthropic rules, or another family's
    (:func:`_bedrock_family`); the last chunk's ``amazon-bedrock-invocationMetrics`` fills the
    usage the family's own JSON did not give. Exceptions arrive in-band as ``:message-type:
    exception`` messages. No keep-alive has been observed on Bedrock: wire-silent unless the
    wire shows otherwise."""

    name = "bedrock"
    framing = "eventstream"
    keepalives = False
    semconv_name = "aws.bedrock"
    _anthropic = AnthropicProfile()

    def recognise_message(self, message: Message, facts: StreamFacts) -> FrameKind:
        if message.message_type != "event":
            facts.error_type = message.exception_type or _str(message.headers.get(":error-code"), 64) or "unknown"
            return ERROR
        if message.event_type != "chunk":
            return UNKNOWN
        inner = decode_chunk(message.payload)
        if inner is None:
            return UNKNOWN
        payload = _json(inner)
        if payload == "[DONE]":
            return END  # (Writer's Palmyra ends its stream with this JSON string)
        if not isinstance(payload, dict):
            return UNKNOWN
        metrics = payload.get("amazon-bedrock-invocationMetrics")
        if isinstance(metrics, dict):
            facts.take_usage({ours: metrics.get(theirs) for theirs, ours in _INVOCATION_METRICS
                              if ours not in facts.usage})
        kind = payload.get("type")
        if isinstance(kind, str):
            return self._anthropic.recognise(Frame(kind, inner, len(inner)), facts)
        return _bedrock_family(payload, facts)

    def inner_events(self, message: Message) -> tuple[str, bytes] | None:
        """The Anthropic event of a ``chunk`` message, its name and data (for partial content)."""
        if message.message_type != "event" or message.event_type != "chunk":
            return None
        inner = decode_chunk(message.payload)
        payload = _json(inner) if inner is not None else None
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            return None
        assert inner is not None
        return payload["type"], inner


class BedrockConverseProfile(BedrockProfile):
    """AWS Bedrock ``ConverseStream``: event-stream messages ``messageStart``,
    ``contentBlockStart``/``Delta``/``Stop``, ``messageStop`` (the reply's end, with its
    ``stopReason``), then ``metadata`` (usage: a trailer, recognised as framing)."""

    name = "bedrock-converse"
    _EVENTS: ClassVar[dict[str, FrameKind]] = {
        "messageStart": PREAMBLE,
        "contentBlockStart": SEMANTIC,
        "contentBlockDelta": SEMANTIC,
        "contentBlockStop": SEMANTIC,
        "messageStop": END,
        "metadata": PREAMBLE,
    }

    def recognise_message(self, message: Message, facts: StreamFacts) -> FrameKind:
        if message.message_type != "event":
            return super().recognise_message(message, facts)
        kind = self._EVENTS.get(message.event_type or "", UNKNOWN)
        if kind is END or message.event_type == "metadata":
            payload = _json(message.payload)
            if isinstance(payload, dict):
                facts.stop_reason = _str(payload.get("stopReason")) or facts.stop_reason
                usage = payload.get("usage")
                if isinstance(usage, dict):
                    facts.take_usage({"input_tokens": usage.get("inputTokens"),
                                      "output_tokens": usage.get("outputTokens")})
        return kind

    def inner_events(self, message: Message) -> tuple[str, bytes] | None:
        return None


class CohereProfile(ProviderProfile):
    """Cohere's v2 chat stream (``POST /v2/chat``, ``stream: true``): named SSE events, each
    ``event:`` the ``type`` of its data -- ``message-start`` (the id), ``content-*``,
    ``tool-plan-delta``, ``tool-call-*``, ``citation-*`` (content), ``message-end`` (the end:
    ``delta.finish_reason`` and ``delta.usage``; ``finish_reason: ERROR`` or ``delta.error`` is
    the provider's error), then ``data: [DONE]``. No keep-alive observed."""

    name = "cohere"
    keepalives = False
    semconv_name = "cohere"
    _KINDS: ClassVar[dict[str | None, FrameKind]] = {
        COMMENT: HEARTBEAT,
        "message-start": PREAMBLE,
        "content-start": SEMANTIC,
        "content-delta": SEMANTIC,
        "content-end": SEMANTIC,
        "tool-plan-delta": SEMANTIC,
        "tool-call-start": SEMANTIC,
        "tool-call-delta": SEMANTIC,
        "tool-call-end": SEMANTIC,
        "citation-start": SEMANTIC,
        "citation-end": SEMANTIC,
        "message-end": END,
        "debug": PREAMBLE,
    }

    def recognise(self, frame: Frame, facts: StreamFacts) -> FrameKind:
        event = frame.event
        data = frame.data
        if event is None:
            if data == b"[DONE]":
                return END
            payload = _json(data)
            event = _str(payload.get("type")) if isinstance(payload, dict) else None
        kind = self._KINDS.get(event, UNKNOWN)
        if kind is PREAMBLE and event == "message-start":
            payload = _json(data)
            if isinstance(payload, dict):
                facts.response_id = _str(payload.get("id")) or facts.response_id
        elif kind is END:
            payload = _json(data)
            delta = payload.get("delta") if isinstance(payload, dict) else None
            if isinstance(delta, dict):
                finish = _str(delta.get("finish_reason"), 32)
                facts.stop_reason = finish or facts.stop_reason
                usage = delta.get("usage")
                tokens = usage.get("tokens") if isinstance(usage, dict) else None
                if isinstance(tokens, dict):
                    facts.take_usage(tokens)
                if finish == "ERROR" or _str(delta.get("error")):
                    facts.error_type = "error" if finish is None else finish.lower()
                    return ERROR
        return kind


class VertexAnthropicProfile(AnthropicProfile):
    """Anthropic on Google Vertex AI (``:streamRawPredict``): the Anthropic wire, as is."""

    name = "vertex"
    semconv_name = "gcp.vertex_ai"


PROFILES: dict[str, ProviderProfile] = {
    p.name: p
    for p in (AnthropicProfile(), VertexAnthropicProfile(), BedrockProfile(), BedrockConverseProfile(),
              OpenAIChatProfile(), OpenAIResponsesProfile(), OpenRouterProfile(), GeminiProfile(), CohereProfile(),
              GenericSSEProfile())
}

#: The hosts each wire is served from, as patterns (``*``: one DNS label or part of one, see
#: :mod:`otel_liveness.core.wire.hosts`): what auto-instrumentation covers by default. The generic
#: ``sse`` profile has no host of its own.
HOST_PATTERNS: dict[str, tuple[str, ...]] = {
    "anthropic": ("api.anthropic.com",),
    "vertex": ("aiplatform.googleapis.com", "*-aiplatform.googleapis.com"),
    "bedrock": ("bedrock-runtime.*.amazonaws.com", "bedrock-runtime-fips.*.amazonaws.com",
                "bedrock-runtime.*.amazonaws.com.cn"),
    "bedrock-converse": ("bedrock-runtime.*.amazonaws.com", "bedrock-runtime-fips.*.amazonaws.com",
                         "bedrock-runtime.*.amazonaws.com.cn"),
    # OpenAI, and the servers that speak its Chat Completions wire (docs/reference.md lists them)
    "openai-chat": ("api.openai.com", "*.openai.azure.com", "*.cognitiveservices.azure.com", "*.services.ai.azure.com",
                    "api.groq.com", "api.deepseek.com", "api.mistral.ai", "api.x.ai", "api.together.xyz",
                    "api.together.ai", "api.fireworks.ai", "api.cerebras.ai", "router.huggingface.co"),
    "openai-responses": ("api.openai.com", "*.openai.azure.com"),
    "openrouter": ("openrouter.ai",),
    "gemini": ("generativelanguage.googleapis.com", "aiplatform.googleapis.com", "*-aiplatform.googleapis.com"),
    "cohere": ("api.cohere.com", "api.cohere.ai"),
    "sse": (),
}

#: Paths that stream whatever the request's headers say (Bedrock, Vertex and Gemini requests carry
#: no ``"stream": true`` and no ``Accept: text/event-stream``).
_STREAM_SUFFIXES = ("/invoke-with-response-stream", "/converse-stream", ":streamRawPredict", ":streamGenerateContent")


def streams_by_url(path: str, query: str = "") -> bool:
    """Whether the URL alone says the response is a stream (a background response's stream,
    ``GET /v1/responses/{id}?stream=true``, included)."""
    path = path.rstrip("/")
    return (path.endswith(_STREAM_SUFFIXES) or "alt=sse" in query
            or (_background_stream(path) and "stream=true" in query))


def _background_stream(path: str) -> bool:
    """``.../responses/{id}``: OpenAI Responses' retrieve, which ``?stream=true`` makes the stream
    of a background response (``&starting_after=N``: the events after sequence number N)."""
    return response_path_id(path) is not None


#: The endpoints that generate: a request to one of them is judged whatever its body says.
_GENERATION_SUFFIXES = ("/messages", "/chat/completions", "/completions", "/responses", "/v2/chat", ":generateContent",
                        ":streamGenerateContent", ":rawPredict", ":streamRawPredict", "/invoke",
                        "/invoke-with-response-stream", "/converse", "/converse-stream")


def generation_path(path: str) -> bool:
    """Whether ``path`` is a generation endpoint of a wire the profiles know (Anthropic Messages,
    OpenAI Chat Completions and Responses, Gemini, Vertex, Bedrock). A request to any other path
    is judged only when its JSON body names a model (a gateway's own generation endpoint) or the
    policy names the wire: the event streams of a provider's other APIs (sessions, environments)
    are not model replies and pass through untouched."""
    path = path.rstrip("/")
    return path.endswith(_GENERATION_SUFFIXES) or _background_stream(path)


def select_provider(host: str, path: str) -> str:
    """Choose a wire format from the request's host and path (override with ``Policy.provider``;
    a response's content type can still switch a generic choice to the event stream)."""
    host = host.lower()
    path = path.rstrip("/")
    if path.endswith(("/invoke-with-response-stream", "/invoke")) and "/model/" in path:
        return "bedrock"
    if path.endswith(("/converse-stream", "/converse")) and "/model/" in path:
        return "bedrock-converse"
    if path.endswith((":streamRawPredict", ":rawPredict")) or ("aiplatform.googleapis.com" in host and "/anthropic/" in path):
        return "vertex"
    if path.endswith((":streamGenerateContent", ":generateContent")) or host == "generativelanguage.googleapis.com":
        return "gemini"
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    if path.endswith("/v2/chat") or host in ("api.cohere.com", "api.cohere.ai"):
        return "cohere"
    # The wire a path names first: a provider's host serves other wires too (Bedrock's
    # OpenAI-compatible /openai/v1/chat/completions is SSE, not its event stream).
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses") or _background_stream(path):
        return "openai-responses"
    if host.startswith("bedrock-runtime.") and host.endswith(".amazonaws.com"):
        return "bedrock"
    if "anthropic" in host:
        return "anthropic"
    return "sse"


#: The GenAI conventions' ``gen_ai.provider.name`` of the OpenAI-compatible hosts that have one.
_COMPATIBLE_NAMES = {"api.groq.com": "groq", "api.deepseek.com": "deepseek", "api.mistral.ai": "mistral_ai",
                     "api.x.ai": "x_ai"}
_AZURE_OPENAI = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")


def semconv_provider(profile: str, host: str) -> str:
    """The GenAI semantic conventions' ``gen_ai.provider.name`` for a request: the profile's, or
    the host's where an OpenAI-compatible provider has a name of its own (Groq, DeepSeek,
    Mistral, xAI, Azure OpenAI)."""
    name = PROFILES[profile].semconv_name
    host = host.lower()
    if name == "gcp.gemini" and "aiplatform.googleapis.com" in host:
        return "gcp.vertex_ai"
    if name == "openai":
        if host.endswith(_AZURE_OPENAI):
            return "azure.ai.openai"
        return _COMPATIBLE_NAMES.get(host, name)
    return name


def response_profile(profile: ProviderProfile, content_type: str) -> ProviderProfile:
    """The profile a response is read with: ``profile``, unless the response's content type
    (lower-case) says what the URL did not -- an event stream is Bedrock's; an SSE body where an
    event stream was expected is read as generic SSE, never with the wrong framer."""
    framing = ("eventstream" if content_type.startswith("application/vnd.amazon.eventstream")
               else "sse" if content_type.startswith("text/event-stream") else None)
    if framing is None or framing == profile.framing:
        return profile
    return PROFILES["bedrock" if framing == "eventstream" else "sse"]


def request_id(headers: Mapping[str, str]) -> str | None:
    """The provider's id of the request, from the response headers (keys lower-case): Anthropic's
    ``request-id``, OpenAI's ``x-request-id``, Amazon's ``x-amzn-requestid`` (128 characters at most)."""
    return (headers.get("request-id") or headers.get("x-request-id") or headers.get("x-amzn-requestid") or "")[:128] or None


def profile_for(name: str) -> ProviderProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(PROFILES)}") from None
