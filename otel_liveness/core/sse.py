"""Incremental Server-Sent Events scanner (sans-I/O).

Feed it bytes, get :class:`Frame` objects back::

    scanner = SSEScanner(max_frame_bytes=1 << 20)
    for frame in scanner.feed(chunk):
        ...
    for frame in scanner.close():   # end of stream: flush a final unterminated frame
        ...

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

Every way of splitting the same bytes into chunks yields the same frames. A line or frame longer
than ``max_frame_bytes`` raises :class:`~otel_liveness.core.errors.FrameTooLarge` as soon as it is
known to be too long, so a hostile peer cannot make the buffer grow without limit.
"""

from __future__ import annotations

from .errors import FrameTooLarge

__all__ = ["COMMENT", "DEFAULT_MAX_FRAME_BYTES", "Frame", "SSEScanner"]

#: ``Frame.event`` of a comment-only frame (a heartbeat on every provider we know).
COMMENT = ":"
#: Default bound on one line or one frame: 4 MiB (Anthropic's largest tool-input deltas are far below).
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"


class Frame:
    """One SSE frame.

    ``event`` is the ``event:`` field (``None`` when absent, :data:`COMMENT` for a comment-only
    frame); ``data`` the joined ``data:`` lines as bytes; ``size`` the bytes the frame occupied
    on the wire after line-end normalisation; ``comments`` the comment lines inside the block.
    """

    __slots__ = ("event", "data", "size", "comments")

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


def _parse_block(block: bytes, out: list[Frame]) -> None:
    """Parse one LF-normalised block (no blank lines inside) and append its frames to ``out``."""
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


class SSEScanner:
    """Incremental, chunking-invariant SSE framer with a size bound."""

    __slots__ = ("max_frame_bytes", "_buf", "_started", "_pending_cr", "_in_fields", "bytes_seen")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buf = b""  # LF-normalised bytes of the block in progress
        self._started = False  # BOM check done
        self._pending_cr = False  # the previous chunk ended with CR
        self._in_fields = False  # the block in progress has a field line (comments no longer split off)
        self.bytes_seen = 0

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (never more than ``max_frame_bytes`` + one chunk)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[Frame]:
        """Consume ``chunk``; return the frames it completed (possibly none)."""
        if not chunk:
            return []
        self.bytes_seen += len(chunk)
        if self._pending_cr:
            chunk = b"\r" + chunk
            self._pending_cr = False
        if not self._started:
            head = self._buf + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._buf = head  # might still become a BOM
                return []
            self._started = True
            self._buf = b""
            chunk = head[3:] if head.startswith(_BOM) else head
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._pending_cr = True
                chunk = chunk[:-1]
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._scan(self._buf + chunk if self._buf else chunk)

    def close(self) -> list[Frame]:
        """End of stream: return a final frame that had no terminating blank line, if any."""
        tail = self._buf
        if self._pending_cr:
            tail += b"\n"
            self._pending_cr = False
        if not self._started:
            tail = tail[3:] if tail.startswith(_BOM) else tail
            self._started = True
        self._buf = b""
        self._in_fields = False
        out: list[Frame] = []
        tail = tail.strip(b"\n")
        if tail:
            _parse_block(tail, out)
        return out

    def _scan(self, buf: bytes) -> list[Frame]:
        out: list[Frame] = []
        blocks = buf.split(b"\n\n")
        rest = blocks.pop()
        for block in blocks:
            if block:
                # "\n\n\n" yields empty blocks; a block may also start with the "\n" left over
                # from an odd run of newlines.
                if block[:1] == b"\n":
                    block = block.lstrip(b"\n")
                    if not block:
                        continue
                if len(block) > self.max_frame_bytes:
                    raise FrameTooLarge(len(block), self.max_frame_bytes)
                _parse_block(block, out)
        if blocks:
            self._in_fields = False
        # Comment lines at the head of the block in progress are heartbeats now, not later.
        if not self._in_fields:
            rest = rest.lstrip(b"\n")
            while rest[:1] == b":":
                nl = rest.find(b"\n")
                if nl < 0:
                    break
                _parse_block(rest[:nl], out)
                rest = rest[nl + 1 :].lstrip(b"\n")
            if rest and rest[:1] != b":" and b"\n" in rest:
                self._in_fields = True
        if len(rest) > self.max_frame_bytes:
            raise FrameTooLarge(len(rest), self.max_frame_bytes)
        self._buf = rest
        return out


