"""HTTP/2 on a shared connection: each stream judged on its own (docs/http2.md).

:func:`new_pool` builds the connection pool the transport owns with the waking network backend
(:mod:`.network`) through httpcore's public ``network_backend=``; :func:`install_wakeups` builds
the same twin of a pool the caller built (its settings read by the one adapter, :mod:`.._adopt`). The
backend's streams hand their reads and writes to an :class:`AsyncH2Connection` once they carry
HTTP/2 (:func:`h2_opened`: the first write is the preface), and the pool (:class:`AsyncH2Pool`
mixed into its class; its connections are :class:`~.network.AsyncWatchedConnection`, which fill
their network stream's engine slot from the request) reads its HTTP/2 responses through
:class:`AsyncH2Stream`, which marks each
read with :data:`H2_READ`, bounds it (on asyncio/trio) by a cancel scope at the stream's own
deadline -- for a reader that waits for the read lock while a sibling reads -- turns a deadline
into the HTTP library's read timeout (the driver then asks the engine for the verdict), and resets
the HTTP/2 stream (RST_STREAM) when it is closed before its end, so the provider stops generating
and the connection's flow-control window is not spent on a stream nobody reads.

The streams of one connection share its network stream: whichever stream's reader holds
httpcore's read lock reads for all of them, and an exception from that read (a timeout included)
fails the connection and every sibling. So on an HTTP/2 connection the network stream judges a
read by the stream it is made for (:data:`H2_READ`: its engine, and when that stream's own wait
began), never by the network read, and ends it with :class:`StreamDeadline`, a ``BaseException``
that httpcore lets through as it lets a cancellation through: it closes that stream alone and
leaves the connection and its read state untouched (the read consumed nothing).

:data:`H2_READ` is a context variable because httpcore gives no hook between the request it is
handed and the network read made for it: the read is made by httpcore's HTTP/2 connection (for
this stream, or by a sibling's reader for all of them), and the context of the reader's task or
thread is what says which stream a read is made for. It is per stream, not per connection: each
stream's reader sets its own, so each HTTP/2 stream's silence is its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from ...core.attempt.clocks import stop_at, wake_at
from ...core.request.engine import Engine
from .._adopt import adopt
from .._backends import ENGINE_EXTENSION, AsyncBackend
from .network import AsyncWakingBackend, AsyncWakingStream, AsyncWatchedConnection

__all__ = ["H2_READ", "AsyncH2Connection", "AsyncH2Pool", "AsyncH2Stream", "AsyncH2Wait", "StreamDeadline",
           "h2_opened", "install_wakeups", "new_pool"]

#: The wait of the HTTP/2 stream a read is made for (its engine, and when that stream's wait began).
H2_READ: ContextVar[AsyncH2Wait | None] = ContextVar("otel_liveness_h2_read", default=None)
_INF = float("inf")
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

_H2_CANCEL = 0x8  # RST_STREAM error code CANCEL (RFC 9113, 7)
#: How much later than the stream's deadline the cancel scope fires: the stream's own read (when it
#: is the one reading) ends it first, at the deadline, with nothing to cancel.
_SCOPE_GRACE = 0.02


class StreamDeadline(BaseException):  # a control-flow signal, like a cancellation
    """An HTTP/2 stream's deadline passed during a read made for it (raised by the network
    stream, turned into the HTTP library's read timeout above httpcore)."""


class AsyncH2Wait:
    """One HTTP/2 stream waiting for its next event (its headers, or its next body read), from
    ``start``. While it waits it is registered with its connection's network stream, whose reads
    -- made by whichever sibling's reader holds the connection -- also wake at its notices and
    deliver them (``lock`` keeps that and the stream's own thread apart in sync mode). Its
    deadlines are not judged there: its next bytes may already be queued in httpcore, unread only
    because its reader waits for the connection; they are its own reader's (and, on asyncio/trio,
    its cancel scope's) to judge."""

    __slots__ = ("engine", "lock", "network", "quiet", "registry", "start")

    def __init__(self, engine: Engine, start: float) -> None:
        self.engine = engine
        self.start = start
        self.lock = AsyncBackend.lock()
        self.registry: set[AsyncH2Wait] | None = None
        self.network: AsyncWakingStream | None = None  # the connection's network stream it waited on
        self.quiet = False  # nothing more for a sibling to deliver (not woken for again)

    def due(self) -> float:
        """When something of this stream falls due: a notice, or a deadline of its own."""
        engine = self.engine
        return wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, self.start)

    def join(self, registry: set[AsyncH2Wait]) -> None:
        if self.registry is None:
            self.registry = registry
            registry.add(self)

    def leave(self) -> None:
        with self.lock:
            registry, self.registry = self.registry, None
            if registry is not None:
                registry.discard(self)

    def serve(self, now: float) -> None:
        """Called by a sibling's read: deliver the notices due to this (waiting) stream."""
        with self.lock:
            if self.registry is None or self.quiet:
                return
            engine = self.engine
            engine.notify(now)
            if engine.wake_hint <= now:
                self.quiet = True  # the engine has nothing more to deliver: not woken for again

