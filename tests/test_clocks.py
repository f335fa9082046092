"""The three-clock state machine, driven by explicit timestamps (no sleeping, no patching)."""

from __future__ import annotations

import pytest

from otel_liveness.core.clocks import (
    CONTINUE,
    AttemptClock,
    Notice,
    RawSilenceExpired,
    SemanticTimeoutExpired,
    WallBudgetExpired,
)
from otel_liveness.core.outcome import FrameKind, Phase

H, P, S, E = FrameKind.HEARTBEAT, FrameKind.PREAMBLE, FrameKind.SEMANTIC, FrameKind.END


def drain(clock: AttemptClock, now: float) -> list[object]:
    out = []
    while (item := clock.poll(now)) is not CONTINUE:
        out.append(item)
        if not isinstance(item, Notice):
            break
    return out


def run(script: list[tuple[float, FrameKind | str]], **config: float | None) -> tuple[AttemptClock, list[object]]:
    """Feed (time, frame kind | 'headers' | 'release' | 'poll') and collect every verdict."""
    clock = AttemptClock(0.0, **config)  # type: ignore[arg-type]
    clock.request_sent(0.0)
    seen: list[object] = []
    for t, what in script:
        seen += drain(clock, t)
        if clock.terminal is not None:
            break
        if what == "headers":
            clock.headers(t)
        elif what == "release":
            clock.released()
        elif isinstance(what, FrameKind):
            clock.received(t, 10)
            clock.frame(t, what)
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
    clock, seen = run(
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
    ("script", "phase", "committed", "at"),
    [
        ([(0.0, "poll"), (31.0, "poll")], Phase.AWAITING_HEADERS, False, 30.0),  # stalled open
        ([(1.0, "headers"), (2.0, P), (40.0, "poll")], Phase.PREAMBLE, False, 32.0),  # headers, then nothing
        ([(1.0, "headers"), (2.0, S), (3.0, "release"), (50.0, "poll")], Phase.STREAMING, True, 32.0),
    ],
    ids=["before-headers", "before-content", "after-content"],
)
def test_raw_silence_reports_phase_and_commitment(script, phase, committed, at) -> None:  # type: ignore[no-untyped-def]
    _, seen = run(script, raw_idle=30.0, notice_every=None)
    (verdict,) = seen
    assert verdict == RawSilenceExpired(at=at, idle=30.0, phase=phase, committed=committed)


def test_raw_clock_exempt_when_none() -> None:
    clock, seen = run([(1.0, "headers"), (10_000.0, "poll")], raw_idle=None, notice_every=None)
    assert seen == [] and clock.next_deadline() is None


def test_semantic_timeout_only_when_configured() -> None:
    script = [(1.0, "headers")] + [(float(t), H) for t in range(5, 200, 5)]
    clock, seen = run(script, raw_idle=30.0, notice_every=None, semantic_timeout=100.0)
    assert seen == [SemanticTimeoutExpired(at=100.0, idle=100.0, phase=Phase.PREAMBLE, committed=False)]


def test_wall_budget_fires_even_while_bytes_trickle() -> None:
    script = [(1.0, "headers")] + [(t / 2, S) for t in range(3, 100)]
    _, seen = run(script, raw_idle=30.0, notice_every=None, wall_deadline=20.0, wall_budget=20.0)
    assert seen == [WallBudgetExpired(at=20.0, budget=20.0, phase=Phase.STREAMING, committed=False)]


def test_earliest_deadline_wins_and_notice_precedes_terminal() -> None:
    clock = AttemptClock(0.0, raw_idle=30.0, notice_every=10.0)
    clock.headers(0.0)
    assert clock.next_deadline() == 10.0
    assert clock.terminal_deadline() == 30.0
    items = drain(clock, 100.0)
    assert [type(i).__name__ for i in items] == ["Notice", "Notice", "RawSilenceExpired"]
    assert clock.poll(200.0) is items[-1]  # terminal verdicts repeat
    assert clock.next_deadline() is None


def test_end_frame_stops_every_clock() -> None:
    clock = AttemptClock(0.0, raw_idle=5.0, notice_every=1.0, wall_deadline=9.0, wall_budget=9.0)
    clock.headers(0.5)
    clock.frame(1.0, S)
    clock.frame(1.5, E)
    assert clock.next_deadline() is None and clock.poll(1000.0) is CONTINUE


def test_counters_and_first_times() -> None:
    clock = AttemptClock(100.0, raw_idle=60.0)
    clock.request_sent(100.0)
    clock.headers(100.5)
    clock.received(101.0, 40)
    clock.frame(101.0, P)
    clock.received(130.0, 10)
    clock.frame(130.0, H)
    clock.received(170.0, 90)
    clock.frame(170.0, S)
    assert (clock.first_byte, clock.first_semantic) == (0.5, 70.0)
    assert (clock.bytes, clock.frames, clock.heartbeats) == (140, 3, 1)
    assert clock.max_raw_gap == 40.0 and clock.max_semantic_gap == 70.0


@pytest.mark.parametrize(
    "kinds",
    [[], [H, H], [H, S, H], [P, H, S, S, E], [FrameKind.UNKNOWN, H], [S, H, H, FrameKind.ERROR]],
)
def test_frames_at_equals_frame_by_frame(kinds: list[FrameKind]) -> None:
    one, batch = (AttemptClock(0.0, raw_idle=60.0, notice_every=10.0) for _ in range(2))
    for clock in (one, batch):
        clock.headers(1.0)
        clock.frame(2.0, H)
    for kind in kinds:
        one.frame(5.0, kind)
    batch.frames_at(5.0, kinds)
    for name in AttemptClock.__slots__:
        assert getattr(one, name) == getattr(batch, name), name
