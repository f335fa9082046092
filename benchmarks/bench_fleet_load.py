"""A fleet load generator that speaks exactly what the project's agents send.

One *unit* is what one agent process sends for one run of the demo scenarios: it is recorded once
from a real run (tests/fleet_worker.py's code: the real transport, the library's TelemetryHook and
OTLP exporters, the simulated provider at scaled time), then replayed many times over OTLP/HTTP
(protobuf) as if from many agents: each copy gets fresh trace ids, the service name and
``service.instance.id`` of the simulated agent that sends it. Spans (request and attempt spans with
their events) and delta metrics are byte-for-byte the library's own; only the identity and trace
ids change, so the collectors do exactly the work a real fleet gives them.

    python -m benchmarks.bench_fleet_load --otlp http://127.0.0.1:4318 --rate 500 --seconds 30

The truth (units, attempts by outcome, spans, span events, metric points accepted by the
collector, and failed posts) is counted here, independently of the pipeline.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: Fixed-length placeholders, replaced per copy (same length: the protobuf stays valid as bytes).
SERVICE_MARK = b"svc-QZJXQZJX"  # 12 bytes -> "fleet-000017"
INSTANCE_MARK = b"inst-QZJXQZJXQZJXQZJXQZJXQZJXQZJXQZJ"  # 36 bytes, the length of a UUID
TRACE_MARK = re.compile(rb"\xfc\xfbTRACE(..)\xfc\xfb\xfc\xfb\xfc\xfb\xfc", re.S)  # 16 bytes, 2-byte index

MIX = ["dead_socket", "inband_overload", "rate_limit_storm", "long_think", "stall_after_partial", "exhausted",
       "wall_budget"]
STORM = ["dead_socket"]


def service_name(i: int) -> bytes:
    name = f"fleet-{i:06d}".encode()
    assert len(name) == len(SERVICE_MARK)
    return name


def instance_id(i: int) -> bytes:
    value = f"{i:08x}-0000-4000-8000-000000000000".encode()  # UUID-shaped
    assert len(value) == len(INSTANCE_MARK)
    return value


@dataclass
class Template:
    """One unit of load as recorded, with placeholders for identity and trace ids."""

    traces: bytes
    metrics: bytes
    attempts: dict[str, int]
    spans: int
    events: int
    points: int
    traces_per_unit: int

    @property
    def attempt_count(self) -> int:
        return sum(self.attempts.values())

    def copy(self, agent: int, service: int, rng: Any = os.urandom) -> tuple[bytes, bytes]:
        ids: dict[bytes, bytes] = {}

        def trace_id(match: re.Match[bytes]) -> bytes:
            key = match.group(1)
            if key not in ids:
                ids[key] = rng(16)
            return ids[key]

        svc, inst = service_name(service), instance_id(agent)
        traces = TRACE_MARK.sub(trace_id, self.traces.replace(SERVICE_MARK, svc).replace(INSTANCE_MARK, inst))
        metrics = self.metrics.replace(SERVICE_MARK, svc).replace(INSTANCE_MARK, inst)
        return traces, metrics


def record(scenarios: list[str], *, model: str = "claude-sim-1", time_scale: float = 0.01,
           canary: bool = False) -> Template:
    """Run the scenarios once through the real transport and exporters; keep what they sent
    (``canary``: with the demo's policy candidate, so that its series are sent too)."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from tests import fleet_worker
    from tests.otlp_receiver import OTLPReceiver

    with OTLPReceiver() as receiver:
        result = fleet_worker.run(f"http://127.0.0.1:{receiver.port}", "svc-template", scenarios, 1, time_scale,
                                  model, export_interval_ms=3_600_000, canary=canary)
        traces = ExportTraceServiceRequest()
        for request in receiver.received["/v1/traces"]:
            traces.MergeFrom(request)
        metrics = ExportMetricsServiceRequest()
        for request in receiver.received["/v1/metrics"]:
            metrics.MergeFrom(request)
    assert result["export_failures"] == 0, result
    marks: dict[bytes, bytes] = {}

    def mark(trace_id: bytes) -> bytes:
        if trace_id not in marks:
            i = len(marks)
            marks[trace_id] = b"\xfc\xfbTRACE" + i.to_bytes(2, "big") + b"\xfc\xfb\xfc\xfb\xfc\xfb\xfc"
        return marks[trace_id]

    def identity(resource: Any) -> None:
        kept = [kv for kv in resource.attributes if kv.key not in ("service.name", "service.instance.id")]
        del resource.attributes[:]
        resource.attributes.extend(kept)
        resource.attributes.add(key="service.name").value.string_value = SERVICE_MARK.decode()
        resource.attributes.add(key="service.instance.id").value.string_value = INSTANCE_MARK.decode()

    spans = events = 0
    for rs in traces.resource_spans:
        identity(rs.resource)
        for ss in rs.scope_spans:
            for span in ss.spans:
                span.trace_id = mark(span.trace_id)
                spans += 1
                events += len(span.events)
                for link in span.links:
                    link.trace_id = mark(link.trace_id)
    points = 0
    for rm in metrics.resource_metrics:
        identity(rm.resource)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                points += len(getattr(m, kind).data_points) if kind else 0
    traces_bytes, metrics_bytes = traces.SerializeToString(), metrics.SerializeToString()
    assert traces_bytes.count(INSTANCE_MARK) == len(traces.resource_spans)
    return Template(traces_bytes, metrics_bytes, dict(result["attempts"]), spans, events, points, len(marks))


@dataclass
class Truth:
    units: int = 0
    attempts: collections.Counter[str] = field(default_factory=collections.Counter)
    spans: int = 0
    events: int = 0
    points: int = 0
    failed_trace_posts: int = 0
    failed_metric_posts: int = 0
    failed_units: int = 0
    uncertain_units: int = 0  # sent, never answered: the pipeline may or may not have them
    uncertain_attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"units": self.units, "attempts": dict(self.attempts), "attempt_total": sum(self.attempts.values()),
                "spans": self.spans, "events": self.events, "points": self.points,
                "failed_trace_posts": self.failed_trace_posts, "failed_metric_posts": self.failed_metric_posts,
                "failed_units": self.failed_units, "uncertain_units": self.uncertain_units,
                "uncertain_attempts": self.uncertain_attempts}


