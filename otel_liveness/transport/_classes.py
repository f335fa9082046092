"""The liveness transports of one HTTP library family: the drivers (:mod:`._async`, and the
generated :mod:`._sync`) joined to the family's own base classes, so that a liveness transport
*is* an ``httpx.BaseTransport`` (or an ``httpx2`` one) and its bodies are the family's byte
streams -- what the family's clients and the SDKs check.

These are the transport layer's classes: they take ``hooks`` and know nothing of OpenTelemetry.
The public ones, :class:`otel_liveness.httpx.LivenessTransport` and the others, are these with
telemetry on by default; the auto-instrumentor builds these with its own telemetry hook.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ._async import AsyncLivenessMixin, AsyncLivenessStream, AsyncPassThrough
from ._base import TransportBase
from ._family import Family
from ._sync import SyncLivenessMixin, SyncLivenessStream, SyncPassThrough

__all__ = ["is_liveness_transport", "liveness_transports"]


@cache
def liveness_transports(family: Family) -> tuple[type[TransportBase], type[TransportBase]]:
    """``(LivenessTransport, AsyncLivenessTransport)`` of ``family``, made once (the family's
    module is imported only when installed, so its classes are joined on first use)."""
    x: Any = family.module

    class LivenessStream(SyncLivenessStream, x.SyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body the caller reads (see :class:`SyncLivenessStream`)."""

    class PassThrough(SyncPassThrough, x.SyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body of a response the engine does not judge."""

    class LivenessTransport(SyncLivenessMixin, x.BaseTransport):  # type: ignore[misc]  # the family's classes are Any to mypy
        """A liveness transport over a sync transport of the family."""

        _family = family
        _stream_cls = LivenessStream
        _passthrough_cls = PassThrough

    class AsyncLivenessStream_(AsyncLivenessStream, x.AsyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body the caller reads (see :class:`AsyncLivenessStream`)."""

    class AsyncPassThrough_(AsyncPassThrough, x.AsyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body of a response the engine does not judge."""

    class AsyncLivenessTransport(AsyncLivenessMixin, x.AsyncBaseTransport):  # type: ignore[misc]  # the family's classes are Any to mypy
        """A liveness transport over an async transport of the family."""

        _family = family
        _stream_cls = AsyncLivenessStream_
        _passthrough_cls = AsyncPassThrough_

    return LivenessTransport, AsyncLivenessTransport


def is_liveness_transport(transport: object) -> bool:
    """Whether ``transport`` is a liveness transport (of either family, sync or async): its
    ``inner`` is the transport it wraps."""
    return isinstance(transport, TransportBase)
