"""Liveness transports for the ``httpx2`` family::

    from otel_liveness.httpx2 import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx2 transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
    transport = LivenessTransport(telemetry=False)  # telemetry is on by default (the global providers)
"""

from __future__ import annotations

from ._public import WithTelemetry
from .transport import family, liveness_transports

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]

_SYNC, _ASYNC = liveness_transports(family("httpx2"))


class LivenessTransport(WithTelemetry, _SYNC):  # type: ignore[misc,valid-type]  # a class the transport layer made
    """The liveness policy over an ``httpx2.BaseTransport`` (an ``httpx2.BaseTransport`` itself)."""


class AsyncLivenessTransport(WithTelemetry, _ASYNC):  # type: ignore[misc,valid-type]  # a class the transport layer made
    """The liveness policy over an ``httpx2.AsyncBaseTransport`` (an ``httpx2.AsyncBaseTransport`` itself)."""
