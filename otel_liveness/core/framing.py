"""Framers: a wire format's framing and classification behind one small interface, so that the
engine judges SSE and AWS event streams by the same rules.

A framer is fed the (decoded) bytes of each read and answers the :class:`~.outcome.FrameKind` of
every frame the read completed; it keeps the :class:`~.providers.StreamFacts` telemetry records;
at the end of the body it answers the kinds of what was still pending; given a read that holds an
in-band error it says where the error begins (so the content before it can be released); given
the released prefix it decodes the partial reply where the wire format allows.
"""

from __future__ import annotations

from typing import Any, Protocol

from .anthropic import decode_partial
from .errors import CorruptFrame
from .eventstream import EventStreamScanner
from .outcome import FrameKind
from .providers import ProviderProfile, StreamFacts
from .sse import SSEScanner, parse_block

__all__ = ["EventStreamFramer", "Framer", "SSEFramer", "framer_for"]

_ERROR = FrameKind.ERROR
_ANTHROPIC_WIRES = ("anthropic", "vertex")


class Framer(Protocol):
    facts: StreamFacts

    def feed(self, data: bytes) -> list[FrameKind]: ...

    def close(self) -> list[FrameKind]: ...

    @property
    def idle(self) -> bool: ...

    def error_offset(self, chunk: bytes) -> int: ...

    def partial(self, prefix: bytes) -> dict[str, Any] | None: ...


class SSEFramer:
    """``text/event-stream`` (:class:`~.sse.SSEScanner` + the profile's classifier)."""

    __slots__ = ("facts", "profile", "scanner")

    def __init__(self, profile: ProviderProfile, max_frame_bytes: int) -> None:
        self.profile = profile
        self.scanner = SSEScanner(max_frame_bytes)
        self.facts = StreamFacts()

    def feed(self, data: bytes) -> list[FrameKind]:
        return self.profile.classify_blocks(self.scanner.feed_blocks(data), self.facts)

    def close(self) -> list[FrameKind]:
        """The end: a final frame whose lines all ended counts (see ``SSEScanner.close_blocks``)."""
        blocks = self.scanner.close_blocks(complete_lines=True)
        return self.profile.classify_blocks(blocks, self.facts) if blocks else []

    @property
    def idle(self) -> bool:
        return self.scanner.idle

    def error_offset(self, chunk: bytes) -> int:
        """Where the first error frame starts in the raw ``chunk`` (0 if it began in an earlier read)."""
        profile = self.profile
        frames: list[Any] = []
        probe = StreamFacts()
        for block in SSEScanner(1 << 62).feed_blocks(chunk + b"\n\n"):
            frames.clear()
            parse_block(block, frames)
            if any(profile.classify(f, probe) is _ERROR for f in frames):
                for candidate in (block, block.replace(b"\n", b"\r\n"), block.replace(b"\n", b"\r")):
                    pos = chunk.find(candidate)
                    if pos >= 0:
                        return pos
                return 0
        return 0

    def partial(self, prefix: bytes) -> dict[str, Any] | None:
        return decode_partial(prefix) if self.profile.name in _ANTHROPIC_WIRES else None


class EventStreamFramer:
    """``application/vnd.amazon.eventstream`` (:class:`~.eventstream.EventStreamScanner`, CRC-checked;
    a corrupt message is a :class:`~.errors.CorruptFrame`, a malformed stream)."""

    __slots__ = ("_fed", "_starts", "facts", "profile", "scanner")

    def __init__(self, profile: ProviderProfile, max_frame_bytes: int) -> None:
        self.profile = profile
        self.scanner = EventStreamScanner(max_frame_bytes)
        self.facts = StreamFacts()
        self._fed = 0  # bytes fed before the current read
        self._starts: list[tuple[int, FrameKind]] = []  # (stream offset, kind) of the last read's messages

    def feed(self, data: bytes) -> list[FrameKind]:
        before = self._fed
        self._fed += len(data)
        classify = self.profile.classify_message
        facts = self.facts
        starts = [(m.offset - before, classify(m, facts)) for m in self.scanner.feed(data)]
        self._starts = starts
        return [kind for _, kind in starts]

    def close(self) -> list[FrameKind]:
        """The end: a message cut short is not corrupt data, only the end of the body before the
        reply's (the engine's end-of-body rules decide)."""
        try:
            self.scanner.close()
        except CorruptFrame as exc:
            if exc.what != "truncated":
                raise
        return []

    @property
    def idle(self) -> bool:
        return self.scanner.pending == 0

    def error_offset(self, chunk: bytes) -> int:
        """Where the first error message of the last read starts in ``chunk`` (0: an earlier read)."""
        for start, kind in self._starts:
            if kind is _ERROR:
                return max(start, 0)
        return 0

    def partial(self, prefix: bytes) -> dict[str, Any] | None:
        """The Anthropic reply inside the released messages (Bedrock ``chunk`` events), decoded."""
        scanner = EventStreamScanner(max(len(prefix), 16) + 16)
        try:
            messages = scanner.feed(prefix)
        except CorruptFrame as exc:
            messages = list(getattr(exc, "decoded", ()))
        frames = [frame for m in messages if (frame := self.profile.inner_events(m)) is not None]
        return decode_partial(b"".join(frames)) if frames else None


def framer_for(profile: ProviderProfile, max_frame_bytes: int, content_type: str) -> Framer:
    """The framer for a response of ``content_type`` judged by ``profile``."""
    if profile.framing == "eventstream" and content_type.startswith("application/vnd.amazon.eventstream"):
        return EventStreamFramer(profile, max_frame_bytes)
    return SSEFramer(profile, max_frame_bytes)
