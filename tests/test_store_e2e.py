"""The scaled-out shape, end to end on loopback with real binaries: short-lived agent processes
(tests/fleet_worker.py) -> an agent collector (collector/topology/agent.yaml) -> two gateways
(collector/config.yaml + collector/store/gateway-remote-write.yaml) remote-writing into Thanos
Receive (two nodes, one hashring) -> Thanos Query -> Thanos Ruler evaluating the shipped rules
(durations scaled 10x: see SCALE). Debian's Prometheus scrapes the same gateways with the same
rules: the single-Prometheus shape, side by side, as the reference.

- a storm of short-lived dead_socket processes fires RawIdleStorm through the store, with the
  provider, model, a summary with numbers and an absolute runbook link;
- the dashboards' queries return the same values from Thanos Query as from Prometheus.

Thanos is built by `make store` (collector/store/build-thanos.sh, cached by version); when it cannot
be built here the module is skipped with the build's error.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.bench_fleet_load import Load, record
from dashboards.panels import PANELS, substitute

from .fleet_scale import FleetCollector, NullSink, agent, gateway
from .stack import Prometheus, collector_binary, fleet_total, run_fleet, scaled_rules
from .store import STORE_LABELS, StoreUnavailable, Thanos, thanos_binary

# Two Receive nodes, Query, Ruler, two gateways, an agent and Prometheus at once: alone, not beside
# three sibling workers on a 2-core host.
pytestmark = pytest.mark.serial

MIX = ["dead_socket", "inband_overload", "rate_limit_storm", "long_think", "stall_after_partial", "exhausted",
       "wall_budget", "provider_down"]
RUNBOOK = "https://runbooks.example.test/otel-liveness/operations.md"
# Rules 2m -> 12 s, 10m -> 60 s. Remote write gives a series a sample only when data comes, and a
# rate() window needs two. The storm's processes reach each gateway about every 5 s on a loaded
# 2-core host (a CI run: median gap 5.0 s, p90 9.6 s, max 24 s per gateway): a 4 s window (30x)
# held two samples 28 % of the time there, and RawIdleStorm pended and reset for 300 s; a 12 s
# window held two 98 % of the time. (Scraping repeats the last value each second, so
# tests/test_fleet_e2e.py keeps 30x.)
SCALE = 10


class ScaledOut:
    def __init__(self, tmp: pathlib.Path) -> None:
        try:
            thanos = thanos_binary()
        except StoreUnavailable as exc:
            pytest.skip(f"the scaled-out store (Thanos) cannot be built here: {exc}")
        binary = collector_binary()
        rules = scaled_rules(tmp, SCALE)
        self.sink = NullSink()
        self.thanos = Thanos(thanos, tmp, rules, runbook_base_url=RUNBOOK).start()
        self.gateways: list[FleetCollector] = []
        for i, url in enumerate(self.thanos.remote_write_urls):
            self.gateways.append(gateway(binary, tmp, f"gateway-{i}", self.sink.url, remote_write=url).start())
        self.agent = agent(binary, tmp, "agent", self.gateways).start()
        self.prom = Prometheus(tmp, [g.prom_target for g in self.gateways], rules,
                               self_targets=[c.self_target for c in [*self.gateways, self.agent]],
                               runbook_base_url=RUNBOOK).start()

    def close(self) -> None:
        for name in ("prom", "agent"):
            if hasattr(self, name):
                getattr(self, name).stop()
        for g in getattr(self, "gateways", []):
            g.stop()
        if hasattr(self, "thanos"):
            self.thanos.stop()
        if hasattr(self, "sink"):
            self.sink.close()


@pytest.fixture(scope="module")
def shape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaledOut]:
    s = ScaledOut.__new__(ScaledOut)
    try:
        s.__init__(tmp_path_factory.mktemp("store"))  # type: ignore[misc]
    except BaseException:
        s.close()
        raise
    try:
        yield s
    finally:
        s.close()


def firing(store: Prometheus) -> bool:
    return bool(store.query('ALERTS{alertname="RawIdleStorm",alertstate="firing",gen_ai_provider_name="anthropic",'
                            'gen_ai_request_model="claude-sim-1"}'))


def test_storm_of_short_lived_agents_fires_raw_idle_storm_through_the_store(shape: ScaledOut) -> None:
    storm: list[dict[str, Any]] = []
    done = threading.Event()

    def storm_loop() -> None:
        while not done.is_set() and len(storm) < 2000:
            storm.extend(run_fleet(shape.agent.otlp_http, [["dead_socket"]] * 4, service="storm-agent", parallel=2,
                                   timeout=300))

    start = time.time()
    fired: dict[str, float] = {}
    alerts: list[dict[str, Any]] = []
    thread = threading.Thread(target=storm_loop, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(fired) < 2:
            for name, store in (("thanos", shape.thanos), ("prometheus", shape.prom)):
                if name not in fired and firing(store):
                    fired[name] = time.time() - start
            if "thanos" in fired and not alerts:  # the Ruler's view while the storm still blows
                alerts = [a for a in shape.thanos.rule_alerts()
                          if a["labels"]["alertname"] == "RawIdleStorm" and a["state"] == "firing"]
            time.sleep(0.5)
    finally:
        done.set()
        thread.join(timeout=300)
    assert "thanos" in fired, "RawIdleStorm did not fire through Thanos within 300 s"
    assert fleet_total(storm, outcome="raw_silence") * 3 == fleet_total(storm) > 0
    # The Ruler's alert: labels, the summary's numbers (its query() goes through Thanos Query) and
    # the absolute runbook link from the Ruler's external label.
    assert alerts, "the Ruler's API did not show the firing alert while the storm went on"
    alert = alerts[0]
    assert alert["labels"]["gen_ai_provider_name"] == "anthropic"
    assert alert["labels"]["gen_ai_request_model"] == "claude-sim-1"
    assert alert["labels"]["severity"] == "page"
    summary = alert["annotations"]["summary"]
    assert re.match(r"anthropic claude-sim-1: [\d.]+% of attempts died of raw silence over 10m, at [\d.]+ attempts/min$",
                    summary), summary
    assert alert["annotations"]["runbook_url"] == RUNBOOK + "#rawidlestorm"
    # Both gateways wrote, and the hashring spread the series over both Receive nodes.
    per_node = shape.thanos.series_per_receive()
    assert min(per_node) > 0, per_node
    print(f"\nRawIdleStorm through Thanos: firing {fired['thanos']:.1f}s after the storm's first process "
          f"(Prometheus: {fired.get('prometheus', math.nan):.1f}s); {len(storm)} storm processes; "
          f"series per Receive node {per_node}; summary {summary!r}")


def vector(store: Prometheus, expr: str, when: float) -> dict[tuple[tuple[str, str], ...], float]:
    """An instant query's result keyed by its labels, without the store's own labels; ``le`` as a
    number (the remote-write exporter writes le="1800", the prometheus exporter le="1800.0")."""
    url = f"http://127.0.0.1:{store.port}/api/v1/query?" + urllib.parse.urlencode(
        {"query": expr, "time": when, "dedup": "true", "partial_response": "false"})
    with urllib.request.urlopen(url, timeout=10) as response:
        result = json.load(response)["data"]["result"]
    out = {}
    for r in result:
        labels = tuple(sorted((k, str(float(v)) if k == "le" else v) for k, v in r["metric"].items()
                              if k not in STORE_LABELS))
        out[labels] = float(r["value"][1])
    return out


def test_dashboard_queries_return_the_same_values_as_on_prometheus(shape: ScaledOut) -> None:
    """Steady traffic (the load generator: the library's own telemetry, recorded once, replayed as
    200 agents), then every dashboard query at the same instant on both stores, over a window
    inside the traffic. Counters are compared exactly once the traffic has settled."""
    prom, thanos = shape.prom, shape.thanos
    template = record(MIX, canary=True)  # the Candidates row's series too
    rate = 60.0  # attempts/s: every series of the vocabulary gets a delta in most gateway batches
    load = Load(template, [shape.agent.otlp_http], rate=rate, agents=200, services=2, service_offset=500).start()
    start = time.time()
    try:
        time.sleep(35)
        when = time.time() - 3  # both stores have every sample up to here (batch 200 ms, scrape 1 s)
    finally:
        truth = load.stop()
    window = "20s"  # inside the traffic: [start + 12 s, start + 32 s]
    assert when - 20 > start + 10
    compared = {}
    for spec in PANELS:
        for q in spec.queries:
            expr = substitute(q.expr, window)
            compared[expr] = (vector(prom, expr, when), vector(thanos, expr, when))
    report = []
    for expr, (a, b) in compared.items():
        assert a, f"no data on Prometheus: {expr}"
        assert set(a) == set(b), (expr, set(a) ^ set(b))
        for key in a:
            if math.isnan(a[key]):
                assert math.isnan(b[key]), (expr, key, a[key], b[key])
                continue
            report.append(abs(b[key] - a[key]) / max(abs(a[key]), 1e-12))
            assert b[key] == pytest.approx(a[key], rel=0.05, abs=1e-9), (expr, dict(key), a[key], b[key])
    # Settled: the same counts in both, exactly, and what the load generator had accepted.
    jobs = 'job=~"fleet-00050[01]"'
    sent = truth.as_dict()["attempt_total"]
    for store in (prom, thanos):
        store.wait_value(f"sum(liveness_attempts_total{{{jobs}}})", lambda v: v == sent, timeout=60)
    by_outcome = f"sum by (liveness_attempt_outcome) (liveness_attempts_total{{{jobs}}})"
    assert vector(prom, by_outcome, time.time()) == vector(thanos, by_outcome, time.time())
    print(f"\n{len(compared)} dashboard queries, {len(report)} values: largest relative difference "
          f"{max(report):.4f}, median {sorted(report)[len(report) // 2]:.4f}; {sent} attempts counted exactly in both")


def test_compose_scaled_out_profile_matches_the_store_configs() -> None:
    """docker-compose.yml's scaled-out profile: the Thanos release the tests build, the hashring the
    Receive nodes announce, the gateway overlay writing to a Receive node, the shipped rules."""
    import yaml

    root = pathlib.Path(__file__).resolve().parent.parent
    services = yaml.safe_load((root / "docker-compose.yml").read_text())["services"]
    script = (root / "collector" / "store" / "build-thanos.sh").read_text()
    version = re.search(r'THANOS_VERSION:-(v[0-9.]+)', script).group(1)  # type: ignore[union-attr]
    thanos = {name: s for name, s in services.items() if name.startswith("thanos-")}
    assert set(thanos) == {"thanos-receive-0", "thanos-receive-1", "thanos-query", "thanos-rule"}
    assert all(s["image"] == f"quay.io/thanos/thanos:{version}" and s["profiles"] == ["scaled-out"]
               for s in thanos.values())
    ring = json.loads((root / "collector" / "store" / "hashring.json").read_text())[0]["endpoints"]
    local = [next(a.split("=", 1)[1] for a in services[f"thanos-receive-{i}"]["command"]
                  if a.startswith("--receive.local-endpoint=")) for i in range(2)]
    assert ring == local
    query_endpoints = [a.split("=", 1)[1] for a in services["thanos-query"]["command"] if a.startswith("--endpoint=")]
    assert set(query_endpoints) == {*ring, "thanos-rule:10901"}
    gw = services["otelcol-scaled"]
    assert gw["command"] == ["--config=/etc/otelcol/config.yaml", "--config=/etc/otelcol/gateway-remote-write.yaml"]
    assert gw["environment"]["OTELCOL_GATEWAY_INSTANCE"]
    host, port = gw["environment"]["OTELCOL_REMOTE_WRITE_URL"].split("//", 1)[1].split("/", 1)[0].split(":")
    assert host in thanos and f"--remote-write.address=0.0.0.0:{port}" in thanos[host]["command"]
    rule = services["thanos-rule"]
    assert "./collector/rules/liveness.rules.yml:/etc/thanos/rules/liveness.rules.yml:ro" in rule["volumes"]
    assert all(thanos[f"thanos-receive-{i}"]["restart"] == "on-failure" for i in range(2))
    assert "--query=http://thanos-query:10902" in rule["command"]
    assert "--alertmanagers.url=http://alertmanager:9093" in rule["command"]
    prom = yaml.safe_load((root / "collector" / "prometheus.yml").read_text())
    assert f'--label=runbook_base_url="{prom["global"]["external_labels"]["runbook_base_url"]}"' in rule["command"]
