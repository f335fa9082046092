"""A reduced soak in the default run (the full one: python -m benchmarks.soak): memory, file
descriptors, tasks, threads and open spans stay flat across waves of long-thinking streams.

What a leak looks like, and so what is asserted: descriptors that outlive the client (the pool
closed, every socket it held must be gone), descriptors beyond what the pool may hold while it
runs, tasks or threads that outlive their waves, spans that never end. How many pooled
connections are open at a given snapshot is not a leak: on a slow or loaded machine a stream
may be retried on a new connection, and the pool keeps up to its limit."""

from __future__ import annotations

from benchmarks.soak import soak


def test_reduced_soak_is_flat() -> None:
    result = soak(streams=100, waves=4, threads=20, thread_waves=3, scale=0.01, pings=20, ping_every=15.0)
    for kind in ("async", "sync"):
        run = result[kind]
        assert run["ok"] == run["streams"]
        before, limit = run["fds_before"], run["max_connections"]
        assert run["fds_after_close"] == before, (kind, before, run["fds_after_close"])  # nothing outlives the pool
        for snap in run["snapshots"]:
            assert before <= snap["fds"] <= before + limit, (kind, snap, before, limit)
        start, *_, end = run["snapshots"]
        assert start["threads"] == end["threads"]
        assert end["open_spans"] == 0
        if kind == "async":
            assert end["tasks"] == start["tasks"] == 1
    assert result["rss_growth_middle_to_end_mb"] < 15
    assert result["spans"]["started"] == result["spans"]["ended"] > 0
