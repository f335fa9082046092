"""Shared machinery of the fleet-scale runs (benchmarks/bench_fleet.py, tests/test_fleet_overload.py,
tests/test_store_e2e.py): a traces sink that costs nothing, process CPU and memory from /proc, the
collectors' own counters, and a gateway plus agent tier started the way the docs say."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .stack import ROOT, Collector, terminate, wait_http

AGENT = ROOT / "collector" / "topology" / "agent.yaml"
GATEWAY = ROOT / "collector" / "config.yaml"
REMOTE_WRITE = ROOT / "collector" / "store" / "gateway-remote-write.yaml"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class NullSink:
    """An OTLP/HTTP traces backend that accepts everything and keeps only counts (a real backend's
    cost is not the gateway's)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                sink.requests += 1
                sink.bytes += len(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid: int) -> float:
    text = pathlib.Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else 0.0


def metric_sum(url: str, name: str, where: str = "") -> float:
    """Sum of one family's samples in a /metrics exposition (0 when unreachable or absent)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return 0.0
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and where in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class Sampler:
    """Samples a process's CPU and RSS every ``every`` seconds in a thread: CPU cores over a
    window, the peak RSS."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid = pid
        self.every = every
        self.peak_rss = 0.0
        self.samples: list[tuple[float, float, float]] = []  # (time, cpu seconds, rss MiB)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sample = (time.monotonic(), cpu_seconds(self.pid), rss_mib(self.pid))
            except OSError:
                return  # the process is gone
            self.samples.append(sample)
            self.peak_rss = max(self.peak_rss, sample[2])
            self._stop.wait(self.every)

    def window(self, start: float, end: float) -> tuple[float, float]:
        """(CPU cores used, peak RSS MiB) between two monotonic times."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return 0.0, max((s[2] for s in inside), default=0.0)
        cores = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
        return cores, max(s[2] for s in inside)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)


#: The shipped timings (the test defaults in tests/stack.py shorten them).
SHIPPED_GATEWAY = {"OTELCOL_SPANMETRICS_FLUSH": "15s", "OTELCOL_BATCH_TIMEOUT": "2s", "OTELCOL_TAIL_DECISION_WAIT": "10s"}
SHIPPED_AGENT = {"OTELCOL_BATCH_TIMEOUT": "1s"}


class FleetCollector(Collector):
    """A collector started with more than one config (the gateway plus an overlay: maps merge)."""

    extra_configs: tuple[pathlib.Path, ...] = ()

    def start(self) -> FleetCollector:
        cmd = [self.binary, "--config", str(self.config)]
        for extra in self.extra_configs:
            cmd += ["--config", str(extra)]
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{self.ports['health']}/", timeout=60)
        except TimeoutError:
            terminate(self.proc)
            raise RuntimeError(f"{self.name} did not start:\n" + self.log.read_text()[-3000:]) from None
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def self_metrics(self) -> str:
        return f"http://127.0.0.1:{self.ports['self']}/metrics"

    @property
    def exporter_metrics(self) -> str:
        return f"http://127.0.0.1:{self.ports['prom']}/metrics"


def gateway(binary: str, tmp: pathlib.Path, name: str, traces: str, *, cores: int | None = None,
            remote_write: str | None = None, env: dict[str, str] | None = None,
            ports: dict[str, int] | None = None) -> FleetCollector:
    """A gateway (collector/config.yaml; with ``remote_write``, plus the scaled-out overlay writing
    there), GOMAXPROCS=``cores`` when given. Shipped timings unless ``env`` overrides them."""
    extra: dict[str, str] = {"OTELCOL_TRACES_ENDPOINT": traces}
    if cores:
        extra["GOMAXPROCS"] = str(cores)
    collector = FleetCollector(binary, tmp, config=GATEWAY, name=name, ports=ports, env={**extra, **(env or {})})
    if remote_write:
        collector.env["OTELCOL_REMOTE_WRITE_URL"] = remote_write
        collector.env["OTELCOL_GATEWAY_INSTANCE"] = collector.prom_target  # as Prometheus would label it
        collector.extra_configs = (REMOTE_WRITE,)
    return collector


def agent(binary: str, tmp: pathlib.Path, name: str, gateways: list[Collector],
          env: dict[str, str] | None = None) -> FleetCollector:
    endpoints = "[" + ", ".join(f"127.0.0.1:{g.ports['grpc']}" for g in gateways) + "]"
    return FleetCollector(binary, tmp, config=AGENT, name=name,
                          env={"OTELCOL_GATEWAY_ENDPOINTS": endpoints, **(env or {})})
