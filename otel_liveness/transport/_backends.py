"""The only waiting primitives the drivers use: one class per kind, same method names, so that
``_sync.py`` is a mechanical translation of ``_async.py`` (``scripts/unasync.py``)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

__all__ = ["AsyncBackend", "SyncBackend"]


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
