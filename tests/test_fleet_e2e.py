"""Fleet-true telemetry, end to end with real binaries: short-lived agent processes (one OS process
each, tests/fleet_worker.py) export to the collector built from collector/manifest.yaml; Debian's
Prometheus evaluates the shipped rules (durations scaled down 30x) and pages Debian's Alertmanager,
which posts to a local webhook.

- counts: increase() over a fleet of short-lived processes matches the truth and a long-lived
  process doing the same work (within 5 %), in the recording rules and the dashboard panels;
- a raw-idle storm made only of short-lived processes fires RawIdleStorm and pages the webhook with
  provider, model, a summary with numbers and an absolute runbook link (time-to-page measured);
- the series budget: the exporter's series do not grow with the number of processes;
- exemplars link only traces that tail sampling kept; model names outside the pattern are "other".

OTEL_LIVENESS_FLEET_PROCESSES=100 runs the cardinality measurement with 100 processes (default 16).
"""

from __future__ import annotations

import os
import pathlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .otlp_receiver import OTLPReceiver
from .stack import (
    ROOT,
    Alertmanager,
    Collector,
    Prometheus,
    Webhook,
    collector_binary,
    fleet_total,
    run_fleet,
    scaled_rules,
    scrape_families,
)

# A collector stack and fleets of worker processes against alert deadlines: run alone (beside
# sibling workers on a slowed host, storms fell short of the rate their alerts need).
pytestmark = pytest.mark.serial

# Rules 2m -> 4s, 10m -> 20s; Alertmanager group_wait 30s -> 1s. OTEL_LIVENESS_RULES_SCALE=1 runs the
# storm test with the shipped rules, 15 s scrapes and the shipped Alertmanager waits (about 6 minutes):
# the time-to-page in docs/operations.md comes from that run.
SCALE = int(os.environ.get("OTEL_LIVENESS_RULES_SCALE", "30"))
MIX = ["dead_socket", "inband_overload", "rate_limit_storm", "long_think", "stall_after_partial", "exhausted",
       "wall_budget"]
#: Series of the library's metrics (all liveness_* and gen_ai_* families) per (service, provider, model)
#: at one gateway, for the demo scenarios' full vocabulary (docs/operations.md, "Cardinality budget").
LIBRARY_SERIES_BUDGET = 600


class Stack:
    def __init__(self, tmp: pathlib.Path) -> None:
        self.traces = OTLPReceiver().__enter__()
        self.collector = Collector(collector_binary(), tmp, env={
            "OTELCOL_TRACES_ENDPOINT": f"http://127.0.0.1:{self.traces.port}",
            "OTELCOL_HEALTHY_SAMPLE_PERCENT": "10",
        }).start()
        self.webhook = Webhook()
        self.alertmanager = Alertmanager(tmp, self.webhook.url, scale=SCALE).start()
        self.prom = Prometheus(tmp, self.collector.prom_target, scaled_rules(tmp, SCALE),
                               self_targets=[self.collector.self_target],
                               alertmanager=self.alertmanager.address,
                               interval="1s" if SCALE > 1 else "15s").start()

    def close(self) -> None:
        for name, stop in (("prom", "stop"), ("alertmanager", "stop"), ("collector", "stop"), ("webhook", "close"),
                           ("traces", "__exit__")):
            if hasattr(self, name):
                getattr(getattr(self, name), stop)()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack.__new__(Stack)
    try:
        s.__init__(tmp_path_factory.mktemp("fleet"))  # type: ignore[misc]
    except BaseException:
        s.close()  # whatever did start
        raise
    try:
        yield s
    finally:
        s.close()


def library_series(text: str, job: str | None = None) -> int:
    return sum(1 for line in text.splitlines()
               if re.match(r"(liveness|gen_ai)_", line) and (job is None or f'job="{job}"' in line))


