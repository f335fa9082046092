"""The steady lane: the C class equals the Python reference, the lane changes nothing a caller or a
report can see, and the general path takes over wherever a read is not exactly one content frame."""

from __future__ import annotations

import functools
import itertools
import os
import random
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_liveness
from otel_liveness import Policy, StreamTruncated
from otel_liveness.core.request import engine
from otel_liveness.core.wire import bulk
from otel_liveness.core.wire import lane as lane_mod
from otel_liveness.core.wire.lane import PyLane
from otel_liveness.core.wire.providers import PREFIX, profile_for
from otel_liveness.core.wire.sse import whole_frame
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s

from .clients import run
from .conftest import FAST

KEYS = profile_for("anthropic").semantic_keys
DELTA = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}\n\n'
PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def test_native_lane_is_built() -> None:
    # `make install` compiles the C lane; a silent fallback would leave the fast path untested.
    if os.environ.get("OTEL_LIVENESS_ALLOW_PURE_LANE") or bulk.PURE:
        pytest.skip("pure-Python lane allowed by OTEL_LIVENESS_ALLOW_PURE_LANE or selected by OTEL_LIVENESS_PURE")
    assert lane_mod.NATIVE and lane_mod.Lane is not PyLane


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        (DELTA, True),
        (DELTA + DELTA, False),  # two frames
        (DELTA[:-1], False),  # not ended
        (DELTA.replace(b"\n\n", b"\r\n\r\n"), False),  # CRLF framing goes through the scanner
        (DELTA.replace(b"\ndata", b"\rdata"), False),  # a lone CR is a line end
        (b"\n\n", True),  # an empty block is one (empty) frame
        (b"\n\n" + DELTA, False),
        (b"x", False),
        (b"\n", False),
        (b"", False),
        (b"event: a\n\n\n", False),  # a second blank line
    ],
)
def test_whole_frame(chunk: bytes, expected: bool) -> None:
    assert whole_frame(chunk, 1 << 20) is expected


def test_whole_frame_respects_the_frame_bound() -> None:
    assert whole_frame(DELTA, len(DELTA)) and not whole_frame(DELTA, len(DELTA) - 1)


def test_semantic_keys_are_heads_of_blocks() -> None:
    # The bulk scanner classifies by these prefixes without scanning them for a block end.
    for name in ("anthropic", "openai-chat", "openai-responses", "sse"):
        for key in profile_for(name).semantic_keys:
            assert len(key) == PREFIX and b"\n\n" not in key and b"\r" not in key
    assert b"event: content_block_delta\n" in KEYS and not any(k.startswith(b"event: ping") for k in KEYS)


# -- the C class equals the reference --------------------------------------------------------

_pieces = st.sampled_from(
    [DELTA, PING, DELTA[:30], DELTA[30:], b"\n", b"\n\n", b"\r", b"x" * 3, KEYS[1], KEYS[2] + b"ata: {}\n\n",
     b"event: message_stop\ndata: {}\n\n"]
)
_chunks = st.one_of(st.builds(b"".join, st.lists(_pieces, min_size=0, max_size=3)), st.binary(max_size=64),
                    st.sampled_from([bytearray(DELTA), memoryview(DELTA), None, 3]))
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.floats(-1, 50), st.floats(0, 10), st.floats(0, 60), st.floats(-5, 5),
                  st.integers(0, 400)),
        st.tuples(st.just("step"), _chunks, st.floats(-5, 60)),
        st.tuples(st.just("take")),
        st.tuples(st.just("close")),
    ),
    max_size=40,
)


@pytest.mark.skipif(not lane_mod.NATIVE, reason="the C lane is not built")
@settings(max_examples=200, deadline=None)
@given(ops=_ops)
def test_without_a_scanner_neither_lane_admits_anything(ops: list[tuple[Any, ...]]) -> None:
    # The framing is the scanner's alone (sse.whole_frame is written once, in Python, for the
    # reference scanner): a lane with no scanner attached admits no read, open or not.
    keep_c: list[bytes] = []
    keep_py: list[bytes] = []
    c = lane_mod.Lane(keep_c)
    py = PyLane(keep_py)
    for op in ops:
        if op[0] == "open":
            c.open(*op[1:])
            py.open(*op[1:])
        elif op[0] == "step":
            assert c.step(op[1], op[2]) is py.step(op[1], op[2]) is False
        elif op[0] == "take":
            assert c.take() == py.take()
        else:
            c.close()
            py.close()
        assert (c.reads, c.horizon, c.room, c.last) == (py.reads, py.horizon, py.room, py.last)
    assert keep_c == keep_py == []


def _attached(lane_cls: Any, keep: list[bytes]) -> Any:
    """A lane of ``lane_cls`` reading through a scanner of its own kind, past the stream head."""
    scanner = _scanner(bulk.Scanner if lane_cls is not PyLane and bulk.NATIVE else bulk.PyScanner)
    scanner.feed(b"\n")
    lane = lane_cls(keep)
    lane.attach(scanner)
    return lane


def test_step_admits_only_before_the_horizon_and_moves_it() -> None:
    for cls in {lane_mod.Lane, PyLane}:
        keep: list[bytes] = []
        lane = _attached(cls, keep)
        assert not lane.step(DELTA, 0.0)  # closed until opened
        lane.open(10.0, 4.0, 12.0, 1.0, 1000)
        assert lane.step(DELTA, 3.0) and lane.horizon == 7.0  # 3 + step
        assert lane.step(DELTA, 6.5) and lane.horizon == 10.5
        assert lane.step(DELTA, 9.0) and lane.horizon == 12.0  # capped by the wall deadline
        assert not lane.step(DELTA, 12.0)  # due: the general path decides
        assert not lane.step(PING, 1.0)  # a heartbeat alone: the general path's (the scanner is not beating)
        assert lane.take() == (3, 3 * len(DELTA), 9.0, 3.5, 1000 - 3 * len(DELTA), 3, 9.0, 3.5)
        assert lane.take()[:2] == (0, 0) and keep == [DELTA] * 3


def test_step_keeps_the_prefix_exactly_up_to_its_room() -> None:
    for cls in {lane_mod.Lane, PyLane}:
        keep: list[bytes] = []
        lane = _attached(cls, keep)
        lane.open(100.0, 10.0, 100.0, 0.0, len(DELTA) + 5)
        assert lane.step(DELTA, 1.0) and lane.step(DELTA, 2.0) and lane.step(DELTA, 3.0)
        assert keep == [DELTA, DELTA[:5]] and lane.room == 0
        assert lane.take()[1] == 3 * len(DELTA)  # released counts every byte, kept or not


