"""What the public transports add to the transport layer's: telemetry, on by default. The
transport layer knows nothing of OpenTelemetry; this module, above both, joins them for
:mod:`otel_liveness.httpx`, :mod:`otel_liveness.httpx2` and :func:`otel_liveness.wrap`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .core.policy import Policy
from .telemetry import with_telemetry

__all__ = ["WithTelemetry"]


class WithTelemetry:
    """Mixed in ahead of a transport layer class (:func:`otel_liveness.transport.liveness_transports`)."""

    def __init__(
        self,
        inner: Any = None,
        policy: Policy | None = None,
        *,
        hooks: Iterable[Callable[[Any], None]] = (),
        hosts: Iterable[str] | None = None,
        telemetry: bool = True,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        **transport_kwargs: Any,
    ) -> None:
        """``inner`` (default: a new transport of the family with the SDKs' TCP keep-alives; then
        ``transport_kwargs`` go to it), the ``policy``, ``hooks``, ``hosts`` (others pass through
        untouched), and telemetry: on by default through the given or global providers,
        ``telemetry=False`` to turn it off, a ``TelemetryHook`` in ``hooks`` to configure it."""
        super().__init__(inner, policy,  # type: ignore[call-arg]  # the transport class it is mixed into takes them
                         hooks=with_telemetry(hooks, telemetry, tracer_provider, meter_provider), hosts=hosts,
                         **transport_kwargs)
