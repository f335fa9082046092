"""A reduced soak in the default run (the full one: python -m benchmarks.soak): memory, file
descriptors, tasks, threads and open spans stay flat across waves of long-thinking streams."""

from __future__ import annotations

from benchmarks.soak import soak


def test_reduced_soak_is_flat() -> None:
    result = soak(streams=100, waves=4, threads=20, thread_waves=3, scale=0.01, pings=20, ping_every=15.0)
    for kind in ("async", "sync"):
        run = result[kind]
        assert run["ok"] == run["streams"]
        start, *_, end = run["snapshots"]
        middle = run["snapshots"][1]
        assert middle["fds"] == end["fds"] and start["fds"] == end["fds"]
        assert start["threads"] == end["threads"]
        assert end["open_spans"] == 0
        if kind == "async":
            assert end["tasks"] == start["tasks"] == 1
    assert result["rss_growth_middle_to_end_mb"] < 15
    assert result["spans"]["started"] == result["spans"]["ended"]
