"""Per-stream memory: 1,000 concurrent 200 KB Anthropic replies read through the transport.

A simulated provider (another process) sends each reply's 200 KB of content -- realistic deltas,
about 16 characters of text in a 120-byte event, in 16 KiB writes -- then holds the stream open.
Once every one of the 1,000 asyncio streams has read its 200 KB (all open at once: the moment a
stream keeps the most), the client process reports

* the engines' own account of what each stream retains for a truncation (``_Attempt.retained``:
  the raw head of the released bytes, the content journal, the frame in progress, held bytes),
  against the documented bound ``max_prefix_bytes + max_partial_bytes``;
* its peak RSS (``VmHWM``), and the RSS added per stream over the same client without the
  transport, measured the same way in a fresh process.

Three configurations, each in its own process (peak RSS is per process): the plain client, the
transport with the default policy, and the transport keeping a 16 MiB raw prefix (what every
stream kept before -- the whole reply). Usage::

    python -m benchmarks.bench_memory [--streams 1000] [--reply-kb 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

SERVER = r"""
import sys
from otel_liveness.testing import SimulatedProvider, steps as s, sse_event
reply_kb = int(sys.argv[1])
words = ["the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog, ", "and ", "then "]
head = [sse_event("message_start", {"type": "message_start", "message": {"id": "msg_mem", "type": "message",
        "role": "assistant", "model": "claude-sim-1", "content": [], "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})]
events, size, i = list(head), sum(map(len, head)), 0
while size < reply_kb * 1000:
    text = "".join(words[(i + k) % len(words)] for k in range(3))
    e = sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": text}})
    events.append(e)
    size += len(e)
    i += 1
body = b"".join(events)
chunks = [s.Raw(body[j:j + 16384]) for j in range(0, len(body), 16384)]
stop = sse_event("message_stop", {"type": "message_stop"})
with SimulatedProvider({}) as p:
    p.add("mem", [[s.Headers(), *chunks, s.Sleep(3600.0), s.Raw(stop)]])
    print(p.port, len(body), flush=True)
    sys.stdin.read()
"""

CLIENT = r"""
import asyncio, gc, json, resource, sys
import httpx2
import otel_liveness
from otel_liveness.core.engine import Engine

mode, url, streams, body_len = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * streams + 256)), hard))


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


async def main():
    limits = httpx2.Limits(max_connections=streams + 16, max_keepalive_connections=streams + 16)
    if mode == "plain":
        transport = httpx2.AsyncHTTPTransport(limits=limits)
    else:
        policy = otel_liveness.Policy(**json.loads(sys.argv[5])) if len(sys.argv) > 5 else otel_liveness.Policy()
        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(limits=limits), policy)
    body = {"model": "claude-sim-1", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    async with httpx2.AsyncClient(transport=transport, timeout=600) as client:
        # warm up imports and the connection machinery, then take the baseline
        async with client.stream("GET", url + "/health") as r:
            await r.aread()
        gc.collect()
        base = status("VmRSS")
        ready, done = [0], asyncio.Event()

        async def one():
            n, counted = 0, False
            async with client.stream("POST", url + "/s/mem/v1/messages", json=body) as response:
                async for chunk in response.aiter_raw():
                    n += len(chunk)
                    if n >= body_len and not counted:
                        counted = True
                        ready[0] += 1
                        if ready[0] == streams:
                            done.set()

        tasks = [asyncio.ensure_future(one()) for _ in range(streams)]
        waiter = asyncio.ensure_future(done.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        failed = [t for t in tasks if t.done() and t.exception() is not None]
        if failed:
            raise failed[0].exception()
        gc.collect()
        rss = status("VmRSS")
        peak = status("VmHWM")  # before the engines are listed below (a list of every object)
        retained = [e.attempt.retained for e in gc.get_objects()
                    if isinstance(e, Engine) and e.attempt is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps({"mode": mode, "streams": streams, "base_rss": base, "rss": rss, "peak_rss": peak,
                      "retained": retained}))


asyncio.run(main())
"""


def run_client(mode: str, url: str, streams: int, body_len: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CLIENT, mode, url, str(streams), str(body_len)],
                         capture_output=True, text=True, check=True, timeout=1800)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--reply-kb", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import otel_liveness

    policy = otel_liveness.Policy()
    bound = policy.max_prefix_bytes + policy.max_partial_bytes
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.reply_kb)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port, body_len = map(int, server.stdout.readline().split())
        url = f"http://127.0.0.1:{port}"
        results = {mode: run_client(mode, url, args.streams, body_len) for mode in ("plain", "wrapped", "prefix16")}
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(30)
    plain = results["plain"]
    summary: dict[str, Any] = {"streams": args.streams, "reply_bytes": body_len, "bound_bytes": bound}
    for mode, r in results.items():
        retained = r.pop("retained")
        r["retained_mean"] = sum(retained) / len(retained) if retained else 0
        r["retained_max"] = max(retained) if retained else 0
        r["engines"] = len(retained)
        r["added_rss_per_stream"] = (r["rss"] - r["base_rss"] - (plain["rss"] - plain["base_rss"])) / args.streams
        summary[mode] = r
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{args.streams} concurrent streams, {body_len / 1000:.0f} KB replies, all open at once")
        for mode, label in (("plain", "plain httpx2 client"), ("wrapped", "through the transport (default policy)"),
                            ("prefix16", "through the transport, 16 MiB raw prefix (as before)")):
            r = summary[mode]
            line = f"{label}: peak RSS {r['peak_rss'] / 2**20:.0f} MiB"
            if mode != "plain":
                line += (f"; retained per stream: mean {r['retained_mean'] / 1024:.1f} KiB, max "
                         f"{r['retained_max'] / 1024:.1f} KiB; RSS added per stream {r['added_rss_per_stream'] / 1024:.1f} KiB")
            print(line)
        print(f"bound per stream (max_prefix_bytes + max_partial_bytes): {bound / 1024:.0f} KiB, whatever the reply's length")
    wrapped = summary["wrapped"]
    return 0 if wrapped["engines"] == args.streams and wrapped["retained_max"] <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
