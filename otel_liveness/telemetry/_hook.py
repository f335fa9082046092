"""The OpenTelemetry hook: turns the transport's events into spans, span events, metrics and
structured log records. The only module (with the instrumentor) that imports OpenTelemetry, and
only its API. Instruments are created once; nothing here runs per frame -- heartbeats arrive as
one event per read, already counted."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import _internal as _metrics_globals  # (the global meter provider's home since 1.12)
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._version import __version__
from ..core.events import (
    AttemptEnded,
    AttemptStarted,
    Heartbeats,
    RequestEnded,
    RequestStarted,
    RetryDenied,
    RetryScheduled,
    SemanticNotice,
    Verdict,
)
from ..core.outcome import AttemptOutcome, NoticeKind, RequestReport, StopReason
from ..core.request.facts import size_bucket
from ..transport._base import retry_budget_fills
from ..transport._recorder import recorder_stats
from . import semconv as S

__all__ = ["TelemetryHook"]

events_log = logging.getLogger("otel_liveness.events")

_VERDICT_EVENT = {
    AttemptOutcome.RAW_SILENCE: S.EVENT_RAW_SILENCE,
    AttemptOutcome.SEMANTIC_TIMEOUT: S.EVENT_SEMANTIC_TIMEOUT,
    AttemptOutcome.PROVIDER_ERROR: S.EVENT_ERROR,
    AttemptOutcome.WALL_BUDGET: S.EVENT_WALL_BUDGET,
    AttemptOutcome.TRUNCATED: S.EVENT_TRUNCATION,
}
_INPUT = ("input_tokens", "prompt_tokens")
_OUTPUT = ("output_tokens", "completion_tokens")

#: Whether the API's global providers can be read (``_TRACER_PROVIDER`` / ``_METER_PROVIDER``: set by
#: ``set_*_provider``, or by ``get_*_provider`` from ``OTEL_PYTHON_*_PROVIDER``; the API has no public
#: "is one set" -- ``get_*_provider`` does an environment lookup each call). Private names: a
#: future API without them leaves every request traced, never one dropped.
_GLOBALS_KNOWN = hasattr(trace, "_TRACER_PROVIDER") and hasattr(_metrics_globals, "_METER_PROVIDER")

#: The context key the HTTP client instrumentations read (``is_http_instrumentation_enabled``):
#: opentelemetry-instrumentation's ``suppress_http_instrumentation()`` sets it; so does
#: :class:`_SuppressHTTP`, without that helper's two generator-based context managers on every
#: request. ``tests/test_telemetry.py`` checks the helper's reader sees it set. A private name of
#: the API: an API without it gets the helper itself (or, without the helper, nothing suppressed).
_SUPPRESS_KEY: str | None = getattr(otel_context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None)


class _SuppressHTTP:
    """The HTTP client instrumentations suppressed while the inner send runs (what
    ``suppress_http_instrumentation()`` does, as a plain context manager)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = otel_context.attach(otel_context.set_value(_SUPPRESS_KEY, True))  # type: ignore[arg-type]

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)


def _suppressing() -> Any:
    """The send context: :class:`_SuppressHTTP` where the API names its key, else the helper."""
    if _SUPPRESS_KEY is not None:
        return _SuppressHTTP()
    try:
        from opentelemetry.instrumentation.utils import suppress_http_instrumentation
    except ImportError:  # pragma: no cover - neither the key nor the helper: nothing reads it either
        return contextlib.nullcontext()
    return suppress_http_instrumentation()


def _recorder_drops(options: Any) -> Iterable[metrics.Observation]:
    """``liveness.recorder.drops``: the flight recorders' drops by reason (process totals) -- every
    reason from zero once the process made a recorder (a series that appears at its first drop
    hides that drop from ``increase()``), none in a process that never did."""
    stats = recorder_stats()
    return [metrics.Observation(n, {S.RECORDER_REASON: reason}) for reason, n in stats.dropped.items()
            if n or stats.active]


def _retry_budget_fills(options: Any) -> Iterable[metrics.Observation]:
    """``liveness.retry_budget.fill``: each provider's retry budget in this process (the lowest of
    its hosts'), as a fraction of its capacity -- none until a request made one."""
    import time

    return [metrics.Observation(fill, {S.GEN_AI_PROVIDER_NAME: label})
            for label, fill in retry_budget_fills(time.monotonic()).items()]


