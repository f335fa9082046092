"""One configuration story: code that builds a transport reads ``OTEL_LIVENESS_*`` as its defaults
(an explicit policy wins, as OpenTelemetry's components read ``OTEL_*``), and a bad variable is a
warning naming it and what is used instead -- never an exception that stops an application."""

from __future__ import annotations

import warnings

import httpx
import httpx2
import pytest

import otel_liveness
from otel_liveness import InvalidPolicy, Policy
from otel_liveness.telemetry import instrument, uninstrument
from otel_liveness.transport import _base, liveness_in


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base, "_WARNED", set())
    for name in [n for n in __import__("os").environ if n.startswith("OTEL_LIVENESS_")]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize("build", [
    lambda: otel_liveness.wrap(httpx2.HTTPTransport(), telemetry=False),
    lambda: otel_liveness.wrap(httpx.AsyncHTTPTransport(), telemetry=False),
    lambda: __import__("otel_liveness.httpx2", fromlist=["x"]).LivenessTransport(telemetry=False),
], ids=["wrap-httpx2", "wrap-httpx-async", "class"])
def test_a_transport_without_a_policy_takes_the_environments(monkeypatch: pytest.MonkeyPatch, build) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OTEL_LIVENESS_RAW_IDLE_TIMEOUT", "0.2")
    monkeypatch.setenv("OTEL_LIVENESS_RETRY_BUDGET", "off")
    policy = build().policy
    assert policy.raw_idle_timeout == 0.2 and policy.retry_budget is None
    assert policy.max_attempts == Policy().max_attempts  # the rest: the defaults


def test_an_explicit_policy_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LIVENESS_RAW_IDLE_TIMEOUT", "0.2")
    chosen = Policy(raw_idle_timeout=45.0)
    assert otel_liveness.wrap(httpx2.HTTPTransport(), chosen, telemetry=False).policy is chosen
    # To take the environment and change one field: from_env, then replace.
    assert Policy.from_env().replace(max_attempts=2).raw_idle_timeout == 0.2


def test_from_env_reads_the_process_environment_and_raises_on_a_bad_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LIVENESS_WALL_TIMEOUT", "120")
    assert Policy.from_env().wall_timeout == 120.0
    monkeypatch.setenv("OTEL_LIVENESS_RAW_IDLE_TIMOUT", "5")
    with pytest.raises(InvalidPolicy, match="did you mean OTEL_LIVENESS_RAW_IDLE_TIMEOUT"):
        Policy.from_env()  # an explicit call: the caller asked, the caller is told


def test_a_bad_variable_is_one_warning_naming_it_and_what_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LIVENESS_RAW_IDLE_TIMOUT", "5")  # a typo
    monkeypatch.setenv("OTEL_LIVENESS_MAX_ATTEMPTS", "banana")  # not a number
    monkeypatch.setenv("OTEL_LIVENESS_SEMANTIC_TIMEOUT", "1")  # valid alone, below the notice interval: not together
    monkeypatch.setenv("OTEL_LIVENESS_WALL_TIMEOUT", "60")  # good: kept
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = otel_liveness.wrap(httpx2.HTTPTransport(), telemetry=False).policy
        second = otel_liveness.wrap(httpx2.HTTPTransport(), telemetry=False).policy
    assert first == second and first.wall_timeout == 60.0
    assert first.max_attempts == 3 and first.semantic_timeout is None
    assert all(w.category is otel_liveness.ConfigurationWarning for w in caught)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3, messages  # one each, not one per transport
    typo = next(m for m in messages if "RAW_IDLE_TIMOUT" in m)
    assert "'5' is ignored" in typo and "did you mean OTEL_LIVENESS_RAW_IDLE_TIMEOUT?" in typo
    banana = next(m for m in messages if "MAX_ATTEMPTS" in m)
    assert "'banana' is ignored" in banana and "the value set in code, else the default (3), is used" in banana
    assert any("SEMANTIC_TIMEOUT" in m and "shorter than semantic_notice_interval" in m for m in messages)


def test_the_instrumentor_never_raises_on_a_bad_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LIVENESS_MODE", "enforcing")
    monkeypatch.setenv("OTEL_LIVENESS_MAX_ATTEMPTS", "banana")
    with pytest.warns(otel_liveness.ConfigurationWarning) as caught:
        instrument(hosts=["*"])
    try:
        seated = liveness_in(httpx2.Client()._transport)
        assert seated is not None and seated.policy.shadow is True and seated.policy.max_attempts == 3
    finally:
        uninstrument()
    assert {"OTEL_LIVENESS_MODE", "OTEL_LIVENESS_MAX_ATTEMPTS"} <= {str(w.message).split("=")[0].split()[-1]
                                                                      for w in caught}


def test_a_raw_bound_that_misses_a_wire_silent_provider_says_which_knob_applies(provider) -> None:  # type: ignore[no-untyped-def]
    # A user bounds raw silence for an OpenAI stream with raw_idle_timeout: that wire is silent while
    # a model reasons, so the no-keep-alive bound applies -- said once, naming the knob that does.
    import openai

    from otel_liveness.testing import openai_chat_reply
    from otel_liveness.testing import steps as s

    url = provider.add("openai-bound", [[s.Headers(), *openai_chat_reply("hi")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), Policy(raw_idle_timeout=0.1), telemetry=False)
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=transport))
    with pytest.warns(otel_liveness.ConfigurationWarning, match="raw_idle_timeout_no_keepalive") as caught:
        for _ in range(2):
            list(client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert len([w for w in caught if "does not bound openai-chat" in str(w.message)]) == 1  # once per transport
    # Both bounds set, or an Anthropic stream: nothing to say.
    both = otel_liveness.wrap(httpx2.HTTPTransport(), Policy(raw_idle_timeout=0.1, raw_idle_timeout_no_keepalive=5.0),
                              telemetry=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", otel_liveness.ConfigurationWarning)
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=both))
        list(client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "hi"}], stream=True))
