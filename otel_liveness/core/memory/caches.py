"""What a transport remembers across requests (pure: the caller passes the time and the lock).

- :class:`ExhaustedCache`: requests whose retry budget this transport spent, so that an SDK retry
  loop above it (``max_retries`` > 0) gets the same typed error at once instead of new provider
  attempts. Keyed by :func:`request_key` -- a digest of method, URL, body and the caller's auth
  identity (the SDKs re-send identical bytes; two tenants of one process never share an entry) --
  and consulted only for requests marked as SDK retries (``x-stainless-retry-count`` > 0). A
  *fresh* call (retry count 0 or absent) ends what the cache remembers for its key
  (:meth:`ExhaustedCache.discard`), so the SDK's retry of a new call reaches the provider rather
  than an older call's error.
- :class:`CadenceMemory`: the largest heartbeat-to-heartbeat gap seen on recent attempts to each
  provider host, for the learned raw bound (``Policy.raw_idle_adaptive``). It can only make that
  bound larger (safer), never smaller than what the current attempt shows.

Both are shared by every request (and every thread) of a transport. Each operation is one
critical section under the lock the owner passes (the transports pass a ``threading.Lock``; the
core imports no threading): a check and the mutation it leads to never interleave with another
thread's, whether or not a GIL serialises bytecodes. One read is made before the lock: an empty
exhausted-call cache answers ``get`` and ``discard`` at once, without hashing the key (most
requests' keys are then never computed) -- as if the call had come just before any ``put`` running
at that moment, an order the lock would also have allowed. The default (no lock) is for
single-threaded use, e.g. the engine's tests.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict, deque
from collections.abc import Hashable, Mapping
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

__all__ = ["AUTH_HEADERS", "CadenceMemory", "ExhaustedCache", "RequestKey", "auth_identity", "request_key"]

T = TypeVar("T")

#: Request headers whose value identifies the caller (tenant): part of a request's identity, only
#: ever as a digest. (AWS SigV4 ``authorization`` values are reduced to their access key id: the
#: signature changes on every request.)
AUTH_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization",
                "x-amz-security-token", "cookie")

_SIGV4 = "AWS4-HMAC-SHA256"


def auth_identity(headers: Mapping[str, str]) -> bytes:
    """A digest of the caller's credentials in ``headers`` (keys lower-case): equal for the same
    credentials, different for different ones, never the secret itself (``b""``: none)."""
    digest = hashlib.blake2b(digest_size=16, person=b"liveness-auth")
    found = False
    for name in AUTH_HEADERS:
        value = headers.get(name)
        if value is None:
            continue
        if name == "authorization" and value.startswith(_SIGV4):
            # "AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request, SignedHeaders=..., Signature=..."
            credential = value.partition("Credential=")[2].partition("/")[0]
            value = f"{_SIGV4} {credential}"
        elif name == "x-amz-security-token":
            continue  # rotates with the session; the access key id above names the caller
        found = True
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(value.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
    return digest.digest() if found else b""


def request_key(method: str, url: str, body: bytes, identity: bytes = b"") -> str:
    """The identity of a request for :class:`ExhaustedCache`: method, URL, body and the caller's
    auth identity (:func:`auth_identity`)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(method.encode())
    digest.update(b"\0")
    digest.update(url.encode())
    digest.update(b"\0")
    digest.update(identity)
    digest.update(b"\0")
    digest.update(body)
    return digest.hexdigest()