# -- the lane changes nothing observable -------------------------------------------------------


class NoLane(PyLane):
    """A lane that never admits: every read takes the general path (the behaviour to match)."""

    def step(self, chunk: Any, now: float) -> bool:
        return False


IMPLS = {"native": lane_mod.Lane, "python": PyLane, "general": NoLane}


def _reply_chunks(seed: int) -> list[bytes]:
    data = b"".join(x.data for x in anthropic_reply("abcdefghij" * 30, deltas=300, think_pings=3) if isinstance(x, s.Raw))
    rng = random.Random(seed)
    frames = data.split(b"\n\n")[:-1]
    chunks: list[bytes] = []
    i = 0
    while i < len(frames):  # mostly one frame per read, sometimes several, sometimes split mid-frame
        take = rng.choice([1, 1, 1, 1, 2, 3])
        block = b"".join(f + b"\n\n" for f in frames[i : i + take])
        i += take
        if rng.random() < 0.15:
            cut = rng.randrange(1, len(block))
            chunks += [block[:cut], block[cut:]]
        else:
            chunks.append(block)
    assert b"".join(chunks) == data
    return chunks


def _stream(chunks: list[bytes], policy: Policy, *, limit: int | None = None) -> tuple[bytes, dict[str, Any], Any]:
    class Body(httpx2.SyncByteStream):
        def __iter__(self) -> Any:
            return iter(chunks)

    def handler(request: Any) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    body, error = b"", None
    with httpx2.Client(transport=otel_liveness.wrap(httpx2.MockTransport(handler), policy)) as client:
        with client.stream("POST", "https://api.anthropic.com/v1/messages", json={"stream": True}) as response:
            try:
                for chunk in response.iter_raw():
                    body += chunk
                    if limit is not None and len(body) >= limit:
                        break
            except StreamTruncated as exc:
                error = exc
            report = response.extensions["liveness"]
    return body, report, error


_COUNTS = ("outcome", "frames", "heartbeats", "bytes_received", "notices", "error_type", "phase", "response_id")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", [None, 20_000])
def test_lane_and_general_path_report_the_same(monkeypatch: pytest.MonkeyPatch, seed: int, limit: int | None) -> None:
    chunks = _reply_chunks(seed)
    seen = {}
    for name, impl in IMPLS.items():
        monkeypatch.setattr(engine, "Lane", impl)
        body, report, error = _stream(chunks, Policy(), limit=limit)
        attempt = report["attempts"][0]
        seen[name] = (body, report["stop_reason"], {k: attempt[k] for k in _COUNTS}, error)
    assert seen["native"] == seen["python"] == seen["general"]
    if limit is None:
        assert seen["general"][1] == "completed" and seen["general"][2]["frames"] > 300
    else:
        assert seen["general"][1] == "cancelled" and 100 < seen["general"][2]["frames"] < 300


@pytest.mark.parametrize("impl", ["native", "python"])
def test_truncation_prefix_is_exact_when_most_reads_took_the_lane(monkeypatch: pytest.MonkeyPatch, impl: str) -> None:
    monkeypatch.setattr(engine, "Lane", IMPLS[impl])
    chunks = _reply_chunks(1)
    cut = len(chunks) // 2
    body, report, error = _stream(chunks[:cut], Policy(max_prefix_bytes=1500))  # EOF mid-reply
    assert isinstance(error, StreamTruncated) and error.cause == "eof"
    assert error.released == len(body) and error.prefix == body[:1500]
    assert report["attempts"][0]["bytes_received"] == len(b"".join(chunks[:cut]))


@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize("variant", [("httpx2", None), ("httpx", "asyncio")], ids=["httpx2-sync", "httpx-asyncio"])
def test_stall_after_a_lane_run_is_detected_on_time(monkeypatch: pytest.MonkeyPatch, provider: Any, impl: str,
                                                      variant: Any) -> None:
    # 40 deltas one per read (all in the lane), then silence: the raw verdict with the exact prefix.
    monkeypatch.setattr(engine, "Lane", IMPLS[impl])
    url = provider.add("stall", [[s.Headers(), *anthropic_reply("a" * 50, deltas=50, stall_after=40), s.Stall()]])
    result = run(variant, FAST, url + "/v1/messages")
    exc = result.error
    assert isinstance(exc, StreamTruncated) and exc.cause == "raw_silence"
    assert exc.prefix == result.body and exc.partial["content"][0]["text"] == "a" * 40
    attempt = result.report["attempts"][0]
    assert attempt["frames"] == 42 and attempt["bytes_received"] == len(result.body)  # + message/block start


@pytest.mark.parametrize("impl", ["native", "python"])
def test_notices_still_fire_between_slow_content(monkeypatch: pytest.MonkeyPatch, provider: Any, impl: str) -> None:
    # Content every 1.5 notice intervals: each gap passes a notice deadline, so the lane must hand
    # those reads to the general path, which emits the notice before releasing the delta.
    monkeypatch.setattr(engine, "Lane", IMPLS[impl])
    url = provider.add("slow", [[s.Headers(), *anthropic_reply("abcdef", deltas=6, delta_every=15.0)]])
    result = run(("httpx2", None), FAST.replace(raw_idle_timeout=1.0), url + "/v1/messages")
    assert result.error is None
    assert result.report["attempts"][0]["notices"] >= 5


# -- with a bulk scanner attached: reads of many frames ----------------------------------------


def _scanner(cls: Any) -> Any:
    from otel_liveness.core.wire.framing import _ROLES, _comment_kind
    from otel_liveness.core.wire.providers import StreamFacts

    profile = profile_for("anthropic")
    slow = functools.partial(profile.classify_block, facts=StreamFacts())
    return cls(1 << 20, tuple(profile.fast.items()), slow, _comment_kind(profile), _ROLES, 1 << 20, PREFIX)


_STREAM = b"".join([DELTA] * 6 + [PING] + [DELTA] * 5 + [b"event: message_stop\ndata: {}\n\n"] + [DELTA] * 4)


