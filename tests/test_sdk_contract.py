"""The contract of the SDK above: with the transport in the path, the SDK keeps its exception
types, its options (timeouts, propagation), its middleware and what it reads of its own client.

Each test here is a regression test of a difference the SDK's own test suite found (``make peer``,
docs/compatibility.md), driven through the real anthropic SDK or the HTTP library the way the SDK
uses it, against the simulated provider or a mock transport."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from typing import Any

import anthropic
import anyio
import httpx2
import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.propagate import get_global_textmap, set_global_textmap
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_liveness
from otel_liveness import Policy, ProviderError, StreamTruncated
from otel_liveness.telemetry import TelemetryHook, instrument, uninstrument
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import BEDROCK_HEADERS, anthropic_error, anthropic_status, bedrock_exception, bedrock_reply
from otel_liveness.transport import liveness_in

from .conftest import FAST

MESSAGES = [{"role": "user", "content": "hi"}]
SSE = {"content-type": "text/event-stream"}


def sdk(url: str, policy: Policy = FAST, **kw: Any) -> anthropic.Anthropic:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, telemetry=False)
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                               http_client=httpx2.Client(transport=transport), **kw)


def reply_bytes(text: str = "ok") -> bytes:
    return b"".join(step.data for step in anthropic_reply(text))


# -- 1: a transport of both kinds under an AsyncClient is served async ------------------------------


@pytest.mark.parametrize("mode", ["shadow", "enforce"])
@pytest.mark.parametrize("hosts", [["*"], ["api.anthropic.com"]])
def test_an_async_client_over_a_transport_of_both_kinds_gets_it_async(mode: str, hosts: list[str]) -> None:
    # httpx2.MockTransport is both sync and async (the SDK's snapshot client): the instrumentor
    # placed it as the client's kind, for hosts in its list and others alike.
    body = reply_bytes("mocked")
    instrument(enforce=mode == "enforce", hosts=hosts)
    try:
        transport = httpx2.MockTransport(lambda request: httpx2.Response(200, headers=SSE, content=body))

        async def main() -> str:
            async with anthropic.AsyncAnthropic(api_key="k", max_retries=0,
                                                http_client=httpx2.AsyncClient(transport=transport)) as client:
                stream = await client.messages.create(model="m", max_tokens=5, messages=MESSAGES, stream=True)
                return "".join([e.delta.text async for e in stream if e.type == "content_block_delta"])

        assert anyio.run(main) == "mocked"
    finally:
        uninstrument()


def test_the_instrumentor_leaves_the_clients_own_transport_in_place(provider) -> None:  # type: ignore[no-untyped-def]
    # What the SDK (and its tests) read of the client: the transport object, its class, its pool,
    # its proxy -- unchanged; the policy sits in it.
    url = provider.add("seat", [[s.Headers(), *anthropic_reply()[:1], s.Stall()], [s.Headers(), *anthropic_reply("hi")]])
    original = httpx2.HTTPTransport.handle_request
    instrument(enforce=True, hosts=["127.0.0.1"], policy=FAST)
    try:
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        transport = client._client._transport
        assert type(transport) is httpx2.HTTPTransport and transport._pool is not None
        assert liveness_in(transport) is not None and liveness_in(transport).inner._pool is transport._pool  # type: ignore[union-attr]
        proxied = httpx2.Client(proxy="http://proxy.example:3128")._transport_for_url(httpx2.URL("https://api.anthropic.com"))
        assert type(proxied) is httpx2.HTTPTransport and proxied._pool._proxy_url.host == b"proxy.example"
        with client.messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream:
            assert stream.get_final_text() == "hi"
        assert provider.attempts("seat") == 2  # retried below the SDK: the policy was in the path
    finally:
        uninstrument()
    assert liveness_in(transport) is None and httpx2.HTTPTransport.handle_request is original


# -- 6: after httpx2.alias_httpx(), one family ------------------------------------------------------


def test_alias_httpx_leaves_one_family_and_uninstrument_unwraps_every_client() -> None:
    script = textwrap.dedent("""
        import httpx2
        httpx2.alias_httpx()
        import httpx
        from otel_liveness.transport import installed_modules, liveness_in
        from otel_liveness.telemetry import instrument, uninstrument
        assert httpx is httpx2 and installed_modules() == [httpx2], installed_modules()
        original = httpx2.Client.__init__
        instrument(enforce=True, hosts=["*"])
        assert httpx2.Client.__init__.__wrapped__ is original  # patched once
        client, aclient = httpx2.Client(), httpx2.AsyncClient()
        assert liveness_in(client._transport) is not None and liveness_in(aclient._transport) is not None
        uninstrument()
        assert httpx2.Client.__init__ is original
        assert liveness_in(client._transport) is None and liveness_in(aclient._transport) is None
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# -- 3: errors keep their kind ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ConnectTimeout", "PoolTimeout", "WriteTimeout", "ConnectError"])
def test_a_spent_budget_is_the_family_exception_it_ended_in_with_the_cause_chained(kind: str) -> None:
    raised: list[BaseException] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        exc = getattr(httpx2, kind)(f"[Errno 111] refused ({len(raised)})")
        raised.append(exc)
        raise exc

    client = httpx2.Client(transport=otel_liveness.wrap(httpx2.MockTransport(handler), FAST, telemetry=False))
    with pytest.raises(getattr(httpx2, kind)) as info:
        client.post("https://api.anthropic.com/v1/messages", json={"model": "m", "stream": True})
    exc = info.value
    assert isinstance(exc, ProviderError) and exc.attempts == FAST.max_attempts == len(raised)
    assert exc.__cause__ is raised[-1] and "refused" in str(exc.__cause__)
    assert isinstance(exc, httpx2.TimeoutException) == kind.endswith("Timeout")


