"""The scaled-out store on loopback for the end-to-end tests: Thanos (built by
collector/store/build-thanos.sh) as Receive x2 in one hashring, Query over them and the Ruler, and
the Ruler evaluating a rules file. Query answers the same HTTP API as Prometheus, so the checks
written for Prometheus (tests/stack.py) run unchanged against it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Any

from .stack import ROOT, Prometheus, free_port, terminate, wait_http

#: Labels the store adds that a single Prometheus does not: Receive's tenant and replica labels, and
#: the Ruler's external labels on what it records (Query removes the replica labels; the tenant
#: label and runbook_base_url stay -- Prometheus keeps external labels off its own queries).
STORE_LABELS = ("tenant_id", "receive_replica", "ruler_replica", "runbook_base_url")


class StoreUnavailable(RuntimeError):
    """The store binary could not be built here (no Go toolchain, no module proxy)."""


def thanos_binary() -> str:
    override = os.environ.get("OTEL_LIVENESS_THANOS")
    if override:
        return override
    script = ROOT / "collector" / "store" / "build-thanos.sh"
    try:
        out = subprocess.run([str(script)], capture_output=True, text=True, timeout=3600)
    except OSError as exc:
        raise StoreUnavailable(f"{script}: {exc}") from None
    if out.returncode != 0:
        raise StoreUnavailable("Thanos build failed:\n" + out.stderr[-3000:])
    return out.stdout.strip().splitlines()[-1]


class Thanos(Prometheus):
    """Receive x2 (hashring, replication factor 1: each series lives on one node, the nodes forward
    to each other), Query over both Receives and the Ruler, and the Ruler evaluating ``rules``
    through Query. ``query``/``value``/``at``/``wait_value`` are Prometheus's, against Query."""

    def __init__(self, binary: str, tmp: pathlib.Path, rules: pathlib.Path, *, receivers: int = 2,
                 eval_interval: str = "1s", alertmanager: str | None = None,
                 runbook_base_url: str = "https://runbooks.example.test/otel-liveness/operations.md") -> None:
        self.binary = binary
        self.dir = tmp / "thanos"
        self.dir.mkdir(exist_ok=True)
        self.rules = rules
        self.eval_interval = eval_interval
        self.alertmanager = alertmanager
        self.runbook_base_url = runbook_base_url
        self.receive_ports = [{"grpc": free_port(), "http": free_port(), "write": free_port(), "capnp": free_port()}
                              for _ in range(receivers)]
        self.query_ports = {"grpc": free_port(), "http": free_port()}
        self.rule_ports = {"grpc": free_port(), "http": free_port()}
        self.port = self.query_ports["http"]  # Prometheus's query helpers talk to Query
        self.hashring = self.dir / "hashring.json"
        self.hashring.write_text(json.dumps([{"hashring": "default", "endpoints": [
            f"127.0.0.1:{p['grpc']}" for p in self.receive_ports]}]))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.log = tmp / "thanos.log"

    @property
    def remote_write_urls(self) -> list[str]:
        """One remote-write endpoint per Receive node (any node accepts any series)."""
        return [f"http://127.0.0.1:{p['write']}/api/v1/receive" for p in self.receive_ports]

    def _spawn(self, name: str, args: list[str], http_port: int) -> None:
        log = self.dir / f"{name}.log"
        proc = self.procs[name] = subprocess.Popen([self.binary, *args], stdout=log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                wait_http(f"http://127.0.0.1:{http_port}/-/ready", timeout=1)
                return
            except TimeoutError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"thanos {name} did not start:\n" + log.read_text()[-3000:]) from None

    def start(self) -> Thanos:
        try:
            # Retention 0d (none): a store that lives minutes needs no pruning, and v0.42.4's pruning
            # job -- run at start-up, then each minute, acting in minutes 00:00, 04:00, ... UTC --
            # dereferences a tenant whose TSDB is not open yet: a Receive started in such a minute
            # panics (MultiTSDB.Prune -> shouldBeMarkedInactive; fixed upstream by
            # thanos-io/thanos#8990, not in v0.42.5). A CI run that began at 00:00:19 met it.
            for i, ports in enumerate(self.receive_ports):
                self._spawn(f"receive-{i}", [
                    "receive", f"--tsdb.path={self.dir / f'receive-{i}'}", "--tsdb.retention=0d",
                    f"--grpc-address=127.0.0.1:{ports['grpc']}", f"--http-address=127.0.0.1:{ports['http']}",
                    f"--remote-write.address=127.0.0.1:{ports['write']}",
                    f"--receive.capnproto-address=127.0.0.1:{ports['capnp']}",
                    f"--receive.local-endpoint=127.0.0.1:{ports['grpc']}",
                    f"--receive.hashrings-file={self.hashring}", "--receive.replication-factor=1",
                    f'--label=receive_replica="{i}"', "--log.level=warn"], ports["http"])
            rule_args = [
                "rule", f"--data-dir={self.dir / 'rule'}", f"--rule-file={self.rules}",
                f"--eval-interval={self.eval_interval}", f"--grpc-address=127.0.0.1:{self.rule_ports['grpc']}",
                f"--http-address=127.0.0.1:{self.rule_ports['http']}",
                f"--query=http://127.0.0.1:{self.query_ports['http']}",
                '--label=ruler_replica="0"', f'--label=runbook_base_url="{self.runbook_base_url}"',
                "--log.level=warn"]
            if self.alertmanager:
                rule_args.append(f"--alertmanagers.url=http://{self.alertmanager}")
            # Query first (the Ruler queries it), then the Ruler, whose store Query also reads
            # (recorded series and ALERTS).
            endpoints = [f"--endpoint=127.0.0.1:{p['grpc']}" for p in self.receive_ports]
            endpoints.append(f"--endpoint=127.0.0.1:{self.rule_ports['grpc']}")
            self._spawn("query", [
                "query", f"--grpc-address=127.0.0.1:{self.query_ports['grpc']}",
                f"--http-address=127.0.0.1:{self.query_ports['http']}", *endpoints,
                "--query.replica-label=receive_replica", "--query.replica-label=ruler_replica",
                "--query.promql-engine=prometheus", "--endpoint.info-timeout=2s", "--log.level=warn"],
                self.query_ports["http"])
            self._spawn("rule", rule_args, self.rule_ports["http"])
            self._wait_endpoints(len(self.receive_ports) + 1)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_endpoints(self, n: int, timeout: float = 60.0) -> None:
        """Query discovers its endpoints asynchronously: wait until it has them all, healthy."""
        deadline = time.monotonic() + timeout
        healthy = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/stores", timeout=5) as response:
                    stores = json.load(response)["data"]
                healthy = sum(1 for group in stores.values() for s in group if not s.get("lastError"))
                if healthy >= n:
                    return
            except OSError:
                pass
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"thanos {name} exited:\n" + (self.dir / f"{name}.log").read_text()[-3000:])
            time.sleep(0.5)
        raise RuntimeError(f"Thanos Query sees {healthy} of {n} endpoints after {timeout}s")

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            terminate(proc)
        self.procs.clear()

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self._api({"query": expr})

    def at(self, expr: str, when: float) -> float | None:
        result = self._api({"query": expr, "time": when})
        return float(result[0]["value"][1]) if result else None

    def query_at(self, expr: str, when: float) -> list[dict[str, Any]]:
        return self._api({"query": expr, "time": when})

    def _api(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        params = {**params, "dedup": "true", "partial_response": "false"}
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def rule_alerts(self) -> list[dict[str, Any]]:
        """The Ruler's own view of its alerts (state, labels, annotations), from its rules API."""
        url = f"http://127.0.0.1:{self.rule_ports['http']}/api/v1/rules?type=alert"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        return [alert for group in body["data"]["groups"] for rule in group["rules"] for alert in rule.get("alerts", [])]

    def series_per_receive(self) -> list[int]:
        """Head series of each Receive node (how the hashring spread them)."""
        counts = []
        for ports in self.receive_ports:
            with urllib.request.urlopen(f"http://127.0.0.1:{ports['http']}/metrics", timeout=10) as response:
                text = response.read().decode()
            counts.append(int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                  if line.startswith(("prometheus_tsdb_head_series ", "prometheus_tsdb_head_series{")))))
        return counts
