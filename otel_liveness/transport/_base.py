"""What the sync and async drivers share, none of it waiting: building the engine from an HTTP
library request, the request each attempt sends, mapping the library's exceptions to engine
inputs, and building responses and typed errors from the engine's commands."""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ..core.commands import Command, Fail, Reraise, Respond, Send
from ..core.errors import ConfigurationWarning
from ..core.events import Event, Hook, SendsInContext
from ..core.memory.budget import RetryBudgets
from ..core.memory.caches import CadenceMemory, ExhaustedCache
from ..core.policy import Policy
from ..core.request.engine import Engine
from ..core.request.facts import RequestFacts
from ..core.tuning.canary import judge_candidates
from ..core.wire.hosts import HostMatcher
from ..core.wire.providers import PROFILES, generation_path, select_provider, streams_by_url
from ._backends import ENGINE_EXTENSION
from ._body import replay_body
from ._family import Family
from ._overrides import current_policy
from ._recorder import FlightRecorder

__all__ = ["BUDGETS", "TransportBase", "error_for", "header_dict", "log_hook_error", "policy_from_env",
           "retry_budget_fills", "warn_invalid_variable"]

log = logging.getLogger("otel_liveness")
_NO_CONTEXT = contextlib.nullcontext()  # reusable: it holds nothing
#: The process's retry budgets, one per provider host, shared by every transport and thread
#: (core/memory/budget.py): what a fleet of agents in this process takes from a provider that is down.
BUDGETS = RetryBudgets(lock=threading.Lock(), budget_lock=threading.Lock)


