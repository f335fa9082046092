"""Incremental Server-Sent Events scanner (sans-I/O).

Feed it bytes, get :class:`Frame` objects back::

    scanner = SSEScanner(max_frame_bytes=1 << 20)
    for frame in scanner.feed(chunk):
        ...
    scanner.close()   # end of stream: an unterminated final event is dropped, as the spec says

Framing follows the WHATWG ``text/event-stream`` rules: LF, CR and CRLF line ends (a CR at the end
of a chunk is held back until the next byte tells whether it starts a CRLF), multi-line ``data``
joined with ``\\n``, ``field:value`` with or without one leading space, a UTF-8 BOM at the very
start of the stream, ``:`` comment lines, and ``id``/``retry`` fields parsed and ignored.

Two deviations, both needed to judge *liveness* rather than to deliver events:

* comment lines are frames of their own (``Frame.event is COMMENT``) when they stand at the head
  of a block, whether or not a blank line follows them -- ``: OPENROUTER PROCESSING\\n`` is a
  heartbeat the moment it arrives.  Comments after a field line of the same block are counted on
  that block's frame (``Frame.comments``).
* like the SDKs' decoders, a block with an ``event`` field but no ``data`` is still a frame (the
  spec would drop it); a block of only ``id``/``retry``/unknown fields is not.
* data stays ``bytes``. Nothing is decoded or JSON-parsed here; the classifier looks at the event
  name and, for the rare frames that need it, at the payload.

Every way of splitting the same bytes into chunks yields the same frames. A frame larger than
``max_frame_bytes`` raises :class:`~otel_liveness.core.errors.FrameTooLarge` as soon as it is
known to be too large, so a hostile peer cannot make the buffer grow without limit; and whether
it raises does not depend on the chunking either. What the bound measures (:func:`frame_size`):

* a frame is measured after line-end normalisation (CR and CRLF count as one LF, the BOM not at
  all), without the blank line that ends it: its lines joined by LF, the last one's LF not counted;
* a comment line at the head of a block is a frame of its own (see above) and is measured alone
  (without its LF); the frame after it does not include it; comment lines after a field line
  belong to their frame;
* the frame in progress is measured the same way, from its first byte (blank lines before it
  not counted) to the last byte received, a final LF not counted (it may be the first of the
  blank line that ends the frame). So the buffer holds at most ``max_frame_bytes + 1`` bytes.
"""

from __future__ import annotations

from ..errors import FrameTooLarge

__all__ = ["COMMENT", "DEFAULT_MAX_FRAME_BYTES", "Frame", "SSEScanner", "ScanState", "comment_frames", "frame_size",
           "parse_block", "whole_frame", "without_head_comments"]

#: ``Frame.event`` of a comment-only frame (a heartbeat on every provider we know).
COMMENT = ":"
#: Default bound on one line or one frame: 64 MiB. One legitimate event can be tens of MiB -- a
#: Responses API ``response.completed`` carrying generated images, a whole long reply in one
#: ``response.output_text.done``; the openai SDK's own contract test sends a 32 MiB event and holds
#: that no event cap may reject it. The bound is against a peer that never ends a line.
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"


class Frame:
    """One SSE frame.

    ``event`` is the ``event:`` field (``None`` when absent, :data:`COMMENT` for a comment-only
    frame); ``data`` the joined ``data:`` lines as bytes; ``size`` the bytes the frame occupied
    on the wire after line-end normalisation; ``comments`` the comment lines inside the block.
    """

    __slots__ = ("comments", "data", "event", "size")

    def __init__(self, event: str | None, data: bytes, size: int, comments: int = 0) -> None:
        self.event = event
        self.data = data
        self.size = size
        self.comments = comments

    @property
    def text(self) -> str:
        """The data decoded as UTF-8 (invalid sequences replaced)."""
        return self.data.decode("utf-8", "replace")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return (self.event, self.data, self.size, self.comments) == (
            other.event,
            other.data,
            other.size,
            other.comments,
        )

    def __repr__(self) -> str:
        return f"Frame(event={self.event!r}, data={self.data[:60]!r}, size={self.size}, comments={self.comments})"


def parse_block(block: bytes, out: list[Frame]) -> None:
    """Parse one LF-normalised block (as :meth:`SSEScanner.feed_blocks` returns it) and append its
    frames to ``out``: comment lines before the first field line are frames of their own."""
    # Fast path: the overwhelmingly common provider shape "event: X\ndata: Y" or "data: Y".
    if block[:7] == b"event: ":
        nl = block.find(b"\n")
        if nl > 0 and block[nl + 1 : nl + 7] == b"data: " and block.find(b"\n", nl + 1) < 0:
            out.append(Frame(block[7:nl].decode("utf-8", "replace"), block[nl + 7 :], len(block) + 2))
            return
    elif block[:6] == b"data: " and block.find(b"\n") < 0:
        out.append(Frame(None, block[6:], len(block) + 2))
        return

    event: str | None = None
    data: list[bytes] = []
    has_data = False
    comments = 0
    seen_field = False
    size = 0
    for line in block.split(b"\n"):
        if line[:1] == b":":
            if not seen_field:
                out.append(Frame(COMMENT, line[1:].lstrip(b" "), len(line) + 1))
            else:
                comments += 1
                size += len(line) + 1
            continue
        seen_field = True
        size += len(line) + 1
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
            has_data = True
        elif name == b"event":
            event = value.decode("utf-8", "replace")
        # "id", "retry" and unknown fields are parsed and ignored, as the spec says.
    if has_data or event is not None:
        out.append(Frame(event, b"\n".join(data), size + 1, comments))


