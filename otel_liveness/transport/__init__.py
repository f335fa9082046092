"""Transport drivers: the layer that owns waiting and I/O.

``wrap(inner)`` returns a transport of the same family (httpx or httpx2) and kind (sync or async)
as ``inner``; :mod:`otel_liveness.httpx` and :mod:`otel_liveness.httpx2` expose the same classes
per family, building a default inner transport (with the SDKs' TCP keep-alives) when none is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from ..core.policy import Policy
from ._async import AsyncLivenessMixin, AsyncLivenessStream, AsyncPassThrough
from ._family import Family, family, family_of, keepalive_socket_options
from ._overrides import liveness_policy
from ._sync import SyncLivenessMixin, SyncLivenessStream, SyncPassThrough

__all__ = ["family_classes", "family_of", "keepalive_socket_options", "liveness_policy", "transport_class", "wrap"]


@cache
def transport_class(fam: Family, is_async: bool) -> type:
    """The liveness transport class for one family and kind (built once)."""
    x = fam.module
    if is_async:
        stream = type("AsyncLivenessStream", (AsyncLivenessStream, x.AsyncByteStream), {"__module__": __name__})
        passthrough = type("AsyncPassThrough", (AsyncPassThrough, x.AsyncByteStream), {"__module__": __name__})
        bases: tuple[type, ...] = (AsyncLivenessMixin, x.AsyncBaseTransport)
        name = "AsyncLivenessTransport"
    else:
        stream = type("SyncLivenessStream", (SyncLivenessStream, x.SyncByteStream), {"__module__": __name__})
        passthrough = type("SyncPassThrough", (SyncPassThrough, x.SyncByteStream), {"__module__": __name__})
        bases = (SyncLivenessMixin, x.BaseTransport)
        name = "LivenessTransport"
    return type(
        name,
        bases,
        {"__module__": f"otel_liveness.{fam.name}", "_family": fam, "_stream_cls": stream, "_passthrough_cls": passthrough},
    )


def wrap(
    inner_transport: Any,
    policy: Policy | None = None,
    *,
    hooks: Iterable[Callable[[Any], None]] = (),
    hosts: Iterable[str] | None = None,
    asynchronous: bool | None = None,
) -> Any:
    """Put the liveness policy under a client: returns a transport of the same family (httpx or
    httpx2) and kind (sync or async) as ``inner_transport``::

        import anthropic, httpx2, otel_liveness
        client = anthropic.Anthropic(
            http_client=httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport())),
            max_retries=0,  # the transport retries below the SDK
        )

    This layer knows nothing of OpenTelemetry: :func:`otel_liveness.wrap` adds the telemetry hook
    (on by default). ``hooks`` receive every event (:mod:`otel_liveness.core.events`); ``hosts`` limits the policy
    to requests for those hosts (others pass through untouched): names, or patterns where ``*`` is
    one DNS label or part of one (``bedrock-runtime.*.amazonaws.com``). ``asynchronous`` picks the kind
    for an inner transport that is both (``MockTransport``; sync by default).
    """
    fam, is_async = family_of(inner_transport, asynchronous)
    return transport_class(fam, is_async)(inner_transport, policy, hooks=hooks, hosts=hosts)


def family_classes(name: str) -> tuple[type, type]:
    fam = family(name)
    return transport_class(fam, False), transport_class(fam, True)
