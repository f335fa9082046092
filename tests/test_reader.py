"""The sync body's steady reads in C (``transport._reader.Reader``, stepping the C lane through its
capsule): the same bytes, report and errors as the body's own Python loop, the protocol between the
reader and the body, and a dropped reader closing its body at once."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

import otel_liveness
from otel_liveness import Policy, StreamTruncated
from otel_liveness.core.wire import bulk
from otel_liveness.core.wire.lane import PyLane
from otel_liveness.core.wire.providers import PREFIX, profile_for
from otel_liveness.transport._backends import AsyncBackend, SyncBackend

from .test_lane import DELTA, PING, _reply_chunks

pytestmark = pytest.mark.skipif(SyncBackend.steady_reader is None, reason="the C lane is not built (or OTEL_LIVENESS_PURE)")

KEYS = profile_for("anthropic").semantic_keys
STEADY = object()


def test_the_sync_backend_has_the_reader_and_the_async_one_none() -> None:
    if os.environ.get("OTEL_LIVENESS_ALLOW_PURE_LANE") or bulk.PURE:
        pytest.skip("pure-Python lane allowed")
    assert SyncBackend.steady_reader is not None and SyncBackend.steady_lane is not PyLane
    assert AsyncBackend.steady_reader is None  # an async body awaits each read: its own loop


class _Body(httpx2.SyncByteStream):
    """Chunks, then (optionally) an I/O error; records when it is closed."""

    def __init__(self, chunks: list[bytes], fail_after: int | None = None) -> None:
        self.chunks = chunks
        self.fail_after = fail_after
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for i, chunk in enumerate(self.chunks):
            if self.fail_after is not None and i == self.fail_after:
                raise httpx2.ReadError("connection reset")
            yield chunk

    def close(self) -> None:
        self.closed = True


def _read(chunks: list[bytes], *, fail_after: int | None = None, limit: int | None = None,
          policy: Policy | None = None) -> tuple[bytes, dict[str, Any], str | None]:
    def handler(request: Any) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(chunks, fail_after))

    body, error = b"", None
    with httpx2.Client(transport=otel_liveness.wrap(httpx2.MockTransport(handler), policy or Policy())) as client:
        with client.stream("POST", "https://api.anthropic.com/v1/messages", json={"stream": True}) as response:
            try:
                for chunk in response.iter_raw():
                    body += chunk
                    if limit is not None and len(body) >= limit:
                        break
            except (StreamTruncated, httpx2.HTTPError) as exc:
                error = f"{type(exc).__name__}: {getattr(exc, 'cause', '')}"
            report = response.extensions["liveness"]
    attempt = report["attempts"][0]
    counts = {k: attempt[k] for k in ("outcome", "frames", "heartbeats", "bytes_received", "error_type", "phase",
                                      "completion", "usage")}
    return body, {"stop": report["stop_reason"], "cause": report["cause"], **counts}, error


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", ["whole", "early_close", "io_error", "eof_mid_reply"])
def test_the_reader_and_the_body_loop_give_the_same(monkeypatch: pytest.MonkeyPatch, seed: int, case: str) -> None:
    chunks = _reply_chunks(seed)
    kwargs: dict[str, Any] = {
        "whole": {},
        "early_close": {"limit": 20_000},
        "io_error": {"fail_after": len(chunks) // 2},
        "eof_mid_reply": {},
    }[case]
    if case == "eof_mid_reply":
        chunks = chunks[: len(chunks) // 2]
    seen = [_read(chunks, **kwargs)]
    monkeypatch.setattr(SyncBackend, "steady_reader", None)  # the body's own Python loop
    seen.append(_read(chunks, **kwargs))
    assert seen[0] == seen[1]
    _, report, error = seen[0]
    expected = {"whole": ("completed", None), "early_close": ("cancelled", None),
                "io_error": ("truncated", "StreamTruncated: read_error"),
                "eof_mid_reply": ("truncated", "StreamTruncated: eof")}[case]
    assert (report["stop"], error) == expected, report
    assert report["frames"] > 50


def test_a_reader_dropped_unfinished_closes_the_body_at_once() -> None:
    chunks = _reply_chunks(0)
    inner = _Body(chunks)

    def handler(request: Any) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=inner)

    transport = otel_liveness.wrap(httpx2.MockTransport(handler))
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages", json={"stream": True})
    response = transport.handle_request(request)
    gc.disable()
    try:
        reader = iter(response.stream)
        assert type(reader) is SyncBackend.steady_reader
        for _ in range(20):
            next(reader)
        assert not inner.closed
        del reader  # no reference cycle: the body is closed now, not at the next collection
        assert inner.closed
    finally:
        gc.enable()
    assert response.extensions["liveness"]["stop_reason"] == "cancelled"


def _lane(room: int = 0) -> Any:
    lane = SyncBackend.steady_lane(KEYS, PREFIX, 1 << 20, [])
    lane.open(100.0, 10.0, 1000.0, 0.0, room)
    return lane


def _body(log: list[Any], *, outputs: Iterator[Any]) -> Iterator[Any]:
    """A body that hands its reads to the reader, logging what the reader sends or throws in."""
    yield b"first"
    while True:
        try:
            taken = yield STEADY
        except Exception as exc:  # logged; the body then ends, as the driver's would
            log.append(("thrown", type(exc).__name__, str(exc)))
            yield b"after-error"
            return
        log.append(("sent", taken))
        if taken is None:
            yield b"end"
            return
        yield next(outputs)


def test_the_reader_returns_admitted_reads_and_sends_the_others_into_the_body() -> None:
    log: list[Any] = []
    times = iter([1.0, 2.0, 3.0, 4.0, 5.0])
    chunks = [DELTA, DELTA, PING, DELTA]
    lane = _lane(room=len(DELTA))
    reader = SyncBackend.steady_reader(lane, iter(chunks), lambda: next(times), _body(log, outputs=iter([b"judged"])), STEADY)
    out = list(reader)
    # the ping is not admitted: sent into the body with its time; the end is sent as None
    assert out == [b"first", DELTA, DELTA, b"judged", DELTA, b"end"]
    assert log == [("sent", (3.0, PING)), ("sent", None)]
    assert lane.reads == 3 and lane.frames == 3 and lane.last == 4.0 and lane.room == 0
    assert list(reader) == []  # finished: stays finished


def test_an_exception_of_the_read_or_the_clock_is_thrown_into_the_body() -> None:
    def failing() -> Iterator[bytes]:
        yield DELTA
        raise OSError("reset")

    log: list[Any] = []
    reader = SyncBackend.steady_reader(_lane(), failing(), lambda: 1.0, _body(log, outputs=iter(())), STEADY)
    assert list(reader) == [b"first", DELTA, b"after-error"]
    assert log == [("thrown", "OSError", "reset")]

    def clock() -> float:
        raise ValueError("no time")

    log.clear()
    reader = SyncBackend.steady_reader(_lane(), iter([DELTA]), clock, _body(log, outputs=iter(())), STEADY)
    assert list(reader) == [b"first", b"after-error"]
    assert log == [("thrown", "ValueError", "no time")]


def test_an_exception_the_body_does_not_catch_propagates_and_ends_it() -> None:
    def body() -> Iterator[Any]:
        yield STEADY

    def failing() -> Iterator[bytes]:
        raise KeyError("boom")
        yield b""  # pragma: no cover

    reader = SyncBackend.steady_reader(_lane(), failing(), lambda: 1.0, body(), STEADY)
    with pytest.raises(KeyError):
        next(reader)
    assert list(reader) == []


def test_the_reader_wants_the_c_lane_and_iterators() -> None:
    reader = SyncBackend.steady_reader
    with pytest.raises(TypeError):
        reader(PyLane(KEYS, PREFIX, 1 << 20, []), iter(()), lambda: 0.0, iter(()), STEADY)
    with pytest.raises(TypeError):
        reader(_lane(), [], lambda: 0.0, iter(()), STEADY)
    with pytest.raises(TypeError):
        reader(_lane(), iter(()), 1.0, iter(()), STEADY)
    with pytest.raises(RuntimeError):
        next(reader.__new__(reader))  # never initialised: an error, not a crash


def test_a_second_thread_iterating_the_same_body_is_refused_and_changes_nothing() -> None:
    import threading

    entered, release = threading.Event(), threading.Event()

    def slow() -> Iterator[bytes]:
        yield DELTA
        entered.set()
        release.wait(5)  # (the GIL is released while this thread waits, as in a socket read)
        yield DELTA

    log: list[Any] = []
    reader = SyncBackend.steady_reader(_lane(), slow(), lambda: 1.0, _body(log, outputs=iter(())), STEADY)
    assert next(reader) == b"first" and next(reader) == DELTA
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(next(reader)))
    worker.start()
    assert entered.wait(5)
    with pytest.raises(ValueError, match="already executing"):
        next(reader)  # as a generator running in another thread: refused, the body untouched
    with pytest.raises(RuntimeError):
        reader.__init__(_lane(), iter(()), lambda: 0.0, iter(()), STEADY)  # type: ignore[misc]
    release.set()
    worker.join(5)
    assert got == [DELTA] and list(reader) == [b"end"] and log == [("sent", None)]


def test_given_time_monotonic_the_reader_reads_the_same_clock_in_c() -> None:
    # time.monotonic itself is read in C (CLOCK_MONOTONIC, converted as CPython converts it): each
    # read's time lies between the monotonic readings around it, a read that goes to the body is
    # sent with a float of the same clock, and a lane horizon in that clock still applies.
    import time

    log: list[Any] = []
    lane = SyncBackend.steady_lane(KEYS, PREFIX, 1 << 20, [])
    before = time.monotonic()
    lane.open(before + 100.0, 10.0, before + 1000.0, before, 0)
    reader = SyncBackend.steady_reader(lane, iter([DELTA, PING, DELTA]), time.monotonic,
                                       _body(log, outputs=iter([b"judged"])), STEADY)
    assert next(reader) == b"first" and next(reader) == DELTA
    first = lane.last
    between = time.monotonic()
    assert list(reader) == [b"judged", DELTA, b"end"]
    after = time.monotonic()
    sent = log[0][1]
    assert type(sent[0]) is float and sent[1] == PING
    assert before <= first <= between <= sent[0] <= lane.last <= after
    # a horizon already past: nothing is admitted, every read goes to the body with its time
    log.clear()
    lane.open(time.monotonic() - 1.0, 10.0, 1e18, 0.0, 0)
    reader = SyncBackend.steady_reader(lane, iter([DELTA]), time.monotonic, _body(log, outputs=iter([b"late"])), STEADY)
    assert list(reader) == [b"first", b"late", b"end"] and log[0][1][1] == DELTA


def test_a_fake_monotonic_installed_before_import_is_called_not_bypassed() -> None:
    # A Python function put in time.monotonic's place before the C reader is imported (a fake clock)
    # must be called: the reader reads CLOCK_MONOTONIC itself only for the builtin.
    import subprocess
    import sys

    code = """
