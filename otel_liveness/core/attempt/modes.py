"""An attempt's two states and their tables: how its body is read and what it has released.

An attempt (:class:`~.attempt.Attempt`) has two states of its own, each with its table, checked
on every move the same way as the request's (:class:`~..errors.IllegalInput`); ``tests/test_engine.py`` walks them.

How its body is read, :class:`BodyMode` (:data:`BODY_MODES`):

==========  =================================================  ==========================================
mode        what it means                                      left by
==========  =================================================  ==========================================
SCANNED     framed and judged frame by frame (SSE, Amazon's    the headers: OPAQUE (another type; an
            event stream); held before content                 encoding that cannot be read), PROBING (a
                                                               2xx JSON body); a body that cannot be
                                                               judged in shadow mode: UNJUDGED
PROBING     a 2xx JSON body on a streaming request, kept until its first key tells: OPAQUE (a reply,
            its first key tells an error object from a reply   or past the probe's bytes; or whole);
                                                               UNJUDGED (shadow mode)
OPAQUE      not judged as a stream: the raw clock only,        the headers of a non-streaming request's
            released as it comes                               stream: SCANNED; UNJUDGED (shadow mode)
UNJUDGED    shadow mode: the body could not be judged; it      never
            goes on as it comes, the raw clock only
==========  =================================================  ==========================================

What it has released, :class:`ReleaseState` (:data:`RELEASES`) -- two facts, content released
(``committed``) and the reply whole (``done``), as one state:

==========  =================================================  ==========================================
release     what it means                                      left by
==========  =================================================  ==========================================
UNRELEASED  nothing released: the body is held (counted        ``commit`` (the first content, an opaque
            only, in shadow mode); a failure is retried        body's first read): COMMITTED; the end
                                                               frame or the body's end: WHOLE
WHOLE       the reply is whole and still held (an end frame    ``commit`` (released at once): DONE; or a
            before any content, an empty body); an error       retry drops it (the attempt just ends)
            frame before it still fails the attempt
COMMITTED   content released: a failure is a truncation        the end frame, the reply's stop reason
                                                               released, the body's end: DONE
DONE        the reply is whole and released                    never
==========  =================================================  ==========================================
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

__all__ = ["BODY_MODES", "RELEASES", "BodyMode", "ReleaseState"]


class BodyMode(StrEnum):
    SCANNED = "scanned"
    PROBING = "probing"
    OPAQUE = "opaque"
    UNJUDGED = "unjudged"


#: Body mode -> the modes it may move to (staying is always allowed).
BODY_MODES: Final[Mapping[BodyMode, frozenset[BodyMode]]] = {
    BodyMode.SCANNED: frozenset({BodyMode.OPAQUE, BodyMode.PROBING, BodyMode.UNJUDGED}),
    BodyMode.PROBING: frozenset({BodyMode.OPAQUE, BodyMode.UNJUDGED}),
    BodyMode.OPAQUE: frozenset({BodyMode.SCANNED, BodyMode.UNJUDGED}),
    BodyMode.UNJUDGED: frozenset(),
}


class ReleaseState(StrEnum):
    UNRELEASED = "unreleased"
    WHOLE = "whole"
    COMMITTED = "committed"
    DONE = "done"


#: Release state -> the states it may move to (staying is always allowed).
RELEASES: Final[Mapping[ReleaseState, frozenset[ReleaseState]]] = {
    ReleaseState.UNRELEASED: frozenset({ReleaseState.COMMITTED, ReleaseState.WHOLE}),
    ReleaseState.WHOLE: frozenset({ReleaseState.DONE}),
    ReleaseState.COMMITTED: frozenset({ReleaseState.DONE}),
    ReleaseState.DONE: frozenset(),
}
