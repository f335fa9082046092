"""The three-clock state machine, driven by explicit timestamps (no sleeping, no patching)."""

from __future__ import annotations

import pytest

from otel_liveness.core.attempt.clocks import (
    CONTINUE,
    AttemptClock,
    Notice,
    RawSilenceExpired,
    SemanticTimeoutExpired,
    WallBudgetExpired,
)
from otel_liveness.core.outcome import FrameKind, NoticeKind, Phase

H, P, S, E = FrameKind.HEARTBEAT, FrameKind.PREAMBLE, FrameKind.SEMANTIC, FrameKind.END


def drain(clock: AttemptClock, now: float) -> list[object]:
    out = []
    while (item := clock.poll(now)) is not CONTINUE:
        out.append(item)
        if not isinstance(item, Notice):
            break
    return out


def run(script: list[tuple[float, FrameKind | str]], **config: float | None) -> tuple[AttemptClock, list[object]]:
    """Feed (time, frame kind | 'headers' | 'release' | 'poll') and collect every verdict. Between
    events a read is waiting, begun when the last byte arrived (a reader that never pauses)."""
    clock = AttemptClock(0.0, **config)  # type: ignore[arg-type]
    clock.request_sent(0.0)
    seen: list[object] = []
    for t, what in script:
        seen += drain(clock, t)
        if clock.terminal is None and (expired := clock.expired(t, clock.last_raw)) is not None:
            seen.append(expired)
        if clock.terminal is not None:
            break
        if what == "headers":
            clock.headers(t)
        elif isinstance(what, FrameKind):
            clock.received(t, 10)
            clock.frames_at(t, [what])
    return clock, seen


def test_heartbeats_keep_an_attempt_alive_far_past_any_semantic_budget() -> None:
    # Ten minutes of pings every 10 s and no content: never a failure, a notice every 30 s.
    script: list[tuple[float, FrameKind | str]] = [(0.1, "headers"), (0.2, P)]
    script += [(float(t), H) for t in range(10, 601, 10)]
    script += [(601.0, S), (602.0, E)]
    clock, seen = run(script, raw_idle=60.0, notice_every=30.0)
    assert all(isinstance(v, Notice) for v in seen)
    assert [v.at for v in seen] == [30.0 * k for k in range(1, 21)]  # type: ignore[attr-defined]
    assert clock.phase is Phase.DONE and clock.terminal is None
    assert clock.heartbeats == 60
    assert clock.max_semantic_gap == pytest.approx(601.0)


def test_notice_fields_and_rearming_after_content() -> None:
    _, seen = run(
        [(1.0, "headers"), (5.0, H), (12.0, H), (19.0, S), (31.0, H), (45.0, H), (50.0, "poll")],
        raw_idle=60.0,
        notice_every=10.0,
    )
    # Due at 10 (idle 10, raw idle 5, 1 heartbeat); the semantic frame at 19 re-arms: 29, 39, 49.
    first = seen[0]
    assert isinstance(first, Notice)
    assert (first.at, first.semantic_idle, first.raw_idle, first.heartbeats_since_semantic) == (10.0, 10.0, 5.0, 1)
    assert [n.at for n in seen] == [10.0, 29.0, 39.0, 49.0]  # type: ignore[attr-defined]
    assert [n.heartbeats_since_semantic for n in seen] == [1, 0, 1, 2]  # type: ignore[attr-defined]
    assert [n.number for n in seen] == [1, 2, 3, 4]  # type: ignore[attr-defined]


def test_notices_never_fail_without_a_semantic_timeout() -> None:
    clock, seen = run([(1.0, "headers")] + [(float(t), H) for t in range(5, 3600, 5)], raw_idle=30.0, notice_every=60.0)
    assert clock.terminal is None and len(seen) == 59


