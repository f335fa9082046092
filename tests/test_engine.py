"""The engine driven with bytes and times only -- no sockets, no sleeping -- the way h11's tests
drive ``Connection``: table-driven over the policy table (docs/configuration.md), plus the rules
the drivers rely on (one ending per attempt, counts applied before every input, shadow mode)."""

from __future__ import annotations

import inspect
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from otel_liveness import Policy
from otel_liveness.core import errors as E
from otel_liveness.core.attempt.clocks import AttemptClock
from otel_liveness.core.commands import COMPLETE, READ, Command, Fail, Release, Reraise, Respond, Send, Sleep
from otel_liveness.core.events import AttemptEnded, Event, RequestEnded, SemanticNotice, Verdict
from otel_liveness.core.memory.caches import CadenceMemory, ExhaustedCache
from otel_liveness.core.outcome import AttemptOutcome, Completion, NoticeKind, StopReason
from otel_liveness.core.request.engine import Engine, IOFailure
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.core.request.state import INPUTS, TRANSITIONS, State
from otel_liveness.testing.scripts import PING, anthropic_error, sse_event

SSE = {"content-type": "text/event-stream"}
START = sse_event("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "m"}})
BLOCK = sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})


def delta(text: str) -> bytes:
    return sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": text}})


STOP_BLOCK = sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})
FINISH = sse_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
END = sse_event("message_stop", {"type": "message_stop"})
REPLY = [START, BLOCK, delta("Hel"), delta("lo"), STOP_BLOCK, FINISH, END]

# Raw bound 1 s, no first-byte phase unless a row asks for it, retries without real waiting.
POLICY = Policy(raw_idle_timeout=1.0, first_byte_timeout=None, semantic_notice_interval=0.5, backoff_initial=0.01,
                backoff_max=0.02, max_retry_after=5.0)


# -- the harness: a driver with a fake clock ---------------------------------------------------------

# Steps of one attempt, at times relative to the attempt's start:
#   ("headers", t, status, headers) / ("data", t, bytes) / ("eof", t) / ("reset", t) / ("connect_error", t)
#   ("silence",) -- nothing more arrives: the read waits and the engine's deadlines decide.
Step = tuple[Any, ...]


@dataclass
class Outcome:
    body: bytes = b""
    status: int | None = None
    replace: tuple[tuple[str, str], ...] = ()
    passthrough: bool = False
    error: BaseException | Fail | None = None
    sleeps: list[float] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    engine: Engine | None = None

    @property
    def report(self) -> dict[str, Any]:
        assert self.engine is not None
        return self.engine.published

    @property
    def outcomes(self) -> list[str | None]:
        return [a["outcome"] for a in self.report["attempts"]]


def drive(attempts: Sequence[Sequence[Step]], policy: Policy = POLICY, *, facts: RequestFacts | None = None,
          provider: str = "anthropic", exhausted: ExhaustedCache[Fail] | None = None,
          cadence: CadenceMemory | None = None, read_gap: float = 0.0, hooks: Sequence[Any] = (),
          body_replayable: Any = None) -> Outcome:
    """Play ``attempts`` (the last repeats) through an engine as a driver would, reading without
    pauses (``read_gap``: the caller pauses that long before each body read). Waking reads are
    modelled as the drivers' network stream does: at the engine's hints."""
    out = Outcome()
    engine = Engine(policy, facts or RequestFacts(streaming=True, body_size=1000), 0.0, provider=provider,
                    hooks=[out.events.append, *hooks], exhausted=exhausted, cadence=cadence, wall_now=lambda: 1e9,
                    keep_body=None if body_replayable is None else lambda: body_replayable)
    out.engine = engine
    now = 0.0
    command: Command | bytes = engine.start(now)
    index = 0
    steps: list[Step] = []
    start = 0.0
    responded = False
    while True:
        if isinstance(command, Send):
            steps = list(attempts[min(index, len(attempts) - 1)])
            index += 1
            base = now
            start = now
            command = READ
            continue
        if isinstance(command, Sleep):
            out.sleeps.append(command.seconds)
            now += command.seconds
            command = engine.slept(now)
            continue
        if isinstance(command, Respond):
            responded = True
            out.body += command.first
            out.replace = command.replace
            out.passthrough = command.passthrough
            if command.passthrough:
                return out
            command = command.then
            continue
        if isinstance(command, Release):
            out.body += command.data
            command = command.then
            continue
        if isinstance(command, bytes):
            out.body += command
            command = READ
            continue
        if isinstance(command, (Fail, Reraise)):
            out.error = command if isinstance(command, Fail) else command.exc
            return out
        if command is COMPLETE:
            return out
        assert command is READ, command
        if responded and read_gap:
            now += read_gap  # the caller kept the bytes waiting
            start = now
        step = steps.pop(0) if steps else ("silence",)
        kind = step[0]
        at = base + step[1] if len(step) > 1 else float("inf")
        # The read waits from `start`; it wakes at the engine's hints before the step's time.
        woke = False
        while True:
            wake = min(engine.wake_hint, engine.stop_hint, start + engine.raw_hint)
            if wake >= at or wake == float("inf"):
                break
            if engine.woke(wake, start):
                now = wake
                command = engine.timed_out(now, TimeoutError("read timeout"))
                woke = True
                break
            if min(engine.wake_hint, engine.stop_hint, start + engine.raw_hint) <= wake:
                raise AssertionError("a waking read would spin")
        if woke:
            continue
        assert at != float("inf"), "the stream waits forever: no deadline ends the read"
        now = max(now, at)
        if kind == "headers":
            out.status = step[2]
            command = engine.headers(now, step[2], step[3] if len(step) > 3 else SSE)
        elif kind == "data":
            # After the response, the drivers offer each read to the steady lane first (released
            # as is when it takes it); everything else is the engine's to judge.
            if responded and engine.lane.step(step[2], now):
                out.body += step[2]
                start = now
                command = READ
                continue
            command = engine.received(now, step[2])
        elif kind == "eof":
            command = engine.eof(now)
        elif kind == "reset":
            command = engine.io_error(now, IOFailure.READ, ConnectionResetError("reset"))
        elif kind == "connect_error":
            command = engine.io_error(now, IOFailure.CONNECT, ConnectionRefusedError("refused"))
        else:
            raise AssertionError(step)
        start = now


def stream(parts: Sequence[bytes], *, every: float = 0.1, first: float = 0.05, eof: bool = True) -> list[Step]:
    """Headers at 0, then each part ``every`` seconds apart, then EOF."""
    steps: list[Step] = [("headers", 0.0, 200, SSE)]
    t = first
    for part in parts:
        steps.append(("data", t, part))
        t += every
    if eof:
        steps.append(("eof", t))
    return steps


def ok() -> list[Step]:
    return stream(REPLY)


def status(code: int, headers: dict[str, str] | None = None) -> list[Step]:
    return [("headers", 0.0, code, {"content-type": "application/json", **(headers or {})})]


def error_type(out: Outcome) -> type[E.LivenessError]:
    assert isinstance(out.error, Fail), out.error
    return out.error.error


def field_of(out: Outcome, name: str) -> Any:
    assert isinstance(out.error, Fail), out.error
    return out.error.fields[name]


# -- the policy table -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "first", "reason"),
    [
        ("no byte before the raw bound (dead socket)", [("silence",)], "raw_silence"),
        ("headers, then silence", [("headers", 0.0, 200, SSE), ("silence",)], "raw_silence"),
        ("message_start, pings stop", [("headers", 0.0, 200, SSE), ("data", 0.1, START), ("silence",)], "raw_silence"),
        ("5xx", status(500), "server_error"),
        ("529", status(529), "overloaded"),
        ("408", status(408), "request_timeout"),
        ("409", status(409), "conflict"),
        ("x-should-retry: true on a 400", status(400, {"x-should-retry": "true"}), "should_retry_header"),
        ("connection refused", [("connect_error", 0.0)], "connect_error"),
        ("reset before content", [("headers", 0.0, 200, SSE), ("data", 0.1, START), ("reset", 0.2)], "read_error"),
        ("in-band overloaded_error", stream([START, anthropic_error("overloaded_error")], eof=False), "overloaded"),
        ("EOF before content", stream([START]), "eof_before_content"),
    ],
)
def test_failures_before_content_are_retried_invisibly(name: str, first: list[Step], reason: str) -> None:
    out = drive([first, ok()])
    assert out.error is None, name
    assert out.body == b"".join(REPLY)  # only the successful attempt's bytes, exactly once
    assert out.outcomes[1] == "completed" and out.report["stop_reason"] == "completed"
    assert out.report["attempts"][0]["retry_reason"] == reason
    assert len(out.sleeps) == 1


def test_rate_limit_is_the_patient_tier_and_honours_retry_after_ms() -> None:
    limited = status(429, {"retry-after-ms": "1500"})
    out = drive([limited, limited, limited, limited, ok()])  # more 429s than the transient budget of 3
    assert out.error is None and out.sleeps == [1.5] * 4
    assert [a["delay_source"] for a in out.report["attempts"][:4]] == ["retry_after_ms"] * 4
    assert out.outcomes[:4] == ["rate_limited"] * 4


@pytest.mark.parametrize(("code", "headers"), [(400, {}), (401, {}), (404, {}), (500, {"x-should-retry": "false"})])
def test_rejected_requests_are_not_retried_and_reach_the_caller_as_they_came(code: int, headers: dict[str, str]) -> None:
    out = drive([status(code, headers), ok()])
    assert out.passthrough and out.status == code and out.replace == () and out.sleeps == []
    assert out.report["stop_reason"] == "rejected" and out.outcomes == ["rejected"]


def test_an_exhausted_status_is_the_final_response_marked_for_the_sdk() -> None:
    out = drive([status(529)])
    assert out.passthrough and out.status == 529 and out.replace == (("x-should-retry", "false"),)
    assert out.report["stop_reason"] == "exhausted" and len(out.report["attempts"]) == 3


