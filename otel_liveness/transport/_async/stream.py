"""The body the caller reads (:class:`AsyncLivenessStream`: the engine judges every read, with the
steady lane for the common one), and the body of a response the engine does not judge."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ...core.commands import COMPLETE, READ, Command, Release, Respond
from ...core.errors import StreamTruncated, liveness_error
from ...core.request.engine import Engine
from ...core.request.state import IOFailure
from ...core.wire.resume import FrameAligner, ResumeState, background_stream_id, resume_target
from .._backends import AsyncBackend
from .._base import RESUME_EXTENSION, error_for
from .._family import Family
from .._overrides import liveness_policy
from .network import AsyncWakingStream, unwatch

__all__ = ["AsyncLivenessStream", "AsyncPassThrough", "AsyncResumingStream", "io_failed", "pump"]

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
    still running; the engine ends the attempt (and the request) when it ends. Its reads are the
    body's :func:`pump`, begun by the request loop while the engine held the body, or here when
    the engine answered at the headers."""

    def __init__(self, family: Family, request: Any, engine: Engine, inner: Any, body: Any,
                 respond: Respond) -> None:
        self._engine = engine
        self._inner = inner
        self._body: AsyncIterator[bytes] = body if body is not None else pump(family, request, engine, inner, respond)
        self._closed = False
        # The connection's reads wake for this engine's notices while the caller reads the body.
        network = inner.extensions.get("network_stream")
        self._network = network if isinstance(network, AsyncWakingStream) else None
        if self._network is not None:
            self._network.watch = engine

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._body

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        unwatch(self._network, self._engine)
        self._network = None
        self._engine.closed(AsyncBackend.now())
        with AsyncBackend.shield():
            await self._inner.aclose()


async def pump(family: Family, request: Any, engine: Engine, inner: Any, command: Any) -> AsyncIterator[Any]:
    """The one loop that reads a judged body, in both phases, and does what the engine answers.

    Begun at ``READ`` by the request loop (``transport.py``) while the engine holds the body: it
    yields the first command that is not ``READ`` -- :class:`Respond`, or a retry's ``Send`` or
    ``Sleep``, or a failure -- to that loop, which hands the response over with this generator as
    its body (the caller's reads resume it there) or drops it. Begun at a :class:`Respond` (the
    engine answered at the headers), it is the body from its start. From the response on it
    yields only bytes to release: a read the steady lane admits (``engine.lane.step``: content or
    pings with nothing due) as it came, every other read as the engine judges it (``received``,
    ``eof``, or an I/O failure); at the end it returns (complete) or raises the engine's failure,
    and the inner body is closed."""
    clock = AsyncBackend.now
    step = engine.lane.step
    released = type(command) is Respond  # the response is the caller's: the cleanup below is ours
    iterator = None
    try:
        while True:
            if command is READ:
                if iterator is None:
                    iterator = inner.stream.__aiter__()
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
                        elif command is not READ:  # (READ: held)
                            break
                    else:
                        command = engine.eof(clock())
                except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                    command = io_failed(family, engine, clock(), exc)
            elif type(command) is bytes:  # (eof's answer: what it released)
                if command:
                    yield command
                command = READ
            elif type(command) is Release:
                if command.data:
                    yield command.data
                command = command.then
            elif type(command) is Respond:
                if not released:
                    released = True
                    yield command  # the request loop's: the caller's first read resumes here
                first, command = command.first, command.then
                if first:
                    yield first
                # not kept in this frame for the stream's life: it can be a whole read (up to
                # httpcore's 64 KiB), outside what the engine retains and bounds
                del first
            elif not released:
                yield command  # a retry or a failure before the response: the request loop's
                return
            elif command is COMPLETE:
                return
            else:
                raise error_for(family, request, command, engine.published)
    except BaseException as exc:
        if released:
            engine.abandoned(clock(), exc)
        raise
    finally:
        if released:
            unwatch(inner.extensions.get("network_stream"), engine)
            with AsyncBackend.shield():
                await inner.aclose()