def settle(prom: Prometheus, expr: str, expected: float, timeout: float = 60.0) -> float:
    """Wait until ``expr`` equals ``expected`` and two more scrapes have happened; return the time."""
    prom.wait_value(expr, lambda v: v == expected, timeout=timeout)
    return prom.wait_scrapes(2)


def window_exprs() -> dict[str, str]:
    """The recording rules the checks use, by name, as written in the shipped rules file."""
    text = (ROOT / "collector" / "rules" / "liveness.rules.yml").read_text()
    rules = {}
    for match in re.finditer(r"- record: (\S+)\n\s+expr: \|\n((?:\s{10}.*\n)+)", text):
        rules[match.group(1)] = " ".join(line.strip() for line in match.group(2).splitlines())
    return rules


def test_short_lived_fleet_counts_like_one_long_lived_process(stack: Stack) -> None:
    prom = stack.prom
    jobs = [[MIX[i % len(MIX)], MIX[(i + 3) % len(MIX)]] for i in range(14)]
    # Warm-up: one process per service creates every series (a series' first sample is invisible
    # to increase(): once per series and gateway, never per process -- docs/operations.md).
    warm = {job: run_fleet(stack.collector.otlp_http, [MIX], service=job)
            for job in ("fleet-short", "fleet-long")}
    start = {job: settle(prom, f'sum(liveness_attempts_total{{job="{job}"}})', fleet_total(warm[job]))
             for job in warm}
    series_after_one = library_series(stack.collector.scrape())
    # The same work: 14 short-lived processes, and one long-lived process exporting every 0.5 s.
    short = run_fleet(stack.collector.otlp_http, jobs, service="fleet-short", parallel=3)
    long = run_fleet(stack.collector.otlp_http, [[name for job in jobs for name in job]], service="fleet-long",
                     export_interval_ms=500)
    truth = {"fleet-short": short, "fleet-long": long}
    assert fleet_total(short) == fleet_total(long) == sum(r["served_attempts"] for r in short)
    rules = window_exprs()
    measured: dict[str, dict[str, float]] = {}
    for job, results in truth.items():
        sel = f'job="{job}"'
        end = settle(prom, f"sum(liveness_attempts_total{{{sel}}})", fleet_total(warm[job]) + fleet_total(results))
        window = f"{int(end - start[job]) + 1}s"
        seconds = int(end - start[job]) + 1
        m = measured[job] = {
            "attempts": prom.at(f"sum(increase(liveness_attempts_total{{{sel}}}[{window}]))", end) or 0.0,
            "raw_silence": prom.at(
                f'sum(increase(liveness_attempts_total{{{sel},liveness_attempt_outcome="raw_silence"}}[{window}]))', end) or 0.0,
            "requests": prom.at(f"sum(increase(liveness_requests_total{{{sel}}}[{window}]))", end) or 0.0,
            "retries": prom.at(f"sum(increase(liveness_retries_total{{{sel}}}[{window}]))", end) or 0.0,
            "heartbeats": prom.at(f"sum(increase(liveness_heartbeats_total{{{sel}}}[{window}]))", end) or 0.0,
        }
        # The recording rules' own expressions over the same window (their windows are fixed).
        per_minute = rules["liveness:attempts_per_minute:rate10m"].replace("[10m]", f"[{window}]").replace(
            "liveness_attempts_total", f"liveness_attempts_total{{{sel}}}")
        m["rule_attempts"] = (prom.at(f"sum({per_minute})", end) or 0.0) * seconds / 60
        by_reason = rules["liveness:retries:rate5m"].replace("[5m]", f"[{window}]").replace(
            "liveness_retries_total", f"liveness_retries_total{{{sel}}}")
        m["rule_retries"] = (prom.at(f"sum({by_reason})", end) or 0.0) * seconds
        # The dashboard's attempts-by-outcome panel, with $__rate_interval = the window.
        from dashboards.panels import PANELS, substitute

        panel = next(p for p in PANELS if p.key == "attempts_by_outcome").queries[0].expr
        m["panel_attempts"] = (prom.at("sum(" + substitute(panel, window).replace('job=~".*"', sel) + ")", end)
                               or 0.0) * seconds
        expected = {"attempts": fleet_total(results), "raw_silence": fleet_total(results, outcome="raw_silence"),
                    "requests": fleet_total(results, "requests"), "retries": sum(r["retries"] for r in results),
                    "heartbeats": sum(r["heartbeats"] for r in results)}
        expected.update(rule_attempts=expected["attempts"], rule_retries=expected["retries"],
                        panel_attempts=expected["attempts"])
        for key, want in expected.items():
            assert m[key] == pytest.approx(want, rel=0.05), (job, key, m[key], want)
    # Many processes write each stream: none of their points was rejected (restamped in order).
    assert not prom.value('sum(otelcol_deltatocumulative_datapoints{error!=""})')
    # Short-lived and long-lived agree with each other too.
    assert measured["fleet-short"]["attempts"] == pytest.approx(measured["fleet-long"]["attempts"], rel=0.05)
    # No series per process: 1 + 14 + 1 processes later, the library's series are those after one.
    assert library_series(stack.collector.scrape()) == series_after_one
    print(f"\nfleet counts: truth {fleet_total(short)} attempts; measured {measured}")


