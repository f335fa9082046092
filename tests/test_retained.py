"""What a stream keeps, driven through the engine with a fake clock (the steady lane taking reads
as a driver lets it): a bounded raw head, the content journal and the frame in progress -- not
the reply -- while a truncation still carries the exact released count and the whole reply's
partial message. And what is held before content: past the verbatim bound, held heartbeats are
not replayed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from otel_liveness import Policy
from otel_liveness.core import errors as E
from otel_liveness.core.commands import COMPLETE, READ, Fail, Release, Respond
from otel_liveness.core.request.engine import HOLD_VERBATIM_BYTES, Engine
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.core.wire.anthropic import decode_partial
from otel_liveness.core.wire.sse import SSEScanner
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import BEDROCK_HEADERS, PING, bedrock_reply, openai_chat_reply, sse_event

SSE = {"content-type": "text/event-stream"}
POLICY = Policy(first_byte_timeout=None, semantic_notice_interval=None)
START = sse_event("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "m"}})
BLOCK = sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})
STOP = sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})
FINISH = sse_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
END = sse_event("message_stop", {"type": "message_stop"})


def delta(text: str) -> bytes:
    return sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": text}})


@dataclass
class Played:
    body: bytes
    error: Fail | None
    engine: Engine
    peak_retained: int
    lane_reads: int


def play(chunks: Sequence[bytes], policy: Policy = POLICY, *, eof: bool = True, headers: dict[str, str] = SSE,
         provider: str = "anthropic") -> Played:
    """A driver: headers, then each chunk 10 ms apart (through the steady lane where it admits
    the read, as the transport's drivers do), then EOF."""
    engine = Engine(policy, RequestFacts(streaming=True, body_size=100), 0.0, provider=provider)
    engine.start(0.0)
    now = 0.01
    command: Any = engine.headers(now, 200, headers)
    assert command is READ
    body = b""
    peak = lane_reads = 0
    responded = False

    def settle(command: Any) -> Any:
        nonlocal body, responded
        while True:
            if isinstance(command, Respond):
                responded = True
                body += command.first
                command = command.then
            elif isinstance(command, Release):
                body += command.data
                command = command.then
            elif isinstance(command, bytes):
                body += command
                return READ
            else:
                return command

    for chunk in chunks:
        now += 0.01
        if responded and engine.lane.step(chunk, now):
            body += chunk
            lane_reads += 1
        else:
            command = settle(engine.received(now, chunk))
            if isinstance(command, Fail):
                return Played(body, command, engine, peak, lane_reads)
            assert command is READ or command is COMPLETE
        assert engine.attempt is not None
        peak = max(peak, engine.attempt.retained)
    command = settle(engine.eof(now + 0.01)) if eof else COMPLETE
    return Played(body, command if isinstance(command, Fail) else None, engine, peak, lane_reads)


def reply(deltas: int, text: str = "tok{} ") -> bytes:
    return START + BLOCK + b"".join(delta(text.format(i)) for i in range(deltas))


def chop(data: bytes, sizes: Sequence[int]) -> list[bytes]:
    """``data`` cut into reads of ``sizes`` bytes, cycling."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        out.append(data[pos : pos + size])
        pos += size
        i += 1
    return out


def test_a_long_reply_keeps_a_bounded_head_and_the_whole_partial() -> None:
    # 3 MB of reply in reads of one frame, of 64 frames and of 64 KiB, then the body ends before
    # the reply does: the truncation has the exact count, the raw head, and the whole content.
    body = reply(30_000)
    frame = len(delta("tok12345 "))
    chunks = chop(body, [frame * 1] * 50 + [frame * 64] * 50 + [65536] * 10)
    played = play(chunks)
    error = played.error
    assert error is not None and error.error is E.StreamTruncated and error.fields["cause"] == "eof"
    assert played.body == body and error.fields["released"] == len(body)
    assert error.fields["prefix"] == body[: POLICY.max_prefix_bytes]
    assert error.fields["partial"] == decode_partial(body)
    assert error.fields["partial"]["content"][0]["text"] == "".join(f"tok{i} " for i in range(30_000))
    assert played.lane_reads > len(chunks) // 2  # most reads took the steady lane, many of them of many frames
    # Retained: the head, the journal (the text and a few bytes a delta) and a frame in progress.
    journal = played.engine.attempt.framer.scanner.journal_size  # type: ignore[union-attr,attr-defined]
    assert journal < len(body) // 5
    assert played.peak_retained <= POLICY.max_prefix_bytes + 2 * journal + 4 * 65536
    assert played.peak_retained < len(body) // 4


def test_retained_bytes_do_not_grow_with_the_reply_past_the_journal_bound() -> None:
    policy = POLICY.replace(max_prefix_bytes=4096, max_partial_bytes=32 * 1024)
    bound = policy.max_prefix_bytes + policy.max_partial_bytes
    peaks = []
    for deltas in (5_000, 40_000):
        played = play(chop(reply(deltas), [8192]), policy)
        assert played.error is not None and played.error.fields["released"] == len(played.body)
        partial = played.error.fields["partial"]
        assert partial["clipped"] and partial["content"][0]["complete"] is False
        text = partial["content"][0]["text"]
        assert text == "".join(f"tok{i} " for i in range(deltas))[: len(text)] and len(text) > 4000
        peaks.append(played.peak_retained)
    assert peaks[1] <= bound + 4 * 8192 and peaks[1] - peaks[0] < 8192


def test_a_short_reply_is_all_in_the_prefix() -> None:
    body = reply(20)
    played = play(chop(body, [100]), POLICY)
    assert played.error is not None and played.error.fields["prefix"] == body == played.body


def test_an_encoded_read_with_content_then_an_error_reaches_the_caller_whole() -> None:
    # A compressed read that holds content and then an in-band error cannot be split -- nor need it
    # be: after content, the error frame is the provider's answer, passed on as sent.
    import zlib

    error = sse_event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    compressor = zlib.compressobj(wbits=31)

    def gz(data: bytes) -> bytes:
        return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)

    chunks = [gz(START + BLOCK + delta("kept ")), gz(delta("also ") + error)]
    played = play(chunks, headers={**SSE, "content-encoding": "gzip"})
    assert played.error is None and played.body == b"".join(chunks)
    report = played.engine.published
    assert (report["stop_reason"], report["cause"]) == ("truncated", "error_event:overloaded_error")


def test_bedrock_partial_is_the_whole_reply_with_a_small_prefix() -> None:
    steps = bedrock_reply("0123456789" * 300, deltas=300)
    raws = [x.data for x in steps if isinstance(x, s.Raw)]
    cut = raws[:-3]  # no stop: the body ends mid-reply
    headers = {"content-type": BEDROCK_HEADERS.content_type}
    played = play(cut, POLICY.replace(max_prefix_bytes=200), headers=headers, provider="bedrock")
    assert played.error is not None and played.error.error is E.StreamTruncated
    assert len(played.error.fields["prefix"]) == 200 and played.error.fields["released"] == len(b"".join(cut))
    text = played.error.fields["partial"]["content"][0]["text"]
    assert text == ("0123456789" * 300)[: len(text)] and len(text) >= 2900


# -- held before content ------------------------------------------------------------------------


def frames_of(data: bytes) -> list[Any]:
    scanner = SSEScanner(1 << 30)
    return [(f.event, f.data) for f in scanner.feed(data) + scanner.close()]


def test_held_heartbeats_within_the_bound_are_replayed_as_they_came() -> None:
    wire = START + PING * 10 + b": comment\n\n" * 20 + BLOCK + delta("a") + STOP + FINISH + END
    played = play(chop(wire, [37]))
    assert played.error is None and played.body == wire


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"])
@pytest.mark.parametrize("read", [2000, 16384, 777])
def test_a_comment_flood_before_content_is_not_replayed(line_end: bytes, read: int) -> None:
    # 100,000 comment lines (and some pings) before the content: the release at the first content
    # is the frames that are not heartbeats, not the flood; every heartbeat is still counted.
    flood = (b":" + line_end) * 50_000 + PING * 100 + (b": x" + line_end) * 50_000
    wire = START + flood + BLOCK + delta("a") + STOP + FINISH + END
    played = play(chop(wire, [read]))
    assert played.error is None
    released_first = played.body[: played.body.index(b"event: content_block_delta")]
    assert len(released_first) < HOLD_VERBATIM_BYTES + len(START) + len(BLOCK) + read
    expected = [f for f in frames_of(wire) if f[0] not in (":", "ping")]
    assert [f for f in frames_of(played.body) if f[0] not in (":", "ping")] == expected
    attempt = played.engine.published["attempts"][0]
    assert attempt["heartbeats"] == 100_100 and attempt["outcome"] == "completed"


def test_a_frame_in_progress_at_the_release_is_kept_whole() -> None:
    # The read that carries the content starts inside a frame the held reads began.
    flood = b":\n" * 20_000
    wire = flood + START + BLOCK + delta("a") + END
    cut = len(flood) + len(START) + 7  # inside content_block_start
    played = play([wire[:10_000], wire[10_000:cut], wire[cut:]])
    assert played.error is None
    assert frames_of(played.body) == [f for f in frames_of(wire) if f[0] != ":"]


def test_held_bytes_that_are_not_heartbeats_still_meet_the_bound() -> None:
    # Preamble frames are not dropped: their bytes before content stay bounded. (A frame the
    # profile does not recognise is content, never held: tests/test_fail_open.py.)
    played = play([START] * 1000, POLICY.replace(max_frame_bytes=50_000))
    assert played.error is not None and played.error.error is E.MalformedStream


def test_the_hold_is_dropped_at_the_first_content() -> None:
    played = play([START, BLOCK, delta("a")], eof=False)
    framer = played.engine.attempt.framer  # type: ignore[union-attr]
    assert framer.replay() is None and framer.scanner.hold is None  # type: ignore[attr-defined]


# -- through the transport: the first released bytes are not kept by the body ---------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_first_released_read_is_not_kept_while_the_stream_stays_open(mode: str) -> None:
    # The read that ends the hold goes to the caller as the response's first bytes. The body must
    # not keep it afterwards: it is a whole read (up to httpcore's 64 KiB; 1.5 MB here), outside
    # what the engine retains and bounds -- for a stream that may stay open for minutes. Measured
    # after a second read, while the stream is still open.
    import asyncio
    import gc
    import tracemalloc

    import httpx2

    import otel_liveness

    # 5,000 content events of 200 characters (OpenAI: no content journal), in three reads: all but
    # the last event at once, the last event, then the stop and [DONE]
    events = [step.data for step in openai_chat_reply("x" * 1_000_000, deltas=5000) if isinstance(step, s.Raw)]
    first_len = sum(map(len, events[:-3]))

    def produce() -> Any:
        yield b"".join(events[:-3])  # joined here, while measured: nothing else refers to it
        yield events[-3]
        yield b"".join(events[-2:])

    class SyncBody(httpx2.SyncByteStream):
        def __iter__(self) -> Any:
            return produce()

    class AsyncBody(httpx2.AsyncByteStream):
        async def __aiter__(self) -> Any:
            for chunk in produce():
                yield chunk

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = SyncBody() if mode == "sync" else AsyncBody()
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    request = {"model": "gpt-x", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    url = "https://api.openai.com/v1/chat/completions"
    sizes: list[int] = []
    held: list[int] = []

    def measure() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    def sync_stream(client: httpx2.Client, probe: bool) -> None:
        with client.stream("POST", url, json=request) as response:
            reads = response.iter_raw()
            sizes[:] = [len(next(reads)), len(next(reads))]
            if probe:
                held.append(measure())
            sizes.extend(len(x) for x in reads)

    async def async_stream(client: httpx2.AsyncClient, probe: bool) -> None:
        async with client.stream("POST", url, json=request) as response:
            reads = response.aiter_raw()
            sizes[:] = [len(await reads.__anext__()), len(await reads.__anext__())]
            if probe:
                held.append(measure())
            sizes.extend([len(x) async for x in reads])

    async def async_run() -> None:
        transport = otel_liveness.wrap(httpx2.MockTransport(handler), asynchronous=True)
        async with httpx2.AsyncClient(transport=transport) as client:
            await async_stream(client, False)  # first use: lazy imports and caches, not measured
            tracemalloc.start()
            await async_stream(client, True)

    try:
        if mode == "sync":
            with httpx2.Client(transport=otel_liveness.wrap(httpx2.MockTransport(handler))) as client:
                sync_stream(client, False)  # first use: lazy imports and caches, not measured
                tracemalloc.start()
                sync_stream(client, True)
        else:
            asyncio.run(async_run())
    finally:
        tracemalloc.stop()
    assert sizes[0] == first_len > 1_400_000 and len(sizes) == 3
    # traced since the second stream began: the raw head (max_prefix_bytes, 8 KiB) and the
    # request's own objects, not the 1.5 MB read
    assert held[0] < 256 * 1024, held
