"""``otel-liveness whatif`` / ``tune`` and the timing-only recorder: the arithmetic against
recordings whose truth is known (every verdict time computed by hand below), censoring, both
formats, malformed files, the rate on 10,000 recordings, and the loop on the simulated provider."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import pytest

from otel_liveness import Policy
from otel_liveness.cli import main
from otel_liveness.core.events import AttemptEnded, Event
from otel_liveness.core.outcome import FrameKind
from otel_liveness.core.wire.framing import framer_for
from otel_liveness.core.wire.providers import PROFILES
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import PING
from otel_liveness.tools.analyze import judge
from otel_liveness.tools.recordings import KINDS, frame_bytes, parse_recording
from otel_liveness.tools.tune import fit_first_byte, tune
from otel_liveness.tools.whatif import load, parse_policy, whatif
from otel_liveness.transport._recorder import capture_lines, timing_lines

from .clients import run
from .conftest import FAST

MIB = 1024 * 1024
SSE = {"headers": 200, "content_type": "text/event-stream"}


def write(directory: pathlib.Path, name: str, records: list[dict[str, Any]]) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def timing(meta: dict[str, Any], *events: tuple[float, str] | dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"t": 0, "meta": {"format": "timing", "provider": "anthropic", "host": "h", **meta}}]
    for event in events:
        out.append(event if isinstance(event, dict) else {"t": event[0], "kind": event[1], "size": 60})
    return out


def known_truth(directory: pathlib.Path) -> None:
    """Five attempts; the verdict times in the tests below are computed by hand from these."""
    # A: healthy, 1 MiB prompt, 30 s prefill, pings 25 s apart, then the reply.
    write(directory, "a.jsonl", timing({"body_bytes": MIB, "shadow": True, "outcome": "completed"},
                                       {"t": 0.2, **SSE}, (30, "preamble"), (55, "heartbeat"), (80, "heartbeat"),
                                       (81, "content"), (82, "stop"), {"t": 82, "eof": True}))
    # B: dead mid-thought (shadow: the recording runs on until the client gives up at 200 s).
    write(directory, "b.jsonl", timing({"body_bytes": 0, "shadow": True, "outcome": "raw_silence"},
                                       {"t": 0.2, **SSE}, (5, "preamble"), (30, "heartbeat"), {"t": 200, "end": True}))
    # C: dead in the prefill, 2 MiB prompt: headers, then nothing until 300 s.
    write(directory, "c.jsonl", timing({"body_bytes": 2 * MIB, "shadow": True, "outcome": "raw_silence"},
                                       {"t": 0.1, **SSE}, {"t": 300, "end": True}))
    # D: censored: enforced, content released at 2 s, killed by the recording-time 90 s raw bound.
    write(directory, "d.jsonl", timing({"body_bytes": 100, "shadow": False, "outcome": "raw_silence"},
                                       {"t": 0.1, **SSE}, (1, "preamble"), (2, "content"), {"t": 92, "end": True}))
    # E: a full capture (bytes), healthy; its headers record carries provider and body size.
    ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
    start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\"}}\n\n"
    delta = ("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
             "\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n")
    write(directory, "e.jsonl", [{"t": 0.1, **SSE, "provider": "anthropic", "body_bytes": 1024},
                                 {"t": 1, "data": start}, {"t": 16, "data": ping}, {"t": 31, "data": ping},
                                 {"t": 32, "data": delta}, {"t": 33, "data": "event: message_stop\ndata: {}\n\n"},
                                 {"t": 33, "eof": True}])


P1 = "p1=raw=20,first_byte_base=10,first_byte_per_mib=10"
P2 = "p2=raw=40,first_byte_base=10,first_byte_per_mib=10"


def test_whatif_arithmetic_against_known_truth(tmp_path: pathlib.Path) -> None:
    known_truth(tmp_path)
    recordings, errors = load([str(tmp_path)])
    assert errors == [] and len(recordings) == 5
    result = whatif(recordings, dict([parse_policy(P1), parse_policy(P2), parse_policy("defaults=")]))
    assert result["attempts"] == 5 and result["went_silent"] == 2 and result["censored"] == 1
    p1, p2, defaults = (result["policies"][n] for n in ("p1", "p2", "defaults"))
    # p1: A first byte due at max(10 + 10 x 1 MiB, raw 20) = 20 s, before its 30 s prefill: a false
    # kill. B's 25 s ping gap > 20: killed at 5 + 20 = 25 s while alive (false, and not a
    # detection). C: max(10 + 20, 20) = 30 s, 29.9 s after its headers. D: 2 + 20 = 22 s, before
    # its recorded kill at 92. E: gaps of 15 s, completes.
    assert (p1["kills"], p1["false_kills"], p1["missed"], p1["caught"]) == (4, 2, 0, 1)
    assert p1["detection_s"] == {"p50": 29.9, "p95": 29.9, "max": 29.9}
    assert (p1["uploads"], p1["upload_bytes"]) == (3, 3 * MIB)  # A, B, C before content; D had released content
    assert p1["censored"] == 1 and p1["censored_killed_earlier"] == 1
    assert p1["verdicts"] == {"completed": 1, "first_byte_timeout": 2, "raw_silence": 2}
    # p2: A's first byte is due at max(20, 40) = 40 > 30, gaps 25 < 40: completes. B: 30 + 40 = 70 s
    # (40.0 after its last ping). C: max(30, 40) = 40 s (39.9). D: 42 s.
    assert (p2["kills"], p2["false_kills"], p2["missed"], p2["caught"]) == (3, 0, 0, 2)
    assert p2["detection_s"] == {"p50": 39.9, "p95": 40.0, "max": 40.0}
    assert (p2["uploads"], p2["upload_bytes"]) == (2, 2 * MIB)
    # defaults: B at 30 + 90 = 120 (90.0); C at max(60 + 120, 90) = 180 (179.9); D's verdict falls
    # at 92, its recording's own end: not a kill, censored.
    assert (defaults["kills"], defaults["false_kills"], defaults["missed"]) == (2, 0, 0)
    assert defaults["detection_s"] == {"p50": 90.0, "p95": 179.9, "max": 179.9}
    assert defaults["censored_killed_earlier"] == 0


def test_a_silent_attempt_no_bound_reaches_is_missed(tmp_path: pathlib.Path) -> None:
    # shadow, dead after its last ping at 30 s; the client gave up at 100 s: a 90 s bound is due at
    # 120, after the recording's end: missed; a 40 s bound catches it at 70.
    write(tmp_path, "m.jsonl", timing({"shadow": True, "outcome": "cancelled"}, {"t": 0.1, **SSE}, (1, "preamble"),
                                      (30, "heartbeat"), {"t": 100, "end": True}))
    recordings, _ = load([str(tmp_path)])
    result = whatif(recordings, dict([parse_policy("defaults="), parse_policy("raw40=raw=40")]))
    assert result["policies"]["defaults"]["missed"] == 1 and result["policies"]["defaults"]["kills"] == 0
    assert result["policies"]["raw40"]["detection_s"]["max"] == 40.0


def test_censoring(tmp_path: pathlib.Path) -> None:
    old = write(tmp_path, "old.jsonl", [{"t": 0.1, **SSE}, {"t": 1, "data": ": x\n\n"}, {"t": 91, "end": True}])
    shadow = write(tmp_path, "shadow.jsonl", timing({"shadow": True, "outcome": "raw_silence"}, {"t": 0.1, **SSE},
                                                     (1, "comment"), {"t": 91, "end": True}))
    broke = write(tmp_path, "broke.jsonl", timing({"shadow": False, "outcome": "connection_error"},
                                                  {"t": 0.1, **SSE}, (1, "comment"), {"t": 1.2, "error": "read_error"}))
    timeout = write(tmp_path, "timeout.jsonl", timing({"shadow": True, "outcome": "connection_error"},
                                                      {"t": 0.1, **SSE}, (1, "comment"), {"t": 150, "error": "read_error"}))
    by_name = {pathlib.Path(r.source).name: r for r in load([str(tmp_path)])[0]}
    assert by_name[old.name].censored and not by_name[old.name].went_silent  # no description: taken as cut
    assert not by_name[shadow.name].censored and by_name[shadow.name].went_silent  # shadow never cuts
    assert not by_name[broke.name].went_silent  # the wire broke 0.2 s after a byte: nothing to detect
    assert by_name[timeout.name].went_silent  # a client's timeout after 149 s of silence
    result = whatif(list(by_name.values()), dict([parse_policy("defaults=")]))
    assert result["censored"] == 1 and result["policies"]["defaults"]["censored"] == 1


@pytest.mark.parametrize("provider", sorted(PROFILES))
def test_rebuilt_frames_are_judged_as_their_kind(provider: str) -> None:
    eventstream = PROFILES[provider].framing == "eventstream"
    content_type = "application/vnd.amazon.eventstream" if eventstream else "text/event-stream"
    expect = {"heartbeat": FrameKind.HEARTBEAT, "comment": FrameKind.HEARTBEAT, "preamble": FrameKind.PREAMBLE,
              "content": FrameKind.SEMANTIC, "stop": FrameKind.END, "error": FrameKind.ERROR,
              "other": FrameKind.SEMANTIC}  # fail open: a frame no profile recognises is content
    for kind in KINDS:
        for size in (0, 500):
            data = frame_bytes(provider, kind, size, eventstream=eventstream)
            got = framer_for(PROFILES[provider], 1 << 20, content_type).feed(data)
            if size > len(frame_bytes(provider, kind, 0, eventstream=eventstream)):
                assert len(data) == size, (provider, kind)
            if got and got[0] is expect.get(kind):
                continue
            # The wire has no such frame: raw progress without a frame, or a comment for a heartbeat.
            framing = [FrameKind.PREAMBLE] if eventstream else []  # an event stream has no frame-less bytes
            assert got in ([], [FrameKind.HEARTBEAT], framing), (provider, kind, got)
            assert kind != "content" and kind != "error", (provider, kind)
            assert kind != "content" and kind != "error", (provider, kind)


def test_a_timing_recording_replays_as_the_capture_of_the_same_attempt(provider: Any, tmp_path: pathlib.Path) -> None:
    """The same wire attempt, written both ways, is judged the same under several policies."""
    url = provider.add("timing-same", [[s.Headers(), *anthropic_reply("abcdef", think_pings=3, ping_every=10, deltas=3,
                                                                      stall_after=2), s.Stall()]])
    ended: list[AttemptEnded] = []

    def keep(event: Event) -> None:
        if isinstance(event, AttemptEnded):
            ended.append(event)

    run(("httpx2", None), FAST.replace(capture_dir=str(tmp_path), max_attempts=1), url + "/v1/messages",
        hooks=[keep])
    (event,) = ended
    assert event.capture is not None
    full = parse_recording(list(capture_lines(event.capture)))
    lines = list(timing_lines(event.capture, "anthropic"))
    assert "abcdef"[:2] not in "".join(lines) and "text_delta" not in "".join(lines)  # no content
    kinds = [json.loads(line).get("kind") for line in lines]
    assert kinds.count("heartbeat") == 3 and kinds.count("content") >= 2 and kinds[1] == "preamble"
    rebuilt = parse_recording([json.dumps({"t": 0, "meta": {"format": "timing"}}), *lines])
    seen = set()
    for raw in (0.05, 0.15, 0.3, 1.0):
        policy = Policy(raw_idle_timeout=raw, first_byte_timeout=None, semantic_notice_interval=None)
        a, b = judge(full.chunks, "anthropic", policy), judge(rebuilt.chunks, "anthropic", policy)
        assert (a.verdict, a.committed) == (b.verdict, b.committed), raw
        assert (a.at is None) == (b.at is None) and (a.at is None or math.isclose(a.at, b.at or 0, abs_tol=1e-6))
        seen.add((a.verdict, a.committed))
    assert {("raw_silence", False), ("raw_silence", True), ("incomplete", True)} <= seen, seen  # pings, stall, end


def test_the_timing_recorder_on_the_wire_writes_completed_attempts_without_content(provider: Any,
                                                                                      tmp_path: pathlib.Path) -> None:
    url = provider.add("timing-wire", [[s.Headers(), *anthropic_reply("secret words", think_pings=2, ping_every=0.05)]])
    policy = FAST.replace(capture_dir=str(tmp_path), capture_mode="timing", capture_sample=1.0)
    kept: list[Any] = []

    def keep(event: Event) -> None:
        if isinstance(event, AttemptEnded):
            kept.extend(data for _, data in event.capture or ())

    result = run(("httpx2", None), policy, url + "/v1/messages", hooks=[keep])
    assert result.error is None
    # What the engine kept while the stream ran: frame kinds and sizes, not a byte of the body.
    assert kept and not any(isinstance(data, bytes) for data in kept)
    assert ("heartbeat", len(PING)) in [frame for data in kept if isinstance(data, tuple) for frame in data]
    (path,) = tmp_path.glob("*.jsonl")
    text = path.read_text()
    assert "secret" not in text and "words" not in text
    rec = parse_recording(text.splitlines(), str(path))
    assert rec.meta["format"] == "timing" and rec.meta["outcome"] == "completed" and rec.ending == "eof"
    assert rec.meta["body_bytes"] and rec.meta["host"] == "127.0.0.1" and rec.meta["shadow"] is False
    assert {"heartbeat", "preamble", "content", "stop"} <= rec.kinds
    assert judge(rec.chunks, rec.provider, FAST, rec.body_bytes).verdict == "completed"


def test_cli_json_has_exactly_the_documented_keys(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    known_truth(tmp_path)
    assert main(["whatif", str(tmp_path), "--policy", P1, "--policy", "defaults=", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attempts"] == 5 and set(out["policies"]) == {"p1", "defaults"}
    for row in out["policies"].values():
        assert {"kills", "false_kills", "missed", "censored", "uploads", "detection_s"} <= set(row)
        assert set(row["detection_s"]) == {"p50", "p95", "max"}
    assert out["policies"]["p1"]["kills"] == 4


def test_cli_text_is_a_table(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    known_truth(tmp_path)
    assert main(["whatif", str(tmp_path / "b.jsonl"), str(tmp_path / "c.jsonl"), "--policy", P2]) == 0
    text = capsys.readouterr().out
    assert "2 attempts: 2 went silent for good, 0 censored" in text
    header, rule, row = text.splitlines()[2:5]
    assert header.split()[:4] == ["policy", "kills", "false", "kills"] and set(rule) == {"-"}
    assert row.split() == ["p2", "2", "0", "0", "2", "39.9s", "40.0s", "40.0s"]


def test_malformed_files_are_named_with_their_line_and_the_others_still_read(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    known_truth(tmp_path)
    write(tmp_path / "sub", "bad-json.jsonl", [{"t": 0, "meta": {}}, {"t": 1, **SSE}])
    (tmp_path / "sub" / "bad-json.jsonl").write_text('{"t": 0, "meta": {}}\n{"t": 1, "headers": 200}\n{oops\n')
    write(tmp_path / "sub", "bad-kind.jsonl", [{"t": 0.1, **SSE}, {"t": 1, "kind": "ping", "size": 1}])
    write(tmp_path / "sub", "backwards.jsonl", [{"t": 2, **SSE}, {"t": 1, "kind": "content", "size": 1}])
    (tmp_path / "sub" / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    assert main(["whatif", str(tmp_path), "--policy", P1, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["attempts"] == 5 and out["policies"]["p1"]["kills"] == 4  # the five good files, as before
    errors = {pathlib.Path(e["file"]).name: e["error"] for e in out["unreadable"]}
    assert "line 3: not JSON" in errors["bad-json.jsonl"]
    assert "line 2: unknown \"kind\" 'ping'" in errors["bad-kind.jsonl"]
    assert "line 2: time goes backwards" in errors["backwards.jsonl"]
    assert "not UTF-8" in errors["binary.jsonl"]
    for name, error in errors.items():
        assert error.startswith(str(tmp_path / "sub" / name)) and error in captured.err
    assert main(["whatif", str(tmp_path / "sub"), "--policy", P1]) == 2  # nothing readable
    capsys.readouterr()
    assert main(["whatif", str(tmp_path), "--policy", "p=nonsense=1"]) == 2
    assert "unknown field 'nonsense'" in capsys.readouterr().err


def test_policy_specs() -> None:
    assert parse_policy("x=raw=45,first_byte_timeout=auto")[1] == Policy(raw_idle_timeout=45.0)
    assert parse_policy("x=first_byte=off,semantic=600")[1] == Policy(first_byte_timeout=None, semantic_timeout=600.0)
    assert parse_policy("d=")[1] == Policy() == parse_policy("d=defaults")[1]
    for bad in ("nameonly", "=raw=1", "x=raw", "x=raw=-1", "x=max_attempts=off"):
        with pytest.raises(ValueError):
            parse_policy(bad)


def test_ten_thousand_recordings_replay_every_one(tmp_path: pathlib.Path) -> None:
    # The recordings benchmarks/bench_whatif.py times (its replay rate is a benchmark's figure, with a
    # target there: not a timed unit test): every one loads, and each is judged as the defaults would.
    from benchmarks.bench_whatif import recordings, replay

    recordings(tmp_path, 10_000)
    result = replay(tmp_path)
    assert result["attempts"] == 10_000 and result["went_silent"] == 1000
    assert result["policies"]["defaults"]["false_kills"] == 0
    assert result["policies"]["defaults"]["detection_s"]["max"] == 90.0


# -- tune -------------------------------------------------------------------------------------------

def test_first_byte_fit_lies_over_every_prefill() -> None:
    pairs = [(0.0, 5.0), (1.0, 35.0), (2.0, 65.0), (0.5, 21.0)]  # 5 + 30/MiB, one 1 s slow
    fit = fit_first_byte(pairs, 0.0, 1.5)
    assert fit["first_byte_per_mib"] >= 1.5 * 29.0 and fit["base_needed_s"] >= 5.0
    for x, y in pairs:
        assert fit["first_byte_base"] + fit["first_byte_per_mib"] * x >= 1.5 * y - 1e-6


def test_tune_recommends_from_gaps_and_prefills_and_validates_on_held_out(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(40):
        mib = (i % 5) * 0.25
        prefill = 2.0 + 20.0 * mib
        gap = 25.0 + (i % 9)  # pings 25..33 s apart
        events: list[Any] = [{"t": 0.1, **SSE}, (prefill, "preamble"), (prefill + gap, "heartbeat"),
                             (prefill + 2 * gap, "heartbeat")]
        if i % 10 == 9:  # dead after its second ping
            events.append({"t": prefill + 2 * gap + 300, "end": True})
        else:
            events += [(prefill + 2 * gap + 1, "content"), (prefill + 2 * gap + 2, "stop"),
                       {"t": prefill + 2 * gap + 2, "eof": True}]
        write(tmp_path, f"r{i:03d}.jsonl", timing({"body_bytes": int(mib * MIB), "shadow": True,
                                                   "outcome": "raw_silence" if i % 10 == 9 else "completed"}, *events))
    recordings, _ = load([str(tmp_path)])
    result = tune(recordings)
    assert (result["fit_attempts"], result["holdout_attempts"]) == (30, 10)
    (group,) = result["groups"]
    fitted_max_gap = max(25.0 + (i % 9) for i in range(40) if i % 4 != 3)
    assert group["max_gap_s"] == fitted_max_gap and group["recommended_s"] == math.ceil(fitted_max_gap * 1.5)
    assert result["settings"]["raw_idle_timeout"] == math.ceil(fitted_max_gap * 1.5)
    assert math.isclose(result["first_byte"]["slope_s_per_mib"], 20.0, abs_tol=1e-6)
    assert result["first_byte"]["first_byte_base"] == 3.0 and result["first_byte"]["first_byte_per_mib"] == 30.0
    held = result["holdout"]
    assert held["tuned"]["false_kills"] == 0 and held["tuned"]["missed"] == 0
    assert held["tuned"]["detection_s"]["max"] < held["defaults"]["detection_s"]["max"]
    assert main(["tune", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    env = [line for line in lines if not line.startswith("#")]
    assert env == [f"OTEL_LIVENESS_RAW_IDLE_TIMEOUT={math.ceil(fitted_max_gap * 1.5)}",
                   "OTEL_LIVENESS_FIRST_BYTE_TIMEOUT=auto", "OTEL_LIVENESS_FIRST_BYTE_BASE=3",
                   "OTEL_LIVENESS_FIRST_BYTE_PER_MIB=30"]
    assert Policy.from_env(dict(line.split("=", 1) for line in env)).raw_idle_timeout == math.ceil(fitted_max_gap * 1.5)
    # A false-kill rate lets the largest gaps go: with R = 0.1 the three largest of 30 may exceed it.
    assert main(["tune", str(tmp_path), "--max-false-kill-rate", "0.1", "--json"]) == 0
    relaxed = json.loads(capsys.readouterr().out)
    assert relaxed["groups"][0]["needed_s"] < fitted_max_gap and relaxed["fit"]["false_kills"] <= 3


def test_tune_demo_closes_the_loop() -> None:
    from otel_liveness.tools.tune_demo import run_tune_demo

    # 0.02: a loaded machine's delays stay small; 16 attempts fit 12, below tune's minimum: lowered
    result = run_tune_demo(attempts=16, time_scale=0.02, seed=3, min_attempts=8)
    assert result["recordings"] == 16 and result["unreadable"] == [] and result["named_by_attempt"] == 16
    assert result["fleet"] == {"healthy": 12, "dead_prefill": 2, "dead_thinking": 2}
    compared = result["whatif"]["policies"]
    assert compared["tight-20"]["false_kills"] > 0  # pings 22-30 s apart
    assert compared["defaults"]["false_kills"] == 0
    replayed = result["replayed"]["policies"]
    assert replayed["tuned"]["false_kills"] == 0 and replayed["tuned"]["missed"] == 0
    assert replayed["tuned"]["detection_s"]["p50"] < replayed["defaults"]["detection_s"]["p50"]
    assert result["ok"] is True


def test_the_tune_demo_fleet_is_drawn_from_its_seed_alone() -> None:
    from otel_liveness.tools.tune_demo import fleet

    assert fleet(24, 7) == fleet(24, 7)
    assert [a.body_bytes for a in fleet(24, 7)] != [a.body_bytes for a in fleet(24, 8)]


def test_tune_demo_recordings_are_named_after_the_fleet_attempt(tmp_path: pathlib.Path) -> None:
    from otel_liveness.tools.tune import split
    from otel_liveness.tools.tune_demo import name_by_scenario

    # The recorder's names: written time, request id, pid, a random tag, attempt (the order of
    # writing is not the fleet's).
    written = {"20261203T101500-req_sim_000002-4242-9f0c11aa-0.jsonl": "tune-0001",
               "20261203T101459-req_sim_000001-4242-03be7c21-0.jsonl": "tune-0002",
               "20261203T101458-req_sim_000003-4242-ffe01b3d-0.jsonl": "tune-0000",
               "20261203T101501-req_unknown-4242-00000000-0.jsonl": None}
    for name in written:
        write(tmp_path, name, timing({"body_bytes": 10}, {"t": 1, "eof": True}))
    scenario_of = {"req_sim_000001": "tune-0002", "req_sim_000002": "tune-0001", "req_sim_000003": "tune-0000"}
    assert name_by_scenario(str(tmp_path), scenario_of) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "20261203T101501-req_unknown-4242-00000000-0.jsonl", "tune-0000.jsonl", "tune-0001.jsonl", "tune-0002.jsonl"]
    recordings, _ = load([str(tmp_path)])
    _, held = split([r for r in recordings if "tune-" in r.source], 0.5)
    assert [pathlib.Path(r.source).name for r in held] == ["tune-0001.jsonl"]


def test_analyze_reads_a_timing_recording_on_its_own_wire(tmp_path: pathlib.Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "chat.jsonl", [{"t": 0, "meta": {"format": "timing", "provider": "openai-chat",
                                                            "body_bytes": 2 * MIB}},
                                          {"t": 0.1, **SSE}, {"t": 1, "kind": "preamble", "size": 80},
                                          {"t": 2, "kind": "content", "size": 90}, {"t": 3, "kind": "stop", "size": 14},
                                          {"t": 3, "eof": True}])
    assert main(["analyze", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["provider"] == "openai-chat" and out["verdict"] == "completed" and out["at"] == 3
    assert out["first_byte_bound"] == 600.0  # max(60 + 60 x 2, the wire-silent raw bound 600)
    assert out["frames"] == {"end": 1, "preamble": 1, "semantic": 1}


def test_recordings_without_a_provider_take_the_one_given(tmp_path: pathlib.Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # An OpenAI Chat Completions capture from before the description record: wire-silent while the
    # model reasons (no keep-alive), a 300 s silence, then the reply. On its own wire the raw bound
    # is the no-keepalive one (600 s): no kill; read as Anthropic (90 s), a false kill.
    chunk = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    write(tmp_path, "chat.jsonl", [{"t": 0.1, **SSE}, {"t": 1, "data": chunk}, {"t": 301, "data": chunk},
                                   {"t": 302, "data": "data: [DONE]\n\n"}, {"t": 302, "eof": True}])
    for provider, false_kills in (("openai-chat", 0), ("anthropic", 1)):
        assert main(["whatif", str(tmp_path), "--provider", provider, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["policies"]["defaults"]["false_kills"] == false_kills, provider


def test_the_end_of_the_body_is_wire_activity_and_encoding_is_dropped_for_rebuilt_frames(tmp_path: pathlib.Path) -> None:
    # The last frame at 10 s, the body's end at 100 s: a 50 s bound kills at 60 s, before the wire
    # said its last word -- a false kill, not a detection. The recording has no description and a
    # gzip header: its frames are rebuilt, unencoded, and judged all the same.
    write(tmp_path, "late-eof.jsonl", [{"t": 0.1, **SSE, "content_encoding": "gzip", "provider": "anthropic"},
                                       {"t": 1, "kind": "preamble", "size": 100}, {"t": 10, "kind": "content", "size": 50},
                                       {"t": 100, "eof": True}])
    recordings, errors = load([str(tmp_path)])
    assert errors == [] and recordings[0].timing and "content-encoding" not in recordings[0].chunks[0].data  # type: ignore[operator]
    row = whatif(recordings, dict([parse_policy("r=raw=50")]))["policies"]["r"]
    assert (row["kills"], row["false_kills"], row["caught"], row["missed"]) == (1, 1, 0, 0)
    assert row["verdicts"] == {"raw_silence": 1}


def test_what_went_silent_excludes_answers_and_the_policy_s_own_cuts() -> None:
    """An error status left unread is an answer, a wall-budget cut may have cut a speaking wire,
    and a truncation by a kill of silence is censored like a kill before content."""
    def rec(meta: dict[str, Any], *records: dict[str, Any]) -> Any:
        lines = [json.dumps({"t": 0, "meta": {"format": "timing", "provider": "anthropic", **meta}})]
        return parse_recording([*lines, *map(json.dumps, records)])

    status = rec({"outcome": "rate_limited"}, {"t": 0.1, "headers": 429}, {"t": 5.0, "end": True})
    assert not status.went_silent and not status.censored
    wall = rec({"outcome": "wall_budget"}, {"t": 0.1, **SSE}, {"t": 1, "kind": "preamble", "size": 60},
               {"t": 60, "end": True})
    assert not wall.went_silent and not wall.censored
    cut = rec({"outcome": "truncated", "error_type": "raw_silence"}, {"t": 0.1, **SSE},
              {"t": 1, "kind": "content", "size": 60}, {"t": 91, "end": True})
    assert cut.censored and not cut.went_silent
    shadow_cut = rec({"outcome": "truncated", "error_type": "raw_silence", "shadow": True}, {"t": 0.1, **SSE},
                     {"t": 1, "kind": "content", "size": 60}, {"t": 200, "end": True})
    assert shadow_cut.went_silent and not shadow_cut.censored  # (shadow: nothing was cut)
    broken = rec({"outcome": "truncated", "error_type": "read_error"}, {"t": 0.1, **SSE},
                 {"t": 1, "kind": "content", "size": 60}, {"t": 1.2, "error": "read_error"})
    assert not broken.went_silent and not broken.censored


def _short_streams(directory: pathlib.Path, count: int, gap: float = 0.5) -> None:
    """``count`` healthy recordings with no pause in them: deltas ``gap`` s apart (no thinking)."""
    for i in range(count):
        events: list[Any] = [{"t": 0.1, **SSE}, (1.0, "preamble")]
        events += [(1.0 + gap * k, "content") for k in range(1, 6)]
        events += [(1.0 + gap * 6, "stop"), {"t": 1.0 + gap * 6, "eof": True}]
        write(directory, f"s{i:03d}.jsonl", timing({"body_bytes": 1000 + i, "shadow": True, "outcome": "completed"},
                                                   *events))


def test_tune_never_prints_a_bound_fitted_from_too_few_attempts_ready_to_paste(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    from otel_liveness.tools.tune import MIN_ATTEMPTS

    _short_streams(tmp_path, 4, gap=40.0)  # gaps of 40 s: 60 s would be above the floor
    assert main(["tune", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    ready = [line for line in out.splitlines() if not line.startswith("#")]
    assert ready == []  # what `tune DIR | grep -v '^#' > liveness.env` keeps: nothing
    assert f"# not recommended: OTEL_LIVENESS_RAW_IDLE_TIMEOUT=60 -- fitted from 3 anthropic attempts, fewer than " \
           f"{MIN_ATTEMPTS} (--min-attempts overrides)" in out
    assert main(["tune", str(tmp_path), "--min-attempts", "3"]) == 0
    assert "OTEL_LIVENESS_RAW_IDLE_TIMEOUT=60" in [line for line in capsys.readouterr().out.splitlines()
                                                   if not line.startswith("#")]
    assert main(["tune", str(tmp_path), "--min-attempts", "0"]) == 2


def test_tune_never_prints_a_raw_bound_below_its_floor(tmp_path: pathlib.Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _short_streams(tmp_path, 40)  # half-second gaps: 1 s fitted, which would kill every long think
    recordings, _ = load([str(tmp_path)])
    result = tune(recordings)
    assert "raw_idle_timeout" not in result["settings"] and not any("RAW_IDLE" in e for e in result["env"])
    (withheld,) = [w for w in result["withheld"] if w["field"] == "raw_idle_timeout"]
    assert withheld["value"] == 1.0 and "below the floor of 45s" in withheld["why"]
    assert "raw_idle_timeout" not in result["candidate"]


def test_an_empty_capture_is_unreadable_not_an_attempt(tmp_path: pathlib.Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    known_truth(tmp_path)
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["whatif", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attempts"] == 5 and [pathlib.Path(e["file"]).name for e in out["unreadable"]] == ["empty.jsonl"]
    assert main(["analyze", str(tmp_path / "empty.jsonl")]) == 2
    assert "no records" in capsys.readouterr().err


def test_a_capture_whose_last_line_was_cut_is_read_up_to_it(tmp_path: pathlib.Path) -> None:
    whole = "".join(json.dumps(r) + "\n" for r in [{"t": 0.1, **SSE}, {"t": 1, "kind": "content", "size": 5}])
    path = tmp_path / "cut.jsonl"
    path.write_text(whole + '{"t": 2, "kind": "con')  # the process was killed mid-line
    recording = parse_recording(path.read_text().splitlines(keepends=True), str(path))
    assert recording.first_byte == 1 and recording.end == 1
    path.write_text(whole + '{"t": 2, "kind": "con\n{"t": 3, "eof": true}\n')  # not the last line: corrupt
    with pytest.raises(Exception, match="line 3: not JSON"):
        parse_recording(path.read_text().splitlines(keepends=True), str(path))


def test_replay_names_an_in_band_rejection_and_follows_a_long_silence_to_its_verdict() -> None:
    from otel_liveness.core.tuning.replay import judge as judge_chunks

    recording = parse_recording([json.dumps(r) + "\n" for r in timing(
        {"provider": "anthropic"}, {"t": 0.1, **SSE}, (1, "preamble"), (2, "error"), {"t": 2, "eof": True})])
    # An error frame of a final type before content: the provider's answer (not a clock's verdict).
    assert judge_chunks(recording.chunks, "anthropic", Policy()).verdict == "provider_error"
    # Content, then a silence no byte ends: notices fall due every 30 s on the way (16 of them)
    # to the raw bound's verdict at 91 s -- not "incomplete".
    silent = parse_recording([json.dumps(r) + "\n" for r in timing(
        {"provider": "anthropic"}, {"t": 0.1, **SSE}, (1, "content"), {"t": 1, "end": True})])
    judged = judge_chunks(silent.chunks, "anthropic", Policy(semantic_notice_interval=5), silent_after=True)
    assert judged.verdict == "raw_silence" and judged.at is not None and math.isclose(judged.at, 91.0, abs_tol=0.01)
