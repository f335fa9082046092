"""The request's states and the transition table (the engine's, in one screen).

An :class:`~.engine.Engine` is in exactly one :class:`State`. Every input method is legal only in
the states :data:`INPUTS` lists for it -- any other call raises :class:`~.errors.IllegalInput`
(h11's ``LocalProtocolError``), under ``python -O`` too -- and every change of state is one of
:data:`TRANSITIONS` (checked the same way). ``tests/test_engine.py`` walks both tables.

==========  =================================================  ==========================================
state       what it means                                      left by
==========  =================================================  ==========================================
IDLE        built, nothing sent                                ``start``: SENDING, or ENDED (an SDK retry
                                                               of a call that already ended: its error)
SENDING     an attempt's request is out; no headers yet        ``headers``: HOLDING (then on, below);
                                                               ``timed_out``/``io_error``: SLEEPING,
                                                               EXPIRING, ENDED
HOLDING     headers in; the body is read and held: the caller  the first content or a whole reply:
            has no response yet (one attempt visible)          RESPONDED; a failure: SLEEPING,
                                                               EXPIRING, ENDED
RESPONDED   the caller has the response; inputs concern its    the body's end, a failure, a close: ENDED
            body (no retry from here: content was released)
SLEEPING    a retry's backoff is running                       ``slept``: SENDING (the next attempt)
                                                               (``abandoned``, ``closed``: ENDED)
EXPIRING    a backoff cut at the wall budget's end             ``slept``: ENDED (``WallTimeout``)
ENDED       the request is over; its report is final           never. I/O reports that race a close are
                                                               answered as they came
==========  =================================================  ==========================================

``closed`` and ``abandoned`` end the request from any state but IDLE and ENDED (where they do
nothing); ``woke`` and ``notify`` act only while an attempt is live. The clocks' phases are
:mod:`.clocks`'.

An attempt's own two states (how its body is read, what it released) are :mod:`..attempt.modes`'.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Concatenate, Final, ParamSpec, Protocol, TypeVar

from ..errors import IllegalInput

__all__ = ["INPUTS", "TRANSITIONS", "IOFailure", "State", "input_method"]

P = ParamSpec("P")
T = TypeVar("T")


class State(StrEnum):
    IDLE = "idle"
    SENDING = "sending"
    HOLDING = "holding"
    RESPONDED = "responded"
    SLEEPING = "sleeping"
    EXPIRING = "expiring"
    ENDED = "ended"


_I, _S, _H, _R, _Z, _X, _E = (State.IDLE, State.SENDING, State.HOLDING, State.RESPONDED, State.SLEEPING,
                              State.EXPIRING, State.ENDED)
_ANY: Final = frozenset(State)

#: Input -> the states it is legal in.
INPUTS: Final[Mapping[str, frozenset[State]]] = {
    "start": frozenset({_I}),
    "headers": frozenset({_S}),
    "received": frozenset({_H, _R, _E}),
    "eof": frozenset({_H, _R, _E}),
    "timed_out": frozenset({_S, _H, _R, _E}),
    "io_error": frozenset({_S, _H, _R, _E}),
    "slept": frozenset({_Z, _X}),
    "closed": _ANY,
    "abandoned": _ANY,
    "woke": _ANY,
    "notify": _ANY,
}

#: State -> the states an input may leave it in (staying is always allowed).
TRANSITIONS: Final[Mapping[State, frozenset[State]]] = {
    _I: frozenset({_S, _E}),
    _S: frozenset({_H, _Z, _X, _E}),
    _H: frozenset({_R, _Z, _X, _E}),
    _R: frozenset({_E}),
    _Z: frozenset({_S, _E}),
    _X: frozenset({_E}),
    _E: frozenset(),
}


class IOFailure(StrEnum):
    """An I/O error a driver reports (``io_error``; a timeout is ``timed_out``)."""

    CONNECT = "connect"  # the server never got the request (connect error or timeout, pool timeout)
    READ = "read"  # the connection broke after the request was (perhaps partly) sent
    LOCAL = "local"  # the HTTP library refused to send the request (a header value it rejects, an unknown scheme)


class _Machine(Protocol):
    _lock: AbstractContextManager[object]
    state: State

    def _settle(self) -> None:
        """Bring what an input reads up to date, before it runs (the engine's to say what)."""


M = TypeVar("M", bound=_Machine)


def input_method(method: Callable[Concatenate[M, P], T]) -> Callable[Concatenate[M, P], T]:
    """Mark an engine's input method and guard it with :data:`INPUTS`: legal only in the states
    listed for it (else :class:`~.errors.IllegalInput`); the machine's ``_settle`` runs before
    anything else, so no method sees stale books (``tests/test_engine.py`` checks every
    public method has it); and it runs under the engine's lock (a caller may close a sync body
    from another thread while the reader's thread feeds it: one input at a time, so every ending
    still happens once)."""
    name = method.__name__
    legal = tuple(INPUTS[name])  # a few identity tests: cheaper than hashing, on every input

    @functools.wraps(method)
    def wrapper(self: M, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self._lock:
            if self.state not in legal:
                raise IllegalInput(name, self.state.value)
            self._settle()
            return method(self, *args, **kwargs)

    wrapper.__liveness_input__ = True  # type: ignore[attr-defined]  # a marker the engine's tests check
    return wrapper
