"""The retry budget: how much retrying one provider host takes from this process (sans-I/O: time
is an argument; the lock, when there is one, is the caller's).

Invisible retries are the product's point while a provider is healthy, and a harm while it is
down: a fleet whose every call is retried three times triples the load on a provider that is
already failing. A :class:`HostBudget` -- one per provider host, shared by every transport of the
process -- lets retries through while the host mostly answers, and stops them once failures
outrun the answers. Its rule is gRPC's retry throttling, with two additions:

- **tokens**: the budget holds up to ``capacity`` tokens (full at first). Every attempt that fails
  before content in a way that would be retried costs one; every attempt that completes gives back
  ``ratio`` (0.1: ten answers pay for one failure). A retry is allowed only while the level is
  above half the capacity -- so a host whose failures outrun a tenth of its answers gets no more
  retries, and a provider that is down for everyone gets about one attempt a call;
- **recovery**: a host that answers again is healthy from that answer on; while it is, the level
  also refills with time, the whole capacity in ``window`` seconds -- so retries come back within
  one window of the provider's return, however few calls this process makes (gRPC refills by
  answers alone). A failure ends the healthy spell: a host that keeps failing never refills by
  time, however slowly its calls fail;
- **a wait is everyone's**: a throttling answer (429, 503 or 529, or their in-band forms) pauses
  every retry to the host until the time it gave (``Retry-After``) or, without one, for a pause
  that doubles with each throttling answer in a row (``backoff_initial``, capped at
  ``max_retry_after``) and resets at the next answer -- AWS's adaptive mode's idea: throttling
  slows the host's retry rate for the whole process, not only the request that was told.

A first attempt is never gated: a call always reaches the provider once, and a provider that is
back is seen at once.

Anchors (docs/operations.md, "Retries at fleet scale"): gRPC retry throttling (``maxTokens``,
``tokenRatio``, retries only above half), Envoy's and Finagle's retry budgets (a share of the
requests, with a floor), AWS's retry quota (a cost per retry, refunded by successes) and adaptive
mode (client-side rate limiting on throttling), the SRE book's per-client retry ratio of 10 %.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

__all__ = ["BudgetRule", "HostBudget", "RetryBudgets"]


@dataclass(frozen=True, slots=True)
class BudgetRule:
    """A budget's parameters (``Policy.retry_budget``, ``retry_budget_ratio``, ``retry_budget_window``,
    and the pause's ``backoff_initial`` / ``max_retry_after``)."""

    capacity: float = 10.0
    ratio: float = 0.1
    window: float = 10.0
    pause_initial: float = 0.5
    pause_max: float = 60.0


class HostBudget:
    """One provider host's retry budget (see the module docstring). Every method takes ``now``
    (monotonic seconds) and runs under the budget's lock: the transports of every thread share it."""

    __slots__ = ("_lock", "denied", "granted", "healthy_since", "label", "level", "paused_until", "rule", "throttles",
                 "updated")

    def __init__(self, rule: BudgetRule, now: float, lock: AbstractContextManager[object] | None = None,
                 label: str = "") -> None:
        self.rule = rule
        self.label = label  # the provider's name, for telemetry (gen_ai.provider.name)
        self._lock: AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        self.level = rule.capacity
        self.updated = now
        self.healthy_since: float | None = now  # (full, and nothing failed yet)
        self.paused_until = float("-inf")
        self.throttles = 0  # throttling answers in a row
        self.granted = 0  # retries let through (process totals, for telemetry)
        self.denied = 0  # retries refused

    def _advance(self, now: float) -> None:
        """Refill by time while the host is healthy (answers since its last failure)."""
        if self.healthy_since is not None and now > self.updated:
            since = max(self.updated, self.healthy_since)
            if now > since:
                self.level = min(self.rule.capacity, self.level + (now - since) * self.rule.capacity / self.rule.window)
        self.updated = max(self.updated, now)

    def answered(self, now: float) -> None:
        """An attempt to the host completed: ``ratio`` back, the host healthy, no throttling."""
        with self._lock:
            self._advance(now)
            self.level = min(self.rule.capacity, self.level + self.rule.ratio)
            if self.healthy_since is None:
                self.healthy_since = now
            self.throttles = 0

    def failed(self, now: float) -> None:
        """An attempt to the host failed before content in a way that is retried: one token."""
        with self._lock:
            self._advance(now)
            self.level = max(0.0, self.level - 1.0)
            self.healthy_since = None

    def throttled(self, now: float, told: float | None) -> float:
        """A throttling answer: every retry to the host waits until ``now + told`` (the answer's
        ``Retry-After``, capped by the caller) or, without one, a pause that doubles with each
        throttling answer in a row. Answers when the host's retries may resume."""
        with self._lock:
            rule = self.rule
            pause = told if told is not None else min(rule.pause_max, rule.pause_initial * 2.0 ** min(self.throttles, 30))
            self.throttles += 1
            self.paused_until = max(self.paused_until, now + pause)
            return self.paused_until

    def grant(self, now: float) -> bool:
        """Whether a retry may go: the level is above half the capacity. Counted either way."""
        with self._lock:
            self._advance(now)
            allowed = self.level > self.rule.capacity / 2
            if allowed:
                self.granted += 1
            else:
                self.denied += 1
            return allowed

    def wait(self, now: float) -> float:
        """Seconds until the host's retries may resume (0 when they may now)."""
        with self._lock:
            return max(0.0, self.paused_until - now)

    def fill(self, now: float) -> float:
        """The level as a fraction of the capacity (1.0: full; retries stop at or below 0.5)."""
        with self._lock:
            self._advance(now)
            return self.level / self.rule.capacity


class RetryBudgets:
    """The process's budgets, one per (host, rule): made on first use, kept for the process
    (a handful of provider hosts). ``lock`` guards the map; ``budget_lock`` makes each budget's."""

    def __init__(self, lock: AbstractContextManager[object] | None = None,
                 budget_lock: Callable[[], AbstractContextManager[object]] | None = None) -> None:
        self._lock: AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        self._budget_lock = budget_lock
        self._budgets: dict[tuple[str, BudgetRule], HostBudget] = {}

    def for_host(self, host: str, rule: BudgetRule, now: float, label: str = "") -> HostBudget:
        key = (host.lower(), rule)
        budget = self._budgets.get(key)
        if budget is None:
            with self._lock:
                budget = self._budgets.get(key)
                if budget is None:
                    lock = self._budget_lock() if self._budget_lock is not None else None
                    budget = self._budgets[key] = HostBudget(rule, now, lock, label)
        return budget

    def items(self) -> list[tuple[str, HostBudget]]:
        """``(host, budget)`` for every budget made so far."""
        with self._lock:
            return [(host, budget) for (host, _), budget in self._budgets.items()]

    def clear(self) -> None:
        with self._lock:
            self._budgets.clear()
