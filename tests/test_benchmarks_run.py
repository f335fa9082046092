"""The benchmarks run and measure the same thing on both sides (correctness, not timing)."""

from __future__ import annotations

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