class Sender:
    """Posts OTLP/HTTP protobuf to one collector over a keep-alive connection."""

    def __init__(self, otlp: str, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(otlp)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 4318
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes) -> bool | None:
        """True: accepted; False: refused or never sent; None: sent, then no answer (timed out or
        the connection dropped) -- the collector may or may not have it. Never re-sent then: a
        retry of a request the collector did take would count it twice."""
        for _ in range(2):
            reused = self.conn is not None
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                self.conn.request("POST", path, body=body, headers={"content-type": "application/x-protobuf"})
            except (OSError, http.client.HTTPException):
                self.close()
                if reused:
                    continue  # a keep-alive connection the server had closed: nothing was read
                return False
            try:
                response = self.conn.getresponse()
                response.read()
                return 200 <= response.status < 300
            except http.client.RemoteDisconnected:
                self.close()
                if reused:
                    continue  # closed while idle, before reading the request
                return None
            except (OSError, http.client.HTTPException):
                self.close()
                return None
        return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None


class Load:
    """Replays ``template`` at ``rate`` attempts/s spread over ``agents`` simulated agents in
    ``services`` services, round-robin over ``endpoints`` (agent collectors), until stopped or
    ``seconds`` pass. Runs in threads; ``truth`` counts what the collectors accepted."""

    def __init__(self, template: Template, endpoints: Iterable[str], *, rate: float, agents: int = 1000,
                 services: int = 10, batch: int = 20, senders: int = 4, service_offset: int = 0) -> None:
        self.template = template
        self.endpoints = list(endpoints)
        self.rate = rate
        self.agents, self.services, self.service_offset = agents, services, service_offset
        self.batch = batch
        self.truth = Truth()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.work: collections.deque[list[int]] = collections.deque()
        self.work_ready = threading.Condition()
        self.senders = senders
        self.threads: list[threading.Thread] = []
        self.next_unit = 0
        self.backlog_max = 0

    def set_rate(self, rate: float) -> None:
        self.rate = rate

    def start(self) -> Load:
        for i in range(self.senders):
            t = threading.Thread(target=self._send_loop, args=(self.endpoints[i % len(self.endpoints)],), daemon=True)
            t.start()
            self.threads.append(t)
        t = threading.Thread(target=self._pace, daemon=True)
        t.start()
        self.threads.append(t)
        return self

    def stop(self, drain: bool = True, timeout: float = 30.0) -> Truth:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        if drain:
            while self.work and time.monotonic() < deadline:
                time.sleep(0.05)
        with self.work_ready:
            self.work_ready.notify_all()
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
        return self.truth

    def _pace(self) -> None:
        owed = 0.0
        last = time.monotonic()
        while not self.stop_event.is_set():
            time.sleep(0.05)
            now = time.monotonic()
            owed += (now - last) * self.rate / self.template.attempt_count
            last = now
            n = int(owed)
            owed -= n
            with self.work_ready:
                while n > 0:
                    size = min(n, self.batch)
                    self.work.append(list(range(self.next_unit, self.next_unit + size)))
                    self.next_unit += size
                    n -= size
                self.backlog_max = max(self.backlog_max, len(self.work))
                self.work_ready.notify_all()

    def _send_loop(self, endpoint: str) -> None:
        sender = Sender(endpoint)
        tpl = self.template
        try:
            while True:
                with self.work_ready:
                    while not self.work and not self.stop_event.is_set():
                        self.work_ready.wait(0.2)
                    if not self.work:
                        return
                    units = self.work.popleft()
                traces, metrics = [], []
                for u in units:
                    agent = u % self.agents
                    t, m = tpl.copy(agent, self.service_offset + agent % self.services)
                    traces.append(t)
                    metrics.append(m)
                # Concatenated protobuf messages of one type are one message with every resource.
                ok_traces = sender.post("/v1/traces", b"".join(traces))
                ok_metrics = sender.post("/v1/metrics", b"".join(metrics))
                with self.lock:
                    if ok_traces:
                        self.truth.spans += tpl.spans * len(units)
                        self.truth.events += tpl.events * len(units)
                    else:
                        self.truth.failed_trace_posts += 1
                    if ok_metrics:
                        self.truth.units += len(units)
                        self.truth.points += tpl.points * len(units)
                        for outcome, n in tpl.attempts.items():
                            self.truth.attempts[outcome] += n * len(units)
                    elif ok_metrics is None:
                        self.truth.uncertain_units += len(units)
                        self.truth.uncertain_attempts += tpl.attempt_count * len(units)
                    else:
                        self.truth.failed_metric_posts += 1
                        self.truth.failed_units += len(units)
        finally:
            sender.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--otlp", action="append", required=True, help="an agent collector's OTLP/HTTP base URL")
    parser.add_argument("--rate", type=float, default=200.0, help="attempts per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--services", type=int, default=10)
    parser.add_argument("--storm", action="store_true", help="dead_socket units only (a raw-idle storm)")
    args = parser.parse_args(argv)
    template = record(STORM if args.storm else MIX)
    load = Load(template, args.otlp, rate=args.rate, agents=args.agents, services=args.services).start()
    time.sleep(args.seconds)
    truth = load.stop()
    json.dump({"template": {"attempts": template.attempts, "spans": template.spans, "events": template.events,
                            "points": template.points}, "sent": truth.as_dict()}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
