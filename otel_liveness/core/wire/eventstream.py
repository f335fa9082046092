"""Incremental decoder for AWS event streams (``application/vnd.amazon.eventstream``), sans-I/O.

AWS Bedrock streams (``InvokeModelWithResponseStream``, ``ConverseStream``) are not SSE but a
sequence of length-prefixed binary messages::

    offset  size  field
    0       4     total length of the message, big-endian uint32 (prelude + headers + payload + 4)
    4       4     length of the headers section, big-endian uint32
    8       4     prelude CRC32: CRC-32 (zlib polynomial) of bytes 0..7
    12      H     headers: repeated [name length: uint8][name: UTF-8][type: uint8][value]
    12+H    P     payload (P = total - H - 16): for Bedrock, JSON
    total-4 4     message CRC32: CRC-32 of every byte before it (prelude and prelude CRC included)

Header value types: 0 bool true and 1 bool false (no value bytes), 2 byte (int8), 3 short (int16),
4 int (int32), 5 long (int64), 6 bytes and 7 string (uint16 length, then the bytes / UTF-8 text),
8 timestamp (int64 milliseconds since the epoch, returned as that ``int``), 9 UUID (16 bytes,
returned as ``bytes``). Decoded values are what botocore's ``EventStreamBuffer`` gives for the same
bytes, so the two decoders agree message for message.

Bedrock uses the headers ``:message-type`` (``event`` or ``exception``), ``:event-type``
(``chunk`` for InvokeModel streams; ``messageStart``, ``contentBlockDelta``... for ConverseStream),
``:exception-type`` (``throttlingException``...) and ``:content-type``. An InvokeModel ``chunk``
payload is ``{"bytes": "<base64 of one Anthropic Messages event>"}`` (plus, on the real service, a
``"p"`` padding field): :func:`decode_chunk` returns the inner event JSON.

Guarantees of :class:`EventStreamScanner`:

* chunking-invariant: every way of splitting the same bytes into reads yields the same messages,
  and the same error at the same message (an error raised by :meth:`~EventStreamScanner.feed`
  carries, in ``decoded``, the messages that call completed before the fault);
* checked: the prelude CRC is verified as soon as the 12 prelude bytes are in, before the lengths
  are trusted; the message CRC before headers are parsed. A mismatch, an impossible length, a bad
  header or a stream that ends inside a message raises
  :class:`~otel_liveness.core.errors.CorruptFrame` naming what failed; a message longer than
  ``max_message_bytes`` raises :class:`~otel_liveness.core.errors.FrameTooLarge` as soon as its
  prelude arrives. After an error the scanner stays failed: every later call raises it again;
* bounded: the scanner buffers at most one incomplete message (so at most ``max_message_bytes``);
  complete messages are decoded straight from the read that carries them, and a message arriving
  one byte at a time costs linear time (bytes are appended, never re-copied per read).

This module imports nothing but the standard library and performs no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from struct import Struct
from typing import Any
from zlib import crc32

from ..errors import CorruptFrame, FrameTooLarge, MalformedStream

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "EventStreamScanner",
    "Message",
    "bedrock_chunk",
    "bedrock_exception",
    "converse_event",
    "decode_chunk",
    "encode_message",
]

#: The media type of an AWS event stream body.
CONTENT_TYPE = "application/vnd.amazon.eventstream"
#: Default bound on one message: 8 MiB (a Bedrock chunk carries one Anthropic event, base64'd).
DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024

_PRELUDE_LEN = 12
_MIN_MESSAGE = 16  # prelude + message CRC, no headers, no payload
_PRELUDE = Struct(">III")
_PRELUDE_HEAD = Struct(">II")
_U32 = Struct(">I")
_FIXED: dict[int, tuple[int, Struct]] = {
    2: (1, Struct(">b")),
    3: (2, Struct(">h")),
    4: (4, Struct(">i")),
    5: (8, Struct(">q")),
    8: (8, Struct(">q")),
}
_HEADER_CACHE_MAX = 64


@dataclass(frozen=True, slots=True)
class Message:
    """One event-stream message: its decoded ``headers``, its raw ``payload``, and ``offset``, where
    it began in the stream (bytes fed before its first byte)."""

    headers: dict[str, object]
    payload: bytes
    offset: int = 0

    def _str(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if isinstance(value, str) else None

    @property
    def message_type(self) -> str | None:
        """``:message-type``: ``event``, ``exception`` or ``error`` (None when absent)."""
        return self._str(":message-type")

    @property
    def event_type(self) -> str | None:
        """``:event-type``: ``chunk``, ``messageStart``... (None when absent)."""
        return self._str(":event-type")

    @property
    def exception_type(self) -> str | None:
        """``:exception-type``: ``throttlingException``... (None when absent)."""
        return self._str(":exception-type")

    @property
    def content_type(self) -> str | None:
        """``:content-type``, usually ``application/json`` (None when absent)."""
        return self._str(":content-type")


# The scanner's hot path fills the slots directly (the frozen dataclass __init__ costs
# twice as much); the result is the same immutable Message.
_new_message = object.__new__
_set_headers: Callable[[Message, dict[str, object]], None] = vars(Message)["headers"].__set__
_set_payload: Callable[[Message, bytes], None] = vars(Message)["payload"].__set__
_set_offset: Callable[[Message, int], None] = vars(Message)["offset"].__set__


class EventStreamScanner:
    """Incremental, chunking-invariant, CRC-checked event-stream decoder with a size bound.

    ::

        scanner = EventStreamScanner(max_message_bytes=1 << 20)
        for message in scanner.feed(chunk):
            ...
        scanner.close()   # raises CorruptFrame(what="truncated") if a message was cut short

    ``pending`` is the bytes held for an incomplete message, ``messages`` the count decoded so far.
    """

    __slots__ = ("_buf", "_cache", "_error", "_fed", "_total", "max_message_bytes", "messages")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if max_message_bytes < _MIN_MESSAGE:
            raise ValueError(f"max_message_bytes must be at least {_MIN_MESSAGE}")
        self.max_message_bytes = max_message_bytes
        # Invariant: _buf holds the start of exactly one incomplete message (or nothing); once
        # its prelude is in and verified, _total is that message's length (else 0).
        self._buf = bytearray()
        self._total = 0
        self._fed = 0  # stream offset of the first byte of the next chunk
        self._error: MalformedStream | None = None
        # Raw headers section -> decoded headers: a stream repeats a handful of header blocks
        # (every Bedrock chunk carries the same three headers), so most are decoded once.
        self._cache: dict[bytes, dict[str, object]] = {}
        self.messages = 0  # messages decoded so far

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete message (never more than ``max_message_bytes``)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[Message]:
        """Consume ``chunk``; return the messages it completed (possibly none).

        Raises :class:`~otel_liveness.core.errors.CorruptFrame` or
        :class:`~otel_liveness.core.errors.FrameTooLarge`; the exception's ``decoded`` holds the
        messages this call completed before the fault.
        """
        if self._error is not None:
            raise self._error
        out: list[Message] = []
        if type(chunk) is not bytes:
            chunk = bytes(chunk)
        n = len(chunk)
        fed = self._fed
        self._fed = fed + n
        try:
            pos = 0
            buf = self._buf
            if buf:
                # Complete the message in progress with the head of this chunk.
                start = fed - len(buf)
                if self._total == 0:
                    take = _PRELUDE_LEN - len(buf)
                    if n < take:
                        buf += chunk
                        return out
                    buf += chunk[:take]
                    pos = take
                    self._total = self._prelude(buf, 0, start)
                need = self._total - len(buf)
                if n - pos < need:
                    buf += chunk if pos == 0 else chunk[pos:]
                    return out
                buf += chunk if (pos == 0 and need == n) else chunk[pos : pos + need]
                pos += need
                data = bytes(buf)
                buf.clear()
                self._total = 0
                out.append(self._message(data, 0, len(data), start))
            # Whole messages straight from the chunk: no copy but the headers and payload.
            prelude = _PRELUDE.unpack_from
            while n - pos >= _PRELUDE_LEN:
                total, hlen, pcrc = prelude(chunk, pos)
                if crc32(chunk[pos : pos + 8]) != pcrc or total > self.max_message_bytes or total < _MIN_MESSAGE \
                        or hlen > total - _MIN_MESSAGE:
                    self._prelude(chunk, pos, fed + pos)  # raises the precise error
                end = pos + total
                if end > n:
                    break
                hend = pos + _PRELUDE_LEN + hlen
                mcrc = _U32.unpack_from(chunk, end - 4)[0]
                if crc32(chunk[pos + 8 : end - 4], pcrc) != mcrc:
                    _crc_error(chunk, pos, end, mcrc, fed + pos)
                headers = self._cache.get(chunk[pos + _PRELUDE_LEN : hend])
                message = _new_message(Message)
                _set_headers(message, headers.copy() if headers is not None
                             else self._headers(chunk, pos + _PRELUDE_LEN, hend, fed + pos))
                _set_payload(message, chunk[hend : end - 4])
                _set_offset(message, fed + pos)
                out.append(message)
                pos = end
            if pos < n:
                buf += chunk[pos:] if pos else chunk
                if len(buf) >= _PRELUDE_LEN:
                    self._total = _PRELUDE_HEAD.unpack_from(buf)[0]  # verified in the loop above
        except MalformedStream as exc:
            exc.decoded = tuple(out)
            self.messages += len(out)
            self._error = exc
            raise
        self.messages += len(out)
        return out

    def close(self) -> None:
        """End of stream: raises :class:`~otel_liveness.core.errors.CorruptFrame` (``what`` =
        ``"truncated"``) when a message was cut short, naming how many of its bytes arrived."""
        if self._error is not None:
            raise self._error
        if self._buf:
            held = len(self._buf)
            expected = self._total or None
            of = f" of {expected}" if expected else " (prelude incomplete)"
            self._error = CorruptFrame("truncated", f"stream ended after {held} bytes{of} of a message",
                                       offset=self._fed - held, expected=expected, actual=held)
            raise self._error

    # -- checks -----------------------------------------------------------------------------------

    def _prelude(self, data: bytes | bytearray, pos: int, offset: int) -> int:
        """Verify the prelude at ``data[pos:pos+12]``; return the message's total length."""
        total, hlen, pcrc = _PRELUDE.unpack_from(data, pos)
        computed = crc32(data[pos : pos + 8])
        if computed != pcrc:
            raise CorruptFrame("prelude_crc", f"prelude CRC 0x{pcrc:08x} != computed 0x{computed:08x}",
                               offset=offset, expected=pcrc, actual=computed)
        if total < _MIN_MESSAGE:
            raise CorruptFrame("length", f"total length {total} is below the {_MIN_MESSAGE}-byte minimum",
                               offset=offset, actual=total)
        if total > self.max_message_bytes:
            raise FrameTooLarge(total, self.max_message_bytes, what="event-stream message")
        if hlen > total - _MIN_MESSAGE:
            raise CorruptFrame("length", f"headers length {hlen} does not fit in a {total}-byte message",
                               offset=offset, actual=hlen)
        return int(total)

    def _message(self, data: bytes, pos: int, end: int, offset: int) -> Message:
        """Decode the complete message ``data[pos:end]`` (prelude already verified)."""
        _, hlen, pcrc = _PRELUDE.unpack_from(data, pos)
        mcrc = _U32.unpack_from(data, end - 4)[0]
        if crc32(data[pos + 8 : end - 4], pcrc) != mcrc:
            _crc_error(data, pos, end, mcrc, offset)
        hend = pos + _PRELUDE_LEN + hlen
        headers = self._cache.get(data[pos + _PRELUDE_LEN : hend])
        if headers is None:
            headers = self._headers(data, pos + _PRELUDE_LEN, hend, offset)
        else:
            headers = headers.copy()
        return Message(headers, data[hend : end - 4], offset)

    def _headers(self, data: bytes, p: int, end: int, offset: int) -> dict[str, object]:
        """Decode the headers section ``data[p:end]`` (and remember it for the next message)."""
        block = data[p:end]
        headers: dict[str, object] = {}
        try:
            while p < end:
                nlen = data[p]
                p += 1
                if p + nlen >= end:  # the name and a type byte must fit
                    raise _HeaderError(f"header name of {nlen} bytes runs past the headers section")
                name = data[p : p + nlen].decode()
                p += nlen
                kind = data[p]
                p += 1
                value: object
                if kind == 7 or kind == 6:
                    if p + 2 > end:
                        raise _HeaderError(f"header {name!r}: value length runs past the headers section")
                    vlen = (data[p] << 8) | data[p + 1]
                    p += 2
                    if p + vlen > end:
                        raise _HeaderError(f"header {name!r}: value of {vlen} bytes runs past the headers section")
                    raw = data[p : p + vlen]
                    value = raw.decode() if kind == 7 else raw
                    p += vlen
                elif kind == 0:
                    value = True
                elif kind == 1:
                    value = False
                elif kind in _FIXED:
                    size, fmt = _FIXED[kind]
                    if p + size > end:
                        raise _HeaderError(f"header {name!r}: {size}-byte value runs past the headers section")
                    value = fmt.unpack_from(data, p)[0]
                    p += size
                elif kind == 9:
                    if p + 16 > end:
                        raise _HeaderError(f"header {name!r}: UUID runs past the headers section")
                    value = data[p : p + 16]
                    p += 16
                else:
                    raise _HeaderError(f"header {name!r} has unknown type {kind}")
                if name in headers:
                    raise _HeaderError(f"duplicate header {name!r}")
                headers[name] = value
        except UnicodeDecodeError as exc:
            raise CorruptFrame("header", f"header name or string value is not UTF-8 ({exc.reason})",
                               offset=offset) from None
        except _HeaderError as exc:
            raise CorruptFrame("header", str(exc), offset=offset) from None
        cache = self._cache
        if len(cache) >= _HEADER_CACHE_MAX:
            cache.clear()
        cache[block] = headers
        return headers.copy()