def test_storm_of_short_lived_processes_pages_with_model_summary_and_runbook(stack: Stack) -> None:
    prom, hook = stack.prom, stack.webhook
    if SCALE > 1:
        if prom.value('liveness_attempts_total{gen_ai_provider_name="anthropic"}') is None:  # run alone
            run_fleet(stack.collector.otlp_http, [["long_think"]], service="fleet-short")
            settle(prom, 'sum(liveness_attempts_total{gen_ai_provider_name="anthropic"})', 1)
        # The earlier traffic leaves the 10m (20 s) window first, so the storm is all there is.
        prom.wait_value('sum(liveness:attempts_per_minute:rate10m{gen_ai_provider_name="anthropic"})',
                        lambda v: v == 0, timeout=60)
        assert prom.query('ALERTS{alertname="RawIdleStorm"}') == []
        # Ratios are 0, not NaN, while nothing happens.
        assert prom.value('liveness:raw_idle_ratio:rate2m{gen_ai_provider_name="anthropic"}') == 0
        assert prom.value('liveness:truncation_ratio:rate10m{gen_ai_provider_name="anthropic"}') == 0
    # (With the shipped rules, the storm starts on a cold stack, as after a deploy.)
    hook.received.clear()
    # The storm: dead_socket processes only (each: 3 attempts, one killed by the raw-idle clock),
    # two at a time, until the page arrives.
    storm: list[dict[str, Any]] = []
    done = threading.Event()

    def storm_loop() -> None:
        while not done.is_set() and len(storm) < 2000:
            storm.extend(run_fleet(stack.collector.otlp_http, [["dead_socket"]] * 4, service="storm-agent",
                                   parallel=2, timeout=300))

    def storm_page() -> tuple[float, dict[str, Any]] | None:
        return next(((t, p) for t, p in list(hook.received)
                     if any(a["labels"]["alertname"] == "RawIdleStorm" for a in p["alerts"])), None)

    storm_start = time.time()
    thread = threading.Thread(target=storm_loop, daemon=True)
    thread.start()
    try:
        # The storm goes on until the alert fires: how long that takes depends on how fast this
        # machine starts the storm's processes (a condition, with a generous ceiling).
        prom.wait_value('count(ALERTS{alertname="RawIdleStorm",alertstate="firing",gen_ai_provider_name="anthropic",'
                        'gen_ai_request_model="claude-sim-1"})', lambda v: v == 1, timeout=300 if SCALE > 1 else 900)
        fired_at = time.time()
        fired = fired_at - storm_start
        deadline = time.monotonic() + (60 if SCALE > 1 else 300)
        while time.monotonic() < deadline and storm_page() is None:
            time.sleep(0.2)
    finally:
        done.set()
        thread.join(timeout=300)
    assert fleet_total(storm, outcome="raw_silence") * 3 == fleet_total(storm) > 0
    assert hook.received, "Alertmanager did not page the webhook"
    # The storm's retries page as well (RetryStorm, its own group): whichever page came first, the
    # RawIdleStorm page is the one checked.
    page = storm_page()
    assert page is not None, [a["labels"]["alertname"] for _, p in hook.received for a in p["alerts"]]
    arrived, payload = page
    alert = next(a for a in payload["alerts"] if a["labels"]["alertname"] == "RawIdleStorm")
    assert alert["labels"]["gen_ai_provider_name"] == "anthropic"
    assert alert["labels"]["gen_ai_request_model"] == "claude-sim-1"
    assert alert["labels"]["severity"] == "page"
    summary = alert["annotations"]["summary"]
    assert re.match(r"anthropic claude-sim-1: [\d.]+% of attempts died of raw silence over 10m, at [\d.]+ attempts/min$",
                    summary), summary
    assert alert["annotations"]["runbook_url"] == "https://runbooks.example.test/otel-liveness/operations.md#rawidlestorm"
    time_to_page = arrived - storm_start
    print(f"\ntime to page (rules scaled {SCALE}x, Alertmanager group_wait {max(1, 30 // SCALE)}s): "
          f"firing {fired:.1f}s, webhook {time_to_page:.1f}s after the storm's first process started "
          f"({len(storm)} storm processes); summary: {summary!r}")
    # Once firing, the page follows within Alertmanager's group_wait (1 s scaled, 30 s shipped) plus
    # an evaluation and a notification -- measured from the firing, which itself came when the storm
    # (paced by this machine) filled the 10m window past 25 % and 20 attempts/min for 2m.
    assert arrived - fired_at < (30 if SCALE > 1 else 120), arrived - fired_at
    assert time_to_page < (300 if SCALE > 1 else 900)


