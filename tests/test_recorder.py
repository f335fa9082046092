"""The flight recorder: where it writes, with what permissions, within what bounds, and how a
recording it cannot write becomes a logged, counted drop -- never an error in the application."""

from __future__ import annotations

import errno
import json
import logging
import os
import pathlib
import re
import stat
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import otel_liveness
from otel_liveness import Policy
from otel_liveness.core.events import AttemptEnded, RequestStarted
from otel_liveness.core.outcome import AttemptOutcome, AttemptRecord, RequestReport
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.tools.analyze import analyze, parse_capture
from otel_liveness.transport import _recorder
from otel_liveness.transport._recorder import FlightRecorder, recorder_stats

from .clients import run
from .conftest import FAST

NAME = re.compile(r"^\d{8}T\d{6}-[A-Za-z0-9_-]+-\d+-[0-9a-f]{8}-\d+\.jsonl$")
CAPTURE = [(0.01, {"status": 200, "content-type": "text/event-stream"}), (0.02, b"event: ping\ndata: {}\n\n"),
           (0.5, "end")]


def ended(request_id: str | None, outcome: AttemptOutcome = AttemptOutcome.RAW_SILENCE,
          capture: Any = CAPTURE) -> AttemptEnded:
    record = AttemptRecord(index=0, outcome=outcome, request_id=request_id)
    return AttemptEnded(RequestReport(provider="anthropic", streaming=True, attempts=[record]), record, capture)


def dropped(reason: str) -> int:
    return recorder_stats().dropped[reason]


@pytest.mark.parametrize("request_id", ["../../escape", "..", "/etc/passwd", "a/../../b", "..\\..\\x", "\x00nul",
                                        "x" * 500, ""])
def test_file_names_are_built_from_safe_characters_only(tmp_path: pathlib.Path, request_id: str) -> None:
    directory = tmp_path / "captures"
    recorder = FlightRecorder(str(directory))
    recorder(ended(request_id))
    (path,) = recorder.written
    assert pathlib.Path(path).parent == directory
    assert NAME.match(os.path.basename(path)), path
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [os.path.basename(path)]


