"""Overload is loud, never silent: real binaries on loopback, the load generator of
benchmarks/bench_fleet_load.py (the library's own telemetry replayed as many agents).

1. A gateway (one core, GOMAXPROCS=1, a fixed memory limit) driven at twice what it sustains:
   memory_limiter refuses before the process dies, the agent queues and retries within its bounds,
   and every attempt is either counted or accounted for by a counter that an alert watches
   (CollectorDroppingData fires with its numbers in the summary).
2. One of two gateways killed at the sized load and restarted after OTEL_LIVENESS_DEATH_SECONDS:
   the loss per gateway death, exactly (the load generator's truth against what Prometheus has),
   and CollectorDown fires meanwhile.

Not part of `make test`: it saturates both cores of the machine for about two minutes. Run it with
`make fleet-overload` (OTEL_LIVENESS_FLEET_OVERLOAD=1). The figures in docs/operations.md come from it.
"""

from __future__ import annotations

import os
import pathlib
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.bench_fleet_load import MIX, Load, record

from .fleet_scale import SHIPPED_GATEWAY, FleetCollector, NullSink, Sampler, agent, gateway, metric_sum
from .stack import Prometheus, collector_binary, scaled_rules

pytestmark = pytest.mark.skipif(os.environ.get("OTEL_LIVENESS_FLEET_OVERLOAD") != "1",
                                reason="saturates the machine for minutes: make fleet-overload runs it")

#: What one gateway core sustains (attempts/s), from `make bench-fleet` (docs/operations.md).
CAPACITY = float(os.environ.get("OTEL_LIVENESS_GATEWAY_CAPACITY", "3000"))
#: The gateway's memory ceiling in the overload run (memory_limiter's limit_mib; soft limit 80 %).
LIMIT_MIB = int(os.environ.get("OTEL_LIVENESS_OVERLOAD_LIMIT_MIB", "256"))
DEATH_SECONDS = float(os.environ.get("OTEL_LIVENESS_DEATH_SECONDS", "30"))
#: Prometheus's scrape interval in the death run: the shipped 15 s (what the victim had summed since
#: its last scrape dies with it, so the interval sets the loss).
DEATH_SCRAPE = os.environ.get("OTEL_LIVENESS_DEATH_SCRAPE", "15s")
FLEET = 'job=~"fleet-.*"'
LOUD = ("CollectorDroppingData", "CollectorScrapesFailing", "CollectorDeliveryGap", "CollectorQueueSaturated",
        "CollectorExportFailures")


def attempts(prom: Prometheus, instance: str | None = None, when: float | None = None) -> float:
    sel = FLEET + (f',instance="{instance}"' if instance else "")
    expr = f"sum(liveness_attempts_total{{{sel}}})"
    value = prom.value(expr) if when is None else prom.at(expr, when)
    return value or 0.0


def drops(collector: FleetCollector) -> dict[str, float]:
    url = collector.self_metrics
    out = {name: metric_sum(url, name) for name in (
        "otelcol_receiver_refused_spans", "otelcol_receiver_refused_metric_points",
        "otelcol_receiver_failed_spans", "otelcol_receiver_failed_metric_points",
        "otelcol_exporter_enqueue_failed_spans", "otelcol_exporter_enqueue_failed_metric_points",
        "otelcol_exporter_send_failed_spans", "otelcol_exporter_send_failed_metric_points")}
    return {k: v for k, v in out.items() if v}


def firing(prom: Prometheus, alert: str, **labels: str) -> list[dict[str, Any]]:
    sel = ",".join([f'alertname="{alert}"', 'alertstate="firing"'] + [f'{k}="{v}"' for k, v in labels.items()])
    return prom.query(f"ALERTS{{{sel}}}")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("overload")


@pytest.fixture(scope="module")
def sink() -> Iterator[NullSink]:
    s = NullSink()
    yield s
    s.close()


