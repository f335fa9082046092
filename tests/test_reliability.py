"""Reliability: spans end exactly once, socket-level faults end in the policy's verdict within
their deadline, a failing telemetry pipeline never changes what the application receives, bad
input costs linear time, and secrets never leak into errors."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

import otel_liveness
from otel_liveness.core.wire.sse import SSEScanner
from otel_liveness.telemetry import TelemetryHook
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_status

from .clients import VARIANT_IDS, VARIANTS, run
from .conftest import FAST


class ExactlyOnce(SpanProcessor):
    """Fails the test if a span ends twice or never ends."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        self.lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        with self.lock:
            self.started[span.context.span_id] = span.name

    def on_end(self, span: Any) -> None:
        with self.lock:
            self.ended[span.context.span_id] = self.ended.get(span.context.span_id, 0) + 1

    def check(self) -> None:
        assert set(self.started) == set(self.ended), {n for i, n in self.started.items() if i not in self.ended}
        assert all(count == 1 for count in self.ended.values())


def hook_with_checker() -> tuple[TelemetryHook, ExactlyOnce]:
    checker = ExactlyOnce()
    provider = TracerProvider()
    provider.add_span_processor(checker)
    return TelemetryHook(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]), logs=False), checker


SCENARIOS = {
    "success": [[s.Headers(), *anthropic_reply("ok", think_pings=2)]],
    "retry": [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply()]],
    "truncation": [[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]],
    "exhausted": [[s.Headers(), anthropic_reply()[0], s.Stall()]],
    "wall": [[s.Headers(), *anthropic_reply("x" * 30, deltas=30, delta_every=2.0)]],
    "reset": [[s.Headers(), *anthropic_reply("abcdef", deltas=6)[:4], s.Reset()]],
}


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_every_span_ends_exactly_once(variant, provider) -> None:  # type: ignore[no-untyped-def]
    hook, checker = hook_with_checker()
    for name, script in SCENARIOS.items():
        url = provider.add(name, script)
        policy = FAST.replace(wall_timeout=0.2) if name == "wall" else FAST
        run(variant, policy, url + "/v1/messages", hooks=[hook])
    checker.check()
    assert len(checker.started) >= 2 * len(SCENARIOS)