class AsyncH2Connection:
    """The reads and writes of a network stream that carries an HTTP/2 connection (a
    :class:`~.network.Multiplexed` of :class:`~.network.AsyncWakingStream`, made by
    :func:`h2_opened`), with the streams of that connection waiting for an event (``waits``)."""

    __slots__ = ("network", "waits")

    def __init__(self, network: AsyncWakingStream) -> None:
        self.network = network
        #: The streams of this connection waiting for an event (:class:`AsyncH2Wait`).
        self.waits: set[AsyncH2Wait] = set()

    async def read(self, max_bytes: int, timeout: float | None) -> bytes:
        """A read of a connection shared by HTTP/2 streams, made for the stream waiting in
        ``H2_READ``: it wakes at that stream's hints -- its raw silence counted from when the
        *stream's* wait began -- and at the notices of the siblings waiting meanwhile (delivered
        here); a deadline of its own stream, or the read's own timeout, ends the read with
        :class:`StreamDeadline`, which ends that stream alone. A read made for no judged stream
        (a request the transport passes through) still wakes for the waiting siblings; its own
        timeout is the HTTP library's."""
        current = H2_READ.get()
        network = self.network
        inner: Any = network.inner
        waits = self.waits
        if current is None and not waits:
            data: bytes = await inner.read(max_bytes, timeout)
            return data
        clock = AsyncBackend.now
        now = clock()
        deadline = _INF if timeout is None else now + timeout
        while True:
            wake = _INF if current is None else current.due()
            for other in waits:
                if other is not current and not other.quiet:
                    due = other.engine.wake_hint
                    if due < wake:
                        wake = due
            if current is None and wake >= deadline:
                # A read for no judged stream: its own timeout is the HTTP library's, as it comes.
                data = await inner.read(max_bytes, None if timeout is None else max(deadline - now, 0.001))
                return data
            if deadline < wake:
                wake = deadline
            if wake <= now:
                self._serve(now, current)
                if current is not None:
                    with current.lock:
                        if now >= deadline or current.engine.woke(now, current.start):
                            raise StreamDeadline
            try:
                data = await inner.read(max_bytes, None if wake == _INF else max(wake - now, 0.001))
            except network.timeout_error:
                now = clock()
            else:
                if len(waits) > (current is not None):
                    self._serve(clock(), current)
                return data

    def _serve(self, now: float, current: AsyncH2Wait | None) -> None:
        """Deliver what is due at ``now`` to the siblings of ``current`` waiting on this connection."""
        for other in list(self.waits):
            if other is not current and not other.quiet and other.engine.wake_hint <= now:
                other.serve(now)

    def opened(self) -> None:
        """The preface is about to go out: the stream whose request opened the connection waits here."""
        current = H2_READ.get()
        if current is not None:
            current.network = self.network
            current.join(self.waits)

    def writing(self) -> None:
        current = H2_READ.get()
        if current is not None and current.registry is None and current.network is None:
            current.network = self.network  # a stream's request goes out on this connection: it waits here
            current.join(self.waits)

    def wrote(self) -> None:
        if len(self.waits) > 1:
            # httpcore writes after releasing the connection's read lock: give a sibling waiting
            # for it (its bytes perhaps read for it already) the chance to take it (threads only:
            # an event loop's locks are fair).
            AsyncBackend.let_waiters_run()


def h2_opened(network: AsyncWakingStream, buffer: bytes) -> AsyncH2Connection | None:
    """The HTTP/2 side of ``network`` if ``buffer``, about to be written on it, is the HTTP/2
    preface (httpcore opens an HTTP/2 connection on this stream), else ``None``."""
    if buffer[:24] != _H2_PREFACE:
        return None
    connection = AsyncH2Connection(network)
    connection.opened()
    return connection


