"""``otel-liveness analyze``: replay captures through the policy."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import subprocess
import sys

import pytest

from otel_liveness.cli import EXIT_BROKEN_PIPE, main

PING = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
START = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_9","model":"m"}}\n\n'
DELTA = 'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}\n\n'
STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def write(tmp_path: pathlib.Path, records: list[dict[str, object]] | str) -> str:
    path = tmp_path / "capture.jsonl"
    path.write_text(records if isinstance(records, str) else "\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def run_json(capsys: pytest.CaptureFixture[str], path: str, *args: str) -> dict[str, object]:
    assert main(["analyze", path, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def long_think(until: float, every: float = 10.0) -> list[dict[str, object]]:
    """message_start, then pings every ``every`` s until ``until``, then text and stop."""
    recs: list[dict[str, object]] = [{"t": 0.3, "data": START}]
    t = every
    while t < until:
        recs.append({"t": t, "data": PING})
        t += every
    recs += [{"t": until, "data": DELTA}, {"t": until + 1, "data": STOP}, {"t": until + 1.1, "eof": True}]
    return recs


def test_long_think_completes_and_a_decoded_event_watchdog_would_have_killed_it(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = run_json(capsys, write(tmp_path, long_think(300.0)), "--event-watchdog", "90")
    assert out["verdict"] == "completed" and out["at"] == 301.0 and out["committed"] is True
    assert out["event_watchdog"] == pytest.approx(90.3)
    assert out["notices"] == [30.0 * k for k in range(1, 11)]
    assert out["frames"] == {"end": 1, "heartbeat": 29, "preamble": 1, "semantic": 1}
    assert out["max_semantic_gap"] == pytest.approx(300.0)
    assert out["max_raw_gap"] == pytest.approx(10.0)


def test_short_stream_watchdog_does_not_fire(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = run_json(capsys, write(tmp_path, long_think(40.0)), "--event-watchdog", "90")
    assert out["verdict"] == "completed" and out["event_watchdog"] is None


def test_raw_silence_before_and_after_content(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    before = [{"t": 0.1, "data": START}, {"t": 5, "data": PING}, {"t": 500, "data": PING}]
    out = run_json(capsys, write(tmp_path, before), "--raw-idle", "20")
    assert (out["verdict"], out["at"], out["committed"]) == ("raw_silence", 25.0, False)
    after = [{"t": 0.1, "data": START}, {"t": 1, "data": DELTA}, {"t": 100, "data": DELTA}]
    out = run_json(capsys, write(tmp_path, after), "--raw-idle", "20")
    assert (out["verdict"], out["at"], out["committed"]) == ("raw_silence", 21.0, True)


def test_semantic_timeout_wall_and_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = write(tmp_path, long_think(300.0))
    out = run_json(capsys, path, "--semantic-timeout", "120")
    assert (out["verdict"], out["at"]) == ("semantic_timeout", 120.0)
    out = run_json(capsys, path, "--wall", "200")
    assert (out["verdict"], out["at"]) == ("wall_budget", 200.0)
    err = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    out = run_json(capsys, write(tmp_path, [{"t": 0, "data": START}, {"t": 1, "data": err}]))
    assert (out["verdict"], out["committed"], out["facts"]["error_type"]) == ("provider_error", False, "overloaded_error")  # type: ignore[index]


def test_eof_without_end_and_incomplete(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    recs = [{"t": 0, "data": START}, {"t": 1, "b64": base64.b64encode(DELTA.encode()).decode()}, {"t": 2, "eof": True}]
    out = run_json(capsys, write(tmp_path, recs))
    assert (out["verdict"], out["at"], out["committed"]) == ("eof_without_end", 2.0, True)
    out = run_json(capsys, write(tmp_path, recs[:2]))
    assert (out["verdict"], out["at"]) == ("incomplete", None)


def test_openai_chat_provider(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    recs = [{"t": 0, "data": 'data: {"id":"c1","choices":[{"delta":{"content":"hi"}}]}\n\n'},
            {"t": 1, "data": "data: [DONE]\n\n"}]
    out = run_json(capsys, write(tmp_path, recs), "--provider", "openai-chat")
    assert out["verdict"] == "completed" and out["frames"] == {"end": 1, "semantic": 1}


def test_human_timeline(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", write(tmp_path, long_think(100.0)), "--event-watchdog", "90"]) == 0
    text = capsys.readouterr().out
    assert "heartbeat x2" in text and "NOTICE semantic idle 30.0s" in text
    assert "verdict: completed at 101.000s" in text
    assert "90s decoded-event watchdog would have killed this stream at 90.300s" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"t": 0, "data": "x"}\nnot json\n', "record 2: not JSON"),
        ('{"data": "x"}\n', 'record 1: missing or non-numeric "t"'),
        ('{"t": "1", "data": "x"}\n', 'record 1: missing or non-numeric "t"'),
        ('{"t": 5, "data": "x"}\n{"t": 4, "data": "y"}\n', "record 2: time goes backwards"),
        ('{"t": 1}\n', "record 1: needs"),
        ('{"t": 1, "b64": "!!"}\n', "record 1: \"b64\" is not valid base64"),
        ('[1]\n', "record 1: expected an object"),
        ('{"t": 1, "eof": true}\n{"t": 2, "data": "x"}\n', "record 2: record after the eof record"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(tmp_path: pathlib.Path, content: str, message: str) -> None:
    path = write(tmp_path, content)
    proc = subprocess.run([sys.executable, "-m", "otel_liveness.cli", "analyze", path], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_missing_file(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_giant_frame_is_malformed_not_memory(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    recs = [{"t": 0, "data": "data: " + "a" * 5000}]
    out = run_json(capsys, write(tmp_path, recs), "--max-frame-bytes", "1024")
    assert out["verdict"] == "malformed"


def test_a_capture_ended_by_a_verdict_a_hair_early_replays_to_it() -> None:
    # The transport judges a read that wakes within TOLERANCE before a deadline at the deadline
    # (timers may fire a hair early; a loaded machine shifts its wake-ups). The capture's "end"
    # record is that moment; the replay must reach the same verdict, not call it incomplete.
    from otel_liveness.core.request.engine import TOLERANCE
    from otel_liveness.tools.analyze import analyze as replay
    from otel_liveness.tools.analyze import parse_capture as parse

    frame = 'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
    start = json.dumps({"t": 0.0, "data": frame})
    for end, verdict in ((0.3 - TOLERANCE / 2, "raw_silence"), (0.3 - 2 * TOLERANCE, "incomplete"), (0.3, "raw_silence")):
        chunks = parse([start, f'{{"t": {end}, "end": true}}'])
        assert replay(chunks, raw_idle=0.3, notice_every=None)["verdict"] == verdict, end


@pytest.mark.parametrize("args", [["--json"], []], ids=["json", "text"])
def test_output_into_a_closed_pipe_exits_quietly(tmp_path: pathlib.Path, args: list[str]) -> None:
    # `otel-liveness analyze --json | head -1` once head has gone: the reader's end of the pipe is
    # closed before the command writes, so its first write fails with EPIPE.
    path = write(tmp_path, long_think(300.0))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "otel_liveness", "analyze", path, *args],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert proc.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert proc.returncode == EXIT_BROKEN_PIPE == 141


def test_max_frame_bytes_has_help_and_a_bad_value_is_one_line(tmp_path: pathlib.Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    assert "largest frame the replay accepts" in " ".join(capsys.readouterr().out.split())
    assert main(["analyze", write(tmp_path, long_think(40.0)), "--max-frame-bytes", "0"]) == 2
    assert "max_frame_bytes" in capsys.readouterr().err


def record_one(tmp_path: pathlib.Path, script: list[object], **bounds: float) -> pathlib.Path:
    """One attempt through the transport with the flight recorder on and ``bounds`` set; its capture."""
    import httpx2

    import otel_liveness
    from otel_liveness import Policy
    from otel_liveness.testing import SimulatedProvider

    directory = tmp_path / "captures"
    policy = Policy(capture_dir=str(directory), max_attempts=1, **bounds)  # type: ignore[arg-type]
    with SimulatedProvider() as provider:
        url = provider.add("recorded", [script])
        with httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport(), policy, telemetry=False),
                           timeout=30) as client:
            with pytest.raises(Exception) as caught:  # the transport's typed failure, checked below
                with client.stream("POST", f"{url}/v1/messages", json={"stream": True}) as response:
                    response.read()
            assert otel_liveness.liveness_error(caught.value) is not None
    (path,) = directory.glob("*.jsonl")
    return path


@pytest.mark.parametrize(("bounds", "steps", "verdict"), [
    ({"raw_idle_timeout": 0.3}, "content", "raw_silence"),
    ({"first_byte_timeout": 0.3}, "headers", "first_byte_timeout"),
], ids=["raw", "first-byte"])
def test_a_recorder_capture_replays_under_the_bounds_it_recorded(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], bounds: dict[str, float], steps: str,
        verdict: str) -> None:
    from otel_liveness.testing import anthropic_reply
    from otel_liveness.testing import steps as s

    script = [s.Headers(), anthropic_reply()[0], s.Stall()] if steps == "content" else [s.Headers(), s.Stall()]
    path = str(record_one(tmp_path, script, **bounds))
    meta = json.loads(pathlib.Path(path).read_text().splitlines()[0])["meta"]
    raw = "raw_idle_timeout" in bounds
    key = "raw_bound" if raw else "first_byte_bound"
    assert meta[key] == 0.3
    # No option given: the capture's own bounds, so the replay reaches the verdict the live attempt had.
    out = run_json(capsys, path)
    assert out["verdict"] == verdict and out["at"] == pytest.approx(0.3, abs=0.25)
    assert out["bounds_from"] == {"raw": "recording", "first_byte": "recording"}
    assert (out["raw_bound"] if key == "raw_bound" else out["first_byte_bound"]) == 0.3
    # An option given wins: a 60 s bound has not fallen when the capture ends.
    again = run_json(capsys, path, "--raw-idle" if raw else "--first-byte", "60")
    assert again["verdict"] == "incomplete"
    assert again["bounds_from"] == ({"raw": "option", "first_byte": "recording"} if raw
                                    else {"raw": "recording", "first_byte": "option"})
    # The text timeline says where its bounds came from.
    assert main(["analyze", path]) == 0
    assert "(recording)" in capsys.readouterr().out.splitlines()[-1]


def test_a_capture_without_recorded_bounds_uses_the_defaults(tmp_path: pathlib.Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, write(tmp_path, long_think(40.0)))
    assert out["bounds_from"] == {"raw": "default", "first_byte": "default"} and out["raw_bound"] == 90.0


def test_raw_idle_off_switches_the_raw_bound_off(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    silent = [{"t": 0.1, "data": START}, {"t": 500, "data": DELTA}, {"t": 501, "data": STOP}, {"t": 501, "eof": True}]
    assert run_json(capsys, write(tmp_path, silent))["verdict"] == "raw_silence"
    out = run_json(capsys, write(tmp_path, silent), "--raw-idle", "off")
    assert out["verdict"] == "completed" and out["raw_bound"] is None
