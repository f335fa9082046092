"""The connection pool a liveness transport builds when it is given no inner transport: built
through httpcore's public ``network_backend=`` (nothing of httpcore's assigned after the fact),
with the family's options, under the family's own transport methods (its exception mapping, what
instruments it), and judged on the wire as a caller's pool is -- raw silence on HTTP/1.1 and on
HTTP/2. A pool the caller hands over is rebuilt, never altered: its twin is built the same way
from its settings (transport/_adopt.py, the one reader of httpcore's privates for it)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import otel_liveness
from otel_liveness import StreamTruncated
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.transport import family
from otel_liveness.transport._async import http2 as async_http2
from otel_liveness.transport._async import transport as async_transport
from otel_liveness.transport._async.network import AsyncWakingBackend
from otel_liveness.transport._classes import default_transport, pool_transports
from otel_liveness.transport._sync import http2 as sync_http2
from otel_liveness.transport._sync import transport as sync_transport
from otel_liveness.transport._sync.network import SyncWakingBackend

from .clients import VARIANT_IDS, VARIANTS, PlainClient, Result
from .conftest import FAST

FAMILIES = ["httpx", "httpx2"]
KINDS = [False, True]
KIND_IDS = ["sync", "async"]


def _public(name: str, is_async: bool) -> Any:
    module = importlib.import_module(f"otel_liveness.{name}")
    return module.AsyncLivenessTransport if is_async else module.LivenessTransport


def _pool_class(core: Any, is_async: bool) -> Any:
    return core.AsyncConnectionPool if is_async else core.ConnectionPool


@pytest.fixture
def assignments(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, str]]]:
    """Every attribute assigned on an httpcore (httpcore2) connection pool, as (name, the assigning
    module, the assigning function)."""
    seen: list[tuple[str, str, str]] = []

    def spy(self: Any, name: str, value: Any) -> None:
        caller = sys._getframe(1)
        seen.append((name, caller.f_globals.get("__name__", "?"), caller.f_code.co_name))
        object.__setattr__(self, name, value)

    for core_name in ("httpcore", "httpcore2"):
        core = importlib.import_module(core_name)
        for cls in (core.ConnectionPool, core.AsyncConnectionPool):
            monkeypatch.setattr(cls, "__setattr__", spy)
    yield seen


@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_the_default_pool_is_built_with_our_backend_and_nothing_assigned(name, is_async, assignments,
                                                                          monkeypatch) -> None:  # type: ignore[no-untyped-def]
    driver = async_transport if is_async else sync_transport
    adopted: list[Any] = []
    monkeypatch.setattr(driver, "install_wakeups", adopted.append)
    transport = _public(name, is_async)(telemetry=False, http2=True)
    x, core = importlib.import_module(name), family(name).core
    inner = transport.inner
    assert type(inner) is pool_transports(family(name))[is_async]
    assert isinstance(inner, x.AsyncHTTPTransport if is_async else x.HTTPTransport)  # what SDKs check
    pool = inner._pool
    assert isinstance(pool, _pool_class(core, is_async))
    assert isinstance(pool, async_http2.AsyncH2Pool if is_async else sync_http2.SyncH2Pool)
    # (read here only: the test's, not the transport's)
    assert isinstance(pool._network_backend, AsyncWakingBackend if is_async else SyncWakingBackend)
    assert adopted == []  # the adopting function is not called on this road...
    foreign = [entry for entry in assignments if not entry[1].startswith(core.__name__ + ".")]
    assert foreign == []  # ...and nothing outside httpcore assigned an attribute of the pool
    assert ("_network_backend", f"{core.__name__}._{'async' if is_async else 'sync'}.connection_pool",
            "__init__") in assignments  # (the spy sees httpcore's own constructor)


@pytest.mark.parametrize("proxy", [None, "http://user:secret@proxy.example:3128", "socks5://user:secret@proxy.example:1080"],
                         ids=["direct", "http-proxy", "socks-proxy"])
@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_a_callers_pool_is_rebuilt_never_altered(name, is_async, proxy, assignments) -> None:  # type: ignore[no-untyped-def]
    # The caller's pool keeps its class and backend (no attribute of it is assigned outside
    # httpcore); the transport's pool is a twin built by httpcore's own constructor, with every
    # setting of the caller's and the caller's network backend under the waking one.
    x, core = importlib.import_module(name), family(name).core
    options = {"http2": True, "retries": 2, "local_address": "127.0.0.1", "socket_options": [(1, 9, 1)],
               "limits": x.Limits(max_connections=7, max_keepalive_connections=3, keepalive_expiry=2.5),
               "proxy": proxy}
    inner = (x.AsyncHTTPTransport if is_async else x.HTTPTransport)(**options)
    theirs = inner._pool
    theirs_class, theirs_backend = type(theirs), theirs._network_backend
    assignments.clear()
    otel_liveness.wrap(inner, telemetry=False)
    ours = inner._pool
    assert [entry for entry in assignments if not entry[1].startswith(core.__name__ + ".")] == []
    assert type(theirs) is theirs_class and theirs._network_backend is theirs_backend  # not altered
    driver = async_http2 if is_async else sync_http2
    assert ours is not theirs and isinstance(ours, driver.AsyncH2Pool if is_async else driver.SyncH2Pool)
    assert type(ours).__mro__[1:].count(theirs_class) == 1  # httpcore's own class, the HTTP/2 mixin added
    backend = ours._network_backend
    assert isinstance(backend, AsyncWakingBackend if is_async else SyncWakingBackend)
    assert backend._inner is theirs_backend
    mine, yours = vars(ours), vars(theirs)
    assert set(mine) == set(yours)
    for key, value in yours.items():
        if key not in ("_connections", "_requests", "_network_backend", "_optional_thread_lock", "_pool_lock"):
            assert mine[key] is value or mine[key] == value, key  # (the same SSL context, the same headers)
    wrapped_again = otel_liveness.wrap(inner, telemetry=False)
    assert wrapped_again.inner._pool is ours  # a pool of ours is kept


@pytest.mark.parametrize("proxy", [None, "http://user:secret@proxy.example:3128", "proxy"],
                         ids=["direct", "http-proxy", "proxy-object"])
@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_the_owned_pool_has_the_settings_the_familys_own_transport_gives_it(name, is_async, proxy) -> None:  # type: ignore[no-untyped-def]
    x = importlib.import_module(name)
    if proxy == "proxy":
        proxy = x.Proxy("https://proxy.example:8443", headers={"x-proxy": "1"})
    options = {"http2": True, "retries": 2, "local_address": "127.0.0.1", "socket_options": [(1, 9, 1)],
               "limits": x.Limits(max_connections=7, max_keepalive_connections=3, keepalive_expiry=2.5),
               "proxy": proxy}
    theirs = (x.AsyncHTTPTransport if is_async else x.HTTPTransport)(**options)._pool
    ours = pool_transports(family(name))[is_async](**options)._pool
    assert type(ours).__mro__[1:].count(type(theirs)) == 1  # httpcore's own class, the HTTP/2 mixin added
    mine, yours = vars(ours), vars(theirs)
    assert set(mine) == set(yours)
    simple = (bool, int, float, str, bytes, type(None), list, tuple)
    for key, value in yours.items():
        if isinstance(value, simple) and key != "_connections":
            assert mine[key] == value, key
    assert type(mine["_ssl_context"]) is type(yours["_ssl_context"])
    if proxy is not None:
        assert mine["_proxy_url"] == yours["_proxy_url"] and mine["_proxy_headers"] == yours["_proxy_headers"]
        assert default_transport(family(name), asynchronous=is_async, proxy=proxy).__class__ is type(
            pool_transports(family(name))[is_async](proxy=proxy))  # a liveness transport builds this one too


@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_the_owned_transport_refuses_what_the_familys_refuses(name, is_async) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        pool_transports(family(name))[is_async](htp2=True)


@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_only_the_constructor_is_ours(name, is_async) -> None:  # type: ignore[no-untyped-def]
    # The family's own methods send, map httpcore's exceptions and read the bodies over our pool.
    x = importlib.import_module(name)
    theirs = x.AsyncHTTPTransport if is_async else x.HTTPTransport
    ours = pool_transports(family(name))[is_async]
    own = {attr for klass in ours.__mro__[:ours.__mro__.index(theirs)] for attr in vars(klass)}
    assert own - {"__init__", "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "_family",
                  "__annotations__", "__firstlineno__", "__static_attributes__"} == set()


# -- on the wire ---------------------------------------------------------------------------------


class OwnedClient(PlainClient):
    """A plain client whose liveness transport built its own inner transport (no inner given)."""

    def _transport(self) -> Any:
        return _public(self.family, self.is_async)(policy=self.policy, hooks=self.hooks)


def run_owned(variant: tuple[str, str | None], url: str) -> tuple[Result, Any]:
    name, backend = variant
    client = OwnedClient(name, backend is not None, FAST)
    if backend is None:
        coro = client.post(url)
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value, client
        raise AssertionError("the sync path awaited something")
    return anyio.run(lambda: client.post(url), backend=backend), client


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_http1_stall_after_content_is_raw_silence_through_the_owned_pool(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("stall", [[s.Headers(), *anthropic_reply("abcdefgh", deltas=8, stall_after=3), s.Stall()]])
    result, _ = run_owned(variant, url + "/v1/messages")
    exc = result.error
    assert isinstance(exc, StreamTruncated), exc
    assert exc.cause == "raw_silence" and exc.prefix == result.body
    assert isinstance(exc, importlib.import_module(variant[0]).ReadTimeout)  # the family's, as on its own transport
    assert provider.attempts("stall") == 1


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_http1_completes_and_connect_errors_are_the_familys(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("ok", [[s.Headers(), *anthropic_reply("whole")]])
    result, _ = run_owned(variant, url + "/v1/messages")
    assert result.error is None and result.status == 200 and b"message_stop" in result.body
    assert result.report is not None and [a["outcome"] for a in result.report["attempts"]] == ["completed"]
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result, _ = run_owned(variant, f"http://127.0.0.1:{port}/v1/messages")  # nothing listens there
    assert isinstance(result.error, importlib.import_module(variant[0]).ConnectError), repr(result.error)


# -- HTTP/2 through the owned pool: two streams of one connection (tests/test_http2.py's pair) ----


@pytest.fixture
def owned_h2(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/test_http2.py's pair, its inner transport the one a liveness transport builds itself
    (h2c with prior knowledge), so no pool is adopted."""
    from . import test_http2

    def inner(name: str, is_async: bool) -> Any:
        return pool_transports(family(name))[is_async](http1=False, http2=True)

    monkeypatch.setattr(test_http2, "_inner", inner)


