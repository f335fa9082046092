"""Soak: many concurrent long-thinking streams through the transport with telemetry on.

Each stream is an Anthropic reply preceded by a long think (pings only, no content), with time
scaled so that a wave of streams represents hours of stream time. The provider runs in a separate
process. Reported at the start (after wave 1), middle and end: RSS, open file descriptors,
asyncio tasks / threads, open spans; plus throughput and the per-stream CPU overhead against the
same streams without the transport, in the same run.

    python -m benchmarks.soak                         # 1,000 async streams x 6 waves, 200 sync threads x 3 waves
    python -m benchmarks.soak --streams 100 --waves 3 --threads 20 --json   (what the test suite runs, smaller)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2

import otel_liveness
from otel_liveness import Policy
from otel_liveness.core.policy import DEFAULT_RAW_IDLE_TIMEOUT

SERVER = r"""
import sys
from otel_liveness.testing import SimulatedProvider, steps as s, anthropic_reply
scale, pings, every = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
with SimulatedProvider(time_scale=scale) as p:
    p.add("soak", [[s.Headers(), *anthropic_reply("done after a long think", think_pings=pings, ping_every=every)]])
    print(p.port, flush=True)
    sys.stdin.read()
"""
BODY = {"model": "claude-soak", "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "x"}]}


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def open_files() -> set[str]:
    """What this process's descriptors point at (``socket:[inode]``, ``pipe:[inode]``, paths):
    identities, so that a descriptor opened by the run can be told from one something else in the
    process closed meanwhile."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, already closed
            pass
    return found


def thread_ids() -> set[int | None]:
    return {t.ident for t in threading.enumerate()}