class _HeaderError(Exception):
    pass


def _crc_error(data: bytes, pos: int, end: int, expected: int, offset: int) -> None:
    computed = crc32(data[pos : end - 4])
    raise CorruptFrame("message_crc", f"message CRC 0x{expected:08x} != computed 0x{computed:08x}",
                       offset=offset, expected=expected, actual=computed)


# -- encoding (tests, the simulated provider) ----------------------------------------------------


def _encode_headers(headers: Mapping[str, object]) -> bytes:
    parts: list[bytes] = []
    for name, value in headers.items():
        raw_name = name.encode()
        if not 0 < len(raw_name) < 256:
            raise ValueError(f"header name {name!r} must be 1..255 UTF-8 bytes")
        parts.append(bytes((len(raw_name),)) + raw_name)
        if isinstance(value, bool):
            parts.append(b"\x00" if value else b"\x01")
        elif isinstance(value, int):
            if -(1 << 31) <= value < (1 << 31):
                parts.append(b"\x04" + value.to_bytes(4, "big", signed=True))
            elif -(1 << 63) <= value < (1 << 63):
                parts.append(b"\x05" + value.to_bytes(8, "big", signed=True))
            else:
                raise ValueError(f"header {name!r}: {value} does not fit in 64 bits")
        elif isinstance(value, (str, bytes)):
            raw = value.encode() if isinstance(value, str) else value
            if len(raw) > 0xFFFF:
                raise ValueError(f"header {name!r}: value of {len(raw)} bytes exceeds 65535")
            parts.append((b"\x07" if isinstance(value, str) else b"\x06") + len(raw).to_bytes(2, "big") + raw)
        else:
            raise TypeError(f"header {name!r}: cannot encode {type(value).__name__}")
    return b"".join(parts)