def test_spans_end_when_the_host_raises_mid_stream(provider) -> None:  # type: ignore[no-untyped-def]
    hook, checker = hook_with_checker()
    url = provider.add("host", [[s.Headers(), *anthropic_reply("y" * 20, deltas=20)]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
    with httpx2.Client(transport=transport) as client:
        with pytest.raises(KeyError):
            with client.stream("POST", url + "/v1/messages", json={"stream": True}) as response:
                for _ in response.iter_raw():
                    raise KeyError("host bug")
    checker.check()
    assert len(checker.started) == 2


def test_sync_close_from_another_thread_ends_the_attempt(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("slow", [[s.Headers(), *anthropic_reply("z" * 200, deltas=200, delta_every=1.0)]])
    events: list[Any] = []
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[events.append])
    client = httpx2.Client(transport=transport)
    response = client.send(client.build_request("POST", url + "/v1/messages", json={"stream": True}), stream=True)
    timer = threading.Timer(0.1, response.close)
    timer.start()
    started = time.monotonic()
    with pytest.raises(Exception) as caught:  # the read fails once the response is closed under it
        for _ in response.iter_raw():
            pass
    # ...as the HTTP library's own error: the caller closed it, so no liveness verdict (truncation).
    assert otel_liveness.liveness_error(caught.value) is None, caught.value
    assert time.monotonic() - started < 1.5  # honoured promptly (the stream would run 2 s)
    # close() ends the attempt (as cancelled) before it closes the socket under the read, so the
    # read's failure that follows finds the attempt over: never reported as a truncation.
    ended = [e for e in events if isinstance(e, otel_liveness.AttemptEnded)]
    assert [e.record.outcome.value for e in ended] == ["cancelled"]
    assert [e.stop_reason.value for e in events if isinstance(e, otel_liveness.RequestEnded)] == ["cancelled"]
    client.close()


# -- socket-level faults ----------------------------------------------------------------------------


def reply_bytes(text: str = "abcdefghij") -> bytes:
    return b"".join(step.data for step in anthropic_reply(text, deltas=len(text)) if isinstance(step, s.Raw))


FAULT_POLICY = FAST.replace(raw_idle_timeout=0.2, max_attempts=2)
DEADLINE = 2 * 0.2 + 0.1 + 1.0  # two attempts' raw bound + backoff + tolerance


def complete_content_frame(data: bytes) -> bool:
    """``data`` holds a whole Anthropic content frame (one that commits the stream)."""
    frames = data.split(b"\n\n")[:-1]  # the last piece is not terminated
    return any(f.startswith((b"event: content_block_", b"event: message_delta")) for f in frames)


@pytest.mark.parametrize("seed", range(6))
def test_resets_at_random_offsets(provider, seed) -> None:  # type: ignore[no-untyped-def]
    body = reply_bytes()
    cut = random.Random(seed).randrange(1, len(body) - 1)
    url = provider.add(f"reset{seed}", [[s.Headers(), s.Raw(body[:cut]), s.Reset()]])
    started = time.monotonic()
    result = run(("httpx2", None), FAULT_POLICY, url + "/v1/messages")
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE
    error = result.error
    if isinstance(error, otel_liveness.StreamTruncated):
        # Content was released: exactly the bytes the caller read, a prefix of what was sent that
        # holds a whole content frame; one attempt, never retried.
        assert complete_content_frame(body[:cut]) and complete_content_frame(result.body)
        assert error.prefix == result.body == body[: len(result.body)] and error.released == len(result.body)
        assert error.cause == "read_error" and provider.attempts(f"reset{seed}") == 1
        assert result.report is not None and result.report["stop_reason"] == "truncated"
    else:
        # Nothing was committed: no response, no byte, every attempt spent on the same reset. (A
        # reset can discard bytes the client had not read yet, so a cut after content may land here.)
        assert isinstance(error, otel_liveness.ProviderError), error
        assert result.status is None and result.body == b"" and result.report is None
        assert error.attempts == FAULT_POLICY.max_attempts == provider.attempts(f"reset{seed}")
        assert error.last_cause == "read_error"


@pytest.mark.parametrize(
    ("name", "script", "expected"),
    [
        ("half-open", [s.HangBeforeHeaders()], otel_liveness.ProviderError),
        ("stalled-after-headers", [s.Headers(), s.Stall()], otel_liveness.ProviderError),
        ("mid-chunk", [s.Headers(), s.Raw(reply_bytes()[:200]), s.Reset()], otel_liveness.ProviderError),  # inside message_start
        ("mid-chunk-after-content", [s.Headers(), s.Raw(reply_bytes()[:900]), s.Reset()], otel_liveness.StreamTruncated),
        ("slowloris-before-content", [s.Headers(), s.Trickle(b": " + b"x" * 40 + b"\n\n", size=1, every=1.0),
                                      s.Stall()], otel_liveness.ProviderError),
    ],
)
def test_faults_end_in_the_verdict_within_the_deadline(provider, name, script, expected) -> None:  # type: ignore[no-untyped-def]
    url = provider.add(name, [script])
    started = time.monotonic()
    result = run(("httpx2", "asyncio"), FAULT_POLICY.replace(wall_timeout=3.0), url + "/v1/messages")
    assert isinstance(result.error, expected), result.error
    assert time.monotonic() - started < DEADLINE + (1.0 if "slowloris" in name else 0)


def test_slowloris_trickle_is_bounded_by_the_wall_budget(provider) -> None:  # type: ignore[no-untyped-def]
    # Bytes every 10 ms keep the raw clock happy forever; only the wall budget can stop it.
    url = provider.add("trickle", [[s.Headers(), *anthropic_reply()[:2], s.Trickle(b"x" * 10_000, size=1, every=1.0)]])
    started = time.monotonic()
    result = run(("httpx2", None), FAULT_POLICY.replace(wall_timeout=0.5), url + "/v1/messages")
    assert isinstance(result.error, otel_liveness.WallTimeout)
    assert time.monotonic() - started < 0.5 + 0.5


def test_response_ending_mid_chunk_is_typed(provider) -> None:  # type: ignore[no-untyped-def]
    body = reply_bytes()
    # Cut inside the reply's content (a cut after its finish reason is whole: see test_engine).
    cut = body.index(b"content_block_delta") + 40
    url = provider.add("midchunk", [[s.Headers(), s.Raw(body[:cut]), s.Close()]])
    result = run(("httpx", None), FAULT_POLICY, url + "/v1/messages")
    assert isinstance(result.error, otel_liveness.StreamTruncated) and result.error.cause == "eof"


# -- telemetry failing ------------------------------------------------------------------------------


class Exploding:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"telemetry backend broken ({name})")


def test_a_broken_tracer_or_meter_provider_changes_nothing(provider, caplog) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("ok", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply("fine")]])

    class BrokenTracerProvider:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return Exploding()

    class BrokenMeterProvider:
        def get_meter(self, *args: Any, **kwargs: Any) -> Any:
            class Meter:
                def __getattr__(self, name: str) -> Any:
                    return lambda *a, **k: Exploding()
            return Meter()

    from otel_liveness.transport import _base

    _base._HOOK_FAILURES.clear()
    hook = TelemetryHook(BrokenTracerProvider(), BrokenMeterProvider())
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook])
    with caplog.at_level("WARNING", logger="otel_liveness"), httpx2.Client(transport=transport) as client:
        response = client.post(url + "/v1/messages", json={"stream": True})
    assert response.status_code == 200 and response.content.endswith(b'{"type":"message_stop"}\n\n')
    assert response.extensions["liveness"]["stop_reason"] == "completed"
    warnings = [r for r in caplog.records if "hook" in r.getMessage() and r.levelname == "WARNING"]
    assert len(warnings) == 1  # logged once, then counted: a broken backend must not flood the logs


