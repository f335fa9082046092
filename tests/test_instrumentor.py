"""Auto-instrumentation: programmatic, and `opentelemetry-instrument` in a subprocess exporting
OTLP/HTTP to a real local receiver."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import httpx2
import pytest

from otel_liveness.telemetry import instrument, uninstrument
from otel_liveness.telemetry import semconv as S
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.transport import liveness_in

from .conftest import FAST
from .otlp_receiver import OTLPReceiver, attributes
from .test_telemetry import Telemetry

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def tel():  # type: ignore[no-untyped-def]
    telemetry = Telemetry()
    yield telemetry
    uninstrument()


def test_programmatic_instrumentation_and_uninstrument(provider, tel) -> None:  # type: ignore[no-untyped-def]
    original = httpx2.Client.__init__
    url = provider.add("auto", [[s.Headers(), *anthropic_reply()[:1], s.Stall()], [s.Headers(), *anthropic_reply()]])
    instrument(enforce=True, hosts=["127.0.0.1"], policy=FAST, tracer_provider=tel.tracer_provider,
               meter_provider=tel.meter_provider)
    instrument(enforce=True, hosts=["127.0.0.1"])  # idempotent: a second call changes nothing
    client = httpx2.Client()
    # Seated in the client's own transport, which stays what it was (class, pool).
    assert client._transport.__class__ is httpx2.HTTPTransport
    seated = liveness_in(client._transport)
    assert seated is not None and seated.policy.shadow is False and seated.inner.__class__ is httpx2.HTTPTransport
    assert seated.inner._pool is client._transport._pool
    response = client.post(url + "/v1/messages", json={"model": "m", "stream": True})
    assert response.status_code == 200 and provider.attempts("auto") == 2  # retried below the caller
    assert len(tel.attempts()) == 2
    # A host that is not a provider passes through untouched (no spans).
    before = len(tel.finished())
    client.get(f"http://localhost:{provider.port}/s/auto/v1/messages")
    assert len(tel.finished()) == before
    uninstrument()
    assert httpx2.Client.__init__ is original
    assert liveness_in(client._transport) is None and "handle_request" not in vars(client._transport)  # unseated
    assert liveness_in(httpx2.Client()._transport) is None
    client.close()


def test_default_mode_is_shadow(tel) -> None:  # type: ignore[no-untyped-def]
    instrument(tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider)
    client = httpx2.AsyncClient()
    seated = liveness_in(client._transport)
    assert seated is not None and seated.policy.shadow is True
    hosts = seated._hosts  # every provider host by default (the three named ones among them)
    assert all(h in hosts for h in ("api.anthropic.com", "api.openai.com", "openrouter.ai"))
    assert "example.com" not in hosts


@pytest.mark.parametrize(("host", "profile"), [
    ("api.anthropic.com", "anthropic"),
    ("us-east5-aiplatform.googleapis.com", "vertex"),
    ("aiplatform.googleapis.com", "vertex"),
    ("europe-west4-aiplatform.googleapis.com", "gemini"),
    ("bedrock-runtime.us-east-1.amazonaws.com", "bedrock"),
    ("bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "bedrock"),
    ("bedrock-runtime.cn-north-1.amazonaws.com.cn", "bedrock-converse"),
    ("generativelanguage.googleapis.com", "gemini"),
    ("api.openai.com", "openai-chat"),
    ("API.OpenAI.com", "openai-responses"),
    ("openrouter.ai", "openrouter"),
])
def test_default_hosts_cover_every_provider_profile(host: str, profile: str) -> None:
    from otel_liveness.core.wire.hosts import HostMatcher
    from otel_liveness.core.wire.providers import HOST_PATTERNS, PROFILES
    from otel_liveness.telemetry.instrumentor import DEFAULT_HOSTS

    assert set(HOST_PATTERNS) == set(PROFILES)  # a new profile must say where it is served from
    assert host in HostMatcher(HOST_PATTERNS[profile])
    assert host in HostMatcher(DEFAULT_HOSTS)


@pytest.mark.parametrize("host", [
    "bedrock-runtime.a.b.amazonaws.com",          # * never spans a dot
    "bedrock.us-east-1.amazonaws.com",            # the control plane, not the runtime
    "s3.us-east-1.amazonaws.com",
    "evil-aiplatform.googleapis.com.example.com",
    "api.anthropic.com.example.com",
    "example.com", "127.0.0.1", "",
])
def test_default_hosts_leave_other_hosts_alone(host: str) -> None:
    from otel_liveness.core.wire.hosts import HostMatcher
    from otel_liveness.telemetry.instrumentor import DEFAULT_HOSTS

    assert host not in HostMatcher(DEFAULT_HOSTS)


def test_hosts_from_the_environment_take_patterns(tel, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OTEL_LIVENESS_HOSTS", " llm-*.internal.example , api.anthropic.com ")
    instrument(tracer_provider=tel.tracer_provider, meter_provider=tel.meter_provider)
    hosts = liveness_in(httpx2.Client()._transport)._hosts  # type: ignore[union-attr]
    assert "llm-eu.internal.example" in hosts and "api.anthropic.com" in hosts
    assert "api.openai.com" not in hosts and "llm-eu.x.internal.example" not in hosts


def test_a_pattern_applies_the_policy_on_the_wire(provider, tel) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("pattern", [[s.Headers(), *anthropic_reply()[:1], s.Stall()], [s.Headers(), *anthropic_reply()]])
    instrument(enforce=True, hosts=["127.0.0.*"], policy=FAST, tracer_provider=tel.tracer_provider,
               meter_provider=tel.meter_provider)
    with httpx2.Client() as client:
        response = client.post(url + "/v1/messages", json={"model": "m", "stream": True})
    assert response.status_code == 200 and provider.attempts("pattern") == 2  # judged and retried: the pattern matched
    assert len(tel.attempts()) == 2


SCRIPT = textwrap.dedent(
    """
    import sys, anthropic
    client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-ant-PLANTED", max_retries=0)
    stream = client.messages.create(model="claude-sim-1", max_tokens=5, stream=True,
                                    messages=[{"role": "user", "content": "PLANTED prompt"}])
    print("".join(e.delta.text for e in stream if e.type == "content_block_delta"))
    """
)


def instrumented_agent(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    """(the opentelemetry-instrument command of this Python, the agent script written to tmp_path)."""
    script = tmp_path / "agent.py"
    script.write_text(SCRIPT)
    bindir = pathlib.Path(sys.executable).parent
    return shutil.which("opentelemetry-instrument", path=str(bindir)) or str(bindir / "opentelemetry-instrument"), script


def test_opentelemetry_instrument_exports_attempt_spans_and_metrics(provider, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("cli", [[s.Headers(), *anthropic_reply()[:1], s.Reset()],
                               [s.Headers(), *anthropic_reply("auto-instrumented", think_pings=3)]])
    command, script = instrumented_agent(tmp_path)
    with OTLPReceiver() as receiver:
        env = {
            **os.environ,
            "OTEL_SERVICE_NAME": "agent",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_METRIC_EXPORT_INTERVAL": "200",
            "OTEL_LIVENESS_HOSTS": "127.0.0.1",
            "OTEL_LIVENESS_MODE": "enforce",
            "OTEL_LIVENESS_RAW_IDLE_TIMEOUT": "0.5",
            "OTEL_LIVENESS_SEMANTIC_NOTICE_INTERVAL": "0.01",
        }
        proc = subprocess.run([command, sys.executable, str(script), url], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == "auto-instrumented"
        spans = receiver.spans()
        metric_names = receiver.metric_names()
    ours = [span for scope, span in spans if scope == S.SCOPE]
    sdk = [span for scope, span in spans if scope == "com.anthropic.sdk.python"]
    assert len(ours) == 2 and len(sdk) == 1
    assert {span.parent_span_id for span in ours} == {sdk[0].span_id}
    outcomes = sorted(attributes(span)[S.ATTEMPT_OUTCOME] for span in ours)
    assert outcomes == ["completed", "connection_error"]
    assert {"liveness.attempts", "liveness.heartbeats", "liveness.retries", "gen_ai.client.operation.duration"} <= metric_names
    assert provider.attempts("cli") == 2
    exported = "".join(str(m) for m in receiver.received["/v1/traces"] + receiver.received["/v1/metrics"])
    assert "PLANTED" not in exported


def test_a_bad_variable_under_opentelemetry_instrument_stops_nothing(provider, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A typo and an unparsable value: each one warning on stderr; the instrumentation still loads
    # (the distro's tracer provider -- the SDK's call span is exported) and the policy applies.
    url = provider.add("cli-bad-env", [[s.Headers(), *anthropic_reply()[:1], s.Reset()],
                                       [s.Headers(), *anthropic_reply("auto-instrumented")]])
    command, script = instrumented_agent(tmp_path)
    with OTLPReceiver() as receiver:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "OTEL_SERVICE_NAME": "agent", "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_LIVENESS_HOSTS": "127.0.0.1", "OTEL_LIVENESS_MODE": "enforce",
            "OTEL_LIVENESS_RAW_IDLE_TIMOUT": "0.5", "OTEL_LIVENESS_MAX_ATTEMPTS": "banana",
        }
        proc = subprocess.run([command, sys.executable, str(script), url], env=env, capture_output=True,
                              text=True, timeout=120)
        spans = receiver.spans()
    assert proc.returncode == 0 and proc.stdout.strip() == "auto-instrumented", proc.stderr[-3000:]
    assert "Failed to auto initialize" not in proc.stderr
    assert "OTEL_LIVENESS_RAW_IDLE_TIMOUT='0.5' is ignored" in proc.stderr
    assert "OTEL_LIVENESS_MAX_ATTEMPTS='banana' is ignored" in proc.stderr
    assert provider.attempts("cli-bad-env") == 2  # enforced: retried below the SDK
    assert {scope for scope, _ in spans} >= {S.SCOPE, "com.anthropic.sdk.python"}


def test_the_default_hosts_are_documented() -> None:
    from otel_liveness.telemetry.instrumentor import DEFAULT_HOSTS

    configuration = (ROOT / "docs" / "configuration.md").read_text()
    row = next(line for line in configuration.splitlines() if line.startswith("| `OTEL_LIVENESS_HOSTS`"))
    assert [host for host in DEFAULT_HOSTS if f"`{host}`" not in row] == []