async def files_left(before: set[str], timeout: float = 5.0) -> list[str]:
    """Descriptors opened since ``before`` and still open, once asyncio has finished closing what
    was closed (its transports close their sockets on a later loop iteration): wait until there are
    none, or the timeout shows a leak, rather than count too early."""
    deadline = time.monotonic() + timeout
    while (left := open_files() - before) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return sorted(left)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Telemetry:
    """Real SDK providers; spans counted (started/ended), not kept."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        outer = self
        self.started = self.ended = self.exported = 0
        self.lock = threading.Lock()

        class Counter(SpanProcessor):
            def on_start(self, span: Any, parent_context: Any = None) -> None:
                with outer.lock:
                    outer.started += 1

            def on_end(self, span: Any) -> None:
                with outer.lock:
                    outer.ended += 1

        class Discard(SpanExporter):
            def export(self, spans: Any) -> Any:
                outer.exported += len(spans)
                return SpanExportResult.SUCCESS

        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(Counter())
        self.tracer_provider.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=20000))
        self.meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        from otel_liveness.telemetry import TelemetryHook

        self.hook = TelemetryHook(self.tracer_provider, self.meter_provider, logs=False)

    @property
    def open_spans(self) -> int:
        return self.started - self.ended


def snapshot(label: str, tel: Telemetry | None, **extra: Any) -> dict[str, Any]:
    return {"at": label, "rss_mb": round(rss_mb(), 1), "fds": fds(), "threads": threading.active_count(),
            "open_spans": tel.open_spans if tel else 0, **extra}


async def async_wave(client: httpx2.AsyncClient, url: str, n: int) -> int:
    async def one() -> int:
        async with client.stream("POST", url, json=BODY) as response:
            body = await response.aread()
            return int(body.endswith(b'{"type":"message_stop"}\n\n'))

    return sum(await asyncio.gather(*(one() for _ in range(n))))


async def run_async(url: str, streams: int, waves: int, wrapped: bool, tel: Telemetry | None, policy: Policy) -> dict[str, Any]:
    limits = httpx2.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    transport: Any = httpx2.AsyncHTTPTransport(limits=limits)
    if wrapped:
        transport = otel_liveness.wrap(transport, policy, hooks=[tel.hook] if tel else [])
    snapshots = []
    ok = 0
    cpu0, t0 = cpu(), time.monotonic()
    fds_before, files_before = fds(), open_files()
    async with httpx2.AsyncClient(transport=transport, timeout=120) as client:
        for wave in range(waves):
            ok += await async_wave(client, url, streams)
            if wave in (0, waves // 2, waves - 1):
                label = "start" if wave == 0 else ("end" if wave == waves - 1 else "middle")
                snapshots.append(snapshot(label, tel, tasks=len(asyncio.all_tasks())))
    return {"ok": ok, "streams": streams * waves, "seconds": time.monotonic() - t0, "cpu_s": cpu() - cpu0,
            "snapshots": snapshots, "max_connections": limits.max_connections,
            "fds_before": fds_before, "fds_left_open": await files_left(files_before)}


def run_threads(url: str, threads: int, waves: int, tel: Telemetry, policy: Policy) -> dict[str, Any]:
    limits = httpx2.Limits(max_connections=threads + 10, max_keepalive_connections=threads + 10)
    transport = otel_liveness.wrap(httpx2.HTTPTransport(limits=limits), policy, hooks=[tel.hook])
    snapshots = []
    ok = 0
    cpu0, t0 = cpu(), time.monotonic()
    fds_before, files_before = fds(), open_files()
    threads_before, ids_before = threading.active_count(), thread_ids()
    with httpx2.Client(transport=transport, timeout=120) as client, ThreadPoolExecutor(threads) as pool:
        def one(_: int) -> int:
            with client.stream("POST", url, json=BODY) as response:
                return int(response.read().endswith(b'{"type":"message_stop"}\n\n'))

        for wave in range(waves):
            ok += sum(pool.map(one, range(threads)))
            if wave in (0, waves // 2, waves - 1):
                label = "start" if wave == 0 else ("end" if wave == waves - 1 else "middle")
                snapshots.append(snapshot(label, tel))
    return {"ok": ok, "streams": threads * waves, "seconds": time.monotonic() - t0, "cpu_s": cpu() - cpu0,
            "snapshots": snapshots, "max_connections": limits.max_connections,
            "fds_before": fds_before, "fds_left_open": sorted(open_files() - files_before),
            "threads_before": threads_before, "threads_left": len(thread_ids() - ids_before), "thread_cap": threads}


def soak(streams: int = 1000, waves: int = 6, threads: int = 200, thread_waves: int = 3,
         scale: float = 0.03, pings: int = 40, ping_every: float = 15.0, min_raw_bound: float = 0.0) -> dict[str, Any]:
    """``pings`` pings ``ping_every`` provider-seconds apart: each stream thinks ``pings*ping_every``
    s of provider time (40 x 15 s = 10 minutes by default). ``min_raw_bound``: the least raw bound
    in real seconds -- time is scaled, a machine's scheduling hiccups are not (a 0.5 s stall of a
    loaded host is 50 s of provider time at ``scale=0.01``)."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(scale), str(pings), str(ping_every)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = f"http://127.0.0.1:{int(proc.stdout.readline())}/s/soak/v1/messages"
    # The production policy, scaled like the provider: the default raw bound, notices every 30 s.
    policy = Policy(raw_idle_timeout=max(DEFAULT_RAW_IDLE_TIMEOUT * scale, min_raw_bound),
                    semantic_notice_interval=30 * scale)
    try:
        tel = Telemetry()
        baseline = asyncio.run(run_async(url, streams, 1, False, None, policy))
        threads_before, ids_before = threading.active_count(), thread_ids()
        wrapped = asyncio.run(run_async(url, streams, waves, True, tel, policy))
        # asyncio.run joins the loop's executor threads (getaddrinfo): none may be left.
        wrapped.update(threads_before=threads_before, threads_left=len(thread_ids() - ids_before),
                       thread_cap=min(32, (os.cpu_count() or 1) + 4))
        tel.tracer_provider.force_flush()
        sync = run_threads(url, threads, thread_waves, tel, policy)
        tel.tracer_provider.force_flush()
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(30)
    stream_hours = (streams * waves + threads * thread_waves) * pings * ping_every / 3600
    per_stream_base = baseline["cpu_s"] / baseline["streams"]
    per_stream = wrapped["cpu_s"] / wrapped["streams"]
    return {
        "async": wrapped, "sync": sync, "baseline_async_one_wave": baseline,
        "represented_stream_hours": round(stream_hours, 1),
        "throughput_streams_per_s": round(wrapped["streams"] / wrapped["seconds"], 1),
        "cpu_ms_per_stream": {"without": round(per_stream_base * 1e3, 3), "with": round(per_stream * 1e3, 3)},
        "spans": {"started": tel.started, "ended": tel.ended, "exported": tel.exported},
        "rss_growth_middle_to_end_mb": round(wrapped["snapshots"][-1]["rss_mb"] - wrapped["snapshots"][1]["rss_mb"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--waves", type=int, default=6)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--thread-waves", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.03)
    parser.add_argument("--pings", type=int, default=40)
    parser.add_argument("--ping-every", type=float, default=15.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = soak(args.streams, args.waves, args.threads, args.thread_waves, args.scale, args.pings, args.ping_every)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"represented {result['represented_stream_hours']} stream-hours "
          f"({args.streams} async streams x {args.waves} waves, {args.threads} threads x {args.thread_waves} waves)")
    for kind in ("async", "sync"):
        r = result[kind]
        print(f"{kind}: {r['ok']}/{r['streams']} completed in {r['seconds']:.1f}s")
        for snap in r["snapshots"]:
            print("   ", snap)
    print(f"throughput {result['throughput_streams_per_s']} streams/s; CPU per stream "
          f"{result['cpu_ms_per_stream']['without']} ms without the transport, {result['cpu_ms_per_stream']['with']} ms with "
          f"(telemetry on); spans {result['spans']}; RSS middle->end {result['rss_growth_middle_to_end_mb']} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
