"""A minimal OTLP/HTTP (protobuf) receiver for tests: decodes with opentelemetry-proto."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_TYPES = {"/v1/traces": ExportTraceServiceRequest, "/v1/metrics": ExportMetricsServiceRequest,
          "/v1/logs": ExportLogsServiceRequest}


class OTLPReceiver:
    def __init__(self) -> None:
        self.received: dict[str, list[Any]] = {path: [] for path in _TYPES}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                cls = _TYPES.get(self.path)
                if cls is not None:
                    message = cls()
                    message.ParseFromString(body)
                    receiver.received[self.path].append(message)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OTLPReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[tuple[str, Any]]:
        return [(ss.scope.name, span) for req in self.received["/v1/traces"] for rs in req.resource_spans
                for ss in rs.scope_spans for span in ss.spans]

    def metric_names(self) -> set[str]:
        return {m.name for req in self.received["/v1/metrics"] for rm in req.resource_metrics
                for sm in rm.scope_metrics for m in sm.metrics}

    def metric_sum(self, name: str, **attrs: str) -> float:
        total = 0.0
        for req in self.received["/v1/metrics"]:
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name != name or not m.HasField("sum"):
                            continue
                        for p in m.sum.data_points:
                            got = {kv.key: kv.value.string_value for kv in p.attributes}
                            if all(got.get(k) == v for k, v in attrs.items()):
                                total = max(total, p.as_int or p.as_double)  # cumulative: keep the last
        return total


def attributes(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value or v.int_value or v.double_value or v.bool_value
    return out
