"""The transport as a production user composes it (issue #23), on loopback: request bodies that
are streams, SDK retry loops over the exhausted-request cache, tenants, 32 threads on one
transport, shadow mode over a frame past the bound, 2xx JSON error objects and a client closing
after ``message_delta`` -- through httpx and httpx2, sync, asyncio and trio, and the real
anthropic and openai SDKs where they apply (the SDKs send bytes bodies: the streamed-body tests
use the HTTP clients directly)."""

from __future__ import annotations

import importlib
import io
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import anyio
import httpx2
import openai
import pytest
from opentelemetry.trace import StatusCode

import otel_liveness
from otel_liveness import BodyNotReplayable, Policy, ProviderError, StreamTruncated
from otel_liveness.core.commands import Fail
from otel_liveness.core.memory.caches import CadenceMemory, ExhaustedCache
from otel_liveness.testing import SimulatedProvider, anthropic_reply, openai_chat_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_status, sse_event

from .clients import VARIANT_IDS, VARIANTS, run
from .conftest import FAST
from .test_composition_engine import ANTHROPIC_OVERLOADED, OPENAI_SERVER_ERROR
from .test_telemetry import Telemetry

MESSAGES = [{"role": "user", "content": "hi"}]
PARTS = [b'{"model": "claude-sim-1", "max_tokens": 64, "stream": true, ', b'"messages": [{"role": "user", ',
         b'"content": "' + b"x" * 3000 + b'"}]}']
BODY = b"".join(PARTS)
DEAD = [s.Headers(), *anthropic_reply()[:1], s.Reset()]  # message_start, then the connection breaks


def text_of(body: bytes) -> str:
    out = []
    for block in body.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: ") and b'"text_delta"' in line:
                out.append(json.loads(line[6:])["delta"]["text"])
    return "".join(out)


# -- 1: request bodies that cannot be replayed ------------------------------------------------------


def sync_bodies() -> dict[str, Any]:
    def generator() -> Iterator[bytes]:
        yield from PARTS

    return {"iterator": iter(list(PARTS)), "generator": generator(), "file": io.BytesIO(BODY)}


def async_bodies() -> dict[str, Any]:
    async def generator() -> AsyncIterator[bytes]:
        for part in PARTS:
            await anyio.sleep(0)
            yield part

    class Iterable:
        def __aiter__(self) -> AsyncIterator[bytes]:
            return generator()

    return {"async-generator": generator(), "async-iterable": Iterable()}


BODY_KINDS = [(v, k) for v in VARIANTS for k in (sync_bodies() if v[1] is None else async_bodies())]


def send(variant: tuple[str, str | None], policy: Policy, url: str, body: Any) -> tuple[int | None, bytes, Any, Any]:
    """POST ``body`` (a stream) and read the reply: (status, body, report, error)."""
    family, backend = variant
    x = importlib.import_module(family)
    headers = {"content-type": "application/json", "x-api-key": "sk-ant-SECRET"}

    if backend is None:
        with x.Client(transport=otel_liveness.wrap(x.HTTPTransport(), policy, telemetry=False)) as client:
            try:
                with client.stream("POST", url + "/v1/messages", content=body, headers=headers) as response:
                    return response.status_code, response.read(), response.extensions["liveness"], None
            except Exception as exc:
                return None, b"", None, exc

    async def go() -> tuple[int | None, bytes, Any, Any]:
        transport = otel_liveness.wrap(x.AsyncHTTPTransport(), policy, telemetry=False)
        async with x.AsyncClient(transport=transport) as client:
            try:
                async with client.stream("POST", url + "/v1/messages", content=body, headers=headers) as response:
                    return response.status_code, await response.aread(), response.extensions["liveness"], None
            except Exception as exc:
                return None, b"", None, exc

    return anyio.run(go, backend=backend)