def test_exhausted_stream_failures_are_a_typed_provider_error_never_content() -> None:
    out = drive([[("headers", 0.0, 200, SSE), ("silence",)]])
    assert error_type(out) is E.ProviderError and out.body == b""
    assert field_of(out, "attempts") == 3 and field_of(out, "last_cause") == "raw_silence"
    assert out.report["stop_reason"] == "exhausted"


def test_rate_limit_exhaustion_is_rate_limited() -> None:
    # The last attempt's in-band error comes to the caller as the provider sent it (the SDK above
    # raises its own RateLimitError from it); the report says why the request stopped.
    inband = stream([START, anthropic_error("rate_limit_error")])
    out = drive([inband], POLICY.replace(max_rate_limit_attempts=2))
    assert out.error is None and out.body == START + anthropic_error("rate_limit_error")
    assert out.report["stop_reason"] == "rate_limited" and out.report["cause"] == "error_event:rate_limit_error"
    assert out.outcomes == ["rate_limited", "rate_limited"] and len(out.sleeps) == 1


@pytest.mark.parametrize("after", [[], [PING], [b"data: trailing bytes\n\n"]])
def test_an_in_band_error_not_retried_reaches_the_caller_as_it_came(after: list[bytes]) -> None:
    # Held bytes (the preamble, a heartbeat), the error read, and whatever follows it: byte for
    # byte, in order, one attempt; nothing raised by the transport.
    parts = [START, PING, anthropic_error("invalid_request_error"), *after]
    out = drive([stream(parts), ok()])
    assert out.error is None and out.body == b"".join(parts)
    assert out.report["stop_reason"] == "rejected" and out.outcomes == ["rejected"] and out.sleeps == []
    assert out.report["cause"] == "error_event:invalid_request_error"
    # The same error in the read that carries the preamble: one read, released whole.
    one = drive([stream([START + anthropic_error("invalid_request_error")])])
    assert one.error is None and one.body == START + anthropic_error("invalid_request_error")


def test_heartbeats_keep_a_thinking_model_alive_with_notices_and_never_fail() -> None:
    pings = [PING] * 60  # 6 s of pings every 0.1 s: six times the raw bound, twelve notice intervals
    out = drive([stream([START, *pings, *REPLY[1:]])])
    assert out.error is None and out.outcomes == ["completed"]
    notices = [e for e in out.events if isinstance(e, SemanticNotice)]
    assert len(notices) >= 10 and all(n.kind is NoticeKind.SEMANTIC for n in notices)
    assert out.report["attempts"][0]["heartbeats"] == 60


def test_content_then_silence_is_a_truncation_with_the_exact_prefix() -> None:
    out = drive([[*stream(REPLY[:4], eof=False), ("silence",)], ok()])
    assert error_type(out) is E.StreamTruncated and out.sleeps == []  # never retried
    assert field_of(out, "prefix") == out.body == b"".join(REPLY[:4])
    assert field_of(out, "released") == len(out.body) and field_of(out, "cause") == "raw_silence"
    assert field_of(out, "partial")["content"][0]["text"] == "Hello"
    assert out.report["stop_reason"] == "truncated" and out.outcomes == ["truncated"]


def relayed(out: Outcome, error: str) -> None:
    """``out`` ended as the provider ended it: its error frame after content passed on as sent,
    no typed error of ours, the report saying how it ended."""
    assert out.error is None
    assert (out.report["stop_reason"], out.report["cause"]) == ("truncated", f"error_event:{error}")
    attempt = out.report["attempts"][-1]
    assert (attempt["outcome"], attempt["error_type"], attempt["committed"]) == ("provider_error", error, True)
    assert len(out.report["attempts"]) == 1


def test_in_band_error_after_content_is_the_providers_answer_passed_on_as_sent() -> None:
    chunk = delta("lo") + anthropic_error("overloaded_error")  # content and the error in one read
    out = drive([[*stream(REPLY[:3], eof=False), ("data", 0.5, chunk), ("eof", 0.6)]])
    relayed(out, "overloaded_error")
    assert out.body == b"".join(REPLY[:3]) + chunk


def test_an_error_frame_split_across_reads_reaches_the_caller_whole() -> None:
    error = anthropic_error("overloaded_error")
    out = drive([[*stream(REPLY[:3], eof=False), ("data", 0.5, delta("lo") + error[:10]), ("data", 0.6, error[10:]),
                  ("eof", 0.7)]])
    relayed(out, "overloaded_error")
    assert out.body == b"".join(REPLY[:3]) + delta("lo") + error


def test_after_a_relayed_error_the_rest_of_the_body_passes_as_it_comes() -> None:
    error = anthropic_error("overloaded_error")
    out = drive([[*stream(REPLY[:3], eof=False), ("data", 0.5, error), ("data", 0.6, b": after\n\n"),
                  ("eof", 0.7)]])
    relayed(out, "overloaded_error")
    assert out.body == b"".join(REPLY[:3]) + error + b": after\n\n"


def test_content_and_error_in_the_first_read_reach_the_caller_as_sent() -> None:
    chunk = START + BLOCK + delta("a") + anthropic_error("api_error")
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, chunk), ("eof", 0.2)]])
    relayed(out, "api_error")
    assert out.body == chunk


def test_wall_budget_stops_and_reports_the_budget() -> None:
    slow = stream([START, BLOCK, *[delta("x")] * 50], every=0.3)
    out = drive([slow], POLICY.replace(wall_timeout=2.0))
    assert error_type(out) is E.WallTimeout and field_of(out, "budget") == 2.0 and field_of(out, "committed")
    assert out.report["stop_reason"] == "wall_budget"


def test_wall_budget_during_a_backoff_is_not_slept_through() -> None:
    late_429 = [("headers", 0.5, 429, {"content-type": "application/json", "retry-after": "30"})]
    out = drive([late_429], POLICY.replace(wall_timeout=2.0, max_retry_after=60.0))
    assert error_type(out) is E.WallTimeout and out.sleeps == [1.5]  # what is left of the budget, not 30 s


def test_caller_cancellation_ends_the_attempt_once() -> None:
    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
    events: list[Event] = []
    engine.hooks = (events.append,)
    engine.start(0.0)
    engine.headers(0.1, 200, SSE)
    engine.abandoned(0.2, KeyboardInterrupt())
    engine.abandoned(0.3, KeyboardInterrupt())
    engine.closed(0.4)
    assert [type(e).__name__ for e in events].count("AttemptEnded") == 1
    assert [type(e).__name__ for e in events].count("RequestEnded") == 1
    assert engine.published["stop_reason"] == "cancelled"


def test_a_read_failing_after_the_caller_closed_is_not_the_providers_failure() -> None:
    # Another thread closes the body under a blocked read: the read then fails. The request was
    # already over (cancelled); the failure passes through as it came -- no truncation, no retry,
    # and the report keeps its verdict.
    for late in ("io_error", "timed_out"):
        engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
        engine.start(0.0)
        engine.headers(0.1, 200, SSE)
        assert isinstance(engine.received(0.2, START + BLOCK + delta("a")), Respond)
        engine.closed(0.3)
        exc = ConnectionResetError("closed under the read")
        command = (engine.io_error(0.31, IOFailure.READ, exc) if late == "io_error"
                   else engine.timed_out(0.31, TimeoutError("late")))
        assert isinstance(command, Reraise) and command.exc is (exc if late == "io_error" else command.exc)
        assert engine.published["stop_reason"] == "cancelled" and engine.published["cause"] == "closed"
        assert [a["outcome"] for a in engine.published["attempts"]] == ["cancelled"]


def test_eof_with_bytes_still_held_releases_them_when_the_reply_is_whole() -> None:
    # Nothing committed yet (message_start and pings held), then the body ends with an end frame
    # whose closing blank line is missing: the reply is whole, so the held bytes go out with it.
    out = drive([stream([START, PING, END[:-1]])])
    assert out.error is None and out.body == START + PING + END[:-1]
    assert out.outcomes == ["completed"] and out.report["attempts"][0]["completion"] == "end_frame"
    # ...but held bytes that end without an end frame are discarded and the attempt retried.
    out = drive([stream([START, PING]), ok()])
    assert out.error is None and out.body == b"".join(REPLY) and out.outcomes[0] == "provider_error"
    assert out.report["attempts"][0]["retry_reason"] == "eof_before_content"


def test_eof_with_held_bytes_of_a_wire_format_that_ends_at_eof_completes() -> None:
    # A generic SSE stream has no end frame: its clean end is its end, held bytes and all.
    body = [b": keep-alive\n\n", b"data: {\"x\": 1}\n\n"]
    out = drive([stream(body)], provider="sse")
    assert out.error is None and out.body == b"".join(body) and out.report["attempts"][0]["completion"] == "eof"


def test_an_error_frame_in_the_same_read_as_the_first_content_after_held_bytes() -> None:
    # message_start and a ping held, then one read with content and an in-band error: the held
    # bytes and the whole read are released -- the provider's answer, as sent.
    chunk = BLOCK + delta("a") + anthropic_error("overloaded_error") + delta("never")
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START), ("data", 0.2, PING), ("data", 0.3, chunk),
                  ("eof", 0.4)]])
    relayed(out, "overloaded_error")
    assert out.body == START + PING + chunk


def test_an_error_frame_before_any_content_in_one_read_is_retried_with_nothing_released() -> None:
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START + PING + anthropic_error("api_error") + BLOCK)], ok()])
    assert out.error is None and out.body == b"".join(REPLY)
    assert out.outcomes == ["provider_error", "completed"] and out.report["attempts"][0]["retry_reason"] == "server_error"


# -- no false kills ----------------------------------------------------------------------------------


