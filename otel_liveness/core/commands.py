"""What the engine tells a driver to do: one closed set of commands (tenacity's ``DoAttempt`` /
``DoSleep``, h11's events in the other direction).

A driver feeds :class:`~otel_liveness.core.request.engine.Engine` what happened -- headers, a chunk, the
end of the body, a timeout, an I/O error -- and executes the answer:

==============  ===================================================================================
command         the driver ...
==============  ===================================================================================
:class:`Send`   sends the caller's request again for a new attempt (``headers`` added, the socket
                read timeout set to ``read_timeout`` when it is not ``None``)
:data:`READ`    reads the next chunk of the body
``bytes``       (body phase only) releases these bytes to the caller -- possibly none -- and reads on
:class:`Release` releases ``data`` to the caller, then executes ``then``
:class:`Sleep`  closes the failed attempt's response, waits ``seconds``, then calls ``slept``
:class:`Respond` returns the response to the caller: the attempt's status and headers (``replace``
                overrides headers by name) and, as body, the released bytes ``first`` followed by
                ``then`` (read on, complete, or fail) -- or, with ``passthrough``, the inner body
                as is
:class:`Fail`   raises the typed error described (an instance of ``error`` that is also the HTTP
                library's exception for ``kind``)
:class:`Reraise` re-raises the I/O exception it was handed, as the caller would have seen it
                without the transport (shadow mode; the caller's own read timeout)
:data:`COMPLETE` the body is over; nothing more to do
==============  ===================================================================================

Everything here is immutable; ``match``/``type(...) is`` dispatch in the drivers ends in
``assert_never``-style errors, so a new command cannot be silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import LivenessError

__all__ = ["COMPLETE", "READ", "Command", "Complete", "Fail", "Read", "Release", "Reraise", "Respond", "Send", "Sleep"]


@dataclass(frozen=True, slots=True)
class Send:
    """Send a new attempt of the request."""

    read_timeout: float | None  # the socket read timeout to set; None: the caller's, untouched
    headers: Mapping[str, str] = field(default_factory=dict)  # added to this attempt's request


@dataclass(frozen=True, slots=True)
class Read:
    """Read the next chunk of the body."""


READ: Final = Read()


@dataclass(frozen=True, slots=True)
class Sleep:
    """Close the failed attempt's response, wait, then call :meth:`Engine.slept`."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Respond:
    """Return the response of the current attempt to the caller. Its body starts with ``first``
    and goes on with ``then``: :data:`READ` (read and judge the rest), :data:`COMPLETE` (nothing
    more) or a :class:`Fail` (content was released in the same read that ended the attempt)."""

    first: bytes = b""  # released bytes the body starts with
    then: Read | Complete | Fail = field(default_factory=Read)
    passthrough: bool = False  # the inner body as is (a final error response, a redirect)
    replace: tuple[tuple[str, str], ...] = ()  # headers replaced by name


@dataclass(frozen=True, slots=True)
class Fail:
    """Raise ``error(*args, **fields)``, also an instance of the HTTP library's exception for
    ``kind`` (a cause such as ``raw_silence``, ``read_error``, ``wall_budget``, ``malformed``) --
    or, when the last attempt ended in an exception of the HTTP library (``cause``), of that
    exception's class (a ``ConnectTimeout`` stays a ``ConnectTimeout``), raised ``from cause``."""

    error: type[LivenessError]
    kind: str
    args: tuple[Any, ...]  # positional arguments of ``error`` (the message, for most)
    fields: Mapping[str, Any]
    cause: BaseException | None = None  # the HTTP library's exception the last attempt ended in


@dataclass(frozen=True, slots=True)
class Reraise:
    """Re-raise ``exc``: the caller sees the I/O error as it came."""

    exc: BaseException


@dataclass(frozen=True, slots=True)
class Complete:
    """The body is over."""


COMPLETE: Final = Complete()


@dataclass(frozen=True, slots=True)
class Release:
    """Release ``data`` to the caller, then execute ``then`` (never another :class:`Release`)."""

    data: bytes
    then: Read | Complete | Fail | Reraise


Command = Send | Read | Sleep | Respond | Fail | Reraise | Complete | Release
