"""Transport drivers: the layer that owns waiting and I/O, and knows nothing of OpenTelemetry.

- :func:`liveness_transports` -- a family's liveness transport classes (sync, async), which take
  ``hooks``; :func:`otel_liveness.wrap` and :mod:`otel_liveness.httpx` / :mod:`otel_liveness.httpx2`
  give them telemetry on by default;
- :func:`is_liveness_transport` -- whether a transport is one (its ``inner`` is what it wraps);
- :func:`seat`, :func:`unseat`, :func:`liveness_in` -- a liveness transport seated in an
  ``HTTPTransport``, so the transport stays the object it was (the auto-instrumentor's placement);
- :func:`family_of`, :func:`installed_modules` -- the HTTP library families (httpx, httpx2);
- :func:`keepalive_socket_options`, :func:`liveness_policy`.
"""

from __future__ import annotations

from ._classes import is_liveness_transport, liveness_in, liveness_transports, seat, unseat
from ._family import Family, family, family_of, installed_modules, keepalive_socket_options
from ._overrides import liveness_policy

__all__ = [
    "Family",
    "family",
    "family_of",
    "installed_modules",
    "is_liveness_transport",
    "keepalive_socket_options",
    "liveness_in",
    "liveness_policy",
    "liveness_transports",
    "seat",
    "unseat",
]