def test_the_sdk_raises_its_timeout_error_for_a_spent_budget_of_timeouts() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectTimeout("timed out")

    transport = otel_liveness.wrap(httpx2.MockTransport(handler), FAST, telemetry=False)
    client = anthropic.Anthropic(api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport))
    with pytest.raises(anthropic.APITimeoutError) as info:
        client.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    found = otel_liveness.liveness_error(info.value)
    assert isinstance(found, ProviderError) and found.attempts == FAST.max_attempts


def test_a_request_the_http_library_refuses_to_send_is_never_retried(provider) -> None:  # type: ignore[no-untyped-def]
    # h11 rejects a header value with a newline in it: the client's own fault, raised as it came.
    url = provider.add("bad-header", [[s.Headers(), *anthropic_reply()]])
    events: list[Any] = []
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[events.append], telemetry=False)
    with httpx2.Client(transport=transport) as client:
        with pytest.raises(httpx2.LocalProtocolError) as info:
            client.post(url + "/v1/messages", json={"model": "m", "stream": True}, headers={"x-note": "a\nb"})
    assert not isinstance(info.value, otel_liveness.LivenessError)
    assert provider.attempts("bad-header") == 0
    (ended,) = [e for e in events if type(e).__name__ == "RequestEnded"]
    assert ended.report.stop_reason == "rejected" and len(ended.report.attempts) == 1
    assert ended.report.attempts[0].error_type == "local_error"


