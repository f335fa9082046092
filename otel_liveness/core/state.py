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
nothing); ``woke`` and ``notify`` act only while an attempt is live. Attempt-level facts (content
released, end frame seen, an in-band error pending) are the attempt's (:mod:`.attempt`); the
clocks' phases are :mod:`.clocks`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

__all__ = ["INPUTS", "TRANSITIONS", "State"]


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
