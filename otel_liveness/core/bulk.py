"""The bulk path: SSE scanning and head classification of whole reads, in one call per read.

A read that carries many events (a fast model, TCP coalescing, a buffering proxy, a client
slower than its server) is scanned for frame boundaries and each frame classified by its head --
the profile's :attr:`~.providers.ProviderProfile.fast` prefixes -- without building a frame
object or decoding JSON; only a frame no prefix matches (the fact-bearing ones: ``message_start``,
``message_delta``, errors) goes to the profile's Python classifier. :class:`PyScanner` here is the
reference implementation; ``_bulk.c`` is the same class in C (``NATIVE`` says which is in use),
kept equal to this one by ``tests/test_bulk.py``. ``OTEL_LIVENESS_PURE=1`` selects the reference
(and the reference steady lane) whatever is built.

The scanner keeps the :class:`~.sse.SSEScanner` guarantees (it *is* one, plus classification):
every split of the same bytes into reads yields the same frames; LF, CR and CRLF line ends; the
UTF-8 BOM at the stream start; comment lines at the head of a block are heartbeat frames the
moment their line ends; a line or frame longer than ``max_frame_bytes`` raises
:class:`~.errors.FrameTooLarge`.

Two records ride along, so that a stream keeps what a truncation needs rather than the reply:

* the **journal** (Anthropic wires, ``journal_max >= 0``): the content events, compactly.
  ``content_block_delta`` frames of the API's canonical shape (``{"type":"content_block_delta",
  "index":N,"delta":{"type":"text_delta","text":"..."}}`` and the thinking, signature and
  input-JSON variants) are recorded as *runs*: consecutive deltas of one block and field share a
  record ``code:1 index:4 length:4`` followed by each delta's JSON string body as it came on the
  wire, after its varint length -- a byte or two a delta beyond its text. Every other content or
  preamble frame's block is recorded as ``R length:4 block`` (without comment lines at its
  head). Nothing is decoded here: :func:`~.anthropic.replay_journal` does that when a truncation
  is raised. It stops at the first error frame and is *clipped* (stops growing) past
  ``journal_max`` bytes. :meth:`retract` forgets what the last read added (a read that was not
  released after all).
* the **hold** (a list, while the attempt holds before content): each block that is not a
  heartbeat (without comment lines at its head), with its blank line -- what the engine replays
  instead of held heartbeats.

:meth:`admit` is the steady lane's entry: it consumes a read only if every frame the read
completes (at least one) has a semantic fast prefix, and otherwise changes nothing.
"""

from __future__ import annotations

import operator
import os
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .errors import FrameTooLarge
from .sse import SSEScanner, whole_frame

__all__ = ["JOURNAL_CLIPPED", "JOURNAL_OPEN", "JOURNAL_STOPPED", "NATIVE", "PURE", "PyScanner", "Scanner",
           "canonical_delta"]

JOURNAL_OPEN = 0
JOURNAL_CLIPPED = 1
JOURNAL_STOPPED = 2

#: ``OTEL_LIVENESS_PURE=1``: use the pure-Python bulk scanner and steady lane even where the C
#: ones are built (what an install without a compiler runs; ``make test-pure``).
PURE = os.environ.get("OTEL_LIVENESS_PURE", "").strip().lower() in ("1", "true", "yes", "on")

_DELTA_START = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_DELTA_MID = b',"delta":{"type":"'
_DELTA_TYPES = (
    (b'text_delta","text":"', b"t"),
    (b'thinking_delta","thinking":"', b"k"),
    (b'signature_delta","signature":"', b"s"),
    (b'input_json_delta","partial_json":"', b"j"),
)
#: A JSON string body as the canonical shape needs it: no unescaped quote, no LF, every backslash
#: followed by a byte.
_BODY = re.compile(rb'(?:[^"\\\n]|\\[^\n])*')


