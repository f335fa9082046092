"""What an attempt has released to the caller: one ledger.

Its state (:class:`~.modes.ReleaseState`: content released, the reply whole, as one state) is
moved by :meth:`Ledger.commit` and :meth:`Ledger.finish` only, each a move of
:data:`~.modes.RELEASES` (``tests/test_engine.py`` reads every module's syntax tree for another
write). Beside it: how the reply was known whole (``completion``), the count of bytes released
(exact) and their head, kept by reference up to ``Policy.max_prefix_bytes`` (the ``prefix`` a
truncation carries; the steady lane appends to the same list and hands its counts over through
:meth:`Ledger.steady`).
"""

from __future__ import annotations

from .. import errors as E
from ..outcome import Completion
from .modes import RELEASES, ReleaseState

__all__ = ["Ledger"]

_UNRELEASED, _WHOLE, _COMMITTED, _DONE = ReleaseState.UNRELEASED, ReleaseState.WHOLE, ReleaseState.COMMITTED, ReleaseState.DONE
#: ``commit`` and ``finish``: the release state each moves to from each (else it stays).
_ON_COMMIT = {_UNRELEASED: _COMMITTED, _WHOLE: _DONE}
_ON_FINISH = {_UNRELEASED: _WHOLE, _COMMITTED: _DONE}


class Ledger:
    """One attempt's releases (the attempt's only; see the module docstring)."""

    __slots__ = ("completion", "prefix", "release_state", "released", "room")

    def __init__(self, room: int) -> None:
        #: What was released (moved by :meth:`commit` and :meth:`finish` only).
        self.release_state = _UNRELEASED
        self.completion: Completion | None = None
        self.prefix: list[bytes] = []  # released bytes (references), up to the bound
        self.room = room  # what the prefix may still keep
        self.released = 0

    @property
    def committed(self) -> bool:
        """Content was released to the caller: a failure is a truncation."""
        return self.release_state is _COMMITTED or self.release_state is _DONE

    @property
    def done(self) -> bool:
        """The reply is whole (an end frame, the reply's stop reason released, the body's end)."""
        return self.release_state is _WHOLE or self.release_state is _DONE

    def commit(self) -> None:
        """Content goes to the caller from now on: UNRELEASED -> COMMITTED, WHOLE -> DONE."""
        self._move(_ON_COMMIT.get(self.release_state, self.release_state))

    def finish(self, completion: Completion) -> None:
        """The reply is whole (``completion`` says how that was known): UNRELEASED -> WHOLE,
        COMMITTED -> DONE."""
        self._move(_ON_FINISH.get(self.release_state, self.release_state))
        self.completion = completion

    def _move(self, state: ReleaseState) -> None:
        if state is not self.release_state:
            if state not in RELEASES[self.release_state]:  # (the maps above keep to the table: never taken)
                raise E.IllegalInput(f"(a release move to {state.value})", self.release_state.value)
            self.release_state = state

    def keep(self, data: bytes) -> None:
        """Keep the head of ``data`` (released) in the prefix while room lasts."""
        if self.room > 0 and data:
            kept = data[: self.room]
            self.prefix.append(kept)
            self.room -= len(kept)

    def count(self, nbytes: int, kept: bytes) -> None:
        """``nbytes`` more were released; ``kept`` (the same bytes decoded, when the body is
        content-encoded) goes to the prefix."""
        self.released += nbytes
        self.keep(kept)

    def steady(self, nbytes: int, room: int) -> None:
        """The steady lane's counts: ``nbytes`` released, the prefix (appended by the lane) left
        with ``room``."""
        self.released += nbytes
        self.room = room

    @property
    def retained(self) -> int:
        """The bytes the prefix keeps."""
        return sum(map(len, self.prefix))