def test_a_gateway_at_twice_its_capacity_refuses_before_it_dies(tmp: pathlib.Path, sink: NullSink) -> None:
    binary = collector_binary()
    template = record(MIX)
    started: list[Any] = []
    try:
        gw = gateway(binary, tmp, "gateway-overload", sink.url, cores=1,
                     env={**SHIPPED_GATEWAY, "OTELCOL_MEMORY_LIMIT_MIB": str(LIMIT_MIB),
                          "GOMEMLIMIT": f"{int(LIMIT_MIB * 0.9)}MiB"}).start()
        started.append(gw)
        ag = agent(binary, tmp, "agent-overload", [gw], env={"OTELCOL_EXPORT_RETRY_MAX": "60s"}).start()
        started.append(ag)
        (tmp / "p1").mkdir()
        # Rules scaled 10x (rate[5m] -> 30s, for: 5m -> 30s) and 5 s scrapes (timeout 5 s): a gateway
        # saturated on its one core answers its own /metrics slowly -- with 2 s scrapes (2 s timeout)
        # 63 % of them failed and the alert flapped; the shipped 15 s scrapes have a 10 s timeout.
        prom = Prometheus(tmp / "p1", gw.prom_target, scaled_rules(tmp / "p1", 10),
                          self_targets=[gw.self_target, ag.self_target], interval="5s").start()
        started.append(prom)
        sampler = Sampler(gw.pid, every=0.25).start()
        # The agent's per-gateway queues are not in its own metrics (otelcol_exporter_queue_size has
        # only the top-level exporters): its memory shows what waits there.
        agent_sampler = Sampler(ag.pid, every=0.5).start()
        load = Load(template, [ag.otlp_http], rate=2 * CAPACITY, agents=1000, services=10, senders=6).start()
        t0 = time.monotonic()
        alert: list[dict[str, Any]] = []
        rule_alerts: list[dict[str, Any]] = []
        try:
            # Loud: the gateway's own drop counters (CollectorDroppingData), or -- when it is too busy to
            # answer its scrapes, which is what a saturated gateway does -- Prometheus's own view of
            # it (CollectorScrapesFailing), or the agents' side (CollectorDeliveryGap; the agent's
            # bounded queue rejecting: CollectorExportFailures).
            refused = 0.0
            while time.monotonic() - t0 < 200 and not (alert and refused):
                assert gw.proc is not None and gw.proc.poll() is None, "the gateway died"
                refused = sum(metric_sum(gw.self_metrics, f"otelcol_receiver_refused_{k}")
                              for k in ("spans", "metric_points"))
                alert = alert or [a for name in LOUD for a in firing(prom, name)]
                if alert and not rule_alerts:  # the summaries as Prometheus renders them, while the alert fires
                    rule_alerts = [a for a in _rule_alerts(prom) if a["labels"]["alertname"] in LOUD
                                   and a["state"] == "firing"]
                time.sleep(1)
        finally:
            truth = load.stop(drain=False, timeout=10)
        overloaded = time.monotonic() - t0
        assert gw.proc is not None and gw.proc.poll() is None, "the gateway died"
        gw_drops = drops(gw)
        # The memory limiter refused (the receiver's refused counters), and the alert says how much.
        refused = gw_drops.get("otelcol_receiver_refused_spans", 0) + gw_drops.get("otelcol_receiver_refused_metric_points", 0)
        assert refused > 0, gw_drops
        seen = {expr: prom.query(expr) for expr in (
            f'rate(otelcol_receiver_refused_spans{{instance="{gw.self_target}"}}[30s])',
            f'avg_over_time(up{{instance="{gw.self_target}"}}[2m])')}
        assert alert, f"no collector-health alert fired in {overloaded:.0f}s: {gw_drops}; agent {drops(ag)}; {seen}"
        # The process stayed within its budget: the limiter acts on the heap, RSS follows it.
        sampler.stop()
        agent_sampler.stop()
        assert sampler.peak_rss < LIMIT_MIB * 2, sampler.peak_rss
        # After the load: what the agent still holds in its per-gateway queue is delivered late, or
        # dropped once it has waited OTELCOL_EXPORT_RETRY_MAX (60 s here). Wait until the gateway's
        # count stops moving for 20 s.
        sent = truth.as_dict()["attempt_total"]
        stopped = time.monotonic()
        last, still = -1.0, time.monotonic()
        while time.monotonic() - stopped < 300 and time.monotonic() - still < 20:
            now = metric_sum(gw.exporter_metrics, "liveness_attempts_total", 'job="fleet-')
            if now != last:
                last, still = now, time.monotonic()
            time.sleep(1)
        settled = time.monotonic() - stopped - 20
        prom.wait_scrapes(2, timeout=60)
        counted = attempts(prom)
        uncertain = truth.uncertain_attempts  # posted, never answered: the agent may have them
        lost = max(0.0, sent - counted)
        # Nothing counted twice: at most what was accepted plus what was sent without an answer.
        assert counted <= sent + uncertain, (counted, sent, uncertain)
        all_drops = {**{f"gateway:{k}": v for k, v in gw_drops.items()}, **{f"agent:{k}": v for k, v in drops(ag).items()}}
        if lost:  # what the agent dropped after its retries is counted nowhere but seen by the gap alert
            assert any(a["metric"]["alertname"] == "CollectorDeliveryGap" for a in alert) or any(
                "refused" in k or "enqueue" in k for k in all_drops), (all_drops, alert)
        rules_text = (pathlib.Path(__file__).resolve().parent.parent / "collector" / "rules" / "liveness.rules.yml").read_text()
        assert "otelcol_receiver_refused_metric_points" in rules_text
        up = prom.value(f'avg_over_time(up{{instance="{gw.self_target}"}}[{int(overloaded)}s])')
        print(f"\noverload: gateway self-metrics scrapes answered {up}; offered {2 * CAPACITY:.0f} attempts/s "
              f"for {overloaded:.0f}s; load generator accepted "
              f"{sent} attempts ({truth.failed_units} units refused to it, {uncertain} attempts posted without an answer), "
              f"Prometheus counted {counted:.0f} "
              f"(settled {settled:.0f}s after the load stopped) "
              f"(lost {lost:.0f}, {100 * lost / max(sent, 1):.1f} %); gateway peak RSS {sampler.peak_rss:.0f} MiB "
              f"(limit {LIMIT_MIB} MiB); agent peak RSS {agent_sampler.peak_rss:.0f} MiB; counters {all_drops}; "
              f"alerts firing: {sorted({a['metric']['alertname'] for a in alert})}")
        assert rule_alerts, "the firing alert was not in Prometheus's alerts API"
        for a in rule_alerts:  # every one of them says how much
            assert re.search(r"\d", a["annotations"]["summary"]), a
            print(f"{a['labels']['alertname']}: {a['annotations']['summary']}")
    finally:
        for proc in reversed(started):
            proc.stop()


