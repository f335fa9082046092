"""Helpers shared by the sync and async drivers (no waiting happens here)."""

from __future__ import annotations

import base64
import contextlib
import contextvars
import hashlib
import json
import logging
import os
import random
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from ..core import errors as E
from ..core.engine import AttemptSession, RequestSession
from ..core.outcome import AttemptOutcome, StopReason
from ..core.policy import Policy
from ..core.retry import Failure, FailureKind, GiveUp
from ._family import Family

__all__ = [
    "ExhaustedCache",
    "current_overrides",
    "failure_outcome",
    "is_streaming",
    "liveness_policy",
    "provider_error",
    "truncation",
    "write_capture",
]

log = logging.getLogger("otel_liveness")

_OVERRIDES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("otel_liveness_policy", default=None)


@contextlib.contextmanager
def liveness_policy(policy: Policy | None = None, **changes: Any) -> Iterator[None]:
    """Override the transport's policy for the requests made inside the block, through any SDK::

        with otel_liveness.liveness_policy(wall_timeout=120, semantic_notice_interval=10):
            client.messages.create(...)

    Pass a whole ``Policy`` or field changes (validated now, applied on top of each transport's
    policy). Nesting composes; the context variable follows asyncio tasks and trio.
    """
    if policy is not None and not isinstance(policy, Policy):
        raise TypeError("liveness_policy() takes a Policy or keyword changes")
    Policy().replace(**changes)  # validate the field names and values now, not at request time
    outer = _OVERRIDES.get() or {}
    merged = dict(outer)
    if policy is not None:
        merged = {"__policy__": policy}
    merged.update(changes)
    token = _OVERRIDES.set(merged)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def current_overrides(base: Policy) -> Policy:
    overrides = _OVERRIDES.get()
    if not overrides:
        return base
    changes = dict(overrides)
    policy = changes.pop("__policy__", base)
    return policy.replace(**changes) if changes else policy


def is_streaming(request: Any) -> bool:
    """Known before headers: ``Accept: text/event-stream`` or a JSON body with ``"stream": true``."""
    if "text/event-stream" in request.headers.get("accept", ""):
        return True
    try:
        body = request.content
    except Exception:  # a streaming request body that was not read: not a JSON completion call
        return False
    return b'"stream":true' in body or b'"stream": true' in body


def request_model(request: Any) -> str | None:
    try:
        body = request.content
    except Exception:
        return None
    if not body or body[:1] != b"{" or b'"model"' not in body:
        return None
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError):
        return None
    return model[:128] if isinstance(model, str) else None


_FAILURE_OUTCOME = {
    FailureKind.CONNECT_ERROR: AttemptOutcome.CONNECTION_ERROR,
    FailureKind.READ_ERROR: AttemptOutcome.CONNECTION_ERROR,
    FailureKind.RAW_SILENCE: AttemptOutcome.RAW_SILENCE,
    FailureKind.SEMANTIC_TIMEOUT: AttemptOutcome.SEMANTIC_TIMEOUT,
    FailureKind.ERROR_EVENT: AttemptOutcome.PROVIDER_ERROR,
    FailureKind.EOF: AttemptOutcome.PROVIDER_ERROR,
}


def failure_outcome(failure: Failure) -> AttemptOutcome:
    if failure.committed:
        return AttemptOutcome.TRUNCATED
    if failure.kind is FailureKind.STATUS:
        status = failure.status or 0
        if status == 429:
            return AttemptOutcome.RATE_LIMITED
        if status in (408, 409) or status >= 500 or (failure.headers or {}).get("x-should-retry") == "true":
            return AttemptOutcome.PROVIDER_ERROR
        return AttemptOutcome.REJECTED
    if failure.kind is FailureKind.ERROR_EVENT and failure.error_type in ("rate_limit_error", "rate_limit_exceeded"):
        return AttemptOutcome.RATE_LIMITED
    return _FAILURE_OUTCOME[failure.kind]


def failure_error_type(failure: Failure) -> str:
    """The ``error.type`` value: the in-band error type, the status code, or the failure kind."""
    if failure.kind is FailureKind.STATUS:
        return str(failure.status)
    if failure.kind is FailureKind.ERROR_EVENT:
        return failure.error_type or "error_event"
    return failure.kind.value


def provider_error(family: Family, session: RequestSession, failure: Failure, decision: Any, request: Any) -> E.LivenessError:
    attempts = len(session.report.attempts)
    rate_limited = isinstance(decision, GiveUp) and decision.rate_limited
    cls = E.RateLimited if rate_limited else E.ProviderError
    verb = "rejected the request" if not isinstance(decision, GiveUp) else "failed"
    message = f"provider {verb} after {attempts} attempt{'s' if attempts != 1 else ''}; last cause: {failure.cause}"
    return family.error(
        cls, failure.kind.value, message, request,
        attempts=attempts, last_cause=failure.cause, status=failure.status, error_type=failure.error_type,
    )


