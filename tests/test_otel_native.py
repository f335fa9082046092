"""OpenTelemetry-native by default, and the habits users expect from a Python library: plain
``wrap()`` emits through the global providers; ``telemetry=False`` emits nothing; the
instrumentor and ``wrap()`` never make two spans per attempt; log records carry the attempt's
trace; an application without logging configuration sees nothing on stderr during retries;
the anthropic SDK's own middleware sees one attempt per call."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import anthropic
import httpx2
import pytest

import otel_liveness
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_status

from .conftest import FAST

# Each app is a subprocess judged on a 0.3 s raw bound against pings every 0.05 s: with sibling
# workers on a loaded host, one exhausted its attempts once (never alone).
pytestmark = pytest.mark.serial

APP = pathlib.Path(__file__).resolve().parent / "otel_native_app.py"
ROOT = APP.parent.parent


def app(base_url: str, mode: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, str(APP), base_url, mode], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


def scenario(provider: Any, name: str) -> str:
    # A 529 (retried below the SDK), then a long think with pings and notices.
    return provider.add(name, [[anthropic_status(529, "overloaded_error")],
                               [s.Headers(), *anthropic_reply("Native.", think_pings=6, ping_every=5.0)]])


def run_app(provider: Any, mode: str) -> dict[str, Any]:
    proc = app(scenario(provider, f"native-{mode}"), mode)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    assert out["text"] == "Native."
    return out


def test_plain_wrap_emits_spans_events_metrics_and_logs_through_the_global_providers(provider: Any) -> None:
    out = run_app(provider, "default")
    attempts = [sp for sp in out["spans"] if sp["attributes"].get("liveness.attempt.outcome")]
    assert [sp["attributes"]["liveness.attempt.outcome"] for sp in attempts] == ["provider_error", "completed"]
    assert "liveness.retry_scheduled" in attempts[0]["events"]
    assert "liveness.heartbeat" in attempts[1]["events"] and "liveness.semantic_notice" in attempts[1]["events"]
    for name in ("liveness.attempts", "liveness.requests", "liveness.heartbeats", "liveness.retries",
                 "liveness.semantic_notices", "liveness.attempt.duration"):
        assert out["metrics"].get(name, 0) >= 1, name
    # Log records (notices, the retry) exported by the logging bridge with the attempt's trace.
    by_span = {sp["span_id"]: sp for sp in attempts}
    retry = [r for r in out["logs"] if "retrying" in r["message"]]
    assert retry and retry[0]["level"] == "INFO" and retry[0]["span_id"] in by_span
    assert by_span[retry[0]["span_id"]]["trace_id"] == retry[0]["trace_id"]
    notices = [r for r in out["logs"] if "semantically silent" in r["message"]]
    assert notices and all(r["span_id"] == attempts[1]["span_id"] for r in notices)


def test_telemetry_false_emits_nothing(provider: Any) -> None:
    out = run_app(provider, "off")
    assert out["spans"] == [] and out["metrics"] == {} and out["logs"] == []


def test_the_instrumentor_and_wrap_never_make_two_spans_per_attempt(provider: Any) -> None:
    out = run_app(provider, "instrumented")
    attempts = [sp for sp in out["spans"] if sp["attributes"].get("liveness.attempt.outcome")]
    assert len(attempts) == 2  # two attempts, one span each
    assert not any(name.startswith("POST") for name in out["other_spans"])  # and no HTTP client span


def test_an_app_without_logging_configuration_prints_nothing_during_retries(provider: Any) -> None:
    proc = app(scenario(provider, "quiet"), "quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""  # the retry was logged, but to the library's NullHandler only
    assert provider.attempts("quiet") == 2


def test_the_package_logger_has_a_null_handler() -> None:
    import logging

    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("otel_liveness").handlers)


class Counting(anthropic.Middleware):
    """The SDK's per-attempt middleware (anthropic 2.x)."""

    def __init__(self) -> None:
        self.calls = 0
        self.reports: list[dict[str, Any]] = []

    def handle(self, request: Any, call_next: Any) -> Any:
        self.calls += 1
        response = call_next(request)
        self.reports.append(response.http_response.extensions["liveness"])
        return response


def test_the_transport_under_the_sdks_middleware(provider: Any) -> None:
    url = provider.add("mw", [[s.Headers(), anthropic_reply()[0], s.Stall()], [s.Headers(), *anthropic_reply("Mw.")]])
    middleware = Counting()
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST)
    with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0, middleware=[middleware],
                             http_client=httpx2.Client(transport=transport)) as client:
        with client.messages.stream(model="claude-sim-1", max_tokens=16, messages=[{"role": "user", "content": "hi"}]) as st:
            assert st.get_final_text() == "Mw."
    # The transport's retry happened below the middleware: it saw one attempt, with the report.
    assert middleware.calls == 1 and provider.attempts("mw") == 2
    assert [a["outcome"] for a in middleware.reports[0]["attempts"]] == ["raw_silence", "completed"]


@pytest.mark.parametrize("argv", [["-m", "otel_liveness", "--version"], ["-m", "otel_liveness.cli", "--version"]])
def test_version_and_python_dash_m(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == f"otel-liveness {otel_liveness.__version__}"


def test_cli_help_has_no_restructuredtext_markup() -> None:
    proc = subprocess.run([sys.executable, "-m", "otel_liveness", "--help"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert proc.returncode == 0 and "``" not in proc.stdout and ":class:" not in proc.stdout
    for command in ("analyze", "demo"):
        sub = subprocess.run([sys.executable, "-m", "otel_liveness", command, "--help"], capture_output=True,
                             text=True, timeout=60, cwd=ROOT)
        assert sub.returncode == 0 and "``" not in sub.stdout


def test_the_package_is_typed() -> None:
    assert (ROOT / "otel_liveness" / "py.typed").exists()