def io_failed(family: Family, engine: Engine, now: float, exc: Exception) -> Command:
    """The engine's answer to an exception of the inner transport; anything that is not the
    HTTP library's I/O error (a host error) is re-raised as it came."""
    module = family.module
    if isinstance(exc, module.ReadTimeout):
        return engine.timed_out(now, exc)
    if isinstance(exc, (module.LocalProtocolError, module.UnsupportedProtocol)):
        return engine.io_error(now, IOFailure.LOCAL, exc)  # the request itself: no provider saw it
    if isinstance(exc, (module.ConnectError, module.ConnectTimeout, module.PoolTimeout)):
        return engine.io_error(now, IOFailure.CONNECT, exc)
    if isinstance(exc, module.TransportError):
        return engine.io_error(now, IOFailure.READ, exc)
    raise exc


#: Request headers a resume (a GET without a body) does not carry over from the request it resumes.
_NOT_RESENT = frozenset({"content-type", "content-length", "transfer-encoding", "content-encoding"})


class AsyncResumingStream:
    """The body of a resumable stream (:mod:`otel_liveness.core.wire.resume`: an OpenAI Responses
    background response): whole events only, and when the stream dies after content, resumed --
    ``GET .../responses/{id}?stream=true&starting_after=<the last event released>`` sent through
    the transport itself (judged like any generation, its failures before content retried) -- so
    the caller reads an exact continuation. When no resume is possible (the id unknown, the
    attempts or the wall budget spent, the resume refused) the death is raised as it came: the
    truncation, with the resume's failure as its context. The caller's report is the request's
    across its streams: the attempts of each, ``resumes``, and the last stream's ending."""

    def __init__(self, transport: Any, request: Any, stream: Any, report: dict[str, Any], engine: Engine) -> None:
        self._transport = transport
        self._request = request
        self._stream = stream
        self._report = report
        self._policy = engine.policy
        url = request.url
        query = url.query.decode("ascii", "replace") if isinstance(url.query, bytes) else str(url.query)
        self._aligner = FrameAligner(background_stream_id(url.path, query))
        self._state = ResumeState(engine.start_time)
        self._attempts: list[Any] = []  # the attempts of the streams resumed from
        self._current = report  # the report of the stream being read

    async def __aiter__(self) -> AsyncIterator[bytes]:
        aligner = self._aligner
        stream = self._stream
        try:
            while True:
                try:
                    async for chunk in stream:
                        out = aligner.feed(chunk)
                        if out:
                            yield out
                except Exception as exc:  # noqa: BLE001 - resumed, or raised as it came
                    stream = await self._resume(exc)
                    continue
                rest = aligner.flush()
                if rest:
                    yield rest
                return
        finally:
            self._merge()

    async def _resume(self, exc: Exception) -> Any:
        """The body of the stream that continues the one ``exc`` ended, or ``exc`` raised."""
        if not isinstance(liveness_error(exc), StreamTruncated):
            raise exc
        policy = self._policy
        target = resume_target(str(self._request.url), self._aligner, self._state, max_attempts=policy.max_attempts,
                               wall_timeout=policy.wall_timeout, now=AsyncBackend.now())
        if target is None:
            raise exc
        url, left = target
        self._state.resumes += 1
        self._attempts.extend(self._current.get("attempts") or ())
        headers = [(k, v) for k, v in self._request.headers.multi_items() if k.lower() not in _NOT_RESENT]
        request = self._transport._family.module.Request("GET", url, headers=headers,
                                                          extensions={RESUME_EXTENSION: True})
        limit = liveness_policy(wall_timeout=left) if left is not None else contextlib.nullcontext()
        try:
            with limit:
                response = await self._transport.handle_async_request(request)
        except Exception as resume_error:
            raise exc from resume_error
        report = response.extensions.get("liveness")
        if response.status_code != 200 or not isinstance(report, dict):
            await response.aclose()
            raise exc
        self._current = report
        self._aligner.resumed()
        self._stream = response.stream
        return response.stream

    def _merge(self) -> None:
        """The caller's report: the last stream's, with every stream's attempts and the resumes."""
        if not self._state.resumes:
            return
        last = self._current
        merged = {**last, "attempts": [*self._attempts, *(last.get("attempts") or ())], "resumes": self._state.resumes}
        self._report.clear()
        self._report.update(merged)

    async def aclose(self) -> None:
        await self._stream.aclose()
