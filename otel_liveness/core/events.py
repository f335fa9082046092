"""What a hook sees, as it happens: frozen event objects, one class per fact.

A hook is any callable taking one event. The transport calls every hook in order, synchronously,
from the thread/task that drives the stream; a hook that raises is logged and counted, never
allowed to change what the application receives. None of these carry prompt or completion content.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from .outcome import AttemptOutcome, DelaySource, Phase, RetryReason, StopReason

if TYPE_CHECKING:
    from .outcome import AttemptRecord, RequestReport

__all__ = [
    "AttemptEnded",
    "AttemptStarted",
    "Event",
    "Heartbeats",
    "Hook",
    "RequestEnded",
    "RequestStarted",
    "RetryScheduled",
    "SemanticNotice",
    "Verdict",
]


@dataclass(frozen=True, slots=True)
class RequestStarted:
    report: RequestReport
    method: str
    host: str
    port: int | None
    path: str
    model: str | None
    carrier: Mapping[str, str]  # the request's W3C trace-context headers (traceparent, tracestate), nothing else


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    report: RequestReport
    attempt: int  # 0-based: http.request.resend_count
    at: float  # seconds since the request started
    inject: dict[str, str]  # headers a hook wants on this attempt's request (trace context propagation)


@dataclass(frozen=True, slots=True)
class Heartbeats:
    """``count`` heartbeat frames arrived in one read (``total`` so far in this attempt)."""

    report: RequestReport
    attempt: int
    at: float
    count: int
    total: int


@dataclass(frozen=True, slots=True)
class SemanticNotice:
    report: RequestReport
    attempt: int
    at: float  # when it fell due (seconds since the request started)
    number: int
    semantic_idle: float
    raw_idle: float
    heartbeats_since_semantic: int
    phase: Phase


@dataclass(frozen=True, slots=True)
class Verdict:
    """A terminal clock verdict or an in-band error, observed (enforced unless in shadow mode)."""

    report: RequestReport
    attempt: int
    at: float
    kind: AttemptOutcome  # raw_silence, semantic_timeout, wall_budget, provider_error
    phase: Phase
    committed: bool
    enforced: bool


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    report: RequestReport
    attempt: int  # the attempt that failed
    at: float
    delay: float
    reason: RetryReason
    source: DelaySource
    rate_limited: bool


@dataclass(frozen=True, slots=True)
class AttemptEnded:
    report: RequestReport
    record: AttemptRecord


@dataclass(frozen=True, slots=True)
class RequestEnded:
    report: RequestReport
    stop_reason: StopReason


Event = (
    RequestStarted | AttemptStarted | Heartbeats | SemanticNotice | Verdict | RetryScheduled | AttemptEnded | RequestEnded
)


class Hook(Protocol):
    def __call__(self, event: Event, /) -> None: ...