@pytest.mark.parametrize(("variant", "kind"), BODY_KINDS, ids=[f"{VARIANT_IDS[VARIANTS.index(v)]}-{k}" for v, k in BODY_KINDS])
@pytest.mark.parametrize("failure", ["reset", "529"])
def test_a_streamed_body_is_replayed_byte_for_byte_on_every_attempt(provider: SimulatedProvider, variant: Any,
                                                                    kind: str, failure: str) -> None:
    first = DEAD if failure == "reset" else [anthropic_status(529, "overloaded_error")]
    url = provider.add("replay", [first, first, [s.Headers(), *anthropic_reply("replayed")]])
    bodies = sync_bodies() if variant[1] is None else async_bodies()
    status, body, report, error = send(variant, FAST, url, bodies[kind])
    assert error is None and status == 200 and text_of(body) == "replayed"
    seen = [r.body for r in provider.requests("replay")]
    assert seen == [BODY, BODY, BODY]  # every attempt sent the whole body, never an empty or partial one
    assert len(report["attempts"]) == 3 and report["stop_reason"] == "completed"


@pytest.mark.parametrize(("variant", "kind"), BODY_KINDS, ids=[f"{VARIANT_IDS[VARIANTS.index(v)]}-{k}" for v, k in BODY_KINDS])
def test_a_streamed_body_past_the_bound_is_not_retried_but_typed(provider: SimulatedProvider, variant: Any,
                                                                 kind: str) -> None:
    url = provider.add("over", [DEAD, [s.Headers(), *anthropic_reply("never")]])
    bodies = sync_bodies() if variant[1] is None else async_bodies()
    status, _, _, error = send(variant, FAST.replace(max_replay_body_bytes=1024), url, bodies[kind])
    assert status is None and isinstance(error, BodyNotReplayable) and isinstance(error, ProviderError)
    assert error.attempts == 1 and error.last_cause == "read_error" and error.limit == 1024
    assert error.reason == "over_bound" and "cannot be sent again" in str(error)
    assert isinstance(error, importlib.import_module(variant[0]).TransportError)  # the family's own kind too
    assert [r.body for r in provider.requests("over")] == [BODY]  # one attempt, the whole body; no re-send


def test_a_bytes_body_is_not_copied_and_retries_as_before(provider: SimulatedProvider) -> None:
    url = provider.add("bytes", [DEAD, [s.Headers(), *anthropic_reply("ok")]])
    _, body, _, error = send(("httpx2", None), FAST.replace(max_replay_body_bytes=0), url, BODY)
    assert error is None and text_of(body) == "ok" and [r.body for r in provider.requests("bytes")] == [BODY, BODY]


def test_shadow_mode_keeps_no_body_and_sends_it_once(provider: SimulatedProvider) -> None:
    url = provider.add("shadow-body", [DEAD])
    _, _, _, error = send(("httpx", None), FAST.replace(shadow=True), url, iter(list(PARTS)))
    assert error is not None and not isinstance(error, BodyNotReplayable)  # the reset, as it came
    assert [r.body for r in provider.requests("shadow-body")] == [BODY]


# -- 2: call identity ---------------------------------------------------------------------------------


def test_an_sdk_retry_of_a_new_call_reaches_the_provider(provider: SimulatedProvider) -> None:
    """Call 1 exhausts (the SDK's retries are answered from the cache); call 2, same body, fails
    once (a 529 passed to the SDK); the SDK's retry of call 2 reaches the provider."""
    url = provider.add("identity", [DEAD, [anthropic_status(529, "overloaded_error", (("retry-after-ms", "10"),))],
                                    [s.Headers(), *anthropic_reply("second call")]])
    policy = FAST.replace(max_attempts=1, mark_exhausted_responses=False)
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy, telemetry=False)
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=2,
                                 http_client=httpx2.Client(transport=transport))
    with client:
        with pytest.raises(anthropic.APIConnectionError) as info:
            client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True)
        assert isinstance(otel_liveness.liveness_error(info.value), ProviderError)
        assert provider.attempts("identity") == 1  # the SDK's two retries of call 1 were answered from memory
        events = list(client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True))
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == "second call"
    seen = provider.requests("identity")
    assert [r.headers.get("x-stainless-retry-count") for r in seen] == ["0", "0", "1"]
    assert seen[0].body == seen[1].body == seen[2].body  # the same bytes: only the call tells them apart


