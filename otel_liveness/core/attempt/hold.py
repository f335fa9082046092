"""What an attempt keeps back from the caller: the bytes of a stream held before its first content
(:class:`Hold`), and a 2xx JSON body on a streaming request kept until its first key tells an
error object from a reply (:class:`Probe`). The attempt decides when each fills and empties;
these keep the bytes and their count.

Both keep bytes back only so that a retry can replace them. Shadow mode retries nothing, so its
hold and probe (``keeps`` False) keep nothing back: every byte goes on as it comes, and is only
counted (a hold past the bound is the malformed stream enforcement would have met) or, for the
probe, kept as a copy to judge the body at its end."""

from __future__ import annotations

from .. import errors as E
from ..wire.providers import json_error_shaped

__all__ = ["Hold", "Probe"]


class Hold:
    """A stream's bytes held before content (``chunks``; ``decoded``, the same decoded, when the
    body is content-encoded), their count (``size``) and its bound (``limit``,
    ``Policy.max_frame_bytes``). ``keeps`` False (shadow mode): counted only, never kept."""

    __slots__ = ("chunks", "decoded", "keeps", "limit", "size")

    def __init__(self, limit: int, *, keeps: bool = True) -> None:
        self.chunks: list[bytes] = []
        self.decoded: list[bytes] = []
        self.keeps = keeps
        self.limit = limit
        self.size = 0

    def add(self, chunk: bytes, decoded: bytes | None = None) -> bool:
        """``chunk`` arrived before content: counted, and kept unless this hold keeps nothing.
        Answers whether it was kept (False: it goes on to the caller now)."""
        self.size += len(chunk)
        if not self.keeps:
            return False
        self.chunks.append(chunk)
        if decoded is not None:
            self.decoded.append(decoded)
        return True

    def replace(self, frames: list[bytes]) -> None:
        """What is held becomes ``frames`` (the framer's replay: the held frames that are not
        heartbeats, and the frame in progress); a hold that keeps nothing only counts them."""
        if self.keeps:
            self.chunks = frames
        self.size = sum(map(len, frames))

    def check(self) -> None:
        """:class:`~..errors.MalformedStream` when what was held passes its bound."""
        if self.size > self.limit:
            raise E.MalformedStream(f"{self.size} bytes arrived before any content (bound {self.limit})")

    def drain(self) -> tuple[bytes, bytes]:
        """Everything held, and emptied: ``(bytes, decoded bytes)``."""
        held, decoded = b"".join(self.chunks), b"".join(self.decoded)
        self.chunks.clear()
        self.decoded.clear()
        self.size = 0
        return held, decoded


class Probe:
    """A 2xx JSON body on a streaming request, kept (``chunks``, ``size``) until its first key tells
    (``shaped``: an error object's, True; a reply's, False; not yet, None). ``keeps`` False (shadow
    mode): each read also goes on as it comes."""

    __slots__ = ("chunks", "keeps", "shaped", "size")

    def __init__(self, *, keeps: bool = True) -> None:
        self.chunks: list[bytes] = []
        self.keeps = keeps
        self.size = 0
        self.shaped: bool | None = None

    def add(self, chunk: bytes) -> bytes:
        """Keep ``chunk`` (:attr:`shaped` says what the body's first key tells, once it tells);
        answer what goes on to the caller now: nothing, or ``chunk`` when this probe keeps
        nothing back."""
        self.chunks.append(chunk)
        self.size += len(chunk)
        if self.shaped is None:
            self.shaped = json_error_shaped(b"".join(self.chunks)[:512])
        return b"" if self.keeps else chunk

    def drain(self) -> tuple[bytes, bytes]:
        """The body kept so far, and what of it the caller has not had (all of it, or -- a probe
        that keeps nothing back -- none); emptied."""
        body = b"".join(self.chunks)
        self.chunks.clear()
        self.size = 0
        return body, body if self.keeps else b""