def test_files_are_0600_in_a_directory_created_0700(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "a" / "b"
    recorder = FlightRecorder(str(directory))
    recorder(ended("req_1"))
    (path,) = recorder.written
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    records = [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]
    assert records[0]["meta"]["format"] == "full" and records[0]["meta"]["outcome"] == "raw_silence"
    assert [r.get("end") for r in records[1:]] == [None, None, True]


def test_a_provider_request_id_cannot_escape_the_directory_on_the_wire(provider: Any, tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "deep" / "captures"
    url = provider.add("rec-escape", [[s.Headers(headers=(("request-id", "../../../escaped"),)),
                                       *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
    result = run(("httpx2", None), FAST.replace(capture_dir=str(directory)), url + "/v1/messages")
    assert isinstance(result.error, otel_liveness.StreamTruncated)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1 and files[0].parent == directory and NAME.match(files[0].name)
    assert "escaped" in files[0].name and ".." not in files[0].name  # the id is kept, made harmless
    assert parse_capture(files[0].read_text().splitlines())[-1].data == "end"


def test_a_symlink_in_place_of_the_file_is_not_followed(tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "captures"
    directory.mkdir()
    target = tmp_path / "target"
    target.write_text("untouched")
    monkeypatch.setattr(_recorder.random, "getrandbits", lambda bits: 0xABCD)
    monkeypatch.setattr(_recorder.time, "strftime", lambda fmt, t: "20260101T000000")
    os.symlink(target, directory / f"20260101T000000-req_1-{os.getpid()}-0000abcd-0.jsonl")
    before = dropped("write_error")
    recorder = FlightRecorder(str(directory))
    recorder(ended("req_1"))
    assert recorder.written == [] and dropped("write_error") == before + 1
    assert target.read_text() == "untouched"


def test_an_unwritable_directory_is_a_logged_counted_drop_and_the_reply_is_untouched(
        provider: Any, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    url = provider.add("rec-unwritable", [[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
    before = dropped("write_error")
    with caplog.at_level(logging.DEBUG, logger="otel_liveness"):
        result = run(("httpx2", None), FAST.replace(capture_dir=str(blocker / "captures")), url + "/v1/messages")
    assert isinstance(result.error, otel_liveness.StreamTruncated)  # what the caller sees: the verdict, no OSError
    assert dropped("write_error") == before + 1
    assert any("flight recorder dropped a recording (write_error" in r.getMessage() for r in caplog.records)


def test_a_full_disk_is_a_counted_drop_without_a_partial_file(tmp_path: pathlib.Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    real_write = os.write
    calls = []

    def full(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))  # a short write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_recorder.os, "write", full)
    before = dropped("write_error")
    recorder = FlightRecorder(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="otel_liveness"):
        recorder(ended("req_full"))
    assert recorder.written == [] and list(tmp_path.iterdir()) == []
    assert dropped("write_error") == before + 1 and len(calls) == 2


def test_the_directory_stays_under_its_cap_oldest_first(tmp_path: pathlib.Path) -> None:
    one = len(json.dumps({"t": 0.0, "meta": FlightRecorder(str(tmp_path))._meta(ended("x"), "full")})) + 200
    policy = Policy(capture_dir=str(tmp_path), capture_max_bytes=3 * one)
    before = dropped("evicted")
    written = []
    for n in range(6):
        recorder = FlightRecorder(str(tmp_path), policy)
        recorder(ended(f"req_{n}"))
        (path,) = recorder.written
        os.utime(path, (1000 + n, 1000 + n))  # a clear order, whatever the file system's timestamps
        written.append(path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 3 * one
    assert left == sorted(os.path.basename(p) for p in written[-len(left):])  # the newest ones
    assert 1 <= len(left) < 6 and dropped("evicted") - before == 6 - len(left)


def test_a_recording_over_the_cap_is_dropped(tmp_path: pathlib.Path) -> None:
    before = dropped("too_large")
    recorder = FlightRecorder(str(tmp_path), Policy(capture_dir=str(tmp_path), capture_max_bytes=100))
    recorder(ended("req_big"))
    assert recorder.written == [] and list(tmp_path.iterdir()) == [] and dropped("too_large") == before + 1


def test_drops_are_a_telemetry_counter(tmp_path: pathlib.Path) -> None:
    reader = InMemoryMetricReader()
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), meter_provider=MeterProvider(metric_readers=[reader]))
    assert transport is not None
    FlightRecorder(str(tmp_path), Policy(capture_dir=str(tmp_path), capture_max_bytes=100))(ended("req_big"))
    data = reader.get_metrics_data()
    points = {p.attributes["liveness.recorder.reason"]: p.value
              for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name == "liveness.recorder.drops" for p in m.data.data_points}
    assert points["too_large"] == recorder_stats().dropped["too_large"] >= 1


def test_drops_are_reported_from_zero_once_a_recorder_exists(tmp_path: pathlib.Path) -> None:
    # A series that appears at its first drop hides that drop from increase() (and from the
    # FlightRecorderDropping alert): once a process made a recorder, every reason is reported.
    import subprocess
    import sys

    code = """
import otel_liveness, httpx2, sys
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from otel_liveness import Policy
from otel_liveness.transport._recorder import FlightRecorder

def points(reader):
    data = reader.get_metrics_data()
    return sorted((p.attributes["liveness.recorder.reason"], p.value) for rm in (data.resource_metrics if data else [])
                  for sm in rm.scope_metrics for m in sm.metrics if m.name == "liveness.recorder.drops"
                  for p in m.data.data_points)

reader = InMemoryMetricReader()
otel_liveness.wrap(httpx2.HTTPTransport(), meter_provider=MeterProvider(metric_readers=[reader]))
print(points(reader))
FlightRecorder(sys.argv[1], Policy(capture_dir=sys.argv[1]))
print(points(reader))
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    before, after = out.stdout.splitlines()
    assert before == "[]"  # a process that never made a recorder reports no series
    assert after == str(sorted((reason, 0) for reason in ("evicted", "too_large", "write_error")))


def test_completed_attempts_are_never_written_in_full_mode(tmp_path: pathlib.Path) -> None:
    recorder = FlightRecorder(str(tmp_path), Policy(capture_dir=str(tmp_path), capture_sample=1.0),
                              sample=lambda: 0.0)
    recorder(ended("req_ok", AttemptOutcome.COMPLETED))
    assert recorder.written == []


def test_the_meta_record_names_the_request_and_no_secret(tmp_path: pathlib.Path) -> None:
    report = RequestReport(provider="anthropic", streaming=True, shadow=True)
    started = RequestStarted(report, "POST", "api.example.com", 443, "/v1/messages", "claude-x",
                             {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}, 1234)
    recorder = FlightRecorder(str(tmp_path))
    recorder(started)
    record = AttemptRecord(index=1, outcome=AttemptOutcome.RAW_SILENCE, status=200, raw_bound=90.0)
    report.attempts.append(record)
    recorder(AttemptEnded(report, record, CAPTURE))
    (path,) = recorder.written
    meta = json.loads(pathlib.Path(path).read_text().splitlines()[0])["meta"]
    assert meta["host"] == "api.example.com" and meta["model"] == "claude-x" and meta["body_bytes"] == 1234
    assert meta["shadow"] is True and meta["attempt"] == 1 and meta["raw_bound"] == 90.0
    assert meta["content_type"] == "text/event-stream" and meta["provider"] == "anthropic"
    assert "traceparent" not in json.dumps(meta)
    # and the capture still replays as before
    assert analyze(parse_capture(pathlib.Path(path).read_text().splitlines()), raw_idle=0.4)["verdict"] == "raw_silence"


def test_the_recorder_fields_read_from_the_environment() -> None:
    policy = Policy.from_env({"OTEL_LIVENESS_CAPTURE_DIR": "/x", "OTEL_LIVENESS_CAPTURE_MODE": "Timing",
                              "OTEL_LIVENESS_CAPTURE_SAMPLE": "0.25", "OTEL_LIVENESS_CAPTURE_MAX_BYTES": "1048576"})
    assert (policy.capture_mode, policy.capture_sample, policy.capture_max_bytes) == ("timing", 0.25, 1048576)
    for key, value in (("OTEL_LIVENESS_CAPTURE_MODE", "bytes"), ("OTEL_LIVENESS_CAPTURE_SAMPLE", "2"),
                       ("OTEL_LIVENESS_CAPTURE_SAMPLE", "some"), ("OTEL_LIVENESS_CAPTURE_MAX_BYTES", "off"),
                       ("OTEL_LIVENESS_CAPTURE_MAX_BYTES", "0")):
        with pytest.raises(otel_liveness.InvalidPolicy, match=key.removeprefix("OTEL_LIVENESS_").lower() + "|" + key):
            Policy.from_env({key: value})


@pytest.mark.parametrize(("draw", "written"), [(0.1, True), (0.3, False)])
def test_timing_mode_writes_a_sample_of_completed_attempts(tmp_path: pathlib.Path, draw: float, written: bool) -> None:
    policy = Policy(capture_dir=str(tmp_path), capture_mode="timing", capture_sample=0.2)
    recorder = FlightRecorder(str(tmp_path), policy, sample=lambda: draw)
    recorder(ended("req_ok", AttemptOutcome.COMPLETED))
    assert bool(recorder.written) is written
    recorder(ended("req_failed", AttemptOutcome.RAW_SILENCE))  # failed attempts: always
    assert len(recorder.written) == 1 + written
    lines = pathlib.Path(recorder.written[-1]).read_text().splitlines()
    assert json.loads(lines[0])["meta"]["format"] == "timing"
    assert json.loads(lines[2]) == {"t": 0.02, "kind": "heartbeat", "size": len(b"event: ping\ndata: {}\n\n")}
