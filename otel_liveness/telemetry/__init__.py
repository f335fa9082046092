"""Telemetry emission: the only layer that imports OpenTelemetry (its API).

- :class:`TelemetryHook` -- pass to ``otel_liveness.wrap(..., hooks=[TelemetryHook()])``;
- :func:`instrument` -- the one-line programmatic form of auto-instrumentation;
- :mod:`.semconv` -- every name emitted (the contract for the collector, rules and dashboards).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..core.events import EmitsTelemetry
from ._hook import TelemetryHook

__all__ = ["TelemetryHook", "instrument", "uninstrument", "with_telemetry"]


def with_telemetry(hooks: Iterable[Callable[[Any], None]], telemetry: bool = True, tracer_provider: Any = None,
                   meter_provider: Any = None) -> list[Callable[[Any], None]]:
    """``hooks`` with the telemetry hook added (OpenTelemetry-native by default: spans, events,
    metrics and logs through the given or the global providers -- the API alone costs nothing
    until an application installs the SDK), unless ``telemetry`` is off or one is already there."""
    out = list(hooks)
    offered: list[object] = list(out)  # (as objects: a callable may offer more)
    if telemetry and not any(isinstance(hook, EmitsTelemetry) and hook.emits_telemetry for hook in offered):
        out.append(TelemetryHook(tracer_provider, meter_provider))
    return out


def instrument(**kwargs: Any) -> Any:
    """Instrument every httpx/httpx2 client created from now on (and wrap their transports for
    provider hosts). ``enforce=True`` enforces the policy; the default is shadow (observe only).
    Other keywords: ``policy``, ``hosts``, ``tracer_provider``, ``meter_provider``, ``hooks``."""
    instrumentor = _instrumentor_class()()
    instrumentor.instrument(**kwargs)
    return instrumentor


def uninstrument() -> None:
    _instrumentor_class()().uninstrument()


def _instrumentor_class() -> Any:
    """The instrumentor class; its dependency (opentelemetry-instrumentation) comes with the
    ``instrument`` extra, named in the error when it is missing."""
    try:
        from .instrumentor import LivenessInstrumentor
    except ModuleNotFoundError as exc:
        from .._extras import missing_extra

        raise missing_extra(exc, "instrument", "otel_liveness.telemetry.instrument()") from exc
    return LivenessInstrumentor
