"""What a fleet of agents does to a provider that goes down, with and without the retry budget.

Many agents run in one process (asyncio tasks, each with its own SDK client and liveness transport:
the process's retry budget is what they share), each calling the real anthropic SDK in a loop
(``max_retries=0``, a short pause between calls) against the simulated provider on loopback. The
provider is healthy (one attempt in a hundred dead), then fully down for a window -- every attempt
failing one way -- then healthy again::

    python -m benchmarks.bench_fleet_outage                   # every failure mode, budget on and off
    python -m benchmarks.bench_fleet_outage --mode 529 --agents 80 --json

Figures, per failure mode and budget setting:

- **attempts per call during the outage**: provider attempts sent in the window / calls started in it
  (target with the budget: <= 1.2);
- **recovery**: from the provider's return to the first call answered, and to the first retry the
  budget lets through again (target: within one budget window);
- **healthy**: of the calls whose first attempt was dead while the provider was healthy, the share
  that still succeeded, retried invisibly (target: >= 99 %).

Exits non-zero when a target is missed with the budget on. Times are real seconds, scaled down
(the policy's bounds are a few hundred milliseconds; the budget's window 2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

import otel_liveness
from otel_liveness import Policy
from otel_liveness.core.events import AttemptStarted, RequestEnded, RetryScheduled
from otel_liveness.testing import SimulatedProvider, anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.provider import Scenario
from otel_liveness.testing.scripts import anthropic_error, anthropic_status
from otel_liveness.transport._base import BUDGETS

POLICY = Policy(raw_idle_timeout=0.3, first_byte_timeout=0.5, semantic_notice_interval=None, backoff_initial=0.05,
                backoff_max=0.2, max_retry_after=1.0, retry_budget_window=2.0)
OK = [s.Headers(), *anthropic_reply("ok")]
DEAD = [s.Headers(), anthropic_reply()[0], s.Reset()]  # the 1 % dead while healthy: reset after message_start
MODES: dict[str, list[Any]] = {
    "silent": [s.Headers(), anthropic_reply()[0], s.Stall()],  # a raw-idle storm: silent after message_start
    "dead_before_headers": [s.HangBeforeHeaders()],
    "529": [anthropic_status(529, "overloaded_error")],
    "500": [anthropic_status(500, "api_error")],
    "429": [anthropic_status(429, "rate_limit_error", (("retry-after-ms", "50"),))],
    "reset": [s.Reset()],
    "inband_overloaded": [s.Headers(), anthropic_reply()[0], s.Raw(anthropic_error("overloaded_error"))],
}


class Timeline(Scenario):
    """Healthy (every 100th attempt dead) until ``down_at``, the outage's script until ``up_at``, then healthy."""

    def __init__(self, outage: Sequence[Any], down_at: float, up_at: float) -> None:
        super().__init__([OK])
        self.outage = outage
        self.down_at = down_at
        self.up_at = up_at

    def script(self, n: int) -> Sequence[Any]:
        now = time.monotonic()
        if self.down_at <= now < self.up_at:
            return self.outage
        return DEAD if n % 100 == 37 else OK


@dataclass
class Call:
    start: float
    attempts: list[float] = field(default_factory=list)  # when each of its provider attempts was sent
    retries: list[float] = field(default_factory=list)  # when each retry was scheduled
    stop: str | None = None
    end: float = 0.0


@dataclass
class Run:
    calls: dict[int, Call] = field(default_factory=dict)  # by report identity

    def hook(self, event: Any) -> None:
        now = time.monotonic()
        call = self.calls.setdefault(id(event.report), Call(now))
        if isinstance(event, AttemptStarted):
            call.attempts.append(now)
        elif isinstance(event, RetryScheduled):
            call.retries.append(now)
        elif isinstance(event, RequestEnded):
            call.stop, call.end = event.stop_reason.value, now


async def agent(client: anthropic.AsyncAnthropic, stop_at: float, pause: float) -> None:
    while time.monotonic() < stop_at:
        try:
            async with client.messages.stream(model="claude-sim-1", max_tokens=8,
                                              messages=[{"role": "user", "content": "hi"}]) as stream:
                await stream.get_final_text()
        except Exception:  # noqa: BLE001 - a failed call is counted by the hook; the agent goes on, as agents do
            pass
        await asyncio.sleep(pause)


