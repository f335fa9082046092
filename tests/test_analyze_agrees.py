"""``otel-liveness analyze`` and the wire cannot disagree: every attempt of a matrix of wire
scenarios is captured by the flight recorder, written as the recorder writes it, parsed back and
replayed through ``analyze`` with the same policy; the verdict must be the one the transport
reached on the wire."""

from __future__ import annotations

import json
import pathlib
import zlib
from typing import Any

import pytest

from otel_liveness.core.events import AttemptEnded, Event
from otel_liveness.core.request.engine import TOLERANCE
from otel_liveness.core.wire.eventstream import bedrock_exception
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import (
    BEDROCK_HEADERS,
    PING,
    anthropic_error,
    anthropic_status,
    bedrock_reply,
    gemini_reply,
    openai_chat_reply,
)
from otel_liveness.tools.analyze import analyze, parse_capture, verdict_of
from otel_liveness.transport._recorder import capture_lines

from .clients import BODY, run
from .conftest import FAST

REPLY = anthropic_reply("abcdef", deltas=3)
RAW = b"".join(step.data for step in REPLY if isinstance(step, s.Raw))


def gzip_steps() -> list[Any]:
    compressor = zlib.compressobj(wbits=31)
    pieces = [compressor.compress(step.data) + compressor.flush(zlib.Z_SYNC_FLUSH) for step in REPLY if isinstance(step, s.Raw)]
    return [s.Headers(headers=(("content-encoding", "gzip"),)), *[s.Raw(p) for p in pieces[:4]], s.Stall()]


# name -> (attempt scripts, policy changes, path)
SCENARIOS: dict[str, tuple[list[list[Any]], dict[str, Any], str]] = {
    "completes": ([[s.Headers(), *REPLY]], {}, "/v1/messages"),
    "long think": ([[s.Headers(), *anthropic_reply("ok", think_pings=6, ping_every=5.0)]], {}, "/v1/messages"),
    "dead before headers": ([[s.HangBeforeHeaders()], [s.Headers(), *REPLY]], {}, "/v1/messages"),
    "first-byte timeout": ([[s.HangBeforeHeaders()], [s.Headers(), *REPLY]], {"first_byte_timeout": 0.4},
                           "/v1/messages"),
    "silent after message_start": ([[s.Headers(), REPLY[0], s.Stall()], [s.Headers(), *REPLY]], {}, "/v1/messages"),
    "stall after content": ([[s.Headers(), *REPLY[:4], s.Stall()]], {}, "/v1/messages"),
    "in-band error before content": ([[s.Headers(), REPLY[0], s.Raw(anthropic_error("overloaded_error"))],
                                      [s.Headers(), *REPLY]], {}, "/v1/messages"),
    "in-band error after content": ([[s.Headers(), *REPLY[:4], s.Raw(anthropic_error("api_error"))]], {},
                                    "/v1/messages"),
    "rejected in-band": ([[s.Headers(), REPLY[0], s.Raw(anthropic_error("invalid_request_error"))]], {},
                         "/v1/messages"),
    "reset after content": ([[s.Headers(), *REPLY[:4], s.Sleep(5.0), s.Reset()]], {}, "/v1/messages"),
    "eof before content": ([[s.Headers(), REPLY[0], s.Close()], [s.Headers(), *REPLY]], {}, "/v1/messages"),
    "eof after content": ([[s.Headers(), *REPLY[:4], s.Close()]], {}, "/v1/messages"),
    "529 then success": ([[anthropic_status(529, "overloaded_error")], [s.Headers(), *REPLY]], {}, "/v1/messages"),
    "400": ([[anthropic_status(400, "invalid_request_error")]], {}, "/v1/messages"),
    "semantic timeout": ([[s.Headers(), REPLY[0], *[s.Raw(PING), s.Sleep(5.0)] * 20]],
                         {"semantic_timeout": 0.3, "raw_idle_timeout": 3.0, "max_attempts": 1}, "/v1/messages"),
    "gzip stall after content": ([gzip_steps()], {}, "/v1/messages"),
    "openai chat": ([[s.Headers(), *openai_chat_reply("hello", deltas=2)]], {}, "/v1/chat/completions"),
    "bedrock stall after content": ([[BEDROCK_HEADERS, *bedrock_reply("abcdef", deltas=3, stall_after=2), s.Stall()]],
                                    {"raw_idle_timeout_no_keepalive": 0.5}, "/model/m/invoke-with-response-stream"),
    "bedrock exception before content": ([[BEDROCK_HEADERS, bedrock_reply("x")[0],
                                           s.Raw(bedrock_exception("internalServerException", "oops"))],
                                          [BEDROCK_HEADERS, *bedrock_reply("ok")]], {},
                                         "/model/m/invoke-with-response-stream"),
    "gemini completes": ([[s.Headers(), *gemini_reply("hello", deltas=2)]], {},
                         "/v1beta/models/g:streamGenerateContent?alt=sse"),
    "giant frame": ([[s.Headers(), s.Raw(b"data: " + b"a" * 5000)]], {"max_frame_bytes": 1024}, "/v1/messages"),
}


