"""Telemetry: spans per attempt with the right parent, events, attributes, status, and metric
points with exact values -- in-memory exporter and reader, real loopback provider."""

from __future__ import annotations

import json
import logging
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import otel_liveness
from otel_liveness import Policy
from otel_liveness.telemetry import TelemetryHook
from otel_liveness.telemetry import semconv as S
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_status

from .conftest import FAST

URL = "/v1/messages"
BODY = {"model": "claude-sim-1", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.hook = TelemetryHook(self.tracer_provider, self.meter_provider)

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def attempts(self) -> list[Any]:
        return [sp for sp in self.finished() if S.HTTP_REQUEST_RESEND_COUNT in sp.attributes and sp.name.startswith("POST")]

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        out = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            out.append((dict(point.attributes), point))
        return out

    def total(self, name: str, **match: Any) -> float:
        return sum(p.value for attrs, p in self.points(name) if all(attrs.get(k) == v for k, v in match.items()))

    def count(self, name: str) -> int:
        return sum(p.count for _, p in self.points(name))


@pytest.fixture
def tel() -> Telemetry:
    return Telemetry()


def post(tel: Telemetry, url: str, policy: Policy = FAST, body: dict[str, Any] = BODY) -> tuple[Any, BaseException | None]:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, hooks=[tel.hook])
    with httpx2.Client(transport=transport) as client:
        try:
            with client.stream("POST", url, json=body, headers={"x-api-key": "sk-ant-PLANTED-SECRET"}) as response:
                response.read()
                return response, None
        except Exception as exc:
            return None, exc


def events(span: Any, name: str | None = None) -> list[Any]:
    return [e for e in span.events if name is None or e.name == name]


