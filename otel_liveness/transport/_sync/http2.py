# GENERATED from _async/http2.py by scripts/unasync.py: do not edit.
"""HTTP/2 on a shared connection: each stream judged on its own (docs/http2.md).

:func:`install_wakeups` gives the inner transport's connection pool the waking network backend
(:mod:`.network`) and makes it read its HTTP/2 responses through :class:`SyncH2Stream`, which
marks each read with :data:`~.network.H2_READ`, bounds it (on asyncio/trio) by a cancel scope at
the stream's own deadline -- for a reader that waits for the read lock while a sibling reads --
turns a deadline into the HTTP library's read timeout (the driver then asks the engine for the
verdict), and resets the HTTP/2 stream (RST_STREAM) when it is closed before its end, so the
provider stops generating and the connection's flow-control window is not spent on a stream
nobody reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from ...core.clocks import stop_at
from ...core.engine import Engine
from .._backends import SyncBackend
from .network import H2_READ, READING, SyncH2Wait, SyncWakingBackend, SyncWakingStream, StreamDeadline

__all__ = ["SyncH2Pool", "SyncH2Stream", "install_wakeups"]

_H2_CANCEL = 0x8  # RST_STREAM error code CANCEL (RFC 9113, 7)
#: How much later than the stream's deadline the cancel scope fires: the stream's own read (when it
#: is the one reading) ends it first, at the deadline, with nothing to cancel.
_SCOPE_GRACE = 0.02


def install_wakeups(inner: Any) -> None:
    """Wrap the network backend of ``inner``'s httpcore connection pool (a private attribute of
    httpx's and httpx2's transports), and make the pool read its HTTP/2 responses through
    :class:`SyncH2Stream`; transports without one (mocks, custom) are left as they are: their
    deadlines are then the socket timeout's, and notices arrive with the next read."""
    pool: Any = getattr(inner, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None or isinstance(backend, SyncWakingBackend):
        return
    try:
        timeout_error = importlib.import_module(type(backend).__module__.partition(".")[0]).ReadTimeout
    except (ImportError, AttributeError):  # pragma: no cover - not an httpcore backend
        return
    pool._network_backend = SyncWakingBackend(backend, timeout_error)
    try:
        pool.__class__ = _h2_pool_class(type(pool))
    except TypeError:  # pragma: no cover - a pool class that cannot be extended: HTTP/1.1 is unaffected
        return
    pool._liveness_timeout_error = timeout_error


_H2_POOLS: dict[type, type] = {}


def _h2_pool_class(cls: type) -> type:
    """``cls`` (an httpcore connection pool class) whose responses on HTTP/2 are
    :class:`SyncH2Stream`; HTTP/1.1 responses are returned as they come."""
    if issubclass(cls, SyncH2Pool):
        return cls
    sub = _H2_POOLS.get(cls)
    if sub is None:
        sub = _H2_POOLS[cls] = type(cls.__name__, (SyncH2Pool, cls), {"__module__": cls.__module__})
    return sub


class SyncH2Pool:
    """Mixed into the inner transport's connection pool class (see :func:`_h2_pool_class`)."""

    _liveness_timeout_error: type[BaseException]

    def handle_request(self, request: Any) -> Any:
        engine = READING.get()
        if engine is None:  # not a request the engine judges
            return super().handle_request(request)  # type: ignore[misc]
        wait = SyncH2Wait(engine, SyncBackend.now())  # joins its connection's waits when it writes there
        token = H2_READ.set(wait)
        try:
            response = super().handle_request(request)  # type: ignore[misc]
        except BaseException as exc:
            H2_READ.reset(token)
            wait.leave()
            if wait.network is not None:  # ended before its response on HTTP/2: reset what httpcore forgot
                _reset_forgotten(self, wait.network, request)
            if isinstance(exc, StreamDeadline):
                raise self._liveness_timeout_error("the stream's deadline passed (HTTP/2)") from None
            raise
        H2_READ.reset(token)
        wait.leave()
        if response.extensions.get("http_version") == b"HTTP/2":
            network = response.extensions.get("network_stream")
            waits = network.waits if isinstance(network, SyncWakingStream) else None
            response.stream = SyncH2Stream(response.stream, engine, request, self._liveness_timeout_error, waits)
        return response


def _reset_forgotten(pool: Any, network: SyncWakingStream, request: Any) -> None:
    """RST_STREAM (CANCEL) for every stream of the HTTP/2 connection on ``network`` that httpcore
    has forgotten while it is still open (a stream ended before its response: httpcore only drops
    it), so that the provider stops and its bytes do not use up the connection's window. Through
    private attributes of httpcore's connections: where they are missing, nothing is done."""
    for connection in list(getattr(pool, "connections", ())):
        conn: Any = getattr(connection, "_connection", None)
        if getattr(conn, "_network_stream", None) is not network:
            continue
        known = getattr(conn, "_events", None)
        if known is not None:
            _cancel_streams(conn, request, _forgotten(known))
        return


def _forgotten(known: Any) -> Callable[[Any], list[int]]:
    """The open client streams of an h2 state that httpcore no longer knows (``known``: its own)."""
    return lambda state: [stream_id for stream_id, stream in list(state.streams.items())
                          if stream_id % 2 and stream_id not in known and not stream.closed]


def _cancel_streams(conn: Any, request: Any, pick: Callable[[Any], Iterable[int]]) -> None:
    """RST_STREAM (CANCEL) for the streams ``pick`` names from the h2 state of ``conn`` (an httpcore
    HTTP/2 connection), written out at once. httpcore has no public way to reset one stream: this
    is the one place that writes through its privates (``_h2_state``, ``_state_lock``,
    ``_write_outgoing_data``); tests/test_http2_privates.py fails when httpcore changes them. Where
    they are missing, or the connection is gone, nothing is sent."""
    state = getattr(conn, "_h2_state", None)
    if state is None:
        return
    with SyncBackend.shield():
        try:
            with conn._state_lock:
                for stream_id in pick(state):
                    state.reset_stream(stream_id, _H2_CANCEL)
            conn._write_outgoing_data(request)
        except Exception:  # noqa: BLE001 - already ended or reset by the peer, or the connection is gone
            return


class SyncH2Stream:
    """The body of a response on an HTTP/2 connection, read one stream-level read at a time: each
    marked with ``H2_READ`` (the engine and when this stream's wait began, so its silence is its
    own, whatever its siblings send) and bounded by the stream's own deadline; closed before its
    end, the HTTP/2 stream is reset."""

    def __init__(self, inner: Any, engine: Engine, request: Any, timeout_error: type[BaseException],
                 waits: set[SyncH2Wait] | None) -> None:
        self._inner = inner
        self._waits = waits
        self._iterator: Any = None
        self._engine = engine
        self._request = request
        self._timeout_error = timeout_error
        self._ended = False

    def __iter__(self) -> SyncH2Stream:
        return self

    def __next__(self) -> bytes:
        engine = self._engine
        clock = SyncBackend.now
        start = clock()
        if self._iterator is None:
            self._iterator = self._inner.__iter__()
        if engine.woke(start, start):  # delivers what is due, refreshes the hints
            self._reset()
            raise self._timeout_error("the stream's deadline passed (HTTP/2)")
        deadline = stop_at(engine.stop_hint, engine.raw_hint, start)
        wait = SyncH2Wait(engine, start)
        token = H2_READ.set(wait)
        chunk: bytes | None = None
        try:
            scope: Any = SyncBackend.scope_after(deadline - start + _SCOPE_GRACE)
            with scope:
                if self._waits is not None:
                    wait.join(self._waits)
                try:
                    chunk = self._iterator.__next__()
                except StopIteration:
                    self._ended = True
                    raise
            if scope.cancelled_caught:
                # The scope ended a read that waited for the connection while a sibling read it:
                # httpcore closed the stream under it; the engine gives the verdict.
                engine.woke(clock(), start)
        except StreamDeadline:
            pass  # the stream's own read ended at its deadline: the engine has the verdict
        finally:
            H2_READ.reset(token)
            wait.leave()
        if chunk is not None:
            return chunk
        self._reset()
        raise self._timeout_error("the stream's deadline passed (HTTP/2)")

    def close(self) -> None:
        if not self._ended:
            self._reset()
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()

    def _reset(self) -> None:
        """RST_STREAM (CANCEL) for a stream closed before its end, through the httpcore connection
        that carries it (private attributes: where they are missing, the stream is only closed)."""
        if self._ended:
            return
        self._ended = True
        stream = getattr(self._inner, "_stream", None)
        conn: Any = getattr(stream, "_connection", None)
        stream_id = getattr(stream, "_stream_id", None)
        if stream_id is not None:
            _cancel_streams(conn, self._request, lambda state: (stream_id,))