@pytest.mark.skipif(not (lane_mod.NATIVE and bulk.NATIVE), reason="the C lane or scanner is not built")
@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(0, len(_STREAM)), max_size=20),
       ops=st.lists(st.sampled_from(["step", "step", "step", "take", "open", "close"]), max_size=40),
       room=st.integers(0, 2000))
def test_c_lane_with_a_scanner_equals_the_reference(cuts: list[int], ops: list[str], room: int) -> None:
    points = sorted(set(cuts))
    chunks = [_STREAM[a:b] for a, b in zip([0, *points], [*points, len(_STREAM)], strict=True)]
    lanes = []
    for lane_cls, scanner_cls in ((lane_mod.Lane, bulk.Scanner), (PyLane, bulk.PyScanner)):
        keep: list[bytes] = []
        scanner = _scanner(scanner_cls)
        scanner.feed(b"\n")  # past the stream head
        lane = lane_cls(keep)
        lane.attach(scanner)
        lanes.append((lane, scanner, keep))
    now = 0.0
    for op in ops:
        now += 0.5
        answers = []
        for lane, scanner, _ in lanes:
            if op == "step":
                chunk = chunks[0] if chunks else b""
                admitted = lane.step(chunk, now)
                if not admitted:
                    scanner.feed(chunk)  # the general path reads it
                answers.append(admitted)
            elif op == "take":
                answers.append(lane.take())
            elif op == "open":
                lane.open(now + 3.0, 1.0, 50.0, now, room)
                answers.append(None)
            else:
                lane.close()
                answers.append(None)
        if op == "step" and chunks:
            chunks.pop(0)
        assert answers[0] == answers[1], op
        (a, sa, ka), (b, sb, kb) = lanes
        assert (a.reads, a.frames, a.horizon, a.room, a.last) == (b.reads, b.frames, b.horizon, b.room, b.last)
        assert (sa.buffered, sa.journal(), ka) == (sb.buffered, sb.journal(), kb)


def test_a_read_of_many_content_frames_takes_the_lane() -> None:
    for lane_cls, scanner_cls in {(lane_mod.Lane, bulk.Scanner), (PyLane, bulk.PyScanner)}:
        keep: list[bytes] = []
        scanner = _scanner(scanner_cls)
        scanner.feed(b"\n")
        lane = lane_cls(keep)
        lane.attach(scanner)
        lane.open(10.0, 1.0, 10.0, 0.0, 1 << 20)
        run = DELTA * 64
        assert lane.step(run + DELTA[:40], 1.0)  # 64 frames, one in progress
        assert lane.step(DELTA[40:] + DELTA, 1.5)  # it ends, another one
        assert not lane.step(DELTA + PING, 2.0)  # a heartbeat: the general path's
        assert lane.take() == (2, len(run) + len(DELTA) * 2, 1.5, 1.0, (1 << 20) - len(run) - 2 * len(DELTA), 66, 1.5, 1.0)
        assert keep == [run + DELTA[:40], DELTA[40:] + DELTA] and scanner.idle


# -- hardening: a lane Python can reach in odd states -----------------------------------------------


@pytest.mark.skipif(not lane_mod.NATIVE, reason="the C lane is not built")
def test_an_uninitialised_c_lane_raises_instead_of_crashing() -> None:
    failed = lane_mod.Lane.__new__(lane_mod.Lane)
    with pytest.raises(TypeError):
        failed.__init__("not a list")  # type: ignore[arg-type]
    for lane in (lane_mod.Lane.__new__(lane_mod.Lane), failed):
        for name, args in [("step", (DELTA, -1.0)), ("step", (DELTA, 0.0)), ("open", (10.0, 1.0, 10.0, 0.0, 5)),
                           ("attach", (None,)), ("close", ()), ("take", ())]:
            with pytest.raises(RuntimeError, match=r"__init__\(\) was not called"):
                getattr(lane, name)(*args)
        assert (lane.reads, lane.frames, lane.room) == (0, 0, 0)  # plain fields: zero, harmless
    late = lane_mod.Lane.__new__(lane_mod.Lane)
    keep: list[bytes] = []
    late.__init__(keep)
    late.attach(_attached(PyLane, [])._scanner)
    late.open(10.0, 1.0, 10.0, 0.0, 1 << 20)
    assert late.step(DELTA, 1.0) and keep == [DELTA]


LANES = [pytest.param(PyLane, id="python"),
         pytest.param(lane_mod.Lane, id="c", marks=pytest.mark.skipif(not lane_mod.NATIVE, reason="not built"))]


@pytest.mark.parametrize("cls", LANES)
def test_a_scanner_that_calls_back_into_its_lane_is_refused(cls: Any) -> None:
    # step() calls the scanner's admit() -- Python, which may call back into the lane (or drop the
    # scanner it is running in). The lane refuses with RuntimeError; the step in progress completes.
    refused: list[str] = []

    class Scanner:
        def admit(self, chunk: bytes) -> int:
            for name, args in [("step", (chunk, 1.0)), ("attach", (None,)), ("open", (10.0, 1.0, 10.0, 0.0, 0)),
                               ("close", ()), ("take", ())]:
                try:
                    getattr(lane, name)(*args)
                except RuntimeError as exc:
                    assert "busy" in str(exc)
                    refused.append(name)
            with pytest.raises(RuntimeError, match="busy"):
                lane.__init__([])
            return 2

    keep: list[bytes] = []
    lane = cls(keep)
    lane.attach(Scanner())  # the only reference to the scanner and its admit is the lane's
    lane.open(10.0, 1.0, 10.0, 0.0, 1 << 20)
    assert lane.step(DELTA + DELTA, 1.0)
    assert refused == ["step", "attach", "open", "close", "take"]
    assert lane.take() == (1, 2 * len(DELTA), 1.0, 1.0, (1 << 20) - 2 * len(DELTA), 2, 1.0, 1.0) and keep == [DELTA + DELTA]
    lane.attach(None)  # after the step: allowed again
    assert not lane.step(DELTA, 1.5) and lane.take()[0] == 0  # (detached: nothing is admitted)


@pytest.mark.parametrize("cls", LANES)
def test_another_thread_during_admit_is_refused(cls: Any) -> None:
    import threading

    errors: list[BaseException] = []

    def other() -> None:
        try:
            lane.step(DELTA, 1.0)
        except BaseException as exc:  # recorded for the assertion below
            errors.append(exc)

    class Scanner:
        def admit(self, chunk: bytes) -> int:
            thread = threading.Thread(target=other)
            thread.start()
            thread.join(10)
            return 1

    lane = cls([])
    lane.attach(Scanner())
    lane.open(10.0, 1.0, 10.0, 0.0, 0)
    assert lane.step(DELTA, 1.0)
    assert [type(e) for e in errors] == [RuntimeError] and lane.take()[0] == 1