def test_series_budget_does_not_grow_with_processes(stack: Stack) -> None:
    n = int(os.environ.get("OTEL_LIVENESS_FLEET_PROCESSES", "16"))
    scraped = stack.collector.scrape()
    before = scrape_families(scraped)
    before_attempts = sum(float(line.rsplit(" ", 1)[1]) for line in scraped.splitlines()
                          if line.startswith("liveness_attempts_total{") and 'job="fleet-short"' in line)
    results = run_fleet(stack.collector.otlp_http, [[MIX[i % len(MIX)]] for i in range(n)], service="fleet-short",
                        parallel=3, timeout=900)
    # Every process's last export has arrived (the gateway's count grew by what they served).
    grown = 0.0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        grown = sum(float(line.rsplit(" ", 1)[1]) for line in stack.collector.scrape().splitlines()
                    if line.startswith("liveness_attempts_total{") and 'job="fleet-short"' in line)
        if grown - before_attempts == fleet_total(results):
            break
        time.sleep(0.2)
    assert grown - before_attempts == fleet_total(results)
    text = stack.collector.scrape()
    after = scrape_families(text)
    assert sum(r["served_attempts"] for r in results) == fleet_total(results)
    library = {k: v for k, v in after.items() if k.startswith(("liveness_", "gen_ai_"))}
    assert {k: before.get(k) for k in library} == library, "library series grew with processes"
    per_job = library_series(text, "fleet-short")
    assert per_job <= LIBRARY_SERIES_BUDGET
    # No per-process identity anywhere in the exporter: no instance label, target_info per service.
    assert 'instance="' not in text
    assert after.get("target_info", 0) <= len({m for m in re.findall(r'job="([^"]+)"', text)})
    print(f"\nseries after {n} more short-lived processes: exporter {sum(after.values())} "
          f"(library, job fleet-short: {per_job}; all library series: {sum(library.values())})")


