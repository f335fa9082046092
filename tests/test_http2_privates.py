"""The private names of httpcore (and httpcore2) the HTTP/2 driver reads, checked against the
installed releases: a release that renames one fails here, by name, instead of silently turning
a stream reset into a no-op (the driver reads them with getattr and does nothing where they are
missing).

Where they are used:
- ``otel_liveness/transport/_adopt.py``, only for a transport the caller built (a pool the
  liveness transport builds itself gets its backend through the public ``network_backend=``):
  the transport's ``_pool`` and the settings a pool keeps privately (``CONNECTION_POOL``,
  ``HTTP_PROXY``), read to build the pool's twin; nothing of the caller's pool is assigned;
- in otel_liveness/transport/_async/http2.py (generated into _sync/), ``_cancel_streams``, the
  one function that resets a stream (RST_STREAM): a pool's connection's ``_connection``; the
  HTTP/2 connection's ``_network_stream``, ``_events``, ``_h2_state`` (h2's public
  ``H2Connection``), ``_state_lock`` and ``_write_outgoing_data(request)``; the pool's response
  stream's ``_stream``, whose ``_connection`` and ``_stream_id`` name the stream.

Beyond the names, the last tests reset a stream through ``_cancel_streams`` against httpcore's own
pool and HTTP/2 connection, an in-memory h2 server on the other side: the server must see the
RST_STREAM (CANCEL).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from types import ModuleType
from typing import Any

import anyio
import h2.config
import h2.connection
import h2.events
import pytest

from otel_liveness.transport._async import http2 as async_http2
from otel_liveness.transport._sync import http2 as sync_http2

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


def test_the_transports_name_their_pool() -> None:
    for name in ("httpx", "httpx2"):
        if importlib.util.find_spec(name) is None:
            continue
        httpx: Any = importlib.import_module(name)
        for transport in (httpx.HTTPTransport(http2=True), httpx.AsyncHTTPTransport(http2=True)):
            assert hasattr(transport._pool, "_network_backend"), (name, type(transport))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_pools_response_stream_names_its_connection_stream(core: ModuleType, kind: str) -> None:
    module = importlib.import_module(f"{core.__name__}._{kind}.connection_pool")
    params = list(inspect.signature(module.PoolByteStream.__init__).parameters)
    assert params[:2] == ["self", "stream"]
    assert "self._stream = stream" in inspect.getsource(module.PoolByteStream.__init__)


class _Peer:
    """The server side of one HTTP/2 connection, in memory (h2): it answers each request with its
    headers and one data frame and keeps the stream open; it records the streams reset."""

    def __init__(self) -> None:
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.h2.initiate_connection()
        self.pending = self.h2.data_to_send()
        self.resets: list[tuple[int, int]] = []

    def feed(self, data: bytes) -> None:
        for event in self.h2.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                self.h2.send_headers(event.stream_id, [(":status", "200")])
                self.h2.send_data(event.stream_id, b"partial")
            elif isinstance(event, h2.events.StreamReset):
                self.resets.append((event.stream_id, event.error_code))
        self.pending += self.h2.data_to_send()

    def take(self, max_bytes: int) -> bytes:
        data, self.pending = self.pending[:max_bytes], self.pending[max_bytes:]
        return data


class _Stream:
    def __init__(self, peer: _Peer) -> None:
        self.peer = peer

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.peer.take(max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.peer.feed(buffer)

    def close(self) -> None:
        pass

    def get_extra_info(self, info: str) -> Any:
        return None


class _AsyncStream(_Stream):
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # type: ignore[override]
        return self.peer.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # type: ignore[override]
        self.peer.feed(buffer)

    async def aclose(self) -> None:
        pass


class _Backend:
    def __init__(self, is_async: bool) -> None:
        self.peer = _Peer()
        self.stream = (_AsyncStream if is_async else _Stream)(self.peer)

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> _Stream:
        return self.stream


class _AsyncBackend(_Backend):
    async def connect_tcp(self, *args: Any, **kwargs: Any) -> _Stream:  # type: ignore[override]
        return self.stream

    async def sleep(self, seconds: float) -> None:
        pass


def _reset_through_httpcore(core: ModuleType, kind: str, forgotten: bool) -> _Peer:
    """One request on an HTTP/2 connection of httpcore's own pool (h2c), its response open; then
    reset through ``_cancel_streams``: by its body, or (``forgotten``) after the response was
    closed -- httpcore then forgets the stream without a reset -- by the connection's network stream."""
    is_async = kind == "async"
    backend = (_AsyncBackend if is_async else _Backend)(is_async)
    pool_cls: Any = core.AsyncConnectionPool if is_async else core.ConnectionPool
    pool = pool_cls(network_backend=backend, http1=False, http2=True)
    request = core.Request("GET", "http://provider.test/v1/messages", headers=[(b"host", b"provider.test")])
    driver: Any = async_http2 if is_async else sync_http2

    async def run() -> None:
        response = await pool.handle_async_request(request)
        assert response.status == 200 and response.extensions["http_version"] == b"HTTP/2"
        if forgotten:
            await response.aclose()
            assert backend.peer.resets == []  # httpcore alone only forgets it
            await driver._cancel_streams(request, pool=pool, network=backend.stream)
        else:
            await driver._cancel_streams(request, body=response.stream)

    if is_async:
        anyio.run(run)
    else:
        response = pool.handle_request(request)
        assert response.status == 200 and response.extensions["http_version"] == b"HTTP/2"
        if forgotten:
            response.close()
            assert backend.peer.resets == []
            driver._cancel_streams(request, pool=pool, network=backend.stream)
        else:
            driver._cancel_streams(request, body=response.stream)
    return backend.peer


