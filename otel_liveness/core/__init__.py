"""The pure core of otel-liveness: SSE scanning, provider classification, the three-clock state
machine, retry decisions and the outcome vocabulary.

Nothing in this package performs I/O, reads a clock or imports httpx or OpenTelemetry: it is fed
bytes and timestamps and returns decisions (``tests/test_core_purity.py`` enforces this).
"""

from .clocks import (
    CONTINUE,
    AttemptClock,
    Continue,
    Notice,
    RawSilenceExpired,
    SemanticTimeoutExpired,
    Verdict,
    WallBudgetExpired,
)
from .outcome import (
    AttemptOutcome,
    AttemptRecord,
    DelaySource,
    FrameKind,
    Phase,
    RequestReport,
    RetryReason,
    StopReason,
)
from .policy import Policy
from .providers import PROFILES, ProviderProfile, StreamFacts, profile_for, select_provider
from .retry import Failure, FailureKind, GiveUp, Reject, Retry, RetryState, Truncate, backoff, decide, retry_after
from .sse import COMMENT, Frame, SSEScanner

__all__ = [
    "COMMENT",
    "CONTINUE",
    "PROFILES",
    "AttemptClock",
    "AttemptOutcome",
    "AttemptRecord",
    "Continue",
    "DelaySource",
    "Failure",
    "FailureKind",
    "Frame",
    "FrameKind",
    "GiveUp",
    "Notice",
    "Phase",
    "Policy",
    "ProviderProfile",
    "RawSilenceExpired",
    "Reject",
    "RequestReport",
    "Retry",
    "RetryReason",
    "RetryState",
    "SSEScanner",
    "SemanticTimeoutExpired",
    "StopReason",
    "StreamFacts",
    "Truncate",
    "Verdict",
    "WallBudgetExpired",
    "backoff",
    "decide",
    "profile_for",
    "retry_after",
    "select_provider",
]
