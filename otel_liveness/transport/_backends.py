"""The only waiting primitives the drivers use: one class per kind, same method names, so that
``_sync/`` is a mechanical translation of ``_async/`` (``scripts/unasync.py``)."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

__all__ = ["ENGINE_EXTENSION", "AsyncBackend", "SyncBackend"]

#: The request extension that hands a request's engine down to the pool's connections, which put
#: it in the slot of their network stream (``network.py``, ``AsyncWatchedConnection``).
ENGINE_EXTENSION = "otel_liveness.engine"


class AsyncBackend:
    """asyncio and trio, through anyio."""

    now = staticmethod(time.monotonic)  # the builtin itself: it is called on every read

    @staticmethod
    async def sleep(seconds: float) -> None:
        import anyio

        if seconds > 0:
            await anyio.sleep(seconds)

    @staticmethod
    def shield() -> Any:
        """Cleanup that must finish even when the task is being cancelled."""
        import anyio

        return anyio.CancelScope(shield=True)

    @staticmethod
    def scope_after(seconds: float) -> Any:
        """A scope that cancels what it encloses after ``seconds`` (``cancelled_caught`` then
        says so): the bound of one HTTP/2 stream's read; none for an infinite one."""
        import anyio

        return anyio.move_on_after(seconds) if seconds < _INF else _NoScope()

    @staticmethod
    def let_waiters_run() -> None:
        """Nothing: asyncio's and trio's locks hand over to their waiters in turn."""

    @staticmethod
    def lock() -> Any:
        """Mutual exclusion between a task and code run by a sibling task of the same event loop
        without an await in between: nothing to exclude."""
        return _NO_LOCK

    @staticmethod
    def network(core: Any) -> Any:
        """The network backend an httpcore (``core``: httpcore or httpcore2) pool uses by default,
        built from its public classes: trio's under trio, anyio's otherwise, picked per connection."""
        return _AutoNetwork(core)


class _AutoNetwork:
    """httpcore's default async network backend (its ``AutoBackend`` is not public), from the
    public ``TrioBackend`` and ``AnyIOBackend``: the running event loop's, asked at each connect."""

    def __init__(self, core: Any) -> None:
        self._core = core
        self._backends: dict[str, Any] = {}

    def _backend(self) -> Any:
        try:  # as httpcore asks (its _synchronization.current_async_library)
            import sniffio
        except ImportError:  # pragma: no cover - sniffio comes with trio
            name = "anyio"
        else:
            name = "trio" if sniffio.current_async_library() == "trio" else "anyio"
        backend = self._backends.get(name)
        if backend is None:
            backend = self._backends[name] = self._core.TrioBackend() if name == "trio" else self._core.AnyIOBackend()
        return backend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> Any:
        return await self._backend().connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                                 socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        return await self._backend().connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._backend().sleep(seconds)


class _NoScope(contextlib.nullcontext[Any]):
    cancelled_caught = False


_NO_LOCK = contextlib.nullcontext()
_INF = float("inf")


class SyncBackend:
    """Blocking I/O in the caller's thread: nothing polls, no thread is started."""

    now = staticmethod(time.monotonic)

    @staticmethod
    def sleep(seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    @staticmethod
    def shield() -> Any:
        return contextlib.nullcontext()

    @staticmethod
    def scope_after(seconds: float) -> Any:
        """Nothing can cancel a blocking read from the same thread: the read ends at the stream's
        deadline only when it is the one reading the connection (docs/http2.md)."""
        return _NoScope()

    @staticmethod
    def lock() -> Any:
        return threading.Lock()

    @staticmethod
    def network(core: Any) -> Any:
        """The network backend an httpcore (``core``) pool uses by default: its public ``SyncBackend``."""
        return core.SyncBackend()

    @staticmethod
    def let_waiters_run() -> None:
        """Yield the processor, so that a thread woken by a lock just released can take it before
        this thread takes it again (CPython's locks are not fair)."""
        time.sleep(0)