def test_a_silent_prefill_four_times_the_raw_bound_completes_in_one_attempt() -> None:
    policy = POLICY.replace(first_byte_timeout="auto", first_byte_base=1.0, first_byte_per_mib=4.0, first_byte_max=20.0)
    facts = RequestFacts(streaming=True, body_size=1024 * 1024)  # bound 1 + 4 = 5 s
    prefill = [("headers", 0.0, 200, SSE), *[("data", 4.0 + i * 0.1, part) for i, part in enumerate(REPLY)],
               ("eof", 5.0)]
    out = drive([prefill], policy, facts=facts)
    assert out.error is None and out.outcomes == ["completed"]
    attempt = out.report["attempts"][0]
    assert attempt["first_byte_bound"] == 5.0 and attempt["prefill_notices"] >= 6
    assert all(e.kind is NoticeKind.PREFILL for e in out.events if isinstance(e, SemanticNotice))


def test_a_blackholed_request_is_retried_at_the_first_byte_bound() -> None:
    policy = POLICY.replace(first_byte_timeout=3.0)
    out = drive([[("silence",)], ok()], policy)
    assert out.error is None and len(out.report["attempts"]) == 2
    first = out.report["attempts"][0]
    assert first["outcome"] == "raw_silence" and first["error_type"] == "first_byte_timeout"
    assert first["retry_reason"] == "first_byte_timeout" and first["duration"] == pytest.approx(3.0)


@pytest.mark.parametrize("gap", [2.0, 3.0])  # two and three times the raw bound
def test_a_paused_reader_is_not_wire_silence(gap: float) -> None:
    out = drive([stream(REPLY, every=0.0)], read_gap=gap)
    assert out.error is None and out.body == b"".join(REPLY) and out.outcomes == ["completed"]


def test_a_paused_reader_still_finds_a_dead_socket_after_its_pause() -> None:
    out = drive([[*stream(REPLY[:4], every=0.0, eof=False), ("silence",)]], read_gap=3.0)
    assert error_type(out) is E.StreamTruncated and field_of(out, "cause") == "raw_silence"
    assert out.report["attempts"][0]["raw_idle"] >= 1.0


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_stream_is_judged_on_its_decoded_bytes(coding: str) -> None:
    compressor = zlib.compressobj(wbits=31 if coding == "gzip" else 15)
    pieces = [compressor.compress(part) + compressor.flush(zlib.Z_SYNC_FLUSH) for part in [START, PING, *REPLY[1:]]]
    pieces[-1] += compressor.flush()
    out = drive([[("headers", 0.0, 200, {**SSE, "content-encoding": coding}),
                  *[("data", 0.05 + i * 0.1, p) for i, p in enumerate(pieces)], ("eof", 2.0)]])
    assert out.error is None and out.body == b"".join(pieces)  # released as they came, for the client to decode
    attempt = out.report["attempts"][0]
    assert attempt["heartbeats"] == 1 and attempt["completion"] == "end_frame"


def test_a_stall_after_content_under_gzip_carries_the_decoded_prefix() -> None:
    compressor = zlib.compressobj(wbits=31)
    pieces = [compressor.compress(part) + compressor.flush(zlib.Z_SYNC_FLUSH) for part in REPLY[:4]]
    out = drive([[("headers", 0.0, 200, {**SSE, "content-encoding": "gzip"}),
                  *[("data", 0.05 + i * 0.1, p) for i, p in enumerate(pieces)], ("silence",)], ok()])
    assert error_type(out) is E.StreamTruncated and out.sleeps == []  # content was released: never retried
    assert field_of(out, "prefix") == b"".join(REPLY[:4]) and field_of(out, "released") == len(b"".join(pieces))
    assert zlib.decompressobj(31).decompress(out.body) == b"".join(REPLY[:4])  # what the client decodes


@pytest.mark.parametrize("code", [300, 301, 302, 307, 308, 399])
def test_a_redirect_passes_through_untouched(code: int) -> None:
    out = drive([[("headers", 0.0, code, {"location": "https://elsewhere/v1/messages"})]])
    assert out.passthrough and out.status == code and out.sleeps == []
    assert out.report["stop_reason"] == "redirected" and out.outcomes == ["redirected"]
    # ...also after a failed attempt: the request ends redirected, with no cause left over.
    out = drive([status(529), [("headers", 0.0, code, {"location": "https://elsewhere/v1/messages"})]])
    assert out.report["stop_reason"] == "redirected" and out.report["cause"] is None


def test_a_json_body_on_a_streaming_request_is_released_not_retried() -> None:
    body = json.dumps({"id": "msg_1", "content": [{"type": "text", "text": "hi"}]}).encode()
    out = drive([[("headers", 0.0, 200, {"content-type": "application/json"}), ("data", 0.1, body), ("eof", 0.2)]])
    assert out.error is None and out.body == body and out.outcomes == ["completed"]
    assert out.report["attempts"][0]["completion"] == "eof"


@pytest.mark.parametrize(
    ("parts", "completion"),
    [
        (REPLY, "end_frame"),
        ([*REPLY[:-1], END[:-1]], "end_frame"),  # message_stop's lines whole, the closing blank line missing
        (REPLY[:-1], "finish_then_eof"),  # message_delta's stop reason, then a clean end
    ],
)
def test_whole_replies_complete(parts: list[bytes], completion: str) -> None:
    out = drive([stream(parts)])
    assert out.error is None and out.report["attempts"][0]["completion"] == completion


def test_a_stream_cut_before_its_finish_is_a_truncation() -> None:
    out = drive([stream([*REPLY[:4], END[:12]])])
    assert error_type(out) is E.StreamTruncated and field_of(out, "cause") == "eof"


@pytest.mark.parametrize(
    ("parts", "completion"),
    [
        ([b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n', b"data: [DONE]\n\n"], "end_frame"),
        ([b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n',
          b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'], "finish_then_eof"),
    ],
)
def test_openai_chat_completions(parts: list[bytes], completion: str) -> None:
    out = drive([stream(parts)], provider="openai-chat")
    assert out.error is None and out.report["attempts"][0]["completion"] == completion


def test_silence_after_the_end_frame_completes() -> None:
    out = drive([[*stream(REPLY, eof=False), ("silence",)]])
    assert out.error is None and out.outcomes == ["completed"]


# -- learned cadence ---------------------------------------------------------------------------------

ADAPTIVE = POLICY.replace(raw_idle_timeout=60.0, raw_idle_adaptive=True, raw_idle_floor=0.05)


def test_learned_cadence_finds_a_dead_socket_within_three_cadences() -> None:
    pings = [("data", 0.1 + 0.1 * i, PING) for i in range(10)]
    steps = [("headers", 0.0, 200, SSE), ("data", 0.05, START), *pings, ("data", 1.1, BLOCK), ("data", 1.15, delta("x")),
             ("silence",)]
    out = drive([steps], ADAPTIVE)
    attempt = out.report["attempts"][0]
    assert error_type(out) is E.StreamTruncated and field_of(out, "cause") == "raw_silence"
    assert attempt["raw_bound"] == pytest.approx(0.3) and attempt["duration"] == pytest.approx(1.45)


def test_a_single_late_ping_kills_nothing() -> None:
    times = [0.1 * i for i in range(1, 11)] + [1.0 + 0.25] + [1.25 + 0.1 * i for i in range(1, 5)]
    steps = [("headers", 0.0, 200, SSE), ("data", 0.05, START), *[("data", t, PING) for t in times]]
    steps += [("data", times[-1] + 0.05 + 0.01 * i, part) for i, part in enumerate(REPLY[1:])] + [("eof", 3.0)]
    out = drive([steps], ADAPTIVE)
    assert out.error is None and out.report["attempts"][0]["max_heartbeat_gap"] == pytest.approx(0.25)


def test_recent_attempts_to_the_host_only_widen_the_learned_bound() -> None:
    memory = CadenceMemory()
    memory.remember("api.example", 0.5)
    facts = RequestFacts(streaming=True, host="api.example")
    pings = [("data", 0.1 + 0.1 * i, PING) for i in range(5)]
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.05, START), *pings, ("silence",)], ok()], ADAPTIVE,
                facts=facts, cadence=memory)
    assert out.report["attempts"][0]["raw_bound"] == pytest.approx(1.5)  # 3 x 0.5 remembered, not 3 x 0.1
    assert memory.learned("api.example") == 0.5


def test_shadow_mode_reports_what_the_learned_bound_would_have_done() -> None:
    pings = [("data", 0.1 + 0.1 * i, PING) for i in range(5)]
    steps = [("headers", 0.0, 200, SSE), ("data", 0.05, START), *pings, ("data", 2.0, BLOCK),
             *[("data", 2.1 + 0.1 * i, part) for i, part in enumerate(REPLY[2:])], ("eof", 3.0)]
    out = drive([steps], ADAPTIVE.replace(shadow=True))
    verdicts = [e for e in out.events if isinstance(e, Verdict)]
    assert out.error is None and out.body == b"".join([START, PING * 5, *REPLY[1:]])  # nothing held or cut
    assert [(v.kind, v.enforced) for v in verdicts] == [(AttemptOutcome.RAW_SILENCE, False)]
    assert verdicts[0].at == pytest.approx(0.5 + 0.3)


# -- the engine's own rules ------------------------------------------------------------------------


def test_every_input_applies_the_lane_counts_first() -> None:
    public = [name for name, member in inspect.getmembers(Engine, inspect.isfunction) if not name.startswith("_")]
    inputs = [name for name in public if name not in ("raw_bound", "since")]
    assert inputs and all(getattr(getattr(Engine, name), "__liveness_input__", False) for name in inputs), inputs
    assert all(getattr(Engine, name).__name__ == name and getattr(Engine, name).__doc__ for name in inputs)


def test_each_attempt_and_the_request_end_exactly_once_whatever_happens() -> None:
    for attempts in ([status(529)], [[*stream(REPLY[:4], eof=False), ("silence",)]], [ok()], [[("silence",)]]):
        out = drive(attempts)
        ended = [e for e in out.events if isinstance(e, AttemptEnded)]
        assert len(ended) == len(out.report["attempts"]) == len({e.record.index for e in ended})
        assert sum(isinstance(e, RequestEnded) for e in out.events) == 1


