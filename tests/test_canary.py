"""The policy canary: candidate policies judged live on every attempt, counted as whatif counts
them over the same attempts' recordings; never felt by the enforced policy."""

from __future__ import annotations

import pathlib
import random
from collections import Counter
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import otel_liveness
from otel_liveness import Policy
from otel_liveness.cli import main
from otel_liveness.core.errors import InvalidPolicy
from otel_liveness.core.events import AttemptEnded, CandidateVerdict, Event
from otel_liveness.core.policy import MAX_CANDIDATES, parse_candidate
from otel_liveness.core.tuning import canary as canary_module
from otel_liveness.core.tuning.canary import judge_candidates
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.tools.whatif import load, whatif

CANDIDATES = "tight=raw=0.15,first_byte=off,notice=off;loose=raw=1.2,first_byte=off,notice=off"
ENFORCED = Policy(raw_idle_timeout=0.5, first_byte_timeout=None, semantic_notice_interval=None, max_attempts=1,
                  backoff_initial=0.01, backoff_max=0.05)


def workload(provider: Any) -> list[str]:
    """(Provider seconds: the simulated provider runs at TIME_SCALE, 0.01.) Healthy long thinks
    (pings 0.25 s apart: a 0.15 s bound kills them falsely), dead streams
    (silent after the preamble: the enforced 0.5 s bound cuts them), stalls after text, a reset."""
    urls = []
    for i in range(3):
        urls.append(provider.add(f"think-{i}", [[s.Headers(), *anthropic_reply("fine", think_pings=3, ping_every=25)]]))
    for i in range(2):
        preamble = anthropic_reply("x")[0]  # message_start, then nothing: dead before content
        urls.append(provider.add(f"dead-{i}", [[s.Headers(), preamble, s.Stall()]]))
    for i in range(2):
        urls.append(provider.add(f"stall-{i}", [[s.Headers(), *anthropic_reply("abcdef", deltas=3, stall_after=2),
                                                 s.Stall()]]))
    urls.append(provider.add("reset", [[s.Headers(), *anthropic_reply("abcdef", deltas=3, stall_after=1), s.Reset()]]))
    urls.append(provider.add("quick", [[s.Headers(), *anthropic_reply("hello")]]))
    return urls


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [p for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics
            if m.name == name for p in m.data.data_points]


def live_counts(reader: InMemoryMetricReader) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for p in points(reader, "liveness.candidate.verdicts"):
        out[(p.attributes["liveness.candidate.name"], p.attributes["liveness.candidate.verdict"])] += p.value
    return out


def test_live_counts_equal_whatif_over_the_written_recordings(provider: Any, tmp_path: pathlib.Path) -> None:
    reader = InMemoryMetricReader()
    policy = ENFORCED.replace(capture_dir=str(tmp_path), capture_mode="timing", capture_sample=1.0,
                              candidates=CANDIDATES)
    ended: list[AttemptEnded] = []
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, meter_provider=MeterProvider(metric_readers=[reader]),
                                   hooks=[lambda e: ended.append(e) if isinstance(e, AttemptEnded) else None])
    outcomes: Counter[str] = Counter()
    with httpx2.Client(transport=transport) as client:
        for url in workload(provider):
            try:
                with client.stream("POST", url + "/v1/messages", json={"model": "m", "stream": True}) as response:
                    response.read()
                outcomes["ok"] += 1
            except Exception as exc:  # the enforced policy's typed endings
                outcomes[type(exc).__name__] += 1
    # The canary changed nothing the enforced policy did: 4 completed, 2 dead, 2 truncated, 1 reset.
    assert outcomes["ok"] == 4 and sum(outcomes.values()) == 9, outcomes
    assert len(ended) == 9 and all(len(e.candidates) == 2 for e in ended)

    recordings, errors = load([str(tmp_path)])
    assert errors == [] and len(recordings) == 9
    _, tight = parse_candidate(CANDIDATES.split(";")[0])
    _, loose = parse_candidate(CANDIDATES.split(";")[1])
    offline = whatif(recordings, {"tight": tight, "loose": loose})["policies"]
    live = live_counts(reader)
    for name in ("tight", "loose"):
        row = offline[name]
        assert live[(name, "judged")] == 9
        assert live[(name, "kill")] == row["kills"], (name, live, row)
        assert live[(name, "false_kill")] == row["false_kills"], (name, live, row)
        assert live[(name, "missed")] == row["missed"], (name, live, row)
        assert live[(name, "caught")] == row["caught"], (name, live, row)
        assert live[(name, "upload")] == row["uploads"], (name, live, row)
        assert live[(name, "fault")] == 0
    # What the workload makes of them (so that the equality above is not 0 == 0): the tight bound
    # kills every think falsely and the dead ones, the loose one kills nothing the attempts lived to see.
    assert live[("tight", "false_kill")] >= 3 and live[("tight", "kill")] >= 5
    assert live[("loose", "kill")] == 0 and live[("loose", "false_kill")] == 0
    # The detection shift: tight ends the dead attempts sooner than the enforced bound did, loose later.
    shifts = {(p.attributes["liveness.candidate.name"], p.attributes["liveness.candidate.shift"]): p
              for p in points(reader, "liveness.candidate.detection_shift")}
    assert shifts[("tight", "sooner")].count >= 2 and shifts[("loose", "later")].count >= 2
    assert ("tight", "later") not in shifts and ("loose", "sooner") not in shifts
    assert 0.25 <= shifts[("tight", "sooner")].min <= 0.4  # 0.5 s (the enforced cut) - 0.15 s
    assert 0.6 <= shifts[("loose", "later")].min <= 0.8  # 1.2 s - 0.5 s


