"""The one adapter that reaches into a connection pool the caller built.

A liveness transport wrapping a transport the caller (or an SDK) built -- httpx's or httpx2's
``HTTPTransport`` / ``AsyncHTTPTransport`` -- wants that transport's network reads to wake: a read
ends at its deadline, notices are delivered while the model is silent, and each HTTP/2 stream is
judged by its own reads (docs/http2.md). The caller's pool was built before the liveness transport
saw it, and httpcore keeps its settings only in private attributes. So the pool is **rebuilt, never
altered**: a new pool of the same httpcore class (with the HTTP/2 mixin, ``http2.new_pool``), built
through httpcore's public constructor from the settings read here, over the caller's own network
backend wrapped in the waking one; the wrapped transport's pool attribute then names it. The
caller's pool object keeps its class, its backend and its (unopened) connections.

Every private name read or written is in this module's tables, and
``tests/test_http2_privates.py`` pins each one against the installed httpx, httpx2, httpcore and
httpcore2 (a pool rebuilt from them equals the one it came from). Where one is missing, the pool
is of another class (a SOCKS proxy's, a subclass, a mock), or it has opened connections already,
nothing is adopted: its requests are judged plainly -- deadlines are the socket read timeout's,
notices arrive with the next read, an HTTP/2 stream's silence is its connection's (docs/http2.md,
"A pool the caller built").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["CONNECTION_POOL", "HTTP_PROXY", "POOL_CLASSES", "SOCKS_PROXY", "TRANSPORT_POOL", "adopt", "settings_of", "share_pool"]

#: Where httpx's and httpx2's transports keep their pool (their own methods read it there).
TRANSPORT_POOL: Final = "_pool"

#: httpcore's connection pool: each constructor parameter, and the private it is kept in.
CONNECTION_POOL: Final[Mapping[str, str]] = {
    "ssl_context": "_ssl_context",
    "proxy": "_proxy",
    "max_connections": "_max_connections",
    "max_keepalive_connections": "_max_keepalive_connections",
    "keepalive_expiry": "_keepalive_expiry",
    "http1": "_http1",
    "http2": "_http2",
    "retries": "_retries",
    "local_address": "_local_address",
    "uds": "_uds",
    "network_backend": "_network_backend",
    "socket_options": "_socket_options",
}

#: httpcore's HTTP(S) proxy pool: the pool's parameters (but ``proxy``) and the proxy's own
#: (``proxy_auth`` is kept folded into the proxy headers, so it is not read again).
HTTP_PROXY: Final[Mapping[str, str]] = {
    **{name: private for name, private in CONNECTION_POOL.items() if name != "proxy"},
    "proxy_url": "_proxy_url",
    "proxy_headers": "_proxy_headers",
    "proxy_ssl_context": "_proxy_ssl_context",
}

#: httpcore's SOCKS proxy pool (``socksio``): fewer of the pool's parameters, the proxy's own.
SOCKS_PROXY: Final[Mapping[str, str]] = {
    **{name: CONNECTION_POOL[name] for name in ("ssl_context", "max_connections", "max_keepalive_connections",
                                                "keepalive_expiry", "http1", "http2", "retries", "network_backend")},
    "proxy_url": "_proxy_url",
    "proxy_auth": "_proxy_auth",
}

#: The pool classes rebuilt (by name, in httpcore and in httpcore2), with their settings.
POOL_CLASSES: Final[Mapping[str, Mapping[str, str]]] = {
    "ConnectionPool": CONNECTION_POOL,
    "AsyncConnectionPool": CONNECTION_POOL,
    "HTTPProxy": HTTP_PROXY,
    "AsyncHTTPProxy": HTTP_PROXY,
    "SOCKSProxy": SOCKS_PROXY,
    "AsyncSOCKSProxy": SOCKS_PROXY,
}

_CORES = ("httpcore", "httpcore2")
_MISSING = object()


def settings_of(pool: Any) -> tuple[Any, dict[str, Any]] | None:
    """The httpcore module of ``pool`` and the constructor arguments that build its twin, or
    ``None`` when it cannot be rebuilt: not exactly one of :data:`POOL_CLASSES`, a setting's
    private missing, or connections already opened (they stay with it)."""
    cls = type(pool)
    name = cls.__module__.partition(".")[0]
    settings = POOL_CLASSES.get(cls.__name__)
    if settings is None or name not in _CORES:
        return None
    core = importlib.import_module(name)
    if getattr(core, cls.__name__, None) is not cls or list(pool.connections):
        return None
    found = {param: vars(pool).get(private, _MISSING) for param, private in settings.items()}
    if _MISSING in found.values():
        return None
    return core, found


def adopt(inner: Any, rebuild: Callable[..., Any], rebuilt: type) -> bool:
    """Give ``inner`` (a transport the caller built) a pool rebuilt from its own:
    ``rebuild(core, the pool's class, **its settings)`` builds it. Answers whether ``inner``'s pool
    is one of ours now (already ``rebuilt``, or rebuilt here); False leaves ``inner`` as it was."""
    pool = getattr(inner, TRANSPORT_POOL, None)
    if isinstance(pool, rebuilt):
        return True
    found = settings_of(pool)
    if found is None:
        return False
    core, settings = found
    setattr(inner, TRANSPORT_POOL, rebuild(core, type(pool), **settings))
    return True


def share_pool(transport: Any, copy: Any) -> None:
    """``copy`` (a shallow copy of ``transport``, wrapped since) may have had its pool rebuilt:
    ``transport`` names the same pool again, so both send through one pool and closing either
    closes it (a seated liveness transport, ``_classes.seat``)."""
    pool = getattr(copy, TRANSPORT_POOL, None)
    if pool is not None and getattr(transport, TRANSPORT_POOL, None) is not pool:
        setattr(transport, TRANSPORT_POOL, pool)
