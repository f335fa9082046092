"""The only waiting primitives the drivers use: one class per kind, same method names, so that
``_sync.py`` is a mechanical translation of ``_async.py`` (``scripts/unasync.py``)."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

__all__ = ["EOF", "TIMEOUT", "AsyncBackend", "SyncBackend"]


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


EOF = _Sentinel("EOF")
TIMEOUT = _Sentinel("TIMEOUT")


class _Clock:
    """Monotonic time for the clocks, epoch time for HTTP dates, jitter for backoff."""

    now = staticmethod(time.monotonic)  # the builtin itself: it is called on every read

    @staticmethod
    def wall_now() -> float:
        return time.time()

    @staticmethod
    def jitter() -> float:
        return random.random()


class AsyncBackend(_Clock):
    """asyncio and trio through anyio. The raw clock is the socket's per-read timeout (as in the
    sync backend); a wall budget or semantic timeout, when configured, bounds each read with a
    cancel scope at the attempt's terminal deadline (httpcore closes a cancelled connection)."""

    has_cancel_scopes = True

    async def sleep(self, seconds: float) -> None:
        import anyio

        if seconds > 0:
            await anyio.sleep(seconds)

    async def send(self, transport: Any, request: Any, timeout: float | None) -> Any:
        import anyio

        if timeout is None:
            return await transport.handle_async_request(request)
        with anyio.move_on_after(max(timeout, 0.0)):
            return await transport.handle_async_request(request)
        return TIMEOUT

    async def read(self, iterator: AsyncIterator[bytes], timeout: float | None, family: Any) -> Any:
        import anyio

        try:
            if timeout is None:
                return await iterator.__anext__()
            with anyio.move_on_after(max(timeout, 0.0)):
                return await iterator.__anext__()
            return TIMEOUT
        except StopAsyncIteration:
            return EOF

    @staticmethod
    def shield() -> Any:
        import anyio

        return anyio.CancelScope(shield=True)


class SyncBackend(_Clock):
    """Blocking I/O: the raw clock is the socket's own per-read timeout, set on the request
    (httpcore applies ``extensions["timeout"]["read"]`` to every read, headers included), so
    nothing polls and no thread is started. A read timeout is ours when the attempt's deadline
    has passed, otherwise it is the caller's own read timeout. A wall budget is checked at every
    read and bounds each read's timeout from the start of the attempt."""

    has_cancel_scopes = False

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def send(self, transport: Any, request: Any, timeout: float | None) -> Any:
        return transport.handle_request(request)

    def read(self, iterator: Iterator[bytes], timeout: float | None, family: Any) -> Any:
        try:
            return iterator.__next__()
        except StopIteration:
            return EOF

    @staticmethod
    def shield() -> Any:
        return contextlib.nullcontext()
