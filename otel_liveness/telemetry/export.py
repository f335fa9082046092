"""Exporter wrappers for applications (they need the OpenTelemetry SDK): export failures --
collector down, network errors, an exporter that raises -- are dropped, logged once per streak,
and counted (``liveness.telemetry.export_failures``), never raised into the application.

Metrics are exported with **delta** temporality (counters and histograms): each export carries only
what happened since the previous one, and the collector gateway sums every process's deltas into
one series per service, provider, model and outcome. A fleet of short-lived processes then counts
exactly like one long-lived process (a cumulative series per process would lose each process's
first export to ``rate()``/``increase()`` and grow one set of series per process). The trade-off:
an export that fails is lost (and counted), where a cumulative one would be recovered by the next.
See docs/operations.md, "Counts independent of process lifetime"."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

from opentelemetry import metrics

from .._version import __version__
from . import semconv as S

__all__ = ["DropCountingMetricExporter", "DropCountingSpanExporter", "delta_temporality", "otlp_http"]

log = logging.getLogger("otel_liveness")


class _Counting:
    def __init__(self, signal: str, meter_provider: Any = None) -> None:
        self.signal = signal
        self.failures = 0
        self.items_dropped = 0
        self._failing = False
        self.bind(meter_provider)

    def bind(self, meter_provider: Any) -> None:
        """Count failures on ``meter_provider`` (the global one when ``None``)."""
        meter = metrics.get_meter(S.SCOPE, __version__, meter_provider=meter_provider, schema_url=S.SCHEMA_URL)
        self._counter = meter.create_counter(S.M_EXPORT_FAILURES[0], unit=S.M_EXPORT_FAILURES[1],
                                             description=S.M_EXPORT_FAILURES[2])

    def _failed(self, items: int, detail: str) -> None:
        self.failures += 1
        self.items_dropped += items
        try:
            self._counter.add(1, {"liveness.telemetry.signal": self.signal})
        except Exception:  # noqa: BLE001 - counting must not fail either
            pass
        if not self._failing:
            log.warning("otel-liveness: %s export failed (%s); dropping and counting until it recovers", self.signal, detail)
        self._failing = True

    def _ok(self) -> None:
        if self._failing:
            log.info("otel-liveness: %s export recovered after %d failures", self.signal, self.failures)
        self._failing = False


class DropCountingSpanExporter(_Counting):
    def __init__(self, inner: Any, meter_provider: Any = None) -> None:
        super().__init__("traces", meter_provider)
        self.inner = inner

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception as exc:  # noqa: BLE001
            self._failed(len(spans), type(exc).__name__)
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._ok()
        else:
            self._failed(len(spans), "export returned FAILURE")
        return result

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:
            log.debug("span exporter shutdown failed", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return bool(self.inner.force_flush(timeout_millis))
        except Exception:  # noqa: BLE001
            return False


class DropCountingMetricExporter(_Counting):
    """Wraps a MetricExporter; keeps its temporality and aggregation preferences."""

    def __init__(self, inner: Any, meter_provider: Any = None) -> None:
        super().__init__("metrics", meter_provider)
        self.inner = inner
        self._preferred_temporality = inner._preferred_temporality
        self._preferred_aggregation = inner._preferred_aggregation

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self._failed(1, type(exc).__name__)
            return MetricExportResult.FAILURE
        if result is MetricExportResult.SUCCESS:
            self._ok()
        else:
            self._failed(1, "export returned FAILURE")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        try:
            return bool(self.inner.force_flush(timeout_millis=timeout_millis))
        except Exception:  # noqa: BLE001
            return False

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        try:
            self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)
        except Exception:
            log.debug("metric exporter shutdown failed", exc_info=True)


def delta_temporality() -> dict[type, Any]:
    """The OTLP exporters' ``preferred_temporality`` for delta export (the same choice as
    ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta``): counters and histograms delta,
    up-down counters cumulative."""
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    )
    from opentelemetry.sdk.metrics.export import AggregationTemporality

    delta, cumulative = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE
    return {Counter: delta, Histogram: delta, ObservableCounter: delta, UpDownCounter: cumulative,
            ObservableUpDownCounter: cumulative, ObservableGauge: cumulative}


def otlp_http(endpoint: str, *, service_name: str = "otel-liveness", export_interval_ms: int = 5000,
              timeout_s: float = 2.0) -> tuple[Any, Any, DropCountingSpanExporter, DropCountingMetricExporter]:
    """Tracer and meter providers exporting OTLP/HTTP to ``endpoint`` (e.g. http://localhost:4318),
    with drop counting. Returns (tracer_provider, meter_provider, span_exporter, metric_exporter)."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    base = endpoint.rstrip("/")
    resource = Resource.create({"service.name": service_name})
    metric_exporter = DropCountingMetricExporter(OTLPMetricExporter(
        endpoint=base + "/v1/metrics", timeout=timeout_s, preferred_temporality=delta_temporality()))
    # No exemplars on the library's metrics: the gateway accumulates deltas (an accumulated point
    # would carry stale exemplars) and drops them; exemplars come from the gateway's sampled spans,
    # so that every one links a trace that tail sampling kept.
    meter_provider = MeterProvider(resource=resource, exemplar_filter=AlwaysOffExemplarFilter(), metric_readers=[
        # The wrappers have the SDK exporters' interface without subclassing them (this module must
        # import without the SDK): typed as what they stand in for.
        PeriodicExportingMetricReader(cast(Any, metric_exporter), export_interval_millis=export_interval_ms)])
    span_exporter = DropCountingSpanExporter(OTLPSpanExporter(endpoint=base + "/v1/traces", timeout=timeout_s),
                                             meter_provider)
    metric_exporter.bind(meter_provider)  # the provider exists only once its reader wraps the exporter
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(cast(Any, span_exporter), schedule_delay_millis=200))
    return tracer_provider, meter_provider, span_exporter, metric_exporter
