"""One configuration story (docs/configuration.md, "Where a setting comes from"): a value set in
code wins, the environment supplies every field the code left unset -- operational settings
included -- and nothing present in the environment is dropped without a word. Table-driven over
every field and every spelling the docstring promises; each case fails when its line of the
parser is broken."""

from __future__ import annotations

import dataclasses
import pathlib
import typing
import warnings
from typing import Any

import anthropic
import httpx2
import pytest

import otel_liveness
from otel_liveness import ConfigurationWarning, InvalidPolicy, Policy
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_reply

FIELDS = {f.name: f for f in dataclasses.fields(Policy)}


# -- every field, every spelling -----------------------------------------------------------------

def _sample(name: str) -> tuple[str, Any]:
    """A value of ``name``'s type other than its default, as a variable spells it and as parsed."""
    default = getattr(Policy(), name)
    special = {"provider": ("openai-chat", "openai-chat"), "capture_mode": ("TIMING", "timing"),
               "capture_dir": ("/tmp/captures", "/tmp/captures"), "candidates": ("t=raw=45", None),
               "first_byte_timeout": ("45", 45.0), "capture_sample": ("0.5", 0.5),
               "retry_budget_ratio": ("0.2", 0.2), "first_byte_max": ("900", 900.0),
               "backoff_max": ("9", 9.0), "semantic_timeout": ("3600", 3600.0)}
    if name in special:
        return special[name]
    if isinstance(default, bool):
        return ("yes", True) if not default else ("no", False)
    if isinstance(default, int):
        return str(default + 2), default + 2
    if isinstance(default, float) or default is None:
        return "7", 7.0
    raise AssertionError(f"no sample for {name}")


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_every_field_is_read_from_its_variable_as_its_type(name: str) -> None:
    raw, expected = _sample(name)
    policy = Policy.from_env({f"OTEL_LIVENESS_{name.upper()}": f"  {raw}  "})  # (surrounding whitespace)
    value = getattr(policy, name)
    if name == "candidates":
        assert [n for n, _ in policy.candidate_policies] == ["t"]
        return
    assert value == expected and type(value) is type(expected), (name, value)
    assert name not in policy.given  # what the environment set is not the code's


@pytest.mark.parametrize(("raw", "expected"), [
    ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("on", True),
    ("0", False), ("false", False), ("no", False), ("Off", False),
])
def test_flag_spellings(raw: str, expected: bool) -> None:
    assert Policy.from_env({"OTEL_LIVENESS_RAW_IDLE_ADAPTIVE": raw}).raw_idle_adaptive is expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("none", None), ("off", None), ("", None), ("  OFF ", None), ("auto", "auto"), ("AUTO", "auto"), (" Auto ", "auto"),
    ("12.5", 12.5),
])
def test_optional_and_auto_spellings(raw: str, expected: Any) -> None:
    assert Policy.from_env({"OTEL_LIVENESS_FIRST_BYTE_TIMEOUT": raw}).first_byte_timeout == expected


def test_an_integer_field_stays_an_integer_and_rejects_a_fraction() -> None:
    assert type(Policy.from_env({"OTEL_LIVENESS_MAX_ATTEMPTS": "3"}).max_attempts) is int
    with pytest.raises(InvalidPolicy, match="expected an integer"):
        Policy.from_env({"OTEL_LIVENESS_MAX_ATTEMPTS": "3.5"})


