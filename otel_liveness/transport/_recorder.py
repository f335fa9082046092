"""The flight recorder: a hook that writes the timestamped recording of an attempt for
``otel-liveness analyze`` / ``whatif`` / ``tune`` (``Policy.capture_dir``; off by default).

Two modes (``Policy.capture_mode``):

- ``"full"``: every attempt that did not complete, with its bytes (holds reply content).
- ``"timing"``: no content -- each frame's time, kind and size -- for every attempt that did not
  complete and a ``Policy.capture_sample`` fraction of the completed ones (recording healthy
  attempts is what lets ``whatif`` count the kills a policy would make of them). The engine
  reduces each read as it arrives (:mod:`otel_liveness.core.capture.timing`): no content is held.

Format (JSON Lines). The first record describes the attempt, and carries no secret and no
content: ``{"t": 0, "meta": {"format": "full"|"timing", "provider", "host", "model",
"body_bytes", "shadow", "attempt", "outcome", "status", "content_type", "content_encoding",
"raw_bound", "first_byte_bound"}}``. Then, full captures: ``{"t": s, "headers": status,
"content_type": ..., "content_encoding": ...}`` (the two last when the response had them), one
record per body read -- ``{"t": s, "data": "<utf-8>"}`` or ``{"t": s, "b64": "<base64>"}``;
timing recordings: the same headers record, then one record per frame
``{"t": s, "kind": K, "size": n}`` (``K``: ``heartbeat``, ``comment``, ``preamble``, ``content``,
``stop``, ``error``, ``other``; ``partial`` for a read that completed no frame; ``size`` the
frame's bytes as decoded); both end with ``{"t": s, "eof": true}`` when the body ended,
``{"t": s, "error": "read_error"|"connect_error"}`` when the connection failed, or
``{"t": s, "end": true}`` when the attempt ended otherwise (nothing was read after); ``t`` is
seconds since the attempt started (its request being sent).

Files: named ``<time>-<request id, safe characters only>-<pid>-<random>-<attempt>.jsonl`` (never
from raw provider text: a ``request-id`` of ``../../x`` cannot leave the directory), created
``0600`` with ``O_EXCL | O_NOFOLLOW`` in a directory created ``0700``; the directory is kept under
``Policy.capture_max_bytes`` by evicting the oldest recordings first. A recording that cannot be
written (full disk, unwritable directory, larger than the cap) is dropped: logged (the first of
each kind as a WARNING, then every 1000th) and counted in :func:`recorder_stats` (and, through the
telemetry, ``liveness.recorder.drops``) -- never raised into the application.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.capture.recording import capture_records, recording_meta, timing_records
from ..core.events import AttemptEnded, CaptureItem, Event, RequestStarted
from ..core.outcome import AttemptOutcome
from ..core.policy import Policy
from ..core.wire.sse import DEFAULT_MAX_FRAME_BYTES

__all__ = ["DROP_REASONS", "FlightRecorder", "RecorderStats", "capture_lines", "recorder_stats", "timing_lines"]

log = logging.getLogger("otel_liveness")

#: Why a recording was not kept: ``write_error`` (the file could not be created or written: full
#: disk, unwritable or missing directory, a name already taken), ``too_large`` (the recording
#: alone is over ``capture_max_bytes``), ``evicted`` (a written recording removed, oldest first,
#: to keep the directory under ``capture_max_bytes``).
DROP_REASONS = ("write_error", "too_large", "evicted")

_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
_SUFFIX = ".jsonl"


@dataclass(frozen=True)
class RecorderStats:
    """What the flight recorders of this process did: recordings written, and dropped by reason
    (:data:`DROP_REASONS`)."""

    written: int
    dropped: Mapping[str, int]
    active: bool = False  # a flight recorder was made in this process


class _Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.written = 0
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        #: A flight recorder was made in this process: its drop counts are reported from zero, so
        #: that the first drop is an increase a rate or an alert can see.
        self.active = False

    def wrote(self) -> None:
        with self._lock:
            self.written += 1

    def drop(self, reason: str, n: int = 1) -> int:
        with self._lock:
            self.dropped[reason] += n
            return self.dropped[reason]

    def snapshot(self) -> RecorderStats:
        with self._lock:
            return RecorderStats(self.written, dict(self.dropped), self.active)


_STATS = _Stats()


def recorder_stats() -> RecorderStats:
    """The counts of every flight recorder of this process since it started."""
    return _STATS.snapshot()


def _count_drop(reason: str, what: str, exc: BaseException | None = None) -> None:
    count = _STATS.drop(reason)
    if reason == "evicted":  # the cap doing its job: visible in the counter, not a warning
        log.debug("otel-liveness: flight recorder evicted %s to stay under capture_max_bytes", what)
    elif count == 1 or count % 1000 == 0:
        log.warning("otel-liveness: flight recorder dropped a recording (%s: %s; %d so far)", reason, what, count,
                    exc_info=exc)
    else:
        log.debug("otel-liveness: flight recorder dropped a recording (%s: %s)", reason, what)


def capture_lines(capture: Sequence[tuple[float, CaptureItem]]) -> Iterator[str]:
    """The JSON Lines of a full capture, after its meta record (see the module docstring)."""
    return map(json.dumps, capture_records(capture))


def timing_lines(capture: Sequence[tuple[float, CaptureItem]], provider: str,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Iterator[str]:
    """The JSON Lines of a timing-only recording, after its meta record: every body read as its
    frames' kinds and sizes (reduced here when ``capture`` still holds the bytes)."""
    return map(json.dumps, timing_records(capture, provider, max_frame_bytes))


