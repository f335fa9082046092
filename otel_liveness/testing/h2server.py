"""The HTTP/2 side of :class:`~otel_liveness.testing.SimulatedProvider` (``http2=True``): cleartext
HTTP/2 with prior knowledge (h2c, what ``httpx.AsyncHTTPTransport(http1=False, http2=True)`` speaks
to an ``http://`` URL), every request a stream of one connection playing its attempt script
concurrently with its siblings. Needs the ``h2`` package (the ``http2`` extra).

A script's steps mean on a stream what they mean on an HTTP/1.1 connection: ``Headers`` sends the
response HEADERS, ``Raw`` one DATA frame, ``Sleep``/``Trickle`` wait, ``Stall`` and
``HangBeforeHeaders`` send nothing more while the stream stays open (until the client resets it
or the connection goes), ``Close`` and the end of the script end the stream (END_STREAM),
``Status`` is a complete response, and ``Reset`` resets *the stream* (RST_STREAM, INTERNAL_ERROR):
the connection and the other streams go on. A client's RST_STREAM ends the stream's script and is
logged (``RequestLog.disconnected``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .scenario import RequestLog
from .steps import Close, HangBeforeHeaders, Headers, Raw, Reset, Sleep, Stall, Status, Trickle

__all__ = ["Begin", "H2Session"]

#: How a session starts a request: ``(method, target, headers, body)`` -> the script it plays and
#: its log entry (the provider's ``_begin``: the scenario chosen, the request counted and logged).
Begin = Callable[[str, str, dict[str, str], bytes], tuple[Sequence[Any], RequestLog]]


class _Stream:
    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.gone = asyncio.Event()  # the client reset the stream, or the connection ended
        self.task: asyncio.Task[None] | None = None


class H2Session:
    """One HTTP/2 connection of the simulated provider: each request starts by ``begin`` (the
    provider's), and its script's durations are multiplied by ``time_scale`` (the provider's)."""

    def __init__(self, begin: Begin, time_scale: float, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        import h2.config
        import h2.connection

        self._begin = begin
        self._time_scale = time_scale
        self._reader = reader
        self._writer = writer
        self._conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self._streams: dict[int, _Stream] = {}
        self._window = asyncio.Event()  # set whenever the peer opens flow-control windows

    async def run(self) -> None:
        import h2.events
        import h2.exceptions

        conn = self._conn
        conn.initiate_connection()
        self._flush()
        try:
            while True:
                data = await self._reader.read(65536)
                if not data:
                    return
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    self._flush()
                    return
                for event in events:
                    if isinstance(event, h2.events.RequestReceived):
                        stream = self._streams[event.stream_id] = _Stream()
                        stream.headers = {str(k): str(v) for k, v in event.headers or ()}
                    elif isinstance(event, h2.events.DataReceived):
                        receiving = self._streams.get(event.stream_id)
                        if receiving is not None:
                            receiving.body += event.data or b""
                        conn.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        self._start(event.stream_id)
                    elif isinstance(event, h2.events.StreamReset):
                        reset = self._streams.get(event.stream_id)
                        if reset is not None:
                            reset.gone.set()
                        self._window.set()  # a sender waiting for window on it finds it closed
                    elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                        self._window.set()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
                self._flush()
        finally:
            for stream in self._streams.values():
                stream.gone.set()
            tasks = [s.task for s in self._streams.values() if s.task is not None and not s.task.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    def _flush(self) -> None:
        data = self._conn.data_to_send()
        if data and not self._writer.transport.is_closing():
            self._writer.write(data)

    def _start(self, stream_id: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is None or stream.task is not None:
            return
        headers = stream.headers
        method, target = headers.get(":method", "GET"), headers.get(":path", "/")
        plain = {k: v for k, v in headers.items() if not k.startswith(":")}
        script, log = self._begin(method, target, plain, bytes(stream.body))
        stream.task = asyncio.ensure_future(self._play(stream_id, stream, script, log))

    async def _play(self, stream_id: int, stream: _Stream, script: Any, log: RequestLog) -> None:
        import h2.errors
        import h2.exceptions

        conn = self._conn
        scale = self._time_scale
        try:
            for step in script:
                if stream.gone.is_set():
                    log.disconnected = True
                    return
                if isinstance(step, Headers):
                    conn.send_headers(stream_id, [
                        (":status", str(step.status)), ("content-type", step.content_type),
                        ("request-id", log.request_id), ("cache-control", "no-cache"), *step.headers])
                    self._flush()
                elif isinstance(step, Status):
                    conn.send_headers(stream_id, [
                        (":status", str(step.status)), ("content-type", step.content_type),
                        ("content-length", str(len(step.body))), ("request-id", log.request_id), *step.headers])
                    await self._send(stream_id, step.body, end=True)
                    log.finished = True
                    return
                elif isinstance(step, Raw):
                    await self._send(stream_id, step.data)
                elif isinstance(step, Trickle):
                    for i in range(0, len(step.data), step.size):
                        await self._send(stream_id, step.data[i : i + step.size])
                        if await _wait(stream.gone, step.every * scale):
                            log.disconnected = True
                            return
                elif isinstance(step, Sleep):
                    if await _wait(stream.gone, step.seconds * scale):
                        log.disconnected = True
                        return
                elif isinstance(step, (Stall, HangBeforeHeaders)):
                    await stream.gone.wait()
                    log.disconnected = True
                    return
                elif isinstance(step, Reset):
                    conn.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                    self._flush()
                    return
                elif isinstance(step, Close):
                    break
                else:  # pragma: no cover - a scripting mistake
                    raise TypeError(f"unknown step {step!r}")
            await self._send(stream_id, b"", end=True)
            log.finished = True
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, ConnectionError, OSError):
            log.disconnected = True  # the client reset the stream (or the connection went) meanwhile

    async def _send(self, stream_id: int, data: bytes, end: bool = False) -> None:
        """``data`` as DATA frames within the peer's flow-control windows."""
        conn = self._conn
        view = memoryview(data)
        while True:
            room = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size)
            if len(view) and room <= 0:
                self._window.clear()
                await self._window.wait()
                continue
            piece, view = view[:room], view[room:]
            last = end and not len(view)
            if len(piece) or last:
                conn.send_data(stream_id, bytes(piece), end_stream=last)
                self._flush()
                await self._writer.drain()
            if not len(view):
                return


async def _wait(event: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``; True if ``event`` was set meanwhile."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
        return True
    except TimeoutError:
        return False
