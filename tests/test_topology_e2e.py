"""The two-tier topology as shipped, on loopback: two agents (collector/topology/agent.yaml) and two
gateways (collector/config.yaml), configured only by their documented environment variables, the
real binaries, Debian's Prometheus scraping the gateways' exporters and every collector's own
metrics. Exact counts (spans and the library's metrics), traces whole on one gateway, one gateway
killed and restarted (CollectorDown fires meanwhile), and the stale-series scenario: one process's
metrics moving from one gateway to the other counts once, with no false counter resets."""

from __future__ import annotations

import collections
import pathlib
import re
import time
from collections.abc import Iterator

import pytest

from .otlp_receiver import OTLPReceiver
from .stack import ROOT, Collector, Prometheus, collector_binary, fleet_total, run_fleet, scaled_rules

# A collector stack and fleets of worker processes against alert deadlines: run alone (beside
# sibling workers on a slowed host, storms fell short of the rate their alerts need).
pytestmark = pytest.mark.serial

AGENT = ROOT / "collector" / "topology" / "agent.yaml"


def total(collector: Collector, name: str, job: str | None = None) -> float:
    """Sum of one family's samples in a gateway's exporter (0 when it is down or has none)."""
    try:
        text = collector.scrape()
    except OSError:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and (job is None or f'job="{job}"' in line))


class Topology:
    def __init__(self, tmp: pathlib.Path) -> None:
        binary = collector_binary()
        self.backends = [OTLPReceiver().__enter__() for _ in range(2)]
        self.gateways = [Collector(binary, tmp, name=f"gateway-{i}", env={
            "OTELCOL_TRACES_ENDPOINT": f"http://127.0.0.1:{self.backends[i].port}",
            "OTELCOL_HEALTHY_SAMPLE_PERCENT": "100",  # keep every trace: wholeness is checked on all of them
        }).start() for i in range(2)]
        endpoints = "[" + ", ".join(f"127.0.0.1:{g.ports['grpc']}" for g in self.gateways) + "]"
        self.agents = [Collector(binary, tmp, config=AGENT, name=f"agent-{i}", env={
            "OTELCOL_GATEWAY_ENDPOINTS": endpoints,
        }).start() for i in range(2)]
        self.prom = Prometheus(tmp, [g.prom_target for g in self.gateways], scaled_rules(tmp, 30),
                               self_targets=[c.self_target for c in self.gateways + self.agents]).start()

    def close(self) -> None:
        if hasattr(self, "prom"):
            self.prom.stop()
        for c in getattr(self, "agents", []) + getattr(self, "gateways", []):
            c.stop()
        for b in getattr(self, "backends", []):
            b.__exit__()


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    t = Topology.__new__(Topology)
    try:
        t.__init__(tmp_path_factory.mktemp("topology"))  # type: ignore[misc]
    except BaseException:
        t.close()  # whatever did start
        raise
    try:
        yield t
    finally:
        t.close()


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def attempt_spans(backends: list[OTLPReceiver]) -> dict[str, list[int]]:
    """trace id -> attempt spans per backend."""
    out: dict[str, list[int]] = collections.defaultdict(lambda: [0] * len(backends))
    for i, backend in enumerate(backends):
        for _, span in backend.spans():
            if any(a.key == "liveness.attempt.outcome" for a in span.attributes):
                out[span.trace_id.hex()][i] += 1
    return out