def reader_paused(chunks: list[Any], policy: Any, body_size: int) -> bool:
    """A read result (headers, bytes, the end of the body, an error) was taken after a wait longer
    than the bound then in force -- the first-byte one until the body started, the raw one after:
    had the reader been waiting in the read, the read would have ended at the bound. So the result
    was waiting in the socket while the reader did not run."""
    raw = policy.raw_idle_timeout
    first_byte = policy.first_byte_bound(body_size, raw) or raw
    last, started = 0.0, False  # the capture's times count from the attempt's request
    for chunk in chunks:
        if chunk.data == "end":
            return False
        if chunk.t - last > (raw if started else first_byte) + TOLERANCE:
            return True
        started = started or isinstance(chunk.data, bytes)
        last = chunk.t
    return False


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("variant", [("httpx2", None), ("httpx2", "asyncio")], ids=["sync", "asyncio"])
def test_analyze_replays_every_attempt_to_the_wire_verdict(name: str, variant: tuple[str, str | None], provider: Any,
                                                          tmp_path: pathlib.Path) -> None:
    scripts, changes, path = SCENARIOS[name]
    policy = FAST.replace(capture_dir=str(tmp_path), **changes)
    ended: list[AttemptEnded] = []

    def keep(event: Event) -> None:
        if isinstance(event, AttemptEnded):
            ended.append(event)

    url = provider.add(name.replace(" ", "-"), scripts)
    result = run(variant, policy, url + path, hooks=[keep])
    assert ended, result.error
    body_size = len(json.dumps(BODY).encode())
    provider_name = ended[0].report.provider
    for event in ended:
        assert event.capture is not None
        wire = verdict_of(event.record, None)
        lines = list(capture_lines(event.capture))  # as the recorder writes it
        chunks = parse_capture(lines)
        replay = analyze(chunks, provider=provider_name, policy=policy, body_size=body_size)
        if (replay["verdict"], replay["committed"]) != (wire, event.record.committed):
            # analyze replays reads without pauses. A reader starved of CPU (a loaded machine)
            # takes what was waiting in the socket: the capture then shows a silence longer than
            # the bound that the wire never saw. That, and only that, may make the replay differ --
            # and then it judges that silence.
            assert reader_paused(chunks, policy, body_size), (event.record.index, wire, replay["verdict"], lines)
            assert replay["verdict"] in ("raw_silence", "first_byte_timeout"), (event.record.index, lines)
    # The recorder wrote every attempt that did not complete, and each file replays the same way.
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) == sum(1 for e in ended if e.record.outcome.value != "completed")  # type: ignore[union-attr]


THINK = [s.Raw(PING), s.Sleep(0.05)] * 3  # heartbeats on the wire (SSE) before the content
FRAMED: dict[str, tuple[list[Any], str, dict[str, int], list[tuple[str, str | None]]]] = {
    # name -> (script, path, frames by kind, the timeline's frames (kind, event name))
    "bedrock": ([BEDROCK_HEADERS, *bedrock_reply("abcdef", deltas=3)], "/model/m/invoke-with-response-stream",
                {"end": 1, "preamble": 1, "semantic": 6},
                [("preamble", "message_start"), ("semantic", "content_block_start"),
                 *[("semantic", "content_block_delta")] * 3, ("semantic", "content_block_stop"),
                 ("semantic", "message_delta"), ("end", "message_stop")]),
    "bedrock exception": ([BEDROCK_HEADERS, bedrock_reply("x")[0], s.Raw(bedrock_exception("internalServerException", "oops"))],
                          "/model/m/invoke-with-response-stream", {"error": 1, "preamble": 1},
                          [("preamble", "message_start"), ("error", "internalServerException")]),
    "gemini": ([s.Headers(), *gemini_reply("hello", deltas=2)], "/v1beta/models/g:streamGenerateContent?alt=sse",
               {"semantic": 2}, [("semantic", None)] * 2),
    "gzip": ([*gzip_steps()[:-1], s.Close()], "/v1/messages", {"preamble": 1, "semantic": 3},
             [("preamble", "message_start"), ("semantic", "content_block_start"), *[("semantic", "content_block_delta")] * 2]),
    "anthropic with pings": ([s.Headers(), REPLY[0], *THINK, *REPLY[1:]], "/v1/messages",
                             {"end": 1, "heartbeat": 3, "preamble": 1, "semantic": 6},
                             [("preamble", "message_start"), *[("heartbeat", "ping")] * 3, ("semantic", "content_block_start"),
                              *[("semantic", "content_block_delta")] * 3, ("semantic", "content_block_stop"),
                              ("semantic", "message_delta"), ("end", "message_stop")]),
}


@pytest.mark.parametrize("name", sorted(FRAMED))
def test_analyze_frames_every_capture_with_the_profiles_framer(name: str, provider: Any, tmp_path: pathlib.Path) -> None:
    # A Bedrock capture is an AWS event stream, a Gemini one bare data frames, a gzip one
    # compressed: each is framed as the engine framed it, so its timeline shows its frames.
    script, path, frames, timeline = FRAMED[name]
    ended: list[AttemptEnded] = []

    def keep(event: Event) -> None:
        if isinstance(event, AttemptEnded):
            ended.append(event)

    policy = FAST.replace(capture_dir=str(tmp_path), max_attempts=1)
    url = provider.add("framed-" + name.replace(" ", "-"), [script])
    run(("httpx2", None), policy, url + path, hooks=[keep])
    assert len(ended) == 1 and ended[0].capture is not None
    chunks = parse_capture(list(capture_lines(ended[0].capture)))
    out = analyze(chunks, provider=ended[0].report.provider, policy=policy)
    assert out["frames"] == frames
    assert [(item["what"], item["event"]) for item in out["timeline"] if "event" in item] == timeline
    assert out["verdict"] == verdict_of(ended[0].record, None)
    if out["verdict"] == "completed" and "end" in frames:  # the reply's end frame, not the end of the body
        assert out["at"] == next(item["t"] for item in out["timeline"] if item["what"] == "end")
