"""The sync driver. GENERATED from ``_async.py`` by ``scripts/unasync.py``: do not edit.

It does the I/O and executes the engine's commands (:mod:`otel_liveness.core.commands`); every
decision is the engine's (:mod:`otel_liveness.core.engine`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ..core.commands import COMPLETE, READ, Release, Respond, Send, Sleep
from ..core.engine import Engine
from ._backends import SyncBackend
from ._base import TransportBase, error_for, io_failed
from ._family import Family

__all__ = [
    "SyncH2Pool",
    "SyncH2Stream",
    "SyncH2Wait",
    "SyncLivenessMixin",
    "SyncLivenessStream",
    "SyncPassThrough",
    "SyncWakingBackend",
    "SyncWakingStream",
]


class SyncLivenessMixin(TransportBase):
    """The transport; :func:`otel_liveness.wrap` combines it with the family's base class."""

    _is_async = False
    _backend = SyncBackend

    def __enter__(self) -> Any:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def close(self) -> None:
        self._inner.close()

    def _install_wakeups(self, inner: Any) -> None:
        _install_wakeups(inner)

    def handle_request(self, request: Any) -> Any:
        if not self._applies(request):
            return self._inner.handle_request(request)  # not a provider: untouched
        backend = self._backend
        clock = backend.now
        engine = self._engine(request, clock())
        command: Any = engine.start(clock())
        self._answered_from_memory(engine)
        response = iterator = None
        token = _READING.set(engine)  # reads made meanwhile wake for this engine (SyncWakingStream)
        try:
            while True:
                if type(command) is Send:
                    _discard(response)
                    response = iterator = None
                    try:
                        with self._send_context():
                            response = self._inner.handle_request(self._attempt_request(request, command))
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                        continue
                    headers = {k.lower(): v for k, v in response.headers.items()}
                    command = engine.headers(clock(), response.status_code, headers)
                elif command is READ:
                    assert response is not None  # READ comes after the headers
                    if iterator is None:
                        iterator = response.stream.__iter__()
                    try:
                        chunk = iterator.__next__()
                    except StopIteration:
                        command = engine.eof(clock())
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                    else:
                        command = engine.received(clock(), chunk)
                elif type(command) is Sleep:
                    _discard(response)
                    response = iterator = None
                    backend.sleep(command.seconds)
                    command = engine.slept(clock())
                elif type(command) is Respond:
                    return self._response(request, engine, response, iterator, command)
                else:
                    raise error_for(self._family, request, command)
        except BaseException as exc:
            engine.abandoned(clock(), exc)  # nothing if the engine ended it (a Fail it answered)
            _discard(response)
            raise
        finally:
            _READING.reset(token)


def _discard(response: Any) -> None:
    if response is not None:
        with SyncBackend.shield():
            response.close()