def test_two_agents_two_gateways_exact_counts_and_a_gateway_restart(topo: Topology) -> None:
    g0, g1 = topo.gateways
    mix = [["dead_socket", "inband_overload"], ["rate_limit_storm", "stall_after_partial"], ["exhausted", "long_think"]]
    # Phase 1: short-lived processes through both agents.
    phase1 = [r for agent in topo.agents for r in run_fleet(agent.otlp_http, mix * 2, service="topo", parallel=3)]
    truth1 = fleet_total(phase1)
    wait_for(lambda: total(g0, "liveness_attempts_total", "topo") + total(g1, "liveness_attempts_total", "topo") == truth1,
             what=f"{truth1} attempts across the gateways")
    both = (total(g0, "liveness_attempts_total", "topo"), total(g1, "liveness_attempts_total", "topo"))
    assert min(both) > 0, f"one gateway got nothing: {both}"
    # Spans: every attempt span counted once, by the gateway that got its whole trace.
    calls = 'traces_span_metrics_calls_total'

    def attempt_calls(g: Collector) -> float:
        try:
            text = g.scrape()
        except OSError:
            return 0.0
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(calls + "{") and 'job="topo"' in line and 'liveness_attempt_outcome="' in line)

    wait_for(lambda: attempt_calls(g0) + attempt_calls(g1) == truth1, what="span_metrics counting every attempt span")
    wait_for(lambda: sum(sum(per) for per in attempt_spans(topo.backends).values()) == truth1,
             what="the traces backends receiving every attempt span (tail sampling keeps all here)")
    traces = attempt_spans(topo.backends)
    assert all(min(per) == 0 for per in traces.values()), "a trace was split across gateways"
    assert sum(sum(per) for per in traces.values()) == truth1
    # Phase 2: gateway 1 is killed (its accumulated state is lost), traffic goes on, it comes back
    # on the same ports. The agents hold its share and deliver it: nothing lost, nothing doubled.
    g1_before = total(g1, "liveness_attempts_total", "topo")
    g1_calls_before = attempt_calls(g1)
    g1.kill()
    topo.prom.wait_value('count(ALERTS{alertname="CollectorDown",alertstate="firing",job="otelcol-self",'
                         f'instance="{g1.self_target}"}})', lambda v: v == 1, timeout=60)
    phase2 = [r for agent in topo.agents for r in run_fleet(agent.otlp_http, mix, service="topo", parallel=3)]
    truth2 = fleet_total(phase2)
    topo.gateways[1] = g1 = Collector(g1.binary, g1.log.parent, ports=g1.ports, name="gateway-1", env={
        "OTELCOL_TRACES_ENDPOINT": f"http://127.0.0.1:{topo.backends[1].port}",
        "OTELCOL_HEALTHY_SAMPLE_PERCENT": "100"}).start()
    wait_for(lambda: total(g0, "liveness_attempts_total", "topo") + g1_before + total(g1, "liveness_attempts_total", "topo")
             == truth1 + truth2, timeout=90, what="exact attempts after the restart")
    wait_for(lambda: attempt_calls(g0) + g1_calls_before + attempt_calls(g1) == truth1 + truth2, timeout=60,
             what="exact attempt spans after the restart")
    wait_for(lambda: sum(sum(per) for per in attempt_spans(topo.backends).values()) == truth1 + truth2,
             what="the traces backends receiving every attempt span after the restart")
    # Settled: nothing more arrives late (no duplicates) over three more scrapes of the gateways.
    topo.prom.wait_scrapes(3)
    assert total(g0, "liveness_attempts_total", "topo") + g1_before + total(g1, "liveness_attempts_total", "topo") \
        == truth1 + truth2
    traces = attempt_spans(topo.backends)
    assert all(min(per) == 0 for per in traces.values()), "a trace was split across gateways"
    assert sum(sum(per) for per in traces.values()) == truth1 + truth2
    # Prometheus: gateway 0's series never reset; the alert clears once gateway 1 is back.
    assert topo.prom.value(f'sum(resets(liveness_attempts_total{{job="topo",instance="{g0.prom_target}"}}[5m]))') == 0
    topo.prom.wait_value(f'count(ALERTS{{alertname="CollectorDown",instance="{g1.self_target}"}}) or vector(0)',
                         lambda v: v == 0, timeout=60)
    for c in topo.agents + topo.gateways:  # current component names: no deprecated alias
        assert "is deprecated" not in c.log.read_text(), c.name
    print(f"\ntopology: phase 1 {truth1} attempts split {both}; phase 2 {truth2} with gateway 1 killed and restarted")