def new_pool(core: Any, pool_class: Any, *, network_backend: Any = None, **options: Any) -> Any:
    """A connection pool of ``core`` (httpcore or httpcore2; ``pool_class``: its
    ``AsyncConnectionPool`` or its ``AsyncHTTPProxy``) built by the liveness transport itself,
    through httpcore's public constructor: ``network_backend=`` the waking backend over
    ``network_backend`` (by default the one httpcore would pick), its class httpcore's own with
    :class:`AsyncH2Pool` mixed in. Nothing of httpcore's is assigned or read after the fact."""
    timeout_error = core.ReadTimeout
    network = AsyncBackend.network(core) if network_backend is None else network_backend
    backend = AsyncWakingBackend(network, timeout_error, h2_opened)
    return _h2_pool_class(pool_class, timeout_error)(network_backend=backend, **options)


def install_wakeups(inner: Any) -> bool:
    """For a transport the caller (or an SDK) built and handed over: its pool is rebuilt as
    :func:`new_pool` builds one, from the caller's pool's settings, over the caller's network
    backend (:func:`~.._adopt.adopt`, the one adapter that reads httpcore's privates for it); the
    caller's pool object is not altered. Answers whether the pool now wakes; a pool that cannot
    be rebuilt (another class, a mock, connections already opened) is judged plainly: its
    deadlines are the socket timeout's, and notices arrive with the next read."""
    return adopt(inner, new_pool, AsyncH2Pool)


_H2_POOLS: dict[type, type] = {}


def _h2_pool_class(cls: type, timeout_error: type[BaseException]) -> type:
    """``cls`` (an httpcore connection pool class) whose responses on HTTP/2 are
    :class:`AsyncH2Stream` (``timeout_error``: its httpcore's ``ReadTimeout``); HTTP/1.1 responses
    are returned as they come."""
    if issubclass(cls, AsyncH2Pool):
        return cls
    sub = _H2_POOLS.get(cls)
    if sub is None:
        sub = _H2_POOLS[cls] = type(cls.__name__, (AsyncH2Pool, cls),
                                    {"__module__": cls.__module__, "_liveness_timeout_error": timeout_error})
    return sub


class AsyncH2Pool:
    """Mixed into the class of the connection pool the liveness transport builds (:func:`new_pool`:
    its own, or the twin of a caller's, :func:`install_wakeups`)."""

    _liveness_timeout_error: type[BaseException]

    def create_connection(self, origin: Any) -> Any:
        """httpcore's connection (a proxy's too), wrapped to fill its network stream's slot from
        each request (:class:`~.network.AsyncWatchedConnection`)."""
        return AsyncWatchedConnection(super().create_connection(origin))  # type: ignore[misc]

    async def handle_async_request(self, request: Any) -> Any:
        engine: Engine | None = request.extensions.get(ENGINE_EXTENSION)
        if engine is None:  # not a request the engine judges
            return await super().handle_async_request(request)  # type: ignore[misc]
        wait = AsyncH2Wait(engine, AsyncBackend.now())  # joins its connection's waits when it writes there
        token = H2_READ.set(wait)
        try:
            response = await super().handle_async_request(request)  # type: ignore[misc]
        except BaseException as exc:
            H2_READ.reset(token)
            wait.leave()
            if wait.network is not None:  # ended before its response on HTTP/2: reset what httpcore forgot
                await _cancel_streams(request, pool=self, network=wait.network)
            if isinstance(exc, StreamDeadline):
                raise self._liveness_timeout_error("the stream's deadline passed (HTTP/2)") from None
            raise
        H2_READ.reset(token)
        wait.leave()
        if response.extensions.get("http_version") == b"HTTP/2":
            network = response.extensions.get("network_stream")
            h2 = network.h2 if isinstance(network, AsyncWakingStream) else None
            waits = h2.waits if isinstance(h2, AsyncH2Connection) else None
            response.stream = AsyncH2Stream(response.stream, engine, request, self._liveness_timeout_error, waits)
        return response


def _forgotten(known: Any) -> Callable[[Any], list[int]]:
    """The open client streams of an h2 state that httpcore no longer knows (``known``: its own)."""
    return lambda state: [stream_id for stream_id, stream in list(state.streams.items())
                          if stream_id % 2 and stream_id not in known and not stream.closed]


