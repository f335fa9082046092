"""One body pump: a judged body is read by one loop (``transport/_async/stream.py``'s ``pump``, and
its generated sync twin) in both phases -- while the engine holds the body, driven by the request
loop, and after the response, as the caller's body -- and the engine's inputs come from the pump,
the request loop and the waking reads alone."""

from __future__ import annotations

import ast
import asyncio
import inspect
import pathlib
from typing import Any

import httpx2
import pytest

import otel_liveness
from otel_liveness import StreamTruncated
from otel_liveness.core.request import engine as engine_mod
from otel_liveness.transport._async import stream as async_stream
from otel_liveness.transport._sync import stream as sync_stream

TRANSPORT = pathlib.Path(otel_liveness.__file__).parent / "transport"
URL = "https://api.anthropic.com/v1/messages"

PING = b'event: ping\ndata: {"type": "ping"}\n\n'
START = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
         b'"role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":1,'
         b'"output_tokens":1}}}\n\n')
BLOCK = (b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
         b'"content_block":{"type":"text","text":""}}\n\n')
DELTA = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
         b'"delta":{"type":"text_delta","text":"Hi"}}\n\n')
END = (b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
       b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
       b'"stop_sequence":null},"usage":{"output_tokens":2}}\n\n'
       b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


def _inputs() -> set[str]:
    """The engine's input methods: those marked ``@input_method``."""
    tree = ast.parse(inspect.getsource(engine_mod))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and any(isinstance(d, ast.Name) and d.id == "input_method" for d in node.decorator_list)}