class _RequestState:
    __slots__ = (
        "attempt_span",
        "base",
        "clock_base",
        "dormant",
        "heartbeat_events",
        "heartbeats_coalesced",
        "last_span",
        "metric_base",
        "mode",
        "notice_events",
        "notices_coalesced",
        "parent",
        "propagate",
        "request_span",
        "size_bucket",
        "spanless",
    )

    def __init__(self) -> None:
        self.parent: Any = None
        self.request_span: Any = None
        self.attempt_span: Any = None
        #: (epoch ns, seconds since the request started) at the attempt span's start: a heartbeat
        #: event is stamped with the time of its read (the steady lane announces a read's
        #: heartbeats later, at the attempt's next input; the general path at once)
        self.clock_base = (0, 0.0)
        self.last_span: Any = None  # the last attempt's span, for what is logged after it ended
        self.base: dict[str, Any] = {}
        self.metric_base: dict[str, Any] = {}
        self.heartbeat_events = 0
        self.heartbeats_coalesced = 0
        self.notice_events = 0
        self.notices_coalesced = 0
        self.mode = "enforce"
        self.size_bucket = "unknown"
        self.dormant = False
        self.spanless = False  # metrics and logs, no span: the request's SDK traces its calls, and had no span
        #: The headers attempts may carry: none, the trace context, or it and the baggage.
        self.propagate: tuple[bool, bool] = (True, False)


def _log(state: _RequestState, level: int, extra: dict[str, Any], message: str, *args: Any) -> None:
    """Log inside the attempt span's context (the last attempt's, or the request span's, when it
    ended), so that the OpenTelemetry logging bridge exports the record with its trace."""
    if not events_log.isEnabledFor(level):
        return
    span = state.attempt_span or state.last_span or state.request_span
    if span is None and state.dormant:  # (what a non-recording span would have carried: the parent's)
        span = trace.get_current_span(state.parent)
    token = otel_context.attach(trace.set_span_in_context(span)) if span is not None else None
    try:
        events_log.log(level, message, *args, extra=extra)
    finally:
        if token is not None:
            otel_context.detach(token)


def _inject(state: _RequestState, headers: dict[str, str], span: Any) -> None:
    """The trace context of ``span`` into an attempt's ``headers`` through the global propagator --
    unless the request carries its own or its SDK propagates by its own option (the propagator is
    then not even asked) -- without the application's baggage unless the policy allows it."""
    allowed, baggage = state.propagate
    if not allowed:
        return
    propagate.inject(headers, context=trace.set_span_in_context(span))
    if not baggage:
        headers.pop("baggage", None)


def _forgetter(hook: weakref.ref[TelemetryHook]) -> Callable[[weakref.ref[RequestReport]], None]:
    """The callback of the reference :meth:`TelemetryHook._state` keeps to the report it looked up
    last: when that report is gone, so is the state kept with it (the hook is referred to weakly:
    no cycle through it)."""

    def forget(ref: weakref.ref[RequestReport]) -> None:
        owner = hook()
        if owner is None:
            return
        last = owner._last  # (one read: another thread may replace it meanwhile)
        if last is not None and last[0] is ref:
            owner._last = None

    return forget