def test_the_callers_own_read_timeout_still_bounds_the_wait(provider) -> None:  # type: ignore[no-untyped-def]
    # The caller's timeout (0.3 s) is shorter than the policy's raw bound (30 s): it ends the wait,
    # once, as the timeout it is -- not three attempts of it, not the policy's bound.
    url = provider.add("caller-timeout", [[s.Headers(), anthropic_reply()[0], s.Stall()]])
    policy = FAST.replace(raw_idle_timeout=30.0)
    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError) as info:
        with sdk(url, policy, timeout=0.3).messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream:
            stream.get_final_text()
    assert time.monotonic() - started < 10.0 and provider.attempts("caller-timeout") == 1
    assert isinstance(info.value.__cause__, httpx2.ReadTimeout)
    assert otel_liveness.liveness_error(info.value) is None  # the caller's verdict, not the transport's
    # After content the caller's timeout is a truncation -- of the timeout's class, the cause chained.
    url = provider.add("caller-timeout-after", [[s.Headers(), *anthropic_reply("abcdef", deltas=6, stall_after=2), s.Stall()]])
    with pytest.raises(anthropic.APITimeoutError) as after:
        with sdk(url, policy, timeout=0.3).messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream:
            stream.get_final_text()
    truncated = otel_liveness.liveness_error(after.value)
    assert isinstance(truncated, StreamTruncated) and isinstance(truncated, httpx2.ReadTimeout)
    assert isinstance(truncated.__cause__, httpx2.ReadTimeout) and provider.attempts("caller-timeout-after") == 1


# -- 4: a provider error before content keeps its type ----------------------------------------------


def test_an_in_band_rejection_is_the_sdks_status_error(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("rejected", [[s.Headers(), anthropic_reply()[0],
                                     s.Raw(anthropic_error("invalid_request_error", "prompt is too long"))]])
    with pytest.raises(anthropic.APIStatusError) as info:
        with sdk(url).messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream:
            stream.get_final_text()
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert info.value.response.extensions["liveness"]["stop_reason"] == "rejected"
    assert provider.attempts("rejected") == 1


def test_an_in_band_error_retried_to_the_end_is_the_sdks_status_error(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("overloaded", [[s.Headers(), anthropic_reply()[0], s.Raw(anthropic_error("overloaded_error"))]])
    with pytest.raises(anthropic.APIStatusError) as info:
        for _ in sdk(url).messages.create(model="m", max_tokens=5, messages=MESSAGES, stream=True):
            pass
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    report = info.value.response.extensions["liveness"]
    assert report["stop_reason"] == "exhausted" and len(report["attempts"]) == FAST.max_attempts
    assert provider.attempts("overloaded") == FAST.max_attempts


def test_a_bedrock_exception_frame_before_content_is_the_sdks_error(provider) -> None:  # type: ignore[no-untyped-def]
    start = bedrock_reply("x")[0]  # (the message_start chunk: no content yet)
    rejected = s.Raw(bedrock_exception("validationException", "bad input"))
    url = provider.add("bedrock-rejected", [[BEDROCK_HEADERS, start, rejected]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    client = anthropic.AnthropicBedrock(aws_region="us-east-1", aws_access_key="AKIDEXAMPLE", aws_secret_key="secret",
                                        max_retries=0, base_url=url, http_client=httpx2.Client(transport=transport))
    with pytest.raises(anthropic.APIError) as info:
        with client.messages.stream(model="anthropic.claude-x", max_tokens=5, messages=MESSAGES) as stream:
            stream.get_final_text()
    assert otel_liveness.liveness_error(info.value) is None and "bad input" in str(info.value)
    assert provider.attempts("bedrock-rejected") == 1


# -- 5: a body the inner transport read whole stays read -------------------------------------------


@pytest.mark.parametrize("status", [200, 400])
def test_a_response_read_before_it_reached_the_transport_is_read(status: int) -> None:
    body = reply_bytes() if status == 200 else b'{"type":"error","error":{"type":"invalid_request_error"}}'
    headers = SSE if status == 200 else {"content-type": "application/json"}
    transport = otel_liveness.wrap(httpx2.MockTransport(lambda r: httpx2.Response(status, headers=headers, content=body)),
                                   FAST, telemetry=False)
    with httpx2.Client(transport=transport) as client:
        with client.stream("POST", "https://api.anthropic.com/v1/messages", json={"stream": True}) as response:
            assert response.is_closed and response.is_stream_consumed and response.content == body
            assert response.extensions["liveness"]["stop_reason"] in ("completed", "rejected")


# -- 2: the trace context the layer above chose ------------------------------------------------------


class CountingPropagator:
    """The global propagator, counting every inject."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.injections = 0

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        self.injections += 1
        self.inner.inject(carrier, context=context) if setter is None else self.inner.inject(carrier, context, setter)

    def extract(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.extract(*args, **kwargs)

    @property
    def fields(self) -> Any:
        return self.inner.fields


@pytest.fixture
def app_context() -> Any:
    """An application span and baggage current, a counting global propagator, a tracer provider."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    propagator = CountingPropagator(get_global_textmap())
    set_global_textmap(propagator)  # type: ignore[arg-type]
    with provider.get_tracer("app").start_as_current_span("app"):
        token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
        try:
            yield provider, exporter, propagator
        finally:
            otel_context.detach(token)
            set_global_textmap(propagator.inner)


TRACE_HEADERS = ("traceparent", "tracestate", "baggage")


def test_the_sdks_propagation_off_sends_no_trace_context(provider, app_context) -> None:  # type: ignore[no-untyped-def]
    tracer_provider, _, propagator = app_context
    url = provider.add("prop-off", [[s.Headers(), *anthropic_reply()]])
    hook = TelemetryHook(tracer_provider)
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport),
                                 open_telemetry={"tracer_provider": tracer_provider, "propagation": False})
    client.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    (request,) = provider.requests("prop-off")
    assert [h for h in TRACE_HEADERS if h in request.headers] == [] and propagator.injections == 0


def test_the_sdks_own_trace_context_is_sent_as_it_set_it(provider, app_context) -> None:  # type: ignore[no-untyped-def]
    tracer_provider, exporter, _ = app_context
    url = provider.add("prop-on", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply()]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[TelemetryHook(tracer_provider)])
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport),
                                 open_telemetry={"tracer_provider": tracer_provider})
    client.messages.create(model="m", max_tokens=5, messages=MESSAGES)
    (call,) = [sp for sp in exporter.get_finished_spans() if sp.name == "anthropic.messages.create"]
    requests = provider.requests("prop-on")
    assert len(requests) == 2  # (a retry below the SDK carries the SDK's context too)
    for request in requests:
        assert request.headers["traceparent"].split("-")[2] == format(call.context.span_id, "016x")
        assert request.headers["baggage"] == "tenant=acme"  # the SDK's own propagation sends it: not ours to drop


