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
from .core.anthropic import continuation_message, decode_partial
from .core.errors import (
    BodyNotReplayable,
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
from .transport._overrides import liveness_policy
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
    """Wrap an httpx or httpx2 transport (sync or async), with OpenTelemetry on by default (the
    global providers unless given; ``telemetry=False`` turns it off); see
    :func:`otel_liveness.transport.wrap`."""
    from ._public import public_classes
    from .transport import family_of

    family, is_async = family_of(inner_transport, asynchronous)
    cls = public_classes(family.name)[1 if is_async else 0]
    return cls(inner_transport, policy, hooks=hooks, hosts=hosts, telemetry=telemetry, tracer_provider=tracer_provider,
               meter_provider=meter_provider)

# A library's logging habit: nothing reaches stderr unless the application configures logging.
_logging.getLogger("otel_liveness").addHandler(_logging.NullHandler())

__all__ = [
    "AttemptEnded",
    "AttemptOutcome",
    "AttemptStarted",
    "BodyNotReplayable",
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
    "recorder_stats",
    "wrap",
]
