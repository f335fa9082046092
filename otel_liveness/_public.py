"""The public transport classes: the transport layer's classes with telemetry composed in (on by
default). The transport layer knows nothing of OpenTelemetry; this module, above both, joins them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from .core.policy import Policy
from .telemetry import with_telemetry
from .transport import family_classes

__all__ = ["public_classes"]


@cache
def public_classes(family: str) -> tuple[type, type]:
    """``(LivenessTransport, AsyncLivenessTransport)`` of ``family`` (``httpx`` or ``httpx2``)."""
    return tuple(_with_telemetry(base, family) for base in family_classes(family))  # type: ignore[return-value]


def _with_telemetry(base: type, family: str) -> type:
    def __init__(
        self: Any,
        inner: Any = None,
        policy: Policy | None = None,
        *,
        hooks: Iterable[Callable[[Any], None]] = (),
        hosts: Iterable[str] | None = None,
        telemetry: bool = True,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        **transport_kwargs: Any,
    ) -> None:
        """``inner`` (default: a new transport of the family with the SDKs' TCP keep-alives), the
        ``policy``, ``hooks``, ``hosts`` (others pass through untouched), and telemetry: on by
        default through the given or global providers, ``telemetry=False`` to turn it off."""
        # The class is built at run time from the family's base: call that base's __init__ directly.
        base.__init__(self, inner, policy,  # type: ignore[misc]
                      hooks=with_telemetry(hooks, telemetry, tracer_provider, meter_provider), hosts=hosts,
                      **transport_kwargs)

    return type(base.__name__, (base,), {"__init__": __init__, "__module__": f"otel_liveness.{family}",
                                         "__qualname__": base.__name__, "__doc__": base.__doc__})