@pytest.mark.serial  # wall-clock bounds (tests/test_http2.py)
@pytest.mark.parametrize("kind", ["asyncio", "trio", "sync"])
@pytest.mark.parametrize("name", FAMILIES)
def test_http2_stall_of_one_stream_is_raw_silence_through_the_owned_pool(owned_h2, name, kind, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from otel_liveness.testing import SimulatedProvider

    from . import test_http2 as h2

    adopted: list[Any] = []
    for driver in (async_transport, sync_transport):
        monkeypatch.setattr(driver, "install_wakeups", adopted.append)
    with SimulatedProvider(time_scale=h2.TIME_SCALE, http2=True) as server:
        url_a = server.add("a", [h2.a_script()])
        url_b = server.add("b", [[s.Headers(), *anthropic_reply("bbbbbb", deltas=6, stall_after=2), s.Stall()]])
        a, b = h2.run_pair(server, name, kind, url_a, url_b)
        error = otel_liveness.liveness_error(b.error)
        assert isinstance(error, StreamTruncated), repr(b.error)
        assert error.cause == "raw_silence"
        assert h2.RAW - 0.01 <= b.elapsed <= h2.RAW + h2.TOLERANCE
        assert a.ended > b.ended + 0.1  # A was still sending when B's stall was found
        h2.assert_a_whole(name, a)
        assert server.connections_accepted == 1
        assert h2.wait_for(lambda: server.requests("b")[0].disconnected)  # B's stream reset (RST_STREAM)
    assert adopted == []  # the pool was ours: nothing adopted


@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
def test_what_instruments_the_familys_transport_still_sees_the_owned_one(is_async, provider) -> None:  # type: ignore[no-untyped-def]
    # opentelemetry-instrumentation-httpx wraps httpx's HTTPTransport.handle_request (and the async
    # one) on the class: a request the liveness transport passes through (a host outside
    # ``hosts``) keeps its httpx span, as it did over the family's own transport.
    import httpx
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    url = provider.add("other", [[s.Headers(), *anthropic_reply()]]) + "/v1/messages"
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        transport = _public("httpx", is_async)(policy=FAST, telemetry=False, hosts=["provider.invalid"])
        if is_async:
            async def post() -> None:
                async with httpx.AsyncClient(transport=transport) as client:
                    (await client.post(url, json={"stream": True})).raise_for_status()

            anyio.run(post)
        else:
            with httpx.Client(transport=transport) as client:
                client.post(url, json={"stream": True}).raise_for_status()
    finally:
        instrumentor.uninstrument()
    scopes = [span.instrumentation_scope.name for span in exporter.get_finished_spans()]
    assert scopes == ["opentelemetry.instrumentation.httpx"], scopes


# -- the engine reaches the network stream through the request, not through the context ------------


def test_the_reads_find_their_engine_through_one_context_variable_and_it_is_http2s() -> None:
    # The engine goes down in the request's extensions; the pool's connections put it in their
    # network stream's slot. The one ambient value left says which HTTP/2 stream a shared
    # connection's read is made for (docs/http2.md): a property of the reading task or thread.
    import ast
    import pathlib

    root = pathlib.Path(otel_liveness.__file__).parent / "transport"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "ContextVar":
                found.append((path.relative_to(root).as_posix(), node.args[0].value))  # type: ignore[attr-defined]
    assert found == [("_async/http2.py", "otel_liveness_h2_read"),
                     ("_overrides.py", "otel_liveness_policy"),  # the caller's `with policy(...)`: public API
                     ("_sync/http2.py", "otel_liveness_h2_read")]


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
def test_each_connection_fills_its_streams_slot_from_the_request_and_empties_it(name, is_async, provider) -> None:  # type: ignore[no-untyped-def]
    # Two requests on one connection: while each is read, the network stream's slot holds its
    # engine (filled on the first by the trace of the connect, on the second by the connection);
    # once each body is closed the slot is empty (a pooled connection keeps no engine). A request
    # the transport passes through (not a generation) leaves the slot empty.
    url = provider.add("two", [[s.Headers(), *anthropic_reply("ab", deltas=2)]] * 3)
    body = {"model": "claude-sim-1", "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    seen: list[tuple[Any, Any]] = []

    def slots(transport: Any) -> list[Any]:
        pool = transport.inner._pool
        return [(type(c).__name__, getattr(getattr(c, "network", None), "watch", "no network")) for c in pool.connections]

    x = importlib.import_module(name)

    async def go() -> None:
        transport = _public(name, is_async)()
        client_cls = x.AsyncClient if is_async else x.Client
        client = client_cls(transport=transport, timeout=10)
        try:
            for path in ("/v1/messages", "/v1/messages", "/v1/models"):
                if is_async:
                    async with client.stream("POST", url + path, json=body if path == "/v1/messages" else {}) as response:
                        seen.append((response.extensions.get("liveness"), slots(transport)))
                        await response.aread()
                else:
                    with client.stream("POST", url + path, json=body if path == "/v1/messages" else {}) as response:
                        seen.append((response.extensions.get("liveness"), slots(transport)))
                        response.read()
                seen.append(("closed", slots(transport)))
        finally:
            await client.aclose() if is_async else client.close()

    anyio.run(go) if is_async else _run_sync(go)
    watched = "AsyncWatchedConnection" if is_async else "SyncWatchedConnection"
    (r1, open1), (_, closed1), (r2, open2), (_, closed2), (r3, open3), (_, closed3) = seen
    assert r1 is not None and r2 is not None and r3 is None  # /v1/models: passed through
    for during in (open1, open2):
        ((kind, engine),) = during  # one connection throughout
        assert kind == watched and type(engine).__name__ == "Engine"
    assert open1[0][1] is not open2[0][1]  # each request's own engine
    assert closed1 == closed2 == open3 == closed3 == [(watched, None)]


def _run_sync(go: Any) -> None:
    coro = go()
    try:
        coro.send(None)
    except StopIteration:
        return
    raise AssertionError("the sync path awaited something")


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("is_async", KINDS, ids=KIND_IDS)
def test_the_watched_connection_provides_httpcores_whole_connection_interface(name, is_async) -> None:  # type: ignore[no-untyped-def]
    # Every method of httpcore's connection interface is the wrapper's own (a delegation, not a
    # lookup through __getattr__ on every call the pool makes), with httpcore's names.
    from otel_liveness.transport._async.network import AsyncWatchedConnection
    from otel_liveness.transport._sync.network import SyncWatchedConnection

    core = importlib.import_module(family(name).core.__name__)
    interface = core.AsyncConnectionInterface if is_async else core.ConnectionInterface
    ours = AsyncWatchedConnection if is_async else SyncWatchedConnection
    methods = {n for n in dir(interface) if not n.startswith("_") and callable(getattr(interface, n))}
    assert {"handle_async_request" if is_async else "handle_request", "is_idle", "is_available"} <= methods
    missing = {n for n in methods - {"request", "stream"} if n not in vars(ours)}
    assert not missing, missing
