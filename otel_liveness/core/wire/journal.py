"""The content journal (Anthropic wires): what a truncation needs of a released reply, kept
compactly while the stream is scanned and decoded once, when a truncation is raised. Its writer
(:class:`Journal`) and its reader (:func:`replay_journal`) live here together.

The records, in order:

* a **run** of ``content_block_delta`` frames of the API's canonical shape
  (``{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"..."}}`` and the
  thinking, signature and input-JSON variants, :func:`canonical_delta`): consecutive deltas of one
  block and field share a record ``code:1 index:4 length:4`` (``code`` one of ``t k s j``, little
  endian) followed by each delta's JSON string body as it came on the wire, after its varint
  (LEB128) length -- a byte or two a delta beyond its text;
* ``R length:4 block``: every other content or preamble frame's block (LF-normalised, without the
  comment lines at its head).

Nothing is decoded while writing. The journal stops (:data:`JOURNAL_STOPPED`) at the first error
frame and is clipped (:data:`JOURNAL_CLIPPED`: it stops growing) past its bound; :meth:`Journal.mark`
and :meth:`Journal.retract` forget what the last read added (a read that was not released after
all).

The writer is kept by the bulk scanner (:class:`~.bulk.PyScanner`, which tells it which blocks are
content and which is an error). Its C half is ``core/wire/_journal.h``, included by ``_bulk.c`` (the
``Journal`` struct the C scanner embeds, the canonical-delta parser, the record writer and the
mark a read is retracted to), writing the same bytes: ``tests/test_bulk.py`` and
``tests/test_journal.py`` keep the two equal; ``tests/test_journal.py`` also holds the round trip
(written, then replayed: the partial message the journaled bytes decode to).
"""

from __future__ import annotations

import json
import re
import struct
from typing import Any

from .anthropic import PartialMessage
from .sse import parse_block

__all__ = ["JOURNAL_CLIPPED", "JOURNAL_OPEN", "JOURNAL_STOPPED", "Journal", "canonical_delta", "replay_journal"]

JOURNAL_OPEN = 0
JOURNAL_CLIPPED = 1
JOURNAL_STOPPED = 2

#: A ``content_block_delta`` block of the API's canonical shape: index (no leading zero, at most 9
#: digits), type and field, and the JSON string body as on the wire (no unescaped quote, no LF,
#: every backslash followed by a byte). ``_journal.h`` recognises exactly these.
_DELTA = re.compile(
    rb'event: content_block_delta\ndata: \{"type":"content_block_delta","index":(0|[1-9][0-9]{0,8}),"delta":\{"type":"'
    rb'(text_delta","text|thinking_delta","thinking|signature_delta","signature|input_json_delta","partial_json)'
    rb'":"((?:[^"\\\n]|\\[^\n])*)"\}\}'
)
_CODES = {
    b'text_delta","text': b"t",
    b'thinking_delta","thinking': b"k",
    b'signature_delta","signature': b"s",
    b'input_json_delta","partial_json': b"j",
}
#: Record codes of runs -> the block field they extend (the reader's side of ``_CODES``).
_FIELDS = {ord("t"): "text", ord("k"): "thinking", ord("s"): "signature", ord("j"): "partial_json"}
_RAW = ord("R")
_LENGTH_BYTES = [bytes((n,)) for n in range(128)]  # the one-byte varints
_U32 = struct.Struct("<I")
_II = struct.Struct("<II")
_DELTA_HEAD = struct.Struct("<cII")


def canonical_delta(block: bytes) -> tuple[bytes, int, bytes] | None:
    """``(code, index, body)`` of a ``content_block_delta`` block of the API's canonical shape
    (``event: content_block_delta`` + ``data: {"type":"content_block_delta","index":N,"delta":
    {"type":"text_delta","text":"..."}}``, or the thinking, signature or input-JSON variant), else
    ``None``. ``body`` is the string as on the wire."""
    match = _DELTA.fullmatch(block)
    if match is None:
        return None
    return _CODES[match[2]], int(match[1]), match[3]


