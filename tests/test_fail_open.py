"""Fail open, as a property of the core (docs/architecture.md, "Fail open"): a frame no profile
rule recognises is evidence the provider is producing -- released as content, never held -- and
a stream that ends cleanly after one completes in one attempt with its bytes unchanged. And the
other half, which failing open must not blind: silence, a reset, an EOF mid-frame, a 529, an
in-band overload before content and a stall after content are still caught.

Driven through the engine with a fake clock (tests/test_engine.py's driver), over streams
hypothesis generates: the frames each wire really sends (its keep-alives, preambles, content and
end), frames of a shape nobody here wrote inserted anywhere, any chunking."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_liveness.core import errors as E
from otel_liveness.core.outcome import Completion
from otel_liveness.core.wire.eventstream import bedrock_chunk, encode_message
from otel_liveness.testing.scripts import PING, sse_event

from .test_engine import POLICY, SSE, Step, drive, error_type, status

EVENTSTREAM = {"content-type": "application/vnd.amazon.eventstream"}


def _anthropic(kind: str, text: str = "x") -> bytes:
    if kind == "start":
        return sse_event("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "m"}})
    if kind == "content":
        return sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": text}})
    return sse_event("message_stop", {"type": "message_stop"})


def _chat(kind: str, text: str = "x") -> bytes:
    if kind == "start":
        return b'data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    if kind == "content":
        return b"data: " + json.dumps({"id": "c", "choices": [{"index": 0, "delta": {"content": text}}]}).encode() + b"\n\n"
    return b"data: [DONE]\n\n"


#: wire -> (keep-alive, start, content maker, end, how an unknown frame is written)
WIRES: dict[str, dict[str, Any]] = {
    "anthropic": {"ping": PING, "frame": _anthropic, "headers": SSE,
                  "unknown": lambda name, body: sse_event(name, {"type": name, **body})},
    "openai-chat": {"ping": b": keep-alive\n\n", "frame": _chat, "headers": SSE,
                    "unknown": lambda name, body: b"data: " + json.dumps({name: body}).encode() + b"\n\n"},
    "bedrock": {"ping": bedrock_chunk(b'{"type":"ping"}'), "headers": EVENTSTREAM,
                "frame": lambda kind, text="x": bedrock_chunk(_anthropic(kind, text).split(b"data: ", 1)[1].rstrip()),
                "unknown": lambda name, body: bedrock_chunk(json.dumps({name: body}).encode())},
}
# Names no wire here gives a meaning: a future event type, a model family's own JSON key.
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.", min_size=3, max_size=16).map(lambda s: f"zz_{s}")
BODIES = st.dictionaries(st.sampled_from(["outputText", "generation", "delta", "value", "n"]),
                         st.one_of(st.text(max_size=20), st.integers(0, 99)), max_size=3)


@st.composite
def streams(draw: st.DrawFn, *, wire: str | None = None) -> tuple[str, list[bytes], bool, int]:
    """(wire, frames, ends with the wire's end frame, the index of the first unknown frame):
    keep-alives, a preamble, content, and at least one unknown frame, before a clean end (the end
    frame, or EOF at a frame boundary)."""
    wire = wire or draw(st.sampled_from(sorted(WIRES)))
    spec = WIRES[wire]
    frames: list[bytes] = [spec["ping"]] * draw(st.integers(0, 2))
    if draw(st.booleans()):
        frames.append(spec["frame"]("start"))
    middle = [draw(st.sampled_from(["ping", "content", "unknown"])) for _ in range(draw(st.integers(0, 5)))]
    middle.insert(draw(st.integers(0, len(middle))), "unknown")
    first = -1
    for kind in middle:
        if kind == "unknown":
            first = len(frames) if first < 0 else first
            frames.append(spec["unknown"](draw(NAMES), draw(BODIES)))
        elif kind == "ping":
            frames.append(spec["ping"])
        else:
            frames.append(spec["frame"]("content", draw(st.text(min_size=1, max_size=8))))
    end = draw(st.booleans())
    if end:
        frames.append(spec["frame"]("end"))
    return wire, frames, end, first


def chunked(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def play(wire: str, parts: list[bytes], tail: list[Step] | None = None, every: float = 0.1) -> Any:
    steps: list[Step] = [("headers", 0.0, 200, WIRES[wire]["headers"])]
    t = 0.05
    for part in parts:
        steps.append(("data", t, part))
        t += every
    steps.extend(tail if tail is not None else [("eof", t)])
    return drive([steps], POLICY, provider=wire)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.lists(st.integers(0, 1 << 16), max_size=12))
def test_an_unrecognised_frame_before_a_clean_end_completes_in_one_attempt(
        generated: tuple[str, list[bytes], bool, int], cuts: list[int]) -> None:
    wire, frames, ends, _ = generated
    body = b"".join(frames)
    out = play(wire, chunked(body, cuts))
    assert out.error is None, out.error
    assert out.body == body  # every byte, in order, once: nothing held back, nothing invented
    report = out.report
    assert len(report["attempts"]) == 1 and report["stop_reason"] == "completed", report
    attempt = report["attempts"][0]
    assert attempt["unrecognised"] >= 1
    assert attempt["completion"] == (Completion.END_FRAME if ends else Completion.EOF)


@settings(max_examples=60, deadline=None)
@given(streams(), st.integers(1, 30))
def test_an_unrecognised_frame_is_released_when_it_arrives_not_held(
        generated: tuple[str, list[bytes], bool, int], keep: int) -> None:
    """The stream stops after its first unknown frame (cut mid-way through the next frame, so no
    clean end): the caller already holds every byte up to it -- it was content, released."""
    wire, frames, _, first = generated
    sent = b"".join(frames[:first + 1])
    after = frames[first + 1] if first + 1 < len(frames) else WIRES[wire]["frame"]("content")
    cut = after[:min(keep, len(after) - 1)]
    out = play(wire, [*frames[:first + 1], cut], tail=[("reset", 0.05 + 0.1 * (first + 2))])
    assert out.body.startswith(sent)
    assert len(out.report["attempts"]) == 1  # committed: the content is the caller's, never retried over
    assert error_type(out) is E.StreamTruncated  # and the death after it is still a death


# -- what failing open must not blind --------------------------------------------------------------


def test_silence_after_unrecognised_frames_is_still_raw_silence() -> None:
    unknown = WIRES["anthropic"]["unknown"]("zz_progress", {"n": 1})
    out = play("anthropic", [unknown, unknown], tail=[("silence",)])
    assert error_type(out) is E.StreamTruncated
    assert out.report["attempts"][0]["outcome"] == "truncated" and out.report["cause"] == "raw_silence"


def test_eof_mid_frame_after_unrecognised_frames_is_a_truncation_not_a_completion() -> None:
    for wire in WIRES:
        unknown = WIRES[wire]["unknown"]("zz_progress", {"n": 1})
        content = WIRES[wire]["frame"]("content")
        out = play(wire, [unknown, content[: len(content) // 2]])
        assert out.error is not None, wire
        assert out.report["stop_reason"] != "completed", (wire, out.report)


def test_eof_after_only_keepalives_is_not_taken_for_an_answer() -> None:
    """Recognised keep-alives are not content: a body of pings then EOF is still "EOF before content"."""
    out = drive([[("headers", 0.0, 200, SSE), ("data", 0.05, PING), ("data", 0.1, PING), ("eof", 0.2)]], POLICY)
    attempts = out.report["attempts"]
    assert len(attempts) >= 2 and attempts[0]["outcome"] != "completed"  # retried
    assert out.report["cause"] == "eof" and out.error is not None


def test_overloaded_before_content_is_still_retried() -> None:
    overloaded = sse_event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    reply = [("headers", 0.0, 200, SSE), ("data", 0.05, _anthropic("start")), ("data", 0.1, overloaded), ("eof", 0.2)]
    good = [("headers", 0.0, 200, SSE), ("data", 0.05, _anthropic("content")), ("data", 0.1, _anthropic("end")),
            ("eof", 0.2)]
    out = drive([reply, good], POLICY)
    assert out.error is None and len(out.report["attempts"]) == 2
    assert out.body == _anthropic("content") + _anthropic("end")  # the caller saw one attempt: the good one


def test_529_and_reset_before_content_are_still_retried() -> None:
    good = [("headers", 0.0, 200, SSE), ("data", 0.05, _anthropic("content") + _anthropic("end")), ("eof", 0.1)]
    out = drive([status(529), [("headers", 0.0, 200, SSE), ("reset", 0.05)], good], POLICY)
    assert [a["outcome"] for a in out.report["attempts"]][-1] == "completed"
    assert len(out.report["attempts"]) == 3


def test_a_stall_after_content_is_still_a_truncation() -> None:
    out = play("openai-chat", [_chat("content"), WIRES["openai-chat"]["unknown"]("zz_x", {})], tail=[("silence",)])
    assert error_type(out) is E.StreamTruncated and len(out.report["attempts"]) == 1


def test_an_unknown_bedrock_message_type_is_content_and_an_exception_message_is_still_an_error() -> None:
    progress = encode_message({":event-type": "zzProgress", ":content-type": "application/json",
                               ":message-type": "event"}, b"{}")
    out = play("bedrock", [progress, WIRES["bedrock"]["frame"]("end")])
    assert out.error is None and out.report["stop_reason"] == "completed"
    throttled = encode_message({":exception-type": "throttlingException", ":content-type": "application/json",
                                ":message-type": "exception"}, b'{"message":"slow down"}')
    good = [("headers", 0.0, 200, EVENTSTREAM),
            ("data", 0.05, WIRES["bedrock"]["frame"]("content") + WIRES["bedrock"]["frame"]("end")), ("eof", 0.1)]
    out = drive([[("headers", 0.0, 200, EVENTSTREAM), ("data", 0.05, throttled), ("eof", 0.1)], good], POLICY,
                provider="bedrock")
    assert len(out.report["attempts"]) == 2 and out.report["stop_reason"] == "completed"
