"""An application as the OpenTelemetry guides write one: the SDK configured globally (in-memory
exporters here), an anthropic client whose transport is plain ``otel_liveness.wrap(...)``. Run as a
subprocess by tests/test_otel_native.py (global providers can be set once per process).

    python tests/otel_native_app.py <base_url> <mode>      mode: default | off | instrumented | quiet

Prints one JSON object: spans (name, attributes, events), metric names with their points, and log
records (level, message, trace and span ids) seen by the in-memory exporters.
"""

from __future__ import annotations

import json
import logging
import sys

import anthropic
import httpx2
from opentelemetry import metrics, trace
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_liveness
from otel_liveness import Policy

POLICY = Policy(raw_idle_timeout=0.3, first_byte_timeout=None, semantic_notice_interval=0.1, backoff_initial=0.01,
                backoff_max=0.02)


def main() -> int:
    base_url, mode = sys.argv[1], sys.argv[2]
    if mode == "quiet":  # no SDK, no logging configuration: what reaches stderr?
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), POLICY)
        with anthropic.Anthropic(base_url=base_url, api_key="sk-ant-app", max_retries=0,
                                 http_client=httpx2.Client(transport=transport)) as client:
            with client.messages.stream(model="claude-sim-1", max_tokens=16, messages=[{"role": "user", "content": "hi"}]) as s:
                s.get_final_text()
        return 0
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    logs = InMemoryLogExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    handler = LoggingHandler(level=logging.INFO, logger_provider=logger_provider)
    logging.getLogger("otel_liveness").addHandler(handler)
    logging.getLogger("otel_liveness").setLevel(logging.INFO)

    if mode == "instrumented":
        from otel_liveness.telemetry import instrument

        instrument(enforce=True, hosts=["127.0.0.1"])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), POLICY, telemetry=mode != "off")
    with anthropic.Anthropic(base_url=base_url, api_key="sk-ant-app", max_retries=0,
                             http_client=httpx2.Client(transport=transport)) as client:
        with client.messages.stream(model="claude-sim-1", max_tokens=16, messages=[{"role": "user", "content": "hi"}]) as s:
            text = s.get_final_text()
    data = reader.get_metrics_data()
    points: dict[str, int] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            if scope.scope.name != "otel_liveness":
                continue  # the SDK's own instrumentation
            for metric in scope.metrics:
                points[metric.name] = points.get(metric.name, 0) + len(metric.data.data_points)
    out = {
        "text": text,
        "spans": [{"name": s.name, "attributes": dict(s.attributes or {}), "events": [e.name for e in s.events],
                   "trace_id": s.context.trace_id, "span_id": s.context.span_id} for s in spans.get_finished_spans()
                  if s.instrumentation_scope is not None and s.instrumentation_scope.name == "otel_liveness"],
        "other_spans": [s.name for s in spans.get_finished_spans()
                        if s.instrumentation_scope is None or s.instrumentation_scope.name != "otel_liveness"],
        "metrics": points,
        "logs": [{"level": r.log_record.severity_text, "message": str(r.log_record.body),
                  "trace_id": r.log_record.trace_id, "span_id": r.log_record.span_id}
                 for r in logs.get_finished_logs()],
    }
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
