"""One short-lived agent process for the fleet tests: runs demo scenarios (their provider scripts
and scaled policies, on the embedded simulated provider) through the real transport with the
library's OTLP exporters, flushes, exits, and prints what it did as JSON -- the truth the
collector and Prometheus are checked against.

    python -m tests.fleet_worker --otlp http://127.0.0.1:4318 --scenario dead_socket --rounds 1

The agent SDK is left out on purpose (plain httpx2 with the anthropic wire format): a process
start costs ~0.6 s instead of ~2.5 s, so a test can afford dozens of processes.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from typing import Any

import httpx2

import otel_liveness
from otel_liveness.core.events import AttemptEnded, Heartbeats, RequestEnded, RetryScheduled
from otel_liveness.demo import SCENARIOS, canary_candidates, fleet_failures, scaled_policy
from otel_liveness.telemetry import TelemetryHook
from otel_liveness.telemetry.export import otlp_http
from otel_liveness.testing import Scenario, SimulatedProvider
from otel_liveness.transport._base import BUDGETS


class Truth:
    """What the transport reported, counted in-process (independent of the export path)."""

    def __init__(self) -> None:
        self.attempts: collections.Counter[str] = collections.Counter()
        self.requests: collections.Counter[str] = collections.Counter()
        self.heartbeats = 0
        self.retries = 0

    def __call__(self, event: Any) -> None:
        if isinstance(event, AttemptEnded):
            self.attempts[(event.record.outcome.value if event.record.outcome else "cancelled")] += 1
        elif isinstance(event, RequestEnded):
            self.requests[event.stop_reason.value] += 1
        elif isinstance(event, Heartbeats):
            self.heartbeats += event.count
        elif isinstance(event, RetryScheduled):
            self.retries += 1


def run(otlp: str, service: str, names: list[str], rounds: int, ts: float, model: str,
        export_interval_ms: int, temporality: str = "delta", canary: bool = False) -> dict[str, Any]:
    tracer_provider, meter_provider, span_exporter, metric_exporter = otlp_http(
        otlp, service_name=service, export_interval_ms=export_interval_ms, timeout_s=5.0)
    if temporality == "cumulative":  # an app that set up its own SDK and left the default temporality
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        meter_provider.shutdown()
        meter_provider = MeterProvider(resource=Resource.create({"service.name": service}), metric_readers=[
            PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=otlp.rstrip("/") + "/v1/metrics", timeout=5.0),
                                          export_interval_millis=export_interval_ms)])
    hook = TelemetryHook(tracer_provider, meter_provider, logs=False)
    truth = Truth()
    by_name = {sc.name: sc for sc in SCENARIOS}
    served = 0
    with SimulatedProvider(time_scale=ts) as provider:
        for r in range(rounds):
            for name in names:
                sc = by_name[name]
                key = f"{name}-{r}"
                provider.add(key, Scenario(sc.script(ts)))
                policy = scaled_policy(ts, shadow=False, wall=sc.wall)
                if canary:  # the demo's candidate judged live beside the enforced policy
                    policy = policy.replace(candidates=canary_candidates(ts))
                # Each scenario is its own work (as in the demo): the host's retry budget full for
                # it, so that one long-lived process and many short-lived ones do the same work.
                BUDGETS.clear()
                fleet_failures(provider, sc, policy)  # (provider_down: other agents spent it just before)
                transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, hooks=[truth, hook])
                body = {"model": model, "max_tokens": 64, "stream": True,
                        "messages": [{"role": "user", "content": f"fleet {name}"}]}
                with httpx2.Client(transport=transport, timeout=httpx2.Timeout(600 * ts, connect=5.0)) as client:
                    try:
                        with client.stream("POST", provider.base_url(key) + "/v1/messages", json=body) as response:
                            response.read()
                    except Exception:
                        pass
                served += provider.attempts(key)
    tracer_provider.shutdown()  # flushes spans
    meter_provider.shutdown()  # final collection and export
    return {"service": service, "attempts": dict(truth.attempts), "requests": dict(truth.requests),
            "heartbeats": truth.heartbeats, "retries": truth.retries, "served_attempts": served,
            "export_failures": span_exporter.failures + metric_exporter.failures,
            "ended": time.time()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--otlp", required=True)
    parser.add_argument("--service", default="fleet-agent")
    parser.add_argument("--scenario", action="append", dest="scenarios", required=True)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--model", default="claude-sim-1")
    parser.add_argument("--export-interval-ms", type=int, default=5000)
    parser.add_argument("--temporality", choices=("delta", "cumulative"), default="delta")
    args = parser.parse_args(argv)
    result = run(args.otlp, args.service, args.scenarios, args.rounds, args.time_scale, args.model,
                 args.export_interval_ms, args.temporality)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
