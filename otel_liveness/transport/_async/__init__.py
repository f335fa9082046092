"""The async driver, one concept per module (httpcore's layout). This package is the source of
truth: ``_sync/`` is generated from it by ``scripts/unasync.py`` (``--check`` in the tests).

- :mod:`.transport` -- the request loop: one request's attempts, each command of the engine executed;
- :mod:`.stream` -- the body the caller reads, judged read by read (and a resumable one's, resumed);
- :mod:`.network` -- the network backend whose reads wake at the engine's hints;
- :mod:`.http2` -- HTTP/2: each stream of a shared connection judged and ended on its own.

:mod:`.transport` also holds the inner transport built when none is given, over a connection pool
it owns (:class:`AsyncPoolTransport`).
"""

from .http2 import AsyncH2Pool, AsyncH2Stream, AsyncH2Wait
from .network import AsyncWakingBackend, AsyncWakingStream
from .stream import AsyncLivenessStream, AsyncPassThrough, AsyncResumingStream
from .transport import AsyncLivenessMixin, AsyncPoolTransport

__all__ = [
    "AsyncH2Pool",
    "AsyncH2Stream",
    "AsyncH2Wait",
    "AsyncLivenessMixin",
    "AsyncLivenessStream",
    "AsyncPassThrough",
    "AsyncPoolTransport",
    "AsyncResumingStream",
    "AsyncWakingBackend",
    "AsyncWakingStream",
]