def test_the_candidates_never_change_the_enforced_policy_and_a_fault_is_counted(
        provider: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a candidate's judgment failed")

    monkeypatch.setattr(canary_module, "judge", broken)
    monkeypatch.setattr(canary_module, "cannot_kill", lambda *args: False)  # (no replay spared: the fault falls)
    reader = InMemoryMetricReader()
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), ENFORCED.replace(candidates=CANDIDATES),
                                   meter_provider=MeterProvider(metric_readers=[reader]))
    url = provider.add("canary-fault", [[s.Headers(), *anthropic_reply("still here")]])
    with httpx2.Client(transport=transport) as client:
        with client.stream("POST", url + "/v1/messages", json={"model": "m", "stream": True}) as response:
            assert response.status_code == 200 and b"message_stop" in response.read()
    live = live_counts(reader)
    assert live == {("tight", "fault"): 1, ("loose", "fault"): 1}


def test_off_unless_configured(provider: Any) -> None:
    ended: list[Event] = []
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), ENFORCED, hooks=[ended.append], telemetry=False)
    url = provider.add("canary-off", [[s.Headers(), *anthropic_reply("hi")]])
    with httpx2.Client(transport=transport) as client:
        client.post(url + "/v1/messages", json={"model": "m", "stream": True}).read()
    (end,) = [e for e in ended if isinstance(e, AttemptEnded)]
    assert end.candidates == () and end.capture is None  # nothing kept, nothing judged


def test_candidate_specs() -> None:
    policy = Policy(candidates="tight=raw=45,first_byte=auto; loose=raw=180")
    assert [name for name, _ in policy.candidate_policies] == ["tight", "loose"]
    assert policy.candidate_policies[0][1].raw_idle_timeout == 45.0
    assert Policy(candidates={"a": "raw=30", "b": Policy(raw_idle_timeout=60)}).candidate_policies[1][1].raw_idle_timeout == 60
    env = Policy.from_env({"OTEL_LIVENESS_CANDIDATES": "x=raw=20"})
    assert env.candidate_policies[0][1].raw_idle_timeout == 20.0
    assert Policy.from_env({"OTEL_LIVENESS_CANDIDATES": "off"}).candidates is None
    too_many = ";".join(f"c{i}=raw={10 + i}" for i in range(MAX_CANDIDATES + 1))
    for bad, words in ((too_many, "at most"), ("a=raw=1;a=raw=2", "twice"), ("bad name!=raw=1", "name"),
                       ("a=raw=oops", "expected a number"), ("a=nope=1", "unknown field"), ("justaname", "NAME=SPEC"),
                       ("a=candidates=b=raw=1", "unknown field")):
        with pytest.raises(InvalidPolicy, match=words):
            Policy(candidates=bad)


