"""Request bodies that cannot be sent twice as they are.

httpx and httpx2 accept an iterator, a generator, an async iterable or a file object as a
request's ``content``; after one send it is consumed (a second iteration yields nothing, reads a
file at its end, or raises ``StreamConsumed``). Bytes (``ByteStream``) can be re-sent as they are,
and so can a multipart body (``files=``) whose files are seekable: the library seeks them back.
A retry of a streamed body must therefore re-send what the first attempt sent, byte for byte, or
not happen at all -- never an empty or partial body.

:class:`ReplayBody` takes the request's stream in place of the original: every attempt iterates
it; the first pulls from the original and keeps every chunk it pulls, up to
``Policy.max_replay_body_bytes``; later attempts replay the kept chunks, then go on pulling from
the original where the last attempt stopped (an attempt that failed while sending left the rest
unread). While everything pulled so far is kept, the body can be sent again
(:meth:`ReplayBody.problem` is ``None``); once a chunk past the bound was pulled, the kept chunks
are dropped and the engine ends the request with :class:`~otel_liveness.core.errors.BodyNotReplayable`
instead of retrying. The first attempt streams as it would without the transport (no read-ahead,
no added latency); the memory kept is bounded by the setting, and released with the request.

One instance serves one request, whose attempts are sequential: no lock is needed.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

__all__ = ["ReplayBody", "replay_body"]

OVER_BOUND = "over_bound"


class ReplayBody:
    """The stream of a request whose body is not bytes: kept as it is sent, replayed on retries
    (see the module docstring). Iterable and async-iterable as the original is."""

    def __init__(self, source: Any, limit: int) -> None:
        self._source = source
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0  # bytes pulled from the source so far
        self._overflow = False  # a chunk past the bound was pulled: the kept chunks are dropped
        self._sync: Iterator[bytes] | None = None
        self._async: AsyncIterator[bytes] | None = None
        self._done = False  # the source is exhausted

    @property
    def sent(self) -> int:
        """Bytes pulled from the original stream so far (all of it, once an attempt sent it whole)."""
        return self._size

    def problem(self) -> str | None:
        """``None`` when the body can be sent again byte for byte, else why not."""
        return OVER_BOUND if self._overflow else None

    def _keep(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._overflow:
            return
        if self._size > self._limit:
            self._overflow = True
            self._chunks = []  # cannot be replayed whole: keep nothing
            return
        self._chunks.append(bytes(chunk))

    def _replayed(self) -> list[bytes]:
        if self._overflow and self._size:
            # Guarded by the engine (no retry once over the bound); a re-send now would be partial.
            raise RuntimeError("otel-liveness: a request body past max_replay_body_bytes cannot be sent again")
        return list(self._chunks)

    def __iter__(self) -> Iterator[bytes]:
        yield from self._replayed()
        if self._done:
            return
        if self._sync is None:
            self._sync = iter(self._source)
        source = self._sync
        while True:
            try:
                chunk = next(source)
            except StopIteration:
                self._done = True
                return
            self._keep(chunk)
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._replayed():
            yield chunk
        if self._done:
            return
        if self._async is None:
            self._async = self._source.__aiter__()
        source = self._async
        while True:
            try:
                chunk = await source.__anext__()
            except StopAsyncIteration:
                self._done = True
                return
            self._keep(chunk)
            yield chunk

    def close(self) -> None:
        close = getattr(self._source, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        if callable(aclose):
            await aclose()


_CLASSES: dict[ModuleType, type[ReplayBody]] = {}
_CLASSES_LOCK = threading.Lock()


def _replay_class(module: ModuleType) -> type[ReplayBody]:
    """:class:`ReplayBody` as the family's ``SyncByteStream`` and ``AsyncByteStream`` (its
    transports assert that a request's stream is one), built once per family."""
    cls = _CLASSES.get(module)
    if cls is None:
        with _CLASSES_LOCK:
            cls = _CLASSES.get(module)
            if cls is None:
                cls = _CLASSES[module] = type("ReplayBody", (ReplayBody, module.SyncByteStream, module.AsyncByteStream),
                                              {"__module__": __name__, "__qualname__": "ReplayBody"})
    return cls


def replays_itself(stream: Any, module: ModuleType) -> bool:
    """Whether ``stream`` re-sends its whole body on every iteration by itself: the family's
    ``ByteStream`` (bytes), and its multipart stream (``files=``) when every file in it is bytes
    or seekable (the library seeks each file back to 0 on every iteration)."""
    if isinstance(stream, module.ByteStream):
        return True
    multipart = getattr(getattr(module, "_multipart", None), "MultipartStream", None)
    if multipart is None or not isinstance(stream, multipart):
        return False
    for field in getattr(stream, "fields", ()):
        file = getattr(field, "file", None)
        if file is None or isinstance(file, (str, bytes)):
            continue
        seekable = getattr(file, "seekable", None)
        try:
            if not (seekable() if callable(seekable) else hasattr(file, "seek")):
                return False
        except (OSError, ValueError):
            return False
    return True


def replay_body(request: Any, module: ModuleType, limit: int) -> ReplayBody | None:
    """Install a :class:`ReplayBody` as ``request.stream`` when its body is a stream that cannot
    be re-sent as it is (:func:`replays_itself` says no); ``None`` otherwise (also when it is
    already one). ``module``: the family (``httpx`` or ``httpx2``)."""
    stream = request.stream
    if isinstance(stream, ReplayBody):
        return stream
    if replays_itself(stream, module):
        return None
    body = _replay_class(module)(stream, limit)
    request.stream = body
    return body