class TransportBase:
    """The state and the non-waiting half of a liveness transport (sync or async)."""

    _family: Family
    _is_async: bool
    #: Builds the inner transport when none is given (``_classes.default_transport``, set there).
    default_transport: Callable[..., Any]
    _stream_cls: type
    _passthrough_cls: type
    _resuming_cls: type

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
            inner = self.default_transport(self._family, asynchronous=self._is_async, **transport_kwargs)
        elif transport_kwargs:
            raise TypeError(f"transport options {sorted(transport_kwargs)} apply only when no inner transport is given")
        self._inner = inner
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError(f"policy must be an otel_liveness.Policy (or None), got {type(policy).__name__}: {policy!r}")
        if isinstance(hosts, (str, bytes)):
            raise TypeError(f"hosts must be an iterable of host names or patterns, got the string {hosts!r} "
                            "(a list: hosts=[...])")
        hooks = tuple(hooks)
        for hook in hooks:
            if not callable(hook):
                raise TypeError(f"hooks must be callables (each receives every event), got {hook!r}")
        # The policy given in code, with the OTEL_LIVENESS_* variables for every field it leaves
        # unset (as OpenTelemetry's own components read OTEL_*): one configuration story.
        self._policy = policy_from_env(policy)
        # Shared by every request and thread of this transport, each guarded (docs: RELIABILITY.md,
        # "Composition"): the hooks are an immutable tuple replaced under ``_lock`` (readers take
        # the current tuple without locking); the two memories lock every operation themselves.
        self._lock = threading.Lock()
        self._hooks: tuple[Callable[[Any], None], ...] = tuple(hooks)
        #: (the hooks tuple, its first hook offering a send context): see _send_context.
        self._send_hook: tuple[tuple[object, ...], SendsInContext | None] | None = None
        self._hosts = None if hosts is None else HostMatcher(hosts)  # names and patterns (core.hosts)
        self._exhausted: ExhaustedCache[Fail] = ExhaustedCache(lock=threading.Lock())
        self._cadence = CadenceMemory(lock=threading.Lock())
        self._warned_bounds: set[str] = set()  # wires whose raw bound the policy's raw_idle_timeout misses (warned)
        #: Whether the inner transport's pool wakes (its connections read the engine from the
        #: request's extensions, ``ENGINE_EXTENSION``): a pool built here, or one adopted.
        self._wakes = self._install_wakeups(inner)

    def _install_wakeups(self, inner: Any) -> bool:  # pragma: no cover - defined by the drivers
        raise NotImplementedError

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def family(self) -> Family:
        return self._family

    def add_hook(self, hook: Callable[[Any], None]) -> None:
        with self._lock:
            self._hooks = (*self._hooks, hook)

    def remove_hook(self, hook: Callable[[Any], None]) -> None:
        with self._lock:
            hooks = list(self._hooks)
            if hook in hooks:
                hooks.remove(hook)
                self._hooks = tuple(hooks)

    # -- requests --------------------------------------------------------------------------------

    def _applies(self, request: Any) -> bool:
        return self._hosts is None or request.url.host in self._hosts

    def _engine(self, request: Any, now: float) -> Engine | None:
        """The engine of one request, with the policy in force for this call -- or ``None`` for a
        request that is not a model's generation (:func:`~otel_liveness.core.wire.providers.generation_path`:
        not a generation endpoint, no model named in its body, no wire named by the policy),
        which passes through untouched."""
        policy = current_policy(self._policy)
        url = request.url
        try:
            body: bytes | None = request.content
        except Exception:  # noqa: BLE001 - a streaming request body that was not read (each family's own class)
            body = None
        timeout = (request.extensions.get("timeout") or {}).get("read")
        headers = header_dict(request.headers)
        query = url.query.decode("ascii", "replace") if isinstance(url.query, bytes) else str(url.query)
        facts = RequestFacts.read(
            method=request.method, url=str(url), host=url.host, port=url.port, path=url.path, headers=headers,
            body=body, read_timeout=timeout, stream_path=streams_by_url(url.path, query),
        )
        if policy.provider is None and facts.model is None and not generation_path(url.path):
            return None
        provider = policy.provider or select_provider(url.host, url.path)
        if facts.streaming and provider not in self._warned_bounds and _raw_bound_misses(policy, provider):
            self._warned_bounds.add(provider)
            warnings.warn(
                f"otel-liveness: raw_idle_timeout ({policy.raw_idle_timeout:g} s) does not bound {provider} streams: "
                f"that wire is silent while a model reasons, so raw_idle_timeout_no_keepalive "
                f"({policy.raw_idle_timeout_no_keepalive:g} s) applies until it shows a keep-alive; set "
                f"raw_idle_timeout_no_keepalive (OTEL_LIVENESS_RAW_IDLE_TIMEOUT_NO_KEEPALIVE) to bound it "
                f"(docs/configuration.md, 'Which bound applies')", ConfigurationWarning, stacklevel=3)
        hooks: list[Hook] = [*self._hooks, *_context_hooks(request)]
        if policy.capture_dir:
            hooks.append(FlightRecorder(policy.capture_dir, policy))
        def keep_body() -> Callable[[], str | None] | None:
            # A streamed body (iterator, generator, async iterable, file object) is kept as it is
            # sent, up to the bound, so that a retry re-sends it byte for byte -- or is not made
            # (_body.py). The engine asks for it unless it will retry nothing (shadow mode).
            replay = replay_body(request, self._family.module, policy.max_replay_body_bytes)
            return replay.problem if replay else None

        return Engine(
            policy, facts, now,
            provider=provider,
            hooks=hooks, on_hook_error=log_hook_error, wall_now=time.time, jitter=random.random,
            exhausted=self._exhausted, cadence=self._cadence, keep_body=keep_body,
            lock=threading.RLock(),  # a sync body may be closed from another thread while it is read
            budgets=BUDGETS,
            canary=(functools.partial(judge_candidates, policy.candidate_policies, max_frame_bytes=policy.max_frame_bytes)
                    if policy.candidates else None),
        )

    def _attempt_request(self, request: Any, send: Send, engine: Engine) -> Any:
        """The caller's request as this attempt sends it: its headers and body untouched, plus
        the headers hooks add (trace context), when the engine sets one, the socket read timeout
        (httpcore applies ``extensions["timeout"]["read"]`` to every read) and, for a pool that
        wakes, the engine (``ENGINE_EXTENSION``: its connections put it in their network stream's
        slot) -- in a copy: the caller's own object, and the timeout it reads back in its error
        messages, stay as they were."""
        wakes = self._wakes
        if send.read_timeout is None and not send.headers and not wakes:
            return request  # nothing to change: the caller's request itself (what a mock below sees is it)
        extensions = request.extensions
        if wakes:
            extensions = {**extensions, ENGINE_EXTENSION: engine}
        if send.read_timeout is not None:
            timeouts = dict(extensions.get("timeout") or {})
            timeouts["read"] = send.read_timeout
            extensions = {**extensions, "timeout": timeouts}
        headers = request.headers
        if send.headers:
            headers = headers.copy()
            headers.update(send.headers)
        return self._family.module.Request(request.method, request.url, headers=headers, stream=request.stream,
                                           extensions=extensions)

    def _send_context(self) -> Any:
        """The context a hook asks the inner send to run in (the telemetry hook suppresses the HTTP
        client instrumentations there, so no second, wrong HTTP span appears). Which hook offers
        one is looked up once per hooks tuple (``isinstance`` on a runtime protocol cost ~10 µs, and
        this runs every request): the tuple is replaced, never changed, when a hook is added or removed."""
        hooks: tuple[object, ...] = self._hooks  # (as objects: a callable may offer more)
        found = self._send_hook
        if found is None or found[0] is not hooks:
            hook = next((h for h in hooks if isinstance(h, SendsInContext)), None)
            self._send_hook = found = (hooks, hook)
        hook = found[1]
        return _NO_CONTEXT if hook is None else hook.send_context()

    def _response(self, request: Any, engine: Engine, inner: Any, body: Any, respond: Respond) -> Any:
        """The response the caller sees: the attempt's status and headers, the outcome report in
        ``extensions["liveness"]`` and, as body, the engine-judged stream (over ``body``, the pump
        begun while the engine held the body, if any) or the inner body."""
        if respond.passthrough:
            stream = self._passthrough_cls(inner)
        else:
            stream = self._stream_cls(self._family, request, engine, inner, body, respond)
        if engine.facts.resumable and not respond.passthrough and not engine.shadow \
                and engine.profile.name == "openai-responses" and RESUME_EXTENSION not in request.extensions:
            stream = self._resuming_cls(self, request, stream, engine.published, engine)
        extensions = dict(inner.extensions)
        extensions["liveness"] = engine.published
        # and on the request: an SDK error raised from a provider's error frame may carry only the
        # request (the openai SDK's APIError), and liveness_report() finds the report there too
        request.extensions["liveness"] = engine.published
        headers: Any = inner.headers  # (the library copies a Headers object's raw list as it is)
        if respond.replace:
            names = {name for name, _ in respond.replace}
            headers = [(k, v) for k, v in inner.headers.multi_items() if k.lower() not in names] + list(respond.replace)
        return self._family.module.Response(inner.status_code, headers=headers, stream=stream, extensions=extensions,
                                            request=request)

    def _answered_from_memory(self, engine: Engine) -> None:
        if engine.ended and not engine.report.attempts:
            log.info("otel-liveness: an SDK retry of an exhausted request was answered without a new attempt; "
                     "set max_retries=0 on the SDK client")


