"""The flight recorder: a hook that writes the timestamped capture of every attempt that did not
complete, for ``otel-liveness analyze`` (``Policy.capture_dir``; holds content, off by default).

Format (JSON Lines): ``{"t": s, "headers": status, "content_type": ..., "content_encoding": ...}``
(the two last only when the response had them), then one record per body read --
``{"t": s, "data": "<utf-8>"}`` or ``{"t": s, "b64": "<base64>"}`` -- then ``{"t": s, "eof": true}``
when the body ended, ``{"t": s, "error": "read_error"|"connect_error"}`` when the connection
failed, or ``{"t": s, "end": true}`` when the attempt ended otherwise (nothing was read after);
``t`` is seconds since the attempt started (its request being sent).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
from collections.abc import Iterator, Mapping, Sequence

from ..core.events import AttemptEnded, CaptureItem, Event
from ..core.outcome import AttemptOutcome

__all__ = ["FlightRecorder", "capture_lines"]

log = logging.getLogger("otel_liveness")


def capture_lines(capture: Sequence[tuple[float, CaptureItem]]) -> Iterator[str]:
    """The JSON Lines of a capture (see the module docstring)."""
    for t, data in capture:
        record: dict[str, object] = {"t": round(t, 6)}
        if data is None:
            record["eof"] = True
        elif isinstance(data, Mapping):
            record["headers"] = data["status"]
            for name in ("content-type", "content-encoding"):
                if name in data:
                    record[name.replace("-", "_")] = data[name]
        elif data == "end":
            record["end"] = True
        elif isinstance(data, str):
            record["error"] = data
        else:
            try:
                record["data"] = data.decode("utf-8")
            except UnicodeDecodeError:
                record["b64"] = base64.b64encode(data).decode()
        yield json.dumps(record)


class FlightRecorder:
    """Writes ``<request id>-<pid>-<random>-<attempt>.jsonl`` into ``directory``; a write that
    fails is logged and dropped, never raised into the application."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.written: list[str] = []

    def __call__(self, event: Event) -> None:
        if not isinstance(event, AttemptEnded) or event.capture is None:
            return
        record = event.record
        if record.outcome is AttemptOutcome.COMPLETED:
            return
        name = f"{record.request_id or 'attempt'}-{os.getpid()}-{random.getrandbits(32):08x}-{record.index}.jsonl"
        path = os.path.join(self.directory, name)
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                for line in capture_lines(event.capture):
                    fh.write(line + "\n")
        except OSError:
            log.warning("otel-liveness: could not write capture %s", path, exc_info=True)
            return
        self.written.append(path)