@pytest.mark.skipif(not (lane_mod.NATIVE and bulk.NATIVE), reason="the C lane or scanner is not built")
def test_a_c_lane_calls_an_exact_scanner_in_c_and_a_subclass_through_its_admit() -> None:
    # A _bulk.Scanner (not subclassable) is called through the _C_API capsule, with no Python call;
    # any other scanner through its bound admit(): its own method runs and its answer is the lane's.
    calls: list[int] = []

    class Counting:
        def __init__(self) -> None:
            self.inner = _scanner(bulk.Scanner)

        def feed(self, data: bytes) -> Any:
            return self.inner.feed(data)

        def journal(self) -> bytes:
            return bytes(self.inner.journal())

        def admit(self, chunk: bytes) -> int:
            calls.append(len(chunk))
            return -1 if b"decline" in chunk else int(self.inner.admit(chunk))

    with pytest.raises(TypeError):
        type("Sub", (bulk.Scanner,), {})
    results = []
    for make in (lambda: _scanner(bulk.Scanner), Counting):
        keep: list[bytes] = []
        scanner = make()
        scanner.feed(b"\n")
        lane = lane_mod.Lane(keep)
        lane.attach(scanner)
        lane.open(10.0, 1.0, 10.0, 0.0, 1 << 20)
        results.append((lane.step(DELTA * 3, 1.0), lane.step(DELTA, 1.5), lane.take(), bytes(scanner.journal()), keep))
    assert results[0] == results[1]
    assert calls == [3 * len(DELTA), len(DELTA)]
    # the override's answer is the lane's: declined, nothing counted
    lane.open(10.0, 1.0, 10.0, 2.0, 0)
    assert not lane.step(b'event: content_block_delta\ndata: {"decline":1}\n\n', 2.5) and lane.take()[0] == 0
    # re-attached to an exact scanner, then detached: the C call follows the attachment
    exact = _scanner(bulk.Scanner)
    exact.feed(b"\n")
    lane.attach(exact)
    assert lane.step(DELTA, 3.0) and exact.journal() and len(calls) == 3
    lane.attach(None)
    assert not lane.step(DELTA, 3.5) and lane.take()[0] == 1  # detached: nothing is admitted


@pytest.mark.skipif(not (lane_mod.NATIVE and bulk.NATIVE), reason="the C lane or scanner is not built")
def test_an_error_of_the_scanner_called_in_c_propagates_from_step() -> None:
    # The scanner refuses a call while it is busy (its Python classifier is running): called from
    # the lane in C, that refusal still reaches the caller of step(), and the lane counts nothing.
    from otel_liveness.core.wire.framing import _ROLES, _comment_kind
    from otel_liveness.core.wire.providers import StreamFacts

    profile = profile_for("anthropic")
    seen: list[BaseException] = []

    def slow(block: bytes) -> Any:
        try:
            lane.step(DELTA, 1.0)
        except RuntimeError as exc:
            seen.append(exc)
        return profile.classify_block(block, facts=StreamFacts())

    scanner = bulk.Scanner(1 << 20, tuple(profile.fast.items()), slow, _comment_kind(profile), _ROLES, 1 << 20, PREFIX)
    lane = lane_mod.Lane([])
    lane.attach(scanner)
    lane.open(10.0, 1.0, 10.0, 0.0, 1 << 20)
    scanner.feed(b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n')
    assert len(seen) == 1 and "Scanner is busy" in str(seen[0])
    assert lane.take()[0] == 0
    assert lane.step(DELTA, 2.0) and lane.take()[0] == 1  # once the feed is over: admitted


# -- heartbeats inside runs of deltas: on the lane, the same facts as the general path ---------------


class BeatsSeen(PyLane):
    """The reference lane, counting the heartbeats it admitted (to see the lane took them)."""

    admitted = 0

    def take_beats(self) -> list[tuple[float, int]]:
        beats = super().take_beats()
        BeatsSeen.admitted += sum(count for _, count in beats)
        return beats


def _pinged_chunks(seed: int, every: int) -> list[bytes]:
    """A reply with a ping after every ``every``-th delta, in reads of 1 to 12 frames, some cut mid-frame."""
    data = b"".join(x.data for x in anthropic_reply("abcdefghij" * 30, deltas=300) if isinstance(x, s.Raw))
    frames = [f + b"\n\n" for f in data.split(b"\n\n")[:-1]]
    pinged: list[bytes] = []
    deltas = 0
    for frame in frames:
        pinged.append(frame)
        if frame.startswith(b"event: content_block_delta"):
            deltas += 1
            if deltas % every == 0:
                pinged.append(PING)
    rng = random.Random(seed)
    chunks: list[bytes] = []
    i = 0
    while i < len(pinged):
        take = rng.choice([1, 2, 3, 5, 8, 12])
        block = b"".join(pinged[i : i + take])
        i += take
        if rng.random() < 0.15:
            cut = rng.randrange(1, len(block))
            chunks += [block[:cut], block[cut:]]
        else:
            chunks.append(block)
    return chunks


def _stream_events(chunks: list[bytes], policy: Policy, hooks: tuple[Any, ...] = ()) -> tuple[bytes, dict[str, Any], list[Any]]:
    class Body(httpx2.SyncByteStream):
        def __iter__(self) -> Any:
            return iter(chunks)

    def handler(request: Any) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    events: list[Any] = []
    body = b""
    transport = otel_liveness.wrap(httpx2.MockTransport(handler), policy, hooks=[events.append, *hooks])
    with httpx2.Client(transport=transport) as client:
        with client.stream("POST", "https://api.anthropic.com/v1/messages", json={"stream": True}) as response:
            for chunk in response.iter_raw():
                body += chunk
            report = response.extensions["liveness"]
    return body, report, events


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("every", [1, 7, 50])
def test_pings_inside_runs_give_the_same_facts_on_the_lane(monkeypatch: pytest.MonkeyPatch, seed: int,
                                                           every: int) -> None:
    chunks = _pinged_chunks(seed, every)
    seen = {}
    for name, impl in {**IMPLS, "counting": BeatsSeen}.items():
        monkeypatch.setattr(engine, "Lane", impl)
        body, report, events = _stream_events(chunks, Policy())
        attempt = report["attempts"][0]
        beats = [e for e in events if isinstance(e, otel_liveness.Heartbeats)]
        assert all(0 <= a.at <= b.at for a, b in itertools.pairwise(beats))  # in order, each its read's time
        kinds = [type(e).__name__ for e in events]
        seen[name] = (body, report["stop_reason"], {k: attempt[k] for k in _COUNTS},
                      [(e.attempt, e.count, e.total) for e in beats], kinds)
    assert seen["native"] == seen["python"] == seen["general"] == seen["counting"]
    assert seen["general"][2]["heartbeats"] == 300 // every and seen["general"][1] == "completed"
    assert BeatsSeen.admitted > 0  # pings took the lane, inside runs of deltas and in reads of their own


def test_a_lane_records_the_heartbeats_of_a_read_inside_a_run() -> None:
    for lane_cls, scanner_cls in {(lane_mod.Lane, bulk.Scanner), (PyLane, bulk.PyScanner)}:
        keep: list[bytes] = []
        scanner = _scanner(scanner_cls)
        scanner.feed(b"\n")
        scanner.beating = True
        lane = lane_cls(keep)
        lane.attach(scanner)
        lane.open(10.0, 1.0, 10.0, 0.0, 1 << 20)
        assert lane.step(DELTA + PING + DELTA, 0.4) and (lane.heartbeats, lane.since) == (1, 0)
        horizon = lane.horizon
        # a heartbeat alone: admitted, but only the raw clock moves (the horizon and the time of the
        # last content stay: no semantic deadline moves on a ping)
        assert lane.step(PING, 1.2) and (lane.heartbeats, lane.since) == (2, 1)
        assert lane.horizon == horizon and (lane.last, lane.semantic) == (1.2, 0.4)
        assert lane.step(DELTA + PING + PING, 1.35) and (lane.heartbeats, lane.since) == (4, 2)
        assert lane.step(DELTA * 3 + DELTA[:30], 1.7) and (lane.heartbeats, lane.since) == (4, 0)
        assert not lane.step(PING, lane.horizon)  # due: the general path decides, pings or not
        nbytes = 6 * len(DELTA) + 4 * len(PING) + 30
        # the longest wire gap 0.8 (content to the lone ping), the longest content gap 0.95
        assert lane.take() == (4, nbytes, 1.7, pytest.approx(0.8), (1 << 20) - nbytes, 10, 1.7, pytest.approx(0.95))
        assert lane.take_beats() == [(0.4, 1), (1.2, 1), (1.35, 2)] and lane.heartbeats == 0 and lane.take_beats() == []
        scanner.feed(DELTA[30:] + PING * 3)  # the general path reads the rest, then three pings
        lane.open(10.0, 1.0, 10.0, 2.0, 1 << 20, 3)  # and re-arms the lane: 3 pings since content
        assert lane.step(PING, 2.5) and lane.since == 4 and lane.take()[6] == 2.0


_PINGED_STREAM = b"".join([DELTA] * 3 + [PING] + [DELTA] * 4 + [PING, PING] + [DELTA] * 2 + [PING] * 3 + [DELTA]
                          + [b"event: message_stop\ndata: {}\n\n"] + [DELTA, PING] * 3)


@pytest.mark.skipif(not (lane_mod.NATIVE and bulk.NATIVE), reason="the C lane or scanner is not built")
@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(0, len(_PINGED_STREAM)), max_size=20),
       ops=st.lists(st.sampled_from(["step", "step", "step", "take", "beats", "open", "close"]), max_size=40),
       room=st.integers(0, 2000), exact=st.booleans())