#: An :class:`SSEScanner`'s state (:meth:`SSEScanner.snapshot`), opaque to its callers.
ScanState = tuple[tuple[bytes, ...], int, bool, bool, bool, int]


class SSEScanner:
    """Incremental, chunking-invariant SSE framer with a size bound.

    Two views of the same framing: :meth:`feed` returns :class:`Frame` objects; :meth:`feed_blocks`
    returns the raw LF-normalised blocks (one frame's lines, or one head comment line) without
    building objects -- the transport's hot path classifies those by prefix, see
    :meth:`~otel_liveness.core.wire.providers.ProviderProfile.classify_blocks`.
    """

    __slots__ = ("_parts", "_pending", "_pending_cr", "_raw_mode", "_started", "discarded", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        # Invariant: _parts joined is the LF-normalised block in progress, from its start (or from its
        # first field line once head comments were split off); it never holds a complete block.
        # Parts are joined only when a block boundary may have arrived, so feeding a frame one
        # byte at a time stays linear (no re-copying of a growing buffer per read).
        self._parts: list[bytes] = []
        self._pending = 0
        self._started = False  # BOM check done
        self._pending_cr = False  # the previous chunk ended with CR
        self._raw_mode = True  # not started or CR pending: chunks need _normalise
        self.discarded = 0  # bytes of an unterminated final event dropped by close()

    @property
    def buffered(self) -> int:
        """The size of the frame in progress as the bound measures it (the bytes held for it, a
        final LF not counted; the start of a BOM, still undecided at the stream head, not at all):
        never more than ``max_frame_bytes``."""
        parts = self._parts
        if not self._started:
            return 0
        return self._pending - 1 if parts and parts[-1][-1] == 10 else self._pending

    def feed(self, chunk: bytes) -> list[Frame]:
        """Consume ``chunk``; return the frames it completed (possibly none)."""
        out: list[Frame] = []
        for block in self.feed_blocks(chunk):
            parse_block(block, out)
        return out

    def close(self) -> list[Frame]:
        """End of stream (see :meth:`close_blocks`: an unterminated final event is dropped)."""
        out: list[Frame] = []
        for block in self.close_blocks():
            parse_block(block, out)
        return out

    @property
    def idle(self) -> bool:
        """Nothing pending and past the stream head. A chunk that is exactly one LF-framed block
        (see :func:`whole_frame`) leaves an idle scanner idle: it would be consumed whole, so a
        caller may classify it by prefix without feeding it (the transport's steady lane)."""
        return not self._parts and not self._raw_mode

    @property
    def steady(self) -> bool:
        """Past the stream head (its BOM check done) with no CR held back from the last read: a
        chunk without CR is then taken as it comes."""
        return self._started and not self._pending_cr

    @property
    def held(self) -> int:
        """Bytes held for the block in progress (LF-normalised; what the scanner retains)."""
        return self._pending

    def in_progress(self) -> bytes:
        """The block in progress as bytes to replay (a CR held back at a read's end included)."""
        return b"".join(self._parts) + (b"\r" if self._pending_cr else b"")

    def snapshot(self) -> ScanState:
        """The scanner's state, for :meth:`restore`: a caller that feeds a read it may take back
        (the bulk scanner's admit) restores it when it does."""
        return (tuple(self._parts), self._pending, self._started, self._pending_cr, self._raw_mode, self.discarded)

    def restore(self, state: ScanState) -> None:
        """Go back to a :meth:`snapshot` of this scanner."""
        parts, self._pending, self._started, self._pending_cr, self._raw_mode, self.discarded = state
        self._parts = list(parts)

    def feed_blocks(self, chunk: bytes) -> list[bytes]:
        """Consume ``chunk``; return the blocks it completed, LF-normalised, blank lines removed."""
        if not chunk:
            return []
        # `13 in chunk` is memchr; `b"\r" in chunk` goes through the buffer protocol and is ~15x slower.
        if self._raw_mode or 13 in chunk:
            chunk = self._normalise(chunk)
            if not chunk:
                return []
        parts = self._parts
        if parts:
            if (
                chunk.find(b"\n\n") < 0
                and not (chunk[0] == 10 and parts[-1][-1] == 10)
                and not (parts[0][0] == 58 and 10 in chunk)  # a head comment line may have ended
            ):
                parts.append(chunk)  # no block can have ended: keep the piece, copy nothing
                self._pending += len(chunk)
                if self._pending > self.max_frame_bytes:
                    size = self._pending - 1 if chunk[-1] == 10 else self._pending  # a final LF: not counted
                    if size > self.max_frame_bytes:
                        raise FrameTooLarge(size, self.max_frame_bytes)
                return []
            parts.append(chunk)
            buf = b"".join(parts)
        else:
            buf = chunk
        blocks = buf.split(b"\n\n")
        rest = blocks.pop()
        if (
            len(buf) > self.max_frame_bytes
            or buf.find(b"\n\n\n") >= 0
            or buf[0] == 10
            or rest[:1] == b":"
        ):
            return self._careful(blocks, rest)
        self._keep(rest)
        return blocks

    def _keep(self, rest: bytes) -> None:
        if rest:
            self._parts = [rest]
            self._pending = len(rest)
        else:
            self._parts = []
            self._pending = 0

    def _careful(self, blocks: list[bytes], rest: bytes) -> list[bytes]:
        """The uncommon cases: runs of blank lines, head comments, and the size bound."""
        # Runs of blank lines leave empty blocks and blocks that start with "\n".
        blocks = [b for b in (b.lstrip(b"\n") for b in blocks) if b]
        # Comment lines at the head of the block in progress are heartbeats now, not later.
        rest = rest.lstrip(b"\n")
        while rest[:1] == b":":
            nl = rest.find(b"\n")
            if nl < 0:
                break
            blocks.append(rest[:nl])
            rest = rest[nl + 1 :].lstrip(b"\n")
        limit = self.max_frame_bytes
        if blocks and max(map(len, blocks)) > limit:
            # a block's length is its frame's size unless comment lines stand at its head
            largest = max(map(frame_size, blocks))
            if largest > limit:
                raise FrameTooLarge(largest, limit)
        size = len(rest) - 1 if rest[-1:] == b"\n" else len(rest)
        if size > limit:
            raise FrameTooLarge(size, limit)
        self._keep(rest)
        return blocks

    def _normalise(self, chunk: bytes) -> bytes:
        """BOM at stream start and CR/CRLF line ends -> LF (may return b"" while undecided)."""
        if self._pending_cr:
            chunk = b"\r" + chunk
            self._pending_cr = False
        if not self._started:
            head = b"".join(self._parts) + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._keep(head)  # might still become a BOM
                return b""
            self._started = True
            self._keep(b"")
            chunk = head[3:] if head.startswith(_BOM) else head
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._pending_cr = True
                chunk = chunk[:-1]
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        self._raw_mode = self._pending_cr
        return chunk

    def close_blocks(self, *, complete_lines: bool = False) -> list[bytes]:
        """End of stream. An event not terminated by a blank line is incomplete and, as the spec
        says, not dispatched (``discarded`` counts its bytes); only a block completed by a CR held
        back from the last read is returned. With ``complete_lines``, a final event whose lines
        all ended (only the closing blank line is missing) is returned too: the SDKs' decoders
        read such an event, so a reply that ends with it is whole; a cut line never is."""
        # A CR held back at the end of the last read was a line end after all.
        out = self.feed_blocks(b"\n") if self._pending_cr else []
        if complete_lines and self._parts and self._parts[-1][-1:] == b"\n":
            rest = b"".join(self._parts).strip(b"\n")
            self._keep(b"")
            if rest:
                out.append(rest)
        self.discarded = self._pending if self._started else 0
        self._keep(b"")
        self._started = True
        self._pending_cr = False
        self._raw_mode = False
        return out


def frame_size(block: bytes) -> int:
    """What ``max_frame_bytes`` bounds, for one LF-normalised block (as :meth:`SSEScanner.feed_blocks`
    returns it): its length, or, when comment lines stand at its head, the largest of those lines
    (each a frame of its own) and of the frame after them."""
    if block[:1] != b":":
        return len(block)
    largest = 0
    while block[:1] == b":":
        nl = block.find(b"\n")
        if nl < 0:
            break
        largest = max(largest, nl)
        block = block[nl + 1 :]
    return max(largest, len(block))


def comment_frames(block: bytes) -> int:
    """The frames of an LF-normalised block made of comment lines only (each line a comment frame
    of its own, as :func:`parse_block` makes them), else 0 (``_bulk.c``'s ``comment_lines``)."""
    if block[:1] != b":":
        return 0
    lines = block.split(b"\n")
    return len(lines) if all(line[:1] == b":" for line in lines) else 0


def without_head_comments(block: bytes) -> bytes:
    """An LF-normalised block without the comment lines at its head (each a frame of its own, as
    :func:`parse_block` makes them): the lines of the frame after them, ``b""`` when none."""
    while block[:1] == b":":
        nl = block.find(b"\n")
        block = block[nl + 1 :] if nl >= 0 else b""
    return block


def whole_frame(chunk: bytes, max_frame_bytes: int) -> bool:
    """Whether ``chunk`` is exactly one complete LF-framed block: its first blank line is its end,
    it holds no CR and it is within the frame bound. The reference scanner's shortcut for a read
    of one frame (:meth:`.bulk.PyScanner.admit`); the C scanner reaches the same answer by its own
    scan (``tests/test_bulk.py``)."""
    n = len(chunk)
    return 2 <= n <= max_frame_bytes and chunk.find(b"\n\n") == n - 2 and 13 not in chunk
