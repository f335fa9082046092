"""Per-call policy overrides through any SDK: a context variable that follows threads' own
context, asyncio tasks and trio (the transport reads it when a request starts)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from ..core.policy import Policy

__all__ = ["current_policy", "liveness_policy"]

_OVERRIDES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("otel_liveness_policy", default=None)


@contextlib.contextmanager
def liveness_policy(policy: Policy | None = None, **changes: Any) -> Iterator[None]:
    """Override the transport's policy for the requests made inside the block, through any SDK::

        with otel_liveness.liveness_policy(wall_timeout=120, semantic_notice_interval=10):
            client.messages.create(...)

    Pass a whole ``Policy`` or field changes (validated now, applied on top of each transport's
    policy). Nesting composes; the context variable follows asyncio tasks and trio.
    """
    if policy is not None and not isinstance(policy, Policy):
        raise TypeError("liveness_policy() takes a Policy or keyword changes")
    Policy().replace(**changes)  # validate the field names and values now, not at request time
    outer = _OVERRIDES.get() or {}
    merged = dict(outer)
    if policy is not None:
        merged = {"__policy__": policy}
    merged.update(changes)
    token = _OVERRIDES.set(merged)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def current_policy(base: Policy) -> Policy:
    """``base`` with the overrides of the current context applied."""
    overrides = _OVERRIDES.get()
    if not overrides:
        return base
    changes = dict(overrides)
    policy: Policy = changes.pop("__policy__", base)
    return policy.replace(**changes) if changes else policy
