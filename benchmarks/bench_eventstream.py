"""Event-stream scanner throughput beside botocore's ``EventStreamBuffer`` (the decoder the
anthropic SDK's Bedrock client uses).

Same bytes (realistic Bedrock ``InvokeModelWithResponseStream`` chunk messages, about 200-400 bytes
each: the three service headers, ``{"bytes": <base64 Anthropic event>, "p": <padding>}``), same
chunking, same process, interleaved rounds; reports ns/message for each and the median of the
per-round ratios ours/botocore, for several read sizes: ``msg`` is one message per read (a live
stream), the others fixed read sizes up to 64 KiB (httpcore's read size, a backlogged body). Both
sides do the same work: framing, both CRCs, header decoding, payload extraction. The
``+inner`` column adds :func:`~otel_liveness.core.wire.eventstream.decode_chunk` (the base64'd
Anthropic event) on our side, for information. The target (ratio <= 1/3) applies at every read
size. Usage::

    python -m benchmarks.bench_eventstream [--messages 20000] [--chunks msg,1024,16384,65536] [--rounds 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from otel_liveness.core.wire.eventstream import EventStreamScanner, bedrock_chunk, decode_chunk

TARGET = 1 / 3
_PAD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def anthropic_events(count: int) -> list[bytes]:
    """An Anthropic Messages stream's events (as Bedrock carries them: no pings)."""
    events = [
        b'{"type":"message_start","message":{"id":"msg_bdrk_01","type":"message","role":"assistant",'
        b'"model":"claude-opus-4-5","content":[],"stop_reason":null,"stop_sequence":null,'
        b'"usage":{"input_tokens":1200,"output_tokens":1}}}',
        b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
    ]
    for i in range(count - 5):
        words = " and more" * (i % 7)
        events.append(b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token %d%s "}}'
                      % (i, words.encode()))
    events += [
        b'{"type":"content_block_stop","index":0}',
        b'{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
        b'"usage":{"output_tokens":19995}}',
        b'{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":1200,'
        b'"outputTokenCount":19995,"invocationLatency":41234,"firstByteLatency":812}}',
    ]
    return events


def bedrock_messages(count: int) -> list[bytes]:
    """``count`` chunk messages, with the service's random-length ``"p"`` padding."""
    return [bedrock_chunk(event, padding=_PAD[: (i * 7) % len(_PAD)]) for i, event in enumerate(anthropic_events(count))]


def chunked(messages: list[bytes], size: str | int) -> list[bytes]:
    if size == "msg":
        return list(messages)
    data = b"".join(messages)
    n = int(size)
    return [data[i : i + n] for i in range(0, len(data), n)]


def run_ours(chunks: list[bytes]) -> int:
    scanner = EventStreamScanner()
    feed = scanner.feed
    n = 0
    for chunk in chunks:
        n += len(feed(chunk))
    scanner.close()
    return n


def run_ours_inner(chunks: list[bytes]) -> int:
    scanner = EventStreamScanner()
    feed = scanner.feed
    n = 0
    for chunk in chunks:
        for message in feed(chunk):
            if decode_chunk(message.payload) is not None:
                n += 1
    scanner.close()
    return n


def run_botocore(chunks: list[bytes]) -> int:
    from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]

    buffer = EventStreamBuffer()
    n = 0
    for chunk in chunks:
        buffer.add_data(chunk)
        for _ in buffer:
            n += 1
    return n


def measure(messages: int, chunk: str, rounds: int) -> dict[str, float | int | str]:
    wire = bedrock_messages(messages)
    chunks = chunked(wire, chunk)
    assert run_ours(chunks) == run_ours_inner(chunks) == run_botocore(chunks) == messages
    ours: list[float] = []
    inner: list[float] = []
    boto: list[float] = []
    for _ in range(rounds):  # interleaved, so drift hits both equally
        t0 = time.perf_counter_ns()
        run_ours(chunks)
        t1 = time.perf_counter_ns()
        run_botocore(chunks)
        t2 = time.perf_counter_ns()
        run_ours_inner(chunks)
        t3 = time.perf_counter_ns()
        ours.append((t1 - t0) / messages)
        boto.append((t2 - t1) / messages)
        inner.append((t3 - t2) / messages)
    ratios = [o / b for o, b in zip(ours, boto, strict=True)]
    return {
        "messages": messages,
        "mean_message_bytes": round(sum(map(len, wire)) / messages),
        "chunk": chunk,
        "ours_ns_per_message": statistics.median(ours),
        "ours_inner_ns_per_message": statistics.median(inner),
        "botocore_ns_per_message": statistics.median(boto),
        "ratio_median": statistics.median(ratios),
        "target": TARGET,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--chunks", default="msg,1024,16384,65536",
                        help="comma-separated read sizes in bytes, or 'msg' for one message per read")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = [measure(args.messages, size, args.rounds) for size in args.chunks.split(",")]
    if args.json:
        print(json.dumps(results))
    else:
        print(f"{results[0]['messages']} Bedrock chunk messages, {results[0]['mean_message_bytes']} bytes on average")
        print(f"{'read size':>10}  {'ours ns/msg':>12}  {'+inner':>8}  {'botocore ns/msg':>16}  {'ratio':>6}")
        for r in results:
            print(f"{r['chunk']:>10}  {r['ours_ns_per_message']:>12.0f}  {r['ours_inner_ns_per_message']:>8.0f}"
                  f"  {r['botocore_ns_per_message']:>16.0f}  {r['ratio_median']:>6.3f}")
        print(f"target: ratio <= {TARGET:.3f} at every read size")
    return 0 if all(float(r["ratio_median"]) <= TARGET for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
