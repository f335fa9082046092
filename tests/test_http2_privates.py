"""The private names of httpcore (and httpcore2) the HTTP/2 driver reads, checked against the
installed releases: a release that renames one fails here, by name, instead of silently turning
a stream reset into a no-op (the driver reads them with getattr and does nothing where they are
missing).

Where they are used (otel_liveness/transport/_async/http2.py, generated into _sync/):
- ``install_wakeups``: the transport's ``_pool`` and the pool's ``_network_backend``;
- ``_reset_forgotten`` / ``AsyncH2Stream._reset``: a pool's ``connections``, a connection's
  ``_connection``; the HTTP/2 connection's ``_network_stream`` and ``_events``; a response
  stream's ``_connection`` and ``_stream_id``;
- ``_cancel_streams``, the one function that writes through them: ``_h2_state`` (h2's public
  ``H2Connection``), ``_state_lock`` and ``_write_outgoing_data(request)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from types import ModuleType
from typing import Any

import h2.connection
import pytest

FLAVOURS = [name for name in ("httpcore", "httpcore2") if importlib.util.find_spec(name) is not None]


@pytest.fixture(params=FLAVOURS)
def core(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(request.param)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_http2_connection_keeps_the_names_the_reset_writes_through(core: ModuleType, kind: str) -> None:
    cls: Any = core.HTTP2Connection if kind == "sync" else core.AsyncHTTP2Connection
    stream = object()
    conn = cls(origin=core.Origin(b"https", b"provider.test", 443), stream=stream)
    assert isinstance(conn._h2_state, h2.connection.H2Connection)
    assert callable(conn._h2_state.reset_stream) and isinstance(conn._h2_state.streams, dict)
    lock = conn._state_lock
    assert hasattr(lock, "__enter__" if kind == "sync" else "__aenter__")
    assert conn._network_stream is stream
    assert isinstance(conn._events, dict)  # the streams httpcore still knows, by id
    write = conn._write_outgoing_data
    assert list(inspect.signature(write).parameters) == ["request"]
    assert inspect.iscoroutinefunction(write) == (kind == "async")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_response_stream_names_its_connection_and_stream_id(core: ModuleType, kind: str) -> None:
    module = importlib.import_module(f"{core.__name__}._{kind}.http2")
    params = list(inspect.signature(module.HTTP2ConnectionByteStream.__init__).parameters)
    assert params == ["self", "connection", "request", "stream_id"]
    source = inspect.getsource(module.HTTP2ConnectionByteStream.__init__)
    assert "self._connection = connection" in source and "self._stream_id = stream_id" in source


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_pool_names_its_backend_and_connections(core: ModuleType, kind: str) -> None:
    pool_cls: Any = core.ConnectionPool if kind == "sync" else core.AsyncConnectionPool
    backend = object()
    pool = pool_cls(network_backend=backend, http2=True)
    assert pool._network_backend is backend
    assert list(pool.connections) == []
    conn_cls: Any = core.HTTPConnection if kind == "sync" else core.AsyncHTTPConnection
    connection = conn_cls(origin=core.Origin(b"https", b"provider.test", 443), network_backend=backend)
    assert connection._connection is None  # set to the HTTP/1.1 or HTTP/2 connection once connected
    assert "__slots__" not in vars(pool_cls)  # so assigning ``__class__`` to a subclass stays possible


def test_the_transports_name_their_pool() -> None:
    for name in ("httpx", "httpx2"):
        if importlib.util.find_spec(name) is None:
            continue
        httpx: Any = importlib.import_module(name)
        for transport in (httpx.HTTPTransport(http2=True), httpx.AsyncHTTPTransport(http2=True)):
            assert hasattr(transport._pool, "_network_backend"), (name, type(transport))