def _rule_alerts(prom: Prometheus) -> list[dict[str, Any]]:
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{prom.port}/api/v1/alerts", timeout=10) as response:
        alerts: list[dict[str, Any]] = json.load(response)["data"]["alerts"]
    return alerts


def test_loss_per_gateway_death_at_the_sized_load(tmp: pathlib.Path, sink: NullSink) -> None:
    binary = collector_binary()
    template = record(MIX)
    started: list[Any] = []
    try:
        gws = [gateway(binary, tmp, f"gateway-{i}", sink.url, cores=1, env=SHIPPED_GATEWAY).start() for i in range(2)]
        started.extend(gws)
        # One agent carries the whole fleet here: its per-gateway queue must hold a dead gateway's
        # whole share (about 1.4 MB/s of OTLP at this rate) for the outage, as a node's agent with
        # its node's share does with the default 64 MiB.
        ag = agent(binary, tmp, "agent", gws, env={"OTELCOL_EXPORT_RETRY_MAX": "300s",
                                                   "OTELCOL_EXPORT_QUEUE_BYTES": str(512 << 20)}).start()
        started.append(ag)
        (tmp / "p2").mkdir()
        prom = Prometheus(tmp / "p2", [g.prom_target for g in gws], scaled_rules(tmp / "p2", 30),
                          self_targets=[*(g.self_target for g in gws), ag.self_target], interval=DEATH_SCRAPE).start()
        started.append(prom)
        rate = CAPACITY / 2  # the sized load: two gateways at a quarter of a core each (docs/operations.md)
        load = Load(template, [ag.otlp_http], rate=rate, agents=1000, services=10).start()
        try:
            prom.wait_scrapes(2, timeout=60)
            time.sleep(10)
            victim = gws[1]
            before_kill = time.time()
            victim.kill()
            killed = time.monotonic()
            time.sleep(DEATH_SECONDS)
            # With 15 s scrapes and evaluations, CollectorDown (for: 4 s scaled) fires 15-45 s after
            # the death: keep the gateway down until it does (at most 75 s).
            down = []
            while not down and time.monotonic() - killed < 75:
                down = firing(prom, "CollectorDown", instance=victim.self_target)
                time.sleep(1)
            downtime = time.monotonic() - killed
            restarted = FleetCollector(binary, victim.log.parent, config=victim.config, name=victim.name,
                                       ports=victim.ports, env=victim.env)
            gws[1] = restarted.start()
            started.append(restarted)
            time.sleep(10)
        finally:
            truth = load.stop(drain=True, timeout=20)
        sent = truth.as_dict()["attempt_total"]
        stopped = time.monotonic()
        # What the agent held for the dead gateway arrives after its restart, once its gRPC channel
        # reconnects (backoff): wait until the gateways' counts stop moving for 20 s.
        last, still = -1.0, time.monotonic()
        while time.monotonic() - stopped < 240 and time.monotonic() - still < 20:
            now = sum(metric_sum(g.exporter_metrics, "liveness_attempts_total", 'job="fleet-') for g in gws)
            if now != last:
                last, still = now, time.monotonic()
            time.sleep(1)
        settled = time.monotonic() - stopped - 20
        prom.wait_scrapes(2, timeout=60)
        # What Prometheus has: gateway 0's count, the victim's last scraped count before its death,
        # and what the restarted victim counted since.
        g0 = attempts(prom, gws[0].prom_target)
        victim_before = attempts(prom, victim.prom_target, before_kill)
        victim_after = attempts(prom, victim.prom_target)
        counted = g0 + victim_before + victim_after
        lost = sent - counted
        assert lost >= 0, (sent, counted)
        assert truth.failed_units == 0  # the agent took everything from the apps meanwhile
        print(f"\ngateway death at {rate:.0f} attempts/s (2 gateways): {sent} attempts sent, {counted:.0f} counted; "
              f"lost {lost:.0f} = {lost / rate:.1f} s of the fleet's traffic ({100 * lost / sent:.2f} % of the run); "
              f"down {downtime:.0f}s, scrape interval {DEATH_SCRAPE}; counts settled {settled:.0f}s after the load "
              f"stopped; CollectorDown firing while down: {bool(down)}")
        # The victim's share (half the load) since its last scrape, and its batch: at most one scrape
        # interval plus the 2 s batch timeout of half the traffic.
        scrape = float(DEATH_SCRAPE.rstrip("s"))
        assert lost <= (scrape + 2 + 1) * rate / 2, "more than the victim's share of one scrape interval lost"
        assert down, "CollectorDown did not fire while the gateway was down"
    finally:
        for proc in reversed(started):
            proc.stop()
