"""The sync driver. GENERATED from ``_async.py`` by ``scripts/unasync.py``: do not edit.

It owns every wait and every byte of I/O; all decisions come from :mod:`otel_liveness.core`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Callable, Iterable
from contextvars import ContextVar
from typing import Any

from ..core import errors as E
from ..core.clocks import RawSilenceExpired, SemanticTimeoutExpired, WallBudgetExpired
from ..core.engine import AttemptSession, RequestSession
from ..core.outcome import AttemptOutcome, StopReason
from ..core.policy import Policy
from ..core.providers import select_provider
from ..core.retry import Failure, FailureKind, GiveUp, Retry
from . import _common as C
from ._backends import EOF, TIMEOUT, SyncBackend
from ._family import Family

__all__ = ["SyncLivenessMixin", "SyncLivenessStream", "SyncPassThrough", "SyncWakingBackend", "SyncWakingStream"]

log = logging.getLogger("otel_liveness")
_TOLERANCE = 0.01  # a socket timeout this close to our deadline is ours


class SyncLivenessMixin:
    """The transport logic; :func:`otel_liveness.wrap` combines it with the family's base class."""

    _family: Family
    _is_async = False
    _stream_cls: type
    _passthrough_cls: type
    _backend = SyncBackend()

    def __init__(
        self,
        inner: Any = None,
        policy: Policy | None = None,
        *,
        hooks: Iterable[Callable[[Any], None]] = (),
        hosts: Iterable[str] | None = None,
        **transport_kwargs: Any,
    ) -> None:
        if inner is None:
            inner = self._family.default_transport(asynchronous=self._is_async, **transport_kwargs)
        elif transport_kwargs:
            raise TypeError(f"transport options {sorted(transport_kwargs)} apply only when no inner transport is given")
        self._inner = inner
        _install_wakeups(inner)
        self._policy = policy or Policy()
        self._hooks = list(hooks)
        self._exhausted = C.ExhaustedCache()
        self._hosts = None if hosts is None else frozenset(h.lower() for h in hosts)

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def inner(self) -> Any:
        return self._inner

    def add_hook(self, hook: Callable[[Any], None]) -> None:
        self._hooks.append(hook)

    def remove_hook(self, hook: Callable[[Any], None]) -> None:
        if hook in self._hooks:
            self._hooks.remove(hook)

    def __enter__(self) -> Any:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def close(self) -> None:
        self._inner.close()

    # -- the request ------------------------------------------------------------------------------

    def handle_request(self, request: Any) -> Any:
        if self._hosts is not None and request.url.host not in self._hosts:
            return self._inner.handle_request(request)  # not a provider: untouched
        policy = C.current_overrides(self._policy)
        key = None
        if C.is_sdk_retry(request.headers):
            key = self._exhausted.key(request)
            cached = self._exhausted.get(key)
            if cached is not None:
                log.info("otel-liveness: an SDK retry of an exhausted request was answered without a new attempt; "
                         "set max_retries=0 on the SDK client")
                raise cached
        backend = self._backend
        url = request.url
        streaming = C.is_streaming(request)
        session = RequestSession(
            policy,
            provider=policy.provider or select_provider(url.host, url.path),
            streaming=streaming,
            now=backend.now(),
            method=request.method,
            host=url.host,
            port=url.port,
            path=url.path,
            model=C.request_model(request),
            hooks=list(self._hooks) + list(_context_hooks(request)),
            on_hook_error=C.log_hook_error,
            carrier={k: request.headers[k] for k in C.TRACE_HEADERS if k in request.headers},
        )
        try:
            return self._run(request, session)
        except E.LivenessError as exc:
            if not isinstance(exc, E.StreamTruncated):
                if key is None:
                    key = self._exhausted.key(request)
                self._exhausted.put(key, exc)
            raise

    def _run(self, request: Any, session: RequestSession) -> Any:
        backend = self._backend
        family = self._family
        while True:
            attempt = session.attempt(backend.now())
            response = None
            try:
                response, failure = self._open(request, session, attempt)
            except BaseException as exc:
                self._abandon(session, attempt, response, exc)
                raise
            if failure is None:
                return response
            now = backend.now()
            if session.policy.shadow:
                # Observe only: the provider's error response goes to the caller as it came.
                attempt.finish(now, C.failure_outcome(failure), C.failure_error_type(failure))
                session.end(now, StopReason.REJECTED if C.failure_outcome(failure) is AttemptOutcome.REJECTED
                            else StopReason.EXHAUSTED, failure.cause)
                return self._final_response(request, session, response, mark=False)
            decision = session.failed(attempt, failure, now, wall_now=backend.wall_now(), jitter=backend.jitter())
            attempt.finish(now, C.failure_outcome(failure), C.failure_error_type(failure))
            C.write_capture(session.policy, attempt)
            if isinstance(decision, Retry):
                if response is not None:
                    with backend.shield():
                        response.close()
                remaining = session.wall_remaining(now)
                if remaining is not None and decision.delay >= remaining:
                    backend.sleep(remaining)
                    exc = C.wall_timeout(family, session, None, request)
                    session.end(backend.now(), StopReason.WALL_BUDGET, "wall_budget")
                    raise exc
                backend.sleep(decision.delay)
                continue
            if failure.kind is FailureKind.STATUS and response is not None:
                # The provider's own error response goes to the caller (its body explains it);
                # an exhausted retryable one is marked so that an SDK above does not retry again.
                stop = StopReason.REJECTED
                if isinstance(decision, GiveUp):
                    stop = StopReason.RATE_LIMITED if decision.rate_limited else StopReason.EXHAUSTED
                session.end(now, stop, failure.cause)
                return self._final_response(request, session, response, mark=isinstance(decision, GiveUp))
            if response is not None:
                with backend.shield():
                    response.close()
            exc = C.provider_error(family, session, failure, decision, request)
            session.end(now, C.stop_for(exc) if isinstance(decision, GiveUp) else StopReason.REJECTED, failure.cause)
            raise exc

    def _open(self, request: Any, session: RequestSession, attempt: AttemptSession) -> tuple[Any, Failure | None]:
        """Send one attempt and, for a streaming one, read ahead until content (or a failure).
        Returns (response for the caller or the failed inner response, failure or None). Reads
        made meanwhile wake for this attempt's notices (see SyncWakingStream)."""
        token = _READING.set(attempt)
        try:
            return self._send_and_read_ahead(request, session, attempt)
        finally:
            _READING.reset(token)

    def _send_and_read_ahead(self, request: Any, session: RequestSession,
                                   attempt: AttemptSession) -> tuple[Any, Failure | None]:
        backend = self._backend
        family = self._family
        policy = session.policy
        enforce = not policy.shadow
        req = self._prepare(request, session, attempt, enforce)
        attempt.sent(backend.now())
        deadline = attempt.deadline() if enforce else None
        scoped = enforce and deadline is not None and self._scoped(session)
        try:
            with C.send_context(self._hooks):
                inner = backend.send(self._inner, req, deadline - backend.now() if scoped else None)
        except family.module.TimeoutException as exc:
            if not enforce:
                raise  # shadow mode: the caller sees what it would have seen without us
            if isinstance(exc, family.module.ConnectTimeout) or isinstance(exc, family.module.PoolTimeout):
                return None, Failure(FailureKind.CONNECT_ERROR, attempt.clock.phase)
            inner = TIMEOUT if self._ours(attempt, deadline) else None
            if inner is None:
                return None, Failure(FailureKind.READ_ERROR, attempt.clock.phase)
        except (family.module.ConnectError, family.module.UnsupportedProtocol):
            if not enforce:
                raise
            return None, Failure(FailureKind.CONNECT_ERROR, attempt.clock.phase)
        except family.module.TransportError:
            if not enforce:
                raise
            return None, Failure(FailureKind.READ_ERROR, attempt.clock.phase)
        if inner is TIMEOUT:
            return None, self._expired(request, session, attempt, None)
        now = backend.now()
        headers = {k.lower(): v for k, v in inner.headers.items()}
        attempt.headers(now, inner.status_code, headers)
        if inner.status_code >= 400 or (headers.get("x-should-retry") == "true" and inner.status_code >= 300):
            return inner, Failure(FailureKind.STATUS, attempt.clock.phase, status=inner.status_code, headers=headers)
        iterator = inner.stream.__iter__()
        first = b""
        if attempt.streaming and enforce:
            try:
                while not attempt.committed and not attempt.done:
                    chunk = self._read(iterator, attempt, enforce)
                    if chunk is TIMEOUT:
                        return inner, self._expired(request, session, attempt, None)
                    now = backend.now()
                    terminal = attempt.poll(now)
                    if terminal is not None:
                        return inner, self._expired(request, session, attempt, terminal)
                    if chunk is EOF:
                        first += attempt.eof(now)
                        break
                    first += attempt.feed(now, chunk)
                    if attempt.failure is not None:
                        break
            except family.module.TransportError:
                return inner, Failure(FailureKind.READ_ERROR, attempt.clock.phase)
            if attempt.failure is not None and not attempt.committed:
                return inner, attempt.failure
        stream = self._stream_cls(self, request, session, attempt, inner, iterator, first)
        return self._response(request, session, inner, stream), None

    def _prepare(self, request: Any, session: RequestSession, attempt: AttemptSession, enforce: bool) -> Any:
        """The request as sent for this attempt. The raw clock rides on the socket's per-read
        timeout (httpcore applies ``extensions["timeout"]["read"]`` to every read, headers
        included): nothing polls, no timer per read. Headers and body are the caller's, untouched."""
        extensions = dict(request.extensions)
        if enforce:
            timeouts = dict(extensions.get("timeout") or {})
            bounds = [b for b in (timeouts.get("read"), session.raw_idle, session.wall_remaining(self._backend.now()))
                      if b is not None]
            if bounds:
                timeouts["read"] = max(min(bounds), 0.001)
            extensions["timeout"] = timeouts
        headers = request.headers
        if attempt.inject:
            headers = headers.copy()
            headers.update(attempt.inject)
        return self._family.module.Request(
            request.method, request.url, headers=headers, stream=request.stream, extensions=extensions
        )

    def _scoped(self, session: RequestSession) -> bool:
        """Deadlines the socket timeout cannot express (a wall budget, a semantic timeout) are
        enforced by a cancel scope around each read where the backend has one (async)."""
        return self._backend.has_cancel_scopes and (
            session.wall_deadline is not None or session.policy.semantic_timeout is not None
        )

    def _ours(self, attempt: AttemptSession, deadline: float | None) -> bool:
        return deadline is not None and self._backend.now() >= deadline - _TOLERANCE

    def _read(self, iterator: Iterator[bytes], attempt: AttemptSession, enforce: bool) -> Any:
        backend = self._backend
        timeout = None
        if enforce and self._scoped(attempt.session):
            deadline = attempt.deadline()
            timeout = None if deadline is None else deadline - backend.now()
        try:
            return backend.read(iterator, timeout, self._family)
        except self._family.module.TimeoutException:
            if enforce and self._ours(attempt, attempt.deadline()):
                return TIMEOUT
            raise

    def _expired(self, request: Any, session: RequestSession, attempt: AttemptSession,
                 terminal: RawSilenceExpired | SemanticTimeoutExpired | WallBudgetExpired | None) -> Failure:
        """A clock ran out before content: a retryable failure, or the wall budget (raised)."""
        now = self._backend.now()
        if terminal is None:
            terminal = attempt.expired(now)
        if isinstance(terminal, WallBudgetExpired):
            attempt.verdict(now, AttemptOutcome.WALL_BUDGET, enforced=True)
            attempt.finish(now, AttemptOutcome.WALL_BUDGET, "wall_budget")
            C.write_capture(session.policy, attempt)
            exc = C.wall_timeout(self._family, session, attempt, request)
            session.end(now, StopReason.WALL_BUDGET, "wall_budget")
            raise exc
        if isinstance(terminal, SemanticTimeoutExpired):
            attempt.verdict(now, AttemptOutcome.SEMANTIC_TIMEOUT, enforced=True)
            return Failure(FailureKind.SEMANTIC_TIMEOUT, terminal.phase, attempt.committed)
        attempt.verdict(now, AttemptOutcome.RAW_SILENCE, enforced=True)
        phase = terminal.phase if terminal is not None else attempt.clock.phase
        return Failure(FailureKind.RAW_SILENCE, phase, attempt.committed)

    def _abandon(self, session: RequestSession, attempt: AttemptSession, response: Any, exc: BaseException) -> None:
        """An exception escaped an attempt (cancellation, malformed stream, host error)."""
        now = self._backend.now()
        if isinstance(exc, E.WallTimeout):
            return  # already recorded
        if isinstance(exc, E.MalformedStream):
            attempt.finish(now, AttemptOutcome.MALFORMED, "malformed")
            session.end(now, StopReason.MALFORMED, "malformed")
        elif isinstance(exc, self._family.module.TransportError):  # shadow mode: raised as it came
            kind = FailureKind.CONNECT_ERROR if isinstance(exc, self._family.module.ConnectError) else FailureKind.READ_ERROR
            attempt.finish(now, AttemptOutcome.CONNECTION_ERROR, kind.value)
            session.end(now, StopReason.EXHAUSTED, kind.value)
        else:
            attempt.finish(now, AttemptOutcome.CANCELLED, type(exc).__name__)
            session.end(now, StopReason.CANCELLED, "cancelled")
        if response is not None:
            with self._backend.shield():
                response.close()

    def _response(self, request: Any, session: RequestSession, inner: Any, stream: Any,
                  replace: dict[str, str] | None = None) -> Any:
        """The response the caller sees: the attempt's status and headers (``replace`` overrides
        headers by name), ``stream`` as body, the outcome report in ``extensions["liveness"]``."""
        extensions = dict(inner.extensions)
        extensions["liveness"] = session.report_dict = session.report.to_dict()  # type: ignore[attr-defined]
        headers = list(inner.headers.multi_items())
        if replace:
            headers = [(k, v) for k, v in headers if k.lower() not in replace] + list(replace.items())
        return self._family.module.Response(
            inner.status_code, headers=headers, stream=stream, extensions=extensions, request=request
        )

    def _final_response(self, request: Any, session: RequestSession, inner: Any, *, mark: bool) -> Any:
        replace = {"x-should-retry": "false"} if mark and session.policy.mark_exhausted_responses else None
        response = self._response(request, session, inner, self._passthrough_cls(inner), replace)
        _sync_report(session)
        return response