@pytest.mark.parametrize("forgotten", [False, True], ids=["by-body", "forgotten"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_reset_reaches_the_server_through_httpcores_own_connection(core: ModuleType, kind: str,
                                                                        forgotten: bool) -> None:
    peer = _reset_through_httpcore(core, kind, forgotten)
    assert peer.resets == [(1, 0x8)]  # RST_STREAM, CANCEL, for the one stream


# -- the adapter's names: a caller's pool rebuilt from its settings (otel_liveness/transport/_adopt.py)

#: A value for each setting, none of them the default, so that a setting read from the wrong
#: private (or dropped) shows.
def _settings(core: ModuleType, backend: object) -> dict[str, Any]:
    import ssl

    return {"ssl_context": ssl.create_default_context(), "max_connections": 7, "max_keepalive_connections": 3,
            "keepalive_expiry": 2.5, "http1": False, "http2": True, "retries": 2, "local_address": "127.0.0.1",
            "uds": "/tmp/otel-liveness-test.sock", "network_backend": backend, "socket_options": [(1, 9, 1)]}


def _pool_kinds(core: ModuleType) -> list[tuple[str, dict[str, Any]]]:
    """Every class the adapter rebuilds, with the arguments that make one."""
    backend = object()
    base = _settings(core, backend)
    proxy = {"proxy_url": "http://proxy.example:3128", "proxy_auth": ("user", "secret"),
             "proxy_headers": {"x-proxy": "1"}, "proxy_ssl_context": None}
    socks = {"proxy_url": "socks5://proxy.example:1080", "proxy_auth": ("user", "secret")}
    routed = core.Proxy("http://proxy.example:3128") if hasattr(core, "Proxy") else None
    kinds = [(name, {**base, **(proxy if "Proxy" in name else {"proxy": routed})})
             for name in ("ConnectionPool", "AsyncConnectionPool", "HTTPProxy", "AsyncHTTPProxy")]
    socks_settings = {name: base[name] for name in ("ssl_context", "max_connections", "max_keepalive_connections",
                                                     "keepalive_expiry", "http1", "http2", "retries", "network_backend")}
    return kinds + [(name, {**socks_settings, **socks}) for name in ("SOCKSProxy", "AsyncSOCKSProxy")]


@pytest.mark.parametrize("index", range(6), ids=["pool", "async-pool", "proxy", "async-proxy", "socks", "async-socks"])
def test_a_pool_rebuilt_from_the_privates_the_adapter_reads_is_its_twin(core: ModuleType, index: int) -> None:
    from otel_liveness.transport import _adopt

    name, arguments = _pool_kinds(core)[index]
    cls: Any = getattr(core, name)
    table = _adopt.POOL_CLASSES[name]
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(table) <= params  # every setting is a parameter of the public constructor...
    assert params - set(table) <= {"proxy_auth"}  # ...and every parameter is read (the auth: in the headers)
    pool = cls(**arguments)
    found = _adopt.settings_of(pool)
    assert found is not None and found[0] is core
    twin = cls(**found[1])
    for private in table.values():
        assert private in vars(pool), private
        assert vars(twin)[private] == vars(pool)[private], private


def test_the_adapter_leaves_a_pool_it_cannot_rebuild_as_it_was(core: ModuleType) -> None:
    from otel_liveness.transport import _adopt

    class Custom(core.ConnectionPool):  # type: ignore[name-defined,misc]
        pass

    class Holder:
        def __init__(self, pool: Any) -> None:
            self._pool = pool

    def rebuild(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing is rebuilt")

    opened = core.ConnectionPool()
    opened._connections.append(object())  # a connection opened before the wrap: it stays with its pool
    missing = core.ConnectionPool()
    del missing._uds  # a release that renamed a setting
    for pool in (Custom(), opened, missing, object(), None):
        holder = Holder(pool)
        assert _adopt.settings_of(pool) is None
        assert _adopt.adopt(holder, rebuild, Custom) is (type(pool) is Custom)  # (one of "ours": kept)
        assert holder._pool is pool
    assert _adopt.adopt(object(), rebuild, Custom) is False  # a transport with no pool (a mock)