class SyncPassThrough:
    """The body of a response the engine does not judge (a final error response, a redirect)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner.stream:
            yield chunk

    def close(self) -> None:
        self._inner.close()


class SyncLivenessStream:
    """The body the caller reads: released bytes of the one visible attempt, with the clocks
    still running; the engine ends the attempt (and the request) when it ends."""

    def __init__(self, family: Family, request: Any, engine: Engine, inner: Any, iterator: Any,
                 respond: Respond) -> None:
        self._family = family
        self._request = request
        self._engine = engine
        self._inner = inner
        self._iterator = iterator
        self._first = respond.first
        self._then = respond.then
        self._closed = False
        # The connection's reads wake for this engine's notices while the caller reads the body.
        network = inner.extensions.get("network_stream")
        self._network = network if isinstance(network, SyncWakingStream) else None
        if self._network is not None:
            self._network.watch = engine

    def __iter__(self) -> Iterator[bytes]:
        engine = self._engine
        clock = SyncBackend.now
        command: Any = self._then
        try:
            if self._first:
                first, self._first = self._first, b""
                yield first
            if command is READ:
                iterator = self._iterator if self._iterator is not None else self._inner.stream.__iter__()
                # The steady lane (core.lane): a read holding one content frame with nothing due is
                # counted there and released as is; every other read is the engine's to judge.
                step = engine.lane.step
                while command is READ:
                    try:
                        for chunk in iterator:
                            now = clock()
                            if step(chunk, now):
                                yield chunk
                                continue
                            command = engine.received(now, chunk)
                            if type(command) is bytes:
                                if command:
                                    yield command
                                command = READ
                                continue
                            break
                        else:
                            command = engine.eof(clock())
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                    if type(command) is Release:
                        if command.data:
                            yield command.data
                        command = command.then
            if command is not COMPLETE:
                raise error_for(self._family, self._request, command)
        except BaseException as exc:
            engine.abandoned(clock(), exc)
            raise
        finally:
            self._unwatch()
            with SyncBackend.shield():
                self._inner.close()

    def _unwatch(self) -> None:
        network, self._network = self._network, None
        if network is not None and network.watch is self._engine:
            network.watch = None  # a pooled connection must not keep this engine (and its prefix)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        self._engine.closed(SyncBackend.now())
        with SyncBackend.shield():
            self._inner.close()


# -- reads that wake ----------------------------------------------------------------------------
#
# A read that waits on a silent socket gives the driver no control, so a notice would wait for the
# next byte, and deadlines that a socket timeout cannot express (the first-byte bound until the
# body starts, the raw bound after it -- learned, when adaptive -- the semantic timeout, the wall
# budget) could not end it. httpcore closes the connection on any exception from a read it makes,
# so the wait cannot be cut short above it; below it, at the network stream, it can: a
# socket-level read that times out has consumed nothing and may simply be made again. So the
# inner transport's connection pool gets a network backend whose streams, while an engine is
# reading (``_READING`` during send and read-ahead, ``watch`` during the body), wake at the
# engine's hints, let it deliver notices in the reader's own thread or task, and end the read as a
# timeout when the engine says a deadline passed (the driver then asks it for the verdict). No
# thread, no task, no timer; a read with nothing due before its own timeout is passed through.
#
# HTTP/2 (docs/http2.md). The streams of one connection share its network stream: whichever
# stream's reader holds httpcore's read lock reads for all of them, and an exception from that
# read (a timeout included) fails the connection and every sibling. So on a connection that
# opened with the HTTP/2 preface the network stream judges a read by the stream it is made for
# (``_H2_READ``: its engine, and when that stream's own wait began), never by the network read,
# and ends it with :class:`_StreamDeadline`, a ``BaseException`` that httpcore lets through as it
# lets a cancellation through: it closes that stream alone and leaves the connection and its
# read state untouched (the read consumed nothing). The pool's responses on HTTP/2 are read
# through :class:`SyncH2Stream`, which marks each read with ``_H2_READ``, bounds it (on
# asyncio/trio) by a cancel scope at the stream's own deadline -- for a reader that waits for the
# read lock while a sibling reads -- turns a deadline into the HTTP library's read timeout (the
# driver then asks the engine for the verdict), and resets the HTTP/2 stream (RST_STREAM) when it
# is closed before its end, so the provider stops generating and the connection's flow-control
# window is not spent on a stream nobody reads.

_READING: ContextVar[Engine | None] = ContextVar("otel_liveness_reading", default=None)
#: The wait of the HTTP/2 stream a read is made for (its engine, and when that stream's wait began).
_H2_READ: ContextVar[SyncH2Wait | None] = ContextVar("otel_liveness_h2_read", default=None)
_INF = float("inf")
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_H2_CANCEL = 0x8  # RST_STREAM error code CANCEL (RFC 9113, 7)
#: How much later than the stream's deadline the cancel scope fires: the stream's own read (when it
#: is the one reading) ends it first, at the deadline, with nothing to cancel.
_SCOPE_GRACE = 0.02


class _StreamDeadline(BaseException):  # a control-flow signal, like a cancellation
    """An HTTP/2 stream's deadline passed during a read made for it (raised by the network
    stream, turned into the HTTP library's read timeout above httpcore)."""