def _context_hooks(request: Any) -> Iterable[Callable[[Any], None]]:
    hook = request.extensions.get("liveness.hook") if hasattr(request, "extensions") else None
    return (hook,) if callable(hook) else ()


def _sync_report(session: RequestSession) -> None:
    """Refresh the dict published on ``response.extensions["liveness"]`` in place."""
    target = getattr(session, "report_dict", None)
    if target is not None:
        target.clear()
        target.update(session.report.to_dict())


class SyncPassThrough:
    """The body of a provider error response: the caller reads it as is."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner.stream:
            yield chunk

    def close(self) -> None:
        self._inner.close()


class SyncLivenessStream:
    """The body the caller reads: released bytes of the one visible attempt, with the clocks
    still running. Ends the attempt (and the request) when exhausted, closed or failed."""

    def __init__(self, transport: SyncLivenessMixin, request: Any, session: RequestSession,
                 attempt: AttemptSession, inner: Any, iterator: Any, first: bytes) -> None:
        self._t = transport
        self._request = request
        self._session = session
        self._attempt = attempt
        self._inner = inner
        self._iterator = iterator
        self._first = first
        self._closed = False
        self._observed = False  # shadow mode: a terminal verdict was reported
        # The connection's reads wake for this attempt's notices while the caller reads the body.
        network = inner.extensions.get("network_stream") if hasattr(inner, "extensions") else None
        self._network = network if isinstance(network, SyncWakingStream) else None
        if self._network is not None:
            self._network.watch = attempt

    def __iter__(self) -> Iterator[bytes]:
        t = self._t
        backend = t._backend
        family = t._family
        attempt = self._attempt
        session = self._session
        enforce = not session.policy.shadow
        request = self._request
        timeout_error = family.module.TimeoutException
        transport_error = family.module.TransportError
        clock = backend.now
        try:
            if self._first:
                first, self._first = self._first, b""
                yield first
            iterator = self._iterator
            # The steady lane (core.lane): a read holding one content frame with nothing due is
            # counted there and released as is; the attempt applies the counts before it answers
            # anything else. Every other read takes the general path (_general).
            steady = attempt.lane().step
            if not (enforce and t._scoped(session)):
                # The common case: the socket's read timeout is the raw clock, so a plain loop
                # over the body; a timeout or transport error ends it (handled below).
                try:
                    for chunk in iterator:
                        now = clock()
                        if steady(chunk, now):
                            yield chunk
                            continue
                        release = self._general(chunk, now, enforce)
                        if release:
                            yield release
                        self._after_release(enforce)
                except timeout_error as exc:
                    if isinstance(exc, E.LivenessError):
                        raise
                    if enforce and t._ours(attempt, attempt.deadline()):  # the raw clock ran out
                        now = clock()
                        raise self._terminal(attempt.expired(now), now) from None
                    self._lost_after_end(exc, enforce)  # the caller's own read timeout
                except transport_error as exc:
                    if isinstance(exc, E.LivenessError):
                        raise
                    self._lost_after_end(exc, enforce)
            else:  # a wall budget or semantic timeout: each read in a cancel scope at the deadline
                while True:
                    try:
                        chunk = t._read(iterator, attempt, enforce)
                    except transport_error as exc:
                        self._lost_after_end(exc, enforce)
                        chunk = EOF
                    now = clock()
                    if steady(chunk, now):
                        yield chunk
                        continue
                    if chunk is TIMEOUT:
                        raise self._terminal(attempt.expired(now), now)
                    if chunk is EOF:
                        break
                    release = self._general(chunk, now, enforce)
                    if release:
                        yield release
                    self._after_release(enforce)
            # The body ended (or, after the end frame, stalled or broke: nothing was lost).
            now = clock()
            terminal = attempt.poll(now)
            if terminal is not None:
                if enforce:
                    raise self._terminal(terminal, now)
                self._observe(terminal, now)
            tail = attempt.eof(now)
            if tail:
                yield tail
            failure = attempt.failure
            if failure is not None and enforce:
                attempt.verdict(now, AttemptOutcome.TRUNCATED, enforced=True)
                raise self._fail(C.truncation(family, attempt, failure.cause, request, failure.error_type), failure.cause)
            if failure is not None:  # shadow: report what would have happened, enforce nothing
                self._observe_end(now, failure)
                return
            self._complete(now)

        except E.LivenessError as exc:
            if not attempt.ended:
                self._fail(exc, "malformed" if isinstance(exc, E.MalformedStream) else "error")
            raise
        except BaseException as exc:
            if not attempt.ended:
                now = backend.now()
                if isinstance(exc, family.module.TransportError):  # shadow mode / JSON body: as raised
                    failure = Failure(FailureKind.READ_ERROR, attempt.clock.phase, attempt.committed)
                    self._observe_end(now, failure)
                else:
                    attempt.finish(now, AttemptOutcome.CANCELLED, type(exc).__name__)
                    session.end(now, StopReason.CANCELLED, "cancelled")
                    _sync_report(session)
            raise
        finally:
            self._unwatch()
            with backend.shield():
                self._inner.close()

    def _unwatch(self) -> None:
        network, self._network = self._network, None
        if network is not None and network.watch is self._attempt:
            network.watch = None  # a pooled connection must not keep this attempt (and its prefix)

    def _general(self, chunk: bytes, now: float, enforce: bool) -> bytes:
        """A read the steady lane did not take: what fell due before it returned comes first
        (notices, and in shadow mode the verdict that would have ended the attempt), then the
        read itself. Returns the bytes to release; re-arms the lane."""
        attempt = self._attempt
        terminal = attempt.poll(now)
        if terminal is not None:
            if enforce:
                raise self._terminal(terminal, now)
            self._observe(terminal, now)
        release = attempt.feed(now, chunk)
        attempt.lane()
        return release

    def _after_release(self, enforce: bool) -> None:
        """An in-band error after content: the bytes before it were released, now the truncation."""
        failure = self._attempt.failure
        if failure is not None and enforce and failure.kind is FailureKind.ERROR_EVENT:
            raise self._fail(C.truncation(self._t._family, self._attempt, failure.cause, self._request,
                                          failure.error_type), failure.cause)

    def _lost_after_end(self, exc: BaseException, enforce: bool) -> None:
        """A read failed. After the end frame nothing was lost: return, and the body ends as
        complete. Before it, the caller's content is cut: a truncation (raised)."""
        attempt = self._attempt
        if not enforce or not attempt.streaming:
            raise exc
        if not attempt.done:
            raise self._fail(C.truncation(self._t._family, attempt, "read_error", self._request), "read_error") from exc

    def _observe(self, terminal: Any, now: float) -> None:
        if not self._observed:
            self._observed = True
            self._attempt.verdict(now, _OUTCOME[type(terminal)], enforced=False)

    def _terminal(self, terminal: Any, now: float) -> E.LivenessError:
        family = self._t._family
        attempt = self._attempt
        if isinstance(terminal, WallBudgetExpired):
            attempt.verdict(now, AttemptOutcome.WALL_BUDGET, enforced=True)
            return self._fail(C.wall_timeout(family, self._session, attempt, self._request), "wall_budget")
        cause = "semantic_timeout" if isinstance(terminal, SemanticTimeoutExpired) else "raw_silence"
        attempt.verdict(now, AttemptOutcome.SEMANTIC_TIMEOUT if cause == "semantic_timeout" else AttemptOutcome.RAW_SILENCE,
                        enforced=True)
        return self._fail(C.truncation(family, attempt, cause, self._request), cause)

    def _fail(self, exc: E.LivenessError, error_type: str) -> E.LivenessError:
        now = self._t._backend.now()
        attempt = self._attempt
        if isinstance(exc, E.WallTimeout):
            outcome = AttemptOutcome.WALL_BUDGET
        elif isinstance(exc, E.MalformedStream):
            outcome = AttemptOutcome.MALFORMED
        else:
            outcome = AttemptOutcome.TRUNCATED
        attempt.finish(now, outcome, error_type)
        C.write_capture(self._session.policy, attempt)
        self._session.end(now, C.stop_for(exc), error_type)
        _sync_report(self._session)
        return exc

    def _observe_end(self, now: float, failure: Failure) -> None:
        attempt = self._attempt
        attempt.finish(now, C.failure_outcome(failure), C.failure_error_type(failure))
        C.write_capture(self._session.policy, attempt)
        self._session.end(now, StopReason.TRUNCATED if failure.committed else StopReason.EXHAUSTED, failure.cause)
        _sync_report(self._session)

    def _complete(self, now: float) -> None:
        attempt = self._attempt
        attempt.finish(now, AttemptOutcome.COMPLETED)
        if attempt.record.outcome is not AttemptOutcome.COMPLETED:  # pragma: no cover
            return
        self._session.end(now, StopReason.COMPLETED)
        _sync_report(self._session)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unwatch()
        attempt = self._attempt
        if not attempt.ended:
            now = self._t._backend.now()
            outcome = AttemptOutcome.COMPLETED if attempt.done else AttemptOutcome.CANCELLED
            attempt.finish(now, outcome, None if attempt.done else "closed")
            self._session.end(now, StopReason.COMPLETED if attempt.done else StopReason.CANCELLED,
                              None if attempt.done else "closed")
            _sync_report(self._session)
        with self._t._backend.shield():
            self._inner.close()