def measure(mode: str, budget: bool, agents: int, healthy: float, outage: float, after: float,
            pause: float) -> dict[str, Any]:
    BUDGETS.clear()
    run = Run()
    policy = POLICY if budget else POLICY.replace(retry_budget=None)
    with SimulatedProvider() as provider:
        t0 = time.monotonic()
        down_at, up_at = t0 + healthy, t0 + healthy + outage
        stop_at = up_at + after
        url = provider.base_url("fleet")
        provider._state.scenarios["fleet"] = Timeline(MODES[mode], down_at, up_at)

        async def main() -> None:
            clients = [anthropic.AsyncAnthropic(
                base_url=url, api_key="sk-ant-sim", max_retries=0,
                http_client=httpx2.AsyncClient(transport=otel_liveness.wrap(
                    httpx2.AsyncHTTPTransport(), policy, hooks=[run.hook], telemetry=False)))
                for _ in range(agents)]
            await asyncio.gather(*(agent(c, stop_at, pause) for c in clients))
            for c in clients:
                await c.close()

        asyncio.run(main())

    calls = [c for c in run.calls.values() if c.stop is not None]
    in_outage = [c for c in calls if down_at <= c.start < up_at]
    sent = sum(1 for c in calls for t in c.attempts if down_at <= t < up_at)
    healthy_hit = [c for c in calls if c.end < down_at and (len(c.attempts) > 1 or c.stop != "completed")]
    answered_after = [c.end for c in calls if c.stop == "completed" and c.end >= up_at]
    retry_after = [t for c in calls for t in c.retries if t >= up_at]
    return {
        "mode": mode,
        "budget": budget,
        "agents": agents,
        "outage_calls": len(in_outage),
        "outage_attempts": sent,
        "attempts_per_call": round(sent / max(1, len(in_outage)), 3),
        "recovery_first_answer_s": round(min(answered_after) - up_at, 3) if answered_after else None,
        "recovery_first_retry_s": round(min(retry_after) - up_at, 3) if retry_after else None,
        "budget_window_s": POLICY.retry_budget_window,
        "healthy_calls": sum(1 for c in calls if c.end < down_at),
        "healthy_calls_hit": len(healthy_hit),
        "healthy_hit_succeeded": round(sum(1 for c in healthy_hit if c.stop == "completed") / max(1, len(healthy_hit)), 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", action="append", choices=sorted(MODES), help="failure mode(s); default: all")
    parser.add_argument("--agents", type=int, default=40)
    parser.add_argument("--healthy", type=float, default=6.0, help="seconds of healthy traffic first")
    parser.add_argument("--outage", type=float, default=8.0, help="seconds the provider is down")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of healthy traffic after")
    parser.add_argument("--pause", type=float, default=0.05, help="an agent's pause between calls")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    status = 0
    for mode in args.mode or list(MODES):
        for budget in (False, True):
            row = measure(mode, budget, args.agents, args.healthy, args.outage, args.after, args.pause)
            rows.append(row)
            if budget:
                missed = []
                if row["attempts_per_call"] > 1.2:
                    missed.append("attempts per call > 1.2")
                first_retry = row["recovery_first_retry_s"]
                if first_retry is not None and first_retry > row["budget_window_s"] + 1.0:
                    missed.append("retries back later than one window")
                if row["healthy_hit_succeeded"] < 0.99:
                    missed.append("healthy calls with a dead attempt: < 99 % succeeded")
                row["missed"] = missed
                status |= bool(missed)
            if not args.json:
                print(f"{mode:20s} budget={'on ' if budget else 'off'} attempts/call in the outage "
                      f"{row['attempts_per_call']:5.2f} ({row['outage_attempts']}/{row['outage_calls']}), "
                      f"first answer after it {row['recovery_first_answer_s']} s, first retry "
                      f"{row['recovery_first_retry_s']} s, healthy calls with a dead attempt "
                      f"{row['healthy_calls_hit']}/{row['healthy_calls']}, succeeded {row['healthy_hit_succeeded']:.1%}"
                      + (f"  MISSED: {', '.join(row['missed'])}" if row.get("missed") else ""), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