def test_an_sdk_retry_of_an_exhausted_request_gets_the_same_error_without_an_attempt() -> None:
    cache: ExhaustedCache[Fail] = ExhaustedCache()
    facts = RequestFacts(streaming=True, key="k", sdk_retry=False)
    first = drive([[("silence",)]], facts=facts, exhausted=cache)
    again = Engine(POLICY, RequestFacts(streaming=True, key="k", sdk_retry=True), 1.0, provider="anthropic",
                   exhausted=cache)
    assert again.start(1.0) == first.error and again.report.attempts == []


def test_a_frame_over_the_bound_is_a_typed_malformed_error() -> None:
    out = drive([stream([b"data: " + b"a" * 5000])], POLICY.replace(max_frame_bytes=1024))
    assert error_type(out) is E.FrameTooLarge and out.report["stop_reason"] == "malformed"


def test_shadow_mode_holds_nothing_and_enforces_nothing() -> None:
    out = drive([[*stream(REPLY[:4], eof=False), ("data", 5.0, b"".join(REPLY[4:])), ("eof", 5.1)]],
                POLICY.replace(shadow=True))
    assert out.error is None and out.body == b"".join(REPLY)
    verdicts = [(v.kind, v.enforced, v.committed) for v in out.events if isinstance(v, Verdict)]
    assert verdicts == [(AttemptOutcome.RAW_SILENCE, False, True)]
    assert out.report["stop_reason"] == StopReason.TRUNCATED and out.report["attempts"][0]["completion"] is None


def test_the_published_report_is_refreshed_in_place() -> None:
    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
    published = engine.published
    engine.start(0.0)
    engine.headers(0.1, 200, SSE)
    assert isinstance(engine.received(0.2, b"".join(REPLY)), Respond)
    assert published["stop_reason"] is None
    assert engine.eof(0.3) is COMPLETE and published["stop_reason"] == "completed"
    assert published["attempts"][0]["completion"] == Completion.END_FRAME


def test_the_report_dict_is_exactly_asdict_plus_retries_and_shares_no_mutable_state() -> None:
    from dataclasses import asdict

    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
    engine.start(0.0)
    engine.headers(0.1, 500, {})  # a retried attempt, then a completed one with usage
    engine.slept(1.0)
    engine.headers(1.1, 200, SSE)
    engine.received(1.2, b"".join(REPLY))
    engine.eof(1.3)
    report = engine.report
    assert len(report.attempts) == 2
    report.attempts[1].usage = {"input_tokens": 3, "output_tokens": 5}
    out = report.to_dict()
    assert out == {**asdict(report), "retries": 1}
    assert list(out) == [*asdict(report), "retries"] and list(out["attempts"][1]) == list(asdict(report.attempts[1]))
    out["attempts"][1]["usage"]["output_tokens"] = -1  # a copy: the report is not changed through it
    assert report.attempts[1].usage["output_tokens"] == 5


# -- what the report and the errors say, exactly (each of these was a surviving mutant) --------------


def started(policy: Policy = POLICY, facts: RequestFacts | None = None, hooks: Sequence[Any] = ()) -> tuple[Engine, Command]:
    engine = Engine(policy, facts or RequestFacts(streaming=True, body_size=10), 0.0, provider="anthropic",
                    hooks=hooks, wall_now=lambda: 1e9)
    return engine, engine.start(0.0)


def test_request_id_from_either_header_bounded() -> None:
    out = drive([[("headers", 0.0, 200, {**SSE, "x-request-id": "x" * 300}), *ok()[1:]]])
    assert out.report["attempts"][0]["request_id"] == "x" * 128
    out = drive([[("headers", 0.0, 200, {**SSE, "request-id": "req_1", "x-request-id": "other"}), *ok()[1:]]])
    assert out.report["attempts"][0]["request_id"] == "req_1"


def test_the_socket_read_timeout_is_ours_unless_the_callers_is_shorter() -> None:
    # Ours (the largest bound, 1 s) when the caller's is longer or equal: its expiry is wire silence.
    for caller in (None, 1.0, 30.0):
        engine, send = started(facts=RequestFacts(streaming=True, body_size=10, read_timeout=caller))
        assert isinstance(send, Send) and send.read_timeout == 1.0
        engine.headers(0.1, 200, SSE)
        command = engine.timed_out(1.1, TimeoutError())
        assert isinstance(command, Sleep) and engine.report.attempts[0].retry_reason == "raw_silence"
    # The caller's own, shorter timeout: its expiry is the caller's verdict on the wait -- not ours,
    # not retried (a retry would multiply the wait the caller bounded), raised as it came.
    engine, send = started(facts=RequestFacts(streaming=True, body_size=10, read_timeout=0.4))
    assert isinstance(send, Send) and send.read_timeout == 0.4
    engine.headers(0.1, 200, SSE)
    timeout = TimeoutError()
    command = engine.timed_out(0.5, timeout)
    assert isinstance(command, Reraise) and command.exc is timeout and engine.ended
    assert engine.report.stop_reason == "cancelled" and engine.report.cause == "caller_timeout"
    assert engine.report.attempts[0].outcome == "cancelled" and engine.report.attempts[0].error_type == "caller_timeout"
    # After content, the caller's timeout is a truncation (the driver raises it of the timeout's class).
    engine, _ = started(facts=RequestFacts(streaming=True, body_size=10, read_timeout=0.4))
    engine.headers(0.1, 200, SSE)
    responded = engine.received(0.2, b"".join(REPLY[:3]))
    assert isinstance(responded, Respond) and responded.first == b"".join(REPLY[:3])
    command = engine.timed_out(0.7, timeout)
    assert isinstance(command, Fail) and command.error is E.StreamTruncated and command.cause is timeout
    # Shadow mode sets no timeout at all: nothing may end a read early.
    _, send = started(POLICY.replace(shadow=True))
    assert isinstance(send, Send) and send.read_timeout is None


def test_a_timed_out_read_at_the_semantic_deadline_is_a_semantic_timeout() -> None:
    # The read's own socket timeout (no waking stream) ended at the semantic deadline: the verdict
    # is the clock's that ran out, not wire silence.
    engine, _ = started(POLICY.replace(raw_idle_timeout=5.0, semantic_timeout=2.0, semantic_notice_interval=1.0,
                                       max_attempts=1))
    engine.headers(0.0, 200, SSE)
    assert engine.received(0.1, START) is READ
    assert engine.received(1.5, PING) is READ
    command = engine.timed_out(2.0, TimeoutError())
    assert isinstance(command, Fail) and command.fields["last_cause"] == "semantic_timeout"


def test_shadow_mode_answers_at_the_headers_and_reports_what_it_would_have_done() -> None:
    engine, _ = started(POLICY.replace(shadow=True))
    assert isinstance(engine.headers(0.1, 200, SSE), Respond)  # nothing held: the response at once
    # A silence longer than the raw bound, then the end of the body: observed, not enforced.
    events: list[Event] = []
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START + BLOCK + delta("a")), ("eof", 3.0)]],
                POLICY.replace(shadow=True), hooks=[events.append])
    verdicts = [(v.kind, v.enforced, v.committed) for v in events if isinstance(v, Verdict)]
    assert out.error is None and verdicts == [(AttemptOutcome.RAW_SILENCE, False, True)]


@pytest.mark.parametrize(("status_code", "stop"), [(400, "rejected"), (529, "exhausted")])
def test_shadow_mode_reports_the_stop_it_would_have_had(status_code: int, stop: str) -> None:
    out = drive([status(status_code)], POLICY.replace(shadow=True))
    assert out.passthrough and out.report["stop_reason"] == stop and len(out.report["attempts"]) == 1


def test_shadow_mode_error_frame_before_content_is_not_committed() -> None:
    out = drive([stream([START, anthropic_error("overloaded_error")])], POLICY.replace(shadow=True))
    attempt = out.report["attempts"][0]
    assert out.error is None and out.body == START + anthropic_error("overloaded_error")  # passed through as it came
    assert attempt["committed"] is False and attempt["outcome"] == "provider_error"


def test_a_json_body_that_breaks_mid_body_is_reraised_as_it_came() -> None:
    exc = ConnectionResetError("reset")
    engine, _ = started()
    # Held until its first key tells a reply from an error object (issue #23); a reply's first key
    # releases the response with the bytes so far, and what follows is released as it comes.
    assert engine.headers(0.1, 200, {"content-type": "application/json"}) == READ
    assert engine.received(0.2, b'{"id": ') == Respond(b'{"id": ')
    assert engine.io_error(0.3, IOFailure.READ, exc) == Reraise(exc)
    attempt = engine.published["attempts"][0]
    assert attempt["committed"] is True and attempt["outcome"] == "truncated"
    assert engine.published["stop_reason"] == "truncated" and engine.published["cause"] == "read_error"


def test_a_non_streaming_request_is_retried_on_a_connect_error() -> None:
    body = b'{"id": "msg_1"}'
    json_ok = [("headers", 0.0, 200, {"content-type": "application/json"}), ("data", 0.1, body), ("eof", 0.2)]
    out = drive([[("connect_error", 0.0)], json_ok], facts=RequestFacts(streaming=False, body_size=10))
    assert out.error is None and out.body == body and out.outcomes == ["connection_error", "completed"]


def test_closing_ends_the_attempt_once_and_only_while_open() -> None:
    events: list[Event] = []
    engine, _ = started(hooks=[events.append])
    engine.headers(0.1, 200, SSE)
    engine.received(0.2, START + BLOCK + delta("a"))
    engine.closed(0.3)
    engine.closed(0.4)
    assert engine.published["stop_reason"] == "cancelled" and engine.published["cause"] == "closed"
    assert [type(e).__name__ for e in events].count("AttemptEnded") == 1
    # Closed after the end frame: the reply was whole.
    engine, _ = started()
    engine.headers(0.1, 200, SSE)
    engine.received(0.2, b"".join(REPLY))
    engine.closed(0.3)
    assert engine.published["stop_reason"] == "completed"
    # Closed before anything started: nothing to end.
    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
    engine.closed(0.1)
    assert engine.published["stop_reason"] is None