@pytest.mark.parametrize("allowed", [False, True])
def test_the_applications_baggage_reaches_a_provider_only_when_allowed(provider, app_context, allowed) -> None:  # type: ignore[no-untyped-def]
    tracer_provider, exporter, _ = app_context
    url = provider.add(f"baggage-{allowed}", [[s.Headers(), *anthropic_reply()]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST.replace(propagate_baggage=allowed),
                                   hooks=[TelemetryHook(tracer_provider)])
    with httpx2.Client(transport=transport) as client:
        client.post(url + "/v1/messages", json={"model": "m", "stream": True}).raise_for_status()
    (request,) = provider.requests(f"baggage-{allowed}")
    (attempt,) = [sp for sp in exporter.get_finished_spans() if sp.instrumentation_scope.name == "otel_liveness"
                  and sp.kind == trace.SpanKind.CLIENT and sp.name.startswith("POST")]
    assert request.headers["traceparent"].split("-")[2] == format(attempt.context.span_id, "016x")
    assert ("baggage" in request.headers) is allowed


# -- the SDK's own recovery composes --------------------------------------------------------------


def test_the_fallback_middlewares_capacity_errors_are_its_to_handle(provider) -> None:  # type: ignore[no-untyped-def]
    # A request the refusal-fallback middleware sends: its 429 goes up at once (the middleware
    # re-sends a fast hop without `speed`, or moves on), not after the transport's own attempts.
    from anthropic.lib.middleware import BetaRefusalFallbackMiddleware

    url = provider.add("middleware", [[anthropic_status(429, "rate_limit_error")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport),
                                 middleware=[BetaRefusalFallbackMiddleware([{"model": "fallback-model"}])])
    with pytest.raises(anthropic.RateLimitError) as info:
        client.beta.messages.create(model="m", max_tokens=5, messages=MESSAGES, speed="fast")
    assert provider.attempts("middleware") == 1
    assert info.value.response.extensions["liveness"]["stop_reason"] == "deferred"
    # Without the middleware, the same answer is retried below the SDK (until the host's retry
    # budget stops it: core/memory/budget.py).
    url = provider.add("no-middleware", [[anthropic_status(429, "rate_limit_error")]])
    with pytest.raises(anthropic.RateLimitError):
        sdk(url).messages.create(model="m", max_tokens=5, messages=MESSAGES)
    assert provider.attempts("no-middleware") > 1



# -- one way to learn how the transport ended a request (README, "Handling what the transport cannot recover") --


def ending(exc: BaseException | None) -> str:
    """The README's pattern, as a function of what the SDK raised."""
    if exc is None:
        return "answered"
    error = otel_liveness.liveness_error(exc)
    report = otel_liveness.liveness_report(exc)
    if isinstance(error, StreamTruncated):
        return f"truncated:{otel_liveness.continuation_message(error.partial) is not None}"
    if report and report["stop_reason"] in ("exhausted", "rate_limited", "retry_budget", "wall_budget"):
        return f"provider failure:{report['stop_reason']}:{report['cause']}:{len(report['attempts'])}"
    if report and report["stop_reason"] == "truncated":
        return f"provider ended the reply:{report['cause']}:{type(exc).__name__}:{len(report['attempts'])}"
    if report:
        return f"other:{report['stop_reason']}"
    return "not judged"


@pytest.mark.parametrize(("script", "policy", "drain", "expected"), [
    ([[s.Headers(), *anthropic_reply("fine")]], FAST, False, "answered"),
    ([[s.Headers(), *anthropic_reply("abcd", thinking="plan", deltas=4, stall_after=2), s.Stall()]], FAST, False,
     "truncated:True"),
    ([[s.Headers(), anthropic_reply()[0], s.Stall()]], FAST, False, "provider failure:exhausted:raw_silence:3"),
    ([[anthropic_status(529, "overloaded_error")]], FAST, False, "provider failure:exhausted:status_529:3"),
    ([[s.Headers(), anthropic_reply()[0], s.Raw(anthropic_error("overloaded_error"))]], FAST, False,
     "provider failure:exhausted:error_event:overloaded_error:3"),
    ([[anthropic_status(429, "rate_limit_error")]], FAST.replace(max_rate_limit_attempts=2), False,
     "provider failure:rate_limited:status_429:2"),
    ([[anthropic_status(529, "overloaded_error")]], FAST, True, "provider failure:retry_budget:status_529:1"),
    ([[s.HangBeforeHeaders()]], FAST.replace(wall_timeout=0.2, raw_idle_timeout=5.0), False,
     "provider failure:wall_budget:wall_budget:1"),
    ([[anthropic_status(400, "invalid_request_error")]], FAST, False, "other:rejected"),
    ([[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Raw(anthropic_error("overloaded_error"))]],
     FAST, False, "provider ended the reply:error_event:overloaded_error:APIStatusError:1"),
], ids=["answered", "truncated", "dead-exhausted", "529-exhausted", "in-band-exhausted", "rate-limited",
        "retry-budget", "wall-budget", "rejected", "error-after-content"])
def test_the_readme_pattern_names_every_ending_through_the_sdk(provider, script, policy, drain, expected) -> None:  # type: ignore[no-untyped-def]
    if drain:  # other agents of the process spent the host's budget just before
        spent = provider.add("spent", [[anthropic_status(529, "overloaded_error")]])
        for _ in range(3):
            with pytest.raises(anthropic.APIStatusError):
                sdk(spent, policy).messages.create(model="m", max_tokens=5, messages=MESSAGES)
    url = provider.add("ending", script)
    raised: BaseException | None = None
    try:
        with sdk(url, policy).messages.stream(model="m", max_tokens=5, messages=MESSAGES) as stream:
            stream.get_final_text()
    except Exception as exc:
        raised = exc
    assert ending(raised) == expected


def test_with_retry_statuses_off_a_middleware_sees_the_first_status(provider) -> None:  # type: ignore[no-untyped-def]
    # An SDK middleware that falls back to another model on a 529 (the SDK's own test's shape):
    # with the transport's status retries off it gets the first 529 and its fallback answers.
    from anthropic import Middleware

    url = provider.add("fallback", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply("fb")]])
    models: list[str] = []

    class ModelFallback(Middleware):
        def handle(self, request: Any, call_next: Any) -> Any:
            response = call_next(request)
            if response.status_code != 529:
                return response
            models.append("fallback")
            return call_next(request.copy(body={**request.json, "model": "claude-fallback"}))

    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST.replace(retry_statuses=False), telemetry=False)
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, middleware=[ModelFallback()],
                                 http_client=httpx2.Client(transport=transport))
    with client.messages.stream(model="claude-first", max_tokens=5, messages=MESSAGES) as stream:
        assert stream.get_final_text() == "fb"
    assert models == ["fallback"] and provider.attempts("fallback") == 2
    assert [r.body for r in provider.requests("fallback")][1].count(b"claude-fallback") == 1


