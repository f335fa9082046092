"""Liveness transports for the ``httpx`` family::

    from otel_liveness.httpx import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
    transport = LivenessTransport(telemetry=False)  # telemetry is on by default (the global providers)
"""

from __future__ import annotations

from ._public import public_classes

LivenessTransport, AsyncLivenessTransport = public_classes("httpx")

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]