def test_c_lane_with_a_beating_scanner_equals_the_reference(cuts: list[int], ops: list[str], room: int,
                                                           exact: bool) -> None:
    points = sorted(set(cuts))
    chunks = [_PINGED_STREAM[a:b] for a, b in zip([0, *points], [*points, len(_PINGED_STREAM)], strict=True)]
    lanes = []
    # the C lane with the C scanner (called in C) or with the reference one (through its admit())
    for lane_cls, scanner_cls in ((lane_mod.Lane, bulk.Scanner if exact else bulk.PyScanner), (PyLane, bulk.PyScanner)):
        keep: list[bytes] = []
        scanner = _scanner(scanner_cls)
        scanner.feed(b"\n")
        scanner.beating = True
        lane = lane_cls(keep)
        lane.attach(scanner)
        lanes.append((lane, scanner, keep))
    now = 0.0
    for op in ops:
        now += 0.5
        answers = []
        for lane, scanner, _ in lanes:
            if op == "step":
                chunk = chunks[0] if chunks else b""
                admitted = lane.step(chunk, now)
                if not admitted:
                    scanner.feed(chunk)
                answers.append(admitted)
            elif op == "take":
                answers.append(lane.take())
            elif op == "beats":
                answers.append(lane.take_beats())
            elif op == "open":
                lane.open(now + 3.0, 1.0, 50.0, now, room)
                answers.append(None)
            else:
                lane.close()
                answers.append(None)
        if op == "step" and chunks:
            chunks.pop(0)
        assert answers[0] == answers[1], op
        (a, sa, ka), (b, sb, kb) = lanes
        assert (a.reads, a.frames, a.horizon, a.room, a.last, a.heartbeats, a.since) == (
            b.reads, b.frames, b.horizon, b.room, b.last, b.heartbeats, b.since)
        assert (sa.buffered, sa.journal(), ka) == (sb.buffered, sb.journal(), kb)


