"""The closed vocabularies of otel-liveness and the per-request outcome report.

Everything that lands in telemetry as a value (an attempt outcome, a phase, a stop reason, a
retry reason, a delay source, a frame kind) is a member of one of the ``StrEnum`` sets below;
nothing else is ever emitted, so the collector rules and dashboards can enumerate them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from operator import attrgetter
from typing import Any

__all__ = [
    "AttemptOutcome",
    "AttemptRecord",
    "Completion",
    "DelaySource",
    "FrameKind",
    "Notice",
    "NoticeKind",
    "Phase",
    "RequestReport",
    "RetryReason",
    "StopReason",
]


class FrameKind(StrEnum):
    """What a frame means for liveness."""

    HEARTBEAT = "heartbeat"  # ping, SSE comment, keep-alive: the connection is alive
    PREAMBLE = "preamble"  # message_start, response.created: framing before any content
    SEMANTIC = "semantic"  # text, thinking, tool-call, signature, block start/stop, message_delta
    END = "end"  # message_stop, [DONE], response.completed
    ERROR = "error"  # in-band error event
    UNKNOWN = "unknown"  # anything else: raw progress only


class Phase(StrEnum):
    """How far an attempt got."""

    CONNECTING = "connecting"
    AWAITING_HEADERS = "awaiting_headers"
    PREAMBLE = "preamble"  # headers received, no semantic frame yet
    STREAMING = "streaming"  # at least one semantic frame
    DONE = "done"


class NoticeKind(StrEnum):
    """What kind of wait a notice reports."""

    PREFILL = "prefill"  # no body byte yet: the provider is still reading the prompt
    SEMANTIC = "semantic"  # the body started, no content for a while: the model is thinking


class Completion(StrEnum):
    """How a completed streaming attempt ended."""

    END_FRAME = "end_frame"  # the provider's end frame (message_stop, [DONE], response.completed)
    FINISH_THEN_EOF = "finish_then_eof"  # a finish reason, then a clean end of the body (no end frame)
    FINISH_THEN_CLOSE = "finish_then_close"  # a finish reason, then the caller closed (before the end frame)
    EOF = "eof"  # a clean end of the body where the wire format has no end frame (generic SSE, JSON)


class AttemptOutcome(StrEnum):
    """How one provider attempt ended."""

    COMPLETED = "completed"
    REJECTED = "rejected"  # 4xx (not 408/409/429) or x-should-retry: false
    RAW_SILENCE = "raw_silence"
    SEMANTIC_TIMEOUT = "semantic_timeout"
    PROVIDER_ERROR = "provider_error"  # 5xx/529/408/409, in-band error, EOF before content
    RATE_LIMITED = "rate_limited"
    CONNECTION_ERROR = "connection_error"
    TRUNCATED = "truncated"
    WALL_BUDGET = "wall_budget"
    CANCELLED = "cancelled"
    MALFORMED = "malformed"
    REDIRECTED = "redirected"  # a 3xx response, passed to the client to follow


class StopReason(StrEnum):
    """Why a request (all its attempts) ended."""

    COMPLETED = "completed"
    REJECTED = "rejected"
    TRUNCATED = "truncated"
    EXHAUSTED = "exhausted"  # transient retry budget spent
    RATE_LIMITED = "rate_limited"  # patient (429) budget spent
    WALL_BUDGET = "wall_budget"
    CANCELLED = "cancelled"
    MALFORMED = "malformed"
    REDIRECTED = "redirected"
    NOT_REPLAYABLE = "not_replayable"  # a retry was due, but the request body could not be sent again
    DEFERRED = "deferred"  # an error status passed up at once: an SDK component above recovers from it itself
    RETRY_BUDGET = "retry_budget"  # a retry was due, but the host's retry budget is spent (core/memory/budget.py)


class RetryReason(StrEnum):
    """Why an attempt was retried (also the cause named when the budget is spent)."""

    SERVER_ERROR = "server_error"  # 5xx other than 529
    OVERLOADED = "overloaded"  # 529 or in-band overloaded_error
    REQUEST_TIMEOUT = "request_timeout"  # 408
    CONFLICT = "conflict"  # 409
    RATE_LIMITED = "rate_limited"  # 429 or in-band rate_limit_error
    SHOULD_RETRY_HEADER = "should_retry_header"  # x-should-retry: true on an otherwise final status
    CONNECT_ERROR = "connect_error"  # the server never got the request
    READ_ERROR = "read_error"  # the connection broke after the request was sent
    RAW_SILENCE = "raw_silence"
    FIRST_BYTE_TIMEOUT = "first_byte_timeout"  # no body byte within the first-byte bound
    ERROR_EVENT = "error_event"  # in-band error before content
    EOF_BEFORE_CONTENT = "eof_before_content"
    SEMANTIC_TIMEOUT = "semantic_timeout"


class DelaySource(StrEnum):
    """Where a retry delay came from."""

    RETRY_AFTER_MS = "retry_after_ms"
    RETRY_AFTER = "retry_after"
    RETRY_AFTER_DATE = "retry_after_date"
    BACKOFF = "backoff"
    HOST_PAUSE = "host_pause"  # the host's shared pause after a throttling answer (core/memory/budget.py) was longer


@dataclass
class AttemptRecord:
    """One provider attempt as the report shows it (times in seconds)."""

    index: int
    outcome: AttemptOutcome | None = None
    phase: Phase = Phase.CONNECTING
    status: int | None = None
    error_type: str | None = None
    request_id: str | None = None
    response_id: str | None = None
    started: float = 0.0  # seconds since the request started
    duration: float | None = None
    time_to_first_byte: float | None = None  # to the first body byte
    time_to_first_semantic: float | None = None
    raw_idle: float = 0.0  # raw silence at the end
    semantic_idle: float = 0.0  # semantic silence at the end
    max_raw_gap: float = 0.0
    max_semantic_gap: float = 0.0
    heartbeats: int = 0
    notices: int = 0
    prefill_notices: int = 0  # of ``notices``, before the first body byte
    first_byte_bound: float | None = None  # s, the bound on the wait for the first body byte
    raw_bound: float | None = None  # s, the raw-silence bound at the end (learned when adaptive)
    max_heartbeat_gap: float = 0.0
    completion: Completion | None = None  # how a completed attempt ended
    committed: bool = False  # content of this attempt was released to the caller
    frames: int = 0
    bytes_received: int = 0
    usage: dict[str, int] = field(default_factory=dict)  # token counts the provider reported
    stop_detail: str | None = None  # the provider's stop/finish reason
    unrecognised: int = 0  # frames no profile rule knew, taken for content (fail open)
    retry_delay: float | None = None  # the wait scheduled after this attempt, if it was retried
    retry_reason: RetryReason | None = None
    delay_source: DelaySource | None = None


@dataclass(eq=False)
class RequestReport:
    """The outcome of one logical request: all its attempts and why it stopped. JSON-serialisable
    through :meth:`to_dict`. Compared (and hashed) by identity: hooks may key their per-request
    state by it."""

    provider: str  # the wire profile (anthropic, bedrock, openai-chat, gemini, ...)
    streaming: bool
    attempts: list[AttemptRecord] = field(default_factory=list)
    stop_reason: StopReason | None = None
    cause: str | None = None  # the last failure's reason when the request did not complete
    duration: float | None = None
    wall_budget: float | None = None
    shadow: bool = False
    model: str | None = None
    stop_detail: str | None = None  # e.g. the provider's stop_reason ("end_turn", "tool_use")
    provider_name: str = ""  # the GenAI conventions' gen_ai.provider.name (anthropic, aws.bedrock, openai...)

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` plus ``retries``, written out: the engine publishes the report
        a few times per request, and ``asdict``'s generic deep copy cost ~60 µs each time (the
        values are scalars, enums and the ``usage`` dicts, copied here; :func:`_fields_dict`:
        ~0.3 µs instead of ~2 µs). ``tests/test_engine.py``
        checks it equals ``asdict``."""
        out = _fields_dict(self, _REPORT_FIELDS, _report_values)
        out["attempts"] = [_attempt_dict(record) for record in self.attempts]
        out["retries"] = self.retries
        return out


