# GENERATED from _async/__init__.py by scripts/unasync.py: do not edit.
"""The sync driver, one concept per module. GENERATED from ``_async/`` by ``scripts/unasync.py``:
do not edit.

- :mod:`.transport` -- the request loop: one request's attempts, each command of the engine executed;
- :mod:`.stream` -- the body the caller reads, judged read by read (and a resumable one's, resumed);
- :mod:`.network` -- the network backend whose reads wake at the engine's hints;
- :mod:`.http2` -- HTTP/2: each stream of a shared connection judged and ended on its own.

:mod:`.transport` also holds the inner transport built when none is given, over a connection pool
it owns (:class:`SyncPoolTransport`).
"""

from .http2 import SyncH2Pool, SyncH2Stream, SyncH2Wait
from .network import SyncWakingBackend, SyncWakingStream
from .stream import SyncLivenessStream, SyncPassThrough, SyncResumingStream
from .transport import SyncLivenessMixin, SyncPoolTransport

__all__ = [
    "SyncH2Pool",
    "SyncH2Stream",
    "SyncH2Wait",
    "SyncLivenessMixin",
    "SyncLivenessStream",
    "SyncPassThrough",
    "SyncPoolTransport",
    "SyncResumingStream",
    "SyncWakingBackend",
    "SyncWakingStream",
]