async def _cancel_streams(request: Any, *, body: Any = None, pool: Any = None,
                          network: AsyncWakingStream | None = None) -> None:
    """RST_STREAM (CANCEL), written out at once, for the HTTP/2 stream of ``body`` (the pool's
    response stream of a response closed before its end), or -- given ``pool`` and the ``network``
    stream of one of its HTTP/2 connections -- for every stream of that connection that httpcore
    has forgotten while it is still open (a stream ended before its response: httpcore only drops
    it), so that the provider stops and its bytes do not use up the connection's window.

    httpcore has no public way to reset one stream: this is the one function that reads and
    writes its privates for it -- a pool's connection's ``_connection``; the HTTP/2 connection's
    ``_network_stream``, ``_events``, ``_h2_state`` (h2's public ``H2Connection``), ``_state_lock``
    and ``_write_outgoing_data(request)``; a response stream's ``_stream``, whose ``_connection``
    and ``_stream_id`` name it. tests/test_http2_privates.py fails when httpcore changes one of
    them, and resets a stream through this function against httpcore's own HTTP/2 connection.
    Where they are missing, or the connection is gone, nothing is sent."""
    conn: Any = None
    pick: Callable[[Any], Iterable[int]]
    if body is not None:
        stream = getattr(body, "_stream", None)
        conn = getattr(stream, "_connection", None)
        stream_id = getattr(stream, "_stream_id", None)
        if stream_id is None:
            return
        pick = lambda state: (stream_id,)
    else:
        for connection in list(getattr(pool, "connections", ())):
            if isinstance(connection, AsyncWatchedConnection):
                connection = connection.inner  # (ours: httpcore's connection is the one it wraps)
            inner: Any = getattr(connection, "_connection", None)
            if getattr(inner, "_network_stream", None) is network:
                conn = inner
                break
        known = getattr(conn, "_events", None)
        if known is None:
            return
        pick = _forgotten(known)
    state = getattr(conn, "_h2_state", None)
    if state is None:
        return
    with AsyncBackend.shield():
        try:
            async with conn._state_lock:
                for picked in pick(state):
                    state.reset_stream(picked, _H2_CANCEL)
            await conn._write_outgoing_data(request)
        except Exception:  # noqa: BLE001 - already ended or reset by the peer, or the connection is gone
            return


class AsyncH2Stream:
    """The body of a response on an HTTP/2 connection, read one stream-level read at a time: each
    marked with ``H2_READ`` (the engine and when this stream's wait began, so its silence is its
    own, whatever its siblings send) and bounded by the stream's own deadline; closed before its
    end, the HTTP/2 stream is reset."""

    def __init__(self, inner: Any, engine: Engine, request: Any, timeout_error: type[BaseException],
                 waits: set[AsyncH2Wait] | None) -> None:
        self._inner = inner
        self._waits = waits
        self._iterator: Any = None
        self._engine = engine
        self._request = request
        self._timeout_error = timeout_error
        self._ended = False

    def __aiter__(self) -> AsyncH2Stream:
        return self

    async def __anext__(self) -> bytes:
        engine = self._engine
        clock = AsyncBackend.now
        start = clock()
        if self._iterator is None:
            self._iterator = self._inner.__aiter__()
        if engine.woke(start, start):  # delivers what is due, refreshes the hints
            await self._reset()
            raise self._timeout_error("the stream's deadline passed (HTTP/2)")
        deadline = stop_at(engine.stop_hint, engine.raw_hint, start)
        wait = AsyncH2Wait(engine, start)
        token = H2_READ.set(wait)
        chunk: bytes | None = None
        try:
            scope: Any = AsyncBackend.scope_after(deadline - start + _SCOPE_GRACE)
            with scope:
                if self._waits is not None:
                    wait.join(self._waits)
                try:
                    chunk = await self._iterator.__anext__()
                except StopAsyncIteration:
                    self._ended = True
                    raise
            if scope.cancelled_caught:
                # The scope ended a read that waited for the connection while a sibling read it:
                # httpcore closed the stream under it; the engine gives the verdict.
                engine.woke(clock(), start)
        except StreamDeadline:
            pass  # the stream's own read ended at its deadline: the engine has the verdict
        finally:
            H2_READ.reset(token)
            wait.leave()
        if chunk is not None:
            return chunk
        await self._reset()
        raise self._timeout_error("the stream's deadline passed (HTTP/2)")

    async def aclose(self) -> None:
        if not self._ended:
            await self._reset()
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()

    async def _reset(self) -> None:
        """RST_STREAM (CANCEL) for a stream closed before its end (:func:`_cancel_streams`: where
        httpcore's privates are missing, the stream is only closed)."""
        if self._ended:
            return
        self._ended = True
        await _cancel_streams(self._request, body=self._inner)
