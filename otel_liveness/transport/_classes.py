"""The liveness transports of one HTTP library family: the drivers (:mod:`._async`, and the
generated :mod:`._sync`) joined to the family's own base classes, so that a liveness transport
*is* an ``httpx.BaseTransport`` (or an ``httpx2`` one) and its bodies are the family's byte
streams -- what the family's clients and the SDKs check.

These are the transport layer's classes: they take ``hooks`` and know nothing of OpenTelemetry.
The public ones, :class:`otel_liveness.httpx.LivenessTransport` and the others, are these with
telemetry on by default; the auto-instrumentor builds these with its own telemetry hook.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from ._adopt import share_pool
from ._async import AsyncLivenessMixin, AsyncLivenessStream, AsyncPassThrough, AsyncPoolTransport, AsyncResumingStream
from ._base import TransportBase
from ._family import Family, keepalive_socket_options
from ._sync import SyncLivenessMixin, SyncLivenessStream, SyncPassThrough, SyncPoolTransport, SyncResumingStream
from ._sync.transport import http_proxy

__all__ = ["is_liveness_transport", "liveness_in", "liveness_transports", "pool_transports", "seat", "unseat"]


@cache
def liveness_transports(family: Family) -> tuple[type[TransportBase], type[TransportBase]]:
    """``(HookedTransport, AsyncHookedTransport)`` of ``family``, made once (the family's module is
    imported only when installed, so its classes are joined on first use). They take ``hooks`` and
    nothing of OpenTelemetry; the public ``LivenessTransport`` classes are these with telemetry."""
    x: Any = family.module

    class LivenessStream(SyncLivenessStream, x.SyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body the caller reads (see :class:`SyncLivenessStream`)."""

    class PassThrough(SyncPassThrough, x.SyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body of a response the engine does not judge."""

    class ResumingStream(SyncResumingStream, x.SyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body of a resumable stream (see :class:`SyncResumingStream`)."""

    class HookedTransport(SyncLivenessMixin, x.BaseTransport):  # type: ignore[misc]  # the family's classes are Any to mypy
        """A liveness transport over a sync transport of the family."""

        _family = family
        _stream_cls = LivenessStream
        _passthrough_cls = PassThrough
        _resuming_cls = ResumingStream

    class AsyncLivenessStream_(AsyncLivenessStream, x.AsyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body the caller reads (see :class:`AsyncLivenessStream`)."""

    class AsyncPassThrough_(AsyncPassThrough, x.AsyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body of a response the engine does not judge."""

    class AsyncResumingStream_(AsyncResumingStream, x.AsyncByteStream):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The body of a resumable stream (see :class:`AsyncResumingStream`)."""

    class AsyncHookedTransport(AsyncLivenessMixin, x.AsyncBaseTransport):  # type: ignore[misc]  # the family's classes are Any to mypy
        """A liveness transport over an async transport of the family."""

        _family = family
        _stream_cls = AsyncLivenessStream_
        _passthrough_cls = AsyncPassThrough_
        _resuming_cls = AsyncResumingStream_

    return HookedTransport, AsyncHookedTransport


@cache
def pool_transports(family: Family) -> tuple[type, type]:
    """``(HTTPTransport, AsyncHTTPTransport)``: the inner transports a liveness transport of
    ``family`` builds when given none -- subclasses of the family's own, over a connection pool
    the transport builds itself (``_async/transport.py``), made once."""
    x: Any = family.module

    class HTTPTransport(SyncPoolTransport, x.HTTPTransport):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The family's ``HTTPTransport`` over a connection pool the liveness transport built."""

        _family = family

    class AsyncHTTPTransport(AsyncPoolTransport, x.AsyncHTTPTransport):  # type: ignore[misc]  # the family's classes are Any to mypy
        """The family's ``AsyncHTTPTransport`` over a connection pool the liveness transport built."""

        _family = family

    return HTTPTransport, AsyncHTTPTransport


def default_transport(family: Family, *, asynchronous: bool, **kwargs: Any) -> Any:
    """The inner transport a liveness transport of ``family`` builds when given none (``kwargs``:
    the family's ``HTTPTransport`` options, with the SDKs' TCP keep-alives by default): one over a
    connection pool it builds itself with the waking network backend (``_async/transport.py``),
    directly or through an HTTP(S) proxy; through a SOCKS proxy, the family's own transport,
    whose pool is then adopted as a caller's is (``_async/http2.py``, ``install_wakeups``;
    docs/http2.md, "Whose pool"). Handed to :class:`~._base.TransportBase` below (``_base``
    imports nothing above it)."""
    kwargs.setdefault("socket_options", keepalive_socket_options())
    if kwargs.get("proxy") is None or http_proxy(family.module, kwargs["proxy"]) is not None:
        cls = pool_transports(family)[1 if asynchronous else 0]
    else:
        cls = family.module.AsyncHTTPTransport if asynchronous else family.module.HTTPTransport
    return cls(**kwargs)


TransportBase.default_transport = staticmethod(default_transport)


def is_liveness_transport(transport: object) -> bool:
    """Whether ``transport`` is a liveness transport (of either family, sync or async): its
    ``inner`` is the transport it wraps."""
    return isinstance(transport, TransportBase)


_SEATS = ("handle_request", "handle_async_request")


def liveness_in(transport: object) -> TransportBase | None:
    """The liveness transport ``transport`` is, or the one seated in it (:func:`seat`), or ``None``."""
    if isinstance(transport, TransportBase):
        return transport
    for name in _SEATS:
        seated = getattr(getattr(transport, "__dict__", {}).get(name), "__self__", None)
        if isinstance(seated, TransportBase):
            return seated
    return None


def seat(transport: Any, make: Any, is_async: bool) -> bool:
    """Seat a liveness transport in ``transport`` (a transport of either family, of the kind
    ``is_async`` says), so ``transport`` stays the object it was -- its class, its proxy, what
    the client and the SDK above read of it: ``make(inner, is_async)``
    builds the liveness transport over a copy of ``transport`` (the same pool -- rebuilt to wake,
    then named by both -- handler and configuration), and its ``handle_request`` (``handle_async_request``) takes the place of the
    transport's own on that object. What wraps the class's method (an HTTP client instrumentation)
    now runs for each attempt, inside the liveness transport's send context. Answers False,
    changing nothing, for an object that takes no attribute of its own (``__slots__``)."""
    if not hasattr(transport, "__dict__"):
        return False
    name = "handle_async_request" if is_async else "handle_request"
    inner = copy.copy(transport)  # (copied before the seat is set on it)
    liveness = make(inner, is_async)
    share_pool(transport, inner)  # the copy's pool, if it was rebuilt (_adopt.py): one pool for both
    setattr(transport, name, getattr(liveness, name))
    return True


def unseat(transport: Any) -> bool:
    """Take a seated liveness transport out of ``transport``; False when none was seated."""
    if liveness_in(transport) is None or isinstance(transport, TransportBase):
        return False
    for name in _SEATS:
        transport.__dict__.pop(name, None)
    return True
