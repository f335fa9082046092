# GENERATED from _async/network.py by scripts/unasync.py: do not edit.
"""Reads that wake: the network backend the transport gives the inner transport's connection pool.

A read that waits on a silent socket gives the driver no control, so a notice would wait for the
next byte, and deadlines that a socket timeout cannot express (the first-byte bound until the
body starts, the raw bound after it -- learned, when adaptive -- the semantic timeout, the wall
budget) could not end it. httpcore closes the connection on any exception from a read it makes,
so the wait cannot be cut short above it; below it, at the network stream, it can: a
socket-level read that times out has consumed nothing and may simply be made again. So the
inner transport's connection pool gets a network backend whose streams, while an engine is
reading (:data:`READING` during send and read-ahead, ``watch`` during the body), wake at the
engine's hints, let it deliver notices in the reader's own thread or task, and end the read as a
timeout when the engine says a deadline passed (the driver then asks it for the verdict). No
thread, no task, no timer; a read with nothing due before its own timeout is passed through.

HTTP/2 (docs/http2.md). The streams of one connection share its network stream: whichever
stream's reader holds httpcore's read lock reads for all of them, and an exception from that
read (a timeout included) fails the connection and every sibling. So on a connection that
opened with the HTTP/2 preface the network stream judges a read by the stream it is made for
(:data:`H2_READ`: its engine, and when that stream's own wait began), never by the network read,
and ends it with :class:`StreamDeadline`, a ``BaseException`` that httpcore lets through as it
lets a cancellation through: it closes that stream alone and leaves the connection and its
read state untouched (the read consumed nothing). The rest of HTTP/2 -- the pool's responses read
stream by stream, each bounded by its own deadline and reset when closed early -- is in
:mod:`.http2`.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core.clocks import wake_at
from ...core.engine import Engine
from .._backends import SyncBackend

__all__ = ["H2_READ", "READING", "SyncH2Wait", "SyncWakingBackend", "SyncWakingStream", "StreamDeadline"]

#: The engine of the request whose send (and read-ahead) runs in this context.
READING: ContextVar[Engine | None] = ContextVar("otel_liveness_reading", default=None)
#: The wait of the HTTP/2 stream a read is made for (its engine, and when that stream's wait began).
H2_READ: ContextVar[SyncH2Wait | None] = ContextVar("otel_liveness_h2_read", default=None)
_INF = float("inf")
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class StreamDeadline(BaseException):  # a control-flow signal, like a cancellation
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
        return wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, self.start)

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
    """A network stream whose reads wake at the reading engine's hints (``Engine.wake_hint``,
    ``stop_hint``, ``raw_hint``; a read's wake time is :func:`~otel_liveness.core.clocks.wake_at`).
    Hints only ever move later, so a stale one can only wake a read early: the engine then delivers
    what is due, refreshes them, and the read goes back to waiting. A read that gets data first
    costs one clock read. On an HTTP/2 connection (its first write is the preface) a read is judged
    by the stream it is made for."""

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
        engine = READING.get() or self.watch
        inner: Any = self._inner
        if engine is None:
            data: bytes = inner.read(max_bytes, timeout)
            return data
        clock = SyncBackend.now
        start = now = clock()
        deadline = _INF if timeout is None else now + timeout
        while True:
            wake = wake_at(engine.wake_hint, engine.stop_hint, engine.raw_hint, start)
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
        ``H2_READ``: it wakes at that stream's hints -- its raw silence counted from when the
        *stream's* wait began -- and at the notices of the siblings waiting meanwhile (delivered
        here); a deadline of its own stream, or the read's own timeout, ends the read with
        :class:`StreamDeadline`, which ends that stream alone. A read made for no judged stream
        (a request the transport passes through) still wakes for the waiting siblings; its own
        timeout is the HTTP library's."""
        current = H2_READ.get()
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
                            raise StreamDeadline
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
            current = H2_READ.get()
            if current is not None and current.registry is None and current.network is None:
                current.network = self  # a stream's request goes out on this connection: it waits here
                current.join(self.waits)
        elif buffer[:24] == _H2_PREFACE:
            self._h2 = True  # httpcore opened an HTTP/2 connection on this stream
            current = H2_READ.get()
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
