"""The body the caller reads (:class:`AsyncLivenessStream`: the engine judges every read, with the
steady lane for the common one), and the body of a response the engine does not judge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ...core.commands import COMPLETE, READ, Release, Respond
from ...core.engine import Engine
from .._backends import AsyncBackend
from .._base import error_for, io_failed
from .._family import Family
from .network import AsyncWakingStream, unwatch

__all__ = ["AsyncLivenessStream", "AsyncPassThrough"]

#: What a body yields to hand its steady reads to the backend's reader (never released).
_STEADY: Any = object()


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

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The steady reads in C where the backend has a reader (sync, with the C lane): the body
        # below judges every other read, and no Python frame runs for a steady one.
        reader = AsyncBackend.steady_reader
        if reader is not None and self._then is READ and type(self._engine.lane) is AsyncBackend.steady_lane:
            iterator = self._iterator if self._iterator is not None else self._inner.stream.__aiter__()
            body = self._body(iterator, True)
            out: AsyncIterator[bytes] = reader(self._engine.lane, iterator, AsyncBackend.now, body, _STEADY)
            return out
        return self._body(self._iterator, False)

    async def _body(self, iterator: Any, steady: bool) -> AsyncIterator[bytes]:
        """The released bytes. With ``steady`` a reader (``AsyncBackend.steady_reader``) iterates
        this body: while it has yielded :data:`_STEADY` the reader makes the reads the lane admits
        and sends in the first one it does not, as ``(now, chunk)``, or ``None`` at the end (an
        exception of the read is thrown in there); otherwise the same loop runs here."""
        engine = self._engine
        clock = AsyncBackend.now
        command: Any = self._then
        try:
            if self._first:
                first, self._first = self._first, b""
                yield first
                # not kept in this frame for the stream's life: it can be a whole read (up to
                # httpcore's 64 KiB), outside what the engine retains and bounds
                del first
            if command is READ:
                if iterator is None:
                    iterator = self._inner.stream.__aiter__()
                # The steady lane (core.lane): a read holding one content frame with nothing due is
                # counted there and released as is; every other read is the engine's to judge.
                step = engine.lane.step
                while command is READ:
                    try:
                        if steady:
                            taken: Any = yield _STEADY
                            command = engine.eof(clock()) if taken is None else engine.received(taken[0], taken[1])
                            taken = None  # (not kept through the steady reads that follow)
                        else:
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
                    if type(command) is bytes:  # (a read the reader sent in: what it released)
                        if command:
                            yield command
                        command = READ
                    elif type(command) is Release:
                        if command.data:
                            yield command.data
                        command = command.then
            if command is not COMPLETE:
                raise error_for(self._family, self._request, command, engine.published)
        except BaseException as exc:
            engine.abandoned(clock(), exc)
            raise
        finally:
            self._unwatch()
            with AsyncBackend.shield():
                await self._inner.aclose()

    def _unwatch(self) -> None:
        network, self._network = self._network, None
        unwatch(network, self._engine)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        self._engine.closed(AsyncBackend.now())
        with AsyncBackend.shield():
            await self._inner.aclose()
