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

from ._public import public_classes

LivenessTransport, AsyncLivenessTransport = public_classes("httpx2")

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]