@pytest.mark.parametrize(
    ("script", "phase", "at"),
    [
        ([(0.0, "poll"), (31.0, "poll")], Phase.AWAITING_HEADERS, 30.0),  # stalled open
        ([(1.0, "headers"), (2.0, P), (40.0, "poll")], Phase.PREAMBLE, 32.0),  # headers, then nothing
        ([(1.0, "headers"), (2.0, S), (50.0, "poll")], Phase.STREAMING, 32.0),
    ],
    ids=["before-headers", "before-content", "after-content"],
)
def test_raw_silence_reports_phase(script, phase, at) -> None:  # type: ignore[no-untyped-def]
    _, seen = run(script, raw_idle=30.0, notice_every=None)
    (verdict,) = seen
    assert verdict == RawSilenceExpired(at=at, idle=30.0, phase=phase)


def test_raw_clock_exempt_when_none() -> None:
    clock, seen = run([(1.0, "headers"), (10_000.0, "poll")], raw_idle=None, notice_every=None)
    inf = float("inf")
    assert seen == [] and (clock.read_deadline(1.0), clock.hints(True)[1], clock.next_notice_at()) == (inf, inf, inf)


def test_semantic_timeout_only_when_configured() -> None:
    script = [(1.0, "headers")] + [(float(t), H) for t in range(5, 200, 5)]
    _, seen = run(script, raw_idle=30.0, notice_every=None, semantic_timeout=100.0)
    assert seen == [SemanticTimeoutExpired(at=100.0, idle=100.0, phase=Phase.PREAMBLE)]


def test_wall_budget_fires_even_while_bytes_trickle() -> None:
    script = [(1.0, "headers")] + [(t / 2, S) for t in range(3, 100)]
    _, seen = run(script, raw_idle=30.0, notice_every=None, wall_deadline=20.0, wall_budget=20.0)
    assert seen == [WallBudgetExpired(at=20.0, budget=20.0, phase=Phase.STREAMING)]


def test_earliest_deadline_wins_and_notice_precedes_terminal() -> None:
    clock = AttemptClock(0.0, raw_idle=30.0, notice_every=10.0, semantic_timeout=25.0)
    clock.headers(0.0)
    assert clock.next_notice_at() == 10.0
    assert clock.hints(True)[1] == 25.0 and clock.read_deadline(0.0) == 30.0  # the stop hint: the semantic deadline
    items = drain(clock, 100.0)
    # Notices before the semantic deadline (the one at 30 is not: the failure comes first).
    assert [type(i).__name__ for i in items] == ["Notice", "Notice", "SemanticTimeoutExpired"]
    assert clock.poll(200.0) is items[-1] and clock.expired(200.0, 0.0) is items[-1]  # terminal verdicts repeat
    assert clock.next_notice_at() == float("inf") and clock.hints(True)[1] == float("inf")


def test_a_read_is_judged_from_its_own_start() -> None:
    # A caller that paused 100 s with bytes waiting: the read that gets them is progress, and the
    # raw bound runs from the start of each read, not from the last byte.
    clock = AttemptClock(0.0, raw_idle=30.0, notice_every=None)
    clock.headers(0.0)
    clock.received(1.0, 10)
    assert clock.expired(101.0, start=100.0) is None  # began at 100 (after the pause), still in bound
    clock.received(101.0, 10)
    assert clock.expired(130.9, start=101.0) is None
    verdict = clock.expired(131.0, start=101.0)
    assert verdict == RawSilenceExpired(at=131.0, idle=30.0, phase=Phase.PREAMBLE)


def test_first_byte_bound_until_the_body_starts() -> None:
    clock = AttemptClock(0.0, raw_idle=30.0, first_byte=240.0, notice_every=60.0)
    clock.request_sent(0.0)
    assert clock.read_deadline(0.0) == 240.0
    clock.headers(5.0)  # a gateway that flushes headers early: still the first-byte wait
    assert clock.read_deadline(5.0) == 240.0 and clock.expired(239.0, 5.0) is None
    assert [n.kind for n in drain(clock, 200.0)] == [NoticeKind.PREFILL] * 3
    clock.received(200.0, 5)
    assert clock.read_deadline(200.0) == 230.0 and clock.first_byte == 200.0
    assert clock.poll_notice(260.0).kind is NoticeKind.SEMANTIC  # type: ignore[union-attr]


