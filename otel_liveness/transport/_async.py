"""The async driver (source of truth; ``_sync.py`` is generated from it by ``scripts/unasync.py``).

It does the I/O and executes the engine's commands (:mod:`otel_liveness.core.commands`); every
decision is the engine's (:mod:`otel_liveness.core.engine`).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

from ..core.commands import COMPLETE, READ, Release, Respond, Send, Sleep
from ..core.engine import Engine
from ._backends import AsyncBackend
from ._base import TransportBase, error_for, io_failed
from ._family import Family

__all__ = ["AsyncLivenessMixin", "AsyncLivenessStream", "AsyncPassThrough", "AsyncWakingBackend", "AsyncWakingStream"]


class AsyncLivenessMixin(TransportBase):
    """The transport; :func:`otel_liveness.wrap` combines it with the family's base class."""

    _is_async = True
    _backend = AsyncBackend

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> None:
        await self._inner.__aexit__(*args)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _install_wakeups(self, inner: Any) -> None:
        _install_wakeups(inner)

    async def handle_async_request(self, request: Any) -> Any:
        if not self._applies(request):
            return await self._inner.handle_async_request(request)  # not a provider: untouched
        backend = self._backend
        clock = backend.now
        engine = self._engine(request, clock())
        command: Any = engine.start(clock())
        self._answered_from_memory(engine)
        response = iterator = None
        token = _READING.set(engine)  # reads made meanwhile wake for this engine (AsyncWakingStream)
        try:
            while True:
                if type(command) is Send:
                    await _discard(response)
                    response = iterator = None
                    try:
                        with self._send_context():
                            response = await self._inner.handle_async_request(self._attempt_request(request, command))
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                        continue
                    headers = {k.lower(): v for k, v in response.headers.items()}
                    command = engine.headers(clock(), response.status_code, headers)
                elif command is READ:
                    assert response is not None  # READ comes after the headers
                    if iterator is None:
                        iterator = response.stream.__aiter__()
                    try:
                        chunk = await iterator.__anext__()
                    except StopAsyncIteration:
                        command = engine.eof(clock())
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                    else:
                        command = engine.received(clock(), chunk)
                elif type(command) is Sleep:
                    await _discard(response)
                    response = iterator = None
                    await backend.sleep(command.seconds)
                    command = engine.slept(clock())
                elif type(command) is Respond:
                    return self._response(request, engine, response, iterator, command)
                else:
                    raise error_for(self._family, request, command)
        except BaseException as exc:
            engine.abandoned(clock(), exc)  # nothing if the engine ended it (a Fail it answered)
            await _discard(response)
            raise
        finally:
            _READING.reset(token)


async def _discard(response: Any) -> None:
    if response is not None:
        with AsyncBackend.shield():
            await response.aclose()


class AsyncPassThrough:
    """The body of a response the engine does not judge (a final error response, a redirect)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner.stream:
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class AsyncLivenessStream:
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
        self._network = network if isinstance(network, AsyncWakingStream) else None
        if self._network is not None:
            self._network.watch = engine

    async def __aiter__(self) -> AsyncIterator[bytes]:
        engine = self._engine
        clock = AsyncBackend.now
        command: Any = self._then
        try:
            if self._first:
                first, self._first = self._first, b""
                yield first
            if command is READ:
                iterator = self._iterator if self._iterator is not None else self._inner.stream.__aiter__()
                # The steady lane (core.lane): a read holding one content frame with nothing due is
                # counted there and released as is; every other read is the engine's to judge.
                step = engine.lane.step
                while command is READ:
                    try:
                        async for chunk in iterator:
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
            with AsyncBackend.shield():
                await self._inner.aclose()

    def _unwatch(self) -> None:
        network, self._network = self._network, None
        if network is not None and network.watch is self._engine:
            network.watch = None  # a pooled connection must not keep this engine (and its prefix)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        self._engine.closed(AsyncBackend.now())
        with AsyncBackend.shield():
            await self._inner.aclose()


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

_READING: ContextVar[Engine | None] = ContextVar("otel_liveness_reading", default=None)
_INF = float("inf")


def _install_wakeups(inner: Any) -> None:
    """Wrap the network backend of ``inner``'s httpcore connection pool (a private attribute of
    httpx's and httpx2's transports); transports without one (mocks, custom) are left as they are:
    their deadlines are then the socket timeout's, and notices arrive with the next read."""
    pool: Any = getattr(inner, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None or isinstance(backend, AsyncWakingBackend):
        return
    try:
        timeout_error = importlib.import_module(type(backend).__module__.partition(".")[0]).ReadTimeout
    except (ImportError, AttributeError):  # pragma: no cover - not an httpcore backend
        return
    pool._network_backend = AsyncWakingBackend(backend, timeout_error)


class AsyncWakingBackend:
    """An httpcore network backend whose streams are :class:`AsyncWakingStream`."""

    def __init__(self, inner: Any, timeout_error: type[BaseException]) -> None:
        self._inner = inner
        self._timeout_error = timeout_error

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> Any:
        stream = await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
        return AsyncWakingStream(stream, self._timeout_error)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        stream = await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return AsyncWakingStream(stream, self._timeout_error)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class AsyncWakingStream:
    """A network stream whose reads wake at the reading engine's hints (:attr:`Engine.wake_hint`,
    :attr:`~Engine.stop_hint`, :attr:`~Engine.raw_hint`). Hints only ever move later, so a stale
    one can only wake a read early: the engine then delivers what is due, refreshes them, and the
    read goes back to waiting. A read that gets data first costs one clock read."""

    __slots__ = ("_inner", "_timeout_error", "watch")

    def __init__(self, inner: Any, timeout_error: type[BaseException]) -> None:
        self._inner = inner
        self._timeout_error = timeout_error
        self.watch: Engine | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        engine = _READING.get() or self.watch
        inner: Any = self._inner
        if engine is None:
            data: bytes = await inner.read(max_bytes, timeout)
            return data
        clock = AsyncBackend.now
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
                data = await inner.read(max_bytes, None if timeout is None else max(deadline - now, 0.001))
                return data
            try:
                data = await inner.read(max_bytes, max(wake - now, 0.001))
                return data
            except self._timeout_error:
                now = clock()
                if now >= deadline or engine.woke(now, start):
                    raise  # the read's own timeout, or a deadline of the engine's: the driver judges it

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        stream = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return AsyncWakingStream(stream, self._timeout_error)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)
