"""The bulk path: SSE scanning and head classification of whole reads, in one call per read.

A read that carries many events (a fast model, TCP coalescing, a buffering proxy, a client
slower than its server) is scanned for frame boundaries and each frame classified by its head --
the profile's :attr:`~.providers.ProviderProfile.fast` prefixes -- without building a frame
object or decoding JSON; only a frame no prefix matches (the fact-bearing ones: ``message_start``,
``message_delta``, errors) goes to the profile's Python classifier. :class:`PyScanner` here is the
reference implementation; ``_bulk.c`` is the same class in C (``NATIVE`` says which is in use),
kept equal to this one by ``tests/test_bulk.py``. ``OTEL_LIVENESS_PURE=1`` selects the reference
(and the reference steady lane) whatever is built.

The framing is :mod:`.sse`'s, the one Python reference: :class:`PyScanner` scans through an
:class:`~.sse.SSEScanner` and splits head comment lines with its helpers
(:func:`~.sse.comment_frames`, :func:`~.sse.without_head_comments`), adding only classification,
the hold and what it hands the journal. The scanner keeps the :class:`~.sse.SSEScanner`
guarantees (it *is* one, plus classification):
every split of the same bytes into reads yields the same frames; LF, CR and CRLF line ends; the
UTF-8 BOM at the stream start; comment lines at the head of a block are heartbeat frames the
moment their line ends; a frame larger than ``max_frame_bytes`` raises
:class:`~.errors.FrameTooLarge`, measured as :func:`~.sse.frame_size` says (so whether it raises
does not depend on the chunking either).

The fast table is keyed as a dict is: a block's first ``prefix`` bytes, or the whole block when it
is shorter (never the blank line that ends it); the first of duplicate keys wins. The classifier
is called during :meth:`~PyScanner.feed` and :meth:`~PyScanner.close`: it may not call back into
the scanner that called it (nor may another thread meanwhile) -- that raises ``RuntimeError``
rather than corrupt the read in progress. The C class also raises ``RuntimeError`` for any call on
an object whose ``__init__`` never ran.

Two records ride along, so that a stream keeps what a truncation needs rather than the reply:

* the **journal** (Anthropic wires, ``journal_max >= 0``): the content events, compactly -- the
  scanner says which blocks are content (semantic or preamble) and which is an error; the
  records, their writer (:class:`~.journal.Journal`; in C, ``_journal.h``) and their reader
  (:func:`~.journal.replay_journal`) are :mod:`.journal`'s. It stops at the first error frame and
  is *clipped* (stops growing) past ``journal_max`` bytes. :meth:`retract` forgets what the last
  read added (a read that was not released after all).
* the **hold** (a list, while the attempt holds before content): each block that is not a
  heartbeat (without comment lines at its head), with its blank line -- what the engine replays
  instead of held heartbeats.

:meth:`admit` is the steady lane's entry: it consumes a read only if every frame the read
completes has a semantic fast prefix -- or, with :attr:`~PyScanner.beating` set (by an attempt,
which counts what it admits), a semantic or a heartbeat one (a ping inside a run of deltas, or a
read of pings alone); a read that completes none (part of a frame: raw progress) is consumed
too. Otherwise it changes nothing. :attr:`~PyScanner.beats` and :attr:`~PyScanner.trailing`
say how many heartbeats the read held, and how many after its last semantic frame (all of them in
a read of heartbeats alone: the lane tells such a read by ``beats == frames``, and its semantic
clock does not move on it); the lane records them for the attempt, which counts and announces
them as the general path would.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import FrameTooLarge
from .journal import JOURNAL_CLIPPED, JOURNAL_OPEN, JOURNAL_STOPPED, Journal, canonical_delta
from .sse import SSEScanner, comment_frames, whole_frame, without_head_comments

__all__ = ["JOURNAL_CLIPPED", "JOURNAL_OPEN", "JOURNAL_STOPPED", "NATIVE", "PURE", "PyScanner", "Scanner",
           "canonical_delta"]

#: ``OTEL_LIVENESS_PURE=1``: use the pure-Python bulk scanner and steady lane even where the C
#: ones are built (what an install without a compiler runs; ``make test-pure``).
PURE = os.environ.get("OTEL_LIVENESS_PURE", "").strip().lower() in ("1", "true", "yes", "on")

class PyScanner:
    """The bulk scanner (reference implementation; ``_bulk.Scanner`` is the same in C).

    ``fast`` is the profile's fast table as ``(prefix, kind)`` pairs (the first match wins),
    ``slow(block)`` the kinds of a block no prefix matches, ``comment`` the kind of a comment
    line, ``roles`` the ``(heartbeat, preamble, semantic, error)`` kinds, ``journal_max`` the
    journal's bound (``-1``: no journal), ``prefix`` how many leading bytes the fast table keys.
    """

    __slots__ = ("_busy", "_colon_keys", "_comment", "_cut", "_fast", "_journal", "_prefix", "_roles", "_scanner",
                 "_slow", "beating", "beats", "hold", "trailing")

    def __init__(
        self,
        max_frame_bytes: int,
        fast: Iterable[tuple[bytes, Any]],
        slow: Callable[[bytes], list[Any]],
        comment: Any,
        roles: tuple[Any, Any, Any, Any],
        journal_max: int = -1,
        prefix: int = 27,
    ) -> None:
        if getattr(self, "_busy", False):
            _refuse()
        self._scanner = SSEScanner(max_frame_bytes)
        table: dict[bytes, Any] = {}
        for key, kind in fast:
            table.setdefault(key, kind)
        self._fast = table
        self._slow = slow
        self._comment = comment
        self._roles = roles
        self._prefix = prefix
        self._cut = operator.itemgetter(slice(0, prefix))
        self._colon_keys = any(key[:1] == b":" for key in table)  # a fast block could start with a comment
        self._journal = Journal(journal_max)
        self.hold: list[bytes] | None = None
        self.beating = False  # admit() takes heartbeat frames among semantic ones (its owner counts them)
        self.beats = 0  # heartbeat frames of the last admitted read
        self.trailing = 0  # ... of them, after its last semantic frame
        self._busy = False  # the classifier is running: it may not feed this scanner (nor may another thread)

    # -- the SSEScanner view ------------------------------------------------------------------

    @property
    def journal_max(self) -> int:
        return self._journal.limit

    @property
    def journal_state(self) -> int:
        return self._journal.state

    @property
    def max_frame_bytes(self) -> int:
        return self._scanner.max_frame_bytes

    @property
    def idle(self) -> bool:
        return self._scanner.idle

    @property
    def buffered(self) -> int:
        return self._scanner.buffered

    @property
    def discarded(self) -> int:
        return self._scanner.discarded

    def feed_blocks(self, chunk: bytes) -> list[bytes]:
        if self._busy:
            _refuse()
        return self._scanner.feed_blocks(bytes(chunk))

    def close_blocks(self, *, complete_lines: bool = False) -> list[bytes]:
        if self._busy:
            _refuse()
        return self._scanner.close_blocks(complete_lines=complete_lines)

    # -- kinds --------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[Any]:
        """Consume ``chunk``; the kinds of the frames it completed, in order."""
        if self._busy:
            _refuse()
        self._journal.mark()
        return self._classify(self._scanner.feed_blocks(bytes(chunk)))

    def close(self, *, complete_lines: bool = False) -> list[Any]:
        """End of stream (see :meth:`~.sse.SSEScanner.close_blocks`)."""
        if self._busy:
            _refuse()
        self._journal.mark()
        return self._classify(self._scanner.close_blocks(complete_lines=complete_lines))

    def admit(self, chunk: Any) -> int:
        """The steady lane's read: consumed (the number of frames) only if every frame it completes
        has a semantic fast prefix -- or, when :attr:`beating`, a semantic or a heartbeat one; a
        read that completes none (part of a frame: raw progress) is consumed too -- otherwise
        ``-1``, nothing changed. :attr:`beats` is then the heartbeat frames of the read, and
        :attr:`trailing` those after its last semantic frame (all of them when it has none)."""
        if self._busy:
            _refuse()
        scanner = self._scanner
        if type(chunk) is not bytes or not chunk or not scanner.steady or 13 in chunk:
            return -1
        semantic = self._roles[2]
        fast = self._fast
        prefix = self._prefix
        journal = self._journal
        head = journal.run_head
        if (head and scanner.idle and self.hold is None and journal.state == JOURNAL_OPEN
                and chunk.startswith(head) and chunk.endswith(b'"}}\n\n') and len(chunk) <= scanner.max_frame_bytes
                and fast.get(chunk[:prefix]) is semantic):
            # One more delta of the open run, alone in its read (the steady lane's usual read): its
            # body has no quote, backslash or LF, so the read is exactly one frame.
            body = chunk[len(head) : -5]
            if len(chunk) >= len(head) + 5 and b'"' not in body and b"\\" not in body and b"\n" not in body:
                journal.mark()
                journal.extend_run(body)
                self.beats = self.trailing = 0
                return 1
        if (scanner.idle and chunk[0] != 10 and whole_frame(chunk, scanner.max_frame_bytes)
                and fast.get(chunk[:prefix] if len(chunk) - 2 >= prefix else chunk[:-2]) is semantic):
            # (the block's head: a block shorter than the prefix is its own, without the blank line;
            # a read that starts with a blank line is not the block it looks like)
            blocks = [chunk[:-2]]  # an idle scanner stays idle: no state to change
        else:
            saved = scanner.snapshot()
            try:
                blocks = scanner.feed_blocks(chunk)
            except FrameTooLarge:
                scanner.restore(saved)
                return -1
            heartbeat = self._roles[0] if self.beating else semantic
            kinds = [fast.get(block[:prefix]) for block in blocks]
            if any(kind is not semantic and kind is not heartbeat for kind in kinds):
                scanner.restore(saved)
                return -1
            journal.mark()
            self._classify(blocks)  # semantic and heartbeat by their heads: the journal takes the content
            self.beats = beats = kinds.count(heartbeat) if heartbeat is not semantic else 0
            if beats:
                last = len(kinds) - 1
                while last >= 0 and kinds[last] is not semantic:
                    last -= 1
                self.trailing = len(kinds) - 1 - last
            else:
                self.trailing = 0
            return len(blocks)
        journal.mark()
        self._classify(blocks)  # one block, semantic by its head: the journal (and the hold) take it
        self.beats = self.trailing = 0
        return len(blocks)

    def _classify(self, blocks: list[bytes]) -> list[Any]:
        if not blocks:
            return []
        kinds = list(map(self._fast.get, map(self._cut, blocks)))  # a C-level loop: no Python frame per block
        heartbeat, preamble, semantic, error = self._roles
        journal = self._journal
        journaling = journal.writing
        keeping = self.hold is not None
        if None not in kinds and not keeping and error not in kinds and not self._colon_keys:
            # every block by its head, none a comment (the common case): the content in one batch
            if journaling:
                journal.record([b for b, k in zip(blocks, kinds, strict=True) if k is semantic or k is preamble])
            return kinds
        out: list[Any] = []
        content: list[bytes] = []  # blocks for the journal, in order
        for block, kind in zip(blocks, kinds, strict=True):
            if kind is not None:
                block_kinds: Sequence[Any] = (kind,)
                out.append(kind)
            elif lines := comment_frames(block):
                block_kinds = [self._comment] * lines
                out += block_kinds
            else:
                self._busy = True
                try:
                    block_kinds = list(self._slow(block))
                finally:
                    self._busy = False
                out += block_kinds
            if not (journaling or keeping) or (not keeping and heartbeat in block_kinds and len(block_kinds) == 1):
                continue
            # comment lines at the head of a block are heartbeats of their own: neither keeps them
            block = without_head_comments(block)
            if not block:
                continue
            if journaling:
                if error in block_kinds:
                    journal.record(content)
                    content = []
                    journal.stop()
                    journaling = False
                elif semantic in block_kinds or preamble in block_kinds:
                    content.append(block)
            if keeping and len(block_kinds) != block_kinds.count(heartbeat):
                self.hold.append(block + b"\n\n")  # type: ignore[union-attr]
        if content:
            journal.record(content)
        return out

    # -- what a truncation and the hold need --------------------------------------------------

    def pending(self) -> bytes:
        """The block in progress as bytes to replay (a CR held back at a read's end included)."""
        return self._scanner.in_progress()

    def journal(self) -> bytes:
        return self._journal.contents()

    @property
    def journal_size(self) -> int:
        return self._journal.size

    def retract(self) -> None:
        """The last read was not released after all: forget what it added to the journal."""
        if self._busy:
            _refuse()
        self._journal.retract()

    @property
    def retained(self) -> int:
        """Bytes this scanner holds on to (the block in progress and the journal)."""
        return self._scanner.held + self._journal.size


def _refuse() -> None:
    raise RuntimeError("Scanner is busy: a call on it is in progress (a classifier may not feed the scanner it "
                       "classifies for)")


Scanner: type[PyScanner]
NATIVE = False
if PURE:
    Scanner = PyScanner
else:
    try:
        from ._bulk import Scanner as _NativeScanner

        Scanner = _NativeScanner  # type: ignore[assignment]  # the same interface (_bulk.pyi), in C
        NATIVE = True
    except ImportError:  # no compiler at install time: the reference implementation
        Scanner = PyScanner