def _engine_calls(root: pathlib.Path) -> dict[str, set[str]]:
    """``{input: {"module:function"}}``: every call of an engine input on a receiver named
    ``engine`` (``engine.x(``, ``self._engine.x(``, ``current.engine.x(``) in ``root``'s modules."""
    inputs = _inputs()
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()

        def walk(node: ast.AST, where: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                inner = where
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = f"{where}.{child.name}" if where else child.name
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                        and child.func.attr in inputs:
                    receiver = child.func.value
                    name = receiver.id if isinstance(receiver, ast.Name) else \
                        receiver.attr if isinstance(receiver, ast.Attribute) else ""
                    if name.lstrip("_") == "engine":
                        found.setdefault(child.func.attr, set()).add(f"{rel}:{inner}")
                walk(child, inner)

        walk(ast.parse(path.read_text(), str(path)), "")
    return found


def test_the_engine_inputs_come_from_the_pump_the_request_loop_and_the_waking_reads() -> None:
    calls = _engine_calls(TRANSPORT)
    assert set(calls) == _inputs(), "the search finds a call of every input"
    modules = {site.split(":")[0] for sites in calls.values() for site in sites}
    # the sync driver is generated from the async one: the same modules, twice
    assert modules == {f"_{kind}/{name}.py" for kind in ("async", "sync")
                       for name in ("transport", "stream", "network", "http2")}, sorted(modules)
    # a body's reads reach the engine from one loop, the pump
    assert calls["received"] == calls["eof"] == {"_async/stream.py:pump", "_sync/stream.py:pump"}
    # an exception of the inner transport is judged in one place, beside it
    assert calls["timed_out"] == calls["io_error"] == {"_async/stream.py:io_failed", "_sync/stream.py:io_failed"}


def test_the_search_sees_a_call_it_must_find(tmp_path: pathlib.Path) -> None:
    (tmp_path / "m.py").write_text("def f(engine, other):\n    engine.received(0, b'')\n    other.received(0, b'')\n")
    assert _engine_calls(tmp_path) == {"received": {"m.py:f"}}


def _handler(reads: list[bytes]) -> Any:
    class Body(httpx2.SyncByteStream, httpx2.AsyncByteStream):
        def __iter__(self) -> Any:
            return iter(reads)

        async def __aiter__(self) -> Any:
            for read in reads:
                yield read

    def handler(request: Any) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    return handler


READS = [PING, PING, START, BLOCK, DELTA, DELTA, END]


def test_the_pump_begun_while_the_body_was_held_is_the_callers_body_sync() -> None:
    # Two pings are held before the first content: the request loop drove the pump through them;
    # the caller's body is that same generator, suspended where it handed the response over.
    transport = otel_liveness.wrap(httpx2.MockTransport(_handler(READS)))
    response = transport.handle_request(httpx2.Request("POST", URL, json={"stream": True}))
    body = iter(response.stream)
    assert inspect.getgeneratorstate(body) == inspect.GEN_SUSPENDED
    assert body.gi_code is sync_stream.pump.__code__
    assert body.gi_frame.f_locals.get("released") is True
    data = b"".join(body)
    response.stream.close()
    assert data == b"".join(READS)
    report = response.extensions["liveness"]
    assert report["stop_reason"] == "completed" and len(report["attempts"]) == 1


def test_the_pump_begun_while_the_body_was_held_is_the_callers_body_async() -> None:
    async def main() -> tuple[bytes, dict[str, Any]]:
        transport = otel_liveness.wrap(httpx2.MockTransport(_handler(READS)), asynchronous=True)
        response = await transport.handle_async_request(httpx2.Request("POST", URL, json={"stream": True}))
        body = response.stream.__aiter__()
        assert body.ag_code is async_stream.pump.__code__
        # begun: suspended where it handed the response over (a pump not yet begun has no locals)
        assert body.ag_frame.f_locals.get("released") is True
        data = b"".join([chunk async for chunk in body])
        await response.stream.aclose()
        return data, response.extensions["liveness"]

    data, report = asyncio.run(main())
    assert data == b"".join(READS)
    assert report["stop_reason"] == "completed" and len(report["attempts"]) == 1


def test_a_body_answered_at_the_headers_is_a_pump_from_its_start() -> None:
    # A JSON reply (not held): the engine answers at the headers, and the body is a new pump.
    def handler(request: Any) -> httpx2.Response:
        reply: httpx2.Response = _handler([b'{"type":"message",', b'"content":[]}'])(request)
        reply.headers["content-type"] = "application/json"
        return reply

    transport = otel_liveness.wrap(httpx2.MockTransport(handler))
    response = transport.handle_request(httpx2.Request("POST", URL, json={"model": "m"}))
    body = iter(response.stream)
    assert body.gi_code is sync_stream.pump.__code__
    assert inspect.getgeneratorstate(body) == inspect.GEN_CREATED
    assert b"".join(body) == b'{"type":"message","content":[]}'


def test_a_pump_dropped_at_a_retry_ends_nothing_of_the_request() -> None:
    # The first attempt's body ends before content: the pump yields the retry to the request loop,
    # which closes it there -- the second attempt's body is read whole and the request completes.
    bodies = iter([[PING], READS])

    def handler(request: Any) -> httpx2.Response:
        reply: httpx2.Response = _handler(next(bodies))(request)
        return reply

    policy = otel_liveness.Policy(backoff_initial=0.001, backoff_max=0.001)
    with httpx2.Client(transport=otel_liveness.wrap(httpx2.MockTransport(handler), policy)) as client:
        with client.stream("POST", URL, json={"stream": True}) as response:
            data = b"".join(response.iter_raw())
            report = response.extensions["liveness"]
    assert data == b"".join(READS)
    assert report["stop_reason"] == "completed" and len(report["attempts"]) == 2
    assert report["attempts"][0]["outcome"] != "completed"


def test_a_pump_that_ends_after_content_raises_the_truncation_with_the_released_prefix() -> None:
    with httpx2.Client(transport=otel_liveness.wrap(httpx2.MockTransport(_handler(READS[:5])))) as client:
        with client.stream("POST", URL, json={"stream": True}) as response:
            data = b""
            with pytest.raises(StreamTruncated):
                for chunk in response.iter_raw():
                    data += chunk
            report = response.extensions["liveness"]
    assert data == b"".join(READS[:5])
    assert report["stop_reason"] != "completed"
    assert report["attempts"][-1]["committed"] is True
