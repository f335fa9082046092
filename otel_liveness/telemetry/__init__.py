"""Telemetry emission: the only layer that imports OpenTelemetry (its API).

- :class:`TelemetryHook` -- pass to ``otel_liveness.wrap(..., hooks=[TelemetryHook()])``;
- :func:`instrument` -- the one-line programmatic form of auto-instrumentation;
- :mod:`.semconv` -- every name emitted (the contract for the collector, rules and dashboards).
"""

from __future__ import annotations

from typing import Any

from ._hook import TelemetryHook

__all__ = ["TelemetryHook", "instrument", "uninstrument"]


def instrument(**kwargs: Any) -> Any:
    """Instrument every httpx/httpx2 client created from now on (and wrap their transports for
    provider hosts). ``enforce=True`` enforces the policy; the default is shadow (observe only).
    Other keywords: ``policy``, ``hosts``, ``tracer_provider``, ``meter_provider``."""
    from .instrumentor import LivenessInstrumentor

    instrumentor = LivenessInstrumentor()
    instrumentor.instrument(**kwargs)
    return instrumentor


def uninstrument() -> None:
    from .instrumentor import LivenessInstrumentor

    LivenessInstrumentor().uninstrument()