def _varint(n: int) -> bytes:
    """LEB128: 7 bits a byte, low first, the high bit set on all but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Journal:
    """The journal's writer (reference implementation; ``_journal.h`` is the same in C).

    ``limit`` is its bound in bytes (``-1``: no journal is kept). :attr:`writing` says whether a
    content block would be recorded; :attr:`run_head` is the open run's delta head (the block up
    to its string body), so that the next delta of the run is recognised by a prefix compare.
    """

    __slots__ = ("_mark", "_run", "_run_code", "_run_index", "_run_size", "data", "limit", "run_head", "state")

    def __init__(self, limit: int = -1) -> None:
        self.limit = limit
        self.state = JOURNAL_OPEN
        self.data = bytearray()
        self._run = -1  # offset of the last record if it is a run; its code, index and size:
        self._run_code = b""
        self._run_index = -1
        self._run_size = 0  # written into the record's header when the journal is looked at
        self.run_head = b""
        self._mark: tuple[int, int, int, bytes, int, int, bytes] = (0, JOURNAL_OPEN, -1, b"", -1, 0, b"")

    @property
    def writing(self) -> bool:
        """Kept (``limit >= 0``) and neither stopped nor clipped."""
        return self.limit >= 0 and self.state == JOURNAL_OPEN

    def stop(self) -> None:
        """An error frame: nothing after it is content."""
        if self.state == JOURNAL_OPEN:
            self.state = JOURNAL_STOPPED

    def extend_run(self, body: bytes) -> None:
        """One more delta of the open run, its string body known to hold no quote, backslash or LF
        (the block is :attr:`run_head` + ``body`` + ``"}}``)."""
        n = len(body)
        fragment = (_LENGTH_BYTES[n] if n < 128 else _varint(n)) + body
        if len(self.data) + len(fragment) > self.limit:
            self.state = JOURNAL_CLIPPED
        else:
            self.data += fragment
            self._run_size += len(fragment)

    def record(self, blocks: list[bytes]) -> None:
        """Record content blocks (LF-normalised, without head comment lines), if :attr:`writing`: canonical
        deltas into runs, the rest as blocks."""
        if self.limit < 0 or self.state != JOURNAL_OPEN:
            return
        journal = self.data
        limit = self.limit
        for block in blocks:
            # The next delta of the open run has the run's head (up to the string body) and a body
            # without quote, backslash or LF: what the pattern below would match, found cheaply.
            head = self.run_head
            if head and block.startswith(head) and block.endswith(b'"}}') and len(block) >= len(head) + 3:
                body = block[len(head) : -3]
                if b'"' not in body and b"\\" not in body and b"\n" not in body:
                    n = len(body)
                    fragment = (_LENGTH_BYTES[n] if n < 128 else _varint(n)) + body
                    if len(journal) + len(fragment) > limit:
                        self.state = JOURNAL_CLIPPED
                        return
                    journal += fragment
                    self._run_size += len(fragment)
                    continue
            match = _DELTA.fullmatch(block)
            if match is None:
                self._sync_run()
                self._run = -1
                self.run_head = b""
                record = b"R" + _U32.pack(len(block)) + block
            else:
                body = match[3]
                n = len(body)
                fragment = (_LENGTH_BYTES[n] if n < 128 else _varint(n)) + body
                code, index = _CODES[match[2]], int(match[1])
                if self._run >= 0 and code == self._run_code and index == self._run_index:
                    if len(journal) + len(fragment) > limit:
                        self.state = JOURNAL_CLIPPED
                        return
                    journal += fragment
                    self._run_size += len(fragment)
                    continue
                record = _DELTA_HEAD.pack(code, index, len(fragment)) + fragment
                if len(journal) + len(record) > limit:
                    self.state = JOURNAL_CLIPPED  # the run open before stays the last record
                    return
                self._sync_run()
                self._run, self._run_code, self._run_index, self._run_size = len(journal), code, index, len(fragment)
                self.run_head = block[: match.start(3)]
                journal += record
                continue
            if len(journal) + len(record) > limit:
                self.state = JOURNAL_CLIPPED
                return
            journal += record

    def _sync_run(self) -> None:
        """Write the open run's size into its record's header."""
        if self._run >= 0:
            _U32.pack_into(self.data, self._run + 5, self._run_size)

    def mark(self) -> None:
        """A read begins: what :meth:`retract` goes back to."""
        self._mark = (len(self.data), self.state, self._run, self._run_code, self._run_index, self._run_size,
                      self.run_head)

    def retract(self) -> None:
        """The last read was not released after all: forget what it added."""
        size, self.state, self._run, self._run_code, self._run_index, self._run_size, self.run_head = self._mark
        del self.data[size:]

    def contents(self) -> bytes:
        """The journal, for :func:`replay_journal`."""
        self._sync_run()
        return bytes(self.data)

    @property
    def size(self) -> int:
        return len(self.data)


def replay_journal(journal: bytes, *, clipped: bool = False) -> dict[str, Any]:
    """The partial message from a journal (see :func:`~.anthropic.decode_partial` for its shape):
    the same as :func:`~.anthropic.decode_partial` of the bytes the journal was kept from."""
    partial = PartialMessage()
    frames: list[Any] = []
    pos = 0
    end = len(journal)
    view = memoryview(journal)
    while pos < end:
        code = journal[pos]
        if code == _RAW:
            (n,) = _U32.unpack_from(journal, pos + 1)
            block = bytes(view[pos + 5 : pos + 5 + n])
            pos += 5 + n
            frames.clear()
            parse_block(block, frames)
            for frame in frames:
                partial.frame(frame.event, frame.data)
            continue
        index, n = _II.unpack_from(journal, pos + 1)
        field = _FIELDS[code]
        at, pos = pos + 9, pos + 9 + n
        while at < pos:  # a run: each delta's string body after its varint length
            size = shift = 0
            while True:
                byte = journal[at]
                at += 1
                size |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            body = bytes(view[at : at + size])
            at += size
            try:
                text = json.loads('"' + body.decode("utf-8", "surrogatepass") + '"')
            except ValueError:
                continue  # as decode_partial skips a frame whose JSON does not decode
            partial.delta(index, field, text, size)
    partial.clipped = partial.clipped or clipped
    return partial.snapshot()