# -- a request that must not be sent twice: a remote MCP server among its tools -------------------

MCP_TOOL = {"type": "mcp", "server_label": "desk", "server_url": "https://mcp.example/mcp", "require_approval": "never"}


def test_a_request_with_a_remote_mcp_server_gets_one_attempt_as_its_sdk_gives_it(provider) -> None:  # type: ignore[no-untyped-def]
    # The provider may have called the MCP server's tools -- their effects made -- before it
    # failed: the openai SDK's tool runner sends such a request with max_retries=0, and the
    # transport, which sees the tool in the body, makes one attempt too (found by the openai SDK's
    # own tests, tests/lib/test_runner_server_tools.py).
    import openai

    from otel_liveness.testing.scripts import openai_responses_reply

    server_error = s.Status(500, b'{"error": {"message": "synthetic failure", "type": "server_error"}}')
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    url = provider.add("mcp", [[server_error], [s.Headers(), *openai_responses_reply("late")]])
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=transport))
    with pytest.raises(openai.InternalServerError) as info:
        client.responses.create(model="m", input="hi", tools=[MCP_TOOL], stream=True)  # type: ignore[list-item]
    assert provider.attempts("mcp") == 1
    assert info.value.response.extensions["liveness"]["stop_reason"] == "deferred"
    # The same request without the MCP tool is retried below the SDK, as every request is.
    url = provider.add("no-mcp", [[server_error], [s.Headers(), *openai_responses_reply("answered")]])
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=transport))
    text = "".join(event.delta for event in client.responses.create(model="m", input="hi", stream=True)
                   if event.type == "response.output_text.delta")
    assert text == "answered" and provider.attempts("no-mcp") == 2


def test_only_the_tools_member_names_a_remote_mcp_server() -> None:
    from otel_liveness.core.request.facts import RequestFacts

    def facts(body: bytes) -> RequestFacts:
        return RequestFacts.read(method="POST", url="https://api.openai.com/v1/responses", host="api.openai.com",
                                 port=None, path="/v1/responses", headers={}, body=body, read_timeout=None)

    assert facts(b'{"model":"m","tools":[{"type":"function","name":"f"},{"type" : "mcp","server_label":"x"}]}').once
    assert not facts(b'{"model":"m","input":"what is {\\"type\\":\\"mcp\\"}?","tools":[{"type":"web_search"}]}').once
    assert not facts(b'{"model":"m","input":"hi"}').once
