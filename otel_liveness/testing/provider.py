"""The loopback server behind :class:`SimulatedProvider` (asyncio in one background thread)."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import ssl
import struct
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .nonstreaming import as_json_reply, streams
from .scenario import RequestLog, Scenario
from .scripts import anthropic_reply, openai_chat_reply, openai_responses_reply
from .steps import Close, HangBeforeHeaders, Headers, Raw, Reset, Sleep, Stall, Status, Trickle

__all__ = ["RequestLog", "Scenario", "SimulatedProvider"]

_REDACT = {"x-api-key", "authorization", "cookie", "api-key", "x-goog-api-key", "x-amz-security-token"}


@dataclass
class _State:
    scenarios: dict[str, Scenario] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    log: deque[RequestLog] = field(default_factory=deque)


class SimulatedProvider:
    """A real HTTP/1.1 server on 127.0.0.1 speaking provider wire formats from scripts; with
    ``http2=True``, cleartext HTTP/2 with prior knowledge instead (every request a stream of a
    shared connection; :mod:`otel_liveness.testing.h2server`, needs the ``h2`` package). With an
    ``ssl_context`` (a server context with its certificate loaded) it serves HTTPS, and with
    ``http2=True`` offers ``h2`` by ALPN, as a provider's HTTPS endpoint does. ``host`` and
    ``port`` (0: one the system picks) say where it listens; ``log_limit`` keeps only the last
    that many requests in :meth:`requests` (a long-running server; default: all)."""

    def __init__(self, scenarios: dict[str, Scenario] | None = None, *, time_scale: float = 1.0,
                 http2: bool = False, ssl_context: ssl.SSLContext | None = None, host: str = "127.0.0.1",
                 port: int = 0, log_limit: int | None = None, json_replies: bool = True) -> None:
        self.time_scale = time_scale
        #: A request that does not ask for a stream (no ``"stream": true``) gets the JSON reply the
        #: API sends (:mod:`.nonstreaming`), folded from the scenario's stream; ``False`` plays
        #: every script as written.
        self.json_replies = json_replies
        self.http2 = http2
        self.host = host
        self._ssl = ssl_context
        if ssl_context is not None:
            ssl_context.set_alpn_protocols(["h2"] if http2 else ["http/1.1"])
        #: TCP connections accepted so far (HTTP/2 siblings share one).
        self.connections_accepted = 0
        self._state = _State(scenarios=dict(scenarios or {}), log=deque(maxlen=log_limit))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._writers: set[asyncio.StreamWriter] = set()
        self._listen_port = port
        self.port = 0
        self._default()

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> SimulatedProvider:
        """Listen and serve in a background thread; raise what stopped it listening (an address
        in use, a host that is not this machine's)."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, self.host, self._listen_port, ssl=self._ssl))
            except BaseException as exc:  # noqa: BLE001 - handed to start(), which raises it
                failed.append(exc)
                loop.close()
                ready.set()
                return
            self._loop = loop
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="simulated-provider", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failed:
            self._thread.join(10)
            raise failed[0]
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=2)
                for task in pending:
                    task.cancel()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> SimulatedProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scenarios --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._ssl is not None else 'http'}://{host}:{self.port}"

    def base_url(self, scenario: str) -> str:
        """The base URL a client uses to play ``scenario`` (``/s/<name>`` + the provider's paths)."""
        return f"{self.url}/s/{scenario}"

    def add(self, name: str, scenario: Scenario | Sequence[Sequence[Any]]) -> str:
        if not isinstance(scenario, Scenario):
            scenario = Scenario(scenario)
        self._state.scenarios[name] = scenario
        self._state.counts[name] = 0
        return self.base_url(name)

    def attempts(self, name: str) -> int:
        """How many requests the scenario received."""
        return self._state.counts.get(name, 0)

    def requests(self, name: str | None = None) -> list[RequestLog]:
        return [r for r in self._state.log if name is None or r.scenario == name]

    def open_connections(self) -> int:
        return len(self._writers)

    def _default(self) -> None:
        self._state.scenarios.setdefault("ok", Scenario([[Headers(), *anthropic_reply()]]))
        self._state.scenarios.setdefault("openai-ok", Scenario([[Headers(), *openai_chat_reply()]]))
        self._state.scenarios.setdefault("responses-ok", Scenario([[Headers(), *openai_responses_reply()]]))

    # -- the server -------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections_accepted += 1
        try:
            if self.http2:
                from .h2server import H2Session

                await H2Session(self._begin, self.time_scale, reader, writer).run()
                return
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = [*lines[0].split(" "), "", ""][:3]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = b""
                if headers.get("content-length"):
                    body = await reader.readexactly(int(headers["content-length"]))
                elif "chunked" in headers.get("transfer-encoding", "").lower():
                    body = await self._chunked_body(reader)  # a streamed request body (iterator, file...)
                keep = await self._respond(method, target, headers, body, reader, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # the client went away, or the server is shutting down
        finally:
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.close()

    def _begin(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[Sequence[Any], RequestLog]:
        """The script a request plays and its log entry (logged); a request for an unknown
        scenario plays a 404."""
        path = target.split("?", 1)[0]
        name = "ok"
        if path.startswith("/s/"):
            name = path.split("/", 3)[2]
        elif path.endswith("/chat/completions"):
            name = "openai-ok"
        elif path.endswith("/responses") or "/responses/" in path:
            name = "responses-ok"
        scenario = self._state.scenarios.get(name)
        if scenario is None:
            return [Status(404, json.dumps({"error": f"no scenario {name!r}"}).encode())], RequestLog(
                name, 0, method, path, {}, b"", "req_none")
        n = self._state.counts.get(name, 0)
        self._state.counts[name] = n + 1
        request_id = f"req_sim_{next(self._ids):06d}"
        log = RequestLog(name, n, method, path, {k: ("<redacted>" if k in _REDACT else v) for k, v in headers.items()},
                         body, request_id, query=target.partition("?")[2])
        self._state.log.append(log)
        script = scenario.script_for(n, method, target)
        if self.json_replies and method == "POST" and not streams(body):
            script = as_json_reply(script, path)
        return script, log

    async def _respond(self, method: str, target: str, headers: dict[str, str], body: bytes,
                       reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        script, log = self._begin(method, target, headers, body)
        request_id = log.request_id
        scale = self.time_scale
        chunked = False
        try:
            for step in script:
                if reader.at_eof():
                    log.disconnected = True
                    return False
                if isinstance(step, Headers):
                    extra = "".join(f"{k}: {v}\r\n" for k, v in step.headers)
                    writer.write(
                        f"HTTP/1.1 {step.status} {'OK' if step.status == 200 else 'Status'}\r\n"
                        f"content-type: {step.content_type}\r\ntransfer-encoding: chunked\r\n"
                        f"request-id: {request_id}\r\ncache-control: no-cache\r\n{extra}\r\n".encode()
                    )
                    chunked = True
                    await writer.drain()
                elif isinstance(step, Status):
                    await self._write_status(writer, step, request_id)
                    log.finished = True
                    return True
                elif isinstance(step, Raw):
                    writer.write(b"%x\r\n%s\r\n" % (len(step.data), step.data))
                    await writer.drain()
                elif isinstance(step, Trickle):
                    for i in range(0, len(step.data), step.size):
                        piece = step.data[i : i + step.size]
                        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        await writer.drain()
                        if await self._wait(reader, step.every * scale):
                            log.disconnected = True
                            return False
                elif isinstance(step, Sleep):
                    if await self._wait(reader, step.seconds * scale):
                        log.disconnected = True
                        return False
                elif isinstance(step, (Stall, HangBeforeHeaders)):
                    await self._wait(reader, None)
                    log.disconnected = True
                    return False
                elif isinstance(step, Reset):
                    sock = writer.get_extra_info("socket")
                    if sock is not None:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return False
                elif isinstance(step, Close):
                    break
                else:  # pragma: no cover - a scripting mistake
                    raise TypeError(f"unknown step {step!r}")
            if chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            log.finished = True
            return True
        except (ConnectionError, OSError):
            log.disconnected = True
            return False

    @staticmethod
    async def _chunked_body(reader: asyncio.StreamReader) -> bytes:
        """A ``transfer-encoding: chunked`` request body, whole (trailers skipped)."""
        parts: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailer fields
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)  # the chunk's CRLF

    @staticmethod
    async def _wait(reader: asyncio.StreamReader, seconds: float | None) -> bool:
        """Sleep ``seconds`` (forever if None); True if the client disconnected meanwhile.
        (A client does not send while its response is in progress, so any read result means
        it went away.)"""
        probe = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait_for(asyncio.shield(probe), seconds)
            return True
        except TimeoutError:
            return False
        finally:
            if not probe.done():
                probe.cancel()
                try:
                    await probe
                except asyncio.CancelledError:
                    pass

    @staticmethod
    async def _write_status(writer: asyncio.StreamWriter, step: Status, request_id: str) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in step.headers)
        writer.write(
            f"HTTP/1.1 {step.status} Status\r\ncontent-type: {step.content_type}\r\n"
            f"content-length: {len(step.body)}\r\nrequest-id: {request_id}\r\n{extra}\r\n".encode() + step.body
        )
        await writer.drain()
