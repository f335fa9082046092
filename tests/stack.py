"""Real binaries on loopback for the end-to-end tests: the collector built from
collector/manifest.yaml and Debian's prometheus."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def collector_binary() -> str:
    override = os.environ.get("OTEL_LIVENESS_OTELCOL")
    if override:
        return override
    out = subprocess.run([str(ROOT / "collector" / "build.sh")], capture_output=True, text=True, timeout=3000)
    if out.returncode != 0:
        raise RuntimeError("collector build failed:\n" + out.stderr[-3000:])
    return out.stdout.strip().splitlines()[-1]


def terminate(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except Exception as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready: {last}")


class Collector:
    def __init__(self, binary: str, tmp: pathlib.Path, config: pathlib.Path | None = None,
                 ports: dict[str, int] | None = None, name: str = "otelcol", env: dict[str, str] | None = None) -> None:
        self.name = name
        self.binary = binary
        self.config = config or ROOT / "collector" / "config.yaml"
        self.ports = ports or {name: free_port() for name in ("grpc", "http", "prom", "health", "self")}
        self.env = {
            **os.environ,
            "OTELCOL_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{self.ports['grpc']}",
            "OTELCOL_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{self.ports['http']}",
            "OTELCOL_PROMETHEUS_ENDPOINT": f"127.0.0.1:{self.ports['prom']}",
            "OTELCOL_HEALTH_ENDPOINT": f"127.0.0.1:{self.ports['health']}",
            "OTELCOL_SELF_METRICS_HOST": "127.0.0.1",
            "OTELCOL_SELF_METRICS_PORT": str(self.ports["self"]),
            "OTELCOL_TRACES_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # no traces backend: export fails, logged
            "OTELCOL_SPANMETRICS_FLUSH": "1s",
            "OTELCOL_BATCH_TIMEOUT": "200ms",
            "OTELCOL_TAIL_DECISION_WAIT": "1s",
            **(env or {}),
        }
        self.log = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    def start(self) -> Collector:
        self.proc = subprocess.Popen([self.binary, "--config", str(self.config)], env=self.env,
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{self.ports['health']}/")
        except TimeoutError:
            terminate(self.proc)  # never leave a half-started process behind
            raise RuntimeError("collector did not start:\n" + self.log.read_text()[-3000:]) from None
        return self

    def scrape(self, openmetrics: bool = False) -> str:
        request = urllib.request.Request(f"http://127.0.0.1:{self.ports['prom']}/metrics")
        if openmetrics:  # exemplars are only in the OpenMetrics format
            request.add_header("Accept", "application/openmetrics-text; version=1.0.0")
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.read().decode()

    @property
    def prom_target(self) -> str:
        return f"127.0.0.1:{self.ports['prom']}"

    @property
    def self_target(self) -> str:
        return f"127.0.0.1:{self.ports['self']}"

    def stop(self) -> None:
        terminate(self.proc)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


def scaled_rules(tmp: pathlib.Path, factor: int = 30) -> pathlib.Path:
    """The real rules file with every duration divided by ``factor`` (2m -> 4s): same expressions,
    a test-sized clock."""
    text = (ROOT / "collector" / "rules" / "liveness.rules.yml").read_text()
    units = {"s": 1, "m": 60, "h": 3600}

    def scale(match: re.Match[str]) -> str:
        seconds = int(match.group(1)) * units[match.group(2)]
        return f"{match.group(0)[0]}{max(1, seconds // factor)}s{match.group(0)[-1]}"

    text = re.sub(r"(?<=\[)(\d+)([smh])(?=\])", lambda m: f"{max(1, int(m.group(1)) * units[m.group(2)] // factor)}s", text)
    text = re.sub(r"(?<=offset )(\d+)([smh])\b", lambda m: f"{max(1, int(m.group(1)) * units[m.group(2)] // factor)}s", text)
    text = re.sub(r"(?<=for: )(\d+)([smh])\b", lambda m: f"{max(1, int(m.group(1)) * units[m.group(2)] // factor)}s", text)
    # per-minute rates stay per-minute: "* 60" is a unit, not a window
    path = tmp / "liveness.rules.scaled.yml"
    path.write_text(text)
    return path


class Prometheus:
    """Debian's prometheus on loopback: job ``otelcol`` scrapes the gateways' exporters (honor_labels),
    job ``otelcol-self`` the collectors' own metrics, as collector/prometheus.yml does."""

    def __init__(self, tmp: pathlib.Path, target: str | list[str], rules: pathlib.Path, *,
                 self_targets: list[str] | None = None, alertmanager: str | None = None,
                 runbook_base_url: str = "https://runbooks.example.test/otel-liveness/operations.md",
                 interval: str = "1s") -> None:
        self.port = free_port()
        self.dir = tmp / "prometheus"
        self.dir.mkdir(exist_ok=True)
        self.config = self.dir / "prometheus.yml"
        targets = [target] if isinstance(target, str) else target
        text = (f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
                f"  external_labels:\n    runbook_base_url: {runbook_base_url}\n"
                f"rule_files:\n  - {rules}\n")
        if alertmanager:
            text += f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{alertmanager}']\n"
        text += ("scrape_configs:\n  - job_name: otelcol\n    honor_labels: true\n"
                 f"    static_configs:\n      - targets: {json.dumps(targets)}\n")
        if self_targets:
            text += f"  - job_name: otelcol-self\n    static_configs:\n      - targets: {json.dumps(self_targets)}\n"
        self.config.write_text(text)
        self.log = tmp / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Prometheus:
        binary = shutil.which("prometheus") or "/usr/bin/prometheus"
        self.proc = subprocess.Popen(
            [binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{self.port}/-/ready")
        except TimeoutError:
            terminate(self.proc)  # never leave a half-started process behind
            raise RuntimeError("prometheus did not start:\n" + self.log.read_text()[-3000:]) from None
        return self

    def stop(self) -> None:
        terminate(self.proc)
        self.proc = None

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def at(self, expr: str, when: float) -> float | None:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": when})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        result = body["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def last_scrape(self, job: str = "otelcol") -> float:
        """When Prometheus last scraped ``job`` (the newest sample timestamp of its ``up``), 0 before any."""
        return self.value(f'max(timestamp(up{{job="{job}"}}))') or 0.0

    def wait_scrapes(self, n: int = 2, job: str = "otelcol", timeout: float = 60.0) -> float:
        """Wait until ``job`` has been scraped ``n`` more times (each new scrape seen once); return
        the time. A condition, not a fixed sleep: as long as a slow machine needs, no longer."""
        seen = self.last_scrape(job)
        deadline = time.monotonic() + timeout
        while n > 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"{n} more scrapes of {job} did not happen within {timeout}s")
            time.sleep(0.1)
            latest = self.last_scrape(job)
            if latest > seen:
                seen, n = latest, n - 1
        return time.time()

    def wait_value(self, expr: str, predicate: Any, timeout: float = 40.0) -> float | None:
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.value(expr)
            if value is not None and predicate(value):
                return value
            time.sleep(0.5)
        raise AssertionError(f"{expr} = {value} did not satisfy the condition within {timeout}s")


def run_fleet(otlp: str, jobs: list[list[str]], *, service: str = "fleet-agent", parallel: int = 3,
              rounds: int = 1, model: str = "claude-sim-1", time_scale: float = 0.01,
              export_interval_ms: int = 5000, timeout: float = 600.0,
              temporality: str = "delta") -> list[dict[str, Any]]:
    """Run one short-lived process (tests/fleet_worker.py) per entry of ``jobs`` (its scenario names),
    ``parallel`` at a time; return each process's own account of what it did."""
    import sys

    pending = list(enumerate(jobs))
    running: list[tuple[int, subprocess.Popen[str]]] = []
    results: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while pending or running:
        while pending and len(running) < parallel:
            i, names = pending.pop(0)
            cmd = [sys.executable, "-m", "tests.fleet_worker", "--otlp", otlp, "--service", service,
                   "--rounds", str(rounds), "--model", model, "--time-scale", str(time_scale),
                   "--export-interval-ms", str(export_interval_ms), "--temporality", temporality]
            for name in names:
                cmd += ["--scenario", name]
            running.append((i, subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                                text=True)))
        for i, proc in list(running):
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                if proc.returncode != 0:
                    raise RuntimeError(f"fleet worker {i} exited {proc.returncode}")
                results[i] = json.loads(out)
                running.remove((i, proc))
        if time.monotonic() > deadline:
            for _, proc in running:
                proc.kill()
            raise TimeoutError("fleet did not finish")
        time.sleep(0.05)
    return [results[i] for i in range(len(jobs))]