def test_first_byte_expiry_is_marked() -> None:
    clock = AttemptClock(0.0, raw_idle=30.0, first_byte=100.0)
    clock.request_sent(0.0)
    verdict = clock.expired(100.0, 0.0)
    assert verdict == RawSilenceExpired(at=100.0, idle=100.0, phase=Phase.AWAITING_HEADERS, first_byte=True)


def test_learned_raw_bound() -> None:
    clock = AttemptClock(0.0, raw_idle=90.0, adaptive=(0.2, None))
    clock.headers(0.0)
    clock.received(0.0, 10)
    assert clock.raw_bound() == 90.0  # nothing learned before two heartbeats
    for t in (1.0, 1.1, 1.2, 1.3):
        clock.received(t, 10)
        clock.frames_at(t, [H])
    assert clock.raw_bound() == pytest.approx(0.3)  # max(floor, 3 x 0.1)
    clock.received(1.55, 10)
    clock.frames_at(1.55, [H])  # one 2.5x-late ping: well inside, and it teaches a longer cadence
    assert clock.raw_bound() == pytest.approx(0.75)
    clock.received(2.0, 10)
    clock.frames_at(2.0, [S])  # content is not a keep-alive cadence
    assert clock.raw_bound() == pytest.approx(0.75)
    learned = AttemptClock(0.0, raw_idle=90.0, adaptive=(0.2, 25.0))
    learned.frames_at(1.0, [H, H])
    assert learned.raw_bound() == 75.0  # what recent attempts to the host showed: never tighter
    capped = AttemptClock(0.0, raw_idle=60.0, adaptive=(0.2, None))
    capped.frames_at(0.0, [H])
    capped.frames_at(31.0, [H])
    assert capped.raw_bound() == 60.0  # never above the fixed bound


def test_end_frame_stops_every_clock() -> None:
    clock = AttemptClock(0.0, raw_idle=5.0, notice_every=1.0, wall_deadline=9.0, wall_budget=9.0)
    clock.headers(0.5)
    clock.frames_at(1.0, [S])
    clock.frames_at(1.5, [E])
    assert clock.poll(1000.0) is CONTINUE
    assert clock.hints(True)[1] == float("inf") and clock.next_notice_at() == float("inf")
    # Reads still end at the raw bound: a silent rest of the body only holds the connection.
    assert clock.read_deadline(1.5) == 6.5


def test_counters_and_first_times() -> None:
    clock = AttemptClock(100.0, raw_idle=60.0)
    clock.request_sent(100.0)
    clock.headers(100.5)
    clock.received(101.0, 40)
    clock.frames_at(101.0, [P])
    clock.received(130.0, 10)
    clock.frames_at(130.0, [H])
    clock.received(170.0, 90)
    clock.frames_at(170.0, [S])
    assert (clock.first_byte, clock.first_semantic) == (1.0, 70.0)  # the first *body* byte
    assert (clock.bytes, clock.frames, clock.heartbeats) == (140, 3, 1)
    assert clock.max_raw_gap == 40.0 and clock.max_semantic_gap == 70.0


@pytest.mark.parametrize(
    "kinds",
    [[], [H, H], [H, S, H], [P, H, S, S, E], [FrameKind.UNKNOWN, H], [S, H, H, FrameKind.ERROR]],
)
def test_frames_at_equals_frame_by_frame(kinds: list[FrameKind]) -> None:
    one, batch = (AttemptClock(0.0, raw_idle=60.0, notice_every=10.0, adaptive=(1.0, None)) for _ in range(2))
    for clock in (one, batch):
        clock.headers(1.0)
        clock.frames_at(2.0, [H])
    for kind in kinds:
        one.frames_at(5.0, [kind])
    batch.frames_at(5.0, kinds)
    for name in AttemptClock.__slots__:
        assert getattr(one, name) == getattr(batch, name), name