def test_completed_stream_span_tree_and_metrics(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("think", [[s.Headers(), *anthropic_reply("hi", think_pings=12, ping_every=5.0)]])
    response, error = post(tel, url + URL)
    assert error is None
    spans = tel.finished()
    (request_span,) = [sp for sp in spans if sp.name == "chat claude-sim-1"]
    (attempt,) = tel.attempts()
    assert attempt.parent.span_id == request_span.context.span_id
    assert attempt.kind is SpanKind.CLIENT and request_span.kind is SpanKind.CLIENT
    a = attempt.attributes
    assert a[S.ATTEMPT_OUTCOME] == "completed" and a[S.HTTP_RESPONSE_STATUS_CODE] == 200
    assert a[S.HTTP_REQUEST_RESEND_COUNT] == 0 and a[S.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert a[S.GEN_AI_REQUEST_MODEL] == "claude-sim-1" and a[S.GEN_AI_RESPONSE_ID] == "msg_sim_0001"
    assert a[S.ATTEMPT_HEARTBEATS] == 12 and a[S.ATTEMPT_NOTICES] == len(events(attempt, S.EVENT_NOTICE)) >= 3
    assert a[S.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert a[S.GEN_AI_USAGE_INPUT_TOKENS] == 25 and a[S.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert a[S.PROVIDER_REQUEST_ID] == response.headers["request-id"]
    assert attempt.status.status_code is StatusCode.UNSET
    assert all(e.attributes[S.EVENT_KIND] for e in attempt.events)
    assert sum(e.attributes[S.HEARTBEAT_COUNT] for e in events(attempt, S.EVENT_HEARTBEAT)) == 12
    assert request_span.attributes[S.STOP_REASON] == "completed"
    assert tel.total("liveness.attempts", **{S.ATTEMPT_OUTCOME: "completed"}) == 1
    assert tel.total("liveness.heartbeats") == 12
    assert tel.total("liveness.semantic_notices") == a[S.ATTEMPT_NOTICES]
    assert tel.total("liveness.requests", **{S.STOP_REASON: "completed"}) == 1
    assert tel.count("gen_ai.client.operation.duration") == 1
    assert tel.count("gen_ai.client.operation.time_to_first_chunk") == 1
    assert tel.count("liveness.attempt.duration") == 1
    ttfc = tel.points("gen_ai.client.operation.time_to_first_chunk")[0][1]
    assert ttfc.sum > 0.5  # 60 provider-seconds of pings before content
    usage = {attrs[S.GEN_AI_TOKEN_TYPE]: p.sum for attrs, p in tel.points("gen_ai.client.token.usage")}
    assert usage == {"input": 25, "output": 12}


def test_retries_are_sibling_attempt_spans_with_events(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("flaky", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply()]])
    _, error = post(tel, url + URL)
    assert error is None
    first, second = sorted(tel.attempts(), key=lambda sp: sp.attributes[S.HTTP_REQUEST_RESEND_COUNT])
    assert first.parent.span_id == second.parent.span_id
    assert first.status.status_code is StatusCode.ERROR and first.attributes[S.ERROR_TYPE] == "529"
    assert first.attributes[S.ATTEMPT_OUTCOME] == "provider_error"
    (retry,) = events(first, S.EVENT_RETRY)
    assert retry.attributes[S.RETRY_REASON] == "overloaded" and retry.attributes[S.RETRY_DELAY_SOURCE] == "backoff"
    assert second.attributes[S.HTTP_REQUEST_RESEND_COUNT] == 1 and second.attributes[S.ATTEMPT_OUTCOME] == "completed"
    assert tel.total("liveness.retries", **{S.RETRY_REASON: "overloaded"}) == 1
    assert tel.count("liveness.retry.delay") == 1
    assert tel.total("liveness.attempts", **{S.ATTEMPT_OUTCOME: "provider_error", S.ERROR_TYPE: "529"}) == 1


def test_raw_silence_before_content_then_truncation(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("stall", [[s.Headers(), *anthropic_reply()[:1], s.Stall()],
                                 [s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
    _, error = post(tel, url + URL)
    assert isinstance(error, otel_liveness.StreamTruncated)
    first, second = sorted(tel.attempts(), key=lambda sp: sp.attributes[S.HTTP_REQUEST_RESEND_COUNT])
    assert [e.attributes[S.EVENT_KIND] for e in first.events if e.name != S.EVENT_HEARTBEAT][-2:] == [
        "raw_silence", "retry_scheduled"]
    assert first.attributes[S.ATTEMPT_OUTCOME] == "raw_silence" and first.attributes[S.ATTEMPT_PHASE] == "preamble"
    assert second.attributes[S.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert second.attributes[S.ATTEMPT_OUTCOME] == "truncated" and second.status.status_code is StatusCode.ERROR
    kinds = [e.attributes[S.EVENT_KIND] for e in second.events]
    assert kinds[-2:] == ["raw_silence", "truncation"]
    assert tel.total("liveness.truncations") == 1
    assert tel.total("liveness.requests", **{S.STOP_REASON: "truncated"}) == 1


def test_wall_budget_and_cancellation_events(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("slow", [[s.Headers(), *anthropic_reply("x" * 40, deltas=40, delta_every=2.0)]])
    _, error = post(tel, url + URL, FAST.replace(wall_timeout=0.2))
    assert isinstance(error, otel_liveness.WallTimeout)
    (attempt,) = tel.attempts()
    assert attempt.attributes[S.ATTEMPT_OUTCOME] == "wall_budget"
    assert "wall_budget" in [e.attributes[S.EVENT_KIND] for e in attempt.events]
    assert tel.total("liveness.wall_budget_stops") == 1

    tel.spans.clear()
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[tel.hook])
    with httpx2.Client(transport=transport) as client:
        with client.stream("POST", url + URL, json=BODY) as response:
            next(response.iter_raw())
    (attempt,) = tel.attempts()
    assert attempt.attributes[S.ATTEMPT_OUTCOME] == "cancelled"
    assert events(attempt, S.EVENT_CANCELLED)


def test_exhausted_request_span_has_error(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("down", [[anthropic_status(500, "api_error")]])
    response, _ = post(tel, url + URL)
    assert response.status_code == 500
    (request_span,) = [sp for sp in tel.finished() if sp.name == "chat claude-sim-1"]
    assert request_span.status.status_code is StatusCode.ERROR
    assert request_span.attributes[S.STOP_REASON] == "exhausted"
    assert request_span.attributes[S.HTTP_REQUEST_RESEND_COUNT] == 2
    assert len(tel.attempts()) == 3


def test_sdk_call_span_is_the_parent_and_no_request_span_duplicates_it(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("sdk", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply()]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[tel.hook])
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-x", max_retries=0, http_client=httpx2.Client(transport=transport),
                                 open_telemetry={"tracer_provider": tel.tracer_provider})
    with client.messages.stream(model="claude-sim-1", max_tokens=5, messages=[{"role": "user", "content": "hi"}]) as st:
        st.get_final_text()
    client.close()
    spans = tel.finished()
    sdk_spans = [sp for sp in spans if sp.instrumentation_scope.name == "com.anthropic.sdk.python"]
    assert len(sdk_spans) == 1
    attempts = tel.attempts()
    assert len(attempts) == 2 and {sp.parent.span_id for sp in attempts} == {sdk_spans[0].context.span_id}
    assert not [sp for sp in spans if sp.name == "chat claude-sim-1" and sp.instrumentation_scope.name == S.SCOPE]
    # The SDK propagates by its own option: the provider saw the trace context the SDK sent (its
    # call span's) on every attempt, untouched by the transport.
    sent = [r.headers.get("traceparent", "") for r in provider.requests("sdk")]
    assert [t.split("-")[2] for t in sent] == [format(sdk_spans[0].context.span_id, "016x")] * 2


def test_sdk_tracing_off_leaves_the_spans_to_the_application(provider, tel, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The anthropic SDK traces its own calls on the global tracer provider; with its tracing off
    # (open_telemetry=False) the transport, on the same provider, makes no span of its own for
    # them -- unless the application has a span current, under which the attempts nest (never a
    # request span beside an SDK's call). Metrics count either way.
    from opentelemetry import trace

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", tel.tracer_provider)  # (the global provider, for this test)
    url = provider.add("sdk-off", [[s.Headers(), *anthropic_reply()]])
    hook = TelemetryHook(meter_provider=tel.meter_provider)  # the global tracer provider
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])

    def call(**options: Any) -> None:
        client = anthropic.Anthropic(base_url=url, api_key="sk-ant-x", max_retries=0,
                                     http_client=httpx2.Client(transport=transport), **options)
        with client.messages.stream(model="claude-sim-1", max_tokens=5, messages=[{"role": "user", "content": "hi"}]) as st:
            st.get_final_text()

    call(open_telemetry=False)
    assert tel.finished() == [] and tel.total("liveness.attempts") == 1
    with tel.tracer_provider.get_tracer("app").start_as_current_span("app") as app:
        call(open_telemetry=False)
    (attempt,) = tel.attempts()
    assert attempt.parent.span_id == app.get_span_context().span_id
    assert [sp.name for sp in tel.finished()] == [attempt.name, "app"] and tel.total("liveness.attempts") == 2
    # With its tracing on, the attempt nests under the SDK's call span.
    call()
    sdk_call = next(sp for sp in tel.finished() if sp.instrumentation_scope.name == "com.anthropic.sdk.python")
    assert [sp.parent.span_id for sp in tel.attempts()][-1] == sdk_call.context.span_id


def test_thirty_minute_ping_only_stream_keeps_every_notice(tel) -> None:  # type: ignore[no-untyped-def]
    import time

    from otel_liveness.testing import SimulatedProvider

    # 30 provider-minutes at 1/1000 speed: a ping every 1.5 s (1,200 pings), a notice every 50 s
    # (36 at the nominal 1.8 s). The server's sleeps overshoot, more so on a loaded machine, so the
    # number of notices follows the run's measured length: every one is counted, and the span
    # keeps them up to its cap (tested on its own below) and counts the rest.
    with SimulatedProvider(time_scale=0.001) as fast_provider:
        url = fast_provider.add("long", [[s.Headers(), *anthropic_reply("done", think_pings=1200, ping_every=1.5)]])
        policy = Policy(raw_idle_timeout=0.5, semantic_notice_interval=0.05)
        started = time.monotonic()
        _, error = post(tel, url + URL, policy)
        elapsed = time.monotonic() - started
    assert error is None
    (attempt,) = tel.attempts()
    # (A notice before the first body byte is a prefill wait: none is expected, but a loaded
    # machine may delay message_start by a notice interval.)
    notices = [e for e in attempt.events if e.name in (S.EVENT_NOTICE, S.EVENT_PREFILL_WAIT)]
    counted = attempt.attributes[S.ATTEMPT_NOTICES]
    assert attempt.attributes[S.ATTEMPT_HEARTBEATS] == 1200 == tel.total("liveness.heartbeats")
    # One notice per interval of content-free waiting: all but the last stretch of the run.
    waited = attempt.attributes[S.ATTEMPT_MAX_SEMANTIC_GAP]
    assert 1.8 <= waited <= elapsed and int(waited / 0.05) - 1 <= counted <= int(waited / 0.05) + 1, (waited, counted)
    assert counted == tel.total("liveness.semantic_notices") >= 30
    assert len(notices) == min(counted, S.MAX_NOTICE_EVENTS)
    assert [e.attributes[S.NOTICE_NUMBER] for e in notices] == list(range(1, len(notices) + 1))
    assert attempt.attributes.get(S.NOTICES_DROPPED, 0) == counted - len(notices)
    assert len(events(attempt, S.EVENT_HEARTBEAT)) == S.MAX_HEARTBEAT_EVENTS
    assert attempt.attributes[S.HEARTBEATS_DROPPED] > 0 and len(attempt.events) <= 128


def test_span_event_caps_keep_the_first_events_and_count_the_rest(tel) -> None:  # type: ignore[no-untyped-def]
    # The caps on their own, with no clock: the hook is fed the events an attempt would produce.
    from otel_liveness.core.events import AttemptEnded, AttemptStarted, Heartbeats, RequestEnded, RequestStarted, SemanticNotice
    from otel_liveness.core.outcome import AttemptOutcome, AttemptRecord, Phase, RequestReport, StopReason

    report = RequestReport(provider="anthropic", streaming=True)
    hook = tel.hook
    hook(RequestStarted(report, "POST", "api.anthropic.com", 443, "/v1/messages", "claude-x", {}, 100))
    hook(AttemptStarted(report, 0, 0.0, {}))
    notices, reads = S.MAX_NOTICE_EVENTS + 37, S.MAX_HEARTBEAT_EVENTS + 10
    for n in range(1, reads + 1):
        hook(Heartbeats(report, 0, float(n), 3, 3 * n))
    for n in range(1, notices + 1):
        hook(SemanticNotice(report, 0, float(n), n, float(n), 0.1, n, Phase.PREAMBLE))
    record = AttemptRecord(index=0, started=0.0)
    record.outcome, record.duration, record.notices, record.heartbeats = AttemptOutcome.COMPLETED, 1.0, notices, 3 * reads
    hook(AttemptEnded(report, record))
    hook(RequestEnded(report, StopReason.COMPLETED))
    (attempt,) = tel.attempts()
    kept = events(attempt, S.EVENT_NOTICE)
    assert [e.attributes[S.NOTICE_NUMBER] for e in kept] == list(range(1, S.MAX_NOTICE_EVENTS + 1))
    assert attempt.attributes[S.NOTICES_DROPPED] == 37
    beats = events(attempt, S.EVENT_HEARTBEAT)
    assert len(beats) == S.MAX_HEARTBEAT_EVENTS and beats[-1].attributes[S.ATTEMPT_HEARTBEATS] == 3 * S.MAX_HEARTBEAT_EVENTS
    assert attempt.attributes[S.HEARTBEATS_DROPPED] == 3 * 10  # heartbeats, not reads
    # Fed faster than their engine clock ran (a heartbeat a second apart, delivered at once), the
    # events still sit inside their span, in order: a stamp is never later than when it was added.
    stamps = [e.timestamp for e in beats]
    assert stamps == sorted(stamps) and all(attempt.start_time <= t <= attempt.end_time for t in stamps)
    # Metrics count everything, whatever the span kept.
    assert tel.total("liveness.semantic_notices") == notices and tel.total("liveness.heartbeats") == 3 * reads


def test_interleaved_requests_keep_their_own_state_and_a_dropped_report_takes_its_state(tel) -> None:  # type: ignore[no-untyped-def]
    # The hook answers the state it looked up last without its map: two requests whose events
    # alternate must still each get their own, and that shortcut keeps no state past its report.
    import gc

    from otel_liveness.core.events import AttemptEnded, AttemptStarted, Heartbeats, RequestEnded, RequestStarted
    from otel_liveness.core.outcome import AttemptOutcome, AttemptRecord, RequestReport, StopReason

    hook = tel.hook
    reports = {model: RequestReport(provider="anthropic", streaming=True) for model in ("model-a", "model-b")}
    for model, report in reports.items():
        hook(RequestStarted(report, "POST", "api.anthropic.com", 443, "/v1/messages", model, {}, 100))
    for model, report in [*reports.items(), *reports.items()]:
        if not report.attempts:
            report.attempts.append(AttemptRecord(index=0, started=0.0))
            hook(AttemptStarted(report, 0, 0.0, {}))
        hook(Heartbeats(report, 0, 1.0, 2 if model == "model-a" else 5, 0))
    for report in reports.values():
        record = report.attempts[0]
        record.outcome, record.duration = AttemptOutcome.COMPLETED, 1.0
        hook(AttemptEnded(report, record))
        hook(RequestEnded(report, StopReason.COMPLETED))
    spans = {sp.attributes[S.GEN_AI_REQUEST_MODEL]: sp for sp in tel.attempts()}
    assert set(spans) == set(reports)
    for model, span in spans.items():
        counts = [e.attributes[S.HEARTBEAT_COUNT] for e in events(span, S.EVENT_HEARTBEAT)]
        assert counts == ([2, 2] if model == "model-a" else [5, 5])
        parent = next(sp for sp in tel.finished() if sp.context.span_id == span.parent.span_id)
        assert parent.attributes[S.GEN_AI_REQUEST_MODEL] == model
    assert tel.total("liveness.heartbeats") == 2 * 2 + 2 * 5
    # The state the hook keeps aside for the report it saw last goes with that report.
    assert hook._last is not None and hook._last[0]() is reports["model-b"]
    reports.clear()
    report = None
    gc.collect()
    assert hook._last is None


def test_no_secret_or_content_in_any_export(provider, tel, caplog) -> None:  # type: ignore[no-untyped-def]
    body = {**BODY, "messages": [{"role": "user", "content": "PLANTED-PROMPT-TEXT"}]}
    url = provider.add("secrets", [[anthropic_status(529, "overloaded_error")],
                                   [s.Headers(), *anthropic_reply("PLANTED-COMPLETION-TEXT", think_pings=3, deltas=4,
                                                                  stall_after=2), s.Stall()]])
    with caplog.at_level(logging.DEBUG):
        _, error = post(tel, url + URL, FAST, body)
    assert isinstance(error, otel_liveness.StreamTruncated)
    spans = [json.loads(sp.to_json()) for sp in tel.finished()]
    metrics = tel.reader.get_metrics_data().to_json()
    records = [{**r.__dict__, "args": repr(r.args)} for r in caplog.records if r.name.startswith("otel_liveness")]
    # Something of every kind was exported -- the attempts, their events, metrics, log records --
    # so the absence of the planted strings below means something.
    assert len(tel.attempts()) == 2 and len(spans) == 3
    assert {e["name"] for sp in spans for e in sp["events"]} >= {S.EVENT_RETRY, S.EVENT_HEARTBEAT, S.EVENT_TRUNCATION}
    assert tel.total("liveness.attempts") == 2 and tel.total("liveness.heartbeats") == 3
    assert {r["levelname"] for r in records} >= {"INFO", "WARNING"}  # the retry, the truncation
    dumped = json.dumps(spans) + metrics + json.dumps(records, default=repr)
    assert "claude-sim-1" in dumped and "overloaded" in dumped  # the non-secret facts are there
    for secret in ("PLANTED-SECRET", "PLANTED-PROMPT", "PLANTED-COMPL", "x-api-key", "PLANTED"):
        assert secret not in dumped
    assert "PLANTED" not in str(error)


def test_attribute_values_are_bounded(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("long-model", [[s.Headers(), *anthropic_reply()]])
    _, error = post(tel, url + URL, FAST, {**BODY, "model": "m" * 5000})
    assert error is None
    spans = tel.finished()
    (attempt,) = tel.attempts()
    (request,) = [sp for sp in spans if sp is not attempt]
    # The model name is recorded, cut to its bound, on both spans and on the metric points.
    assert attempt.attributes[S.GEN_AI_REQUEST_MODEL] == request.attributes[S.GEN_AI_REQUEST_MODEL] == "m" * 128
    points = tel.points("liveness.attempts")
    assert points and all(attrs[S.GEN_AI_REQUEST_MODEL] == "m" * 128 for attrs, _ in points)
    for span in spans:
        assert len(span.name) <= 256
        for value in span.attributes.values():
            assert len(str(value)) <= 256
    for name in ("liveness.attempts", "liveness.requests", "gen_ai.client.operation.duration"):
        for attrs, _ in tel.points(name):
            assert all(len(str(v)) <= 256 for v in attrs.values())


def test_http_instrumentation_adds_no_second_span(provider, tel) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    url = provider.add("httpx", [[s.Headers(), *anthropic_reply()]])
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=tel.tracer_provider)
    try:
        transport = otel_liveness.wrap(httpx.HTTPTransport(), FAST, hooks=[tel.hook])
        with httpx.Client(transport=transport) as client:
            with client.stream("POST", url + URL, json=BODY) as response:
                response.read()
    finally:
        instrumentor.uninstrument()
    scopes = [sp.instrumentation_scope.name for sp in tel.finished()]
    assert scopes == [S.SCOPE, S.SCOPE], scopes  # attempt + request, no httpx span


# -- no SDK installed: the hook on the global providers is dormant --------------------------------


def _sent_trace_headers(provider: Any, name: str, hook: TelemetryHook, headers: dict[str, str]) -> dict[str, str]:
    """The trace-context headers the provider received for one request sent with ``hook``."""
    url = provider.add(name, [[s.Headers(), *anthropic_reply()]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
    with httpx2.Client(transport=transport) as client:
        client.post(url + URL, json=BODY, headers=headers).raise_for_status()
    (request,) = provider.requests(name)
    return {k: request.headers[k] for k in ("traceparent", "tracestate", "baggage") if k in request.headers}


def test_with_no_sdk_the_hook_is_dormant_and_propagates_as_the_api_would(provider) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry import baggage, trace
    from opentelemetry import context as otel_context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    dormant = TelemetryHook()
    awake = TelemetryHook()
    awake._globals = False  # the same hook making its non-recording spans through the API
    assert dormant._dormant() and not awake._dormant(), "a test of this process installed a global provider"
    caller = SpanContext(trace_id=0x5A5A << 64 | 7, span_id=0xABCDEF, is_remote=False, trace_flags=TraceFlags(1))
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    cases = {
        "none": ({}, None),  # no trace anywhere: nothing propagated
        "current": ({}, caller),  # the application's current span (and baggage)
        "own": ({"traceparent": own, "tracestate": "v=1"}, caller),  # the request's own trace headers win
    }
    for name, (headers, current) in cases.items():
        token = None
        if current is not None:
            token = otel_context.attach(baggage.set_baggage("tenant", "t1",
                                                            trace.set_span_in_context(NonRecordingSpan(current))))
        try:
            sent = {which: _sent_trace_headers(provider, f"{name}-{which}", hook, headers)
                    for which, hook in (("dormant", dormant), ("awake", awake))}
        finally:
            if token is not None:
                otel_context.detach(token)
        assert sent["dormant"] == sent["awake"], name
        if name == "none":
            assert sent["dormant"] == {}
        elif name == "current":
            assert sent["dormant"]["traceparent"] == f"00-{caller.trace_id:032x}-{caller.span_id:016x}-01"
            assert "baggage" not in sent["dormant"]  # the application's baggage stays home by default
        else:
            assert sent["dormant"]["traceparent"] == own and sent["dormant"]["tracestate"] == "v=1"


def test_a_dormant_request_still_logs_its_give_up(provider, caplog) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("give-up", [[anthropic_status(529, "overloaded_error")]])
    hook = TelemetryHook()
    assert hook._dormant()
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
    with caplog.at_level(logging.WARNING, logger="otel_liveness.events"), httpx2.Client(transport=transport) as client:
        assert client.post(url + URL, json=BODY).status_code == 529  # (the last attempt's reply, as it came)
    (record,) = [r for r in caplog.records if r.name == "otel_liveness.events"]
    attempts = len(provider.requests("give-up"))
    assert attempts > 1 and record.getMessage() == f"provider failed after {attempts} attempts (status_529)"
    assert record.__dict__[S.STOP_REASON] == "exhausted"


def test_an_sdk_installed_after_the_hook_traces_the_next_request(provider, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_globals

    hook = TelemetryHook()  # made while no SDK is installed: its tracer is the API's proxy
    exporter = InMemorySpanExporter()
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    _sent_trace_headers(provider, "before", hook, {})
    assert exporter.get_finished_spans() == ()
    # what set_tracer_provider / set_meter_provider do to the globals (undone after the test)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", sdk)
    monkeypatch.setattr(metrics_globals, "_METER_PROVIDER", MeterProvider(metric_readers=[InMemoryMetricReader()]))
    assert not hook._dormant()
    sent = _sent_trace_headers(provider, "after", hook, {})
    spans = {sp.name: sp for sp in exporter.get_finished_spans()}
    assert set(spans) == {"chat claude-sim-1", "POST anthropic"}
    assert sent["traceparent"].split("-")[2] == format(spans["POST anthropic"].context.span_id, "016x")


def test_a_dormant_request_makes_no_metric_point_even_once_an_sdk_is_there(provider) -> None:  # type: ignore[no-untyped-def]
    # A request decided dormant as it started stays so: a meter that records (an SDK installed
    # while it runs) gets no retry, attempt or request point of it -- half a request counted would
    # be a wrong figure. The same hook awake counts the same request whole.
    counted: dict[str, set[str]] = {}
    for which in ("dormant", "awake"):
        reader = InMemoryMetricReader()
        hook = TelemetryHook(meter_provider=MeterProvider(metric_readers=[reader]))
        hook._globals = which == "dormant"  # (no global provider set: the check finds none)
        assert hook._dormant() is (which == "dormant")
        url = provider.add(f"retried-{which}",
                           [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply()]])
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
        with httpx2.Client(transport=transport) as client:
            client.post(url + URL, json=BODY).raise_for_status()
        assert len(provider.requests(f"retried-{which}")) == 2
        data = reader.get_metrics_data()
        # (the process's own observables -- recorder drops, retry budgets -- are no request's points)
        counted[which] = {m.name for rm in (data.resource_metrics if data else ()) for sm in rm.scope_metrics
                          for m in sm.metrics if any(True for _ in m.data.data_points)
                          and m.name not in ("liveness.recorder.drops", "liveness.retry_budget.fill")}
    assert counted["dormant"] == set()
    assert {S.M_RETRIES[0], S.M_ATTEMPTS[0]} <= counted["awake"], counted["awake"]


def test_a_dormant_request_logs_in_the_trace_context_it_started_in(provider) -> None:  # type: ignore[no-untyped-def]
    # Its truncation is logged while the body is read in another context (another span current):
    # the record carries the context the request started in, as the awake hook's non-recording
    # spans carry it.
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    def span(n: int) -> Any:
        return NonRecordingSpan(SpanContext(trace_id=n << 64 | 1, span_id=n, is_remote=False, trace_flags=TraceFlags(1)))

    class Seen(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.trace_ids: list[int] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.trace_ids.append(trace.get_current_span().get_span_context().trace_id)

    seen: dict[str, list[int]] = {}
    for which in ("dormant", "awake"):
        hook = TelemetryHook()
        hook._globals = which == "dormant"
        url = provider.add(f"cut-{which}", [[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
        handler = Seen()
        logger = logging.getLogger("otel_liveness.events")
        logger.addHandler(handler)
        old_level = logger.level
        logger.setLevel(logging.WARNING)
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
        try:
            with httpx2.Client(transport=transport) as client:
                token = otel_context.attach(trace.set_span_in_context(span(7)))
                try:
                    response = client.send(client.build_request("POST", url + URL, json=BODY), stream=True)
                finally:
                    otel_context.detach(token)
                token = otel_context.attach(trace.set_span_in_context(span(9)))  # the reader's own context
                try:
                    with pytest.raises(otel_liveness.StreamTruncated):
                        response.read()
                finally:
                    otel_context.detach(token)
                    response.close()
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
        seen[which] = handler.trace_ids
    assert seen["dormant"] == seen["awake"] == [7 << 64 | 1]


@pytest.mark.parametrize("key", ["api", "absent"])
def test_the_send_context_suppresses_http_instrumentation_as_the_helper_does(
        monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """The hook's send context sets the key opentelemetry-instrumentation's own reader checks,
    only while it is entered, and restores the context on an error too -- through the helper
    itself when the API does not name the key."""
    from opentelemetry.instrumentation.utils import is_http_instrumentation_enabled

    from otel_liveness.telemetry import _hook

    if key == "absent":
        monkeypatch.setattr(_hook, "_SUPPRESS_KEY", None)
    assert isinstance(TelemetryHook.send_context(), _hook._SuppressHTTP) is (key == "api")
    assert is_http_instrumentation_enabled()
    with TelemetryHook.send_context():
        assert not is_http_instrumentation_enabled()
        with TelemetryHook.send_context():
            assert not is_http_instrumentation_enabled()
        assert not is_http_instrumentation_enabled()
    assert is_http_instrumentation_enabled()
    with pytest.raises(KeyError), TelemetryHook.send_context():
        raise KeyError("x")
    assert is_http_instrumentation_enabled()


def test_the_hook_takes_a_requests_heartbeats_only_with_an_sdk_behind_it(tel) -> None:  # type: ignore[no-untyped-def]
    from otel_liveness.core.events import RequestStarted, TakesHeartbeats
    from otel_liveness.core.outcome import RequestReport

    dormant = TelemetryHook()
    assert dormant._dormant(), "a test of this process installed a global provider"
    assert isinstance(dormant, TakesHeartbeats) and isinstance(tel.hook, TakesHeartbeats)
    for hook, takes in ((dormant, False), (tel.hook, True)):
        report = RequestReport(provider="anthropic", streaming=True)
        hook(RequestStarted(report, "POST", "api.anthropic.com", 443, "/v1/messages", "m", {}))
        assert hook.takes_heartbeats(report) is takes