def test_frames_held_before_content_are_bounded_exactly() -> None:
    policy = POLICY.replace(max_frame_bytes=4 * len(PING))
    out = drive([stream([START[:0] + PING * 4, *REPLY[1:]])], policy)  # exactly the bound: held, then released
    assert out.error is None
    out = drive([stream([PING * 4 + b":x\n\n"])], policy)  # one byte... and more over it
    assert error_type(out) is E.MalformedStream and out.report["stop_reason"] == "malformed"
    out = drive([stream([PING * 4, b"\n"])], policy)  # one byte over
    assert error_type(out) is E.MalformedStream


def test_error_messages_name_attempts_and_cause() -> None:
    out = drive([[("headers", 0.0, 200, SSE), ("silence",)]])
    assert out.error.args == ("provider failed after 3 attempts; last cause: raw_silence",)  # type: ignore[union-attr]
    out = drive([[("headers", 0.0, 200, SSE), ("silence",)]], POLICY.replace(max_attempts=1))
    assert out.error.args == ("provider failed after 1 attempt; last cause: raw_silence",)  # type: ignore[union-attr]
    out = drive([[("headers", 0.0, 200, SSE), ("silence",)]], POLICY.replace(max_attempts=2))
    assert out.error.args == ("provider failed after 2 attempts; last cause: raw_silence",)  # type: ignore[union-attr]


def test_wall_budget_messages_and_the_attempt_it_ended() -> None:
    slow = stream([START, BLOCK, *[delta("x")] * 50], every=0.3)
    out = drive([slow], POLICY.replace(wall_timeout=2.0))
    assert out.error.args == ("wall-clock budget of 2s expired after content was released",)  # type: ignore[union-attr]
    assert out.outcomes == ["wall_budget"] and field_of(out, "prefix") == out.body
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START), ("silence",)]],
                POLICY.replace(wall_timeout=0.5, raw_idle_timeout=5.0))
    assert out.error.args == ("wall-clock budget of 0.5s expired before any content",)  # type: ignore[union-attr]
    assert out.outcomes == ["wall_budget"] and field_of(out, "committed") is False


def test_the_report_phase_cause_and_counts() -> None:
    out = drive([status(529), ok()])
    assert out.report["cause"] is None and out.report["attempts"][1]["phase"] == "done"  # completed: no cause left
    assert out.report["attempts"][0]["phase"] != "done"
    out = drive([[*stream(REPLY[:4], eof=False), ("silence",)]])
    assert out.report["cause"] == "raw_silence" and out.report["attempts"][0]["phase"] == "streaming"


def test_a_capture_ends_with_a_marker_only_when_the_attempt_ended_otherwise() -> None:
    policy = POLICY.replace(capture_dir="/nonexistent")  # the engine keeps it; the transport's recorder writes it
    captures = []

    def keep(event: Event) -> None:
        if isinstance(event, AttemptEnded):
            captures.append([item for _, item in event.capture or ()])

    drive([ok()], policy, hooks=[keep])  # ended by EOF: the last record is the EOF
    drive([[*stream(REPLY[:4], eof=False), ("silence",)]], policy, hooks=[keep])  # ended by a verdict
    drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START), ("reset", 0.2)], ok()], policy, hooks=[keep])
    assert captures[0][-1] is None and captures[0].count("end") == 0
    assert captures[1][-1] == "end" and captures[1][-2] == REPLY[3]
    assert captures[2][-1] == "read_error"  # the failed attempt's own marker, no "end" after it
    assert captures[3][-1] is None


def test_cadence_is_remembered_only_when_learning() -> None:
    pings = [("data", 0.1 + 0.1 * i, PING) for i in range(5)]
    steps = [("headers", 0.0, 200, SSE), ("data", 0.05, START), *pings,
             *[("data", 0.7 + 0.01 * i, part) for i, part in enumerate(REPLY[1:])], ("eof", 1.0)]
    facts = RequestFacts(streaming=True, host="api.example")
    memory = CadenceMemory()
    drive([steps], POLICY, facts=facts, cadence=memory)
    assert memory.learned("api.example") is None
    drive([steps], ADAPTIVE, facts=facts, cadence=memory)
    assert memory.learned("api.example") == pytest.approx(0.1)


def test_a_raising_hook_is_counted_and_reported_and_changes_nothing() -> None:
    seen: list[tuple[Any, Exception]] = []

    def bad(event: Event) -> None:
        raise RuntimeError("hook bug")

    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic", hooks=[bad],
                    on_hook_error=lambda hook, exc: seen.append((hook, exc)))
    engine.start(0.0)
    engine.headers(0.1, 200, SSE)
    assert isinstance(engine.received(0.2, b"".join(REPLY)), Respond) and engine.eof(0.3) is COMPLETE
    # RequestStarted, AttemptStarted, AttemptEnded, RequestEnded
    assert engine.hook_errors == 4 == len(seen) and all(hook is bad for hook, _ in seen)


def test_times_in_the_report_are_relative_to_the_request_and_the_attempt() -> None:
    policy = POLICY.replace(capture_dir="/nonexistent")
    captures: list[Any] = []
    engine = Engine(policy, RequestFacts(streaming=True, body_size=10), 100.0, provider="anthropic",
                    hooks=[lambda e: captures.append(e.capture) if isinstance(e, AttemptEnded) else None])
    assert isinstance(engine.start(100.0), Send)
    assert isinstance(engine.headers(100.5, 529, {}), Sleep)
    assert isinstance(engine.slept(101.0), Send)
    engine.headers(101.25, 200, SSE)
    engine.received(101.5, b"".join(REPLY))
    assert engine.eof(102.0) is COMPLETE
    first, second = engine.published["attempts"]
    assert (first["started"], second["started"]) == (0.0, 1.0) and engine.published["duration"] == 2.0
    assert (first["duration"], second["duration"]) == (0.5, 1.0) and second["raw_idle"] == 0.5
    assert [t for t, _ in captures[1]] == [0.25, 0.5, 1.0]  # since that attempt's request was sent
    assert second["semantic_idle"] == 0.0 and second["phase"] == "done"


def test_notices_all_come_when_one_read_ends_several_intervals() -> None:
    events: list[Event] = []
    engine, _ = started(hooks=[events.append])
    engine.headers(0.0, 200, SSE)
    assert engine.received(0.1, START) is READ
    assert engine.received(2.2, PING) is READ  # 0.5 s notices: due at 0.5, 1.0, 1.5 and 2.0
    assert [e.number for e in events if isinstance(e, SemanticNotice)] == [1, 2, 3, 4]


def test_a_read_timeout_before_the_first_byte_is_the_first_byte_verdict() -> None:
    engine, send = started(POLICY.replace(first_byte_timeout=3.0))
    assert isinstance(send, Send) and send.read_timeout == 3.0
    command = engine.timed_out(3.0, TimeoutError())  # the socket's own timeout, not a waking read
    assert isinstance(command, Sleep)
    record = engine.report.attempts[0]
    assert record.error_type == "first_byte_timeout" and record.retry_reason == "first_byte_timeout"


def test_enforced_verdicts_say_so() -> None:
    events: list[Event] = []
    drive([[*stream(REPLY[:4], eof=False), ("silence",)]], hooks=[events.append])
    assert [(v.kind, v.enforced, v.committed) for v in events if isinstance(v, Verdict)] == [
        (AttemptOutcome.RAW_SILENCE, True, True)]


def test_shadow_mode_observes_a_late_first_byte_at_its_bound() -> None:
    events: list[Event] = []
    steps = [("headers", 0.0, 200, SSE), *[("data", 3.0 + 0.01 * i, part) for i, part in enumerate(REPLY)], ("eof", 3.5)]
    out = drive([steps], POLICY.replace(shadow=True, first_byte_timeout=2.0, raw_idle_timeout=10.0), hooks=[events.append])
    (verdict,) = [v for v in events if isinstance(v, Verdict)]
    assert out.error is None and (verdict.kind, verdict.enforced, verdict.at) == (AttemptOutcome.RAW_SILENCE, False, 2.0)
    assert out.report["attempts"][0]["error_type"] == "first_byte_timeout"


def test_shadow_mode_keeps_the_first_failure_and_passes_read_errors_through() -> None:
    # Whole on the wire, but two error frames on the way: reported with the first.
    both = stream([START, anthropic_error("overloaded_error"), anthropic_error("api_error"), *REPLY[1:]])
    out = drive([both], POLICY.replace(shadow=True))
    assert out.error is None and out.report["attempts"][0]["error_type"] == "overloaded_error"
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START + BLOCK + delta("a")), ("reset", 0.2)]],
                POLICY.replace(shadow=True))
    assert isinstance(out.error, ConnectionResetError) and out.outcomes == ["truncated"]


def test_a_late_stream_on_a_non_streaming_request_is_scanned() -> None:
    out = drive([stream([START, PING, *REPLY[1:]])], facts=RequestFacts(streaming=False, body_size=10))
    attempt = out.report["attempts"][0]
    assert out.error is None and attempt["heartbeats"] == 1 and attempt["completion"] == "end_frame"


def test_a_stream_in_an_encoding_it_cannot_read_is_released_as_it_comes() -> None:
    out = drive([[("headers", 0.0, 200, {**SSE, "content-encoding": "x-unknown"}), ("data", 0.1, b"\x00\x01opaque"),
                  ("eof", 0.2)]])
    attempt = out.report["attempts"][0]
    assert out.error is None and out.body == b"\x00\x01opaque"
    assert attempt["heartbeats"] == 0 and attempt["frames"] == 0 and attempt["completion"] == "eof"