def truncation(family: Family, attempt: AttemptSession, cause: str, request: Any, error_type: str | None = None) -> E.LivenessError:
    from ..core.anthropic import decode_partial

    prefix = attempt.prefix
    partial = decode_partial(prefix) if attempt.session.profile.name == "anthropic" else None
    exc = family.error(
        E.StreamTruncated,
        cause,
        f"stream truncated after {attempt.released} bytes of content; cause: {cause}",
        request,
        prefix=prefix,
        cause=cause,
        partial=partial,
        attempts=len(attempt.session.report.attempts),
        error_type=error_type,
    )
    exc.released = attempt.released  # type: ignore[attr-defined]
    return exc


def wall_timeout(family: Family, session: RequestSession, attempt: AttemptSession | None, request: Any) -> E.LivenessError:
    budget = session.policy.wall_timeout or 0.0
    committed = bool(attempt and attempt.committed)
    return family.error(
        E.WallTimeout,
        "wall_budget",
        f"wall-clock budget of {budget:g}s expired"
        + (" after content was released" if committed else " before any content"),
        request,
        budget=budget,
        attempts=len(session.report.attempts),
        committed=committed,
        prefix=attempt.prefix if attempt else b"",
    )


def stop_for(exc: BaseException) -> StopReason:
    if isinstance(exc, E.StreamTruncated):
        return StopReason.TRUNCATED
    if isinstance(exc, E.WallTimeout):
        return StopReason.WALL_BUDGET
    if isinstance(exc, E.RateLimited):
        return StopReason.RATE_LIMITED
    if isinstance(exc, E.MalformedStream):
        return StopReason.MALFORMED
    return StopReason.EXHAUSTED


class ExhaustedCache:
    """Remembers requests whose retry budget this transport spent, so that an SDK retry loop
    above it (``max_retries`` > 0) gets the same typed error at once instead of new provider
    attempts. Keyed by a hash of method, URL and body -- the SDKs re-send identical bytes --
    and used only for requests marked as SDK retries (``x-stainless-retry-count`` > 0)."""

    def __init__(self, size: int = 256, ttl: float = 300.0) -> None:
        self.size = size
        self.ttl = ttl
        self._items: OrderedDict[str, tuple[float, BaseException]] = OrderedDict()

    @staticmethod
    def key(request: Any) -> str | None:
        try:
            body = request.content
        except Exception:
            return None
        digest = hashlib.blake2b(digest_size=16)
        digest.update(request.method.encode())
        digest.update(str(request.url).encode())
        digest.update(body)
        return digest.hexdigest()

    def put(self, key: str | None, exc: BaseException) -> None:
        if key is None:
            return
        self._items[key] = (time.monotonic(), exc)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, key: str | None) -> BaseException | None:
        if key is None or key not in self._items:
            return None
        stamp, exc = self._items[key]
        if time.monotonic() - stamp > self.ttl:
            del self._items[key]
            return None
        return exc


def is_sdk_retry(headers: Mapping[str, str]) -> bool:
    count = headers.get("x-stainless-retry-count", "0")
    return count not in ("", "0")


def write_capture(policy: Policy, attempt: AttemptSession) -> str | None:
    """The flight recorder: write the attempt's timestamped capture for ``otel-liveness analyze``."""
    if policy.capture_dir is None or attempt.capture is None:
        return None
    os.makedirs(policy.capture_dir, exist_ok=True)
    name = f"{attempt.record.request_id or 'attempt'}-{os.getpid()}-{random.getrandbits(32):08x}-{attempt.index}.jsonl"
    path = os.path.join(policy.capture_dir, name)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            for t, data in attempt.capture:
                if not data:
                    fh.write(json.dumps({"t": round(t, 6), "eof": True}) + "\n")
                    continue
                try:
                    record = {"t": round(t, 6), "data": data.decode("utf-8")}
                except UnicodeDecodeError:
                    record = {"t": round(t, 6), "b64": base64.b64encode(data).decode()}
                fh.write(json.dumps(record) + "\n")
    except OSError:
        log.warning("otel-liveness: could not write capture %s", path, exc_info=True)
        return None
    return path


TRACE_HEADERS = ("traceparent", "tracestate")


def send_context(hooks: list[Any]) -> Any:
    """The context manager a hook asks to wrap the inner send in (the telemetry hook suppresses
    the HTTP client instrumentation there, so no second, wrong HTTP span appears)."""
    for hook in hooks:
        factory = getattr(hook, "send_context", None)
        if factory is not None:
            return factory()
    return contextlib.nullcontext()


_HOOK_FAILURES: dict[tuple[str, str], int] = {}


def log_hook_error(hook: Any, exc: Exception) -> None:
    """A hook raised: the event is dropped. The first failure of each (hook type, error type) is a
    WARNING with the traceback, then every 1000th; the rest are DEBUG, so a broken telemetry
    backend cannot flood the application's logs."""
    key = (type(hook).__qualname__, type(exc).__name__)
    count = _HOOK_FAILURES[key] = _HOOK_FAILURES.get(key, 0) + 1
    if count == 1 or count % 1000 == 0:
        log.warning("otel-liveness: hook %r raised %s (%d so far); its events are dropped", hook, type(exc).__name__,
                    count, exc_info=exc)
    else:
        log.debug("otel-liveness: hook %r raised %s", hook, type(exc).__name__)
