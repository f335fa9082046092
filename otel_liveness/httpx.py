"""Liveness transports for the ``httpx`` family::

    from otel_liveness.httpx import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
    transport = LivenessTransport(telemetry=False)  # telemetry is on by default (the global providers)
"""

from __future__ import annotations

from ._extras import missing_extra

try:
    import httpx as _httpx  # noqa: F401 - the family must be importable
except ModuleNotFoundError as exc:  # the extra that brings it, named in the error
    raise missing_extra(exc, "httpx", "otel_liveness.httpx") from exc

from ._public import WithTelemetry
from .transport import family, liveness_transports

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]

_SYNC, _ASYNC = liveness_transports(family("httpx"))


class LivenessTransport(WithTelemetry, _SYNC):  # type: ignore[misc,valid-type]  # a class the transport layer made
    """The liveness policy over an ``httpx.BaseTransport`` (an ``httpx.BaseTransport`` itself)."""


class AsyncLivenessTransport(WithTelemetry, _ASYNC):  # type: ignore[misc,valid-type]  # a class the transport layer made
    """The liveness policy over an ``httpx.AsyncBaseTransport`` (an ``httpx.AsyncBaseTransport`` itself)."""