class TelemetryHook:
    """The OpenTelemetry hook. Every transport has one unless ``telemetry=False`` (``wrap()`` adds
    it with its ``tracer_provider`` / ``meter_provider``, default the globals); pass one in
    ``hooks`` to configure it yourself (then no default one is added).

    ``logs=False`` silences the structured log records (logger ``otel_liveness.events``: notices
    and retries INFO, give-ups, truncations and wall-budget stops WARNING), each emitted inside
    the attempt span's context so the OpenTelemetry logging bridge links it to the trace.

    Dormant requests: a hook on the global providers (none given) looks, as each request starts,
    whether an SDK is behind them. While neither global provider is set (an application that
    installed no SDK), every span would be non-recording and every metric a no-op, so the request
    makes none of them: it only propagates the trace context a non-recording span would have
    carried, and logs. The first request after an SDK is installed is traced and counted.
    """

    #: Marks the hook that emits telemetry: a transport adds no default one beside it.
    emits_telemetry = True

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, *, logs: bool = True) -> None:
        self._tracer = trace.get_tracer(S.SCOPE, __version__, tracer_provider=tracer_provider, schema_url=S.SCHEMA_URL)
        meter = metrics.get_meter(S.SCOPE, __version__, meter_provider=meter_provider, schema_url=S.SCHEMA_URL)
        self._logs = logs
        # (both providers the globals -- get_tracer/get_meter above loaded one an environment names)
        self._globals = tracer_provider is None and meter_provider is None and _GLOBALS_KNOWN
        self._global_tracer = tracer_provider is None  # the provider an SDK above traces with, by default
        # Shared by every request (and thread) of the transports using this hook: one lock guards
        # the map from a request's report to its state (each state is then its request's own).
        self._states: weakref.WeakKeyDictionary[RequestReport, _RequestState] = weakref.WeakKeyDictionary()
        self._states_lock = threading.Lock()
        #: The state looked up last, with a weak reference to its report: a request's events come
        #: one after another, so most lookups are answered here, without the lock or the map. It is
        #: dropped with its report, as the map's entry is (:func:`_forgetter`).
        self._last: tuple[weakref.ref[RequestReport], _RequestState] | None = None
        self._forget = _forgetter(weakref.ref(self))

        def counter(spec: tuple[str, str, str]) -> Any:
            return meter.create_counter(spec[0], unit=spec[1], description=spec[2])

        def histogram(spec: tuple[str, str, str], buckets: tuple[float, ...] = S.DURATION_BUCKETS) -> Any:
            return meter.create_histogram(spec[0], unit=spec[1], description=spec[2],
                                          explicit_bucket_boundaries_advisory=list(buckets))

        self._attempts = counter(S.M_ATTEMPTS)
        self._requests = counter(S.M_REQUESTS)
        self._heartbeats = counter(S.M_HEARTBEATS)
        self._notices = counter(S.M_NOTICES)
        self._retries = counter(S.M_RETRIES)
        self._truncations = counter(S.M_TRUNCATIONS)
        self._denied = counter(S.M_RETRIES_DENIED)
        self._wall_stops = counter(S.M_WALL_STOPS)
        self._attempt_duration = histogram(S.M_ATTEMPT_DURATION)
        self._ttfb = histogram(S.M_TTFB)
        self._ttfc = histogram(S.M_TTFC)
        self._max_gap = histogram(S.M_MAX_SEMANTIC_GAP)
        self._retry_delay = histogram(S.M_RETRY_DELAY)
        self._operation = histogram(S.M_OPERATION_DURATION)
        self._tokens = histogram(S.M_TOKEN_USAGE, S.TOKEN_BUCKETS)
        self._candidate_verdicts = counter(S.M_CANDIDATE_VERDICTS)
        self._candidate_shift = histogram(S.M_CANDIDATE_SHIFT)
        # The process's flight-recorder drops: one observable counter per meter (a second hook on the
        # same meter gets the same instrument back, whose callback reads the same process totals).
        meter.create_observable_counter(S.M_RECORDER_DROPS[0], callbacks=[_recorder_drops], unit=S.M_RECORDER_DROPS[1],
                                        description=S.M_RECORDER_DROPS[2])
        meter.create_observable_gauge(S.M_RETRY_BUDGET[0], callbacks=[_retry_budget_fills], unit=S.M_RETRY_BUDGET[1],
                                      description=S.M_RETRY_BUDGET[2])
        self._dispatch: dict[type, Callable[[Any], None]] = {
            RequestStarted: self._request_started,
            AttemptStarted: self._attempt_started,
            Heartbeats: self._heartbeats_seen,
            SemanticNotice: self._notice,
            Verdict: self._verdict,
            RetryScheduled: self._retry,
            RetryDenied: self._retry_denied,
            AttemptEnded: self._attempt_ended,
            RequestEnded: self._request_ended,
        }

    def __call__(self, event: Any) -> None:
        handler = self._dispatch.get(type(event))
        if handler is not None:
            handler(event)

    @staticmethod
    def send_context() -> Any:
        """Suppress the HTTP client instrumentations around the inner send: their span would end
        at the headers, before the SSE body, and duplicate the attempt span."""
        return _suppressing()

    def takes_heartbeats(self, report: RequestReport) -> bool:
        """A request's heartbeats are counted and become span events only while an SDK is behind
        the hook (``TakesHeartbeats``): dormant, a request's are not made at all."""
        return not self._state(report).dormant

    def _dormant(self) -> bool:
        """No SDK behind this hook: it uses the global providers and neither is set (until one is,
        the API's tracer and meter behind them are its no-op ones)."""
        return self._globals and trace._TRACER_PROVIDER is None and _metrics_globals._METER_PROVIDER is None

    # -- per-request state, keyed weakly by the report: nothing leaks if a request is abandoned --

    def _state(self, report: RequestReport) -> _RequestState:
        last = self._last  # (one read of the pair: another thread may replace it meanwhile)
        if last is not None and last[0]() is report:
            return last[1]
        with self._states_lock:
            state = self._states.get(report)
            if state is None:
                state = self._states[report] = _RequestState()
        self._last = (weakref.ref(report, self._forget), state)
        return state

    # -- handlers ---------------------------------------------------------------------------------

    def _request_started(self, event: RequestStarted) -> None:
        report = event.report
        state = self._state(report)
        state.propagate = (event.propagate, event.baggage)
        model = event.model or ""
        state.metric_base = {S.GEN_AI_PROVIDER_NAME: report.provider_name or report.provider,
                             S.GEN_AI_REQUEST_MODEL: model or "unknown"}  # (and the logs' attributes)
        if "traceparent" in event.carrier:
            # The SDK's call span (anthropic 2.x) travels in the request's trace headers: attempts
            # nest under it and no request span of ours duplicates it.
            state.parent = propagate.extract(event.carrier)
        if self._dormant():
            state.dormant = True
            if state.parent is None:  # (what the request span would have been made in: this context)
                state.parent = otel_context.get_current()
            return
        state.mode = "shadow" if report.shadow else "enforce"
        state.size_bucket = size_bucket(event.body_size)
        operation = "chat"
        state.base = {
            S.GEN_AI_OPERATION_NAME: operation,
            S.GEN_AI_PROVIDER_NAME: report.provider_name or report.provider,
            S.WIRE: report.provider,
            S.HTTP_REQUEST_METHOD: event.method,
            S.SERVER_ADDRESS: event.host,
        }
        if event.port is not None:
            state.base[S.SERVER_PORT] = event.port
        if model:
            state.base[S.GEN_AI_REQUEST_MODEL] = model
        if event.sdk_traced and state.parent is None:
            # The SDK traces its own calls (the anthropic SDK's call span, current while it sends):
            # attempts nest under it, with no request span of ours beside it. On the global tracer
            # provider -- the SDK's too -- no span current means the SDK traced nothing (its
            # tracing off, and no application span): the transport makes none either.
            state.parent = otel_context.get_current()
            state.spanless = self._global_tracer and not trace.get_current_span(state.parent).get_span_context().is_valid
        if state.parent is None:
            state.request_span = self._tracer.start_span(
                f"{operation} {model}".strip(), kind=SpanKind.CLIENT,
                attributes={**state.base, S.MODE: state.mode},
            )
            state.parent = trace.set_span_in_context(state.request_span)

    def _attempt_started(self, event: AttemptStarted) -> None:
        state = self._state(event.report)
        if state.dormant:
            # The trace context a non-recording attempt span would carry: its parent's (nothing of
            # the trace API is called when the request's trace context is not the transport's to add).
            if state.propagate[0]:
                _inject(state, event.inject, trace.get_current_span(state.parent))
            return
        state.heartbeat_events = state.heartbeats_coalesced = state.notice_events = state.notices_coalesced = 0
        if state.spanless:
            return
        span = self._tracer.start_span(
            f"{state.base.get(S.HTTP_REQUEST_METHOD, 'POST')} {event.report.provider_name or event.report.provider}",
            context=state.parent,
            kind=SpanKind.CLIENT,
            attributes={**state.base, S.HTTP_REQUEST_RESEND_COUNT: event.attempt, S.MODE: state.mode},
        )
        state.attempt_span = span
        state.clock_base = (time.time_ns(), event.at)
        _inject(state, event.inject, span)

    def _heartbeats_seen(self, event: Heartbeats) -> None:
        state = self._state(event.report)
        if state.dormant:
            return
        self._heartbeats.add(event.count, state.metric_base)
        span = state.attempt_span
        if span is None:
            return
        if state.heartbeat_events < S.MAX_HEARTBEAT_EVENTS:
            state.heartbeat_events += 1
            # The wire moment on the span's clock. The base was read a moment after the attempt's
            # own start, so the mapping runs slightly late: never later than now, nor (so) past
            # the span's end.
            epoch, at = state.clock_base
            stamp = min(epoch + round((event.at - at) * 1e9), time.time_ns())
            span.add_event(S.EVENT_HEARTBEAT, {S.EVENT_KIND: "heartbeat", S.HEARTBEAT_COUNT: event.count,
                                               S.ATTEMPT_HEARTBEATS: event.total},
                           timestamp=stamp)
        else:
            state.heartbeats_coalesced += event.count

    def _notice(self, event: SemanticNotice) -> None:
        state = self._state(event.report)
        prefill = event.kind is NoticeKind.PREFILL
        if not state.dormant:  # (an SDK installed since the request started must not count half of it)
            self._notices.add(1, {**state.metric_base, S.NOTICE_KIND: event.kind.value})
        name = S.EVENT_PREFILL_WAIT if prefill else S.EVENT_NOTICE
        attrs = {
            S.EVENT_KIND: S.EVENT_KINDS[name],
            S.NOTICE_KIND: event.kind.value,
            S.NOTICE_NUMBER: event.number,
            S.SEMANTIC_IDLE: round(event.semantic_idle, 3),
            S.RAW_IDLE: round(event.raw_idle, 3),
            S.HEARTBEATS_SINCE_SEMANTIC: event.heartbeats_since_semantic,
            S.ATTEMPT_PHASE: event.phase.value,
        }
        span = state.attempt_span
        if span is not None:
            if state.notice_events < S.MAX_NOTICE_EVENTS:
                state.notice_events += 1
                span.add_event(name, attrs)
            else:
                state.notices_coalesced += 1
        if self._logs:
            extra = {**attrs, **state.metric_base, "liveness.attempt": event.attempt}
            if prefill:
                _log(state, logging.INFO, extra, "no response byte yet after %.1fs (prompt still being read)",
                     event.semantic_idle)
            else:
                _log(state, logging.INFO, extra,
                     "model semantically silent for %.1fs (raw idle %.1fs, %d heartbeats since content)",
                     event.semantic_idle, event.raw_idle, event.heartbeats_since_semantic)

    def _verdict(self, event: Verdict) -> None:
        state = self._state(event.report)
        span = state.attempt_span
        name = _VERDICT_EVENT.get(event.kind)
        if span is not None and name is not None:
            span.add_event(name, {S.EVENT_KIND: S.EVENT_KINDS[name], S.ATTEMPT_PHASE: event.phase.value,
                                  S.COMMITTED: event.committed, S.ENFORCED: event.enforced})

    def _retry(self, event: RetryScheduled) -> None:
        state = self._state(event.report)
        attrs = {**state.metric_base, S.RETRY_REASON: event.reason.value}
        if not state.dormant:
            self._retries.add(1, attrs)
            self._retry_delay.record(event.delay, attrs)
        event_attrs = {
            S.EVENT_KIND: "retry_scheduled",
            S.RETRY_DELAY: round(event.delay, 3),
            S.RETRY_REASON: event.reason.value,
            S.RETRY_DELAY_SOURCE: event.source.value,
            S.RETRY_TIER: "rate_limit" if event.rate_limited else "transient",
        }
        if state.attempt_span is not None:
            state.attempt_span.add_event(S.EVENT_RETRY, event_attrs)
        if self._logs:  # INFO: the caller sees nothing of it; a give-up, if it comes, is the WARNING
            _log(state, logging.INFO, {**event_attrs, **state.metric_base},
                 "provider attempt %d failed (%s); retrying in %.2fs", event.attempt + 1, event.reason.value, event.delay)

    def _retry_denied(self, event: RetryDenied) -> None:
        state = self._state(event.report)
        attrs = {**state.metric_base, S.RETRY_REASON: event.reason.value}
        if not state.dormant:
            self._denied.add(1, attrs)
        event_attrs = {S.EVENT_KIND: S.EVENT_KINDS[S.EVENT_RETRY_DENIED], S.RETRY_REASON: event.reason.value,
                       S.RETRY_BUDGET_FILL: round(event.fill, 3)}
        if state.attempt_span is not None:
            state.attempt_span.add_event(S.EVENT_RETRY_DENIED, event_attrs)
        if self._logs:  # INFO: a WARNING follows with the request's end
            _log(state, logging.INFO, {**event_attrs, **state.metric_base},
                 "provider attempt %d failed (%s); retry denied: the host's retry budget is spent (%.0f%% full)",
                 event.attempt + 1, event.reason.value, 100 * event.fill)

    def _attempt_ended(self, event: AttemptEnded) -> None:
        state = self._state(event.report)
        if state.dormant:
            return  # (metric points and a span: nothing records them)
        record = event.record
        outcome = record.outcome or AttemptOutcome.CANCELLED
        error_type = record.error_type if outcome is not AttemptOutcome.COMPLETED else None
        metric_attrs = {**state.metric_base, S.ATTEMPT_OUTCOME: outcome.value}
        if error_type:
            metric_attrs[S.ERROR_TYPE] = error_type
        span = state.attempt_span
        state.attempt_span = None
        state.last_span = span
        # Exemplars: latency points link to the attempt's trace (the SDK samples them from context).
        ctx = trace.set_span_in_context(span) if span is not None else None
        self._attempts.add(1, metric_attrs)
        if record.duration is not None:
            self._attempt_duration.record(record.duration, metric_attrs, context=ctx)
        if record.time_to_first_byte is not None:
            self._ttfb.record(record.time_to_first_byte, {**state.metric_base, S.REQUEST_SIZE_BUCKET: state.size_bucket},
                              context=ctx)
        if record.time_to_first_semantic is not None:
            self._ttfc.record(record.time_to_first_semantic, state.metric_base, context=ctx)
        self._max_gap.record(record.max_semantic_gap, state.metric_base, context=ctx)
        if outcome is AttemptOutcome.TRUNCATED:
            self._truncations.add(1, state.metric_base)
        for candidate in event.candidates:
            named = {**state.metric_base, S.CANDIDATE_NAME: candidate.name}
            for verdict in candidate.verdicts:
                self._candidate_verdicts.add(1, {**named, S.CANDIDATE_VERDICT: verdict})
            if candidate.shift is not None:
                self._candidate_shift.record(abs(candidate.shift), {
                    **named, S.CANDIDATE_SHIFT: "sooner" if candidate.shift >= 0 else "later"})
        input_tokens = next((record.usage[k] for k in _INPUT if k in record.usage), None)
        output_tokens = next((record.usage[k] for k in _OUTPUT if k in record.usage), None)
        for kind, value in (("input", input_tokens), ("output", output_tokens)):
            if value is not None:
                self._tokens.record(value, {**state.metric_base, S.GEN_AI_TOKEN_TYPE: kind})
        if span is None:
            return
        if not span.is_recording():
            # A span nothing records (no SDK installed, or sampled out) ignores attributes, events
            # and status: end it without building them.
            span.end()
            return
        attrs: dict[str, Any] = {
            S.ATTEMPT_OUTCOME: outcome.value,
            S.ATTEMPT_PHASE: record.phase.value,
            S.ATTEMPT_RAW_IDLE: round(record.raw_idle, 3),
            S.ATTEMPT_SEMANTIC_IDLE: round(record.semantic_idle, 3),
            S.ATTEMPT_MAX_SEMANTIC_GAP: round(record.max_semantic_gap, 3),
            S.ATTEMPT_MAX_RAW_GAP: round(record.max_raw_gap, 3),
            S.ATTEMPT_HEARTBEATS: record.heartbeats,
            S.ATTEMPT_NOTICES: record.notices,
            S.ATTEMPT_BYTES: record.bytes_received,
            S.ATTEMPT_MAX_HEARTBEAT_GAP: round(record.max_heartbeat_gap, 3),
            S.REQUEST_SIZE_BUCKET: state.size_bucket,
        }
        if record.first_byte_bound is not None:
            attrs[S.ATTEMPT_FIRST_BYTE_BOUND] = round(record.first_byte_bound, 3)
        if record.raw_bound is not None:
            attrs[S.ATTEMPT_RAW_BOUND] = round(record.raw_bound, 3)
        if record.completion is not None:
            attrs[S.ATTEMPT_COMPLETION] = record.completion.value
        if record.status is not None:
            attrs[S.HTTP_RESPONSE_STATUS_CODE] = record.status
        if record.request_id:
            attrs[S.PROVIDER_REQUEST_ID] = record.request_id
        if record.response_id:
            attrs[S.GEN_AI_RESPONSE_ID] = record.response_id
        if input_tokens is not None:
            attrs[S.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            attrs[S.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if outcome is AttemptOutcome.TRUNCATED:
            attrs[S.GEN_AI_RESPONSE_FINISH_REASONS] = ["error"]
        elif record.stop_detail:
            attrs[S.GEN_AI_RESPONSE_FINISH_REASONS] = [record.stop_detail]
        if state.heartbeats_coalesced:
            attrs[S.HEARTBEATS_DROPPED] = state.heartbeats_coalesced
        if state.notices_coalesced:
            attrs[S.NOTICES_DROPPED] = state.notices_coalesced
        if outcome is AttemptOutcome.TRUNCATED:
            span.add_event(S.EVENT_TRUNCATION, {S.EVENT_KIND: "truncation", S.ERROR_TYPE: error_type or "truncated",
                                                S.ATTEMPT_BYTES: record.bytes_received})
        elif outcome is AttemptOutcome.CANCELLED:
            span.add_event(S.EVENT_CANCELLED, {S.EVENT_KIND: "cancelled"})
        if error_type:
            attrs[S.ERROR_TYPE] = error_type
            span.set_status(Status(StatusCode.ERROR, f"{outcome.value}: {error_type}"))
        span.set_attributes(attrs)
        span.end()

    def _request_ended(self, event: RequestEnded) -> None:
        report = event.report
        state = self._state(report)
        stop = event.stop_reason
        attrs = {**state.metric_base, S.STOP_REASON: stop.value}
        failed = stop is not StopReason.COMPLETED
        if not state.dormant:
            self._requests.add(1, attrs)
            duration_attrs = dict(state.metric_base)
            if failed:
                duration_attrs[S.ERROR_TYPE] = report.cause or stop.value
            if report.duration is not None:
                ctx = trace.set_span_in_context(state.request_span) if state.request_span is not None else None
                self._operation.record(report.duration, duration_attrs, context=ctx)
            if stop is StopReason.WALL_BUDGET:
                self._wall_stops.add(1, state.metric_base)
        # WARNING, not ERROR: the application gets a typed exception for each and decides.
        if self._logs and stop in (StopReason.EXHAUSTED, StopReason.RATE_LIMITED, StopReason.RETRY_BUDGET):
            _log(state, logging.WARNING, {**attrs, "liveness.attempts": len(report.attempts)},
                 "provider failed after %d attempts (%s)", len(report.attempts), report.cause)
        elif self._logs and stop is StopReason.NOT_REPLAYABLE:
            _log(state, logging.WARNING, {**attrs, "liveness.attempts": len(report.attempts)},
                 "provider failed (%s) and the streamed request body cannot be sent again: not retried", report.cause)
        elif self._logs and stop is StopReason.TRUNCATED:
            _log(state, logging.WARNING, attrs, "reply truncated after content was released (%s)", report.cause)
        elif self._logs and stop is StopReason.WALL_BUDGET:
            _log(state, logging.WARNING, {**attrs, S.WALL_BUDGET: report.wall_budget or 0.0},
                 "wall-clock budget of %ss expired", report.wall_budget)
        span = state.request_span
        state.request_span = None
        if span is None:
            return
        if not span.is_recording():
            span.end()  # (nothing records what would be set below)
            return
        span.set_attribute(S.STOP_REASON, stop.value)
        span.set_attribute(S.HTTP_REQUEST_RESEND_COUNT, max(0, len(report.attempts) - 1))
        if report.wall_budget is not None:
            span.set_attribute(S.WALL_BUDGET, report.wall_budget)
        if failed and stop is not StopReason.CANCELLED:
            span.set_attribute(S.ERROR_TYPE, report.cause or stop.value)
            span.set_status(Status(StatusCode.ERROR, stop.value))
        span.end()