def canonical_delta(block: bytes) -> tuple[bytes, int, bytes] | None:
    """``(code, index, body)`` of a ``content_block_delta`` block of the API's canonical shape
    (``event: content_block_delta`` + ``data: {"type":"content_block_delta","index":N,"delta":
    {"type":"text_delta","text":"..."}}``, or the thinking, signature or input-JSON variant; N
    without leading zeros, at most 9 digits), else ``None``. ``body`` is the string as on the wire."""
    if not block.startswith(_DELTA_START):
        return None
    start = len(_DELTA_START)
    comma = block.find(b",", start, start + 10)
    digits = block[start:comma]
    if comma < 0 or not digits.isdigit() or (digits[0] == 48 and len(digits) > 1):
        return None
    if not block.startswith(_DELTA_MID, comma):
        return None
    at = comma + len(_DELTA_MID)
    code = b""
    for prefix, field_code in _DELTA_TYPES:
        if block.startswith(prefix, at):
            at += len(prefix)
            code = field_code
            break
    if not code:
        return None
    if len(block) - 3 < at or not block.endswith(b'"}}'):
        return None
    body = block[at:-3]
    if (b'"' in body or b"\\" in body or b"\n" in body) and _BODY.fullmatch(body) is None:
        return None
    return code, int(digits), body


_U32 = struct.Struct("<I")
_DELTA_HEAD = struct.Struct("<cII")


