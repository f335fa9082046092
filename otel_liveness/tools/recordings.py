"""Reading the flight recorder's files from disk (the parsing and the replay's frames are the
core's: :mod:`otel_liveness.core.capture.recording`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from ..core.capture.recording import (
    BROKE_WITHIN,
    KINDS,
    SILENCE_OUTCOMES,
    CaptureError,
    Chunk,
    Recording,
    frame_bytes,
    parse_recording,
)

__all__ = ["BROKE_WITHIN", "KINDS", "SILENCE_OUTCOMES", "CaptureError", "Chunk", "Recording", "frame_bytes",
           "iter_paths", "parse_recording", "read_recording"]


def read_recording(path: str) -> Recording:
    """Read and parse the recording at ``path`` (:class:`CaptureError` or :class:`OSError`)."""
    with open(path, encoding="utf-8") as fh:
        try:
            return parse_recording(fh, path)
        except UnicodeDecodeError as exc:
            raise CaptureError(f"{path}: not UTF-8 text ({exc.reason})") from None


def iter_paths(paths: Iterable[str]) -> Iterator[str]:
    """The recording files of ``paths``: each file as given, each folder's ``*.jsonl`` files
    recursively, in a stable (sorted) order."""
    for path in paths:
        if os.path.isdir(path):
            found: list[str] = []
            for root, dirs, files in os.walk(path):
                dirs.sort()
                found.extend(os.path.join(root, name) for name in files if name.endswith(".jsonl"))
            yield from sorted(found)
        else:
            yield path
