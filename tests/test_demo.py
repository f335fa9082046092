"""The main job: `otel-liveness demo` runs, and its accounting is what the policy says."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from otel_liveness.demo import SCENARIOS


@pytest.fixture(scope="module")
def demo_json() -> dict:
    proc = subprocess.run([sys.executable, "-m", "otel_liveness.cli", "demo", "--json", "--time-scale", "0.01"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_every_scenario_behaves_as_the_policy_says(demo_json) -> None:  # type: ignore[no-untyped-def]
    turns = {t["scenario"]: t for t in demo_json["turns"]}
    assert set(turns) == {sc.name for sc in SCENARIOS}
    for sc in SCENARIOS:
        turn = turns[sc.name]
        assert turn["ok"], turn
        assert turn["outcome"] == sc.expect.outcome and turn["attempts"] == sc.expect.attempts
    assert turns["long_think"]["heartbeats"] == 36 and turns["long_think"]["notices"] >= 4
    assert [r["reason"] for r in turns["rate_limit_storm"]["retries"]] == ["rate_limited"] * 4
    assert turns["stall_after_partial"]["truncation_prefix_bytes"] > 0
    assert "provider failure" in turns["exhausted"]["error"]


def test_accounting(demo_json) -> None:  # type: ignore[no-untyped-def]
    a = demo_json["accounting"]
    assert a == {
        "turns": len(SCENARIOS),
        "agent_requests": len(SCENARIOS) + 1,  # one extra call: the single model-visible continuation
        "provider_attempts": sum(sc.expect.attempts for sc in SCENARIOS),
        "model_visible_continuations": 1,
        "provider_failures": 2,  # exhausted, and provider_down (its retry shed by the budget)
        "wall_budget_stops": 1,
        "no_reply": 0,
        "fake_continue_turns": 0,
    }
    telemetry = demo_json["telemetry"]
    assert telemetry["attempt_spans"] == a["provider_attempts"]
    assert telemetry["counters"]["liveness.attempts"] == a["provider_attempts"]


def test_shadow_mode_never_retries() -> None:
    from otel_liveness.demo import run_demo

    status, result = run_demo(names=["dead_socket", "exhausted"], time_scale=0.01, shadow=True, as_json=True,
                              out=open("/dev/null", "w"))
    assert status == 0
    assert [t["attempts"] for t in result["turns"]] == [1, 1]


def test_cli_rejects_unknown_scenarios() -> None:
    proc = subprocess.run([sys.executable, "-m", "otel_liveness.cli", "demo", "--scenario", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown scenario" in proc.stderr


def test_the_retries_column_is_never_cut_mid_word() -> None:
    from otel_liveness.demo import _retries_cell

    storm = [{"reason": "rate_limited", "delay_provider_s": 4.0}] * 4
    assert _retries_cell(storm, 44) == "rate_limited:4,4,4,4"
    mixed = [{"reason": r, "delay_provider_s": d} for r, d in
             [("read_error", 0.39), ("first_byte_timeout", 0.89), ("overloaded", 0.4), ("rate_limited", 4), ("overloaded", 1.5)]]
    assert _retries_cell(mixed, 44) == "read_error:0.39, +4 more"
    assert _retries_cell(mixed, 50) == "read_error:0.39, first_byte_timeout:0.89, +3 more"
    assert _retries_cell([], 44) == "-"
    assert _retries_cell(mixed, 10) == "5 retries"


def test_the_heartbeat_events_cap_is_explained() -> None:
    import io

    from otel_liveness.demo import run_demo

    buffer = io.StringIO()
    status, _ = run_demo(names=["long_think"], time_scale=0.005, out=buffer)
    out = buffer.getvalue()
    assert status == 0
    assert "16 heartbeat span events for 36 heartbeats: an attempt span records the first 16 reads" in out


def test_the_table_is_explained_and_the_demo_says_what_to_look_at_next(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import io
    import pathlib

    from otel_liveness.demo import COLUMNS, run_demo

    buffer = io.StringIO()
    status, result = run_demo(names=["dead_socket"], time_scale=0.01, out=buffer, capture_dir=str(tmp_path))
    out = buffer.getvalue()
    assert status == 0
    header = next(line for line in out.splitlines() if line.startswith("turn "))
    for name, _ in COLUMNS:  # every column of the header is explained under the table
        assert name in header.split() or name == "retries"
    assert "  ntc      notices: 30 provider-seconds of semantic silence" in out
    assert "  prefix   bytes released to the SDK before a truncation" in out
    tail = out.split("\nnext:\n", 1)[1]
    assert f"otel-liveness analyze {tmp_path}/<file>.jsonl" in tail
    assert "otel-liveness serve" in tail and "http://localhost:3000" in tail and "docs/configuration.md" in tail
    # What it points at works: the recorder wrote the two failed attempts of the dead socket, and
    # analyze replays each to the verdict it had (under the bounds the capture recorded).
    captures = sorted(pathlib.Path(tmp_path).glob("*.jsonl"), key=lambda p: p.name.rsplit("-", 1)[1])
    assert len(captures) == 2 and result["turns"][0]["attempts"] == 3
    for capture, expected in zip(captures, ["read_error", "first_byte_timeout"], strict=True):
        proc = subprocess.run([sys.executable, "-m", "otel_liveness", "analyze", str(capture), "--json"],
                              capture_output=True, text=True, timeout=60)
        assert json.loads(proc.stdout)["verdict"] == expected, capture.name


def test_demo_help_explains_the_columns() -> None:
    proc = subprocess.run([sys.executable, "-m", "otel_liveness", "demo", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "ntc: notices: 30 provider-seconds of semantic silence" in text and "prefix: bytes released" in text


# A meta-path finder that makes the named packages absent, as without the extra that brings them.
BLOCKER = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {blocked!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
from otel_liveness.cli import main
sys.exit(main({argv!r}))
"""


def demo_without(blocked: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKER.format(blocked=blocked, argv=["demo", "--scenario", "inband_overload", "--time-scale", "0.01", *argv])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_demo_runs_without_the_opentelemetry_sdk_and_says_what_it_skipped() -> None:
    proc = demo_without(("opentelemetry.sdk", "opentelemetry.exporter"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "telemetry: no summary -- the OpenTelemetry SDK is not installed (pip install 'otel-liveness[sdk]'" in proc.stdout
    assert "self-check: every turn behaved as the policy says" in proc.stdout


@pytest.mark.parametrize(("blocked", "argv", "message"), [
    (("opentelemetry.sdk", "opentelemetry.exporter"), ("--otlp", "http://127.0.0.1:9"),
     "otel-liveness demo: otel-liveness demo --otlp needs opentelemetry.exporter"),
    (("anthropic",), (), "otel-liveness demo: otel-liveness demo needs anthropic, which is not installed: "
                         "pip install 'otel-liveness[anthropic]' (from a checkout: pip install '.[anthropic]')"),
], ids=["otlp-without-sdk", "without-anthropic"])
def test_a_missing_extra_is_one_line_naming_it(blocked: tuple[str, ...], argv: tuple[str, ...], message: str) -> None:
    proc = demo_without(blocked, *argv)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr
    assert "[sdk]" in proc.stderr or "[anthropic]" in proc.stderr