def test_two_tenants_never_share_an_entry(provider: SimulatedProvider) -> None:
    url = provider.add("tenants", [DEAD, [s.Headers(), *anthropic_reply("tenant b")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST.replace(max_attempts=1), telemetry=False)
    with httpx2.Client(transport=transport) as client:
        def post(key: str, retry: str) -> Any:
            headers = {"x-api-key": key, "x-stainless-retry-count": retry, "content-type": "application/json"}
            return client.post(url + "/v1/messages", content=BODY, headers=headers)

        with pytest.raises(ProviderError):
            post("sk-ant-TENANT-A", "0")
        with pytest.raises(ProviderError):
            post("sk-ant-TENANT-A", "1")  # A's SDK retry: answered from memory
        assert provider.attempts("tenants") == 1
        reply = post("sk-ant-TENANT-B", "1")  # same bytes, another tenant: never A's error
        assert reply.status_code == 200 and text_of(reply.content) == "tenant b"
    assert provider.attempts("tenants") == 2
    assert all(r.headers["x-api-key"] == "<redacted>" for r in provider.requests("tenants"))


# -- 3: threads ----------------------------------------------------------------------------------------


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every 10 µs: interleavings that a GIL-free interpreter would allow get likely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_the_shared_memories_under_32_threads(fast_switching: None) -> None:
    cache: ExhaustedCache[Fail] = ExhaustedCache(size=8, ttl=0.5, lock=threading.Lock())
    cadence = CadenceMemory(depth=4, hosts=4, lock=threading.Lock())
    fail = Fail(ProviderError, "eof", ("x",), {"attempts": 1, "last_cause": "eof"})
    errors: list[BaseException] = []
    start = threading.Barrier(32)

    def hammer(n: int) -> None:
        try:
            start.wait()
            for i in range(3000):
                key = f"k{(n + i) % 12}"
                now = i * 0.001
                cache.put(key, fail, now)
                got = cache.get(key, now + (0.6 if i % 7 == 0 else 0.0))  # some reads see an expired entry
                assert got is None or got is fail
                cache.discard(f"k{(n * 7 + i) % 12}")
                assert len(cache) <= 8
                cadence.remember(f"h{(n + i) % 6}", float(i % 5))
                learned = cadence.learned(f"h{i % 6}")
                assert learned is None or 0.0 <= learned <= 4.0
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(cache) <= 8


KINDS = ("healthy", "dead-before-content", "truncated")


@pytest.mark.serial  # 32 threads against wall-clock bounds: a sibling worker's load once cost a healthy stream its bound
def test_32_threads_on_one_transport_each_get_their_own_report(provider: SimulatedProvider,
                                                              fast_switching: None) -> None:
    # (a third of the calls fail first: far past the retry budget's tenth, which would shed their
    # retries -- core/memory/budget.py; this test is about each thread's own state, so no budget here)
    policy = FAST.replace(raw_idle_timeout=1.0, semantic_notice_interval=0.2, retry_budget=None)
    rounds = 2
    urls: dict[tuple[int, int], str] = {}
    for n in range(32):
        for r in range(rounds):
            kind = KINDS[(n + r) % 3]
            text = f"reply {n}.{r}"
            ok = [s.Headers(), *anthropic_reply(text, msg_id=f"msg_{n}_{r}")]
            if kind == "healthy":
                script = [ok]
            elif kind == "dead-before-content":
                script = [[s.Headers(), *anthropic_reply(text)[:1], s.Stall()], ok]
            else:
                script = [[s.Headers(), *anthropic_reply(text, msg_id=f"msg_{n}_{r}", deltas=4, stall_after=2),
                           s.Stall()]]
            urls[(n, r)] = provider.add(f"t{n}r{r}", script)
    events: list[Any] = []
    lock = threading.Lock()

    def hook(event: Any) -> None:
        with lock:
            events.append(event)

    transport = otel_liveness.wrap(httpx2.HTTPTransport(limits=httpx2.Limits(max_connections=64)), policy,
                                   hooks=[hook], telemetry=False)
    client = httpx2.Client(transport=transport, timeout=30)
    results: dict[tuple[int, int], Any] = {}
    unexpected: list[BaseException] = []
    start = threading.Barrier(32)

    def work(n: int) -> None:
        try:
            start.wait()
            for r in range(rounds):
                body = json.dumps({"model": "claude-sim-1", "stream": True, "messages": MESSAGES, "n": n}).encode()
                got: dict[str, Any] = {"body": b""}
                try:
                    with client.stream("POST", urls[(n, r)] + "/v1/messages", content=body,
                                       headers={"x-api-key": f"sk-ant-{n}"}) as response:
                        got["report"] = response.extensions["liveness"]
                        for chunk in response.iter_raw():
                            got["body"] += chunk
                except StreamTruncated as exc:
                    got["error"] = exc
                results[(n, r)] = got
        except BaseException as exc:  # collected and asserted below
            unexpected.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(32)]
    with client:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert unexpected == [] and len(results) == 32 * rounds
    for (n, r), got in results.items():
        kind = KINDS[(n + r) % 3]
        report = got["report"]
        ids = {a["response_id"] for a in report["attempts"] if a["response_id"]}
        outcomes = [a["outcome"] for a in report["attempts"]]
        if kind == "truncated":
            assert isinstance(got.get("error"), StreamTruncated), (n, r)
            partial = text_of(got["error"].prefix)
            assert outcomes == ["truncated"] and partial and f"reply {n}.{r}".startswith(partial), (n, r, partial)
            assert ids == {f"msg_{n}_{r}"}
        else:
            assert "error" not in got and text_of(got["body"]) == f"reply {n}.{r}", (n, r, kind)
            assert outcomes == (["completed"] if kind == "healthy" else ["raw_silence", "completed"]), (n, r, outcomes)
            assert f"msg_{n}_{r}" in ids
    ended = [e for e in events if type(e).__name__ == "RequestEnded"]
    assert len(ended) == 32 * rounds and len({id(e.report) for e in ended}) == 32 * rounds


# -- 5: shadow never kills, on the wire -------------------------------------------------------------

BIG_DELTA = sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "text_delta", "text": "y" * 4000}})


