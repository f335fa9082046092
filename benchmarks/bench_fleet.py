"""Fleet capacity, measured: how much one gateway core carries, what it costs, how fast it shows.

On loopback, with the real binaries and the shipped configs and timings:

    load generator (benchmarks/bench_fleet_load.py: the library's own spans, span events and delta
    metrics, recorded from a real run, replayed as --agents agents in --services services)
      --OTLP/HTTP--> agent collector (collector/topology/agent.yaml)
      --OTLP/gRPC--> gateway (collector/config.yaml, GOMAXPROCS=1: one core) --> traces sink (counts only)
    Prometheus 2.42 scrapes the gateway every 15 s with the shipped rules; a second one every 1 s with
    the rules scaled 30x (time to fire, bounded).

Steps of increasing offered load (--rates attempts/s, --step seconds each); after each step the
load stops and the gateway must account for every attempt (its exporter's liveness_attempts_total)
and every span (span metrics) within --drain seconds, with nothing refused or dropped: then the
step is sustained if that took at most --drain-ok seconds (15: one span-metrics flush; more means a
backlog built up). Reported per step: attempts/s with their spans, span events and metric points;
the gateway's CPU (cores) and peak RSS; the agent's CPU; the drain time. Then, at the highest
sustained rate, and at the sized load (half of it): active series for the --agents agents, the
delay from an attempt to its sample in Prometheus (shipped 15 s scrape, and 1 s), and from a raw-idle storm's start to a firing
RawIdleStorm (rules scaled 30x; --shipped-storm also with the shipped rules: up to 15 minutes).

    python -m benchmarks.bench_fleet [--rates 250,500,1000,2000,4000] [--step 20] [--agents 1000]
                                     [--services 10] [--shipped-storm] [--json PATH]

Bounded: every wait has a ceiling; the whole run takes about 5 minutes (2 cores).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
from typing import Any

from benchmarks.bench_fleet_load import MIX, STORM, Load, Sender, Template, record, service_name
from tests.fleet_scale import SHIPPED_AGENT, SHIPPED_GATEWAY, FleetCollector, NullSink, Sampler, agent, gateway, metric_sum
from tests.stack import ROOT, Prometheus, collector_binary, scaled_rules

FLEET = 'job=~"fleet-.*"'


def counted(gw: FleetCollector, name: str = "liveness_attempts_total", where: str = 'job="fleet-') -> float:
    return metric_sum(gw.exporter_metrics, name, where)


def refused(collector: FleetCollector) -> dict[str, float]:
    url = collector.self_metrics
    return {
        "refused_spans": metric_sum(url, "otelcol_receiver_refused_spans_total")
        + metric_sum(url, "otelcol_receiver_refused_spans"),
        "refused_points": metric_sum(url, "otelcol_receiver_refused_metric_points_total")
        + metric_sum(url, "otelcol_receiver_refused_metric_points"),
        "enqueue_failed": sum(metric_sum(url, f"otelcol_exporter_enqueue_failed_{k}{s}")
                              for k in ("spans", "metric_points") for s in ("", "_total")),
        "send_failed": sum(metric_sum(url, f"otelcol_exporter_send_failed_{k}{s}")
                           for k in ("spans", "metric_points") for s in ("", "_total")),
    }


def wait_until(predicate: Any, timeout: float, every: float = 0.25) -> float | None:
    """Seconds until ``predicate()`` held, None if it did not within ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(every)
    return None


