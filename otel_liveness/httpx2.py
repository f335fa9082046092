"""Liveness transports for the ``httpx2`` family::

    from otel_liveness.httpx2 import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx2 transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
    transport = LivenessTransport(telemetry=False)  # telemetry is on by default (the global providers)
"""

from __future__ import annotations

from ._extras import missing_extra

try:
    import httpx2 as _httpx2  # noqa: F401 - the family must be importable
except ModuleNotFoundError as exc:  # the extra that brings it, named in the error
    raise missing_extra(exc, "httpx2", "otel_liveness.httpx2") from exc

from ._public import WithTelemetry
from .transport import family, liveness_transports

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]

_SYNC, _ASYNC = liveness_transports(family("httpx2"))


class LivenessTransport(WithTelemetry, _SYNC):  # type: ignore[misc,valid-type]  # a class the transport layer made
    """The liveness policy over an ``httpx2.BaseTransport`` (an ``httpx2.BaseTransport`` itself)."""


class AsyncLivenessTransport(WithTelemetry, _ASYNC):  # type: ignore[misc,valid-type]  # a class the transport layer made
    """The liveness policy over an ``httpx2.AsyncBaseTransport`` (an ``httpx2.AsyncBaseTransport`` itself)."""
