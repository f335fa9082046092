"""Liveness transports for the ``httpx2`` family::

    from otel_liveness.httpx2 import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx2 transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
    transport = LivenessTransport(telemetry=False)  # telemetry is on by default (the global providers)
"""

from __future__ import annotations

from ._public import public_classes

LivenessTransport, AsyncLivenessTransport = public_classes("httpx2")

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]
