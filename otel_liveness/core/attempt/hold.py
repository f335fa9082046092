"""What an attempt keeps back from the caller: the bytes of a stream held before its first content
(:class:`Hold`), and a 2xx JSON body on a streaming request kept until its first key tells an
error object from a reply (:class:`Probe`). The attempt decides when each fills and empties;
these keep the bytes and their count."""

from __future__ import annotations

from .. import errors as E
from ..wire.providers import json_error_shaped

__all__ = ["Hold", "Probe"]


class Hold:
    """A stream's bytes held before content (``chunks``; ``decoded``, the same decoded, when the
    body is content-encoded), and their count (``size``: in shadow mode only counted)."""

    __slots__ = ("chunks", "decoded", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.decoded: list[bytes] = []
        self.size = 0

    def add(self, chunk: bytes, decoded: bytes | None = None) -> None:
        self.chunks.append(chunk)
        if decoded is not None:
            self.decoded.append(decoded)
        self.size += len(chunk)

    def count(self, nbytes: int) -> None:
        """``nbytes`` more would have been held (shadow mode: counted, not kept)."""
        self.size += nbytes

    def replace(self, frames: list[bytes], *, kept: bool = True) -> None:
        """What is held becomes ``frames`` (the framer's replay: the held frames that are not
        heartbeats, and the frame in progress); ``kept`` False: only counted (shadow mode)."""
        if kept:
            self.chunks = frames
        self.size = sum(map(len, frames))

    def check(self, limit: int) -> None:
        """:class:`~..errors.MalformedStream` when what was held passes ``limit``."""
        if self.size > limit:
            raise E.MalformedStream(f"{self.size} bytes arrived before any content (bound {limit})")

    def drain(self) -> tuple[bytes, bytes]:
        """Everything held, and emptied: ``(bytes, decoded bytes)``."""
        held, decoded = b"".join(self.chunks), b"".join(self.decoded)
        self.chunks.clear()
        self.decoded.clear()
        self.size = 0
        return held, decoded


class Probe:
    """A 2xx JSON body on a streaming request, kept (``chunks``, ``size``) until its first key tells
    (``shaped``: an error object's, True; a reply's, False; not yet, None)."""

    __slots__ = ("chunks", "shaped", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.shaped: bool | None = None

    def add(self, chunk: bytes) -> bool | None:
        """Keep ``chunk``; answer what the body's first key tells, once it tells."""
        self.chunks.append(chunk)
        self.size += len(chunk)
        if self.shaped is None:
            self.shaped = json_error_shaped(b"".join(self.chunks)[:512])
        return self.shaped

    def drain(self) -> bytes:
        """The body kept so far, and emptied."""
        body = b"".join(self.chunks)
        self.chunks.clear()
        self.size = 0
        return body
