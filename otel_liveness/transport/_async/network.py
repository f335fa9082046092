"""Reads that wake: the network backend the transport gives the inner transport's connection pool.

A read that waits on a silent socket gives the driver no control, so a notice would wait for the
next byte, and deadlines that a socket timeout cannot express (the first-byte bound until the
body starts, the raw bound after it -- learned, when adaptive -- the semantic timeout, the wall
budget) could not end it. httpcore closes the connection on any exception from a read it makes,
so the wait cannot be cut short above it; below it, at the network stream, it can: a
socket-level read that times out has consumed nothing and may simply be made again. So the
inner transport's connection pool gets a network backend whose streams, while an engine is
reading (the stream's slot, ``watch``), wake at the engine's hints, let it deliver notices in the
reader's own thread or task, and end the read as a timeout when the engine says a deadline passed
(the driver then asks it for the verdict). No thread, no task, no timer; a read with nothing due
before its own timeout is passed through.

The slot is filled from the request, through public seams only: the transport hands the engine
down in the request's extensions (:data:`~.._backends.ENGINE_EXTENSION`); the pool's connections
are :class:`AsyncWatchedConnection` (the pool's public ``create_connection``), which put it in the
slot of the network stream they carry before httpcore writes the request and reads its response
-- a stream they learned from a response's ``extensions["network_stream"]``, or, on the
connection's first request, from the ``trace`` extension's ``connect_tcp``/``start_tls`` events,
which name the stream they open -- and empty it when the request fails there. The body's stream
empties it when the body is closed, the driver when it discards a response.

HTTP/2 (docs/http2.md). The streams of one connection share its network stream, and a read of it
is judged by the HTTP/2 stream it is made for, not by the network read: that is :mod:`.http2`'s.
This module only hands such a connection's reads and writes over: the backend is given a
``multiplexed`` function (:func:`.http2.h2_opened`) that looks at each write of a stream not yet
known to be HTTP/2, and once it answers (the preface went out) the stream's reads and writes go
through what it returned (a :class:`Multiplexed`). This module imports nothing of :mod:`.http2`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ...core.attempt.clocks import wake_at
from ...core.request.engine import Engine
from .._backends import ENGINE_EXTENSION, AsyncBackend

__all__ = ["AsyncWakingBackend", "AsyncWakingStream", "AsyncWatchedConnection", "Multiplexed", "Opened", "unwatch"]

_INF = float("inf")


class Multiplexed(Protocol):
    """The reads and writes of a network stream that carries several requests' streams at once
    (HTTP/2: :class:`.http2.AsyncH2Connection`)."""

    async def read(self, max_bytes: int, timeout: float | None) -> bytes: ...

    def writing(self) -> None: ...

    def wrote(self) -> None: ...


#: Given a network stream and a buffer about to be written on it, the :class:`Multiplexed` that
#: takes its reads and writes over from then on, or ``None`` (not, or not yet, multiplexed).
Opened = Callable[["AsyncWakingStream", bytes], "Multiplexed | None"]


class AsyncWakingBackend:
    """An httpcore network backend whose streams are :class:`AsyncWakingStream`."""

    def __init__(self, inner: Any, timeout_error: type[BaseException], multiplexed: Opened | None = None) -> None:
        self._inner = inner
        self._timeout_error = timeout_error
        self._multiplexed = multiplexed

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> Any:
        stream = await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
        return AsyncWakingStream(stream, self._timeout_error, self._multiplexed)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        stream = await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return AsyncWakingStream(stream, self._timeout_error, self._multiplexed)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class AsyncWakingStream:
    """A network stream whose reads wake at the reading engine's hints (``Engine.wake_hint``,
    ``stop_hint``, ``raw_hint``; a read's wake time is :func:`~otel_liveness.core.attempt.clocks.wake_at`).
    Hints only ever move later, so a stale one can only wake a read early: the engine then delivers
    what is due, refreshes them, and the read goes back to waiting. A read that gets data first
    costs one clock read. On a multiplexed connection (HTTP/2: ``multiplexed`` answered one of its
    writes) reads and writes go through ``h2``."""

    __slots__ = ("_multiplexed", "h2", "inner", "timeout_error", "watch")

    #: The slot: the engine the stream's reads wake for (the request it carries), or ``None``.
    watch: Engine | None

    def __init__(self, inner: Any, timeout_error: type[BaseException], multiplexed: Opened | None = None) -> None:
        self.inner = inner
        self.timeout_error = timeout_error
        self._multiplexed = multiplexed
        self.h2: Multiplexed | None = None
        self.watch: Engine | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        h2 = self.h2
        if h2 is not None:
            return await h2.read(max_bytes, timeout)
        engine = self.watch
        inner: Any = self.inner
        if engine is None:
            data: bytes = await inner.read(max_bytes, timeout)
            return data
        clock = AsyncBackend.now
        start = now = clock()
        deadline = _INF if timeout is None else now + timeout
        while True:
            wake = wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, start)
            if wake >= deadline:
                data = await inner.read(max_bytes, None if timeout is None else max(deadline - now, 0.001))
                return data
            try:
                data = await inner.read(max_bytes, max(wake - now, 0.001))
                return data
            except self.timeout_error:
                now = clock()
                if now >= deadline or engine.woke(now, start):
                    raise  # the read's own timeout, or a deadline of the engine's: the driver judges it

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        h2 = self.h2
        if h2 is None and self._multiplexed is not None:
            h2 = self.h2 = self._multiplexed(self, buffer)
        if h2 is None:
            await self.inner.write(buffer, timeout)
            return
        h2.writing()
        await self.inner.write(buffer, timeout)
        h2.wrote()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        stream = await self.inner.start_tls(ssl_context, server_hostname, timeout)
        return AsyncWakingStream(stream, self.timeout_error, self._multiplexed)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


#: The ``trace`` events that name a network stream a connection opened (their ``return_value``):
#: httpcore's connection and proxy connections, for TCP, a Unix socket and TLS over either.
_OPENED = (".connect_tcp.complete", ".connect_unix_socket.complete", ".start_tls.complete")


class AsyncWatchedConnection:
    """One of the pool's connections (httpcore's own, which it wraps; the pool's public
    ``create_connection`` makes it) that fills the slot of the network stream it carries from each
    request's extensions (:data:`~.._backends.ENGINE_EXTENSION`), before httpcore writes the request
    and reads its response. A request that names no engine empties it. On HTTP/2 (several
    requests at once on one stream) the slot is not used: :mod:`.http2` judges each stream's reads.
    Everything else is the wrapped connection's (httpcore's connection interface, delegated)."""

    __slots__ = ("inner", "network")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        #: The network stream the connection carries, once a response or a ``trace`` event named it.
        self.network: AsyncWakingStream | None = None

    async def handle_async_request(self, request: Any) -> Any:
        engine: Engine | None = request.extensions.get(ENGINE_EXTENSION)
        network = self.network
        if network is None:
            if engine is not None:  # a new connection (or one not yet named): the trace names its stream
                request = _traced(request, engine, self)
        elif network.h2 is None:
            network.watch = engine
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException:
            unwatch(self.network, engine)
            raise
        named = response.extensions.get("network_stream")
        if isinstance(named, AsyncWakingStream):
            self.network = named
            if named.h2 is not None:  # HTTP/2: the slot is not used (a first request's trace filled it)
                unwatch(named, engine)
        return response

    # -- the rest of httpcore's connection interface, the wrapped connection's (the pool asks
    # these of every connection on every request: delegated directly, not through __getattr__)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def info(self) -> str:
        return self.inner.info()  # type: ignore[no-any-return]

    def can_handle_request(self, origin: Any) -> bool:
        return self.inner.can_handle_request(origin)  # type: ignore[no-any-return]

    def is_connected(self) -> bool:
        return self.inner.is_connected()  # type: ignore[no-any-return]

    def is_available(self) -> bool:
        return self.inner.is_available()  # type: ignore[no-any-return]

    def has_expired(self) -> bool:
        return self.inner.has_expired()  # type: ignore[no-any-return]

    def is_idle(self) -> bool:
        return self.inner.is_idle()  # type: ignore[no-any-return]

    def can_multiplex(self) -> bool:
        return self.inner.can_multiplex()  # type: ignore[no-any-return]

    def is_closed(self) -> bool:
        return self.inner.is_closed()  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:  # anything else (request(), stream(), a proxy's own)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)


def _traced(request: Any, engine: Engine, connection: AsyncWatchedConnection) -> Any:
    """``request`` (httpcore's) with a ``trace`` extension that fills the slot of each network
    stream the connection opens for it (the caller's own trace still called, first)."""
    previous = request.extensions.get("trace")

    async def trace(event: str, info: dict[str, Any]) -> None:
        if previous is not None:
            await previous(event, info)
        if event.endswith(_OPENED):
            opened = info.get("return_value")
            if isinstance(opened, AsyncWakingStream):
                opened.watch = engine
                connection.network = opened

    return type(request)(request.method, request.url, headers=request.headers, content=request.stream,
                         extensions={**request.extensions, "trace": trace})


def unwatch(network: Any, engine: Engine | None) -> None:
    """Empty ``network``'s slot if it holds ``engine`` (a pooled connection must not keep an engine
    that ended, and with it its prefix)."""
    if isinstance(network, AsyncWakingStream) and network.watch is engine:
        network.watch = None
