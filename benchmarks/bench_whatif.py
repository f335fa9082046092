"""``otel-liveness whatif`` replay rate: 10,000 timing recordings replayed through the engine.

The recordings are a fleet's worth of shadow-mode attempts (one in ten went silent for good, the
others thought for 2 -- 8 s with pings every 25 s, then answered), written to a temporary
directory. Two timings in the same run: loading and parsing them alone (the baseline), and loading
plus replaying them under the default policy. The figures are recordings per second and the
replay's ratio to the load alone. Exits 1 when the replay is slower than ``--min-rate``
recordings per second (default 400: about a sixth of an idle core's rate, room for a loaded host).

Usage::

    python -m benchmarks.bench_whatif [--recordings 10000] [--rounds 3] [--min-rate 400] [--json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

from otel_liveness.tools.whatif import load, parse_policy, whatif

SSE = {"headers": 200, "content_type": "text/event-stream"}


def recordings(directory: pathlib.Path, n: int) -> None:
    """``n`` timing recordings in ``directory`` (1,000 a subdirectory): every tenth goes silent
    for good after its pings (the defaults judge it 90 s after its last byte), the others answer."""
    for i in range(n):
        dead = i % 10 == 0
        t = 2.0 + (i % 7)
        events: list[dict[str, Any]] = [{"t": 0.2, **SSE}, {"t": t, "kind": "preamble", "size": 60}]
        for k in range(i % 4):
            events.append({"t": t + 25 * (k + 1), "kind": "heartbeat", "size": 60})
        last = t + 25 * (i % 4)
        if dead:
            events.append({"t": last + 200, "end": True})
        else:
            events += [{"t": last + 1, "kind": "content", "size": 60}, {"t": last + 2, "kind": "stop", "size": 60},
                       {"t": last + 2, "eof": True}]
        meta = {"format": "timing", "provider": "anthropic", "host": "h", "body_bytes": 1000 + i, "shadow": True,
                "outcome": "raw_silence" if dead else "completed"}
        sub = directory / f"d{i // 1000}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"r{i:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [{"t": 0, "meta": meta}, *events]))


def replay(directory: pathlib.Path) -> dict[str, Any]:
    """Load every recording of ``directory`` and replay them under the default policy."""
    loaded, errors = load([str(directory)])
    if errors:
        raise RuntimeError(f"{len(errors)} recordings did not load: {errors[:3]}")
    return whatif(loaded, dict([parse_policy("defaults=")]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-rate", type=float, default=400.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-whatif-") as tmp:
        directory = pathlib.Path(tmp)
        recordings(directory, args.recordings)
        loads, replays = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            load([str(directory)])
            t1 = time.perf_counter()
            replay(directory)
            t2 = time.perf_counter()
            loads.append(t1 - t0)
            replays.append(t2 - t1)
    load_s, replay_s = statistics.median(loads), statistics.median(replays)
    rate = args.recordings / replay_s
    result = {"recordings": args.recordings, "load_s": load_s, "replay_s": replay_s, "recordings_per_s": rate,
              "replay_vs_load": replay_s / load_s, "min_rate": args.min_rate, "met": rate >= args.min_rate}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"whatif: {args.recordings} timing recordings, median of {args.rounds}: load {load_s:.2f} s, "
              f"load + replay {replay_s:.2f} s -> {rate:,.0f} recordings/s (target >= {args.min_rate:,.0f}: "
              f"{'met' if result['met'] else 'MISSED'}); load + replay is {result['replay_vs_load']:.1f}x the load alone")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