_REPORT_FIELDS = tuple(f.name for f in fields(RequestReport))
_report_values = attrgetter(*_REPORT_FIELDS)
_ATTEMPT_FIELDS = tuple(f.name for f in fields(AttemptRecord))
_attempt_values = attrgetter(*_ATTEMPT_FIELDS)


def _fields_dict(obj: object, names: tuple[str, ...], values: attrgetter[Any]) -> dict[str, Any]:
    """The fields of a dataclass instance, in field order: a copy of its ``__dict__`` when that
    holds exactly the fields in that order (the dataclass ``__init__`` sets them so, and nothing
    here adds or deletes attributes: several times faster), else field by field."""
    own = obj.__dict__
    if len(own) == len(names) and tuple(own) == names:
        return own.copy()
    return dict(zip(names, values(obj), strict=True))


def _attempt_dict(record: AttemptRecord) -> dict[str, Any]:
    out = _fields_dict(record, _ATTEMPT_FIELDS, _attempt_values)
    out["usage"] = dict(record.usage)
    return out


@dataclass(frozen=True, slots=True)
class Notice:
    """The model has been silent for another ``semantic_notice_interval``: before the first body
    byte a prefill wait, after it a semantic (thinking) wait (hooks see it as
    :class:`~.events.SemanticNotice`, these fields and the attempt's)."""

    at: float  # when it became due
    number: int  # counted over the attempt
    semantic_idle: float
    raw_idle: float
    heartbeats_since_semantic: int
    phase: Phase
    kind: NoticeKind = NoticeKind.SEMANTIC