import time
time.monotonic = lambda: 42.0
from otel_liveness.core.wire import _lane
from otel_liveness.transport import _reader
from otel_liveness.core.wire.providers import PREFIX, profile_for
lane = _lane.Lane(profile_for("anthropic").semantic_keys, PREFIX, 1 << 20, [])
lane.open(100.0, 10.0, 1000.0, 0.0, 0)
STEADY = object()
def body():
    yield b"first"
    yield STEADY
D = (b'event: content_block_delta\\ndata: {"type":"content_block_delta","index":0,'
     b'"delta":{"type":"text_delta","text":"t"}}\\n\\n')
out = list(_reader.Reader(lane, iter([D]), time.monotonic, body(), STEADY))
print(len(out), lane.last)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["2", "42.0"]


def test_the_reader_steps_the_lane_through_its_capsule_which_checks_the_lane() -> None:
    # The reader calls the lane's step() from C (core/wire/lane_api.h): the lane is checked as step()
    # checks it, so one whose __init__ never ran is an error thrown into the body, not a crash.
    from otel_liveness.core.wire import _lane
    assert type(_lane._C_API).__name__ == "PyCapsule"  # type: ignore[attr-defined]
    log: list[Any] = []
    lane = SyncBackend.steady_lane.__new__(SyncBackend.steady_lane)
    reader = SyncBackend.steady_reader(lane, iter([DELTA]), lambda: 1.0, _body(log, outputs=iter(())), STEADY)
    assert list(reader) == [b"first", b"after-error"]
    assert log == [("thrown", "RuntimeError", "Lane.__init__() was not called")]


def test_without_the_c_lane_the_reader_does_not_import_and_the_body_runs_its_own_loop() -> None:
    # The reader is built beside the C lane and needs its capsule: a machine where the lane did not
    # build (or is blocked here) gets an ImportError naming the capsule, and no reader.
    import subprocess
    import sys

    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "otel_liveness.core.wire._lane":
            raise ModuleNotFoundError("blocked " + name, name=name)
sys.meta_path.insert(0, Block())
from otel_liveness.core.wire import lane
from otel_liveness.transport._backends import SyncBackend
try:
    import otel_liveness.transport._reader
except ImportError as exc:
    print(type(exc).__name__, "_lane._C_API" in str(exc))
print(lane.NATIVE, SyncBackend.steady_reader, SyncBackend.steady_lane)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["ImportError", "True", "False", "None", "None"]
