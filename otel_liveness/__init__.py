"""otel-liveness: judge LLM provider streams by wire progress, recover below the transcript, and
make every wait, retry, heartbeat and truncation an OpenTelemetry fact.

Layers (each a subpackage):

- :mod:`otel_liveness.core` -- pure: SSE scanning, classification, clocks, retry decisions;
- :mod:`otel_liveness.transport` -- the httpx/httpx2 drivers (sync and async) that own all I/O;
- :mod:`otel_liveness.tools` -- ``otel-liveness analyze`` and other offline tools on the core.
"""

import collections.abc as _abc
import logging as _logging
import typing as _typing

from ._version import __version__
from .core.errors import (
    BodyNotReplayable,
    ConfigurationWarning,
    CorruptFrame,
    FrameTooLarge,
    InvalidPolicy,
    LivenessError,
    MalformedStream,
    ProviderError,
    RateLimited,
    StreamTruncated,
    WallTimeout,
    liveness_error,
    liveness_report,
)
from .core.events import (
    AttemptEnded,
    AttemptStarted,
    Heartbeats,
    RequestEnded,
    RequestStarted,
    RetryScheduled,
    SemanticNotice,
    Verdict,
)
from .core.outcome import AttemptOutcome, FrameKind, Phase, RequestReport, RetryReason, StopReason
from .core.policy import Policy
from .core.wire.anthropic import continuation_message, decode_partial
from .transport import family_of as _family_of
from .transport import liveness_policy
from .transport._recorder import recorder_stats


def wrap(
    inner_transport: _typing.Any,
    policy: Policy | None = None,
    *,
    hooks: _abc.Iterable[_abc.Callable[[_typing.Any], None]] = (),
    hosts: _abc.Iterable[str] | None = None,
    asynchronous: bool | None = None,
    telemetry: bool = True,
    tracer_provider: _typing.Any = None,
    meter_provider: _typing.Any = None,
) -> _typing.Any:
    """Put the liveness policy under a client: returns a transport of the same family (httpx or
    httpx2) and kind (sync or async) as ``inner_transport`` -- an instance of
    :class:`otel_liveness.httpx.LivenessTransport` or of one of its siblings::

        import anthropic, httpx2, otel_liveness
        client = anthropic.Anthropic(
            http_client=httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport())),
            max_retries=0,  # the transport retries below the SDK
        )

    ``hooks`` receive every event (:mod:`otel_liveness.core.events`); ``hosts`` limits the policy
    to requests for those hosts (others pass through untouched): names, or patterns where ``*`` is
    one DNS label or part of one (``bedrock-runtime.*.amazonaws.com``); ``asynchronous`` picks the kind
    for an inner transport that is both (``MockTransport``; sync by default). OpenTelemetry is on
    by default (the global providers unless given); ``telemetry=False`` turns it off, and a
    ``TelemetryHook`` in ``hooks`` replaces the default one."""
    fam, is_async = _family_of(inner_transport, asynchronous)
    cls = _public_transports(fam.name)[1 if is_async else 0]
    return cls(inner_transport, policy, hooks=hooks, hosts=hosts, telemetry=telemetry, tracer_provider=tracer_provider,
               meter_provider=meter_provider)


def _public_transports(family: str) -> tuple[type, type]:
    """``(LivenessTransport, AsyncLivenessTransport)`` of the family's public module (imported
    here, when the family is known to be installed)."""
    if family == "httpx":
        from . import httpx

        return httpx.LivenessTransport, httpx.AsyncLivenessTransport
    from . import httpx2

    return httpx2.LivenessTransport, httpx2.AsyncLivenessTransport


# A library's logging habit: nothing reaches stderr unless the application configures logging.
_logging.getLogger("otel_liveness").addHandler(_logging.NullHandler())

__all__ = [
    "AttemptEnded",
    "AttemptOutcome",
    "AttemptStarted",
    "BodyNotReplayable",
    "ConfigurationWarning",
    "CorruptFrame",
    "FrameKind",
    "FrameTooLarge",
    "Heartbeats",
    "InvalidPolicy",
    "LivenessError",
    "MalformedStream",
    "Phase",
    "Policy",
    "ProviderError",
    "RateLimited",
    "RequestEnded",
    "RequestReport",
    "RequestStarted",
    "RetryReason",
    "RetryScheduled",
    "SemanticNotice",
    "StopReason",
    "StreamTruncated",
    "Verdict",
    "WallTimeout",
    "__version__",
    "continuation_message",
    "decode_partial",
    "liveness_error",
    "liveness_policy",
    "liveness_report",
    "recorder_stats",
    "wrap",
]