def test_a_process_moving_between_gateways_counts_once(topo: Topology) -> None:
    """The stale-series scenario: a process's metrics go to gateway 0, then to gateway 1 (a routing
    change). Each gateway's series carries the gateway's instance, not the process's: the stale one
    stays flat, the new one grows, their sum is the truth and nothing resets."""
    import httpx2
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    import otel_liveness
    from otel_liveness.demo import SCENARIOS, scaled_policy
    from otel_liveness.telemetry import TelemetryHook
    from otel_liveness.telemetry.export import delta_temporality

    g0, g1 = topo.gateways
    resource = Resource.create({"service.name": "mover"})  # one process identity for both exporters
    scenario = next(sc for sc in SCENARIOS if sc.name == "inband_overload")  # 2 attempts per request
    from otel_liveness.testing import Scenario, SimulatedProvider

    def send(provider: SimulatedProvider, gateway: Collector, requests: int) -> int:
        exporter = OTLPMetricExporter(endpoint=gateway.otlp_http + "/v1/metrics",
                                      preferred_temporality=delta_temporality())
        meter_provider = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(exporter, export_interval_millis=300)])
        hook = TelemetryHook(meter_provider=meter_provider, logs=False)
        sent = 0
        for _i in range(requests):
            key = f"move-{gateway.ports['http']}-{time.monotonic_ns()}"
            provider.add(key, Scenario(scenario.script(0.01)))
            transport = otel_liveness.wrap(httpx2.HTTPTransport(), scaled_policy(0.01, shadow=False, wall=None),
                                           hooks=[hook])
            with httpx2.Client(transport=transport, timeout=10) as client:
                with client.stream("POST", provider.base_url(key) + "/v1/messages",
                                   json={"model": "claude-sim-1", "stream": True, "max_tokens": 5,
                                         "messages": [{"role": "user", "content": "hi"}]}) as response:
                    response.read()
            sent += provider.attempts(key)
            time.sleep(0.05)
        meter_provider.shutdown()
        return sent

    def both() -> float:
        return total(g0, "liveness_attempts_total", "mover") + total(g1, "liveness_attempts_total", "mover")

    with SimulatedProvider(time_scale=0.01) as provider:
        # The fleet's series exist on both gateways (other processes feed them): a series' first
        # sample is invisible to increase() once per gateway, which is not what this test is about.
        warm = send(provider, g0, 1) + send(provider, g1, 1)
        wait_for(lambda: both() == warm, what="the warm-up")
        topo.prom.wait_value('count(liveness_attempts_total{job="mover"})', lambda v: v == 4)  # 2 outcomes x 2 gateways
        topo.prom.wait_value('sum(liveness_attempts_total{job="mover"})', lambda v: v == warm)
        topo.prom.wait_scrapes(2)  # the warm-up's last value is in the TSDB before the window starts
        start = time.time()
        sent = send(provider, g0, 40) + send(provider, g1, 40)  # the move
    wait_for(lambda: both() == warm + sent, what="the mover's attempts")
    # A window of 30 s or more: increase() extrapolates up to about a scrape interval at each end.
    time.sleep(max(3.0, start + 30 - time.time()))
    end = time.time()
    window = f"{int(end - start) + 2}s"  # starts 1-2 s before the move, after the warm-up's last change
    prom = topo.prom
    resets = prom.at(f'sum(resets(liveness_attempts_total{{job="mover"}}[{window}]))', end)
    increase = prom.at(f'sum(increase(liveness_attempts_total{{job="mover"}}[{window}]))', end)
    per_gateway = {r["metric"]["instance"] for r in prom.query('liveness_attempts_total{job="mover"}')}
    assert per_gateway == {g0.prom_target, g1.prom_target}
    assert resets == 0
    assert increase == pytest.approx(sent, rel=0.05), (increase, sent)
    # Exactly: each gateway's series grew by what that gateway received, and nothing else.
    grown = prom.at(f'sum(max_over_time(liveness_attempts_total{{job="mover"}}[{window}])'
                    f' - min_over_time(liveness_attempts_total{{job="mover"}}[{window}]))', end)
    assert grown == sent
    assert not re.search(r'instance="[0-9a-f-]{36}"', g0.scrape() + g1.scrape())
    print(f"\nmover: {sent} attempts, increase {increase:.1f}, resets {resets}")