def test_commands_and_decisions_are_immutable_values() -> None:
    import dataclasses

    from otel_liveness.core import commands
    from otel_liveness.core.attempt import retry
    classes = [commands.Send, commands.Sleep, commands.Respond, commands.Fail, commands.Reraise, commands.Complete,
               commands.Release, retry.Failure, retry.Retry, retry.GiveUp, retry.Reject, retry.Truncate, retry.RetryState]
    for cls in classes:
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and "__slots__" in cls.__dict__, cls
    assert dataclasses.is_dataclass(commands.Read)


def test_the_task_being_cancelled_ends_the_attempt_as_cancelled() -> None:
    engine, _ = started()
    engine.headers(0.1, 200, SSE)
    engine.received(0.2, START + BLOCK + delta("a"))
    engine.abandoned(0.3, KeyboardInterrupt())
    assert engine.published["stop_reason"] == "cancelled" and engine.published["cause"] == "cancelled"
    assert engine.published["attempts"][0]["error_type"] == "KeyboardInterrupt"
    assert engine.woke(5.0, 0.3) is False  # an ended attempt has nothing due


def test_notice_counts_in_the_report_match_the_notices() -> None:
    events: list[Event] = []
    policy = POLICY.replace(first_byte_timeout="auto", first_byte_base=3.0, first_byte_max=3.0)
    steps = [("headers", 0.0, 200, SSE), ("data", 1.2, START), *[("data", 1.3 + 0.1 * i, PING) for i in range(20)],
             *[("data", 3.5 + 0.01 * i, part) for i, part in enumerate(REPLY[1:])], ("eof", 4.0)]
    out = drive([steps], policy, hooks=[events.append])
    notices = [e for e in events if isinstance(e, SemanticNotice)]
    prefill = [e for e in notices if e.kind is NoticeKind.PREFILL]
    attempt = out.report["attempts"][0]
    assert attempt["notices"] == len(notices) > len(prefill) == attempt["prefill_notices"] == 2


def test_an_exhausted_request_is_remembered_for_sdk_retries_only() -> None:
    cache: ExhaustedCache[Fail] = ExhaustedCache()
    drive([[("silence",)]], facts=RequestFacts(streaming=True, key="k"), exhausted=cache)
    again = Engine(POLICY, RequestFacts(streaming=True, key="k", sdk_retry=True), 1.0, provider="anthropic", exhausted=cache)
    assert isinstance(again.start(1.0), Fail) and again.ended
    fresh = Engine(POLICY, RequestFacts(streaming=True, key="k", sdk_retry=False), 1.0, provider="anthropic", exhausted=cache)
    assert isinstance(fresh.start(1.0), Send) and not fresh.ended  # the application's own new request
    unkeyed = Engine(POLICY, RequestFacts(streaming=True, key=None, sdk_retry=True), 1.0, provider="anthropic",
                     exhausted=cache)
    assert isinstance(unkeyed.start(1.0), Send)


@pytest.mark.parametrize(("code", "retried"), [(300, True), (302, True), (200, False)])
def test_x_should_retry_true_makes_a_3xx_a_failure_but_not_a_2xx(code: int, retried: bool) -> None:
    headers = {"content-type": "application/json", "x-should-retry": "true"}
    first = [("headers", 0.0, code, headers), ("data", 0.1, b"{}"), ("eof", 0.2)]
    out = drive([first, ok()])
    assert (len(out.report["attempts"]) == 2) is retried and out.report["stop_reason"] == "completed"


def test_a_json_answer_to_a_streaming_request_is_judged_as_a_json_body() -> None:
    # Slower than the raw bound: a JSON body is silent until complete, so only the non-streaming
    # bound (off by default) applies to it.
    body = b'{"id": "msg_1"}'
    out = drive([[("headers", 0.0, 200, {"content-type": "application/json"}), ("data", 3.0, body), ("eof", 3.1)]])
    assert out.error is None and out.body == body and out.outcomes == ["completed"]
    # Released at its headers: a break before its first byte is after the release.
    exc = ConnectionResetError("reset")
    out = drive([[("headers", 0.0, 200, {"content-type": "application/json"}), ("reset", 0.1)]])
    assert out.error is exc or isinstance(out.error, ConnectionResetError)
    assert out.report["attempts"][0]["committed"] is True and out.outcomes == ["truncated"]


def test_shadow_mode_observes_a_silence_that_ends_in_a_reset() -> None:
    events: list[Event] = []
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START + BLOCK + delta("a")), ("reset", 3.0)]],
                POLICY.replace(shadow=True), hooks=[events.append])
    assert isinstance(out.error, ConnectionResetError)
    assert [(v.kind, v.enforced) for v in events if isinstance(v, Verdict)] == [(AttemptOutcome.RAW_SILENCE, False)]


def test_shadow_mode_content_before_an_error_in_one_read_is_committed() -> None:
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.1, START + BLOCK + delta("a") + anthropic_error("api_error")),
                  ("eof", 0.2)]], POLICY.replace(shadow=True))
    assert out.error is None and out.report["attempts"][0]["committed"] is True
    assert out.outcomes == ["provider_error"] and out.report["stop_reason"] == "truncated"


def test_the_socket_read_timeout_never_outlasts_the_wall_budget() -> None:
    engine, send = started(POLICY.replace(wall_timeout=0.5))
    assert isinstance(send, Send) and send.read_timeout == 0.5
    assert isinstance(engine.headers(0.2, 529, {}), Sleep)
    again = engine.slept(0.3)
    assert isinstance(again, Send) and again.read_timeout == pytest.approx(0.2)


def test_a_body_that_cannot_be_decoded_is_a_typed_malformed_error() -> None:
    out = drive([[("headers", 0.0, 200, {**SSE, "content-encoding": "gzip"}), ("data", 0.1, b"not gzip at all"),
                  ("eof", 0.2)]])
    assert error_type(out) is E.MalformedStream and out.report["stop_reason"] == "malformed"
    assert out.error.args[0].startswith("the body could not be decoded: ")  # type: ignore[union-attr]


def test_the_report_takes_the_model_and_stop_reason_from_the_stream() -> None:
    out = drive([ok()], facts=RequestFacts(streaming=True, body_size=10, model=None))
    assert out.report["model"] == "m" and out.report["stop_detail"] == "end_turn"
    out = drive([ok()], facts=RequestFacts(streaming=True, body_size=10, model="requested"))
    assert out.report["model"] == "requested"


def test_notify_delivers_the_notices_due_and_never_a_verdict() -> None:
    # What a sibling's read does for an HTTP/2 stream waiting for the shared connection: its
    # notices on time; its deadlines stay its own reader's (its bytes may already be queued).
    events: list[Event] = []
    engine, _ = started(POLICY.replace(wall_timeout=2.0), hooks=[events.append])
    engine.headers(0.1, 200, SSE)
    engine.received(0.2, START)
    due = engine.wake_hint
    assert due == 0.5  # the first notice: 0.5 s after the attempt began (nothing semantic yet)
    engine.notify(due - 0.01)
    assert not [e for e in events if isinstance(e, SemanticNotice)]
    engine.notify(due)
    notices = [e for e in events if isinstance(e, SemanticNotice)]
    assert [n.number for n in notices] == [1] and engine.wake_hint == 1.0
    engine.notify(10.0)  # far past the raw bound (1 s) and the wall budget (2 s)
    notices = [e for e in events if isinstance(e, SemanticNotice)]
    assert [n.number for n in notices] == [1, 2, 3]  # due at 0.5, 1.0, 1.5; none at or past the wall
    assert not engine.ended and engine.published["stop_reason"] is None
    assert not [e for e in events if isinstance(e, Verdict)]
    # The stream's own reader judges it.
    assert engine.woke(10.0, 0.2) is True
    command = engine.timed_out(10.0, TimeoutError("read timeout"))
    assert isinstance(command, Fail) and command.kind == "wall_budget"
    engine.notify(11.0)  # an ended attempt: nothing more
    assert len([e for e in events if isinstance(e, SemanticNotice)]) == 3


# -- the state table (core/request/state.py), walked ------------------------------------------------


def _engine(policy: Policy = POLICY, **kw: Any) -> tuple[Engine, list[Event]]:
    events: list[Event] = []
    return Engine(policy, RequestFacts(streaming=True, **kw), 0.0, provider="anthropic", hooks=(events.append,)), events


# Each state, reached through inputs only; one recipe per state (EXPIRING: a backoff past the budget).
WALL = POLICY.replace(wall_timeout=1.0, backoff_initial=5.0, backoff_max=5.0)


def _in(state: State) -> tuple[Engine, list[Event]]:
    engine, events = _engine(WALL if state is State.EXPIRING else POLICY)
    if state is State.IDLE:
        return engine, events
    engine.start(0.0)
    if state is State.SENDING:
        return engine, events
    if state in (State.SLEEPING, State.EXPIRING):
        assert isinstance(engine.headers(0.1, 503, {}), Sleep)
        return engine, events
    engine.headers(0.1, 200, SSE)
    if state is State.HOLDING:
        return engine, events
    assert isinstance(engine.received(0.2, START + BLOCK + delta("a")), Respond)
    if state is State.RESPONDED:
        return engine, events
    engine.closed(0.3)
    assert state is State.ENDED
    return engine, events


# Every input, with arguments it could get from a driver; several per input where the exit differs.
CALLS: dict[str, list[tuple[Any, ...]]] = {
    "start": [(0.0,)],
    "headers": [(0.1, 200, SSE), (0.1, 503, {}), (0.1, 400, {})],
    "received": [(0.2, START + BLOCK + delta("a")), (0.2, PING), (0.2, b"".join(REPLY))],
    "eof": [(0.3,)],
    "timed_out": [(0.5, TimeoutError("read"))],
    "io_error": [(0.4, IOFailure.CONNECT, ConnectionError("x")), (0.4, IOFailure.READ, ConnectionError("x"))],
    "slept": [(6.0,)],
    "closed": [(0.6,)],
    "abandoned": [(0.6, RuntimeError("cancelled"))],
    "woke": [(0.7, 0.0), (30.0, 0.0)],
    "notify": [(0.7,)],
}


