"""Background responses resumed after content (core/wire/resume.py): a stream of an OpenAI Responses
background response that dies after content is continued with ``GET .../responses/{id}?stream=true
&starting_after=N`` -- the caller reads every event once, in order, as the provider kept them --
bounded by ``max_attempts`` and the wall budget; nothing else is resumed."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import anyio
import httpx2
import openai
import pytest

import otel_liveness
from otel_liveness import Policy, StreamTruncated
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.core.wire.resume import FrameAligner, ResumeState, resumable, resume_target
from otel_liveness.testing import steps as s
from otel_liveness.testing.scenario import BackgroundScenario
from otel_liveness.testing.scripts import background_response, openai_responses_reply

from .conftest import FAST

# The Responses wire shows no keep-alive here: its wire-silent bound short, so a stall is found in test time.
POLICY = FAST.replace(raw_idle_timeout_no_keepalive=0.3)
BODY = {"model": "gpt-sim-1", "input": "hi", "stream": True, "background": True}


def frame(seq: int, text: str = "x") -> bytes:
    return f'event: response.output_text.delta\ndata: {{"type":"response.output_text.delta","delta":"{text}",' \
           f'"sequence_number":{seq}}}\n\n'.encode()


def sequences(body: bytes) -> list[int]:
    return [int(n) for n in re.findall(rb'"sequence_number":(\d+)', body)]


# -- the pure part ---------------------------------------------------------------------------------


def test_the_aligner_releases_whole_events_and_learns_the_last_sequence_number() -> None:
    created = b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_abc"},' \
              b'"sequence_number":0}\n\n'
    aligner = FrameAligner()
    body = created + frame(1) + frame(2)
    out = aligner.feed(body[:10]) + aligner.feed(body[10 : len(created) + 5])
    assert out == created and aligner.response_id == "resp_abc" and aligner.last_sequence == 0
    assert aligner.feed(body[len(created) + 5 :]) == frame(1) + frame(2) and aligner.last_sequence == 2
    crlf = frame(3).replace(b"\n", b"\r\n")
    assert aligner.feed(crlf[:-1]) == b"" and aligner.feed(crlf[-1:]) == crlf and aligner.last_sequence == 3
    assert aligner.feed(b"data: [DONE]") == b"" and aligner.flush() == b"data: [DONE]"


def test_after_a_resume_a_partial_event_is_dropped_and_a_duplicate_skipped() -> None:
    aligner = FrameAligner("resp_x")
    assert aligner.feed(frame(4) + frame(5)[:9]) == frame(4)
    aligner.resumed()
    # A provider that re-sent the last event would duplicate it: skipped; from the next on, all pass.
    assert aligner.feed(frame(4) + b": keep\n\n" + frame(5) + frame(6)) == b": keep\n\n" + frame(5) + frame(6)
    assert aligner.feed(frame(2)) == frame(2)  # (after the first new event nothing is filtered)


def test_the_resume_target_continues_after_the_last_event_released_within_the_bounds() -> None:
    aligner = FrameAligner()
    state = ResumeState(started=0.0)
    url = "https://api.openai.com/v1/responses"
    assert resume_target(url, aligner, state, max_attempts=3, wall_timeout=None, now=1.0) is None  # no id, no event
    aligner.response_id, aligner.last_sequence = "resp_1", 7
    assert resume_target(url, aligner, state, max_attempts=3, wall_timeout=None, now=1.0) == (
        "https://api.openai.com/v1/responses/resp_1?stream=true&starting_after=7", None)
    again = "https://api.openai.com/v1/responses/resp_1?stream=true&starting_after=2"
    assert resume_target(again, aligner, state, max_attempts=3, wall_timeout=10.0, now=4.0) == (
        "https://api.openai.com/v1/responses/resp_1?stream=true&starting_after=7", 6.0)
    assert resume_target(url, aligner, state, max_attempts=3, wall_timeout=10.0, now=10.5) is None  # wall spent
    state.resumes = 2
    assert resume_target(url, aligner, state, max_attempts=3, wall_timeout=None, now=1.0) is None  # attempts spent


@pytest.mark.parametrize(("method", "url", "body", "expected"), [
    ("POST", "https://api.openai.com/v1/responses", BODY, True),
    ("POST", "https://api.openai.com/v1/responses", {**BODY, "background": False}, False),
    ("POST", "https://api.openai.com/v1/responses", {**BODY, "stream": False}, False),
    ("POST", "https://api.openai.com/v1/chat/completions", BODY, False),
    ("GET", "https://api.openai.com/v1/responses/resp_1?stream=true&starting_after=3", None, True),
    ("GET", "https://api.openai.com/v1/responses/resp_1", None, False),  # a retrieve: JSON, not a stream
    ("GET", "https://api.openai.com/v1/responses/resp_1/input_items?stream=true", None, False),
])
def test_which_requests_are_resumable(method: str, url: str, body: Any, expected: bool) -> None:
    data = json.dumps(body).encode() if body is not None else None
    path, _, query = url.split("openai.com", 1)[1].partition("?")
    facts = RequestFacts.read(method=method, url=url, host="api.openai.com", port=None, path=path, headers={},
                              body=data, read_timeout=None, stream_path="stream=true" in query)
    assert facts.resumable is expected
    assert resumable(method, path, query, background=bool(body and body.get("background")),
                     streaming=facts.streaming) is expected


# -- through the transport, on loopback -------------------------------------------------------------


def whole(scenario: BackgroundScenario) -> bytes:
    return b"".join(step.data for step in scenario.events)


def read(url: str, policy: Policy = POLICY, *, method: str = "POST") -> tuple[bytes, dict[str, Any]]:
    with httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport(), policy, telemetry=False)) as client:
        with client.stream(method, url, json=BODY if method == "POST" else None) as response:
            body = b"".join(response.iter_bytes())
            return body, response.extensions["liveness"]


@pytest.mark.parametrize("dead", [s.Stall(), s.Reset()], ids=["stall", "reset"])
@pytest.mark.parametrize("partial", [True, False], ids=["mid-event", "at-an-event"])
def test_a_background_stream_that_dies_after_content_is_resumed_exactly(provider: Any, dead: Any,
                                                                         partial: bool) -> None:
    scenario = background_response(deltas=6, die_after=5, partial=partial, dead=dead)
    url = provider.add("bg", scenario)
    body, report = read(url + "/v1/responses")
    assert body == whole(scenario)  # every event once, in order: no duplicate, no gap, nothing invented
    assert sequences(body) == list(range(len(scenario.events)))
    post, get = provider.requests("bg")
    assert (post.method, get.method, get.path) == ("POST", "GET", "/s/bg/v1/responses/resp_sim_0001")
    assert get.query == "stream=true&starting_after=4"  # the last whole event the caller received
    assert (report["stop_reason"], report["resumes"]) == ("completed", 1)
    assert [a["outcome"] for a in report["attempts"]] == ["truncated", "completed"]


def test_the_openai_sdk_reads_one_stream_of_events_across_a_resume(provider: Any) -> None:
    scenario = background_response("Resumed, not retried.", deltas=5, die_after=6)
    url = provider.add("bg-sdk", scenario)
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), POLICY, telemetry=False)
    client = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0,
                           http_client=httpx2.Client(transport=transport))
    events = list(client.responses.create(model="gpt-sim-1", input="hi", stream=True, background=True))
    assert [e.sequence_number for e in events] == list(range(len(scenario.events)))
    assert events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Resumed, not retried."
    assert provider.requests("bg-sdk")[1].headers.get("authorization") == "<redacted>"  # the caller's credentials


def test_async_resume(provider: Any) -> None:
    scenario = background_response(deltas=4, die_after=5)
    url = provider.add("bg-async", scenario)

    async def main() -> tuple[bytes, dict[str, Any]]:
        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), POLICY, telemetry=False)
        async with httpx2.AsyncClient(transport=transport) as client:
            async with client.stream("POST", url + "/v1/responses", json=BODY) as response:
                return b"".join([c async for c in response.aiter_bytes()]), response.extensions["liveness"]

    body, report = anyio.run(main)
    assert body == whole(scenario) and report["resumes"] == 1


def test_resumes_are_bounded_by_max_attempts_then_the_truncation_is_raised(provider: Any) -> None:
    events = background_response(deltas=8).events
    # every stream -- the POST's and each resume's -- dies after two more events
    scenario = BackgroundScenario([[s.Headers(), *events[:4], s.Stall()]], events=events)
    scenario_steps = scenario.script_for

    def dying(n: int, method: str, target: str) -> Any:
        script = list(scenario_steps(n, method, target))
        return [*script[:3], s.Stall()] if method == "GET" else script

    scenario.script_for = dying  # type: ignore[method-assign]
    url = provider.add("bg-bounded", scenario)
    with pytest.raises(httpx2.ReadTimeout) as info:
        read(url + "/v1/responses", POLICY.replace(max_attempts=3))
    error = otel_liveness.liveness_error(info.value)
    assert isinstance(error, StreamTruncated)
    methods = [r.method for r in provider.requests("bg-bounded")]
    assert methods == ["POST", "GET", "GET"]  # max_attempts bounds the streams together


def test_a_resume_gets_what_is_left_of_the_wall_budget(provider: Any) -> None:
    """The POST's stream dies at the raw bound (0.3 s); its resume hangs before any event and is
    ended by the 0.2 s left of a 0.5 s wall budget: the caller gets the truncation, on time."""
    events = background_response(deltas=6).events
    scenario = BackgroundScenario([[s.Headers(), *events[:5], s.Stall()]], events=events)
    scenario.script_for = lambda n, method, target: (  # type: ignore[method-assign]
        [s.Headers(), s.Stall()] if method == "GET" else scenario.script(n))
    url = provider.add("bg-wall", scenario)
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout) as info:
        read(url + "/v1/responses", POLICY.replace(wall_timeout=0.5, max_attempts=5))
    assert time.monotonic() - started < 2.0
    assert isinstance(otel_liveness.liveness_error(info.value), StreamTruncated)
    assert isinstance(otel_liveness.liveness_error(info.value.__cause__), otel_liveness.WallTimeout)
    assert [r.method for r in provider.requests("bg-wall")] == ["POST", "GET"]


def test_a_stream_that_is_not_a_background_response_is_never_resumed(provider: Any) -> None:
    steps = openai_responses_reply(deltas=6, stall_after=3)
    url = provider.add("fg", [[s.Headers(), *steps, s.Stall()]])
    with httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport(), POLICY, telemetry=False)) as client:
        with pytest.raises(httpx2.ReadTimeout):
            with client.stream("POST", url + "/v1/responses", json={**BODY, "background": False}) as response:
                b"".join(response.iter_bytes())
    assert [r.method for r in provider.requests("fg")] == ["POST"]


def test_a_background_stream_read_by_the_caller_is_judged_and_resumed(provider: Any) -> None:
    events = background_response(deltas=6).events
    scenario = BackgroundScenario([[]], events=events)
    first = scenario.script_for

    def dies_once(n: int, method: str, target: str) -> Any:
        script = list(first(n, method, target))
        return [*script[:4], s.Stall()] if n == 0 else script

    scenario.script_for = dies_once  # type: ignore[method-assign]
    url = provider.add("bg-get", scenario)
    body, report = read(url + "/v1/responses/resp_sim_0001?stream=true&starting_after=2", method="GET")
    assert sequences(body) == list(range(3, len(events)))
    assert [r.query for r in provider.requests("bg-get")] == ["stream=true&starting_after=2",
                                                              "stream=true&starting_after=5"]
    assert report["provider"] == "openai-responses" and report["resumes"] == 1