def step(template: Template, ag: FleetCollector, gw: FleetCollector, samplers: dict[str, Sampler], rate: float,
         seconds: float, drain: float, agents: int, services: int, totals: dict[str, float],
         drain_ok: float = 15.0) -> dict[str, Any]:
    before_gw, before_ag = refused(gw), refused(ag)
    load = Load(template, [ag.otlp_http], rate=rate, agents=agents, services=services).start()
    t0 = time.monotonic()
    time.sleep(seconds)
    t1 = time.monotonic()
    truth = load.stop(drain=True, timeout=drain)
    t2 = time.monotonic()
    totals["attempts"] += truth.as_dict()["attempt_total"]
    totals["spans"] += truth.spans
    drained = wait_until(lambda: counted(gw) >= totals["attempts"]
                         and counted(gw, "traces_span_metrics_calls_total") >= totals["spans"], drain)
    gw_cores, gw_rss = samplers["gateway"].window(t0, t1)
    ag_cores, ag_rss = samplers["agent"].window(t0, t1)
    after_gw, after_ag = refused(gw), refused(ag)
    lost = {f"gateway_{k}": after_gw[k] - before_gw[k] for k in after_gw}
    lost.update({f"agent_{k}": after_ag[k] - before_ag[k] for k in after_ag})
    sent = truth.as_dict()
    elapsed = t2 - t0
    exact = counted(gw) == totals["attempts"]
    result = {
        "offered_attempts_per_s": rate,
        "attempts_per_s": round(sent["attempt_total"] / elapsed, 1),
        "spans_per_s": round(truth.spans / elapsed, 1),
        "events_per_s": round(truth.events / elapsed, 1),
        "points_per_s": round(truth.points / elapsed, 1),
        "gateway_cores": round(gw_cores, 3), "gateway_peak_rss_mib": round(gw_rss, 1),
        "agent_cores": round(ag_cores, 3), "agent_peak_rss_mib": round(ag_rss, 1),
        "drain_s": None if drained is None else round(drained + (t2 - t1), 1),
        "load_backlog_max": load.backlog_max,
        "failed_posts": sent["failed_trace_posts"] + sent["failed_metric_posts"],
        "counted_exactly": exact, **{k: v for k, v in lost.items() if v},
    }
    # Sustained: the gateway kept up -- once the load stops, what is left is no more than the
    # pipeline's own latency (span metrics flush every 15 s), not a backlog.
    result["sustained"] = bool(drained is not None and result["drain_s"] <= drain_ok and exact and not result["failed_posts"]
                               and not any(lost.values()) and result["attempts_per_s"] >= 0.9 * rate)
    if not exact:  # resynchronise the running total with what the gateway actually has
        totals["attempts"] = counted(gw)
        totals["spans"] = counted(gw, "traces_span_metrics_calls_total")
    return result


def probe_delays(template: Template, ag: FleetCollector, proms: dict[str, Prometheus], n: int, timeout: float,
                 first_service: int = 900_001) -> dict[str, list[float | None]]:
    """Post one unit for a fresh service; time until each Prometheus has all its attempts."""
    delays: dict[str, list[float | None]] = {name: [] for name in proms}
    sender = Sender(ag.otlp_http)
    for i in range(n):
        service = first_service + i
        traces, metrics = template.copy(agent=service, service=service)
        t0 = time.monotonic()
        assert sender.post("/v1/traces", traces) and sender.post("/v1/metrics", metrics)
        job = service_name(service).decode()
        pending = dict(proms)
        while pending and time.monotonic() - t0 < timeout:
            for name, prom in list(pending.items()):
                if prom.value(f'sum(liveness_attempts_total{{job="{job}"}})') == template.attempt_count:
                    delays[name].append(round(time.monotonic() - t0, 1))
                    del pending[name]
            time.sleep(0.2)
        for name in pending:
            delays[name].append(None)
    sender.close()
    return delays


def storm_delay(storm: Template, ag: FleetCollector, prom: Prometheus, rate: float, agents: int, services: int,
                timeout: float) -> float | None:
    load = Load(storm, [ag.otlp_http], rate=rate, agents=agents, services=services).start()
    try:
        return wait_until(lambda: bool(prom.query('ALERTS{alertname="RawIdleStorm",alertstate="firing"}')), timeout, 0.5)
    finally:
        load.stop(drain=False, timeout=10)


