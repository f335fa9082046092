"""otel-liveness: judge LLM provider streams by wire progress, recover below the transcript, and
make every wait, retry, heartbeat and truncation an OpenTelemetry fact.

Layers (each a subpackage):

- :mod:`otel_liveness.core` -- pure: SSE scanning, classification, clocks, retry decisions;
- :mod:`otel_liveness.tools` -- ``otel-liveness analyze`` and other offline tools on the core.
"""

from .core.errors import (
    AttemptFailed,
    FrameTooLarge,
    InvalidPolicy,
    LivenessError,
    MalformedStream,
    ProviderError,
    RateLimited,
    RawSilence,
    SemanticTimeout,
    StreamTruncated,
    WallTimeout,
)
from .core.outcome import AttemptOutcome, FrameKind, Phase, RequestReport, RetryReason, StopReason
from .core.policy import Policy

__version__ = "0.1.0"

__all__ = [
    "AttemptFailed",
    "AttemptOutcome",
    "FrameKind",
    "FrameTooLarge",
    "InvalidPolicy",
    "LivenessError",
    "MalformedStream",
    "Phase",
    "Policy",
    "ProviderError",
    "RateLimited",
    "RawSilence",
    "RequestReport",
    "RetryReason",
    "SemanticTimeout",
    "StopReason",
    "StreamTruncated",
    "WallTimeout",
    "__version__",
]
