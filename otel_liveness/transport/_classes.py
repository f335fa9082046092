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

from ._async import AsyncLivenessMixin, AsyncLivenessStream, AsyncPassThrough, AsyncPoolSeat
from ._async.seat import seat_in_pool as _seat_async
from ._base import TransportBase
from ._family import Family
from ._sync import SyncLivenessMixin, SyncLivenessStream, SyncPassThrough, SyncPoolSeat
from ._sync.seat import seat_in_pool as _seat_sync

__all__ = ["is_liveness_transport", "liveness_in", "liveness_transports", "seat", "unseat"]


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


def liveness_in(transport: object) -> TransportBase | None:
    """The liveness transport ``transport`` is, or the one seated in its connection pool
    (:func:`seat`), or ``None``."""
    if isinstance(transport, TransportBase):
        return transport
    pool = getattr(transport, "_pool", None)
    if isinstance(pool, (SyncPoolSeat, AsyncPoolSeat)):
        return pool.liveness  # type: ignore[no-any-return]  # (a TransportBase)
    return None


def seat(family: Family, transport: Any, make: Any) -> bool:
    """Seat a liveness transport, ``make(inner, is_async)``, in the connection pool of ``transport``
    when it is the family's ``HTTPTransport`` or ``AsyncHTTPTransport`` (they send every request
    through ``_pool``), so ``transport`` stays the object it was (see :mod:`._async.seat`).
    Answers False, changing nothing, for any other transport."""
    module: Any = family.module
    if getattr(transport, "_pool", None) is None:
        return False
    if isinstance(transport, module.AsyncHTTPTransport):
        _seat_async(transport, lambda inner: make(inner, True))
        return True
    if isinstance(transport, module.HTTPTransport):
        _seat_sync(transport, lambda inner: make(inner, False))
        return True
    return False


def unseat(transport: Any) -> bool:
    """Put back the connection pool a liveness transport was seated in; False when none was."""
    pool = getattr(transport, "_pool", None)
    if isinstance(pool, (SyncPoolSeat, AsyncPoolSeat)):
        transport._pool = pool.pool
        return True
    return False