@pytest.mark.parametrize("every", [3, 50])
def test_pings_inside_runs_give_the_same_span_events_and_metrics_on_the_lane(monkeypatch: pytest.MonkeyPatch,
                                                                             every: int) -> None:
    from otel_liveness.telemetry import semconv as S

    from .test_telemetry import Telemetry

    chunks = _pinged_chunks(2, every)
    seen = {}
    for name, impl in IMPLS.items():
        monkeypatch.setattr(engine, "Lane", impl)
        tel = Telemetry()
        _stream_events(chunks, Policy(), hooks=(tel.hook,))
        (span,) = tel.attempts()
        beats = [e for e in span.events if e.name == S.EVENT_HEARTBEAT]
        stamps = [e.timestamp for e in beats]
        assert stamps == sorted(stamps) and all(span.start_time <= t <= span.end_time for t in stamps)
        points = [point.value for _, point in tel.points(S.M_HEARTBEATS[0])]
        seen[name] = ([dict(e.attributes) for e in beats], points)
    assert seen["native"] == seen["python"] == seen["general"]
    assert len(seen["general"][0]) > 0 and seen["general"][1] == [300 // every]


# -- one interface (lane.LaneLike), two classes that provide exactly it ----------------------------


def _c_lane() -> Any:
    """The C lane, built beside the reference whatever OTEL_LIVENESS_PURE selects (skip if not built)."""
    return pytest.importorskip("otel_liveness.core.wire._lane").Lane


def _public(cls: Any) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


_OBSERVED = sorted(name for name in _public(lane_mod.LaneLike) if isinstance(getattr(lane_mod.LaneLike, name), property))


def _params(signature: Any) -> list[tuple[str, Any]]:
    """A signature's parameters after ``self`` (names and kinds; the C methods have no annotations)."""
    params = list(signature.parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    return [(p.name, p.kind) for p in params]


@pytest.mark.parametrize("impl", ["python", "c"])
def test_both_lanes_provide_exactly_the_interface(impl: str) -> None:
    import inspect
    import typing

    cls = PyLane if impl == "python" else _c_lane()
    assert _public(cls) == _public(lane_mod.LaneLike)  # nothing more, nothing less
    assert _OBSERVED == ["frames", "heartbeats", "horizon", "last", "reads", "room", "semantic", "since"]
    assert _params(inspect.signature(cls)) == _params(inspect.signature(lane_mod.LaneLike.__init__))
    lane = cls([])
    for name in sorted(_public(lane_mod.LaneLike)):
        declared = getattr(lane_mod.LaneLike, name)
        if name in _OBSERVED:  # a count or a bound, read as a plain value of its declared type
            kind = typing.get_type_hints(declared.fget)["return"]
            assert type(getattr(lane, name)) is kind, name
        else:
            assert _params(inspect.signature(getattr(cls, name))) == _params(inspect.signature(declared)), name
    if lane_mod.NATIVE:  # the class the engine uses satisfies it too
        assert lane_mod.Lane is _c_lane()
    assert isinstance(lane_mod.Lane([]), (PyLane, _c_lane()))


_BOUNDARIES = [i + 2 for i in range(len(_PINGED_STREAM)) if _PINGED_STREAM.startswith(b"\n\n", i)]
_SCRIPT = st.lists(
    st.one_of(
        st.tuples(st.just("step")),  # the next read of the stream
        st.tuples(st.just("step")),
        st.tuples(st.just("step")),
        st.tuples(st.just("junk"), _chunks),  # a read outside the stream (the scanner gets it only if refused)
        st.tuples(st.just("open"), st.floats(-1, 8), st.floats(0, 3), st.floats(0, 60), st.integers(0, 2000)),
        st.tuples(st.just("close")),
        st.tuples(st.just("take")),
        st.tuples(st.just("take_beats")),
        st.tuples(st.just("attach"), st.booleans()),
    ),
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.one_of(st.sampled_from(_BOUNDARIES), st.integers(0, len(_PINGED_STREAM))), max_size=24),
       script=_SCRIPT, exact=st.booleans(), attached=st.sampled_from([True, True, False]))
def test_the_same_script_gives_the_same_observables_on_both_lanes(cuts: list[int], script: list[tuple[Any, ...]],
                                                                  exact: bool, attached: bool) -> None:
    # Every call of the interface, in any order, with or without a (beating) scanner attached: each
    # answer, every observable the interface declares, the kept prefix and the scanner's state equal
    # after every call -- take() and take_beats() included.
    c_lane = _c_lane()
    native_scanner = bulk.Scanner if bulk.NATIVE else bulk.PyScanner
    points = sorted(set(cuts))
    chunks = [_PINGED_STREAM[a:b] for a, b in zip([0, *points], [*points, len(_PINGED_STREAM)], strict=True)]
    lanes = []
    for lane_cls, scanner_cls in ((c_lane, native_scanner if exact else bulk.PyScanner), (PyLane, bulk.PyScanner)):
        keep: list[bytes] = []
        scanner = _scanner(scanner_cls)
        scanner.feed(b"\n")
        scanner.beating = True
        lane = lane_cls(keep)
        if attached:
            lane.attach(scanner)
        lanes.append((lane, scanner, keep))
    now = 0.0
    for op in script:
        now += 0.25
        answers = []
        for lane, scanner, _ in lanes:
            if op[0] in ("step", "junk"):
                chunk = op[1] if op[0] == "junk" else chunks[0] if chunks else b""
                admitted = lane.step(chunk, now)
                if not admitted and type(chunk) is bytes:
                    scanner.feed(chunk)  # the general path reads it
                answers.append(admitted)
            elif op[0] == "open":
                answers.append(lane.open(now + op[1], op[2], now + op[3], now, op[4]))
            elif op[0] == "attach":
                answers.append(lane.attach(scanner if op[1] else None))
            else:
                answers.append(getattr(lane, op[0])())
        if op[0] == "step" and chunks:
            chunks.pop(0)
        assert answers[0] == answers[1], op
        (a, sa, ka), (b, sb, kb) = lanes
        assert {n: getattr(a, n) for n in _OBSERVED} == {n: getattr(b, n) for n in _OBSERVED}, op
        assert (sa.buffered, sa.journal(), ka) == (sb.buffered, sb.journal(), kb), op


# -- one place the lane's counts are handed over: Attempt.absorb_lane ------------------------------


def test_the_lane_counts_have_one_hand_over() -> None:
    # take(), take_beats() and the clock's steady_reads() are called in one method of the package,
    # Attempt.absorb_lane; it is called in one place, Engine._settle, which the input wrapper calls
    # first thing in every input; the state table's module does not know the lane. The drivers
    # only step the lane: one body loop each, in Python.
    import ast
    import pathlib
    import re

    root = pathlib.Path(otel_liveness.__file__).parent
    calls: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))

        def walk(node: ast.AST, where: str, rel: str) -> None:
            for child in ast.iter_child_nodes(node):
                inner = where
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = f"{where}.{child.name}" if where else child.name
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                    name = child.func.attr
                    if name in ("take", "take_beats", "steady_reads", "absorb_lane"):
                        calls.setdefault(name, set()).add(f"{rel}:{inner}")
                walk(child, inner, rel)

        walk(tree, "", path.relative_to(root).as_posix())
    assert calls == {
        "take": {"core/attempt/attempt.py:Attempt.absorb_lane"},
        "take_beats": {"core/attempt/attempt.py:Attempt.absorb_lane"},
        "steady_reads": {"core/attempt/attempt.py:Attempt.absorb_lane"},
        "absorb_lane": {"core/request/engine.py:Engine._settle"},
    }
    assert not list((root / "transport").rglob("*.c")), "the transport has no C: its reads are one loop, in Python"
    assert not re.search(r"lane|absorb", (root / "core" / "request" / "state.py").read_text(), re.I)


