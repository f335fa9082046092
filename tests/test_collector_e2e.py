"""End to end with real binaries: the transport exports OTLP to the collector built from
collector/manifest.yaml; Debian's Prometheus scrapes it and evaluates the real rules (durations
scaled down); series names, counts, the RawIdleStorm alert and collector outages are checked."""

from __future__ import annotations

import pathlib
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator

import httpx2
import pytest

import otel_liveness
from otel_liveness import Policy
from otel_liveness.telemetry import TelemetryHook
from otel_liveness.telemetry import semconv as S
from otel_liveness.telemetry.export import otlp_http
from otel_liveness.testing import SimulatedProvider, anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_status

from .stack import ROOT, Collector, Prometheus, collector_binary, scaled_rules

# A collector stack and fleets of worker processes against alert deadlines: run alone (beside
# sibling workers on a slowed host, storms fell short of the rate their alerts need).
pytestmark = pytest.mark.serial

BODY = {"model": "claude-e2e", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
# The flight recorder on (timing mode, no content): its drop counter is one of the series the rules use.
POLICY = Policy(raw_idle_timeout=0.2, semantic_notice_interval=0.1, backoff_initial=0.01, backoff_max=0.02,
                max_retry_after=0.1, max_attempts=2, capture_dir=tempfile.mkdtemp(prefix="e2e-recordings-"),
                capture_mode="timing")


@pytest.fixture(scope="module")
def binary() -> str:
    return collector_binary()


@pytest.fixture(scope="module")
def stack(binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Collector, Prometheus]]:
    tmp = tmp_path_factory.mktemp("e2e")
    collector = Collector(binary, tmp).start()
    prometheus = Prometheus(tmp, collector.prom_target, scaled_rules(tmp), self_targets=[collector.self_target]).start()
    try:
        yield collector, prometheus
    finally:
        prometheus.stop()
        collector.stop()


