"""Liveness transports for the ``httpx2`` family::

    from otel_liveness.httpx2 import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx2 transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
"""

from __future__ import annotations

from .transport import family_classes

LivenessTransport, AsyncLivenessTransport = family_classes("httpx2")

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]