def _safe(text: str | None, limit: int = 64) -> str:
    """``text`` reduced to ``[A-Za-z0-9_-]`` (no dot, no separator: it cannot name another directory)."""
    return _SAFE.sub("_", text or "")[:limit].strip("_") or "attempt"


class FlightRecorder:
    """The hook of one request: writes its attempts' recordings into ``directory`` as
    ``policy`` says (mode, sample of completed attempts, directory cap). A write that fails is
    logged and counted (:func:`recorder_stats`), never raised into the application."""

    def __init__(self, directory: str, policy: Policy | None = None, *,
                 sample: Any = random.random) -> None:
        _STATS.active = True
        self.directory = directory
        self.policy = policy or Policy(capture_dir=directory)
        self.written: list[str] = []
        self._sample = sample
        self._started: RequestStarted | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, RequestStarted):
            self._started = event
            return
        if not isinstance(event, AttemptEnded) or event.capture is None:
            return
        record = event.record
        timing = self.policy.capture_mode == "timing"
        if record.outcome is AttemptOutcome.COMPLETED and not (timing and self._sample() < self.policy.capture_sample):
            return
        provider = event.report.provider
        meta = self._meta(event, "timing" if timing else "full")
        if timing:
            body = timing_lines(event.capture, provider, self.policy.max_frame_bytes)
        else:
            body = capture_lines(event.capture)
        text = json.dumps({"t": 0.0, "meta": meta}) + "\n" + "".join(line + "\n" for line in body)
        self._write(text.encode("utf-8"), record.request_id, record.index)

    def _meta(self, event: AttemptEnded, fmt: str) -> dict[str, Any]:
        started = self._started
        return recording_meta(fmt, event.report, event.record, event.capture,
                              host=started.host if started else None, model=started.model if started else None,
                              body_size=started.body_size if started else None)

    def _write(self, data: bytes, request_id: str | None, index: int) -> None:
        cap = self.policy.capture_max_bytes
        if len(data) > cap:
            _count_drop("too_large", f"{len(data)} bytes over capture_max_bytes {cap}")
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{stamp}-{_safe(request_id)}-{os.getpid()}-{random.getrandbits(32):08x}-{index}{_SUFFIX}"
        path = os.path.join(self.directory, name)
        fd = -1
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
            fd = os.open(path, flags, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.unlink(path)  # never leave a partial recording behind
            reason = "full disk" if exc.errno == errno.ENOSPC else exc.strerror or type(exc).__name__
            _count_drop("write_error", f"{reason}: {self.directory}", None if exc.errno == errno.ENOSPC else exc)
            return
        finally:
            if fd >= 0:
                os.close(fd)
        _STATS.wrote()
        self.written.append(path)
        self._evict(cap, keep=name)

    def _evict(self, cap: int, keep: str) -> None:
        """Remove the oldest recordings until the directory's recordings fit in ``cap`` bytes."""
        entries: list[tuple[float, int, str]] = []
        try:
            with os.scandir(self.directory) as it:
                for entry in it:
                    if entry.name.endswith(_SUFFIX) and entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        entries.append((st.st_mtime, st.st_size, entry.name))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        if total <= cap:
            return
        entries.sort()
        for _, size, name in entries:
            if total <= cap:
                break
            if name == keep:
                continue
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.directory, name))
                total -= size
                _count_drop("evicted", name)
