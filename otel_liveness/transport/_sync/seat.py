# GENERATED from _async/seat.py by scripts/unasync.py: do not edit.
"""A liveness transport seated in a transport's connection pool, so the transport stays itself.

The auto-instrumentor puts the liveness policy under clients it did not build. Wrapping such a
client's transport would change what the client (and the SDK above it) holds: its class, its
proxy, its pool. :class:`SyncPoolSeat` takes the place of the transport's httpcore connection
pool instead (``transport._pool``, where an ``HTTPTransport`` of httpx or httpx2 sends every
request): the transport converts each request for its pool as it always does; the seat hands it,
converted back, to a liveness transport whose inner transport is a copy of the original one over
the original pool, and returns the liveness transport's response in the pool's shape. Anything
else asked of the pool -- its connections, proxy URL, socket options -- is the original pool's.

Errors cross both conversions unchanged: the inner copy maps the pool's exceptions to the
family's (as the transport would have), and the transport's mapping re-raises what is not an
httpcore exception as it is.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

__all__ = ["SyncPoolSeat", "seat_in_pool"]


class SyncPoolSeat:
    """Stands where an async transport's connection pool stood (see the module docstring)."""

    def __init__(self, pool: Any, liveness: Any) -> None:
        self.pool = pool
        #: The liveness transport every request of the pool goes through.
        self.liveness = liveness
        self._core = importlib.import_module(type(pool).__module__.partition(".")[0])  # httpcore or httpcore2

    def handle_request(self, request: Any) -> Any:
        response = self.liveness.handle_request(family_request(self.liveness.family.module, request))
        return self._core.Response(status=response.status_code, headers=response.headers.raw, content=response.stream,
                                   extensions=response.extensions)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Any:
        self.pool.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self.pool.__exit__(*args)

    def __getattr__(self, name: str) -> Any:
        # (only for names the seat does not have: the pool's own state, read by whoever owns it)
        return getattr(self.pool, name)


def seat_in_pool(transport: Any, make_liveness: Any) -> Any:
    """Seat a liveness transport in ``transport``'s pool; ``make_liveness(inner)`` builds it over a
    copy of ``transport`` that keeps the original pool. Answers the seat."""
    inner = copy.copy(transport)  # (a shallow copy: the same pool, the same configuration)
    seat = SyncPoolSeat(transport._pool, make_liveness(inner))
    transport._pool = seat
    return seat


def family_request(module: Any, request: Any) -> Any:
    """An httpcore request as the HTTP library's request it was converted from (``module``:
    httpx or httpx2): the same method, URL, headers, body stream and extensions; a body of bytes
    is readable as ``request.content`` again."""
    url = request.url
    out = module.Request(
        request.method.decode("ascii"),
        module.URL(scheme=url.scheme.decode("ascii"), host=url.host.decode("ascii"), port=url.port, raw_path=url.target),
        headers=request.headers, stream=request.stream, extensions=request.extensions,
    )
    if isinstance(request.stream, module.ByteStream):
        out.read()  # (a ByteStream is read without being consumed: the body for the engine's facts)
    return out
