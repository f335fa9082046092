"""Auto-instrumentation: ``opentelemetry-instrument python agent.py`` activates this through the
``opentelemetry_instrumentor`` entry point, with no code change.

Every httpx and httpx2 client (``Client``/``AsyncClient``, including the SDKs' subclasses)
created while instrumented gets its transports wrapped; the liveness policy applies to requests
for provider hosts only (others pass through untouched), in **shadow** mode unless ``enforce`` is
asked for explicitly -- observing is the safe default when nobody chose a policy.

Environment (read at ``instrument()``):

=====================================  ============================================================
``OTEL_LIVENESS_MODE``                 ``shadow`` (default) or ``enforce``
``OTEL_LIVENESS_HOSTS``                comma-separated provider hosts or host patterns (``*`` is one
                                       DNS label or part of one; a URL or ``host:port`` names its
                                       host), replacing the default: every host the provider
                                       profiles know (:data:`DEFAULT_HOSTS`)
``OTEL_LIVENESS_<POLICY FIELD>``       any :class:`~otel_liveness.Policy` field, e.g.
                                       ``OTEL_LIVENESS_RAW_IDLE_TIMEOUT=45``
=====================================  ============================================================
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Collection
from typing import Any

# The package's typing does not re-export BaseInstrumentor (it is its public entry point all the same).
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..core.errors import InvalidPolicy
from ..core.wire.hosts import host_of
from ..core.wire.providers import HOST_PATTERNS
from ..transport import family_of, installed_modules, is_liveness_transport, liveness_in, liveness_transports, seat, unseat
from ..transport._base import policy_from_env, warn_invalid_variable
from ._hook import TelemetryHook

__all__ = ["DEFAULT_HOSTS", "LivenessInstrumentor"]

log = logging.getLogger("otel_liveness")

#: Every host the provider profiles are served from (``core.providers.HOST_PATTERNS``): Anthropic,
#: Vertex AI (global and regional), Bedrock (regional, FIPS, China), OpenAI, OpenRouter, Gemini.
DEFAULT_HOSTS: tuple[str, ...] = tuple(dict.fromkeys(p for patterns in HOST_PATTERNS.values() for p in patterns))


class LivenessInstrumentor(BaseInstrumentor):  # type: ignore[misc]  # the base is untyped (Any)
    """Instrument httpx and httpx2 clients. ``instrument(enforce=False, policy=None, hosts=None,
    tracer_provider=None, meter_provider=None, hooks=())`` (``hooks``: more hooks beside the
    telemetry one, each receiving every event of every wrapped client); ``uninstrument()`` restores every patched class
    and unwraps every client it wrapped."""

    _originals: dict[Any, Any]
    _clients: weakref.WeakSet[Any]

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # either family may be absent; whichever is installed is instrumented

    def _instrument(self, **kwargs: Any) -> None:
        environ = os.environ
        mode = (environ.get("OTEL_LIVENESS_MODE") or ("enforce" if kwargs.get("enforce") else "shadow")).lower()
        if kwargs.get("enforce") is not None:
            mode = "enforce" if kwargs["enforce"] else "shadow"
        if mode not in ("shadow", "enforce"):
            # Never raise here: under opentelemetry-instrument that would stop every instrumentor.
            warn_invalid_variable("OTEL_LIVENESS_MODE", environ.get("OTEL_LIVENESS_MODE", ""),
                                  InvalidPolicy("OTEL_LIVENESS_MODE", "expected shadow or enforce"))
            mode = "shadow"
        policy = policy_from_env(kwargs.get("policy"))
        policy = policy.replace(shadow=mode == "shadow")
        hosts = kwargs.get("hosts")
        if hosts is None:
            raw = environ.get("OTEL_LIVENESS_HOSTS", "")
            hosts = []
            for entry in (h for h in raw.split(",") if h.strip()):
                host = host_of(entry)
                if host is None:
                    warn_invalid_variable("OTEL_LIVENESS_HOSTS", raw, InvalidPolicy(
                        "OTEL_LIVENESS_HOSTS", f"{entry.strip()!r} names no host (a host name, a pattern, "
                        "host:port or a URL)"))
                else:
                    hosts.append(host)
            hosts = hosts or list(DEFAULT_HOSTS)
        hook = TelemetryHook(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        extra_hooks = list(kwargs.get("hooks") or ())
        self._originals = {}
        self._clients = weakref.WeakSet()
        clients = self._clients
        lock = threading.Lock()  # clients are created in any thread; the set of wrapped ones is shared

        def wrap_client(client: Any, is_async: bool) -> None:
            client._transport = _placed(client._transport, is_async)
            client._mounts = {pattern: _placed(t, is_async) for pattern, t in client._mounts.items()}
            with lock:
                clients.add(client)

        def _placed(transport: Any, is_async: bool) -> Any:
            """The liveness policy under ``transport``: seated in it (the transport stays the object
            it was: its class, proxy and pool, as the client and the SDK above expect), or wrapping
            it when it takes no attribute of its own. ``is_async`` is the client's kind (a
            transport that is both, ``MockTransport``, serves the client it is given to)."""
            if transport is None or liveness_in(transport) is not None:
                return transport  # not set, or the policy is already under it
            try:
                family, kind = family_of(transport, is_async)
            except TypeError:
                return transport  # another library's transport, or not of the client's kind

            # The transport layer's class with this instrumentor's own telemetry hook (the public
            # classes, a layer above, would add the same default hook: one is there already).
            def make(inner: Any, kind: bool) -> Any:
                return liveness_transports(family)[1 if kind else 0](inner, policy, hooks=[hook, *extra_hooks],
                                                                      hosts=hosts)

            if seat(transport, make, kind):
                return transport
            return make(transport, kind)

        modules = installed_modules()
        if not modules:
            log.warning("otel-liveness found neither httpx2 nor httpx: nothing to instrument "
                        "(pip install 'otel-liveness[anthropic]', '[openai]', '[httpx2]' or '[httpx]')")
        for module in modules:
            for cls in (module.Client, module.AsyncClient):
                original = cls.__init__
                self._originals[cls] = original

                def patched(client: Any, *args: Any, __original: Any = original, __async: bool = cls is module.AsyncClient,
                            **kw: Any) -> None:
                    __original(client, *args, **kw)
                    try:
                        wrap_client(client, __async)
                    except Exception:  # instrumentation must never break client construction
                        log.warning("otel-liveness could not instrument %r", client, exc_info=True)

                patched.__wrapped__ = original  # type: ignore[attr-defined]  # functools' convention
                cls.__init__ = patched
        log.info("otel-liveness instrumented httpx clients (%s mode, hosts %s)", mode, ", ".join(hosts))

    def _uninstrument(self, **kwargs: Any) -> None:
        for cls, original in getattr(self, "_originals", {}).items():
            cls.__init__ = original
        self._originals = {}
        for client in list(getattr(self, "_clients", ())):
            client._transport = _unplaced(client._transport)
            client._mounts = {p: _unplaced(t) for p, t in client._mounts.items()}
        self._clients = weakref.WeakSet()


def _unplaced(transport: Any) -> Any:
    """``transport`` as it was before :meth:`LivenessInstrumentor._instrument` placed the policy."""
    if is_liveness_transport(transport):
        return transport.inner
    unseat(transport)
    return transport
