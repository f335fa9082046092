"""What a hook sees, as it happens: frozen event objects, one class per fact.

A hook is any callable taking one event (:class:`Hook`). The transport calls every hook in order,
synchronously, from the thread/task that drives the stream; a hook that raises is logged and
counted, never allowed to change what the application receives. None of these carry prompt or
completion content.

What else a hook may offer, each a declared protocol the transport checks for (the telemetry hook
offers all three):

- :class:`SendsInContext` -- ``send_context()``: a context manager the inner send of every
  attempt runs in (the telemetry hook suppresses the HTTP client instrumentations there);
- :class:`EmitsTelemetry` -- ``emits_telemetry = True``: a hook that emits telemetry, beside which
  the transport adds no default telemetry hook;
- :class:`TakesHeartbeats` -- ``takes_heartbeats(report)``: false when the hook has no use for a
  request's :class:`Heartbeats` (the telemetry hook with no SDK behind it). Asked once per request
  (again if the hooks change); a request whose hooks all decline makes no ``Heartbeats`` events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .outcome import AttemptOutcome, DelaySource, Notice, Phase, RetryReason, StopReason

if TYPE_CHECKING:
    from .outcome import AttemptRecord, RequestReport

__all__ = [
    "AttemptEnded",
    "AttemptStarted",
    "CandidateVerdict",
    "CaptureItem",
    "EmitsTelemetry",
    "Event",
    "FrameSizes",
    "Heartbeats",
    "Hook",
    "RequestEnded",
    "RequestStarted",
    "RetryDenied",
    "RetryScheduled",
    "SemanticNotice",
    "SendsInContext",
    "TakesHeartbeats",
    "Verdict",
]


#: A body read as a timing-only capture keeps it (``Policy.capture_mode == "timing"``): the
#: (kind, size in bytes) of each frame it completed -- kinds ``heartbeat``, ``comment``,
#: ``preamble``, ``content``, ``stop``, ``error``, ``other``, or one ``partial`` when it completed none.
FrameSizes = tuple[tuple[str, int], ...]

#: One record of an attempt's capture: a body chunk (``bytes``; :data:`FrameSizes` in a timing-only
#: capture); the response headers that matter for judging it (``{"status": int, "content-type":
#: str, "content-encoding": str}``); ``None`` when the body ended; ``"read_error"`` /
#: ``"connect_error"`` when the connection failed; ``"end"`` when the attempt ended otherwise
#: (nothing was read after).
CaptureItem = bytes | FrameSizes | Mapping[str, str | int] | str | None


@dataclass(frozen=True, slots=True)
class RequestStarted:
    report: RequestReport
    method: str
    host: str
    port: int | None
    path: str
    model: str | None
    carrier: Mapping[str, str]  # the request's W3C trace-context headers (traceparent, tracestate), nothing else
    body_size: int | None = None  # bytes of the request body (None: unknown)
    #: Whether a hook may add trace context to the attempts (``AttemptStarted.inject``): not when
    #: the request carries some, or its SDK propagates by its own option (``RequestFacts.propagate``).
    propagate: bool = True
    baggage: bool = False  # ... and whether that may include the application's baggage (``Policy.propagate_baggage``)
    #: The request's SDK traces its own calls (``RequestFacts.sdk_traced``): attempt spans nest under
    #: its call span, and there are none when no span is current (its tracing is off).
    sdk_traced: bool = False


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


@dataclass(frozen=True)
class _OfAttempt:
    """Whose a notice is: the request's report and its attempt (0-based)."""

    report: RequestReport
    attempt: int


@dataclass(frozen=True, slots=True)
class SemanticNotice(Notice, _OfAttempt):
    """Still waiting, another ``semantic_notice_interval`` without content: a *prefill* wait
    (``kind`` :attr:`~.outcome.NoticeKind.PREFILL`, no body byte yet) or a *thinking* wait (``SEMANTIC``).

    The clock's :class:`~.clocks.Notice` as hooks see it -- the same facts (``at``, ``number``,
    ``semantic_idle``, ``raw_idle``, ``heartbeats_since_semantic``, ``phase``, ``kind``), declared
    once there -- for ``report``'s attempt ``attempt``, with ``at`` in seconds since the request
    started. Fields in that order: ``report, attempt, at, number, ...``."""


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
class RetryDenied:
    """A retry was due, but the host's retry budget is spent (:mod:`.budget`): the request ends
    with the error it would have ended with at exhaustion, stop reason ``retry_budget``."""

    report: RequestReport
    attempt: int  # the attempt that failed
    at: float
    reason: RetryReason
    fill: float  # the budget's level as a fraction of its capacity (retries stop at or below 0.5)


@dataclass(frozen=True, slots=True)
class CandidateVerdict:
    """One candidate policy's judgment of an ended attempt (:mod:`.canary`): what it counts
    (``judged``, ``kill``, ``false_kill``, ``upload``, ``missed``, ``caught`` or ``fault``) and,
    for a dead attempt the candidate would have ended, how much sooner (s; negative: later) than
    the attempt ended."""

    name: str
    verdicts: tuple[str, ...]
    shift: float | None = None


@dataclass(frozen=True, slots=True)
class AttemptEnded:
    report: RequestReport
    record: AttemptRecord
    #: The flight recorder's capture of the attempt (``Policy.capture_dir`` set): (seconds since
    #: the attempt's request was sent, :data:`CaptureItem`). Holds content (not in timing mode):
    #: only the recorder should read it. ``None`` when not capturing.
    capture: Sequence[tuple[float, CaptureItem]] | None = None
    #: The candidate policies' judgments of the attempt (``Policy.candidates``; empty without).
    candidates: tuple[CandidateVerdict, ...] = ()


@dataclass(frozen=True, slots=True)
class RequestEnded:
    report: RequestReport
    stop_reason: StopReason


Event = (
    RequestStarted | AttemptStarted | Heartbeats | SemanticNotice | Verdict | RetryScheduled | RetryDenied | AttemptEnded
    | RequestEnded
)


class Hook(Protocol):
    def __call__(self, event: Event, /) -> None: ...


@runtime_checkable
class SendsInContext(Protocol):
    """A hook that asks the inner send of every attempt to run inside a context (the first such
    hook is asked)."""

    def send_context(self) -> AbstractContextManager[Any]: ...


@runtime_checkable
class EmitsTelemetry(Protocol):
    """A hook that emits telemetry when ``emits_telemetry`` is true: no default telemetry hook is
    added beside it."""

    emits_telemetry: bool


@runtime_checkable
class TakesHeartbeats(Protocol):
    """A hook that says, per request, whether it takes the request's :class:`Heartbeats` (one a
    read that carried heartbeat frames: the most frequent event). A hook without the method takes
    them all; one that answers false is not called with them for that request."""

    def takes_heartbeats(self, report: RequestReport, /) -> bool: ...
