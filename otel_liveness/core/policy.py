"""``Policy``: the frozen configuration of the three clocks and the retry budgets."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from .errors import InvalidPolicy

__all__ = ["DEFAULT_RAW_IDLE_TIMEOUT", "Policy", "seconds"]

#: Anthropic sends ``event: ping`` every few seconds while a model thinks, OpenRouter ``:`` comments
#: at a similar cadence. 60 s is several keep-alive periods: a healthy stream never goes that
#: long without a byte, and a dead socket is noticed in a minute rather than at the SDK's 10-minute
#: read timeout.
DEFAULT_RAW_IDLE_TIMEOUT = 60.0


class _HasTotalSeconds(Protocol):
    def total_seconds(self) -> float: ...


Duration = float | int | _HasTotalSeconds


def seconds(value: Duration | None, name: str, *, allow_none: bool = True) -> float | None:
    """Normalise a duration given as float/int seconds or ``timedelta`` to float seconds."""
    if value is None:
        if allow_none:
            return None
        raise InvalidPolicy(name, "is required")
    if isinstance(value, bool):
        raise InvalidPolicy(name, f"expected seconds or a timedelta, got {value!r}")
    if hasattr(value, "total_seconds"):
        value = value.total_seconds()
    if not isinstance(value, (int, float)):
        raise InvalidPolicy(name, f"expected seconds or a timedelta, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise InvalidPolicy(name, f"must be a positive, finite number of seconds, got {value!r}")
    return value


_DURATIONS = (
    "raw_idle_timeout",
    "raw_idle_timeout_no_keepalive",
    "raw_idle_timeout_non_streaming",
    "semantic_notice_interval",
    "semantic_timeout",
    "wall_timeout",
    "max_retry_after",
    "backoff_initial",
    "backoff_max",
)
_REQUIRED = {"max_retry_after", "backoff_initial", "backoff_max"}
PROVIDERS = ("anthropic", "openai-chat", "openai-responses", "sse")


@dataclass(frozen=True)
class Policy:
    """How the transport judges and recovers one request. All durations in seconds (float, int or
    ``timedelta`` accepted; stored as float). ``None`` switches a clock off.

    Clocks (see DESIGN.md, "Three clocks per attempt"):

    - ``raw_idle_timeout``: longest wire silence (no byte, ping or comment) on a streaming attempt
      of a provider that sends keep-alives (Anthropic, generic SSE/OpenRouter).
    - ``raw_idle_timeout_no_keepalive``: the same for providers that are wire-silent while a model
      reasons (OpenAI Chat Completions and Responses): silence is legitimate there, so the bound
      matches the SDKs' own 10-minute read timeout.
    - ``raw_idle_timeout_non_streaming``: for JSON (non-streaming) requests, which are silent until
      complete. Off by default.
    - ``semantic_notice_interval``: cadence of "still thinking" notices while no content arrives.
    - ``semantic_timeout``: fail an attempt after this long without content. Off by default.
    - ``wall_timeout``: budget for the whole request (all attempts and waits). Off by default.

    Retries (the SDKs' rules, applied below the SDK):

    - ``max_attempts``: attempts for transient failures (5xx, 529, 408, 409, connection errors,
      raw silence and in-band errors before content). 3 = the SDKs' 1 + 2 retries.
    - ``max_rate_limit_attempts``: the patient tier's own budget of 429 responses.
    - ``max_retry_after``: cap on a server-supplied delay (Anthropic's SDK honours up to 60 s).
    - ``backoff_initial`` / ``backoff_max``: ``min(initial·2ⁿ, max) × (1 − 0.25·jitter)``.

    Other: ``provider`` forces a wire format instead of choosing by host/path; ``shadow`` observes
    and reports every verdict but enforces nothing; ``max_frame_bytes`` bounds one SSE frame;
    ``capture_dir`` enables the flight recorder (writes captures of failed attempts; holds content,
    so it is off by default); ``mark_exhausted_responses`` sets ``x-should-retry: false`` on a
    final error response so an SDK above does not multiply attempts.
    """

    raw_idle_timeout: float | None = DEFAULT_RAW_IDLE_TIMEOUT
    raw_idle_timeout_no_keepalive: float | None = 600.0
    raw_idle_timeout_non_streaming: float | None = None
    semantic_notice_interval: float | None = 30.0
    semantic_timeout: float | None = None
    wall_timeout: float | None = None
    max_attempts: int = 3
    max_rate_limit_attempts: int = 6
    max_retry_after: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    max_frame_bytes: int = 4 * 1024 * 1024
    max_prefix_bytes: int = 16 * 1024 * 1024
    provider: str | None = None
    shadow: bool = False
    capture_dir: str | None = None
    mark_exhausted_responses: bool = True

    def __post_init__(self) -> None:
        for name in _DURATIONS:
            value = seconds(getattr(self, name), name, allow_none=name not in _REQUIRED)
            object.__setattr__(self, name, value)
        for name in ("max_attempts", "max_rate_limit_attempts", "max_frame_bytes", "max_prefix_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidPolicy(name, f"must be an integer >= 1, got {value!r}")
        if self.backoff_max < self.backoff_initial:
            raise InvalidPolicy("backoff_max", "must be >= backoff_initial")
        if (
            self.semantic_timeout is not None
            and self.semantic_notice_interval is not None
            and self.semantic_timeout < self.semantic_notice_interval
        ):
            raise InvalidPolicy(
                "semantic_timeout",
                f"{self.semantic_timeout}s is shorter than semantic_notice_interval "
                f"({self.semantic_notice_interval}s): no notice could ever precede the failure",
            )
        if self.provider is not None and self.provider not in PROVIDERS:
            raise InvalidPolicy("provider", f"must be one of {', '.join(PROVIDERS)}, got {self.provider!r}")

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` applied (validated)."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], base: Policy | None = None) -> Policy:
        """Read ``OTEL_LIVENESS_<FIELD>`` variables (e.g. ``OTEL_LIVENESS_RAW_IDLE_TIMEOUT=30``).
        ``none``/``off`` switch an optional clock off. Unknown ``OTEL_LIVENESS_*`` names and
        unparsable values raise :class:`InvalidPolicy` naming the variable."""
        base = base or cls()
        known = {f.name: f for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, raw in environ.items():
            if not key.startswith("OTEL_LIVENESS_"):
                continue
            name = key[len("OTEL_LIVENESS_") :].lower()
            if name in _ENV_IGNORED:
                continue
            if name not in known:
                raise InvalidPolicy(key, f"unknown setting (known: {', '.join(sorted(known))})")
            changes[name] = _parse_env(key, name, raw.strip())
        return replace(base, **changes) if changes else base


_ENV_IGNORED = {"enabled", "mode", "hosts"}  # read by the instrumentor, not the policy


def _parse_env(key: str, name: str, raw: str) -> Any:
    lowered = raw.lower()
    if name in ("shadow", "mark_exhausted_responses"):
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise InvalidPolicy(key, f"expected true/false, got {raw!r}")
    if name in ("provider", "capture_dir"):
        return None if lowered in ("", "none", "auto") else raw
    if lowered in ("none", "off", ""):
        if name in _REQUIRED or name.startswith("max_"):
            raise InvalidPolicy(key, "cannot be switched off")
        return None
    try:
        return int(raw) if name.startswith("max_") and name != "max_retry_after" else float(raw)
    except ValueError:
        raise InvalidPolicy(key, f"expected a number, got {raw!r}") from None