@pytest.mark.parametrize(("key", "raw", "message"), [
    ("OTEL_LIVENESS_MAX_ATTEMPTS", "three", "expected an integer"),
    ("OTEL_LIVENESS_WALL_TIMEOUT", "soon", "expected a number"),
    ("OTEL_LIVENESS_RAW_IDLE_ADAPTIVE", "maybe", "expected true/false"),
    ("OTEL_LIVENESS_MAX_ATTEMPTS", "off", "cannot be switched off"),
    ("OTEL_LIVENESS_CAPTURE_MODE", "partial", "expected one of full, timing"),
    ("OTEL_LIVENESS_MODE", "enforcing", "expected shadow or enforce"),
    ("OTEL_LIVENESS_HOST", "x", "did you mean OTEL_LIVENESS_HOSTS?"),
    ("OTEL_LIVENESS_RAW_IDLE_TIMOUT", "5", "did you mean OTEL_LIVENESS_RAW_IDLE_TIMEOUT?"),
])
def test_a_bad_variable_names_itself_and_why(key: str, raw: str, message: str) -> None:
    with pytest.raises(InvalidPolicy, match=message):
        Policy.from_env({key: raw})
    reported: list[tuple[str, str]] = []
    assert Policy.from_env({key: raw}, on_invalid=lambda k, v, exc: reported.append((k, v))) == Policy()
    assert reported == [(key, raw)]


def test_values_valid_alone_and_not_together_fall_back_to_the_base_as_one_report() -> None:
    reported: list[str] = []
    base = Policy(wall_timeout=60)
    # 40 s is valid beside the default notices (30 s), 60 s notices beside no timeout; not together.
    env = {"OTEL_LIVENESS_SEMANTIC_TIMEOUT": "40", "OTEL_LIVENESS_SEMANTIC_NOTICE_INTERVAL": "60"}
    merged = Policy.from_env(env, base, on_invalid=lambda k, v, exc: reported.append(k))
    assert merged == base and merged.given == {"wall_timeout"}
    assert reported == ["OTEL_LIVENESS_SEMANTIC_TIMEOUT, OTEL_LIVENESS_SEMANTIC_NOTICE_INTERVAL"]


def test_mode_is_the_shadow_field_and_a_contradiction_is_named() -> None:
    assert Policy.from_env({"OTEL_LIVENESS_MODE": "Shadow"}).shadow is True
    assert Policy.from_env({"OTEL_LIVENESS_MODE": "enforce"}, Policy()).shadow is False
    with pytest.raises(InvalidPolicy, match="contradicts OTEL_LIVENESS_SHADOW"):
        Policy.from_env({"OTEL_LIVENESS_MODE": "enforce", "OTEL_LIVENESS_SHADOW": "true"})


# -- code wins, the environment fills the rest ---------------------------------------------------

def test_a_field_set_in_code_wins_and_the_environment_fills_the_others() -> None:
    code = Policy(wall_timeout=600, max_attempts=3)  # 3 is the default: set in code all the same
    env = {"OTEL_LIVENESS_WALL_TIMEOUT": "5", "OTEL_LIVENESS_MAX_ATTEMPTS": "5", "OTEL_LIVENESS_SEMANTIC_TIMEOUT": "3600"}
    merged = Policy.from_env(env, code)
    assert (merged.wall_timeout, merged.max_attempts, merged.semantic_timeout) == (600.0, 3, 3600.0)
    assert code.given == {"wall_timeout", "max_attempts"} and merged.given == code.given
    assert code.replace(shadow=True).given == {"wall_timeout", "max_attempts", "shadow"}
    assert Policy(600.0).given == {"raw_idle_timeout"}  # (positional, too)