@pytest.mark.parametrize("config", ["config.yaml", "topology/agent.yaml"])
def test_configs_validate(binary: str, config: str) -> None:
    proc = subprocess.run([binary, "validate", "--config", str(ROOT / "collector" / config)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_rules_check_and_unit_tests() -> None:
    rules = ROOT / "collector" / "rules"
    check = subprocess.run(["promtool", "check", "rules", str(rules / "liveness.rules.yml")], capture_output=True, text=True)
    assert check.returncode == 0 and "SUCCESS" in check.stdout + check.stderr, check.stdout + check.stderr
    unit = subprocess.run(["promtool", "test", "rules", "liveness.test.yml"], cwd=rules, capture_output=True, text=True)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout + unit.stderr, unit.stdout + unit.stderr


class App:
    """The instrumented application: real transport, real exporters (OTLP/HTTP to the collector)."""

    def __init__(self, endpoint: str, service: str) -> None:
        self.tracer_provider, self.meter_provider, self.span_exporter, self.metric_exporter = otlp_http(
            endpoint, service_name=service, export_interval_ms=500, timeout_s=1.0)
        self.hook = TelemetryHook(self.tracer_provider, self.meter_provider, logs=False)

    def call(self, url: str) -> tuple[int | None, BaseException | None, float]:
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), POLICY, hooks=[self.hook])
        started = time.monotonic()
        with httpx2.Client(transport=transport, timeout=10) as client:
            try:
                with client.stream("POST", url + "/v1/messages", json=BODY) as response:
                    response.read()
                    return response.status_code, None, time.monotonic() - started
            except Exception as exc:
                return None, exc, time.monotonic() - started

    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def test_end_to_end_series_counts_and_storm(stack) -> None:  # type: ignore[no-untyped-def]
    collector, prom = stack
    app = App(collector.otlp_http, "e2e-agent")
    with SimulatedProvider(time_scale=0.01) as provider:
        healthy = provider.add("healthy", [[s.Headers(), *anthropic_reply("ok", think_pings=4, ping_every=5.0)]])
        retried = provider.add("retried", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply()]])
        limited = provider.add("limited", [[anthropic_status(429, "rate_limit_error", (("retry-after-ms", "20"),))],
                                           [s.Headers(), *anthropic_reply()]])
        cut = provider.add("cut", [[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
        for _ in range(4):
            assert app.call(healthy)[0] == 200
        assert app.call(retried)[0] == 200
        assert app.call(limited)[0] == 200
        assert isinstance(app.call(cut)[1], otel_liveness.StreamTruncated)
        app.flush()
        # Expected, from the scenarios: 4 + 2 + 2 + 1 attempts.
        job = 'job="e2e-agent"'
        prom.wait_value(f"sum(liveness_attempts_total{{{job}}})", lambda v: v == 9)
        by_outcome = {r["metric"]["liveness_attempt_outcome"]: float(r["value"][1]) for r in
                      prom.query(f"sum by (liveness_attempt_outcome) (liveness_attempts_total{{{job}}})")}
        assert by_outcome == {"completed": 6, "provider_error": 1, "rate_limited": 1, "truncated": 1}
        assert prom.value(f"sum(liveness_retries_total{{{job}}})") == 2
        retry_reasons = {r["metric"]["liveness_retry_reason"] for r in prom.query(f"liveness_retries_total{{{job}}}")}
        assert retry_reasons == {"overloaded", "rate_limited"}
        assert prom.value(f"sum(liveness_heartbeats_total{{{job}}})") == 16
        notices = prom.value(f"sum(liveness_semantic_notices_total{{{job}}})")
        assert notices is not None and notices >= 4
        assert prom.value(f"sum(liveness_truncations_total{{{job}}})") == 1
        assert prom.value(f'sum(liveness_requests_total{{{job},liveness_stop_reason="truncated"}})') == 1
        # Current component names: the collector warns about no deprecated alias.
        assert "is deprecated" not in collector.log.read_text()
        # Fleet series: no per-process identity; Prometheus's instance is the scraped gateway.
        assert {r["metric"]["instance"] for r in prom.query(f"liveness_attempts_total{{{job}}}")} == {collector.prom_target}
        # No name drift: every series the rules and dashboards use exists with its labels.
        for name in S.PROMETHEUS.values():
            if name in (S.PROMETHEUS["export_failures"], S.PROMETHEUS["wall_stops"], S.PROMETHEUS["retries_denied"],
                        S.PROMETHEUS["candidate_verdicts"], S.PROMETHEUS["candidate_shift"]):
                continue  # only exist once something failed / a budget expired / a retry was shed / a canary
                # candidate is configured (the panels test: the demo runs one)
            suffix = "_count" if name.endswith("_seconds") else ""
            assert prom.query(f"{name}{suffix}{{{job}}}"), name
        series = prom.query(f"liveness_attempts_total{{{job}}}")[0]["metric"]
        assert {"gen_ai_provider_name", "gen_ai_request_model", "liveness_attempt_outcome"} <= set(series)
        assert series["gen_ai_provider_name"] == "anthropic" and series["gen_ai_request_model"] == "claude-e2e"
        prom.wait_value(f'sum(traces_span_metrics_calls_total{{{job},liveness_attempt_outcome="truncated"}})', lambda v: v == 1)
        prom.wait_value(f'sum(traces_span_metrics_events_total{{{job},liveness_event_kind="retry_scheduled"}})', lambda v: v == 2)
        assert prom.query(f'traces_span_metrics_duration_seconds_bucket{{{job}}}')
        # The healthy traffic does not page.
        assert prom.query('ALERTS{alertname="RawIdleStorm"}') == []
        # A raw-idle storm: attempts die of silence before content, fleet-wide -- until the alert
        # fires (a condition, not a fixed length: a slow machine storms longer).
        dead = provider.add("dead", [[s.Headers(), anthropic_reply()[0], s.Stall()]])
        firing = 'count(ALERTS{alertname="RawIdleStorm",alertstate="firing",gen_ai_provider_name="anthropic"})'
        deadline = time.monotonic() + 90
        storms = 0
        while prom.value(firing) != 1:
            assert time.monotonic() < deadline, f"RawIdleStorm did not fire after {storms} dead requests"
            _, error, _ = app.call(dead)
            assert isinstance(error, otel_liveness.ProviderError) and error.last_cause == "raw_silence"
            assert app.call(healthy)[0] == 200
            storms += 1
        assert storms >= 2  # it took a storm: one dead request does not page
    app.close()


def test_collector_outage_never_affects_the_app(binary: str, tmp_path: pathlib.Path) -> None:
    collector = Collector(binary, tmp_path).start()
    app = App(collector.otlp_http, "outage-agent")
    with SimulatedProvider(time_scale=0.01) as provider:
        url = provider.add("ok", [[s.Headers(), *anthropic_reply("fine", think_pings=2)]])
        baseline = [app.call(url) for _ in range(3)]
        assert all(status == 200 for status, _, _ in baseline)
        collector.kill()
        during = [app.call(url) for _ in range(5)]
        app.flush()  # exports to a dead collector: dropped and counted, never raised
        assert all(status == 200 and error is None for status, error, _ in during)
        assert max(t for _, _, t in during) < max(t for _, _, t in baseline) + 1.0
        assert app.span_exporter.failures >= 1 and app.span_exporter.items_dropped >= 1
        # The collector returns (same ports): telemetry flows again. Metrics are deltas (counts that
        # do not depend on process lifetime): what was exported during the outage is lost -- and
        # counted by the library, in the series the TelemetryExportFailing alert watches.
        collector = Collector(binary, tmp_path, ports=collector.ports).start()
        try:
            assert app.call(url)[0] == 200
            deadline = time.monotonic() + 30
            total = failures = 0.0
            while time.monotonic() < deadline:
                app.flush()
                text = collector.scrape()
                total = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                            if line.startswith("liveness_attempts_total{") and 'job="outage-agent"' in line)
                failures = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                               if line.startswith(S.PROMETHEUS["export_failures"] + "{")
                               and 'job="outage-agent"' in line)
                if total >= 1 and failures >= 1:
                    break
                time.sleep(0.5)
            assert 1 <= total <= 9  # the attempt after the outage, and whatever was not dropped
            assert failures >= 1
            assert app.span_exporter._failing is False
        finally:
            collector.stop()
    app.close()


def rule_metric_names() -> set[str]:
    text = (ROOT / "collector" / "rules" / "liveness.rules.yml").read_text()
    recorded = set(re.findall(r"record: (\S+)", text))
    exprs = " ".join(re.findall(r"expr: \|?\n?((?:.*\n)*?)\s+(?:for|labels|- record|- alert)", text))
    names = set(re.findall(r"\b((?:liveness|otelcol|gen_ai|traces)_[a-z_]+|up)(?=\{|\[|\s*/)", exprs))
    names |= set(re.findall(r"/\s*((?:liveness|otelcol)_[a-z_]+)", exprs))
    return names - recorded


def test_every_series_the_rules_use_is_in_a_real_scrape(stack) -> None:  # type: ignore[no-untyped-def]
    """Names never drift: each metric the rules name (the library's, the collector's own, up) is
    scraped from the real collector -- except counters that only exist once something failed."""
    _collector, prom = stack
    only_on_failure = {"otelcol_exporter_send_failed_spans", "otelcol_exporter_send_failed_metric_points",
                       "otelcol_exporter_enqueue_failed_spans", "otelcol_exporter_enqueue_failed_metric_points",
                       S.PROMETHEUS["export_failures"],
                       S.PROMETHEUS["retries_denied"],  # (scraped in the dashboard test: the demo sheds a retry)
                       S.PROMETHEUS["candidate_verdicts"]}  # (and runs a canary candidate)
    names = rule_metric_names()
    assert {"liveness_attempts_total", "otelcol_exporter_queue_size", "otelcol_exporter_queue_capacity",
            "otelcol_deltatocumulative_datapoints",
            "otelcol_receiver_refused_spans", "up"} <= names
    # The exporters' sent counters appear with their first export, after the tail-sampling
    # decision wait and a batch: on a loaded host that took more than 30 s once (polled, so a
    # healthy run does not wait for the deadline).
    deadline = time.monotonic() + 90
    missing = names - only_on_failure
    while missing and time.monotonic() < deadline:
        missing = {n for n in missing if not prom.query(f'count({{__name__="{n}"}})')}
        time.sleep(0.5)
    assert not missing, missing


def test_runbooks_group_by_labels_that_exist(stack) -> None:  # type: ignore[no-untyped-def]
    """Every label the runbooks tell on-call to group or filter by is a label of a real series."""
    _, prom = stack
    text = (ROOT / "docs" / "operations.md").read_text()
    runbooks = text[text.index("## Alert runbooks"):]
    labels = set()
    for group in re.findall(r"by \(([a-z_, ]+)\)", runbooks):
        labels.update(name.strip() for name in group.split(","))
    labels.update(re.findall(r"\{([a-z_]+)=", runbooks))
    labels.update(re.findall(r"by `([a-z_]+)`", runbooks))
    assert {"job", "liveness_retry_reason"} <= labels
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{prom.port}/api/v1/labels", timeout=5) as response:
        existing = set(json.load(response)["data"])
    assert labels <= existing, labels - existing


def test_dashboard_panels_return_data_and_render(stack, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    """Against the real Prometheus fed by the demo scenarios: every panel query returns data (the
    alert table is checked in the storm test), key values match the scenarios, every name the
    dashboard uses was seen, and the preview renders."""
    from dashboards.panels import PANELS, substitute
    from dashboards.preview import render_all
    from otel_liveness.demo import SCENARIOS, run_demo

    collector, prom = stack
    status, result = run_demo(time_scale=0.01, otlp=collector.otlp_http, as_json=True,
                              out=open("/dev/null", "w"), rounds=2)
    assert status == 0
    demo = 'job="otel-liveness-demo"'
    expected_attempts = 2 * sum(sc.expect.attempts for sc in SCENARIOS)
    prom.wait_value(f"sum(liveness_attempts_total{{{demo}}})", lambda v: v == expected_attempts)
    # Per round: the stall after partial text, and the background stream that died before it was
    # resumed (its first request ends truncated; the resume is a request of its own).
    prom.wait_value(f"sum(liveness_truncations_total{{{demo}}})", lambda v: v == 4)

    def empty_panels() -> list[str]:
        return [spec.title for spec in PANELS for query in spec.queries
                if spec.key != "alerts" and not prom.query(substitute(query.expr, "30s"))]

    # Rates over short windows need two points: wait (on the condition, not a fixed time) until
    # every panel's query returns data.
    deadline = time.monotonic() + 30
    while (empty := empty_panels()) and time.monotonic() < deadline:
        prom.wait_scrapes(1)
    assert empty == []
    outcomes = {r["metric"]["liveness_attempt_outcome"] for r in
                prom.query(substitute(PANELS[0].queries[0].expr, "1m").replace('job=~".*"', demo))}
    assert {"completed", "rate_limited", "provider_error", "truncated", "wall_budget", "raw_silence"} <= outcomes
    reasons = {r["metric"]["liveness_retry_reason"] for r in prom.query(f"liveness_retries_total{{{demo}}}")}
    assert reasons == {r["reason"] for t in result["turns"] for r in t["retries"]}
    # The retry budget's series (the demo's provider_down turn is denied a retry, in each round).
    prom.wait_value(f"sum({S.PROMETHEUS['retries_denied']}{{{demo}}})", lambda v: v == 2)
    assert prom.query(f'{S.PROMETHEUS["retry_budget"]}{{{demo}, gen_ai_provider_name="anthropic"}}')
    stops = {r["metric"]["liveness_stop_reason"] for r in prom.query(f"liveness_requests_total{{{demo}}}")}
    assert "retry_budget" in stops
    # The canary's series: its candidate judged every attempt, as the demo counted; a dead attempt's
    # detection shift; the recording rule per candidate.
    judged = f'sum({S.PROMETHEUS["candidate_verdicts"]}{{{demo}, liveness_candidate_verdict="judged"}})'
    prom.wait_value(judged, lambda v: v == expected_attempts)
    counted = sum(t["canary"]["watchdog-45"].get("kill", 0) for t in result["turns"])
    assert prom.value(f'sum({S.PROMETHEUS["candidate_verdicts"]}{{{demo}, liveness_candidate_verdict="kill"}})') == counted
    assert prom.query(f'{S.PROMETHEUS["candidate_shift"]}_count{{{demo}, liveness_candidate_name="watchdog-45"}}')
    # The recording rule: one series per provider the demo's candidate judged (anthropic; openai: the
    # background-response turn).
    prom.wait_value('count(liveness:candidate_false_kill_ratio:rate1h{liveness_candidate_name="watchdog-45"})',
                    lambda v: v == 2)
    providers = {r["metric"]["gen_ai_provider_name"] for r in
                 prom.query('liveness:candidate_false_kill_ratio:rate1h{liveness_candidate_name="watchdog-45"}')}
    assert providers == {"anthropic", "openai"}
    drawn = render_all(f"http://127.0.0.1:{prom.port}", tmp_path, window=60.0, rate="30s")
    assert len(drawn) >= 8 and all(p.stat().st_size > 5000 for p in drawn)