def encode_message(headers: Mapping[str, str | bytes | bool | int], payload: bytes) -> bytes:
    """One event-stream message with correct CRCs.

    ``str`` values are encoded as strings (type 7), ``bytes`` as byte arrays (6), ``bool`` as
    true/false (0/1), ``int`` as int32 (4) when it fits, else int64 (5).
    """
    block = _encode_headers(headers)
    head = _PRELUDE_HEAD.pack(_MIN_MESSAGE + len(block) + len(payload), len(block))
    body = b"".join((head, _U32.pack(crc32(head)), block, payload))
    return body + _U32.pack(crc32(body))


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def converse_event(event_type: str, body: Mapping[str, Any], *, padding: str | None = None) -> bytes:
    """A ConverseStream event message: ``:event-type`` ``event_type`` and the event's members as
    the JSON payload, e.g. ``converse_event("contentBlockDelta", {"contentBlockIndex": 0,
    "delta": {"text": "Hi"}})``. Event types (bedrock-runtime's ``ConverseStreamOutput``):
    ``messageStart`` ``{"role"}``, ``contentBlockStart`` ``{"start": {"toolUse": {...}},
    "contentBlockIndex"}``, ``contentBlockDelta`` ``{"delta": {"text"|"toolUse"|
    "reasoningContent"...}, "contentBlockIndex"}``, ``contentBlockStop`` ``{"contentBlockIndex"}``,
    ``messageStop`` ``{"stopReason"}``, ``metadata`` ``{"usage": {"inputTokens", "outputTokens",
    "totalTokens"}, "metrics": {"latencyMs"}}``. ``padding`` adds the service's ``"p"`` field."""
    payload = dict(body)
    if padding is not None:
        payload["p"] = padding
    return encode_message({":event-type": event_type, ":content-type": "application/json",
                           ":message-type": "event"}, _json(payload))


