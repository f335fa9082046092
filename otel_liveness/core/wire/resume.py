"""Resuming a stream after content where the provider keeps the response: OpenAI Responses'
background mode.

A response created with ``"background": true`` is kept by the provider, and its stream can be
read again from any event on: ``GET {base}/responses/{id}?stream=true&starting_after=N`` sends the
events whose ``sequence_number`` is above N, each as it was, and ends as the response does. So
when such a stream dies after content (silence, a reset, EOF mid-frame), the transport can give
the caller an exact continuation -- only the events after the last one it received, with no
duplicate, no gap and nothing invented -- instead of a truncation.

This module holds the decisions, pure: which request is resumable (:func:`resumable`), the
bytes a resumable stream releases (:class:`FrameAligner`: whole events only, so "the last event
the caller received" is a sequence number, never half an event), whether a failure is resumed
and where (:func:`resume_target`). The drivers do the I/O (``transport/_async/stream.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

__all__ = ["FrameAligner", "ResumeState", "background_stream_id", "response_path_id", "resumable", "resume_target"]

_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')
_RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]{1,200})"')
#: The ends of an SSE event (a blank line, in each of the three line-end forms).
_ENDS = (b"\n\n", b"\r\r", b"\r\n\r\n")


def response_path_id(path: str) -> str | None:
    """The response id of ``.../responses/{id}`` (OpenAI Responses' retrieve), else ``None``."""
    head, _, tail = path.rstrip("/").rpartition("/")
    return tail if head.endswith("/responses") and tail.startswith("resp") else None


def background_stream_id(path: str, query: str) -> str | None:
    """The response id of a background response's stream request (``GET .../responses/{id}``
    with ``stream=true``), else ``None``."""
    return response_path_id(path) if "stream=true" in query else None


def resumable(method: str, path: str, query: str, *, background: bool, streaming: bool) -> bool:
    """Whether a request's stream can be resumed after content: a streamed OpenAI Responses
    request that created a background response (``POST .../responses`` with ``"background":
    true``), or a background response's stream itself (``GET .../responses/{id}?stream=true``)."""
    if method == "POST":
        return background and streaming and path.rstrip("/").endswith("/responses")
    return method == "GET" and background_stream_id(path, query) is not None


def _frame_end(data: bytes) -> int:
    """The offset just past the last complete SSE event in ``data`` (0: none)."""
    end = 0
    for mark in _ENDS:
        at = data.rfind(mark)
        if at >= 0:
            end = max(end, at + len(mark))
    return end


class FrameAligner:
    """The bytes a resumable stream releases: whole events only. ``feed`` takes a read and
    answers the complete events it finishes (the rest waits for its end); it learns the response
    id (the first ``resp_`` id it sees, unless given) and the last sequence number released.
    After a resume, events at or below ``skip_through`` are dropped (the provider sends none:
    a defence against a duplicate, never a gap). A partial event waits in ``tail``, bounded by
    the engine's frame bound (the attempt rejects a longer frame before it gets here)."""

    __slots__ = ("last_sequence", "response_id", "skip_through", "tail")

    def __init__(self, response_id: str | None = None) -> None:
        self.tail = b""
        self.response_id = response_id
        self.last_sequence: int | None = None
        self.skip_through: int | None = None

    def feed(self, data: bytes) -> bytes:
        buffer = self.tail + data if self.tail else data
        end = _frame_end(buffer)
        if end == 0:
            self.tail = buffer
            return b""
        out, self.tail = buffer[:end], buffer[end:]
        if self.response_id is None:
            found = _RESPONSE_ID.search(out)
            if found is not None:
                self.response_id = found.group(1).decode("ascii")
        if self.skip_through is not None:
            out = self._unseen(out)
        last = _SEQUENCE.search(out, max(0, out.rfind(b'"sequence_number"')))  # (the last event's, not a scan of all)
        if last is not None:
            self.last_sequence = int(last.group(1))
        return out

    def _unseen(self, out: bytes) -> bytes:
        """``out`` without the events already released (sequence number at or below
        ``skip_through``); once an event above it passes, every later one does."""
        kept = []
        at = 0
        while at < len(out):
            end = min((i + len(m) for m in _ENDS if (i := out.find(m, at)) >= 0), default=len(out))
            event = out[at:end]
            number = _SEQUENCE.search(event)
            if number is None or int(number.group(1)) > (self.skip_through or 0):
                kept.append(event)
                if number is not None:
                    kept.append(out[end:])
                    self.skip_through = None
                    break
            at = end
        return b"".join(kept)

    def flush(self) -> bytes:
        """At a clean end: what is left (an event without its blank line), released as it came."""
        out, self.tail = self.tail, b""
        return out

    def resumed(self) -> None:
        """A resume stream starts: its partial event is not the old one's; skip what was released."""
        self.tail = b""
        self.skip_through = self.last_sequence


@dataclass
class ResumeState:
    """One request's resumes: how many, and when the request started (the wall budget's clock)."""

    started: float
    resumes: int = 0


def resume_target(url: str, aligner: FrameAligner, state: ResumeState, *, max_attempts: int,
                  wall_timeout: float | None, now: float) -> tuple[str, float | None] | None:
    """Where to resume a stream that died after content -- the URL of the background response's
    stream after the last event released, and the wall budget left for it (``None``: no wall
    budget) -- or ``None``: not known which response (no id seen), nothing released yet to
    continue from, the attempts spent (``max_attempts`` bounds the first stream and its resumes
    together), or the wall budget spent."""
    if aligner.response_id is None or aligner.last_sequence is None or state.resumes + 1 >= max_attempts:
        return None
    left = None
    if wall_timeout is not None:
        left = wall_timeout - (now - state.started)
        if left <= 0:
            return None
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith("/responses"):  # (a resume of a resume: .../responses/{id})
        path = path.rpartition("/")[0]
    query = f"stream=true&starting_after={aligner.last_sequence}"
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/{aligner.response_id}", query, "")), left