def test_exemplars_link_only_kept_traces(stack: Stack) -> None:
    run_fleet(stack.collector.otlp_http, [["stall_after_partial", "inband_overload", "long_think"]], service="exemplars")
    deadline = time.monotonic() + 120  # polled: the tail-sampling wait and a batch, slower on a loaded host
    exemplars: list[tuple[str, str]] = []
    while not exemplars and time.monotonic() < deadline:
        text = stack.collector.scrape(openmetrics=True)
        exemplars = re.findall(r'^(\w+)\{[^}]*\} \S+ # \{trace_id="([0-9a-f]+)"', text, re.M)
        time.sleep(0.5)
    assert exemplars, "no exemplars in the exporter"
    # Only the sampled span metrics carry exemplars; the library's accumulated series carry none.
    assert {name for name, _ in exemplars} <= {"traces_sampled_span_metrics_duration_seconds_bucket",
                                              "traces_sampled_span_metrics_calls_total"}
    deadline = time.monotonic() + 30
    while True:
        kept = {span.trace_id.hex() for _, span in stack.traces.spans()}
        missing = {tid for _, tid in exemplars} - kept
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not missing, f"{len(missing)} of {len(exemplars)} exemplars name traces the backend never received"


def test_cumulative_senders_count_once_too(stack: Stack) -> None:
    """Apps whose SDK exports cumulative (the SDK default) work as well: the gateway converts each
    process's stream to deltas before dropping its identity."""
    prom = stack.prom
    warm = run_fleet(stack.collector.otlp_http, [MIX], service="cumulative-app", temporality="cumulative")
    start = settle(prom, 'sum(liveness_attempts_total{job="cumulative-app"})', fleet_total(warm))
    fleet = run_fleet(stack.collector.otlp_http, [[name] for name in MIX], service="cumulative-app",
                      parallel=3, temporality="cumulative", export_interval_ms=500)
    settle(prom, 'sum(liveness_attempts_total{job="cumulative-app"})', fleet_total(warm) + fleet_total(fleet))
    time.sleep(max(0.0, start + 30 - time.time()))
    end = time.time()
    seconds = int(end - start) + 1
    series = 'liveness_attempts_total{job="cumulative-app"}'
    # Counted once, exactly: the series rose by the fleet's attempts across the window, with no
    # reset (a process's cumulative stream taken for a new one would reset or double it).
    before, after = prom.at(f"sum({series})", start), prom.at(f"sum({series})", end)
    assert before is not None and after is not None and after - before == fleet_total(fleet), (before, after)
    assert prom.at(f"sum(resets({series}[{seconds}s]))", end) == 0
    # And as a dashboard reads it: increase() over the window gives at least that, and at most
    # what Prometheus's extrapolation to the window's edges adds -- up to 1.1 scrape intervals at
    # each end, scaled by the rise over the sampled part (a 5 % bound failed at 17.1 of 16).
    interval = 1.0  # the stack's scrape interval (tests/stack.py)
    measured = prom.at(f"sum(increase({series}[{seconds}s]))", end)
    most = fleet_total(fleet) * seconds / (seconds - 2 * 1.1 * interval)
    assert measured is not None and fleet_total(fleet) <= measured <= most, (measured, fleet_total(fleet), most)


def test_model_names_outside_the_pattern_become_other(stack: Stack) -> None:
    run_fleet(stack.collector.otlp_http, [["inband_overload"]], service="odd-model",
              model="acme-private-finetune-7f3a9c")
    stack.prom.wait_value('sum(liveness_attempts_total{job="odd-model",gen_ai_request_model="other"})',
                          lambda v: v == 2)
    assert stack.prom.query('liveness_attempts_total{job="odd-model",gen_ai_request_model!="other"}') == []