def test_an_exporter_that_raises_is_dropped_and_counted(provider) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_liveness.telemetry.export import DropCountingSpanExporter

    class Raising:
        def export(self, spans: Any) -> Any:
            raise ConnectionError("collector unreachable")

        def shutdown(self) -> None: ...

    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    exporter = DropCountingSpanExporter(Raising(), meter_provider)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    url = provider.add("ok2", [[s.Headers(), *anthropic_reply("fine")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[TelemetryHook(tracer_provider, meter_provider)])
    with httpx2.Client(transport=transport) as client:
        assert client.post(url + "/v1/messages", json={"stream": True}).status_code == 200
    assert exporter.failures == 2 and exporter.items_dropped == 2  # attempt span + request span
    points = [p for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name == "liveness.telemetry.export_failures" for p in m.data.data_points]
    assert sum(p.value for p in points) == 2


# -- hostile input ----------------------------------------------------------------------------------


def _feed_time(n: int, chunk: bytes) -> float:
    """CPU time of this thread feeding ``n`` chunks (best of 5): time the scheduler gave other
    processes is not counted, so a loaded machine does not distort the ratio."""
    best = float("inf")
    for _ in range(5):
        scanner = SSEScanner(1 << 26)
        started = time.thread_time()
        scanner.feed(b"data: ")
        for _ in range(n):
            scanner.feed(chunk)
        best = min(best, time.thread_time() - started)
    return best


@pytest.mark.parametrize("chunk", [b"x", b"x\n", b":", b"\r"], ids=["bytes", "lines", "colons", "carriage-returns"])
def test_adversarial_chunking_is_linear(chunk: bytes) -> None:
    # 8x the input must cost well under the 64x a quadratic buffer would (bound: 24x).
    small, large = _feed_time(5_000, chunk), _feed_time(40_000, chunk)
    assert large < 24 * max(small, 1e-4), (small, large)


def test_errors_and_reports_never_carry_secrets(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("sec", [[s.Headers(), *anthropic_reply("SECRET-COMPLETION-TEXT", deltas=4, stall_after=2), s.Stall()]])
    result = run(("httpx2", None), FAST, url + "/v1/messages",
                 body={"model": "m", "stream": True, "messages": [{"role": "user", "content": "SECRET-PROMPT"}]},
                 headers={"authorization": "Bearer SECRET-TOKEN"})
    assert isinstance(result.error, otel_liveness.StreamTruncated)
    text = str(result.error) + repr(result.error.args) + str(result.report) + repr(result.events)
    for secret in ("SECRET-PROMPT", "SECRET-TOKEN", "sk-ant-SECRET-KEY", "SECRET-COMPLETION"):
        assert secret not in text
