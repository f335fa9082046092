"""The pure core of otel-liveness: SSE scanning, provider classification, the liveness clocks, retry
decisions, the outcome vocabulary -- and the engine that owns every decision about a request,
answering the drivers with commands.

Nothing in this package performs I/O, reads a clock or imports httpx or OpenTelemetry: it is fed
bytes and timestamps and returns decisions (``tests/test_core_purity.py`` enforces this).
"""

from .attempt.clocks import (
    CONTINUE,
    AttemptClock,
    Continue,
    Due,
    Notice,
    RawSilenceExpired,
    SemanticTimeoutExpired,
    Terminal,
    WallBudgetExpired,
)
from .attempt.retry import Failure, FailureKind, GiveUp, Reject, Relay, Retry, RetryState, Truncate, backoff, decide, retry_after
from .commands import COMPLETE, READ, Command, Complete, Fail, Read, Release, Reraise, Respond, Send, Sleep
from .errors import IllegalInput
from .memory.caches import CadenceMemory, ExhaustedCache
from .outcome import (
    AttemptOutcome,
    AttemptRecord,
    Completion,
    DelaySource,
    FrameKind,
    NoticeKind,
    Phase,
    RequestReport,
    RetryReason,
    StopReason,
)
from .policy import Policy
from .request.engine import Engine, IOFailure
from .request.facts import RequestFacts
from .request.state import INPUTS, TRANSITIONS, State
from .wire.providers import PROFILES, ProviderProfile, StreamFacts, profile_for, select_provider
from .wire.sse import COMMENT, Frame, SSEScanner

__all__ = [
    "COMMENT",
    "COMPLETE",
    "CONTINUE",
    "INPUTS",
    "PROFILES",
    "READ",
    "TRANSITIONS",
    "AttemptClock",
    "AttemptOutcome",
    "AttemptRecord",
    "CadenceMemory",
    "Command",
    "Complete",
    "Completion",
    "Continue",
    "DelaySource",
    "Due",
    "Engine",
    "ExhaustedCache",
    "Fail",
    "Failure",
    "FailureKind",
    "Frame",
    "FrameKind",
    "GiveUp",
    "IOFailure",
    "IllegalInput",
    "Notice",
    "NoticeKind",
    "Phase",
    "Policy",
    "ProviderProfile",
    "RawSilenceExpired",
    "Read",
    "Reject",
    "Relay",
    "Release",
    "RequestFacts",
    "RequestReport",
    "Reraise",
    "Respond",
    "Retry",
    "RetryReason",
    "RetryState",
    "SSEScanner",
    "SemanticTimeoutExpired",
    "Send",
    "Sleep",
    "State",
    "StopReason",
    "StreamFacts",
    "Terminal",
    "Truncate",
    "WallBudgetExpired",
    "backoff",
    "decide",
    "profile_for",
    "retry_after",
    "select_provider",
]
