"""The benchmarks run and measure the same thing on both sides (correctness, not timing)."""

from __future__ import annotations

from benchmarks.bench_scanner import anthropic_stream, chunked, run_ours, run_sdk


def test_scanner_benchmark_counts_agree() -> None:
    chunks = chunked(anthropic_stream(500), 97)
    assert run_ours(chunks) == run_sdk(chunks) == 500
