#!/usr/bin/env python3
"""Generate otel_liveness/transport/_sync.py from _async.py (httpcore's approach).

    python scripts/unasync.py          # write
    python scripts/unasync.py --check  # exit 1 if _sync.py is out of date (run by the tests)
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "otel_liveness" / "transport" / "_async.py"
DST = ROOT / "otel_liveness" / "transport" / "_sync.py"

SUBS = [
    (r"The async driver \(source of truth; ``_sync.py`` is generated from it by ``scripts/unasync.py``\)\.",
     "The sync driver. GENERATED from ``_async.py`` by ``scripts/unasync.py``: do not edit."),
    (r"\bAsyncLivenessMixin\b", "SyncLivenessMixin"),
    (r"\bAsyncLivenessStream\b", "SyncLivenessStream"),
    (r"\bAsyncPassThrough\b", "SyncPassThrough"),
    (r"\bAsyncWakingBackend\b", "SyncWakingBackend"),
    (r"\bAsyncWakingStream\b", "SyncWakingStream"),
    (r"\bAsyncH2Pool\b", "SyncH2Pool"),
    (r"\bAsyncH2Stream\b", "SyncH2Stream"),
    (r"\bAsyncH2Wait\b", "SyncH2Wait"),
    (r"\bAsyncBackend\b", "SyncBackend"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\basync def __aiter__", "def __iter__"),
    (r"\basync def __aenter__", "def __enter__"),
    (r"\basync def __aexit__", "def __exit__"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\bhandle_async_request\b", "handle_request"),
    (r"\baclose\b", "close"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"\basync for\b", "for"),
    (r"\basync with\b", "with"),
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"_is_async = True", "_is_async = False"),
]


def generate() -> str:
    text = SRC.read_text()
    for pattern, repl in SUBS:
        text = re.sub(pattern, repl, text)
    return text


def main() -> int:
    out = generate()
    if "--check" in sys.argv:
        if not DST.exists() or DST.read_text() != out:
            print(f"{DST.relative_to(ROOT)} is out of date: run python scripts/unasync.py", file=sys.stderr)
            return 1
        return 0
    DST.write_text(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
