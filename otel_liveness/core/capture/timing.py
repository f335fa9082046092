"""The flight recorder's timing-only capture: what the engine keeps of an attempt when
``Policy.capture_mode`` is ``"timing"`` -- each body read reduced, as it arrives, to the kinds and
sizes of the frames it completed. No content is kept, and memory stays small however long the
reply (a full capture keeps every byte until the attempt ends).

Pure: fed the items the engine captures, it frames and classifies the body as the engine does (the
content encoding undone, SSE or AWS event-stream framing, the provider profile's classifier). It
never raises into the engine: a body it cannot frame continues as ``partial`` reads of its size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..events import CaptureItem, FrameSizes
from ..outcome import FrameKind
from ..wire.encoding import decoder_for
from ..wire.eventstream import EventStreamScanner
from ..wire.providers import PROFILES, StreamFacts
from ..wire.sse import COMMENT, SSEScanner

__all__ = ["KIND_NAMES", "FrameReducer", "TimingCapture", "new_capture"]

#: The recorder's name of each frame kind (plus ``comment``, a heartbeat that is an SSE comment,
#: and ``partial``, a read that completed no frame).
KIND_NAMES = {
    FrameKind.HEARTBEAT: "heartbeat",
    FrameKind.PREAMBLE: "preamble",
    FrameKind.SEMANTIC: "content",
    FrameKind.END: "stop",
    FrameKind.ERROR: "error",
    FrameKind.UNKNOWN: "other",
}


class FrameReducer:
    """The frames of a response's body as the engine's framers see them (its provider profile,
    its content encoding and type), reduced to (kind, size): no content kept."""

    def __init__(self, provider: str, headers: Mapping[str, str | int], max_frame_bytes: int) -> None:
        self.profile = PROFILES.get(provider, PROFILES["sse"])
        content_type = str(headers.get("content-type", "")).lower()
        encoding = str(headers.get("content-encoding", ""))
        self.decoder = decoder_for(encoding) if encoding else None
        self.facts = StreamFacts()
        self.fed = 0
        self.eventstream = content_type.startswith("application/vnd.amazon.eventstream")
        if self.eventstream:
            if self.profile.framing != "eventstream":
                self.profile = PROFILES["bedrock"]
            self.messages: EventStreamScanner | None = EventStreamScanner(max_frame_bytes)
            self.sse: SSEScanner | None = None
        else:
            self.messages = None
            self.sse = SSEScanner(max_frame_bytes)

    def feed(self, chunk: bytes) -> FrameSizes:
        data = self.decoder.decode(chunk) if self.decoder is not None else chunk
        out: list[tuple[str, int]] = []
        if self.messages is not None:
            self.fed += len(data)
            messages = self.messages.feed(data)
            end = self.fed - self.messages.pending
            for i, message in enumerate(messages):
                kind = self.profile.classify_message(message, self.facts)
                size = (messages[i + 1].offset if i + 1 < len(messages) else end) - message.offset
                out.append((KIND_NAMES[kind], size))
        elif self.sse is not None:
            for frame in self.sse.feed(data):
                if frame.event == COMMENT:
                    out.append(("comment", frame.size))
                else:
                    out.append((KIND_NAMES[self.profile.classify(frame, self.facts)], frame.size))
        return tuple(out) or (("partial", len(data)),)


class TimingCapture(list[tuple[float, CaptureItem]]):
    """A capture list whose body chunks are reduced to :data:`~.events.FrameSizes` on append."""

    def __init__(self, provider: str, max_frame_bytes: int) -> None:
        super().__init__()
        self.provider = provider
        self.max_frame_bytes = max_frame_bytes
        self._reducer: FrameReducer | None = None
        self._broken = False

    def append(self, item: tuple[float, CaptureItem]) -> None:
        t, data = item
        if isinstance(data, Mapping):
            try:
                self._reducer = FrameReducer(self.provider, data, self.max_frame_bytes)
            except Exception:  # noqa: BLE001 - an encoding this cannot undo: timings only
                self._broken = True
        elif isinstance(data, bytes):
            data = self._reduce(data)
        super().append((t, data))

    def _reduce(self, chunk: bytes) -> FrameSizes:
        if self._reducer is None and not self._broken:
            self._reducer = FrameReducer(self.provider, {"content-type": "text/event-stream"}, self.max_frame_bytes)
        if self._reducer is not None and not self._broken:
            try:
                return self._reducer.feed(chunk)
            except Exception:  # noqa: BLE001 - malformed or undecodable bytes: the timing is still true
                self._broken = True
        return (("partial", len(chunk)),)

    def extend(self, items: Any) -> None:  # pragma: no cover - the engine only appends
        for item in items:
            self.append(item)


def new_capture(policy: Any, provider: str) -> list[tuple[float, CaptureItem]]:
    """The capture an attempt keeps for the flight recorder (``policy.capture_dir`` set) or the
    policy canary (``policy.candidates``: a timing reduction, unless the recorder keeps the bytes)."""
    if policy.capture_mode == "timing" or not policy.capture_dir:
        return TimingCapture(provider, policy.max_frame_bytes)
    return []