def _engine_at_content(cls: Any, monkeypatch: pytest.MonkeyPatch, events: list[Any], policy: Policy | None = None) -> Any:
    from otel_liveness.core.request.facts import RequestFacts

    monkeypatch.setattr(engine, "Lane", cls)
    e = engine.Engine(policy or Policy(), RequestFacts(streaming=True, body_size=100), 0.0, provider="anthropic",
                      hooks=[events.append], wall_now=lambda: 1e9)
    e.start(0.0)
    e.headers(0.01, 200, {"content-type": "text/event-stream"})
    return e


def _books(e: Any, events: list[Any]) -> dict[str, Any]:
    from otel_liveness.core.attempt.clocks import AttemptClock

    attempt = e.attempt
    clock = {name: getattr(attempt.clock, name) for name in AttemptClock.__slots__}
    beats = [(ev.at, ev.count, ev.total) for ev in events if isinstance(ev, otel_liveness.Heartbeats)]
    return {"clock": clock, "released": attempt.ledger.released, "prefix": b"".join(attempt.ledger.prefix),
            "prefix_room": attempt.ledger.room, "beats": beats, "events": [type(ev).__name__ for ev in events]}


@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize(("seed", "every"), [(0, 1), (1, 3), (2, 7), (3, 50)])
def test_after_each_hand_over_the_books_equal_the_general_paths(monkeypatch: pytest.MonkeyPatch, impl: str,
                                                               seed: int, every: int) -> None:
    # Read by read, the same stream through an engine whose lane admits what it can and through one
    # whose lane admits nothing: once the lane's counts are handed over (absorb_lane), every field
    # of the clock, the released count, the prefix and the heartbeats announced are the same.
    chunks = _pinged_chunks(seed, every)
    seen: dict[str, Any] = {}
    for name in ("general", impl):
        events: list[Any] = []
        e = _engine_at_content(IMPLS[name], monkeypatch, events)
        body, admitted, books = b"", 0, []
        now = 0.01
        for chunk in chunks:
            now += 0.01
            if e.lane.step(chunk, now):
                body += chunk
                admitted += 1
            else:
                command = e.received(now, chunk)
                body += command if type(command) is bytes else getattr(command, "first", b"")
            e.attempt.absorb_lane()
            books.append(_books(e, events))
        seen[name] = (body, books)
        assert (admitted == 0) if name == "general" else (admitted > len(chunks) // 3), (name, admitted)
    assert seen["general"][0] == seen[impl][0] == b"".join(chunks)
    for i, (general, lane) in enumerate(zip(seen["general"][1], seen[impl][1], strict=True)):
        assert general == lane, i


def _play(cls: Any, monkeypatch: pytest.MonkeyPatch, script: list[tuple[float, bytes]],
          policy: Policy) -> tuple[tuple[list[Any], list[dict[str, Any]], list[str]], list[bytes]]:
    """``script``'s reads (``(time, chunk)``) through an engine at content whose lane is ``cls``,
    each read offered to the lane first: ``((answers, books after each read, event names), the
    reads the lane took)``."""
    events: list[Any] = []
    e = _engine_at_content(cls, monkeypatch, events, policy)
    admitted: list[bytes] = []
    books: list[dict[str, Any]] = []
    answers: list[Any] = []
    for now, chunk in script:
        if e.ended:
            break
        if e.lane.step(chunk, now):
            admitted.append(chunk)
            answers.append(chunk)
        else:
            answer = e.received(now, chunk)
            answers.append(answer if type(answer) is bytes else type(answer).__name__)
        e.attempt.absorb_lane()
        books.append(_books(e, events))
    return (answers, books, [type(ev).__name__ for ev in events]), admitted


@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize("semantic_timeout", [None, 200.0])
def test_a_silence_of_pings_after_content_takes_the_lane_and_keeps_every_semantic_deadline(
        monkeypatch: pytest.MonkeyPatch, impl: str, semantic_timeout: float | None) -> None:
    # Content, then a model thinking between blocks: a ping every 27 s for five minutes (Anthropic's
    # cadence), each read of its own, then content again. On a fake clock, through a lane that takes
    # what it can and through one that takes nothing: the pings before each semantic deadline take
    # the lane, and the notices (every 30 s without content), the timeout's verdict and every field
    # of the books are the same as the general path's, read by read.
    script: list[tuple[float, bytes]] = [(0.02 + 0.01 * i, DELTA) for i in range(5)]
    script += [(0.06 + 27.0 * k, PING) for k in range(1, 12)]
    script += [(300.0, DELTA), (300.01, DELTA)]
    seen: dict[str, Any] = {}
    for name in ("general", impl):
        seen[name], admitted = _play(IMPLS[name], monkeypatch, script, Policy(semantic_timeout=semantic_timeout))
        if name != "general":
            assert any(chunk is PING for chunk in admitted), "no ping took the lane"
    assert seen["general"] == seen[impl]
    notices = seen["general"][2].count("SemanticNotice")
    if semantic_timeout is None:
        assert notices >= 9 and seen["general"][0][-1] == DELTA  # one per 30 s of the 300 s; the reply goes on
    else:
        # the timeout's verdict, on the first read past it (the ping at 216 s: released, then the failure)
        assert seen["general"][0][-1] == "Release" and len(seen["general"][0]) == 5 + 8 and notices >= 6


@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize("semantic_timeout", [None, 90.0])
def test_reads_that_end_inside_a_frame_take_the_lane_and_keep_every_deadline(
        monkeypatch: pytest.MonkeyPatch, impl: str, semantic_timeout: float | None) -> None:
    # A network read may end anywhere: inside a delta, inside a ping. Such a read completes no frame
    # (raw progress only, like a read of pings alone). Content cut into reads of 1 to 40 bytes, some
    # seconds apart (a slow link), so that notices and the semantic timeout fall due among them: on
    # a fake clock, through a lane that takes what it can and through one that takes nothing, the
    # answers, every field of the books and the events are the same, read by read.
    stream = (DELTA * 3 + PING + DELTA) * 3 + PING * 8 + DELTA * 2  # then a thinking pause: pings alone
    rng = random.Random(7)
    script: list[tuple[float, bytes]] = [(0.02, DELTA)]
    now, i = 0.02, 0
    while i < len(stream):
        take = rng.randint(1, 40)
        now += rng.choice([0.01, 0.5, 4.0, 13.0, 27.0])
        script.append((now, stream[i : i + take]))
        i += take
    seen: dict[str, Any] = {}
    for name in ("general", impl):
        seen[name], admitted = _play(IMPLS[name], monkeypatch, script, Policy(semantic_timeout=semantic_timeout))
        if name != "general":
            assert sum(b"\n\n" not in chunk for chunk in admitted) > 5, "no read that ends inside a frame took the lane"
    assert seen["general"] == seen[impl]
    kinds = seen["general"][2]
    assert kinds.count("SemanticNotice") >= 1
    if semantic_timeout is not None:
        assert "Verdict" in kinds and seen["general"][0][-1] in ("Fail", "Release")


class _Declines:
    """A hook that declines every request's heartbeats (``TakesHeartbeats``) and records what it gets."""

    def __init__(self, answer: Any = False) -> None:
        self.events: list[Any] = []
        self.asked: list[Any] = []
        self.answer = answer

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def takes_heartbeats(self, report: Any) -> bool:
        self.asked.append(report)
        if isinstance(self.answer, Exception):
            raise self.answer
        return bool(self.answer)


def _stream_with_hooks(monkeypatch: pytest.MonkeyPatch, impl: str, hooks: list[Any]) -> Any:
    """The pinged reply (a ping every 3 deltas) read to its end through an engine with ``hooks``,
    each read offered to the lane (``impl``) first."""
    from otel_liveness.core.request.facts import RequestFacts

    monkeypatch.setattr(engine, "Lane", IMPLS[impl])
    e = engine.Engine(Policy(), RequestFacts(streaming=True, body_size=100), 0.0, provider="anthropic",
                      hooks=hooks, wall_now=lambda: 1e9)
    e.start(0.0)
    e.headers(0.01, 200, {"content-type": "text/event-stream"})
    now = 0.01
    for chunk in _pinged_chunks(5, 3):
        now += 0.01
        if not e.lane.step(chunk, now):
            e.received(now, chunk)
    e.eof(now + 0.01)
    assert e.ended
    return e


@pytest.mark.parametrize("impl", ["general", "native", "python"])
def test_a_hook_that_declines_heartbeats_gets_every_other_event_and_the_others_get_them_all(
        monkeypatch: pytest.MonkeyPatch, impl: str) -> None:
    alone: list[Any] = []
    _stream_with_hooks(monkeypatch, impl, [alone.append])
    beats = [(ev.at, ev.count, ev.total) for ev in alone if isinstance(ev, otel_liveness.Heartbeats)]
    assert len(beats) > 10 and beats[-1][2] == sum(count for _, count, _ in beats)

    taking: list[Any] = []
    declining = _Declines()
    e = _stream_with_hooks(monkeypatch, impl, [taking.append, declining])
    assert [(ev.at, ev.count, ev.total) for ev in taking if isinstance(ev, otel_liveness.Heartbeats)] == beats
    assert [type(ev) for ev in declining.events] == [type(ev) for ev in taking
                                                     if not isinstance(ev, otel_liveness.Heartbeats)]
    assert declining.asked == [e.report]  # once a request
    assert e.published["attempts"][0]["heartbeats"] == beats[-1][2]


@pytest.mark.parametrize("impl", ["general", "native"])
def test_when_every_hook_declines_no_heartbeats_event_is_made_and_the_count_stays(
        monkeypatch: pytest.MonkeyPatch, impl: str) -> None:
    from otel_liveness.core.request import report as report_module
    made: list[Any] = []

    class Counted(otel_liveness.Heartbeats):  # type: ignore[misc]
        def __init__(self, *args: Any) -> None:
            made.append(args)
            super().__init__(*args)

    monkeypatch.setattr(report_module, "Heartbeats", Counted)
    taking: list[Any] = []
    counted = _stream_with_hooks(monkeypatch, impl, [taking.append])
    assert made and len(made) == sum(isinstance(ev, otel_liveness.Heartbeats) for ev in taking)
    made.clear()
    declining = _Declines()
    e = _stream_with_hooks(monkeypatch, impl, [declining])
    assert made == [] and not any(isinstance(ev, otel_liveness.Heartbeats) for ev in declining.events)
    assert e.published["attempts"][0]["heartbeats"] == counted.published["attempts"][0]["heartbeats"] > 10


def test_a_hook_whose_answer_fails_gets_the_heartbeats_and_the_failure_is_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    failing = _Declines(RuntimeError("no answer"))
    e = _stream_with_hooks(monkeypatch, "native", [failing])
    assert any(isinstance(ev, otel_liveness.Heartbeats) for ev in failing.events)
    assert e.hook_errors == 1 and failing.asked == [e.report]


def test_hooks_changed_mid_request_are_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_liveness.core.request.facts import RequestFacts

    monkeypatch.setattr(engine, "Lane", IMPLS["general"])
    declining, later = _Declines(), _Declines(True)
    e = engine.Engine(Policy(), RequestFacts(streaming=True, body_size=100), 0.0, provider="anthropic",
                      hooks=[declining], wall_now=lambda: 1e9)
    e.start(0.0)
    e.headers(0.01, 200, {"content-type": "text/event-stream"})
    chunks = _pinged_chunks(5, 3)
    half = len(chunks) // 2
    for i, chunk in enumerate(chunks[:half]):
        e.received(0.02 + i * 0.01, chunk)
    e.hooks = [declining, later]
    for i, chunk in enumerate(chunks[half:]):
        e.received(1.0 + i * 0.01, chunk)
    assert len(declining.asked) == 2 and later.asked == [e.report]
    assert not any(isinstance(ev, otel_liveness.Heartbeats) for ev in declining.events)
    assert any(isinstance(ev, otel_liveness.Heartbeats) for ev in later.events)
