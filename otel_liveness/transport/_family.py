"""The two HTTP library families (httpx 0.28/0.29 and httpx2 2.x): detection, typed errors that are
also the family's own exceptions, and a default inner transport with the SDKs' TCP keep-alives."""

from __future__ import annotations

import importlib
import socket
import sys
import threading
from functools import cache, cached_property
from types import ModuleType
from typing import Any

from ..core import errors as E
from ..core.commands import Fail

__all__ = ["Family", "family_of", "installed_modules", "keepalive_socket_options"]


def keepalive_socket_options() -> list[tuple[int, int, int]]:
    """The TCP keep-alive options the anthropic/openai SDKs set on their default transport
    (a custom transport loses them unless it sets them again): probe after 60 s idle, every 60 s,
    5 probes."""
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    if hasattr(socket, "TCP_KEEPINTVL"):
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 60))
    elif sys.platform == "darwin":  # pragma: no cover - macOS
        options.append((socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPALIVE", 0x10), 60))
    if hasattr(socket, "TCP_KEEPCNT"):
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 5))
    if hasattr(socket, "TCP_KEEPIDLE"):
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 60))
    return options


# Which exception of the HTTP library each failure cause also is.
_CAUSE_BASE = {
    "raw_silence": "ReadTimeout",
    "first_byte_timeout": "ReadTimeout",
    "semantic_timeout": "ReadTimeout",
    "connect_error": "ConnectError",
    "read_error": "ReadError",
    "eof": "RemoteProtocolError",
    "error_event": "RemoteProtocolError",
    "wall_budget": "TimeoutException",
    "malformed": "DecodingError",
}


#: The httpcore each family's transports are built on.
_CORES = {"httpx": "httpcore", "httpx2": "httpcore2"}


class Family:
    """One HTTP library: ``httpx`` or ``httpx2``."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.name = module.__name__

    @cached_property
    def core(self) -> ModuleType:
        """The httpcore this family's transports are built on (httpcore for httpx, httpcore2 for httpx2)."""
        return importlib.import_module(_CORES[self.name])

    def __repr__(self) -> str:
        return f"Family({self.name})"

    def error(self, fail: Fail, request: Any = None) -> E.LivenessError:
        """The error ``fail`` describes, as an instance of its class that is also the family's
        exception for its kind (so ``except httpx.ReadTimeout`` and the like keep working) -- the
        class of the family's exception the last attempt ended in, when it did (a spent budget of
        ``ConnectTimeout`` is a ``ConnectTimeout``, of refused connections a ``ConnectError``),
        with that exception as its ``__cause__``."""
        theirs = self._public_class(fail.cause) or getattr(self.module, _CAUSE_BASE.get(fail.kind, "RemoteProtocolError"))
        exc: E.LivenessError = _combined(fail.error, theirs)(*fail.args, **fail.fields)
        if request is not None:
            exc.request = request  # type: ignore[attr-defined]  # the family exception's half has it
        if fail.cause is not None:
            exc.__cause__ = fail.cause
        return exc

    def _public_class(self, exc: BaseException | None) -> type[BaseException] | None:
        """The family's public exception class ``exc`` is an instance of (the most derived), if any."""
        if exc is None:
            return None
        module: Any = self.module
        for cls in type(exc).__mro__:
            if issubclass(cls, E.LivenessError):
                continue  # (a liveness error below us: the family class it also is)
            if getattr(module, cls.__name__, None) is cls and issubclass(cls, module.TransportError):
                found: type[BaseException] = cls
                return found
        return None


_COMBINED: dict[tuple[type, type], type[E.LivenessError]] = {}
_COMBINED_LOCK = threading.Lock()  # one class per pair, whichever thread builds it first


def _combined(ours: type[E.LivenessError], theirs: type[BaseException]) -> type[E.LivenessError]:
    """``ours`` and ``theirs`` in one class (built once per pair, under a lock: two threads never
    make two classes of one name that ``except`` and ``type() is`` would tell apart)."""
    cls = _COMBINED.get((ours, theirs))
    if cls is None:
        with _COMBINED_LOCK:
            cls = _COMBINED.get((ours, theirs))
            if cls is None:
                cls = _COMBINED[(ours, theirs)] = type(
                    ours.__name__, (ours, theirs), {"__module__": ours.__module__, "__qualname__": ours.__qualname__})
    return cls


def installed_modules() -> list[ModuleType]:
    """The HTTP library families importable here (httpx2 first), each once: after
    ``httpx2.alias_httpx()`` the name ``httpx`` is httpx2 itself, one family."""
    found: list[ModuleType] = []
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name)
            except ImportError:
                continue
        if all(module is not seen for seen in found):
            found.append(module)
    return found


@cache
def family(name: str) -> Family:
    return Family(__import__(name))


def family_of(transport: Any, asynchronous: bool | None = None) -> tuple[Family, bool]:
    """(family, is_async) of an inner transport; ``TypeError`` if it is neither family's. A
    transport that is both kinds (``MockTransport``) is sync unless ``asynchronous`` says otherwise."""
    for module in installed_modules():
        is_async = isinstance(transport, module.AsyncBaseTransport)
        is_sync = isinstance(transport, module.BaseTransport)
        if is_async and is_sync:
            return family(module.__name__), bool(asynchronous)
        if is_async or is_sync:
            if asynchronous is not None and asynchronous != is_async:
                raise TypeError(f"{type(transport).__name__} is {'async' if is_async else 'sync'}-only")
            return family(module.__name__), is_async
    raise TypeError(
        f"wrap() needs an httpx or httpx2 transport (BaseTransport or AsyncBaseTransport), got {type(transport).__name__}"
    )