#: The frame bound these tests pass, with a raw bound no stall of a loaded test machine reaches: the
#: script has no silence, and in shadow mode the first thing observed is what the report names (a
#: 0.3 s stall under the parallel pass was once observed as raw silence, before the large frame).
FRAME_BOUND = FAST.replace(max_frame_bytes=1024, raw_idle_timeout=60.0)


def big_reply() -> list[Any]:
    steps = anthropic_reply("small", deltas=1)
    return [s.Headers(), *steps[:3], s.Raw(BIG_DELTA), *steps[3:]]


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_shadow_passes_a_frame_past_the_bound_whole(provider: SimulatedProvider, variant: Any) -> None:
    script = big_reply()
    url = provider.add("big", [script])
    result = run(variant, FRAME_BOUND.replace(shadow=True), url + "/v1/messages")
    wire = b"".join(step.data for step in script if isinstance(step, s.Raw))
    assert result.error is None and result.body == wire
    assert result.report is not None and result.report["stop_reason"] == "malformed"
    assert provider.attempts("big") == 1
    enforced = run(variant, FRAME_BOUND, url + "/v1/messages")
    assert isinstance(enforced.error, otel_liveness.FrameTooLarge)  # what shadow reported is what enforcement does


def test_shadow_under_the_sdk_delivers_the_whole_reply(provider: SimulatedProvider) -> None:
    url = provider.add("big-sdk", [big_reply()])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FRAME_BOUND.replace(shadow=True), telemetry=False)
    with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                             http_client=httpx2.Client(transport=transport)) as client:
        with client.messages.stream(model="claude-sim-1", max_tokens=8, messages=MESSAGES) as stream:
            message = stream.get_final_message()
            report = stream.response.extensions["liveness"]
    assert message.content[0].text == "small" + "y" * 4000 and message.stop_reason == "end_turn"
    assert report["stop_reason"] == "malformed" and report["shadow"] is True


# -- 7: a 2xx JSON error object on a streaming request ----------------------------------------------


def json_error(body: bytes) -> s.Status:
    return s.Status(200, body)