class SyncH2Wait:
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
        self.lock = SyncBackend.lock()
        self.registry: set[SyncH2Wait] | None = None
        self.network: SyncWakingStream | None = None  # the connection's network stream it waited on
        self.quiet = False  # nothing more for a sibling to deliver (not woken for again)

    def due(self) -> float:
        """When something of this stream falls due: a notice, or a deadline of its own."""
        engine = self.engine
        at = self.start + engine.raw_hint
        if engine.stop_hint < at:
            at = engine.stop_hint
        if engine.wake_hint < at:
            at = engine.wake_hint
        return at

    def join(self, registry: set[SyncH2Wait]) -> None:
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


def _install_wakeups(inner: Any) -> None:
    """Wrap the network backend of ``inner``'s httpcore connection pool (a private attribute of
    httpx's and httpx2's transports), and make the pool read its HTTP/2 responses through
    :class:`SyncH2Stream`; transports without one (mocks, custom) are left as they are: their
    deadlines are then the socket timeout's, and notices arrive with the next read."""
    pool: Any = getattr(inner, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None or isinstance(backend, SyncWakingBackend):
        return
    try:
        timeout_error = importlib.import_module(type(backend).__module__.partition(".")[0]).ReadTimeout
    except (ImportError, AttributeError):  # pragma: no cover - not an httpcore backend
        return
    pool._network_backend = SyncWakingBackend(backend, timeout_error)
    try:
        pool.__class__ = _h2_pool_class(type(pool))
    except TypeError:  # pragma: no cover - a pool class that cannot be extended: HTTP/1.1 is unaffected
        return
    pool._liveness_timeout_error = timeout_error


_H2_POOLS: dict[type, type] = {}


def _h2_pool_class(cls: type) -> type:
    """``cls`` (an httpcore connection pool class) whose responses on HTTP/2 are
    :class:`SyncH2Stream`; HTTP/1.1 responses are returned as they come."""
    if issubclass(cls, SyncH2Pool):
        return cls
    sub = _H2_POOLS.get(cls)
    if sub is None:
        sub = _H2_POOLS[cls] = type(cls.__name__, (SyncH2Pool, cls), {"__module__": cls.__module__})
    return sub


class SyncH2Pool:
    """Mixed into the inner transport's connection pool class (see :func:`_h2_pool_class`)."""

    _liveness_timeout_error: type[BaseException]

    def handle_request(self, request: Any) -> Any:
        engine = _READING.get()
        if engine is None:  # not a request the engine judges
            return super().handle_request(request)  # type: ignore[misc]
        wait = SyncH2Wait(engine, SyncBackend.now())  # joins its connection's waits when it writes there
        token = _H2_READ.set(wait)
        try:
            response = super().handle_request(request)  # type: ignore[misc]
        except BaseException as exc:
            _H2_READ.reset(token)
            wait.leave()
            if wait.network is not None:  # ended before its response on HTTP/2: reset what httpcore forgot
                _reset_forgotten(self, wait.network, request)
            if isinstance(exc, _StreamDeadline):
                raise self._liveness_timeout_error("the stream's deadline passed (HTTP/2)") from None
            raise
        _H2_READ.reset(token)
        wait.leave()
        if response.extensions.get("http_version") == b"HTTP/2":
            network = response.extensions.get("network_stream")
            waits = network.waits if isinstance(network, SyncWakingStream) else None
            response.stream = SyncH2Stream(response.stream, engine, request, self._liveness_timeout_error, waits)
        return response


def _reset_forgotten(pool: Any, network: SyncWakingStream, request: Any) -> None:
    """RST_STREAM (CANCEL) for every stream of the HTTP/2 connection on ``network`` that httpcore
    has forgotten while it is still open (a stream ended before its response: httpcore only drops
    it), so that the provider stops and its bytes do not use up the connection's window. Through
    private attributes of httpcore's connections: where they are missing, nothing is done."""
    for connection in list(getattr(pool, "connections", ())):
        conn: Any = getattr(connection, "_connection", None)
        if getattr(conn, "_network_stream", None) is not network:
            continue
        state = getattr(conn, "_h2_state", None)
        known = getattr(conn, "_events", None)
        if state is None or known is None:
            return
        with SyncBackend.shield():
            try:
                with conn._state_lock:
                    for stream_id, stream in list(state.streams.items()):
                        if stream_id % 2 and stream_id not in known and not stream.closed:
                            state.reset_stream(stream_id, _H2_CANCEL)
                conn._write_outgoing_data(request)
            except Exception:  # noqa: BLE001 - the connection is gone (or h2 refused): nothing to reset
                return
        return


class SyncH2Stream:
    """The body of a response on an HTTP/2 connection, read one stream-level read at a time: each
    marked with ``_H2_READ`` (the engine and when this stream's wait began, so its silence is its
    own, whatever its siblings send) and bounded by the stream's own deadline; closed before its
    end, the HTTP/2 stream is reset."""

    def __init__(self, inner: Any, engine: Engine, request: Any, timeout_error: type[BaseException],
                 waits: set[SyncH2Wait] | None) -> None:
        self._inner = inner
        self._waits = waits
        self._iterator: Any = None
        self._engine = engine
        self._request = request
        self._timeout_error = timeout_error
        self._ended = False

    def __iter__(self) -> SyncH2Stream:
        return self

    def __next__(self) -> bytes:
        engine = self._engine
        clock = SyncBackend.now
        start = clock()
        if self._iterator is None:
            self._iterator = self._inner.__iter__()
        if engine.woke(start, start):  # delivers what is due, refreshes the hints
            self._reset()
            raise self._timeout_error("the stream's deadline passed (HTTP/2)")
        deadline = engine.stop_hint
        if start + engine.raw_hint < deadline:
            deadline = start + engine.raw_hint
        wait = SyncH2Wait(engine, start)
        token = _H2_READ.set(wait)
        chunk: bytes | None = None
        try:
            scope: Any = SyncBackend.scope_after(deadline - start + _SCOPE_GRACE)
            with scope:
                if self._waits is not None:
                    wait.join(self._waits)
                try:
                    chunk = self._iterator.__next__()
                except StopIteration:
                    self._ended = True
                    raise
            if scope.cancelled_caught:
                # The scope ended a read that waited for the connection while a sibling read it:
                # httpcore closed the stream under it; the engine gives the verdict.
                engine.woke(clock(), start)
        except _StreamDeadline:
            pass  # the stream's own read ended at its deadline: the engine has the verdict
        finally:
            _H2_READ.reset(token)
            wait.leave()
        if chunk is not None:
            return chunk
        self._reset()
        raise self._timeout_error("the stream's deadline passed (HTTP/2)")

    def close(self) -> None:
        if not self._ended:
            self._reset()
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()

    def _reset(self) -> None:
        """RST_STREAM (CANCEL) for a stream closed before its end, through the httpcore connection
        that carries it (private attributes: where they are missing, the stream is only closed)."""
        if self._ended:
            return
        self._ended = True
        stream = getattr(self._inner, "_stream", None)
        conn: Any = getattr(stream, "_connection", None)
        stream_id = getattr(stream, "_stream_id", None)
        state = getattr(conn, "_h2_state", None)
        if state is None or stream_id is None:
            return
        with SyncBackend.shield():
            try:
                with conn._state_lock:
                    state.reset_stream(stream_id, _H2_CANCEL)
                conn._write_outgoing_data(self._request)
            except Exception:  # noqa: BLE001 - already ended or reset by the peer, or the connection is gone
                return


class SyncWakingBackend:
    """An httpcore network backend whose streams are :class:`SyncWakingStream`."""

    def __init__(self, inner: Any, timeout_error: type[BaseException]) -> None:
        self._inner = inner
        self._timeout_error = timeout_error

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> Any:
        stream = self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
        return SyncWakingStream(stream, self._timeout_error)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        stream = self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return SyncWakingStream(stream, self._timeout_error)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class SyncWakingStream:
    """A network stream whose reads wake at the reading engine's hints (:attr:`Engine.wake_hint`,
    :attr:`~Engine.stop_hint`, :attr:`~Engine.raw_hint`). Hints only ever move later, so a stale
    one can only wake a read early: the engine then delivers what is due, refreshes them, and the
    read goes back to waiting. A read that gets data first costs one clock read. On an HTTP/2
    connection (its first write is the preface) a read is judged by the stream it is made for."""

    __slots__ = ("_h2", "_inner", "_timeout_error", "waits", "watch")

    def __init__(self, inner: Any, timeout_error: type[BaseException]) -> None:
        self._inner = inner
        self._timeout_error = timeout_error
        self._h2 = False
        self.watch: Engine | None = None
        #: HTTP/2: the streams of this connection waiting for an event (:class:`SyncH2Wait`).
        self.waits: set[SyncH2Wait] = set()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._h2:
            return self._read_h2(max_bytes, timeout)
        engine = _READING.get() or self.watch
        inner: Any = self._inner
        if engine is None:
            data: bytes = inner.read(max_bytes, timeout)
            return data
        clock = SyncBackend.now
        start = now = clock()
        deadline = _INF if timeout is None else now + timeout
        while True:
            wake = engine.wake_hint
            stop = start + engine.raw_hint
            if engine.stop_hint < stop:
                stop = engine.stop_hint
            if stop < wake:
                wake = stop
            if wake >= deadline:
                data = inner.read(max_bytes, None if timeout is None else max(deadline - now, 0.001))
                return data
            try:
                data = inner.read(max_bytes, max(wake - now, 0.001))
                return data
            except self._timeout_error:
                now = clock()
                if now >= deadline or engine.woke(now, start):
                    raise  # the read's own timeout, or a deadline of the engine's: the driver judges it

    def _read_h2(self, max_bytes: int, timeout: float | None) -> bytes:
        """A read of a connection shared by HTTP/2 streams, made for the stream waiting in
        ``_H2_READ``: it wakes at that stream's hints -- its raw silence counted from when the
        *stream's* wait began -- and at the notices of the siblings waiting meanwhile (delivered
        here); a deadline of its own stream, or the read's own timeout, ends the read with
        :class:`_StreamDeadline`, which ends that stream alone. A read made for no judged stream
        (a request the transport passes through) still wakes for the waiting siblings; its own
        timeout is the HTTP library's."""
        current = _H2_READ.get()
        inner: Any = self._inner
        waits = self.waits
        if current is None and not waits:
            data: bytes = inner.read(max_bytes, timeout)
            return data
        clock = SyncBackend.now
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
                data = inner.read(max_bytes, None if timeout is None else max(deadline - now, 0.001))
                return data
            if deadline < wake:
                wake = deadline
            if wake <= now:
                self._serve(now, current)
                if current is not None:
                    with current.lock:
                        if now >= deadline or current.engine.woke(now, current.start):
                            raise _StreamDeadline
            try:
                data = inner.read(max_bytes, None if wake == _INF else max(wake - now, 0.001))
            except self._timeout_error:
                now = clock()
            else:
                if len(waits) > (current is not None):
                    self._serve(clock(), current)
                return data

    def _serve(self, now: float, current: SyncH2Wait | None) -> None:
        """Deliver what is due at ``now`` to the siblings of ``current`` waiting on this connection."""
        for other in list(self.waits):
            if other is not current and not other.quiet and other.engine.wake_hint <= now:
                other.serve(now)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._h2:
            current = _H2_READ.get()
            if current is not None and current.registry is None and current.network is None:
                current.network = self  # a stream's request goes out on this connection: it waits here
                current.join(self.waits)
        elif buffer[:24] == _H2_PREFACE:
            self._h2 = True  # httpcore opened an HTTP/2 connection on this stream
            current = _H2_READ.get()
            if current is not None:
                current.network = self
                current.join(self.waits)
        self._inner.write(buffer, timeout)
        if self._h2 and len(self.waits) > 1:
            # httpcore writes after releasing the connection's read lock: give a sibling waiting
            # for it (its bytes perhaps read for it already) the chance to take it (threads only:
            # an event loop's locks are fair).
            SyncBackend.let_waiters_run()

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        stream = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return SyncWakingStream(stream, self._timeout_error)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)
