"""Scanner + classifier throughput beside the anthropic SDK's own ``SSEDecoder``.

Same bytes, same chunking, same process, interleaved rounds; reports ns/frame for each and the
median of the per-round ratios ours/SDK, for several read sizes. "Ours" is what the transport runs
per read on its general path: the SSE framer's ``feed`` (the bulk scanner -- C where built --
classifying by head, the profile's Python classifier for the fact-bearing frames, and the
Anthropic content journal a truncation decodes its partial message from). The target (<= 0.20)
holds at every read size: 128 B and 1 KiB (a live stream's one frame per read, where the fixed
per-read cost dominates), 16 KiB and 64 KiB (httpcore's read size, what a backlogged body arrives
in). Usage::

    python -m benchmarks.bench_scanner [--events 20000] [--chunks 128,1024,16384,65536] [--rounds 9] [--json]
        [--pure]   # the pure-Python scanner (what an install without a C compiler runs)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from itertools import chain

from otel_liveness.core.outcome import FrameKind
from otel_liveness.core.wire import framing
from otel_liveness.core.wire.providers import profile_for


def anthropic_stream(events: int) -> bytes:
    """An Anthropic Messages stream: start, a thinking block, a text block, pings, stop."""
    parts = [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01","type":"message",'
        b'"role":"assistant","model":"claude-opus-4-5","content":[],"stop_reason":null,'
        b'"usage":{"input_tokens":1200,"output_tokens":1}}}\n\n',
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n',
    ]
    for i in range(events - 5):
        if i % 50 == 0:
            parts.append(b'event: ping\ndata: {"type": "ping"}\n\n')
        else:
            parts.append(
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                b'"delta":{"type":"text_delta","text":"token %d "}}\n\n' % i
            )
    parts += [
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        b'"usage":{"output_tokens":19995}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
    return b"".join(parts)


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def run_ours(chunks: list[bytes]) -> int:
    """The transport's per-read path: the framer's feed, once per read (a C-level loop, as the
    SDK's own loop over its reads is a generator: neither side pays a Python statement per read)."""
    framer = framing.SSEFramer(profile_for("anthropic"), 4 * 1024 * 1024)
    kinds = list(chain.from_iterable(map(framer.feed, chunks)))
    kinds += framer.close()
    assert kinds.count(FrameKind.SEMANTIC) > 0 and framer.facts.stop_reason == "end_turn"
    return len(kinds)


def run_sdk(chunks: list[bytes]) -> int:
    from anthropic._streaming import SSEDecoder

    return sum(1 for _ in SSEDecoder().iter_bytes(iter(chunks)))


def measure(events: int, chunk: int, rounds: int) -> dict[str, float]:
    chunks = chunked(anthropic_stream(events), chunk)
    ours_n, sdk_n = run_ours(chunks), run_sdk(chunks)
    assert ours_n == sdk_n == events, (ours_n, sdk_n, events)
    ours: list[float] = []
    sdk: list[float] = []
    for _ in range(rounds):  # interleaved, so drift hits both equally
        t0 = time.perf_counter_ns()
        run_ours(chunks)
        t1 = time.perf_counter_ns()
        run_sdk(chunks)
        t2 = time.perf_counter_ns()
        ours.append((t1 - t0) / events)
        sdk.append((t2 - t1) / events)
    ratios = [o / s for o, s in zip(ours, sdk, strict=True)]
    return {
        "events": events,
        "chunk_bytes": chunk,
        "ours_ns_per_frame": statistics.median(ours),
        "sdk_ns_per_frame": statistics.median(sdk),
        "ratio_median": statistics.median(ratios),
        "target": 0.20,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--chunks", default="128,1024,16384,65536",
                        help="comma-separated read sizes; the target applies to the last (a backlogged body)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pure", action="store_true", help="the pure-Python bulk scanner")
    args = parser.parse_args(argv)
    if args.pure:
        from otel_liveness.core.wire.bulk import PyScanner

        framing.Scanner = PyScanner  # type: ignore[misc]
    results = [measure(args.events, int(size), args.rounds) for size in args.chunks.split(",")]
    if args.json:
        print(json.dumps(results))
    else:
        print(f"{'read size':>10}  {'ours ns/frame':>14}  {'SDK ns/frame':>13}  {'ratio':>6}")
        for r in results:
            print(f"{r['chunk_bytes']:>10}  {r['ours_ns_per_frame']:>14.0f}  {r['sdk_ns_per_frame']:>13.0f}  "
                  f"{r['ratio_median']:>6.3f}")
        print(f"target: ratio <= {results[-1]['target']} at every read size"
              f"{' (pure-Python scanner)' if args.pure else ''}")
    return 0 if all(r["ratio_median"] <= r["target"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
