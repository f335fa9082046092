"""No false kills, on the wire: a silent prefill is a wait, a paused reader is not wire silence,
compressed and redirected streams work, whole replies complete -- through every plain client
variant (httpx/httpx2 x sync/asyncio/trio) and the real anthropic and openai SDKs.

Time: 1 provider second = 10 ms (the simulated provider's scale); the policies are in real seconds.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

import anthropic
import anyio
import httpx2
import openai
import pytest

import otel_liveness
from otel_liveness import Policy, StreamTruncated
from otel_liveness.core.events import SemanticNotice
from otel_liveness.testing import anthropic_reply, openai_chat_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import PING, compressed

from .clients import VARIANT_IDS, VARIANTS, run
from .conftest import FAST

URL = "/v1/messages"
REPLY = anthropic_reply("Healthy reply.", deltas=4)
RAW = b"".join(step.data for step in REPLY if isinstance(step, s.Raw))
# The first-byte bound: 2 s (the raw bound is 0.3 s); notices every 0.1 s.
PREFILL = FAST.replace(first_byte_timeout="auto", first_byte_base=2.0, first_byte_per_mib=1.0, first_byte_max=3.0)
MESSAGES: Any = [{"role": "user", "content": "hi"}]


def attempts(result: Any) -> list[dict[str, Any]]:
    assert result.report is not None, result.error
    return list(result.report["attempts"])


# -- a silent prefill is a wait --------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("headers_first", [False, True], ids=["silent", "headers-then-silent"])
def test_a_prefill_four_times_the_raw_bound_completes_in_one_attempt(variant, provider, headers_first) -> None:  # type: ignore[no-untyped-def]
    # 1.2 s without a byte (four raw bounds); a gateway may send the headers first.
    script = [s.Headers(), s.Sleep(120.0), *REPLY] if headers_first else [s.Sleep(120.0), s.Headers(), *REPLY]
    url = provider.add("prefill", [script])
    result = run(variant, PREFILL, url + URL)
    assert result.error is None and result.body == RAW
    assert provider.attempts("prefill") == 1
    (attempt,) = attempts(result)
    assert attempt["outcome"] == "completed" and attempt["first_byte_bound"] == pytest.approx(2.0, abs=0.01)
    assert attempt["time_to_first_byte"] >= 1.2
    kinds = {e.kind.value for e in result.events if isinstance(e, SemanticNotice)}
    assert attempt["prefill_notices"] >= 5 and "prefill" in kinds


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_a_blackholed_request_is_retried_at_the_first_byte_bound(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("blackhole", [[s.HangBeforeHeaders()], [s.Headers(), *REPLY]])
    result = run(variant, PREFILL, url + URL)
    assert result.error is None and result.body == RAW and provider.attempts("blackhole") == 2
    first = attempts(result)[0]
    assert (first["outcome"], first["error_type"], first["retry_reason"]) == (
        "raw_silence", "first_byte_timeout", "first_byte_timeout")
    assert 2.0 <= first["duration"] < 2.0 + 0.5  # at the bound, not at the raw one and not much after


# -- a paused reader is not wire silence ------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_a_paused_reader_completes_with_every_byte(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # sync: the caller runs a tool for twice the raw bound between reads; async: it blocks the
    # event loop for three times the bound. The bytes wait in the socket meanwhile.
    pause = 0.3 * (2 if variant[1] is None else 3)
    url = provider.add("paused", [[s.Headers(), *REPLY]])
    result = run(variant, FAST, url + URL, pause=pause)
    assert result.error is None and result.body == RAW
    (attempt,) = attempts(result)
    assert attempt["outcome"] == "completed" and provider.attempts("paused") == 1


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_a_paused_reader_still_finds_a_dead_socket(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("paused-dead", [[s.Headers(), *REPLY[:4], s.Stall()]])
    started = time.monotonic()
    result = run(variant, FAST, url + URL, pause=0.6)
    assert isinstance(result.error, StreamTruncated) and result.error.cause == "raw_silence"
    assert result.error.prefix == result.body
    assert time.monotonic() - started < 4 * 0.6 + 0.3 + 1.0  # the pauses, one raw bound, slack


# -- compressed streams -----------------------------------------------------------------------------


@pytest.mark.serial  # one attempt exactly, on the 0.3 s bound: retried once with 3 sibling workers on 2 cores
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_stream_completes_with_heartbeats_and_content_classified(variant, provider, coding) -> None:  # type: ignore[no-untyped-def]
    reply = anthropic_reply("Compressed.", think_pings=3, ping_every=5.0)
    url = provider.add("gz", [compressed([s.Headers(), *reply], coding)])
    result = run(variant, FAST, url + URL, decoded=True)
    assert result.error is None and result.headers.get("content-encoding") == coding
    assert result.body == b"".join(step.data for step in reply if isinstance(step, s.Raw))
    (attempt,) = attempts(result)
    assert (attempt["outcome"], attempt["heartbeats"], attempt["completion"]) == ("completed", 3, "end_frame")


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_a_stall_after_content_under_gzip_is_a_truncation_with_the_exact_decoded_prefix(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("gz-stall", [[*compressed([s.Headers(), *REPLY[:4]]), s.Stall()]])
    result = run(variant, FAST, url + URL)  # raw bytes: what the transport released
    assert isinstance(result.error, StreamTruncated) and result.error.cause == "raw_silence"
    assert provider.attempts("gz-stall") == 1  # content was released: never produced twice
    decoded = b"".join(step.data for step in REPLY[:4] if isinstance(step, s.Raw))
    assert result.error.prefix == decoded == zlib.decompressobj(31).decompress(result.body)
    assert result.error.released == len(result.body)


# -- redirects and non-stream bodies -------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("code", [307, 308])
def test_a_redirect_to_a_healthy_stream_completes(variant, provider, code) -> None:  # type: ignore[no-untyped-def]
    target = provider.add("moved-to", [[s.Headers(), *REPLY]])
    url = provider.add("moved", [[s.Status(code, b"", (("location", target + URL),))]])
    result = run(variant, FAST, url + URL, follow_redirects=True)
    assert result.error is None and result.status == 200 and result.body == RAW
    assert provider.attempts("moved") == 1 and provider.attempts("moved-to") == 1  # no retries of the 3xx
    assert result.report is not None and result.report["stop_reason"] == "completed"  # the second hop's report


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_a_json_answer_to_a_streaming_request_is_released_not_retried(variant, provider) -> None:  # type: ignore[no-untyped-def]
    body = b'{"id":"msg_1","type":"message","content":[{"type":"text","text":"not streamed"}]}'
    url = provider.add("json", [[s.Status(200, body)]])
    result = run(variant, FAST, url + URL)
    assert result.error is None and result.body == body and provider.attempts("json") == 1
    assert attempts(result)[0]["outcome"] == "completed"


# -- whole replies complete ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_a_final_end_frame_without_its_blank_line_completes(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("no-blank", [[s.Headers(), s.Raw(RAW[:-1]), s.Close()]])
    result = run(variant, FAST, url + URL)
    assert result.error is None and result.body == RAW[:-1]
    assert attempts(result)[0]["completion"] == "end_frame"


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_an_openai_stream_with_a_finish_reason_but_no_done_completes(variant, provider) -> None:  # type: ignore[no-untyped-def]
    reply = [step for step in openai_chat_reply("done", deltas=2) if b"[DONE]" not in getattr(step, "data", b"")]
    url = provider.add("no-done", [[s.Headers(), *reply]])
    result = run(variant, FAST, url + "/v1/chat/completions")
    assert result.error is None
    assert attempts(result)[0]["completion"] == "finish_then_eof"


# -- the real SDKs ------------------------------------------------------------------------------------


# The SDK's own default client follows redirects; a client passed to it is configured the same way here.
def anthropic_sync(url: str, policy: Policy, *, pause: float = 0.0) -> tuple[str, dict[str, Any]]:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), policy)
    with anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                             http_client=httpx2.Client(transport=transport, follow_redirects=True)) as client:
        with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=MESSAGES) as stream:
            text = ""
            for event in stream:
                if event.type == "text":
                    text += event.text
                    time.sleep(pause)  # a tool runs between reads
            return text, stream.response.extensions["liveness"]


def anthropic_async(url: str, policy: Policy, backend: str, *, pause: float = 0.0) -> tuple[str, dict[str, Any]]:
    async def main() -> tuple[str, dict[str, Any]]:
        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), policy)
        async with anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                            http_client=httpx2.AsyncClient(transport=transport,
                                                                           follow_redirects=True)) as client:
            async with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=MESSAGES) as stream:
                text = ""
                async for event in stream:
                    if event.type == "text":
                        text += event.text
                        time.sleep(pause)  # blocks the event loop
                return text, stream.response.extensions["liveness"]

    return anyio.run(main, backend=backend)


SDK = ["sync", "asyncio", "trio"]


def via_sdk(kind: str, url: str, policy: Policy, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    return anthropic_sync(url, policy, **kwargs) if kind == "sync" else anthropic_async(url, policy, kind, **kwargs)


@pytest.mark.parametrize("kind", SDK)
def test_sdk_silent_prefill_completes_in_one_attempt(kind: str, provider: Any) -> None:
    url = provider.add("sdk-prefill", [[s.Sleep(120.0), s.Headers(), *REPLY]])
    text, report = via_sdk(kind, url, PREFILL)
    assert text == "Healthy reply." and provider.attempts("sdk-prefill") == 1
    assert report["attempts"][0]["prefill_notices"] >= 5


@pytest.mark.parametrize("kind", SDK)
def test_sdk_paused_reader_completes(kind: str, provider: Any) -> None:
    url = provider.add("sdk-paused", [[s.Headers(), *REPLY]])
    text, report = via_sdk(kind, url, FAST, pause=0.3 * (2 if kind == "sync" else 3))
    assert text == "Healthy reply." and report["stop_reason"] == "completed"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_loop_blocked_by_another_task_while_a_read_waits_is_no_silence(backend: str, provider: Any) -> None:
    # Another task blocks the event loop (a synchronous call in an async agent) for five raw
    # bounds while the stream's read waits; the provider's pings meanwhile sit in the socket.
    # When the loop runs again, the read's wake-up and its bytes are due together: bytes that
    # were on the wire are progress, never a wire-silence verdict, and nothing is retried.
    url = provider.add("blocked-loop", [[s.Headers(), *anthropic_reply("Healthy reply.", think_pings=20, ping_every=0.05)]])

    async def main() -> tuple[str, dict[str, Any]]:
        async def blocker() -> None:
            await anyio.sleep(0.3)
            time.sleep(5 * FAST.raw_idle_timeout)  # type: ignore[operator]  # (blocks the loop)

        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), FAST)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(blocker)
            async with anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                                http_client=httpx2.AsyncClient(transport=transport)) as client:
                async with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=MESSAGES) as stream:
                    text = "".join([event.text async for event in stream if event.type == "text"])
                    report: dict[str, Any] = stream.response.extensions["liveness"]
        return text, report

    text, report = anyio.run(main, backend=backend)
    assert text == "Healthy reply." and report["stop_reason"] == "completed"
    assert provider.attempts("blocked-loop") == 1 and report["attempts"][0]["heartbeats"] == 20


@pytest.mark.parametrize("kind", SDK)
def test_sdk_gzip_stream_completes_and_its_stall_is_a_truncation(kind: str, provider: Any) -> None:
    reply = anthropic_reply("Zipped.", think_pings=2)
    url = provider.add("sdk-gz", [compressed([s.Headers(), *reply]), [*compressed([s.Headers(), *REPLY[:4]]), s.Stall()]])
    text, report = via_sdk(kind, url, FAST)
    assert text == "Zipped." and report["attempts"][0]["heartbeats"] == 2
    with pytest.raises(Exception) as caught:
        via_sdk(kind, url, FAST)
    error = otel_liveness.liveness_error(caught.value)
    assert isinstance(error, StreamTruncated) and error.partial is not None
    assert error.prefix == b"".join(step.data for step in REPLY[:4] if isinstance(step, s.Raw))
    assert provider.attempts("sdk-gz") == 2


@pytest.mark.parametrize("kind", SDK)
def test_sdk_follows_a_redirect_to_a_healthy_stream(kind: str, provider: Any) -> None:
    target = provider.add("sdk-moved-to", [[s.Headers(), *REPLY]])
    url = provider.add("sdk-moved", [[s.Status(307, b"", (("location", target + URL),))]])
    text, report = via_sdk(kind, url, FAST)
    assert text == "Healthy reply." and report["stop_reason"] == "completed"
    assert provider.attempts("sdk-moved") == 1 and provider.attempts("sdk-moved-to") == 1


@pytest.mark.parametrize("kind", SDK)
def test_sdk_end_frame_without_its_blank_line_completes(kind: str, provider: Any) -> None:
    url = provider.add("sdk-no-blank", [[s.Headers(), s.Raw(RAW[:-1]), s.Close()]])
    text, report = via_sdk(kind, url, FAST)
    assert text == "Healthy reply." and report["attempts"][0]["completion"] == "end_frame"


def test_openai_sdk_finish_reason_without_done_completes(provider: Any) -> None:
    reply = [step for step in openai_chat_reply("done", deltas=2) if b"[DONE]" not in getattr(step, "data", b"")]
    url = provider.add("oa-no-done", [[s.Headers(), *reply]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST)
    with openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0,
                       http_client=httpx2.Client(transport=transport)) as client:
        stream = client.chat.completions.create(model="gpt-sim-1", messages=MESSAGES, stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        report = stream.response.extensions["liveness"]
    assert text == "done" and report["attempts"][0]["completion"] == "finish_then_eof"


def test_thirty_minutes_of_jittered_pings_with_learned_cadence_kill_nothing(provider: Any) -> None:
    # Anthropic's cadence, 27-31 s apart, for 30 provider-minutes (18 s of real time at 1/100),
    # with the learned bound on: three of the largest gaps never run out between pings.
    import random

    rng = random.Random(7)
    gaps = []
    while sum(gaps) < 1800:
        gaps.append(rng.uniform(27.0, 31.0))
    steps: list[Any] = [s.Headers(), REPLY[0]]
    for gap in gaps:
        steps += [s.Sleep(gap), s.Raw(PING)]
    steps += REPLY[1:]
    url = provider.add("jitter", [steps])
    policy = FAST.replace(raw_idle_timeout=0.9, raw_idle_adaptive=True, raw_idle_floor=0.05, semantic_notice_interval=5.0)
    result = run(("httpx2", None), policy, url + URL)
    assert result.error is None and provider.attempts("jitter") == 1
    (attempt,) = attempts(result)
    assert attempt["outcome"] == "completed" and attempt["heartbeats"] == len(gaps)
    assert 0.27 * 3 <= attempt["raw_bound"] <= 0.9  # learned from the gaps, capped by the fixed bound


# -- the learned cadence, on the wire ------------------------------------------------------------------

ADAPTIVE = FAST.replace(raw_idle_timeout=5.0, raw_idle_adaptive=True, raw_idle_floor=0.05)


@pytest.mark.parametrize("variant", [("httpx2", None), ("httpx2", "asyncio"), ("httpx", "trio")],
                         ids=["httpx2-sync", "httpx2-asyncio", "httpx-trio"])
def test_learned_cadence_finds_a_dead_socket_within_three_cadences(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # Pings every 0.1 s while the model thinks, then content, then the socket dies: found within
    # three cadences (0.3 s) plus scheduling slack -- not at the fixed 5 s bound.
    pings = [step for _ in range(8) for step in (s.Sleep(10.0), s.Raw(PING))]
    url = provider.add("cadence", [[s.Headers(), REPLY[0], *pings, *REPLY[1:4], s.Stall()]])
    result = run(variant, ADAPTIVE, url + URL)
    assert isinstance(result.error, StreamTruncated) and result.error.cause == "raw_silence"
    (attempt,) = attempts(result)
    # 3 x the largest measured gap (~0.1 s; more when the host is loaded), far below the fixed 5 s
    assert 0.25 <= attempt["raw_bound"] <= 3 * attempt["max_heartbeat_gap"] + 1e-6 <= 0.6
    assert attempt["raw_idle"] < attempt["raw_bound"] + 0.25  # found at the bound, plus scheduling slack


@pytest.mark.parametrize("variant", [("httpx2", None), ("httpx2", "asyncio")], ids=["sync", "asyncio"])
def test_learned_cadence_survives_a_single_late_ping(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # Ten pings 0.1 s apart, one 2.5x late (0.25 s), more pings, then the reply: no kill.
    pings = [step for _ in range(10) for step in (s.Sleep(10.0), s.Raw(PING))]
    late = [s.Sleep(25.0), s.Raw(PING)]
    url = provider.add("late", [[s.Headers(), REPLY[0], *pings, *late, *pings[:6], *REPLY[1:]]])
    result = run(variant, ADAPTIVE, url + URL)
    assert result.error is None and result.body.endswith(RAW[-40:])
    (attempt,) = attempts(result)
    assert attempt["outcome"] == "completed" and attempt["max_heartbeat_gap"] >= 0.2
