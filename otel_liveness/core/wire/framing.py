"""Framers: a wire format's framing and classification behind one small interface, so that the
engine judges SSE and AWS event streams by the same rules.

A framer is fed the (decoded) bytes of each read and answers the :class:`~.outcome.FrameKind` of
every frame the read completed; it keeps the :class:`~.providers.StreamFacts` telemetry records;
at the end of the body it answers the kinds of what was still pending; given a read that holds an
in-band error it says where the error begins (so the content before it can be released); it
decodes the partial reply where the wire format allows -- from what it kept while the reply was
released (:meth:`Framer.partial`), not from the released bytes: a stream keeps what a truncation
needs rather than the whole reply.

Before content, the engine holds what it reads; an SSE framer in *holding* mode (:meth:`hold`)
also keeps the frames that are not heartbeats, so that a long run of held heartbeats can be
replaced by those frames (:meth:`SSEFramer.replay`) instead of being replayed byte for byte.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

from ..errors import CorruptFrame
from ..outcome import FrameKind
from .anthropic import PartialMessage
from .bulk import Scanner
from .eventstream import EventStreamScanner
from .journal import JOURNAL_CLIPPED, replay_journal
from .providers import PREFIX, ProviderProfile, StreamFacts
from .sse import COMMENT, Frame

__all__ = ["EventStreamFramer", "Framer", "SSEFramer", "framer_for"]

_ERROR = FrameKind.ERROR
_ROLES = (FrameKind.HEARTBEAT, FrameKind.PREAMBLE, FrameKind.SEMANTIC, FrameKind.ERROR)
_ANTHROPIC_WIRES = ("anthropic", "vertex")


class Framer(Protocol):
    facts: StreamFacts

    def feed(self, data: bytes) -> list[FrameKind]: ...

    def close(self) -> list[FrameKind]: ...

    @property
    def idle(self) -> bool: ...

    def partial(self, prefix: bytes) -> dict[str, Any] | None: ...

    def hold(self, on: bool) -> None: ...

    def replay(self) -> list[bytes] | None: ...

    @property
    def retained(self) -> int: ...


@functools.lru_cache(maxsize=64)
def _comment_kind(profile: ProviderProfile) -> FrameKind:
    """How ``profile`` classifies a comment frame (a heartbeat on every provider we know): asked
    once per profile (a profile's classification is a function of the frame alone)."""
    try:
        return profile.classify(Frame(COMMENT, b"", 1), StreamFacts())
    except NotImplementedError:  # an event-stream profile: its SSE frames are not classified
        return FrameKind.HEARTBEAT


class SSEFramer:
    """``text/event-stream``: the bulk scanner (:mod:`.bulk`, the profile's fast prefixes in C
    where built) with the profile's classifier for the frames that carry facts. On the Anthropic
    wires the scanner keeps a journal of the content events (up to ``max_partial_bytes``), from
    which :meth:`partial` decodes the partial message."""

    __slots__ = ("facts", "max_partial_bytes", "profile", "scanner")

    def __init__(self, profile: ProviderProfile, max_frame_bytes: int, max_partial_bytes: int = 1 << 20) -> None:
        self.profile = profile
        self.max_partial_bytes = max_partial_bytes
        self.facts = StreamFacts()
        # (the journal's record lengths are 32-bit: its bound stays below 2 GiB)
        journal = min(max_partial_bytes, (1 << 31) - 1) if profile.name in _ANTHROPIC_WIRES else -1
        slow = functools.partial(profile.classify_block, facts=self.facts)
        self.scanner = Scanner(max_frame_bytes, tuple(profile.fast.items()), slow, _comment_kind(profile), _ROLES,
                               journal, PREFIX)

    @staticmethod
    def scanner_of(framer: Framer) -> Any:
        """The bulk scanner of an SSE framer (what the steady lane reads through), else ``None``."""
        return framer.scanner if isinstance(framer, SSEFramer) else None

    def feed(self, data: bytes) -> list[FrameKind]:
        return self.scanner.feed(data)

    def close(self) -> list[FrameKind]:
        """The end: a final frame whose lines all ended counts (see ``SSEScanner.close_blocks``)."""
        return self.scanner.close(complete_lines=True)

    @property
    def idle(self) -> bool:
        return self.scanner.idle

    def partial(self, prefix: bytes) -> dict[str, Any] | None:
        """The partial message (Anthropic wires), from the journal of everything released: the
        whole reply's content, however long ``prefix`` (the raw head a truncation carries) is."""
        if self.profile.name not in _ANTHROPIC_WIRES:
            return None
        scanner = self.scanner
        scanner.close()  # the attempt is over: a block a held-back CR ended is complete (as decode_partial reads it)
        return replay_journal(scanner.journal(), clipped=scanner.journal_state == JOURNAL_CLIPPED)

    def hold(self, on: bool) -> None:
        """Keep (or stop keeping) the frames that are not heartbeats, for :meth:`replay`."""
        self.scanner.hold = [] if on else None

    def replay(self) -> list[bytes] | None:
        """What the held reads amount to without their heartbeats: every frame that is not a
        heartbeat (LF-framed), then the frame in progress; ``None`` when not holding."""
        scanner = self.scanner
        held = scanner.hold
        if held is None:
            return None
        return [*held, scanner.pending()]

    @property
    def retained(self) -> int:
        """Bytes the framer keeps: the frame in progress and the journal."""
        return self.scanner.retained


class EventStreamFramer:
    """``application/vnd.amazon.eventstream`` (:class:`~.eventstream.EventStreamScanner`, CRC-checked;
    a corrupt message is a :class:`~.errors.CorruptFrame`, a malformed stream). On Bedrock the
    Anthropic events inside ``chunk`` messages are decoded into the partial message as they come,
    up to ``max_partial_bytes``, and stop at an error message."""

    __slots__ = ("_inner", "_partial", "_stopped", "facts", "profile", "scanner")

    def __init__(self, profile: ProviderProfile, max_frame_bytes: int, max_partial_bytes: int = 1 << 20) -> None:
        self.profile = profile
        self.scanner = EventStreamScanner(max_frame_bytes)
        self.facts = StreamFacts()
        self._partial = PartialMessage(max_partial_bytes)
        self._inner = False  # a chunk message carried an Anthropic event
        self._stopped = False  # an error message arrived: what follows is not the reply

    def feed(self, data: bytes) -> list[FrameKind]:
        classify = self.profile.classify_message
        facts = self.facts
        messages = self.scanner.feed(data)
        kinds = [classify(m, facts) for m in messages]
        if not self._stopped:
            inner = self.profile.inner_events
            for message, kind in zip(messages, kinds, strict=True):
                if kind is _ERROR:
                    self._stopped = True
                    break
                if kind is FrameKind.PREAMBLE or kind is FrameKind.SEMANTIC:
                    event = inner(message)
                    if event is not None:
                        self._partial.frame(*event)
                        self._inner = True
        return kinds

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

    def partial(self, prefix: bytes) -> dict[str, Any] | None:
        """The Anthropic reply inside the released messages (Bedrock ``chunk`` events), decoded;
        ``None`` when no message carried one."""
        return self._partial.snapshot() if self._inner else None

    def hold(self, on: bool) -> None:
        """Held event-stream messages are replayed as they came (no heartbeats to coalesce)."""

    def replay(self) -> list[bytes] | None:
        return None

    @property
    def retained(self) -> int:
        return self.scanner.pending + self._partial.size


def framer_for(profile: ProviderProfile, max_frame_bytes: int, content_type: str,
               max_partial_bytes: int = 1 << 20, *, unfed: Framer | None = None) -> Framer:
    """The framer for a response of ``content_type`` judged by ``profile``. ``unfed``: a framer
    that has not been fed yet (an attempt's default one, built before its headers), returned
    itself when it is the framer this would build -- an SSE framer of ``profile`` with these
    bounds -- instead of building a second one every request (~2 µs a request)."""
    if profile.framing == "eventstream" and content_type.startswith("application/vnd.amazon.eventstream"):
        return EventStreamFramer(profile, max_frame_bytes, max_partial_bytes)
    if (isinstance(unfed, SSEFramer) and unfed.profile is profile and unfed.max_partial_bytes == max_partial_bytes
            and unfed.scanner.max_frame_bytes == max_frame_bytes):
        return unfed
    return SSEFramer(profile, max_frame_bytes, max_partial_bytes)