_OUTCOME = {
    RawSilenceExpired: AttemptOutcome.RAW_SILENCE,
    SemanticTimeoutExpired: AttemptOutcome.SEMANTIC_TIMEOUT,
    WallBudgetExpired: AttemptOutcome.WALL_BUDGET,
}


# -- notices during total silence -------------------------------------------------------------
#
# A read that waits on a silent socket gives the driver no control, so a notice would wait for
# the next byte (or the raw verdict). httpcore closes the connection on any exception from a read
# it makes, so the wait cannot be cut short above it; below it, at the network stream, it can: a
# socket-level read that times out has consumed nothing and may simply be made again. So the
# inner transport's connection pool gets a network backend whose streams, while an attempt is
# reading (set by the driver: _READING during send and read-ahead, ``watch`` during the body),
# wake at that attempt's next notice deadline, deliver the notice in the reader's own thread or
# task, and go back to waiting for the rest of the read's own timeout; at the attempt's semantic
# timeout the read ends as a timeout, which the driver judges as that verdict (the sync driver
# has no cancel scope for it). No thread, no task, no timer; a read with nothing due before its
# deadline is passed through unchanged.

_READING: ContextVar[Any] = ContextVar("otel_liveness_reading", default=None)
_INF = float("inf")


def _install_wakeups(inner: Any) -> None:
    """Wrap the network backend of ``inner``'s httpcore connection pool (a private attribute of
    httpx's and httpx2's transports); transports without one (mocks, custom) are left as they are:
    their notices then arrive with the next read, as before."""
    pool = getattr(inner, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None or isinstance(backend, SyncWakingBackend):
        return
    try:
        timeout_error = importlib.import_module(type(backend).__module__.partition(".")[0]).ReadTimeout
    except (ImportError, AttributeError):  # pragma: no cover - not an httpcore backend
        return
    pool._network_backend = SyncWakingBackend(backend, timeout_error)


class SyncWakingBackend:
    """An httpcore network backend whose streams are :class:`SyncWakingStream`."""

    def __init__(self, inner: Any, timeout_error: type[BaseException]) -> None:
        self._inner = inner
        self._timeout_error = timeout_error

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> Any:
        stream = self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
        return SyncWakingStream(stream, self._timeout_error)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        stream = self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return SyncWakingStream(stream, self._timeout_error)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class SyncWakingStream:
    """A network stream whose reads wake at the reading attempt's notice deadlines, and end at its
    semantic timeout (which a socket timeout cannot express: it moves with content). It waits until
    the attempt's ``wake_hint``, a time no later than its next notice (that time only ever moves
    later, so a stale hint can only wake a read early: it then delivers what is due, refreshes
    the hint and goes back to waiting). A read that gets data first costs a clock read."""

    __slots__ = ("_inner", "_timeout_error", "watch")

    def __init__(self, inner: Any, timeout_error: type[BaseException]) -> None:
        self._inner = inner
        self._timeout_error = timeout_error
        self.watch: AttemptSession | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        attempt = _READING.get() or self.watch
        if attempt is None:
            return self._inner.read(max_bytes, timeout)
        clock = SyncBackend.now
        now = clock()
        deadline = _INF if timeout is None else now + timeout
        while True:
            wake = attempt.wake_hint
            stop = attempt.stop_hint
            if stop < wake:
                wake = stop
            if wake >= deadline:
                return self._inner.read(max_bytes, None if timeout is None else max(deadline - now, 0.001))
            try:
                return self._inner.read(max_bytes, max(wake - now, 0.001))
            except self._timeout_error:
                now = clock()
                if now >= deadline:
                    raise
                attempt.notices(now)
                if attempt.stop_hint <= now:  # the semantic timeout ran out: the read ends, the driver judges it
                    raise
                if attempt.wake_hint <= now:  # due, but a terminal deadline comes first: the read's own timeout decides
                    return self._inner.read(max_bytes, max(deadline - now, 0.001))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        stream = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return SyncWakingStream(stream, self._timeout_error)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)
