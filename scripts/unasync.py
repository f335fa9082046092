#!/usr/bin/env python3
"""Generate the sync driver, otel_liveness/transport/_sync/, from the async one, _async/
(httpcore's approach): every module of _async/ has its generated twin in _sync/.

    python scripts/unasync.py          # write
    python scripts/unasync.py --check  # exit 1 if any file of _sync/ is out of date, missing or
                                       # has no source in _async/ (run by the tests)
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "otel_liveness" / "transport" / "_async"
DST = ROOT / "otel_liveness" / "transport" / "_sync"

HEADER = "# GENERATED from _async/{name} by scripts/unasync.py: do not edit.\n"

SUBS = [
    (r"The async driver, one concept per module \(httpcore's layout\)\. This package is the source of\n"
     r"truth: ``_sync/`` is generated from it by ``scripts/unasync.py`` \(``--check`` in the tests\)\.",
     "The sync driver, one concept per module. GENERATED from ``_async/`` by ``scripts/unasync.py``:\n"
     "do not edit."),
    (r"\bAsyncLivenessMixin\b", "SyncLivenessMixin"),
    (r"\bAsyncLivenessStream\b", "SyncLivenessStream"),
    (r"\bAsyncPassThrough\b", "SyncPassThrough"),
    (r"\bAsyncResumingStream\b", "SyncResumingStream"),
    (r"\bAsyncWakingBackend\b", "SyncWakingBackend"),
    (r"\bAsyncWakingStream\b", "SyncWakingStream"),
    (r"\bAsyncWatchedConnection\b", "SyncWatchedConnection"),
    (r"\bAsyncH2Pool\b", "SyncH2Pool"),
    (r"\bAsyncH2Stream\b", "SyncH2Stream"),
    (r"\bAsyncH2Wait\b", "SyncH2Wait"),
    (r"\bAsyncH2Connection\b", "SyncH2Connection"),
    (r"\bAsyncPoolTransport\b", "SyncPoolTransport"),
    (r"\bAsyncConnectionPool\b", "ConnectionPool"),
    (r"\bAsyncHTTPProxy\b", "HTTPProxy"),
    (r"\bAsyncHTTPTransport\b", "HTTPTransport"),
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
    (r"\baread\b", "read"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"\basync for\b", "for"),
    (r"\basync with\b", "with"),
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"_is_async = True", "_is_async = False"),
]


def generate(source: pathlib.Path) -> str:
    text = source.read_text()
    for pattern, repl in SUBS:
        text = re.sub(pattern, repl, text)
    return HEADER.format(name=source.name) + text


def main() -> int:
    wanted = {DST / source.name: generate(source) for source in sorted(SRC.glob("*.py"))}
    if "--check" in sys.argv:
        stale = sorted(
            [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
            + [path for path in DST.glob("*.py") if path not in wanted]
        )
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run python scripts/unasync.py", file=sys.stderr)
        return 1 if stale else 0
    DST.mkdir(exist_ok=True)
    for path in DST.glob("*.py"):
        if path not in wanted:
            path.unlink()
    for path, text in wanted.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
