"""The request loop: the transport's ``handle_async_request`` runs one request's attempts, doing
the I/O each command of the engine asks for (:mod:`otel_liveness.core.commands`); every decision
is the engine's (:mod:`otel_liveness.core.request.engine`).

And the inner transport a liveness transport builds when it is given none,
:class:`AsyncPoolTransport`: the family's ``AsyncHTTPTransport`` over a connection pool it builds
itself, through httpcore's public constructor with ``network_backend=`` the waking backend
(:func:`.http2.new_pool`), so on that road nothing of httpcore's is assigned after the fact (a
transport the caller built has its pool adopted in place instead: :func:`.http2.install_wakeups`).
Only the constructor is its own -- the family's options, named by the family's own signature with
its defaults; the family's methods send the requests, map httpcore's exceptions and read the
bodies, as over the pool the family would have built. Directly or through an HTTP(S) proxy;
through a SOCKS proxy the family's own transport is built instead (``_classes.default_transport``)."""

from __future__ import annotations

import inspect
from typing import Any

from ...core.commands import READ, Respond, Send, Sleep
from .._backends import AsyncBackend
from .._base import TransportBase, error_for, header_dict
from .._family import Family
from .http2 import install_wakeups, new_pool
from .network import unwatch
from .stream import io_failed, pump

__all__ = ["AsyncLivenessMixin", "AsyncPoolTransport"]


class AsyncLivenessMixin(TransportBase):
    """The transport; :func:`otel_liveness.wrap` combines it with the family's base class."""

    _is_async = True
    _backend = AsyncBackend

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> None:
        await self._inner.__aexit__(*args)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _install_wakeups(self, inner: Any) -> bool:
        # (a pool this transport built has them already; a transport the caller built: its pool adopted in place)
        return isinstance(inner, AsyncPoolTransport) or install_wakeups(inner)

    async def handle_async_request(self, request: Any) -> Any:
        if not self._applies(request):
            return await self._inner.handle_async_request(request)  # not a provider: untouched
        backend = self._backend
        clock = backend.now
        engine = self._engine(request, clock())
        if engine is None:
            return await self._inner.handle_async_request(request)  # not a generation: untouched
        command: Any = engine.start(clock())
        self._answered_from_memory(engine)
        response = body = None
        try:
            while True:
                if type(command) is Send:
                    await _discard(response, body, engine)
                    response = body = None
                    try:
                        with self._send_context():
                            response = await self._inner.handle_async_request(
                                self._attempt_request(request, command, engine))
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                        continue
                    headers = header_dict(response.headers)
                    command = engine.headers(clock(), response.status_code, headers)
                elif command is READ:  # the engine holds the body: its pump reads until it answers
                    assert response is not None  # READ comes after the headers
                    if body is None:
                        body = pump(self._family, request, engine, response, READ)
                    command = await body.__anext__()
                elif type(command) is Sleep:
                    await _discard(response, body, engine)
                    response = body = None
                    await backend.sleep(command.seconds)
                    command = engine.slept(clock())
                elif type(command) is Respond:
                    assert response is not None  # Respond comes after the headers
                    if command.passthrough:  # the body as it comes, unjudged: its reads wake for no one
                        unwatch(response.extensions.get("network_stream"), engine)
                    result = self._response(request, engine, response, body, command)
                    if response.is_closed:
                        # The inner transport gave a body it had read whole (a response made from
                        # bytes, a mock, a middleware's): ours is read whole too, as it would be.
                        await result.aread()
                    return result
                else:
                    raise error_for(self._family, request, command, engine.published)
        except BaseException as exc:
            engine.abandoned(clock(), exc)  # nothing if the engine ended it (a Fail it answered)
            await _discard(response, body, engine)
            raise


async def _discard(response: Any, body: Any, engine: Any) -> None:
    """Drop an attempt's response before the caller had it: its pump (left at the command it
    yielded, which owns nothing yet) and its body, whose connection goes back to the pool."""
    if body is not None:
        await body.aclose()
    if response is not None:
        unwatch(response.extensions.get("network_stream"), engine)
        with AsyncBackend.shield():
            await response.aclose()


class AsyncPoolTransport:
    """Joined to the family's ``AsyncHTTPTransport`` (``_classes.pool_transports``): its constructor
    builds the pool; every other method is the family's own, over that pool (``_pool``, the name
    the family's methods read: tests/test_http2_privates.py checks it) -- so what instruments the
    family's transport class (opentelemetry-instrumentation-httpx) sees this one too, and
    httpcore's exceptions are mapped by the family itself."""

    _family: Family

    def __init__(self, **options: Any) -> None:
        x: Any = self._family.module
        core: Any = self._family.core
        bound = inspect.signature(x.AsyncHTTPTransport).bind(**options)  # the family's options and defaults
        bound.apply_defaults()
        given = bound.arguments
        limits = given["limits"]
        pool = {
            "ssl_context": x.create_ssl_context(verify=given["verify"], cert=given["cert"], trust_env=given["trust_env"]),
            "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry,
            "http1": given["http1"],
            "http2": given["http2"],
        }
        proxy = http_proxy(x, given["proxy"])
        if proxy is None:
            if given["proxy"] is not None:
                raise TypeError("a SOCKS proxy is the family's own transport's (_classes.default_transport)")
            for name in ("uds", "local_address", "retries", "socket_options"):
                pool[name] = given[name]
            self._pool = new_pool(core, core.AsyncConnectionPool, **pool)
            return
        url = proxy.url
        for name in _PROXY_OPTIONS.get(self._family.name, _PROXY_OPTIONS["httpx"]):
            pool[name] = given[name]
        self._pool = new_pool(
            core, core.AsyncHTTPProxy, **pool,
            proxy_url=core.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            proxy_auth=proxy.raw_auth, proxy_headers=proxy.headers.raw, proxy_ssl_context=proxy.ssl_context,
        )


#: The transport options each family passes on to httpcore's HTTP proxy pool, beyond the proxy's
#: own and the pool's (its ``HTTPTransport`` constructor).
_PROXY_OPTIONS = {
    "httpx": ("socket_options",),
    "httpx2": ("uds", "local_address", "retries", "socket_options"),
}


def http_proxy(x: Any, proxy: Any) -> Any:
    """``proxy`` (a transport's ``proxy=`` option of the family ``x``) as the family's ``Proxy``
    when it is an HTTP(S) proxy, else ``None`` (none, or a SOCKS proxy)."""
    if proxy is None:
        return None
    if isinstance(proxy, (str, x.URL)):
        proxy = x.Proxy(url=proxy)
    return proxy if proxy.url.scheme in ("http", "https") else None
