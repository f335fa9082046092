"""What the engine needs to know about a request, read once from its method, URL, headers and
body (pure: the driver passes plain values, never an HTTP library object)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..memory.caches import RequestKey, auth_identity
from ..wire.members import top_level
from ..wire.resume import resumable

__all__ = ["TRACE_HEADERS", "RequestFacts", "propagates_itself", "size_bucket"]

#: The only request headers that reach hooks (W3C trace context): never credentials.
TRACE_HEADERS = ("traceparent", "tracestate")

_KIB = 1024
_MIB = 1024 * _KIB
#: Request body size buckets for telemetry (a prompt's prefill grows with it): closed, low-cardinality.
_BUCKETS = ((64 * _KIB, "lt_64k"), (256 * _KIB, "64k_256k"), (_MIB, "256k_1m"), (4 * _MIB, "1m_4m"))


def size_bucket(size: int | None) -> str:
    """``lt_64k``, ``64k_256k``, ``256k_1m``, ``1m_4m``, ``ge_4m`` or ``unknown``."""
    if size is None:
        return "unknown"
    for limit, name in _BUCKETS:
        if size < limit:
            return name
    return "ge_4m"


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """One request as the engine sees it."""

    method: str = "POST"
    host: str = ""
    port: int | None = None
    path: str = ""
    url: str = ""
    streaming: bool = False  # known before headers to expect a stream
    body_size: int | None = None  # bytes; None when the body is a stream of unknown length
    model: str | None = None
    carrier: Mapping[str, str] = field(default_factory=dict)  # trace-context headers only
    read_timeout: float | None = None  # the caller's own socket read timeout
    sdk_retry: bool = False  # a retry by an SDK above the transport (x-stainless-retry-count > 0)
    #: The request comes from an SDK that traces its own calls and propagates their context as its
    #: own options say (:func:`propagates_itself`: the anthropic SDK).
    sdk_traced: bool = False
    #: Whether the transport may add trace context to the request's attempts: not when the request
    #: carries some already, nor when its SDK traces its calls (``sdk_traced``) -- what the layer
    #: above sent, or chose not to send, stands.
    propagate: bool = True
    #: An SDK component above recovers from error statuses itself (the anthropic SDK's refusal
    #: fallback middleware, which tags its requests ``x-stainless-helper: fallback-refusal-middleware``:
    #: it moves a failed hop on, or re-sends a capacity-failed fast one without ``speed``); the
    #: transport passes such a status up at once rather than spend attempts first.
    statuses_above: bool = False
    #: The request must not be sent twice: it gives the model a remote MCP server (an OpenAI
    #: Responses ``tools`` entry of ``"type": "mcp"``), whose tools the provider may already have
    #: called -- their effects made -- when the request fails. Its SDK makes one attempt (the
    #: openai SDK's tool runner sends it with ``max_retries=0``); so does the transport: no retry,
    #: and an error status passed up as it came.
    once: bool = False
    key: RequestKey | str | None = None  # identity for the exhausted-request cache (method, URL, body, auth digest)
    #: The provider keeps the response and its stream can be read again from any event on: an
    #: OpenAI Responses background response, created streamed or its stream read (core/wire/resume.py).
    resumable: bool = False

    @classmethod
    def read(
        cls,
        *,
        method: str,
        url: str,
        host: str,
        port: int | None,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float | None,
        stream_path: bool = False,
    ) -> RequestFacts:
        """Facts from the parts of a request. ``headers`` keys lower-case; ``body`` ``None`` when
        it is a stream that was not read; ``stream_path``: the URL alone says it streams."""
        size: int | None = len(body) if body is not None else None
        if size is None:
            length = headers.get("content-length", "")
            size = int(length) if length.isdigit() else None
        # The body's own top-level "model" and "stream" members, found without parsing it
        # (core/wire/members.py): a 1M-token prompt is a 4 MB body.
        found = top_level(body, _MEMBERS) if body else None
        if found is not None:
            model, stream = _string(found[0]), found[1] == b"true"
            once = found[2] is not None and _REMOTE_MCP.search(found[2]) is not None
            background = found[3] == b"true"
        else:  # not an object the walk follows (or no body): parsed, and searched, as a whole
            model = _model(body)
            stream = body is not None and (b'"stream":true' in body or b'"stream": true' in body)
            once = background = False
        streaming = stream_path or stream or "text/event-stream" in headers.get("accept", "")
        retry_count = headers.get("x-stainless-retry-count", "0")
        carrier = {k: headers[k] for k in TRACE_HEADERS if k in headers}
        sdk_traced = propagates_itself(headers.get("user-agent", ""))
        return cls(
            method=method,
            host=host,
            port=port,
            path=path,
            url=url,
            streaming=streaming,
            body_size=size,
            model=model,
            carrier=carrier,
            read_timeout=read_timeout,
            sdk_retry=retry_count not in ("", "0"),
            sdk_traced=sdk_traced,
            propagate=not carrier and not sdk_traced,
            statuses_above=_FALLBACK_MIDDLEWARE in headers.get("x-stainless-helper", ""),
            once=once,
            key=RequestKey(method, url, body, auth_identity(headers)) if body is not None else None,
            resumable=resumable(method, path, url.partition("?")[2], background=background, streaming=streaming),
        )


_MEMBERS = (b"model", b"stream", b"tools", b"background")
#: A remote MCP server among a request's tools (the ``tools`` member's raw JSON).
_REMOTE_MCP = re.compile(rb'"type"\s*:\s*"mcp"')
_FALLBACK_MIDDLEWARE = "fallback-refusal-middleware"

#: The anthropic SDK's clients (``Anthropic``, ``AsyncAnthropic``, ``AnthropicBedrock``,
#: ``AnthropicVertex``...) name themselves and their version in the user agent.
_ANTHROPIC_UA = re.compile(r"(?:Async)?Anthropic\w*/Python (\d+)\.(\d+)")


def propagates_itself(user_agent: str) -> bool:
    """Whether a request's user agent is an SDK that propagates trace context itself, by its own
    option: the anthropic SDK from 1.14 (its ``open_telemetry={"propagation": ...}`` option and
    ``ANTHROPIC_OPEN_TELEMETRY_PROPAGATION``; on by default, when it sends the headers itself).
    The openai SDK has no such option: under it the transport propagates."""
    match = _ANTHROPIC_UA.match(user_agent)
    return match is not None and (int(match[1]), int(match[2])) >= (1, 14)


def _string(raw: bytes | None) -> str | None:
    """The model's name from its member's raw value: a JSON string (at most 128 characters), else ``None``."""
    if raw is None or raw[:1] != b'"':
        return None
    try:
        # (decoded as json.loads decodes a body given as bytes: UTF-8, lone surrogates passed)
        value = raw[1:-1].decode("utf-8", "surrogatepass") if b"\\" not in raw else json.loads(raw)
    except ValueError:  # (UnicodeDecodeError included)
        return None
    return _name(value)


def _model(body: bytes | None) -> str | None:
    """The model's name from the whole body, parsed (a body the walk cannot follow)."""
    if not body or body[:1] != b"{" or b'"model"' not in body:
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return _name(payload.get("model") if isinstance(payload, dict) else None)


def _name(value: object) -> str | None:
    """A model's name as the facts keep it: a string, at most 128 characters."""
    return value[:128] if isinstance(value, str) else None
