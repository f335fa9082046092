"""The steps of an attempt script. Times are provider seconds (scaled by the server)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Close", "HangBeforeHeaders", "Headers", "Raw", "Reset", "Sleep", "Stall", "Status", "Trickle"]


@dataclass(frozen=True)
class Headers:
    """Start a streaming 200 (or ``status``) response: chunked ``text/event-stream``."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "text/event-stream"


@dataclass(frozen=True)
class Status:
    """A complete non-streaming response (an error status, or a JSON body)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"


@dataclass(frozen=True)
class Raw:
    """Bytes sent as one chunk of the body."""

    data: bytes


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Trickle:
    """Send ``data`` ``size`` bytes at a time, ``every`` seconds apart."""

    data: bytes
    size: int = 1
    every: float = 0.1


@dataclass(frozen=True)
class Stall:
    """Send nothing more until the client goes away (a dead provider behind a live socket)."""


@dataclass(frozen=True)
class HangBeforeHeaders:
    """Accept the request and never answer (stalled open)."""


@dataclass(frozen=True)
class Reset:
    """Abort the connection with a TCP reset."""


@dataclass(frozen=True)
class Close:
    """End the body cleanly (terminating chunk). Implicit at the end of a script."""

    keep_alive: bool = True
    extra: dict[str, str] = field(default_factory=dict)
