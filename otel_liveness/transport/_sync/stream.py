# GENERATED from _async/stream.py by scripts/unasync.py: do not edit.
"""The body the caller reads (:class:`SyncLivenessStream`: the engine judges every read, with the
steady lane for the common one), and the body of a response the engine does not judge."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ...core.commands import COMPLETE, READ, Release, Respond
from ...core.errors import StreamTruncated, liveness_error
from ...core.request.engine import Engine
from ...core.wire.resume import FrameAligner, ResumeState, background_stream_id, resume_target
from .._backends import SyncBackend
from .._base import RESUME_EXTENSION, error_for, io_failed
from .._family import Family
from .._overrides import liveness_policy
from .network import SyncWakingStream, unwatch

__all__ = ["SyncLivenessStream", "SyncPassThrough", "SyncResumingStream"]

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
        return self._body()

    def _body(self) -> Iterator[bytes]:
        """The released bytes: the one loop that reads this body. A read the steady lane admits
        (``engine.lane.step``: content or pings with nothing due) is released as it came; every
        other read is the engine's to judge (``received``, ``eof``, or an I/O failure)."""
        engine = self._engine
        clock = SyncBackend.now
        command: Any = self._then
        iterator = self._iterator
        try:
            if self._first:
                first, self._first = self._first, b""
                yield first
                # not kept in this frame for the stream's life: it can be a whole read (up to
                # httpcore's 64 KiB), outside what the engine retains and bounds
                del first
            if command is READ:
                if iterator is None:
                    iterator = self._inner.stream.__iter__()
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
                    if type(command) is bytes:  # (eof's answer: what it released)
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
            with SyncBackend.shield():
                self._inner.close()

    def _unwatch(self) -> None:
        network, self._network = self._network, None
        unwatch(network, self._engine)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        self._engine.closed(SyncBackend.now())
        with SyncBackend.shield():
            self._inner.close()


#: Request headers a resume (a GET without a body) does not carry over from the request it resumes.
_NOT_RESENT = frozenset({"content-type", "content-length", "transfer-encoding", "content-encoding"})


class SyncResumingStream:
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

    def __iter__(self) -> Iterator[bytes]:
        aligner = self._aligner
        stream = self._stream
        try:
            while True:
                try:
                    for chunk in stream:
                        out = aligner.feed(chunk)
                        if out:
                            yield out
                except Exception as exc:  # noqa: BLE001 - resumed, or raised as it came
                    stream = self._resume(exc)
                    continue
                rest = aligner.flush()
                if rest:
                    yield rest
                return
        finally:
            self._merge()

    def _resume(self, exc: Exception) -> Any:
        """The body of the stream that continues the one ``exc`` ended, or ``exc`` raised."""
        if not isinstance(liveness_error(exc), StreamTruncated):
            raise exc
        policy = self._policy
        target = resume_target(str(self._request.url), self._aligner, self._state, max_attempts=policy.max_attempts,
                               wall_timeout=policy.wall_timeout, now=SyncBackend.now())
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
                response = self._transport.handle_request(request)
        except Exception as resume_error:
            raise exc from resume_error
        report = response.extensions.get("liveness")
        if response.status_code != 200 or not isinstance(report, dict):
            response.close()
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

    def close(self) -> None:
        self._stream.close()
