"""Liveness transports for the ``httpx`` family::

    from otel_liveness.httpx import LivenessTransport, AsyncLivenessTransport

    transport = LivenessTransport()             # a default httpx transport with TCP keep-alives
    transport = LivenessTransport(inner, policy)
"""

from __future__ import annotations

from .transport import family_classes

LivenessTransport, AsyncLivenessTransport = family_classes("httpx")

__all__ = ["AsyncLivenessTransport", "LivenessTransport"]