def test_the_input_table_covers_every_input_method() -> None:
    public = {name for name, member in inspect.getmembers(Engine, inspect.isfunction)
              if getattr(member, "__liveness_input__", False)}
    assert public == set(INPUTS) == set(CALLS)
    assert set(TRANSITIONS) == set(State) and all(state not in TRANSITIONS[state] for state in State)


@pytest.mark.parametrize("state", list(State))
def test_an_input_outside_its_states_is_a_typed_error_that_changes_nothing(state: State) -> None:
    for name, legal in INPUTS.items():
        if state in legal:
            continue
        for args in CALLS[name]:
            engine, events = _in(state)
            assert engine.state is state
            before, seen = dict(engine.published), len(events)
            with pytest.raises(E.IllegalInput) as info:
                getattr(engine, name)(*args)
            assert (info.value.input, info.value.state) == (name, state.value)
            assert isinstance(info.value, RuntimeError)  # h11's LocalProtocolError: a bug of the caller's
            assert engine.state is state and engine.published == before and len(events) == seen, name


def test_every_legal_input_moves_along_the_table_and_every_move_is_reachable() -> None:
    """From each state, every legal input with each of its argument sets: the state it leaves the
    engine in is the same or one the table allows -- and together they make every move the table
    lists (a move no input makes is a dead row)."""
    moves: set[tuple[State, State]] = set()
    for state in State:
        for name in INPUTS:
            if state not in INPUTS[name]:
                continue
            for args in CALLS[name]:
                engine, _ = _in(state)
                getattr(engine, name)(*args)
                after = engine.state
                assert after is state or after in TRANSITIONS[state], (state, name, args, after)
                moves.add((state, after))
    # IDLE -> ENDED: an SDK retry of a call this transport exhausted gets its error at start().
    cache: ExhaustedCache[Fail] = ExhaustedCache()
    first = Engine(POLICY.replace(max_attempts=1), RequestFacts(streaming=True, key="k"), 0.0, provider="anthropic",
                   exhausted=cache)
    first.start(0.0)
    assert isinstance(first.io_error(0.1, IOFailure.CONNECT, ConnectionError("x")), Fail) and first.ended
    again = Engine(POLICY, RequestFacts(streaming=True, key="k", sdk_retry=True), 1.0, provider="anthropic",
                   exhausted=cache)
    assert isinstance(again.start(1.0), Fail) and again.state is State.ENDED
    moves.add((State.IDLE, State.ENDED))
    # SENDING/HOLDING -> EXPIRING: a backoff that reaches the wall budget's end.
    for state in (State.SENDING, State.HOLDING):
        engine, _ = _engine(WALL)
        engine.start(0.0)
        if state is State.HOLDING:
            engine.headers(0.1, 200, SSE)
            assert isinstance(engine.eof(0.2), Sleep)
        else:
            assert isinstance(engine.io_error(0.1, IOFailure.CONNECT, ConnectionError("x")), Sleep)
        assert engine.state is State.EXPIRING
        moves.add((state, State.EXPIRING))
    table = {(state, to) for state, targets in TRANSITIONS.items() for to in targets}
    assert {move for move in moves if move[0] is not move[1]} == table


def test_the_ended_state_answers_io_that_raced_a_close_as_it_came() -> None:
    # A sync body closed from another thread while its reader's read was in flight: the read's
    # outcome reaches an ended request, which answers it as it came and changes nothing.
    engine, events = _in(State.ENDED)
    before, seen = dict(engine.published), len(events)
    assert engine.received(0.4, delta("late")) == delta("late")
    assert engine.eof(0.5) is COMPLETE
    exc = ConnectionError("closed under the read")
    assert engine.io_error(0.5, IOFailure.READ, exc) == Reraise(exc)
    assert engine.published == before and len(events) == seen and engine.published["stop_reason"] == "cancelled"


def test_no_module_writes_a_clocks_fields() -> None:
    """clocks.py derives every bound and verdict: outside it, a clock is asked, never written."""
    import ast
    import pathlib

    import otel_liveness

    root = pathlib.Path(otel_liveness.__file__).parent
    fields = set(AttemptClock.__slots__)
    writes = []
    for path in root.rglob("*.py"):
        if path.name == "clocks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for target in targets:
                if (isinstance(target, ast.Attribute) and target.attr in fields
                        and "clock" in ast.unparse(target.value).lower()):
                    writes.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(target)}")
    assert writes == []
    # ... and the check sees a write where there is one (the engine wrote these before).
    probe = ast.parse("attempt.clock.raw_idle = 1\nclock.terminal = None")
    found = [t for n in ast.walk(probe) if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Attribute) and t.attr in fields]
    assert len(found) == 2


# Every write of an attribute named ``committed`` in the package, by (file, function, target),
# that is not the attempt's own writer: Attempt.commit() (and the initial False in its __init__).
# The others are other objects' fields of the same name, each a copy of the attempt's.
#: The writers of an attempt's two states (core/attempt/modes.py) and of any ``committed`` field.
_STATE_WRITERS = {
    ("core/attempt/attempt.py", "Attempt.__init__", "self.mode"),  # the initial values
    ("core/attempt/ledger.py", "Ledger.__init__", "self.release_state"),
    ("core/attempt/attempt.py", "Attempt.become", "self.mode"),  # the one mover of the body mode
    ("core/attempt/ledger.py", "Ledger._move", "self.release_state"),  # of the release state (commit, finish)
    ("core/errors.py", "WallTimeout.__init__", "self.committed"),  # the error's own field
    ("core/request/report.py", "Reporter._finish_record", "record.committed"),  # the attempt's record, at its end
}
_STATE_ATTRS = frozenset({"mode", "release_state", "committed", "done", "scanned"})


def _state_writes(source: str, name: str) -> list[tuple[str, str, str]]:
    """The writes of an attribute of :data:`_STATE_ATTRS` in ``source`` (assignments, augmented
    and annotated ones, ``del``, ``setattr(x, "committed", ...)``), as (file, function, target)."""
    import ast

    writes: list[tuple[str, str, str]] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = (*scope, node.name)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in ast.walk(target)]  # (a, b.committed) = ...
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in _STATE_ATTRS):
            writes.append((name, ".".join(scope), f"setattr({ast.unparse(node.args[0])})"))
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr in _STATE_ATTRS:
                writes.append((name, ".".join(scope), ast.unparse(target)))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), ())
    return writes


def test_only_become_and_commit_or_finish_move_an_attempts_states() -> None:
    """An attempt's body mode is moved by ``Attempt.become`` only, its release state (content
    released, the reply whole) by ``commit()`` and ``finish()`` through ``Ledger._move`` only: no
    other module, nor another method of Attempt, writes them or a ``committed``/``done`` flag."""
    import pathlib

    import otel_liveness

    root = pathlib.Path(otel_liveness.__file__).parent
    writes = [write for path in sorted(root.rglob("*.py"))
              for write in _state_writes(path.read_text(), path.relative_to(root).as_posix())
              if write[0].startswith("core/") or not write[2].endswith(".mode")]  # (a telemetry "mode" is its own)
    assert {w for w in writes if w in _STATE_WRITERS} == _STATE_WRITERS  # (the list is not stale)
    assert [w for w in writes if w not in _STATE_WRITERS] == []
    # ... and the check sees a write where there is one (the engine and the attempt's readers
    # wrote these flags before): in another module, in another method of Attempt, through setattr.
    probe = ("class Engine:\n    def io_error(self, attempt):\n        attempt.committed = True\n"
             "class Attempt:\n    def probed(self):\n        self.mode = 1\n"
             "        a, self.done = 1, True\n        setattr(self, 'release_state', True)\n")
    assert _state_writes(probe, "core/attempt/attempt.py") == [
        ("core/attempt/attempt.py", "Engine.io_error", "attempt.committed"),
        ("core/attempt/attempt.py", "Attempt.probed", "self.mode"),
        ("core/attempt/attempt.py", "Attempt.probed", "self.done"),
        ("core/attempt/attempt.py", "Attempt.probed", "setattr(self)"),
    ]


def _calls_and_reads(source: str, call: str, attr: str) -> tuple[list[str], list[str]]:
    """Where ``source`` calls ``call`` (a name or an attribute) and reads ``<x>.policy.<attr>`` or
    ``policy.<attr>``: the enclosing ``Class.function`` of each."""
    import ast

    calls: list[str] = []
    reads: list[str] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = (*scope, node.name)
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == call) or (isinstance(func, ast.Attribute) and func.attr == call):
                calls.append(".".join(scope))
        if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.ctx, ast.Load):
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "policy") or (
                    isinstance(owner, ast.Attribute) and owner.attr == "policy"):
                reads.append(".".join(scope))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), ())
    return calls, reads


def test_verdicts_have_one_maker_and_shadow_mode_is_read_once_a_request() -> None:
    """Every :class:`Verdict` -- a clock's, an in-band error's, enforced or only observed -- is
    built by ``Reporter.verdict``, which reads whether it was enforced from the report; the
    policy's ``shadow`` is read in one place, by the engine (then ``Engine.shadow``), which also
    decides whether the driver keeps a copy of a streamed body for a retry (``keep_body``)."""
    import pathlib

    import otel_liveness

    root = pathlib.Path(otel_liveness.__file__).parent
    makers: list[str] = []
    readers: list[str] = []
    for path in sorted(root.rglob("*.py")):
        calls, reads = _calls_and_reads(path.read_text(), "Verdict", "shadow")
        rel = path.relative_to(root).as_posix()
        makers += [f"{rel}:{where}" for where in calls]
        readers += [f"{rel}:{where}" for where in reads]
    assert makers == ["core/request/report.py:Reporter.verdict"]
    assert readers == ["core/request/engine.py:Engine.__init__"]
    # ... and the check finds them where they are
    probe = ("class A:\n    def f(self, policy):\n        Verdict(1)\n        E.Verdict(2)\n"
             "        return self.policy.shadow or policy.shadow\n")
    assert _calls_and_reads(probe, "Verdict", "shadow") == (["A.f", "A.f"], ["A.f", "A.f"])


