"""The benchmarks run and measure the same thing on both sides (correctness, not timing)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_scanner import anthropic_stream, chunked, run_ours, run_sdk


def test_scanner_benchmark_counts_agree() -> None:
    chunks = chunked(anthropic_stream(500), 97)
    assert run_ours(chunks) == run_sdk(chunks) == 500


def test_interleaved_pairing_reads_both_streams_to_the_end_and_closes_them() -> None:
    from benchmarks.bench_transport import interleaved

    closed: list[str] = []

    class Stream:
        def __init__(self, name: str, n: int) -> None:
            self.name, self.n, self.read = name, n, 0

        def __iter__(self):  # type: ignore[no-untyped-def]
            for i in range(self.n):
                self.read += 1
                yield i

        def close(self) -> None:
            closed.append(self.name)

    made: list[Stream] = []

    def opener(name: str, n: int):  # type: ignore[no-untyped-def]
        def open_() -> Stream:
            made.append(Stream(name, n))
            return made[-1]
        return open_

    result = interleaved(opener("plain", 1000), opener("wrapped", 1234), rounds=3, slice_=100)
    assert len(made) == 8 and all(s.read == s.n for s in made)  # warm-up round + 3, both sides each
    assert sorted(closed) == ["plain"] * 4 + ["wrapped"] * 4
    assert result["plain_s"] >= 0 and result["wrapped_s"] >= 0 and result["ratio_median"] > 0


def test_eventstream_benchmark_counts_agree_at_every_read_size() -> None:
    from benchmarks.bench_eventstream import bedrock_messages, chunked, run_botocore, run_ours, run_ours_inner

    wire = bedrock_messages(300)
    assert all(150 <= len(m) <= 450 for m in wire)  # realistic Bedrock chunk sizes
    for size in ("msg", 97, 1024, 65536):
        chunks = chunked(wire, size)
        assert b"".join(chunks) == b"".join(wire)
        assert run_ours(chunks) == run_ours_inner(chunks) == run_botocore(chunks) == 300


def test_whole_stream_pairing_alternates_and_reports_cpu_and_wall_ratios() -> None:
    from benchmarks.bench_transport import paired

    calls: list[str] = []

    def plain() -> int:
        calls.append("plain")
        return 0

    def wrapped() -> int:
        calls.append("wrapped")
        sum(range(20_000))  # more work than plain: the ratio must come out above 1
        return 7

    result = paired(plain, wrapped, rounds=4, warmup=2)
    # the order alternates pair by pair, the warm-up pairs' too; those are measured apart
    assert calls == ["plain", "wrapped", "wrapped", "plain"] * 3
    assert result["reads"] == 7
    assert len(result["rounds"]) == 4 and len(result["first"]) == 2 and all(r > 1 for r in result["first"])
    for key in ("ratio", "wall_ratio"):
        assert result[f"{key}_min"] <= result[f"{key}_median"] <= result[f"{key}_max"]
    assert result["wall_ratio_median"] > 1


def test_the_memchr_floor_counts_the_frames_the_scanner_finds() -> None:
    import random

    import pytest

    bulk = pytest.importorskip("otel_liveness.core.wire._bulk")
    from otel_liveness.core.wire.sse import SSEScanner

    rng = random.Random(7)
    for _ in range(300):
        data = bytes(rng.choice(b"ab\n") for _ in range(rng.randrange(0, 60)))
        # a blank line is two LFs in a row, counted without overlap (what ends an LF-framed block)
        expected, i = 0, 0
        while (j := data.find(b"\n\n", i)) >= 0:
            expected, i = expected + 1, j + 2
        assert bulk.blank_lines(data) == expected, data
    frames = b"".join(b"data: %d\n\n" % i for i in range(100))
    assert bulk.blank_lines(frames) == len(SSEScanner(1 << 20).feed_blocks(frames)) == 100


def test_engine_benchmark_workloads_run_the_engine_to_the_end() -> None:
    import pathlib

    from benchmarks.bench_engine import ROOT, run

    result = run(pathlib.Path(ROOT), 1)
    assert sorted(result) == ["general", "lane", "requests"]
    assert all(len(v) == 1 and v[0] > 0 for v in result.values())
    # every other read of "general" is a ping: it cannot ride the lane, so it costs more
    assert result["general"][0] > result["lane"][0]


def test_pooled_pairs_are_every_round_of_every_process() -> None:
    from benchmarks.bench_transport import pool, summary

    # two processes: one whose wrapped side costs 1.1x, one 1.3x (per round: plain, wrapped CPU, walls)
    first = summary([(1.0, 1.1, 2.0, 2.2), (2.0, 2.2, 2.0, 2.2), (1.0, 1.1, 1.0, 1.0)], reads=5)
    second = summary([(1.0, 1.3, 1.0, 1.3), (1.0, 1.3, 1.0, 1.3)], reads=6)
    assert first["ratio_median"] == 1.1 and second["ratio_median"] == 1.3
    first["first"], second["first"] = [1.5], [1.7, 1.9]  # each process's warm-up pairs, kept apart
    pooled = pool([first, second])
    assert len(pooled["rounds"]) == 5 and pooled["per_process"] == [1.1, 1.3]
    assert pooled["first"] == [1.5, 1.7, 1.9]
    assert pooled["ratio_median"] == 1.1 and pooled["ratio_min"] == 1.1 and abs(pooled["ratio_max"] - 1.3) < 1e-12
    assert pooled["wall_ratio_min"] == 1.0 and pooled["plain_s"] == 1.0 and pooled["reads"] == 6


def test_above_the_floor_is_the_raw_figure_less_the_floor_of_the_same_pairs() -> None:
    from benchmarks.bench_transport import above_floor, summary

    raw = summary([(1.0, 1.25, 1.0, 1.0), (2.0, 2.5, 1.0, 1.0), (1.0, 1.3, 1.0, 1.0)], reads=3)
    floor = summary([(1.0, 1.1, 1.0, 1.0), (1.0, 1.15, 1.0, 1.0), (1.0, 1.12, 1.0, 1.0)], reads=3)
    assert abs(above_floor({"raw": raw, "floor": floor}) - (1.25 - 1.12)) < 1e-12


# A timeline in real seconds: beside three sibling workers on two cores, 8 agents made as few as
# 7 calls in the 1.5 s outage (alone, about 290) -- it needs the machine to itself.
@pytest.mark.serial
def test_the_fleet_outage_benchmark_measures_the_outage_and_the_return() -> None:
    # A short timeline, one mode: without the budget every call of the outage is three attempts,
    # with it about one (alone on the machine, ~290 calls: its allowance of retries is a few
    # hundredths of a call each); the figures the benchmark reports are consistent with its own
    # timeline.
    from benchmarks.bench_fleet_outage import measure

    off = measure("529", False, agents=8, healthy=1.0, outage=1.5, after=1.0, pause=0.02)
    on = measure("529", True, agents=8, healthy=1.0, outage=1.5, after=1.0, pause=0.02)
    assert off["outage_calls"] > 10 and off["attempts_per_call"] >= 2.5
    assert on["outage_calls"] > 10 and on["attempts_per_call"] <= 1.2, on
    assert on["recovery_first_answer_s"] is not None and 0 <= on["recovery_first_answer_s"] < 1.0


def test_the_canary_benchmark_measures_each_configuration_on_the_same_replies(capsys: Any) -> None:
    # A few rounds (the figures are noise at this size: only the shape is checked): the four
    # configurations measured, the reads of each reply counted, the shared cost told apart from
    # each candidate's judgment.
    import json

    from benchmarks.bench_canary import main

    main(["--rounds", "3", "--long-rounds", "1", "--json"])
    result = json.loads(capsys.readouterr().out)
    for name in ("short", "short_replayed", "long"):
        row = result[name]
        assert set(row["cpu_us"]) == {"plain", "candidates=0", "candidates=1", "candidates=3"}
        assert all(value > 0 for value in row["cpu_us"].values())
        assert {"reduction_us", "per_candidate_us", "per_candidate_of_request"} <= set(row)
    assert 2 <= result["short"]["reads"] < 20 and result["long"]["reads"] > 1000
    assert result["target_per_candidate_of_request"] == 0.05