class RequestKey:
    """A request's :func:`request_key`, its digest computed when it is first needed (hashed or
    compared).

    Every request has one, but most never need it: a fresh call only asks the cache to forget its
    key, which an empty cache -- the common case -- answers without hashing it. Computing it
    eagerly meant a pass of blake2b over every request body (about 5 ms for the 4 MB body of a
    1M-token prompt). The caller's auth identity is taken at once (:func:`auth_identity`: a digest
    of a few short header values), so no credential is kept; the body is kept (by reference: the
    request holds it anyway) until the digest is computed."""

    __slots__ = ("_body", "_digest", "_head")

    def __init__(self, method: str, url: str, body: bytes, identity: bytes = b"") -> None:
        self._head: tuple[str, str, bytes] | None = (method, url, identity)
        self._body: bytes | None = body
        self._digest: str | None = None

    @property
    def digest(self) -> str:
        digest = self._digest
        if digest is None:
            head, body = self._head, self._body
            if head is None or body is None:  # another thread computed it meanwhile (it sets the digest first)
                digest = self._digest
                assert digest is not None
                return digest
            method, url, identity = head
            digest = self._digest = request_key(method, url, body, identity)
            self._head = self._body = None
        return digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestKey):
            return self.digest == other.digest
        return NotImplemented

    def __repr__(self) -> str:
        return f"RequestKey({self._digest or '<not computed>'})"


class ExhaustedCache(Generic[T]):
    """A bounded, expiring map from request key to the error its exhausted request ended with.
    Every method is atomic under ``lock`` (see the module docstring)."""

    def __init__(self, size: int = 256, ttl: float = 300.0, *, lock: AbstractContextManager[object] | None = None) -> None:
        self.size = size
        self.ttl = ttl
        self._lock: AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        self._items: OrderedDict[Hashable, tuple[float, T]] = OrderedDict()

    def put(self, key: Hashable, value: T, now: float) -> None:
        hash(key)  # (a RequestKey's digest computed before the lock, not under it)
        with self._lock:
            items = self._items
            items[key] = (now, value)
            items.move_to_end(key)
            while len(items) > self.size:
                items.popitem(last=False)

    def get(self, key: Hashable, now: float) -> T | None:
        if not self._items:  # nothing remembered: the key is not hashed
            return None
        hash(key)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            stamp, value = item
            if now - stamp > self.ttl:
                del self._items[key]
                return None
            return value

    def discard(self, key: Hashable) -> bool:
        """Forget ``key`` (a fresh call with this identity began); True if it was remembered. An
        empty cache does not hash ``key`` (a :class:`RequestKey` is then never computed); a key is
        hashed before the lock is taken, so that a long body's digest never holds up other requests.
        (An empty cache read without the lock may miss an entry another thread is putting at that
        moment; under the lock the same interleaving could order the two either way.)"""
        if not self._items:
            return False
        hash(key)
        with self._lock:
            return self._items.pop(key, None) is not None

    def began(self, key: Hashable, sdk_retry: bool, now: float) -> T | None:
        """A call with ``key`` began: an SDK retry of it gets the error its exhausted call ended
        with, when remembered; a fresh call (not an SDK retry) forgets it -- an older call's error
        is not its answer -- and gets ``None``."""
        if not sdk_retry:
            self.discard(key)
            return None
        return self.get(key, now)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class CadenceMemory:
    """Per provider host, the largest heartbeat gap of each of the last ``depth`` attempts that
    saw at least two heartbeats; at most ``hosts`` hosts (least recently used dropped). Every
    method is atomic under ``lock`` (see the module docstring)."""

    def __init__(self, depth: int = 8, hosts: int = 64, *, lock: AbstractContextManager[object] | None = None) -> None:
        self.depth = depth
        self.hosts = hosts
        self._lock: AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        self._gaps: OrderedDict[str, deque[float]] = OrderedDict()

    def learned(self, host: str) -> float | None:
        """The largest remembered heartbeat gap for ``host`` (``None``: nothing learned)."""
        with self._lock:
            gaps = self._gaps.get(host)
            return max(gaps) if gaps else None

    def remember(self, host: str, max_gap: float) -> None:
        with self._lock:
            gaps = self._gaps.get(host)
            if gaps is None:
                gaps = self._gaps[host] = deque(maxlen=self.depth)
            self._gaps.move_to_end(host)
            gaps.append(max_gap)
            while len(self._gaps) > self.hosts:
                self._gaps.popitem(last=False)