def test_a_capture_the_canary_cannot_read_is_a_fault_not_an_error() -> None:
    out = judge_candidates(Policy(candidates="a=raw=1").candidate_policies, [(0.0, {"status": "x"})],
                           {"format": "full", "provider": "anthropic"}, 1 << 20)
    assert out == (CandidateVerdict("a", ("fault",), None),)


def test_tune_prints_its_recommendation_as_a_candidates_line(tmp_path: pathlib.Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from .test_whatif import known_truth

    known_truth(tmp_path)
    assert main(["tune", str(tmp_path), "--min-attempts", "1"]) == 0  # (five recordings: below the minimum)
    out = capsys.readouterr().out
    env = [line for line in out.splitlines() if not line.startswith("#")]
    (line,) = [line for line in out.splitlines() if line.startswith("# OTEL_LIVENESS_CANDIDATES=")]
    # A comment: ``tune DIR | grep -v '^#' > liveness.env`` stays the policy to enforce.
    assert not any("CANDIDATES" in e for e in env)
    (name, tuned), = Policy.from_env({"OTEL_LIVENESS_CANDIDATES": line.split("=", 1)[1]}).candidate_policies
    enforced = Policy.from_env(dict(e.split("=", 1) for e in env))
    assert name == "tuned" and tuned == enforced.replace(candidates=None) and tuned != Policy()


def drawn_attempt(rng: random.Random, provider: str) -> list[tuple[float, Any]]:
    """A completed attempt's timing capture: headers, a prefill, frames with gaps from a few ms to
    a few minutes (heartbeats, comments, content), the end frame, the body's end."""
    t = rng.uniform(0.01, 2.0)
    capture: list[tuple[float, Any]] = [(t, {"status": 200, "content-type": "text/event-stream"})]
    t += rng.choice([0.0, rng.uniform(0, 5), rng.uniform(0, 300)])
    capture.append((t, (("preamble", 120),)))
    for _ in range(rng.randint(0, 12)):
        t += rng.choice([rng.uniform(0, 0.5), rng.uniform(0, 40), rng.uniform(0, 200)])
        kind = rng.choice(["heartbeat", "comment", "content", "content", "other"])
        capture.append((t, ((kind, 60),)))
    t += rng.uniform(0, 3)
    capture.append((t, (("content", 60), ("stop", 30))))
    capture.append((t + rng.uniform(0, 0.01), None))
    return capture


def drawn_policy(rng: random.Random) -> Policy:
    first_byte: Any = rng.choice([None, "auto", rng.uniform(1, 300)])
    return Policy(raw_idle_timeout=rng.uniform(0.5, 120), raw_idle_timeout_no_keepalive=rng.uniform(0.5, 700),
                  first_byte_timeout=first_byte, first_byte_base=rng.uniform(1, 60), raw_idle_adaptive=rng.random() < 0.3,
                  raw_idle_floor=rng.uniform(0.5, 30), semantic_notice_interval=None,
                  semantic_timeout=rng.choice([None, rng.uniform(1, 600)]))


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses", "gemini", "sse"])
def test_a_spared_replay_is_one_that_could_not_have_killed(provider: str) -> None:
    """The canary skips the replay of a completed attempt no clock of a candidate could reach
    (``cannot_kill``): on thousands of drawn attempts and policies, every attempt it would spare
    is one the replay does not kill -- and the replay does kill some of those it does not spare."""
    from otel_liveness.core.capture.recording import recording_of
    from otel_liveness.core.tuning.canary import KILLS, _spared, cannot_kill
    from otel_liveness.core.tuning.replay import judge

    rng = random.Random(f"canary-{provider}")
    spared = killed = 0
    for _ in range(600):
        capture = drawn_attempt(rng, provider)
        policy = drawn_policy(rng)
        rec = recording_of(capture, {"format": "timing", "provider": provider, "outcome": "completed",
                                     "body_bytes": rng.choice([None, 1000, 3_000_000])})
        judged = judge(rec.chunks, rec.provider, policy, rec.body_bytes)
        kill = judged.verdict in KILLS and judged.at is not None and judged.at < rec.end - 1e-6
        times, first_read = _spared(capture, "completed") or ([], 0)
        if cannot_kill(times, first_read, policy):
            spared += 1
            assert not kill, (capture, policy, judged)
        killed += kill
    assert spared >= 60 and killed >= 60, (spared, killed)  # both sides drawn often