def fleet_total(results: list[dict[str, Any]], key: str = "attempts", outcome: str | None = None) -> int:
    if outcome is not None:
        return sum(r[key].get(outcome, 0) for r in results)
    return sum(sum(r[key].values()) for r in results)


class Alertmanager:
    """Debian's prometheus-alertmanager on loopback with the shipped collector/alertmanager.yml,
    its ``pages`` receiver pointed at a local webhook; ``scale`` divides its grouping waits."""

    def __init__(self, tmp: pathlib.Path, webhook: str, scale: int = 1) -> None:
        import yaml

        self.port = free_port()
        self.dir = tmp / "alertmanager"
        self.dir.mkdir(exist_ok=True)
        config = yaml.safe_load((ROOT / "collector" / "alertmanager.yml").read_text())
        for receiver in config["receivers"]:
            if receiver["name"] == "pages":
                receiver["webhook_configs"] = [{"url": webhook, "send_resolved": False}]
        route = config["route"]
        units = {"s": 1, "m": 60, "h": 3600}
        for key in ("group_wait", "group_interval", "repeat_interval"):
            value = route[key]
            route[key] = f"{max(1, int(value[:-1]) * units[value[-1]] // scale)}s"
        self.config = self.dir / "alertmanager.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = tmp / "alertmanager.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Alertmanager:
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "/usr/bin/prometheus-alertmanager"
        self.proc = subprocess.Popen(
            [binary, f"--config.file={self.config}", f"--storage.path={self.dir / 'data'}",
             f"--web.listen-address={self.address}", "--cluster.listen-address="],
            stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://{self.address}/-/ready")
        except TimeoutError:
            terminate(self.proc)  # never leave a half-started process behind
            raise RuntimeError("alertmanager did not start:\n" + self.log.read_text()[-3000:]) from None
        return self

    def stop(self) -> None:
        terminate(self.proc)
        self.proc = None


class Webhook:
    """A local webhook receiver: every notification Alertmanager posts, with its arrival time."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: list[tuple[float, dict[str, Any]]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                hook.received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/page"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def scrape_families(text: str) -> dict[str, int]:
    """Series per metric name in a Prometheus/OpenMetrics exposition."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            counts[name] = counts.get(name, 0) + 1
    return counts