def test_the_anthropic_sdk_gets_the_retry_not_an_assertion_error(provider: SimulatedProvider) -> None:
    url = provider.add("json-error", [[json_error(ANTHROPIC_OVERLOADED)], [s.Headers(), *anthropic_reply("after")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                             http_client=httpx2.Client(transport=transport)) as client:
        with client.messages.stream(model="claude-sim-1", max_tokens=8, messages=MESSAGES) as stream:
            message = stream.get_final_message()
            report = stream.response.extensions["liveness"]
    assert message.content[0].text == "after" and provider.attempts("json-error") == 2
    assert [a["outcome"] for a in report["attempts"]] == ["provider_error", "completed"]
    assert report["attempts"][0]["retry_reason"] == "overloaded"


def test_the_anthropic_sdk_gets_a_typed_error_when_exhausted(provider: SimulatedProvider) -> None:
    url = provider.add("json-exhausted", [[json_error(ANTHROPIC_OVERLOADED)]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                             http_client=httpx2.Client(transport=transport)) as client:
        with pytest.raises(anthropic.APIError) as info:
            with client.messages.stream(model="claude-sim-1", max_tokens=8, messages=MESSAGES) as stream:
                stream.get_final_message()
    error = otel_liveness.liveness_error(info.value)
    assert isinstance(error, ProviderError) and error.status == 200 and error.attempts == 3
    assert error.last_cause == "error_event:overloaded_error" and provider.attempts("json-exhausted") == 3


def test_the_openai_sdk_gets_the_retry(provider: SimulatedProvider) -> None:
    url = provider.add("json-openai", [[json_error(OPENAI_SERVER_ERROR)], [s.Headers(), *openai_chat_reply("fine")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    with openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0,
                       http_client=httpx2.Client(transport=transport)) as client:
        chunks = list(client.chat.completions.create(model="gpt-sim-1", messages=MESSAGES, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "fine"
    assert provider.attempts("json-openai") == 2


def test_a_json_reply_to_a_streaming_request_still_passes_through(provider: SimulatedProvider) -> None:
    reply = json.dumps({"id": "msg_json", "type": "message", "role": "assistant", "model": "claude-sim-1",
                        "content": [{"type": "text", "text": "as json"}], "stop_reason": "end_turn"}).encode()
    url = provider.add("json-reply", [[json_error(reply)]])
    result = run(("httpx2", None), FAST, url + "/v1/messages")
    assert result.error is None and result.body == reply and provider.attempts("json-reply") == 1
    assert result.report is not None and result.report["stop_reason"] == "completed"


# -- 8: a client that closes after the reply's stop reason --------------------------------------------


@pytest.mark.parametrize("backend", [None, "asyncio", "trio"])
def test_a_client_closing_after_message_delta_completed_not_cancelled(provider: SimulatedProvider,
                                                                      backend: str | None) -> None:
    url = provider.add("early-close", [[s.Headers(), *anthropic_reply("whole", think_pings=0)]])
    tel = Telemetry()
    seen: list[str] = []
    if backend is None:
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[tel.hook])
        with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                 http_client=httpx2.Client(transport=transport)) as client:
            stream = client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True)
            for event in stream:  # litellm's sync path: stop at message_delta, close before message_stop
                seen.append(event.type)
                if event.type == "message_delta":
                    break
            stream.close()
            report = stream.response.extensions["liveness"]
    else:
        async def go() -> Any:
            transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), FAST, hooks=[tel.hook])
            async with anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                                http_client=httpx2.AsyncClient(transport=transport)) as client:
                stream = await client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES,
                                                      stream=True)
                async for event in stream:
                    seen.append(event.type)
                    if event.type == "message_delta":
                        break
                await stream.close()
                return stream.response.extensions["liveness"]

        report = anyio.run(go, backend=backend)
    assert seen[-1] == "message_delta" and "message_stop" not in seen
    assert report["stop_reason"] == "completed" and report["attempts"][0]["outcome"] == "completed"
    assert report["attempts"][0]["completion"] == "finish_then_close"
    spans = tel.finished()
    assert spans and all(span.status.status_code is not StatusCode.ERROR for span in spans)


def test_a_client_closing_before_the_stop_reason_is_still_cancelled(provider: SimulatedProvider) -> None:
    url = provider.add("early-cancel", [[s.Headers(), *anthropic_reply("not whole", deltas=3)]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, telemetry=False)
    with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                             http_client=httpx2.Client(transport=transport)) as client:
        stream = client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES, stream=True)
        for event in stream:
            if event.type == "content_block_delta":
                break
        stream.close()
        report = stream.response.extensions["liveness"]
    assert report["stop_reason"] == "cancelled"


