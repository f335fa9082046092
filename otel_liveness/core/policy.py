"""``Policy``: the frozen configuration of the three clocks and the retry budgets."""

from __future__ import annotations

import difflib
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final, Literal, Protocol

from .errors import InvalidPolicy
from .memory.budget import BudgetRule
from .wire.sse import DEFAULT_MAX_FRAME_BYTES

__all__ = ["DEFAULT_RAW_IDLE_TIMEOUT", "FIELD_GROUPS", "MAX_CANDIDATES", "SHORTHANDS", "Policy", "parse_candidate",
           "seconds"]

#: Anthropic pings about every 27-30 s while a model thinks (measured in captured streams), the
#: OpenAI Responses API sends a keep-alive about every 30 s. 90 s is three of those periods: one
#: late or lost keep-alive never kills a healthy stream, and a dead socket is still noticed in a
#: minute and a half rather than at the SDKs' 10-minute read timeout. (60 s, the first default,
#: was two periods: a single delayed ping away from a false kill.)
DEFAULT_RAW_IDLE_TIMEOUT = 90.0
_MIB = 1024 * 1024


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
    "retry_budget_window",
    "raw_idle_timeout",
    "raw_idle_timeout_no_keepalive",
    "raw_idle_timeout_non_streaming",
    "semantic_notice_interval",
    "semantic_timeout",
    "wall_timeout",
    "max_retry_after",
    "backoff_initial",
    "backoff_max",
    "first_byte_base",
    "first_byte_per_mib",
    "first_byte_max",
    "raw_idle_floor",
)
_REQUIRED = {"retry_budget_window", "max_retry_after", "backoff_initial", "backoff_max", "first_byte_base", "first_byte_per_mib",
             "first_byte_max", "raw_idle_floor"}


#: How :class:`Policy`'s fields fall into a few concepts: the six most users ever set, then one
#: group per concern (``docs/configuration.md`` has the table; ``tests/test_policy.py`` checks that
#: every field is in exactly one group).
FIELD_GROUPS: Final[Mapping[str, tuple[str, ...]]] = {
    "essentials": ("raw_idle_timeout", "first_byte_timeout", "semantic_notice_interval", "wall_timeout",
                   "max_attempts", "shadow"),
    "bounds": ("raw_idle_timeout_no_keepalive", "raw_idle_timeout_non_streaming", "first_byte_base",
               "first_byte_per_mib", "first_byte_max", "raw_idle_adaptive", "raw_idle_floor", "semantic_timeout"),
    "retries": ("max_rate_limit_attempts", "max_retry_after", "backoff_initial", "backoff_max", "retry_statuses",
                "mark_exhausted_responses", "retry_budget", "retry_budget_ratio", "retry_budget_window"),
    "memory": ("max_frame_bytes", "max_prefix_bytes", "max_partial_bytes", "max_replay_body_bytes"),
    "recording": ("capture_dir", "capture_mode", "capture_sample", "capture_max_bytes", "candidates"),
    "wire": ("provider", "propagate_baggage"),
}