def _varint(n: int) -> bytes:
    """LEB128: 7 bits a byte, low first, the high bit set on all but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class PyScanner:
    """The bulk scanner (reference implementation; ``_bulk.Scanner`` is the same in C).

    ``fast`` is the profile's fast table as ``(prefix, kind)`` pairs (the first match wins),
    ``slow(block)`` the kinds of a block no prefix matches, ``comment`` the kind of a comment
    line, ``roles`` the ``(heartbeat, preamble, semantic, error)`` kinds, ``journal_max`` the
    journal's bound (``-1``: no journal), ``prefix`` how many leading bytes the fast table keys.
    """

    __slots__ = ("_comment", "_cut", "_fast", "_journal", "_mark", "_prefix", "_roles", "_run", "_scanner", "_slow",
                 "hold", "journal_max", "journal_state")

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
        self.journal_max = journal_max
        self.journal_state = JOURNAL_OPEN
        self._journal = bytearray()
        self._run = -1  # offset of the journal's last record if it is a run
        self._mark = (0, JOURNAL_OPEN, -1, 0)
        self.hold: list[bytes] | None = None

    # -- the SSEScanner view ------------------------------------------------------------------

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
        return self._scanner.feed_blocks(bytes(chunk))

    def close_blocks(self, *, complete_lines: bool = False) -> list[bytes]:
        return self._scanner.close_blocks(complete_lines=complete_lines)

    # -- kinds --------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[Any]:
        """Consume ``chunk``; the kinds of the frames it completed, in order."""
        self._set_mark()
        return self._classify(self._scanner.feed_blocks(bytes(chunk)))

    def close(self, *, complete_lines: bool = False) -> list[Any]:
        """End of stream (see :meth:`~.sse.SSEScanner.close_blocks`)."""
        self._set_mark()
        return self._classify(self._scanner.close_blocks(complete_lines=complete_lines))

    def admit(self, chunk: Any) -> int:
        """The steady lane's read: consumed (the number of frames) only if it completes at least
        one frame and all of them have a semantic fast prefix; otherwise ``-1``, nothing changed."""
        scanner = self._scanner
        if type(chunk) is not bytes or not chunk or not scanner._started or scanner._pending_cr or 13 in chunk:
            return -1
        semantic = self._roles[2]
        fast = self._fast
        prefix = self._prefix
        if not scanner._parts and whole_frame(chunk, scanner.max_frame_bytes) and fast.get(chunk[:prefix]) is semantic:
            blocks = [chunk[:-2]]  # an idle scanner stays idle: no state to change
        else:
            saved = (list(scanner._parts), scanner._pending)
            try:
                blocks = scanner.feed_blocks(chunk)
            except FrameTooLarge:
                blocks = []
            if not blocks or any(fast.get(block[:prefix]) is not semantic for block in blocks):
                scanner._parts, scanner._pending = saved
                return -1
        self._set_mark()
        if self.hold is not None or (self.journal_max >= 0 and self.journal_state == JOURNAL_OPEN):
            kinds = (semantic,)
            for block in blocks:
                self._account(block, kinds)
        return len(blocks)

    def _classify(self, blocks: list[bytes]) -> list[Any]:
        if not blocks:
            return []
        fast = self._fast
        kinds = list(map(fast.get, map(self._cut, blocks)))  # a C-level loop: no Python frame per block
        heartbeat = self._roles[0]
        if None not in kinds:  # every block by its head (the common case)
            keeping = self.hold is not None
            if keeping or (self.journal_max >= 0 and self.journal_state == JOURNAL_OPEN):
                for block, kind in zip(blocks, kinds, strict=True):
                    if keeping or kind is not heartbeat:
                        self._account(block, (kind,))
            return kinds
        out: list[Any] = []
        for block, kind in zip(blocks, kinds, strict=True):
            if kind is not None:
                out.append(kind)
                if kind is heartbeat and self.hold is None:
                    continue
                self._account(block, (kind,))
            elif block[:1] == b":" and all(line[:1] == b":" for line in block.split(b"\n")):
                kinds = [self._comment] * (block.count(b"\n") + 1)
                out += kinds
                if self._comment is not heartbeat:
                    self._account(block, kinds)
            else:
                kinds = list(self._slow(block))
                out += kinds
                self._account(block, kinds)
        return out

    def _account(self, block: bytes, kinds: Sequence[Any]) -> None:
        """What a classified block means for the journal and the hold (comment lines at its head
        are heartbeats of their own: neither keeps them)."""
        while block[:1] == b":":
            nl = block.find(b"\n")
            if nl < 0:
                return
            block = block[nl + 1 :]
        heartbeat, preamble, semantic, error = self._roles  # FrameKind members: `in` is identity
        if self.journal_max >= 0 and self.journal_state == JOURNAL_OPEN:
            if error in kinds:
                self.journal_state = JOURNAL_STOPPED
            elif semantic in kinds or preamble in kinds:
                self._journal_block(block)
        if self.hold is not None and (len(kinds) != kinds.count(heartbeat)):
            self.hold.append(block + b"\n\n")

    def _journal_block(self, block: bytes) -> None:
        journal = self._journal
        delta = canonical_delta(block)
        if delta is None:
            self._run = -1
            self._put(b"R" + _U32.pack(len(block)) + block)
            return
        code, index, body = delta
        fragment = _varint(len(body)) + body
        run = self._run
        if run >= 0 and journal[run : run + 1] == code and _U32.unpack_from(journal, run + 1)[0] == index:
            if self._put(fragment):
                (size,) = _U32.unpack_from(journal, run + 5)
                _U32.pack_into(journal, run + 5, size + len(fragment))
            return
        at = len(journal)
        if self._put(_DELTA_HEAD.pack(code, index, len(fragment)) + fragment):
            self._run = at

    def _put(self, record: bytes) -> bool:
        if len(self._journal) + len(record) > self.journal_max:
            self.journal_state = JOURNAL_CLIPPED
            return False
        self._journal += record
        return True

    def _set_mark(self) -> None:
        run = self._run
        self._mark = (len(self._journal), self.journal_state, run,
                      _U32.unpack_from(self._journal, run + 5)[0] if run >= 0 else 0)

    # -- what a truncation and the hold need --------------------------------------------------

    def pending(self) -> bytes:
        """The block in progress as bytes to replay (a CR held back at a read's end included)."""
        scanner = self._scanner
        return b"".join(scanner._parts) + (b"\r" if scanner._pending_cr else b"")

    def journal(self) -> bytes:
        return bytes(self._journal)

    @property
    def journal_size(self) -> int:
        return len(self._journal)

    def retract(self) -> None:
        """The last read was not released after all: forget what it added to the journal."""
        size, state, run, run_size = self._mark
        del self._journal[size:]
        self.journal_state = state
        self._run = run
        if run >= 0:
            _U32.pack_into(self._journal, run + 5, run_size)

    @property
    def retained(self) -> int:
        """Bytes this scanner holds on to (the block in progress and the journal)."""
        return self._scanner.buffered + len(self._journal)


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