def test_readme_example_one_with_the_tuning_recipes_variables_records(provider: Any, tmp_path: pathlib.Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's first example, ``wrap(..., Policy(wall_timeout=600))``, run under the recording
    step of docs/tuning.md: the flight recorder writes its timing recording."""
    monkeypatch.setenv("OTEL_LIVENESS_CAPTURE_DIR", str(tmp_path))
    monkeypatch.setenv("OTEL_LIVENESS_CAPTURE_MODE", "timing")
    monkeypatch.setenv("OTEL_LIVENESS_CAPTURE_SAMPLE", "1")
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), otel_liveness.Policy(wall_timeout=600), telemetry=False)
    assert transport.policy.wall_timeout == 600 and transport.policy.capture_dir == str(tmp_path)
    url = provider.add("readme", [[s.Headers(), *anthropic_reply("Recorded.")]])
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, http_client=httpx2.Client(transport=transport))
    with client.messages.stream(model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}]) as stream:
        assert stream.get_final_text() == "Recorded."
    client.close()
    written = list(tmp_path.rglob("*.jsonl"))
    assert len(written) == 1 and '"format": "timing"' in written[0].read_text().replace('":"', '": "')


def test_the_mode_applies_under_wrap_unless_the_code_chose_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LIVENESS_MODE", "shadow")
    assert otel_liveness.wrap(httpx2.HTTPTransport(), telemetry=False).policy.shadow is True
    assert otel_liveness.wrap(httpx2.HTTPTransport(), Policy(wall_timeout=1), telemetry=False).policy.shadow is True
    assert otel_liveness.wrap(httpx2.HTTPTransport(), Policy(shadow=False), telemetry=False).policy.shadow is False


def test_an_invalid_value_warns_that_the_value_is_wrong_not_that_it_is_no_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_liveness.transport import _base

    monkeypatch.setattr(_base, "_WARNED", set())
    monkeypatch.setenv("OTEL_LIVENESS_MAX_ATTEMPTS", "lots")
    monkeypatch.setenv("OTEL_LIVENESS_MODE", "loud")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        otel_liveness.wrap(httpx2.HTTPTransport(), telemetry=False)
    messages = [str(w.message) for w in caught if w.category is ConfigurationWarning]
    assert any("MAX_ATTEMPTS='lots'" in m and "the value set in code, else the default (3)" in m for m in messages)
    assert any("MODE='loud'" in m and "the mode set in code is used" in m for m in messages)
    assert not any("not a setting" in m for m in messages)


# -- wrap() checks its arguments -------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"policy": "not a policy"}, "policy must be an otel_liveness.Policy"),
    ({"policy": {"wall_timeout": 5}}, "policy must be an otel_liveness.Policy"),
    ({"hooks": [print, 42]}, "hooks must be callables"),
    ({"hosts": "api.anthropic.com"}, "hosts must be an iterable"),
])
def test_wrap_rejects_a_wrong_argument_with_a_type_error_naming_it(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        otel_liveness.wrap(httpx2.HTTPTransport(), **kwargs)


def test_first_byte_timeout_says_auto_is_allowed() -> None:
    with pytest.raises(InvalidPolicy, match="'auto'"):
        Policy(first_byte_timeout="autoo")  # type: ignore[arg-type]


# -- the hosts auto-instrumentation judges -----------------------------------------------------------

@pytest.mark.parametrize(("raw", "host"), [
    ("http://127.0.0.1:8765", "127.0.0.1"), ("127.0.0.1:8765", "127.0.0.1"),
    ("https://llm.internal.example/v1", "llm.internal.example"),
    ("api.anthropic.com", "api.anthropic.com"), ("bedrock-runtime.*.amazonaws.com", "bedrock-runtime.*.amazonaws.com"),
    ("http://[::1]:8080", "::1"), ("not a host", None),
])
def test_a_hosts_entry_may_be_a_url_or_host_port(raw: str, host: str | None) -> None:
    from otel_liveness.core.wire.hosts import host_of

    assert host_of(raw) == host


def test_auto_instrumentation_judges_serve_with_the_line_it_prints(provider: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_liveness.telemetry import instrument, uninstrument
    from otel_liveness.transport import liveness_in

    monkeypatch.setenv("OTEL_LIVENESS_HOSTS", provider.url)  # a URL, as pasted
    monkeypatch.setenv("OTEL_LIVENESS_MODE", "enforce")
    instrument()
    try:
        seated = liveness_in(httpx2.Client()._transport)
        assert seated is not None and "127.0.0.1" in seated._hosts and not seated.policy.shadow
    finally:
        uninstrument()


def test_the_policy_type_hints_name_every_field() -> None:
    assert set(typing.get_type_hints(Policy)) == set(FIELDS)