@dataclass(frozen=True)
class Policy:
    """How the transport judges and recovers one request. All durations in seconds (float, int or
    ``timedelta`` accepted; stored as float). ``None`` switches a clock off.

    Six fields are all most users set (:data:`FIELD_GROUPS` ``["essentials"]``): ``raw_idle_timeout``,
    ``first_byte_timeout``, ``semantic_notice_interval``, ``wall_timeout``, ``max_attempts`` and
    ``shadow``. The rest fall into five groups: the clocks' finer bounds, retries, memory, recording
    (the flight recorder and the canary) and the wire (below, and ``FIELD_GROUPS``).

    Clocks (see ``docs/configuration.md``, "The three clocks"):

    - ``raw_idle_timeout``: longest wire silence (no byte, ping or comment) on a streaming attempt
      of a provider that sends keep-alives (Anthropic, generic SSE/OpenRouter).
    - ``raw_idle_timeout_no_keepalive``: the same for providers that are wire-silent while a model
      reasons (OpenAI Chat Completions and Responses): silence is legitimate there, so the bound
      matches the SDKs' own 10-minute read timeout.
    - ``raw_idle_timeout_non_streaming``: for JSON (non-streaming) requests, which are silent until
      complete. Off by default.
    - ``first_byte_timeout``: the bound from sending a streaming request to the first byte of its
      body -- the prompt's prefill, silent on the wire and growing with the prompt. ``"auto"``
      (default): ``min(first_byte_max, first_byte_base + first_byte_per_mib x body MiB)``, and never
      less than the attempt's raw bound; 60 s + 60 s/MiB, capped at 600 s, gives 60 s for a small
      prompt and 300 s for a 4 MiB (about 1M-token) one. A number fixes it; ``None`` applies the
      raw bound from the start instead.
    - ``raw_idle_adaptive`` / ``raw_idle_floor``: learn the raw bound from the heartbeat cadence:
      once heartbeats were seen, ``max(raw_idle_floor, 3 x the largest heartbeat gap)`` on this
      attempt and recent attempts to the same host, never above the fixed bound. Off by default.
    - ``semantic_notice_interval``: cadence of "still thinking" notices while no content arrives.
    - ``semantic_timeout``: fail an attempt after this long without content. Off by default.
    - ``wall_timeout``: budget for the whole request (all attempts and waits). Off by default.

    Retries (the SDKs' rules, applied below the SDK):

    - ``max_attempts``: attempts for transient failures (5xx, 529, 408, 409, connection errors,
      raw silence and in-band errors before content). 3 = the SDKs' 1 + 2 retries.
    - ``max_rate_limit_attempts``: the patient tier's own budget of 429 responses.
    - ``max_retry_after``: cap on a server-supplied delay (Anthropic's SDK honours up to 60 s).
    - ``backoff_initial`` / ``backoff_max``: ``min(initial·2ⁿ, max) × (1 − 0.25·jitter)``.
    - ``retry_budget`` / ``retry_budget_ratio`` / ``retry_budget_window``: the provider host's
      retry budget, shared by every transport of the process (:mod:`.budget`): ``retry_budget``
      tokens (``None``: no budget), one spent by each failure before content, ``ratio`` given back
      by each answer, refilled in ``window`` seconds while the host answers; retries stop at half.

    Other: ``provider`` forces a wire format instead of choosing by host/path; ``shadow`` observes
    and reports every verdict but enforces nothing; ``max_frame_bytes`` bounds one SSE frame
    (and what is held before content); ``max_prefix_bytes`` is the raw head of the released bytes
    a truncation carries, ``max_partial_bytes`` the bound of the content journal the Anthropic
    wires decode a truncation's partial message from (together: what a stream retains for a
    truncation, whatever the reply's length); ``max_replay_body_bytes`` bounds how much of a
    request body that cannot be re-sent as it is (an iterator, a generator, an async iterable, a
    file object) the transport keeps to replay it on a retry -- a larger one is not retried (a
    typed :class:`~.errors.BodyNotReplayable`), 0 never keeps one; ``capture_dir`` enables the
    flight recorder (writes captures of failed attempts; holds content, so it is off by default);
    ``capture_mode``
    ``"full"`` writes the bytes, ``"timing"`` only each frame's time, kind and size (no content),
    for failed attempts and a ``capture_sample`` fraction of completed ones; ``capture_max_bytes``
    caps the directory (the oldest recordings are evicted first);
    ``mark_exhausted_responses`` sets ``x-should-retry: false`` on a final error response so an
    SDK above does not multiply attempts; ``retry_statuses=False`` passes every error status up at
    once, unretried and unmarked, for an SDK (or its middleware) that recovers from statuses itself
    -- the transport keeps what only it sees (wire silence, connection failures, in-band errors);
    ``propagate_baggage`` lets the trace context the transport adds to a request carry the
    application's W3C baggage (off: a provider is a third party, and baggage holds the
    application's own keys -- tenants, users -- so only ``traceparent``/``tracestate`` go).

    The policy canary: ``candidates`` are policies judged live, in shadow, on every attempt this
    one judges (:mod:`.canary`; at most :data:`MAX_CANDIDATES`), each as ``NAME=SPEC`` with SPEC
    as ``otel-liveness whatif --policy`` takes it -- ``"tight=raw=45;loose=raw=180"`` (the
    ``OTEL_LIVENESS_CANDIDATES`` form), a mapping of names to policies or SPECs, or pairs; stored
    as ``((name, Policy), ...)``. They never change what this policy does. Off (``None``) by default.
    """

    raw_idle_timeout: float | None = DEFAULT_RAW_IDLE_TIMEOUT
    raw_idle_timeout_no_keepalive: float | None = 600.0
    raw_idle_timeout_non_streaming: float | None = None
    first_byte_timeout: float | Literal["auto"] | None = "auto"
    first_byte_base: float = 60.0
    first_byte_per_mib: float = 60.0
    first_byte_max: float = 600.0
    raw_idle_adaptive: bool = False
    raw_idle_floor: float = 15.0
    semantic_notice_interval: float | None = 30.0
    semantic_timeout: float | None = None
    wall_timeout: float | None = None
    max_attempts: int = 3
    max_rate_limit_attempts: int = 6
    max_retry_after: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_prefix_bytes: int = 8 * 1024
    max_partial_bytes: int = 1024 * 1024
    max_replay_body_bytes: int = 16 * 1024 * 1024
    provider: str | None = None
    shadow: bool = False
    capture_dir: str | None = None
    capture_mode: Literal["full", "timing"] = "full"
    capture_sample: float = 0.01
    capture_max_bytes: int = 256 * 1024 * 1024
    mark_exhausted_responses: bool = True
    propagate_baggage: bool = False
    retry_statuses: bool = True
    retry_budget: float | None = 10.0
    retry_budget_ratio: float = 0.1
    retry_budget_window: float = 10.0
    candidates: str | Mapping[str, Policy | str] | tuple[tuple[str, Policy], ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", _candidates(self.candidates))
        if self.first_byte_timeout != "auto":
            if isinstance(self.first_byte_timeout, str):
                raise InvalidPolicy("first_byte_timeout", f"expected seconds, a timedelta, 'auto' (scaled by the "
                                    f"prompt's size) or None, got {self.first_byte_timeout!r}")
            object.__setattr__(self, "first_byte_timeout", seconds(self.first_byte_timeout, "first_byte_timeout"))
        for name in _DURATIONS:
            value = seconds(getattr(self, name), name, allow_none=name not in _REQUIRED)
            object.__setattr__(self, name, value)
        for name in ("max_attempts", "max_rate_limit_attempts", "max_frame_bytes", "max_prefix_bytes",
                     "max_partial_bytes", "capture_max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidPolicy(name, f"must be an integer >= 1, got {value!r}")
        value = self.max_replay_body_bytes
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidPolicy("max_replay_body_bytes", f"must be an integer >= 0, got {value!r}")
        if self.retry_budget is not None:
            budget = self.retry_budget
            if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget) or budget < 1:
                raise InvalidPolicy("retry_budget", f"must be a number of tokens >= 1 (or None: no budget), got {budget!r}")
            object.__setattr__(self, "retry_budget", float(budget))
        ratio = self.retry_budget_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio <= 1.0:
            raise InvalidPolicy("retry_budget_ratio", f"must be a fraction in [0, 1], got {ratio!r}")
        object.__setattr__(self, "retry_budget_ratio", float(ratio))
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
        if self.capture_mode not in ("full", "timing"):
            raise InvalidPolicy("capture_mode", f"must be 'full' or 'timing', got {self.capture_mode!r}")
        sample = self.capture_sample
        if isinstance(sample, bool) or not isinstance(sample, (int, float)) or not 0.0 <= sample <= 1.0:
            raise InvalidPolicy("capture_sample", f"must be a fraction in [0, 1], got {sample!r}")
        object.__setattr__(self, "capture_sample", float(sample))
        if self.first_byte_max < self.first_byte_base:
            raise InvalidPolicy("first_byte_max", "must be >= first_byte_base")
        for name in ("raw_idle_adaptive", "propagate_baggage", "retry_statuses"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidPolicy(name, f"expected true or false, got {getattr(self, name)!r}")
        if self.provider is not None:
            from .wire.providers import PROFILES

            if self.provider not in PROFILES:
                raise InvalidPolicy("provider", f"must be one of {', '.join(PROFILES)}, got {self.provider!r}")

    def first_byte_bound(self, body_size: int | None, raw_bound: float | None) -> float | None:
        """The first-byte bound of a streaming attempt whose request body is ``body_size`` bytes
        (``None``: unknown, taken as large), given the attempt's raw bound."""
        configured = self.first_byte_timeout
        if configured is None:
            return None
        if configured == "auto":
            if body_size is None:
                bound = self.first_byte_max
            else:
                bound = min(self.first_byte_max, self.first_byte_base + self.first_byte_per_mib * body_size / _MIB)
            return bound if raw_bound is None else max(bound, raw_bound)
        return float(configured)

    @property
    def candidate_policies(self) -> tuple[tuple[str, Policy], ...]:
        """``candidates`` as stored: ``((name, Policy), ...)``, empty without."""
        return typing.cast("tuple[tuple[str, Policy], ...]", self.candidates or ())

    def budget_rule(self) -> BudgetRule | None:
        """The retry budget's rule (``None``: no budget)."""
        if self.retry_budget is None:
            return None
        return BudgetRule(self.retry_budget, self.retry_budget_ratio, self.retry_budget_window, self.backoff_initial,
                          self.max_retry_after)

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` applied (validated); the fields set in code are this policy's
        and the changed ones (:attr:`given`)."""
        copy = replace(self, **changes)
        object.__setattr__(copy, "_given", self.given | frozenset(changes))
        return copy

    @property
    def given(self) -> frozenset[str]:
        """The fields set in code -- passed to the constructor or to :meth:`replace` -- which the
        ``OTEL_LIVENESS_*`` variables do not override (:meth:`from_env`, with ``base``)."""
        return typing.cast("frozenset[str]", getattr(self, "_given", frozenset()))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, base: Policy | None = None, *,
                 on_invalid: Callable[[str, str, InvalidPolicy], None] | None = None) -> Policy:
        """Read ``OTEL_LIVENESS_<FIELD>`` variables (e.g. ``OTEL_LIVENESS_RAW_IDLE_TIMEOUT=30``) from
        ``environ`` (default: the process's environment) over ``base`` (default: the defaults).
        ``none``/``off`` switch an optional clock off. An unknown ``OTEL_LIVENESS_*`` name or an
        unparsable value raises :class:`InvalidPolicy` naming the variable -- or, with
        ``on_invalid``, is reported to it as ``(variable, value, error)`` and left out (what the
        transports and the instrumentor do: a bad variable never stops them, or another
        instrumentor, from loading)."""
        if environ is None:
            import os

            environ = os.environ
        base = base or cls()
        given = base.given
        known = {f.name for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, raw in environ.items():
            if not key.startswith("OTEL_LIVENESS_"):
                continue
            name = key[len("OTEL_LIVENESS_") :].lower()
            if name in _ENV_IGNORED:
                continue
            try:
                if name == "mode":  # the mode: shadow observes, enforce acts (the policy's shadow)
                    name = "shadow"
                    mode = raw.strip().lower()
                    if mode not in ("shadow", "enforce"):
                        raise InvalidPolicy(key, f"expected shadow or enforce, got {raw!r}")
                    value: Any = mode == "shadow"
                    shadow = environ.get("OTEL_LIVENESS_SHADOW")
                    if shadow is not None and shadow.strip().lower() in (_TRUE if not value else _FALSE):
                        raise InvalidPolicy(key, f"{raw!r} contradicts OTEL_LIVENESS_SHADOW={shadow!r}, which is used")
                    if shadow is not None:
                        continue  # (the same, said twice)
                elif name not in known:
                    close = difflib.get_close_matches(name, [*known, *_ENV_IGNORED, "mode"], 1, 0.75)
                    hint = f"did you mean OTEL_LIVENESS_{close[0].upper()}?" if close else "docs/configuration.md lists them"
                    raise InvalidPolicy(key, f"unknown setting; {hint}")
                else:
                    value = _parse_env(key, name, raw.strip())
                if name in given:
                    continue  # set in code: the code's value stands (OpenTelemetry's precedence)
                if on_invalid is not None:
                    replace(base, **{name: value})  # (validated alone: one bad value leaves the rest)
            except InvalidPolicy as exc:
                if on_invalid is None:
                    raise
                on_invalid(key, raw, exc)
                continue
            changes[name] = value
        if not changes:
            return base
        try:
            merged = replace(base, **changes)
        except InvalidPolicy as exc:  # values valid alone, not together (a timeout below its notice interval)
            if on_invalid is None:
                raise
            on_invalid(", ".join(f"OTEL_LIVENESS_{n.upper()}" for n in changes), "", exc)
            return base
        object.__setattr__(merged, "_given", given)  # (what the environment set is still not code's)
        return merged


def _track_given(init: Callable[..., None]) -> Callable[..., None]:
    """The dataclass constructor, noting which fields the caller set (:attr:`Policy.given`)."""
    names = tuple(f.name for f in fields(Policy))

    @functools.wraps(init)
    def __init__(self: Policy, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        object.__setattr__(self, "_given", frozenset(names[: len(args)]) | frozenset(kwargs))

    return __init__


setattr(Policy, "__init__", _track_given(Policy.__init__))  # noqa: B010 - (mypy: a method is not assignable)


#: At most this many candidate policies: each is one more replay of every attempt at its end (CPU
#: per attempt grows with it) and one more set of series on every canary metric; four is enough to
#: bracket a bound (tighter, looser) and try one more knob, and keeps the dashboard readable.
MAX_CANDIDATES = 4
#: Short names accepted in a candidate's (and ``whatif --policy``'s) SPEC.
SHORTHANDS = {
    "raw": "raw_idle_timeout",
    "raw_no_keepalive": "raw_idle_timeout_no_keepalive",
    "first_byte": "first_byte_timeout",
    "semantic": "semantic_timeout",
    "wall": "wall_timeout",
    "notice": "semantic_notice_interval",
}
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")


def parse_candidate(text: str) -> tuple[str, Policy]:
    """``NAME=SPEC`` -> (name, policy). SPEC: comma-separated ``field=value`` with the
    :class:`Policy` field names (or :data:`SHORTHANDS`), values as in ``OTEL_LIVENESS_*``
    (seconds, ``off``, ``auto``), over the defaults; empty or ``defaults``: the defaults.
    A ``ValueError`` names what is wrong."""
    name, eq, spec = text.partition("=")
    name = name.strip()
    if not eq or not name:
        raise ValueError(f"{text!r}: expected NAME=SPEC, e.g. tight=raw=45,first_byte_timeout=auto")
    known = {f.name for f in fields(Policy)} - {"candidates"}
    env: dict[str, str] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item or item == "defaults":
            continue
        key, eq, value = item.partition("=")
        key = SHORTHANDS.get(key.strip(), key.strip())
        if not eq:
            raise ValueError(f"policy {name}: {item!r} is not field=value")
        if key not in known:
            raise ValueError(f"policy {name}: unknown field {key!r} (fields: {', '.join(sorted(known))}; "
                             f"short: {', '.join(SHORTHANDS)})")
        env["OTEL_LIVENESS_" + key.upper()] = value.strip()
    try:
        return name, Policy.from_env(env)
    except InvalidPolicy as exc:
        raise ValueError(f"policy {name}: {str(exc).removeprefix('OTEL_LIVENESS_').lower()}") from None


def _candidates(value: Any) -> tuple[tuple[str, Policy], ...] | None:
    """``Policy.candidates`` as ``((name, Policy), ...)`` (validated), ``None`` when there are none."""
    if value is None:
        return None
    pairs: list[tuple[str, Policy]] = []
    try:
        if isinstance(value, str):
            pairs = [parse_candidate(item) for item in value.split(";") if item.strip()]
        elif isinstance(value, Mapping):
            pairs = [parse_candidate(f"{k}={v}") if isinstance(v, str) else (k, v) for k, v in value.items()]
        else:
            for item in value:
                pairs.append(parse_candidate(item) if isinstance(item, str) else tuple(item))
    except ValueError as exc:
        raise InvalidPolicy("candidates", str(exc)) from None
    except TypeError:
        raise InvalidPolicy("candidates", f"expected NAME=SPEC;NAME=SPEC, a mapping or pairs, got {value!r}") from None
    names = set()
    for pair in pairs:
        if len(pair) != 2 or not isinstance(pair[0], str) or not isinstance(pair[1], Policy):
            raise InvalidPolicy("candidates", f"expected (name, Policy), got {pair!r}")
        name, policy = pair
        if not _NAME.fullmatch(name):
            raise InvalidPolicy("candidates", f"name {name!r}: 1-32 of A-Z a-z 0-9 _ . - (it is a metric attribute)")
        if name in names:
            raise InvalidPolicy("candidates", f"name {name!r} given twice")
        if policy.candidates:
            raise InvalidPolicy("candidates", f"candidate {name!r} has candidates of its own")
        names.add(name)
    if len(pairs) > MAX_CANDIDATES:
        raise InvalidPolicy("candidates", f"{len(pairs)} candidates; at most {MAX_CANDIDATES} "
                            "(each is one more replay of every attempt)")
    return tuple(pairs) or None


_ENV_IGNORED = {"hosts", "pure"}  # read by the transports' host filter (and the core: pure), not the policy


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_UNSET = ("", "none", "off")


@functools.cache
def _field_types() -> dict[str, tuple[tuple[type, ...], tuple[str, ...], bool]]:
    """Each field's (plain types, literal values, optional) -- read from its annotation."""
    out = {}
    for name, hint in typing.get_type_hints(Policy).items():
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        literals = tuple(v for a in args if typing.get_origin(a) is Literal for v in typing.get_args(a))
        plain = tuple(a for a in args if a in (bool, int, float, str))
        out[name] = (plain, literals, type(None) in args)
    return out


def _parse_env(key: str, name: str, raw: str) -> Any:
    """A variable's value as its field's annotation types it: ``true``/``false`` for a flag, an
    integer, a number, one of a ``Literal``'s values, or text; ``none``/``off`` (or empty) for a
    field that may be ``None`` (for text: also ``auto``, the automatic choice)."""
    plain, literals, optional = _field_types()[name]
    lowered = raw.lower()
    if lowered in literals:
        return lowered
    if bool in plain:
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        raise InvalidPolicy(key, f"expected true/false, got {raw!r}")
    if lowered in _UNSET or (str in plain and lowered == "auto"):
        if optional:
            return None
        raise InvalidPolicy(key, "cannot be switched off")
    if str in plain:
        return raw
    for kind in (int, float):
        if kind in plain:
            try:
                return kind(raw)
            except ValueError:
                raise InvalidPolicy(key, f"expected {'an integer' if kind is int else 'a number'}, got {raw!r}") from None
    raise InvalidPolicy(key, f"expected one of {', '.join(literals)}, got {raw!r}")