#: The extension a resume's request carries: the stream that sent it resumes it again (one count
#: of resumes per caller's request), its own body is not wrapped a second time.
RESUME_EXTENSION = "otel_liveness.resume"


def header_dict(headers: Any) -> dict[str, str]:
    """An HTTP library's headers as the engine reads them: lower-case names, a repeated name's
    values joined by ", ", decoded in the headers' own encoding -- what ``dict(headers.items())``
    gives, at half its cost (``items()`` looks the encoding up twice per header, for every header
    of every request: ~7 µs for an SDK request's 18 headers). Headers that are all ASCII (as
    HTTP wants them) are decoded as such in one pass: every encoding the library picks from reads
    ASCII bytes alike, so the answer is the same without its own pass to pick one."""
    raw = headers.raw
    try:
        return _decoded(raw, "ascii")
    except UnicodeDecodeError:
        return _decoded(raw, headers.encoding)


def _decoded(raw: list[tuple[bytes, bytes]], encoding: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw:
        name = key.decode(encoding).lower()
        text = value.decode(encoding)
        out[name] = f"{out[name]}, {text}" if name in out else text
    return out


def error_for(family: Family, request: Any, command: Command, report: dict[str, Any] | None = None) -> BaseException:
    """The exception a :class:`Fail` or :class:`Reraise` command asks for; a typed error carries
    the request's outcome ``report`` (``otel_liveness.liveness_report``)."""
    if isinstance(command, Reraise):
        return command.exc
    if isinstance(command, Fail):
        error = family.error(command, request)
        error.report = report
        return error
    raise AssertionError(f"not a failure: {command!r}")  # pragma: no cover


def _context_hooks(request: Any) -> Iterable[Hook]:
    hook = request.extensions.get("liveness.hook")
    return (hook,) if callable(hook) else ()


_HOOK_FAILURES: dict[tuple[str, str], int] = {}
_HOOK_FAILURES_LOCK = threading.Lock()  # every transport's hooks count here, from any thread


def log_hook_error(hook: Callable[[Event], None], exc: Exception) -> None:
    """A hook raised: the event is dropped. The first failure of each (hook type, error type) is a
    WARNING with the traceback, then every 1000th; the rest are DEBUG, so a broken telemetry
    backend cannot flood the application's logs."""
    key = (type(hook).__qualname__, type(exc).__name__)
    with _HOOK_FAILURES_LOCK:
        count = _HOOK_FAILURES[key] = _HOOK_FAILURES.get(key, 0) + 1
    if count == 1 or count % 1000 == 0:
        log.warning("otel-liveness: hook %r raised %s (%d so far); its events are dropped", hook, type(exc).__name__,
                    count, exc_info=exc)
    else:
        log.debug("otel-liveness: hook %r raised %s", hook, type(exc).__name__)


def retry_budget_fills(now: float) -> dict[str, float]:
    """The process's retry budgets by provider (``gen_ai.provider.name``): the lowest fill of its
    hosts' budgets, as a fraction of their capacity (for the ``liveness.retry_budget.fill`` gauge)."""
    fills: dict[str, float] = {}
    for _, budget in BUDGETS.items():
        fill = budget.fill(now)
        label = budget.label or "_OTHER"
        fills[label] = min(fill, fills.get(label, fill))
    return fills


_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def policy_from_env(policy: Policy | None = None) -> Policy:
    """The policy a transport runs: ``policy`` (the defaults without one), with every field it was
    not given in code (:attr:`Policy.given`) taken from its ``OTEL_LIVENESS_*`` variable when set
    -- OpenTelemetry's precedence: code wins, the environment fills the rest, operational settings
    (the flight recorder, candidates, ``OTEL_LIVENESS_MODE``) included. A variable that is unknown
    or invalid is left out with one warning naming it and what is used instead -- never an
    exception: a typo must not stop an application's transports, or another instrumentor, from
    loading."""
    return Policy.from_env(base=policy, on_invalid=warn_invalid_variable)


def warn_invalid_variable(key: str, value: str, exc: Exception) -> None:
    """One warning per variable and process (:class:`~otel_liveness.core.errors.ConfigurationWarning`,
    shown on stderr by default -- a library's log records are not, until the application configures
    logging; ``logging.captureWarnings(True)`` routes it to the logs): it is ignored, and the default
    is used."""
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    name = key.removeprefix("OTEL_LIVENESS_").lower()
    if "unknown setting" in str(exc):
        used = "it is not a setting"
    elif name == "mode":
        used = "the mode set in code is used (the default: enforce under wrap(), shadow under opentelemetry-instrument)"
    elif name in Policy.__dataclass_fields__:
        used = f"the value set in code, else the default ({getattr(Policy(), name)!r}), is used"
    elif "," in key:
        used = "the values set in code, else the defaults, are used for them (valid alone, not together)"
    else:
        used = "it is not used"
    warnings.warn(f"otel-liveness: {key}={value!r} is ignored ({exc}); {used}", ConfigurationWarning, stacklevel=2)


_DEFAULTS = Policy()


def _raw_bound_misses(policy: Policy, provider: str) -> bool:
    """The policy changed ``raw_idle_timeout`` but left ``raw_idle_timeout_no_keepalive`` at its
    default, and ``provider``'s wire is silent while a model reasons: the changed bound does not
    apply to it (the user likely meant it to)."""
    return (not PROFILES[provider].keepalives and policy.raw_idle_timeout != _DEFAULTS.raw_idle_timeout
            and policy.raw_idle_timeout_no_keepalive == _DEFAULTS.raw_idle_timeout_no_keepalive)
