"""What a transport remembers across requests (pure: the caller passes the time).

- :class:`ExhaustedCache`: requests whose retry budget this transport spent, so that an SDK retry
  loop above it (``max_retries`` > 0) gets the same typed error at once instead of new provider
  attempts. Keyed by a digest of method, URL and body -- the SDKs re-send identical bytes -- and
  consulted only for requests marked as SDK retries (``x-stainless-retry-count`` > 0).
- :class:`CadenceMemory`: the largest heartbeat-to-heartbeat gap seen on recent attempts to each
  provider host, for the learned raw bound (``Policy.raw_idle_adaptive``). It can only make that
  bound larger (safer), never smaller than what the current attempt shows.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from typing import Generic, TypeVar

__all__ = ["CadenceMemory", "ExhaustedCache", "request_key"]

T = TypeVar("T")


def request_key(method: str, url: str, body: bytes) -> str:
    """The identity of a request for :class:`ExhaustedCache`."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(method.encode())
    digest.update(b"\0")
    digest.update(url.encode())
    digest.update(b"\0")
    digest.update(body)
    return digest.hexdigest()


class ExhaustedCache(Generic[T]):
    """A bounded, expiring map from request key to the error its exhausted request ended with."""

    def __init__(self, size: int = 256, ttl: float = 300.0) -> None:
        self.size = size
        self.ttl = ttl
        self._items: OrderedDict[str, tuple[float, T]] = OrderedDict()

    def put(self, key: str, value: T, now: float) -> None:
        self._items[key] = (now, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, key: str, now: float) -> T | None:
        item = self._items.get(key)
        if item is None:
            return None
        stamp, value = item
        if now - stamp > self.ttl:
            del self._items[key]
            return None
        return value

    def __len__(self) -> int:
        return len(self._items)


class CadenceMemory:
    """Per provider host, the largest heartbeat gap of each of the last ``depth`` attempts that
    saw at least two heartbeats; at most ``hosts`` hosts (least recently used dropped)."""

    def __init__(self, depth: int = 8, hosts: int = 64) -> None:
        self.depth = depth
        self.hosts = hosts
        self._gaps: OrderedDict[str, deque[float]] = OrderedDict()

    def learned(self, host: str) -> float | None:
        """The largest remembered heartbeat gap for ``host`` (``None``: nothing learned)."""
        gaps = self._gaps.get(host)
        return max(gaps) if gaps else None

    def remember(self, host: str, max_gap: float) -> None:
        gaps = self._gaps.get(host)
        if gaps is None:
            gaps = self._gaps[host] = deque(maxlen=self.depth)
        self._gaps.move_to_end(host)
        gaps.append(max_gap)
        while len(self._gaps) > self.hosts:
            self._gaps.popitem(last=False)