@pytest.mark.parametrize("shadow", [False, True])
def test_the_engine_asks_for_a_kept_body_unless_it_retries_nothing(shadow: bool) -> None:
    # The driver's way to keep a streamed body for a retry is called by the engine, once, at
    # construction -- and not in shadow mode, which retries nothing; its answer is what the engine
    # asks when a retry is due.
    calls: list[int] = []

    def keep_body() -> Any:
        calls.append(1)
        return lambda: "the body was not kept"

    engine = Engine(Policy(shadow=shadow), RequestFacts(streaming=True, body_size=10), 0.0, provider="anthropic",
                    keep_body=keep_body)
    assert calls == ([] if shadow else [1])
    assert (engine.body_replayable is None) is shadow
    if not shadow:
        assert engine.body_replayable is not None and engine.body_replayable() == "the body was not kept"


def test_an_engine_and_its_attempts_are_freed_without_the_cycle_collector() -> None:
    """The attempt reports through the request's Reporter, never through the engine: no cycle, so
    a finished request's memory (held bytes, prefix, journal) goes back as soon as it is dropped."""
    import gc

    from otel_liveness.core.attempt.attempt import Attempt
    from otel_liveness.core.request.report import Reporter

    kinds = (Engine, Attempt, Reporter)

    def alive() -> set[int]:
        return {id(o) for o in gc.get_objects() if type(o) in kinds}

    gc.collect()
    gc.disable()
    try:
        before = alive()
        engine, _ = _engine()
        engine.start(0.0)
        engine.headers(0.1, 200, SSE)
        engine.received(0.2, START + BLOCK + PING + delta("a"))
        engine.received(0.3, anthropic_error("overloaded_error"))  # an in-band error: the provider's answer
        assert len(alive() - before) == 3  # the engine, its attempt, its reporter
        del engine
        assert alive() - before == set()
    finally:
        gc.enable()


def test_an_sse_reply_where_an_event_stream_was_expected_is_read_as_sse() -> None:
    # The URL chose Bedrock's event stream; the response is SSE: read with an SSE framer (generic),
    # never with the event-stream profile's (which cannot classify SSE frames).
    out = drive([stream(REPLY)], provider="bedrock")
    assert out.error is None and out.body == b"".join(REPLY) and out.report["provider"] == "sse"
    assert out.outcomes == ["completed"]


def test_a_responses_stream_ended_by_done_is_complete() -> None:
    # A Responses API stream of a background request (or an OpenAI-compatible server) ends with
    # `data: [DONE]`, nothing before it: a whole (empty) reply, not a provider failure to retry.
    out = drive([stream([b"data: [DONE]\n\n"])], provider="openai-responses")
    assert out.error is None and out.outcomes == ["completed"] and out.sleeps == []


def test_a_read_timeout_sooner_than_the_bound_is_a_broken_read_not_wire_silence() -> None:
    # Our socket timeout is the bound (1 s); a ReadTimeout 0.1 s after the last byte came from
    # something else (a mock, a proxy): retried as a broken read before content, a truncation
    # named read_error after it -- never a raw-silence verdict the wire did not earn.
    engine, _ = started()
    engine.headers(0.0, 200, SSE)
    assert engine.received(0.1, START) is READ
    assert isinstance(engine.timed_out(0.2, TimeoutError()), Sleep)
    assert engine.report.attempts[0].retry_reason == "read_error"
    engine, _ = started()
    engine.headers(0.0, 200, SSE)
    assert isinstance(engine.received(0.1, b"".join(REPLY[:3])), Respond)
    command = engine.timed_out(0.3, TimeoutError())
    assert isinstance(command, Fail) and command.fields["cause"] == "read_error"
    # The whole bound waited: wire silence, as before.
    engine, _ = started()
    engine.headers(0.0, 200, SSE)
    assert engine.received(0.1, START) is READ
    assert isinstance(engine.timed_out(1.1, TimeoutError()), Sleep)
    assert engine.report.attempts[0].retry_reason == "raw_silence"


@pytest.mark.parametrize("split", [False, True], ids=["one-read", "a-later-read"])
def test_frames_after_the_end_frame_are_past_the_reply(split: bool) -> None:
    # A server that writes more after the reply's end frame (an error event, another chunk): the SDKs
    # stop reading at the end frame, so the reply is whole -- passed through, never a truncation.
    tail = anthropic_error("overloaded_error")
    parts = [b"".join(REPLY), tail] if split else [b"".join(REPLY) + tail]
    out = drive([stream(parts)])
    assert out.error is None and out.body == b"".join(REPLY) + tail and out.outcomes == ["completed"]
    done = b'data: {"type":"response.completed","response":{"id":"r","status":"completed"}}\n\ndata: [DONE]\n\n'
    failed = b'data: {"type":"response.failed","response":{"id":"r"}}\n\n'
    created = b'data: {"type":"response.created","response":{"id":"r","status":"in_progress"}}\n\n'
    parts = [created + done, failed] if split else [created + done + failed]
    out = drive([stream(parts)], provider="openai-responses")
    assert out.error is None and out.outcomes == ["completed"]


# -- the attempt's two tables (core/attempt/modes.py), walked ----------------------------------------------

JSON = {"content-type": "application/json"}
_SHADOW = POLICY.replace(shadow=True)


def _once(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``Attempt.<name>`` raises once: a fault of the judging itself (shadow mode goes on unjudged)."""
    from otel_liveness.core.attempt.attempt import Attempt

    real = getattr(Attempt, name)
    fired = []

    def faulty(self: Any, *args: Any) -> Any:
        if not fired:
            fired.append(1)
            raise RuntimeError("a fault of the judging")
        return real(self, *args)

    monkeypatch.setattr(Attempt, name, faulty)


# Recipes that between them make every move of both tables: (name, attempt's steps, policy,
# request streaming, what the recipe faults).
ATTEMPT_RECIPES: list[tuple[str, list[Step], Policy, bool, str | None]] = [
    ("a stream", [("headers", 0.1, 200), ("data", 0.2, b"".join(REPLY)), ("eof", 0.3)], POLICY, True, None),
    ("an end frame alone", [("headers", 0.1, 200), ("data", 0.2, END), ("eof", 0.3)], POLICY, True, None),
    ("an opaque body", [("headers", 0.1, 200, {"content-type": "text/plain"}), ("data", 0.2, b"x"), ("eof", 0.3)],
     POLICY, True, None),
    ("a JSON reply", [("headers", 0.1, 200, JSON), ("data", 0.2, b'{"id": "x"}'), ("eof", 0.3)], POLICY, True, None),
    ("a non-streaming request's stream", [("headers", 0.1, 200), ("data", 0.2, b"".join(REPLY)), ("eof", 0.3)],
     POLICY, False, None),
    ("a frame over the bound, in shadow", [("headers", 0.1, 200), ("data", 0.2, b"data: " + b"a" * 5000),
                                            ("eof", 0.3)],
     _SHADOW.replace(max_frame_bytes=1024), True, None),
    ("a JSON probe's fault, in shadow", [("headers", 0.1, 200, JSON), ("data", 0.2, b'{"id": "x"}'), ("eof", 0.3)],
     _SHADOW, True, "probe_read"),
    ("an opaque read's fault, in shadow", [("headers", 0.1, 200, {"content-type": "text/plain"}),
                                           ("data", 0.2, b"x"), ("eof", 0.3)], _SHADOW, True, "opaque_read"),
]


def test_every_attempt_move_is_in_its_table_and_every_move_of_the_tables_is_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The body mode and the release state, recorded on every move through the engine's inputs
    only: each move is one of BODY_MODES / RELEASES (else IllegalInput), and the recipes make
    every move the tables list -- the tables say no more than the code does."""
    from otel_liveness.core.attempt.attempt import Attempt
    from otel_liveness.core.attempt.ledger import Ledger
    from otel_liveness.core.attempt.modes import BODY_MODES, RELEASES

    moves: set[tuple[str, str]] = set()
    become, released_as = Attempt.become, Ledger._move

    def record_mode(self: Attempt, mode: Any) -> None:
        before = self.mode
        become(self, mode)
        moves.add((before, self.mode))

    def record_release(self: Ledger, release: Any) -> None:
        before = self.release_state
        released_as(self, release)
        moves.add((before, self.release_state))

    monkeypatch.setattr(Attempt, "become", record_mode)
    monkeypatch.setattr(Ledger, "_move", record_release)
    for name, steps, policy, streaming, fault in ATTEMPT_RECIPES:
        with monkeypatch.context() as patch:
            if fault is not None:
                _once(patch, fault)
            out = drive([steps], policy, facts=RequestFacts(streaming=streaming, body_size=100))
        if policy.shadow:  # shadow never ends a call: the reply passes whole, whatever was judged
            assert out.error is None and out.body, name
    made = {(a, b) for a, b in moves if a != b}
    table = {(a, b) for t in (BODY_MODES, RELEASES) for a, targets in t.items() for b in targets}
    assert made <= table
    assert table - made == set()


def test_a_move_outside_an_attempts_tables_is_a_typed_error_that_changes_nothing() -> None:
    from otel_liveness.core.attempt.modes import BodyMode

    engine, _ = _in(State.HOLDING)
    attempt = engine.attempt
    assert attempt is not None and attempt.mode is BodyMode.SCANNED
    attempt.finish(Completion.END_FRAME)
    attempt.commit()
    assert (attempt.ledger.release_state.value, attempt.committed, attempt.done) == ("done", True, True)
    attempt.become(BodyMode.UNJUDGED)
    for mode in (BodyMode.SCANNED, BodyMode.PROBING, BodyMode.OPAQUE):
        with pytest.raises(E.IllegalInput) as info:
            attempt.become(mode)
        assert info.value.state == "unjudged" and attempt.mode is BodyMode.UNJUDGED