def bedrock_chunk(event: bytes, *, padding: str | None = None) -> bytes:
    """An InvokeModelWithResponseStream ``chunk`` message carrying one Anthropic event's JSON
    (``event``), base64'd in ``{"bytes": ...}``; ``padding`` adds the service's ``"p"`` field."""
    body: dict[str, str] = {"bytes": base64.b64encode(event).decode("ascii")}
    if padding is not None:
        body["p"] = padding
    return encode_message({":event-type": "chunk", ":content-type": "application/json",
                           ":message-type": "event"}, _json(body))


def bedrock_exception(exception_type: str, message: str) -> bytes:
    """An in-band exception message (``throttlingException``, ``internalServerException``,
    ``modelStreamErrorException``, ``validationException``, ``modelTimeoutException``,
    ``serviceUnavailableException``) with payload ``{"message": ...}``."""
    return encode_message({":exception-type": exception_type, ":content-type": "application/json",
                           ":message-type": "exception"}, _json({"message": message}))


_CHUNK_HEAD = b'{"bytes":"'


def decode_chunk(payload: bytes) -> bytes | None:
    """The inner event JSON of a ``chunk`` payload ``{"bytes": "<base64>", ...}``; None when the
    payload is not that shape (not JSON, no string ``bytes``, not base64)."""
    if payload.startswith(_CHUNK_HEAD) and payload.endswith(b"}"):  # the service's layout: no JSON parse
        end = payload.find(b'"', len(_CHUNK_HEAD))  # base64 has no quote or backslash
        if end > 0 and payload[end + 1 : end + 2] in (b"}", b","):
            try:
                return base64.b64decode(payload[len(_CHUNK_HEAD) : end], validate=True)
            except binascii.Error:
                return None
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("bytes"), str):
        return None
    try:
        return base64.b64decode(body["bytes"], validate=True)
    except (binascii.Error, ValueError):
        return None