def series(gw: FleetCollector, prom: Prometheus) -> dict[str, Any]:
    import urllib.request

    from tests.stack import scrape_families

    with urllib.request.urlopen(gw.exporter_metrics, timeout=10) as response:
        text = response.read().decode()
    fleet_lines = [line for line in text.splitlines() if line and not line.startswith("#") and 'job="fleet-' in line]
    return {"exporter_series_fleet": len(fleet_lines), "exporter_series_all": sum(scrape_families(text).values()),
            "prometheus_series_fleet": prom.value(f"count({{{FLEET}}})"),
            "services": len({line.split('job="', 1)[1].split('"', 1)[0] for line in fleet_lines})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="250,500,1000,2000,4000", help="offered attempts/s, one step each")
    parser.add_argument("--step", type=float, default=20.0, help="seconds per step")
    parser.add_argument("--drain", type=float, default=30.0, help="seconds allowed to account for a step")
    parser.add_argument("--drain-ok", type=float, default=15.0, help="most seconds to account for a sustained step")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--services", type=int, default=10)
    parser.add_argument("--cores", type=int, default=1, help="GOMAXPROCS of the gateway")
    parser.add_argument("--probes", type=int, default=3)
    parser.add_argument("--sized", type=float, help="attempts/s for the delay runs (default: half the sustained rate)")
    parser.add_argument("--shipped-storm", action="store_true", help="also time RawIdleStorm with the shipped rules")
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)

    binary = collector_binary()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    print(f"recording the load units (real transport, demo scenarios); logs in {tmp}", file=sys.stderr)
    template, storm = record(MIX), record(STORM)
    sink = NullSink()
    started: list[Any] = []
    report: dict[str, Any] = {"unit": {"attempts": template.attempt_count, "spans": template.spans,
                                       "events": template.events, "points": template.points},
                              "agents": args.agents, "services": args.services, "gateway_gomaxprocs": args.cores}
    try:
        gw = gateway(binary, tmp, "gateway", sink.url, cores=args.cores, env=SHIPPED_GATEWAY).start()
        started.append(gw)
        ag = agent(binary, tmp, "agent", [gw], env=SHIPPED_AGENT).start()
        started.append(ag)
        (tmp / "shipped").mkdir()
        (tmp / "scaled").mkdir()
        prom = Prometheus(tmp / "shipped", gw.prom_target, ROOT / "collector" / "rules" / "liveness.rules.yml",
                          self_targets=[gw.self_target, ag.self_target], interval="15s").start()
        started.append(prom)
        fast = Prometheus(tmp / "scaled", gw.prom_target, scaled_rules(tmp / "scaled", 30),
                          self_targets=[gw.self_target, ag.self_target], interval="1s").start()
        started.append(fast)
        samplers = {"gateway": Sampler(gw.pid).start(), "agent": Sampler(ag.pid).start()}
        totals = {"attempts": 0.0, "spans": 0.0}
        steps = []
        for rate in (float(r) for r in args.rates.split(",")):
            result = step(template, ag, gw, samplers, rate, args.step, args.drain, args.agents, args.services, totals,
                          args.drain_ok)
            steps.append(result)
            print(json.dumps(result), file=sys.stderr)
            if not result["sustained"]:
                break
        report["steps"] = steps
        sustained = [s for s in steps if s["sustained"]]
        best = max(sustained, key=lambda s: s["attempts_per_s"]) if sustained else None
        report["sustained"] = best
        if best:
            per_core = best["attempts_per_s"] / max(best["gateway_cores"], 1e-9)
            report["attempts_per_gateway_core_second"] = round(per_core, 1)
        report["series"] = series(gw, fast)
        # The sized load: half of what one core sustained (the headroom docs/operations.md sizes with).
        sized = args.sized or (best or steps[0])["offered_attempts_per_s"] * 0.5
        report["delays_at_attempts_per_s"] = sized
        load = Load(template, [ag.otlp_http], rate=sized, agents=args.agents, services=args.services).start()
        try:
            report["attempt_to_sample_s"] = probe_delays(template, ag, {"scrape_15s": prom, "scrape_1s": fast},
                                                         args.probes, timeout=60)
        finally:
            load.stop(drain=False)
        report["storm_to_firing_s"] = {"rules_scaled_30x": storm_delay(storm, ag, fast, sized, args.agents,
                                                                       args.services, timeout=180)}
        if args.shipped_storm:
            report["storm_to_firing_s"]["rules_shipped"] = storm_delay(storm, ag, prom, sized, args.agents,
                                                                       args.services, timeout=900)
        for s in samplers.values():
            s.stop()
    finally:
        for proc in reversed(started):
            proc.stop()
        sink.close()
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if report.get("sustained") else 1


if __name__ == "__main__":
    sys.exit(main())