@pytest.mark.serial  # 16 threads on a 0.3 s raw bound: beside three sibling workers on a slowed host, a raw-silence retry once
def test_closing_from_another_thread_while_reading_ends_everything_once(provider: SimulatedProvider,
                                                                        fast_switching: None) -> None:
    """The sync body closed from another thread while its reader feeds the engine: the engine's
    inputs are serialised by its lock, so each attempt and each request ends exactly once, as
    cancelled or (when the close lost the race) completed -- never twice, never a truncation."""
    url = provider.add("race", [[s.Headers(), *anthropic_reply("r" * 60, deltas=60, delta_every=0.05)]])
    events: list[Any] = []
    lock = threading.Lock()

    def hook(event: Any) -> None:
        with lock:
            events.append(event)

    # (a raw bound well above a loaded machine's pauses: the race is the close's, not the wire's --
    # at FAST's 0.3 s, 16 streams beside other test workers once met raw silence before content)
    transport = otel_liveness.wrap(httpx2.HTTPTransport(limits=httpx2.Limits(max_connections=64)),
                                   FAST.replace(raw_idle_timeout=5.0), hooks=[hook], telemetry=False)
    client = httpx2.Client(transport=transport, timeout=30)
    verdicts: list[Any] = []
    start = threading.Barrier(16)

    def work(n: int) -> None:
        start.wait()
        response = client.send(client.build_request("POST", url + "/v1/messages", json={"stream": True, "n": n}),
                               stream=True)
        closer = threading.Timer(0.001 * (n % 8) * 5, response.close)
        closer.start()
        try:
            for _ in response.iter_raw():
                pass
        except Exception as exc:  # the read fails once the response is closed under it: the library's error
            verdicts.append(otel_liveness.liveness_error(exc))
        closer.join()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    with client:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert verdicts == [None] * len(verdicts)  # never a liveness verdict for the caller's own close
    requests = {id(e.report): e for e in events if type(e).__name__ == "RequestEnded"}
    ended = [e for e in events if type(e).__name__ == "RequestEnded"]
    assert len(ended) == len(requests) == 16  # each request ended exactly once
    attempts = [e for e in events if type(e).__name__ == "AttemptEnded"]
    assert len(attempts) == 16 and {e.record.outcome.value for e in attempts} <= {"cancelled", "completed"}


@pytest.mark.parametrize("family", ["httpx", "httpx2"])
def test_a_multipart_body_with_seekable_files_is_retried_without_a_copy(provider: SimulatedProvider,
                                                                        family: str) -> None:
    """A multipart upload (``files=``) re-sends itself whole (the library seeks its files back):
    retried as before, even past the replay bound -- the bound is for bodies only a copy can replay."""
    x = importlib.import_module(family)
    url = provider.add("upload", [[anthropic_status(529, "overloaded_error")], [s.Headers(), *anthropic_reply("up")]])
    transport = otel_liveness.wrap(x.HTTPTransport(), FAST.replace(max_replay_body_bytes=16), telemetry=False)
    with x.Client(transport=transport) as client:
        reply = client.post(url + "/v1/messages", files={"file": ("a.bin", io.BytesIO(b"z" * 5000))},
                            data={"purpose": "batch"})
    assert reply.status_code == 200 and text_of(reply.content) == "up"
    bodies = [r.body for r in provider.requests("upload")]
    assert len(bodies) == 2 and bodies[0] == bodies[1] and b"z" * 5000 in bodies[0]


def test_a_retry_not_made_for_the_body_is_reported(provider: SimulatedProvider, caplog: pytest.LogCaptureFixture) -> None:
    url = provider.add("not-replayable", [DEAD])
    tel = Telemetry()
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST.replace(max_replay_body_bytes=0), hooks=[tel.hook])
    with caplog.at_level("WARNING", logger="otel_liveness.events"), httpx2.Client(transport=transport) as client:
        with pytest.raises(BodyNotReplayable):
            client.post(url + "/v1/messages", content=iter(list(PARTS)), headers={"x-api-key": "sk-ant-SECRET"})
    request = [sp for sp in tel.finished() if sp.attributes.get("liveness.stop_reason")]
    assert [sp.attributes["liveness.stop_reason"] for sp in request] == ["not_replayable"]
    assert request[0].status.status_code is StatusCode.ERROR
    assert any("cannot be sent again" in r.getMessage() for r in caplog.records)
    assert all("SECRET" not in r.getMessage() for r in caplog.records)
    assert tel.total("liveness.requests", **{"liveness.stop_reason": "not_replayable"}) == 1
