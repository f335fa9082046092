"""The policy canary's cost: client CPU per request with 0, 1 and 3 candidate policies.

Whole requests, rotated in the same run (plain client, wrapped with no candidate, with 1, with 3;
the order turns each round), against a loopback server in another process (the one
``bench_transport`` uses). Two replies:

- **short** (a 5-event reply, a few reads): a request's set-up -- the engine, its attempt, the
  end, and at the end each candidate's judgment. Two costs are told apart: the **timing
  reduction** (paid per read, once, however many candidates: each read reduced to its frames'
  kinds and sizes, and read outside the steady lane, as with the timing recorder on) and the
  **per-candidate judgment** at the attempt's end, ``(3 candidates - 1 candidate) / 2``. The
  figure of record: the per-candidate judgment as a fraction of the CPU of the whole wrapped
  request without candidates (target <= 5 %). Measured twice: with candidates whose clocks the
  reply's gaps cannot reach (the common case: the replay is spared) and with candidates so tight
  that every attempt is replayed (what a dead, failed or borderline attempt costs).
- **long** (2,000 events, one a read): the timing reduction per read, shown, not a target.

Usage::

    python -m benchmarks.bench_canary [--rounds 201] [--long-rounds 21] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx2

import otel_liveness

from .bench_transport import raw_path, start_server

CANDIDATES = ("c1=raw=45,first_byte=120", "c2=raw=180", "c3=semantic=300,notice=30")
#: Bounds no loopback reply meets: every attempt is replayed under each.
REPLAYED = ("r1=raw=0.00001,first_byte=off", "r2=raw=0.00002,first_byte=off", "r3=raw=0.00003,first_byte=off")
TARGET = 0.05  # per candidate, of the wrapped request's CPU


def clients(candidates: tuple[str, ...]) -> dict[str, httpx2.Client]:
    out = {"plain": httpx2.Client(timeout=60)}
    for n in (0, 1, 3):
        policy = otel_liveness.Policy(candidates=";".join(candidates[:n]) or None)
        out[f"candidates={n}"] = httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport(), policy), timeout=60)
    return out


def rotated(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Client CPU of each function per round, the order turning every round."""
    names = list(fns)
    for name in names:
        fns[name]()  # warm up connections and caches
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.process_time()
            fns[name]()
            cpu[name].append(time.process_time() - t0)
    return cpu


def measure(url: str, http: dict[str, httpx2.Client], rounds: int) -> dict[str, Any]:
    reads = raw_path(http["plain"], url)
    cpu = rotated({name: functools.partial(raw_path, c, url) for name, c in http.items()}, rounds)
    median = {name: statistics.median(values) for name, values in cpu.items()}
    base = median["candidates=0"]
    per_candidate = (median["candidates=3"] - median["candidates=1"]) / 2
    reduction = median["candidates=1"] - base - per_candidate
    # Paired per round (the same turn of the rotation): the ratio's spread.
    paired = [(c3 - c1) / 2 / b for c3, c1, b in zip(cpu["candidates=3"], cpu["candidates=1"], cpu["candidates=0"],
                                                      strict=True)]
    return {
        "reads": reads,
        "cpu_us": {name: round(value * 1e6, 1) for name, value in median.items()},
        "transport_setup_us": round((base - median["plain"]) * 1e6, 1),
        "reduction_us": round(reduction * 1e6, 1),
        "reduction_us_per_read": round(reduction * 1e6 / max(reads, 1), 2),
        "per_candidate_us": round(per_candidate * 1e6, 1),
        "per_candidate_of_request": round(per_candidate / base, 4),
        "per_candidate_of_request_paired_median": round(statistics.median(paired), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=201)
    parser.add_argument("--long-rounds", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    proc, server = start_server(2000, [1], 1)
    try:
        short = measure(server + "/s/short", clients(CANDIDATES), args.rounds)
        replayed = measure(server + "/s/short", clients(REPLAYED), args.rounds)
        long = measure(server + "/s/bench1", clients(CANDIDATES), args.long_rounds)
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(10)
    ok = short["per_candidate_of_request"] <= TARGET
    result = {"short": short, "short_replayed": replayed, "long": long, "target_per_candidate_of_request": TARGET,
              "ok": ok}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for name, row in (("short reply (a request's set-up), replay spared", short),
                          ("short reply, every attempt replayed", replayed), ("long stream", long)):
            print(f"{name}: {row['reads']} reads; client CPU per request "
                  + ", ".join(f"{k} {v:.0f} us" for k, v in row["cpu_us"].items()))
            print(f"  shared by the candidates {row['reduction_us']:.0f} us ({row['reduction_us_per_read']:.1f} us a read: "
                  "the timing reduction, and the recording when one is replayed); "
                  f"each candidate's judgment {row['per_candidate_us']:.1f} us = "
                  f"{100 * row['per_candidate_of_request']:.1f} % of the wrapped request "
                  f"(paired median {100 * row['per_candidate_of_request_paired_median']:.1f} %; "
                  f"the transport's own set-up: {row['transport_setup_us']:.0f} us)")
        print(f"{'ok' if ok else 'FAIL'}: a candidate's judgment costs {100 * short['per_candidate_of_request']:.1f} % "
              f"of a request's CPU (target {100 * TARGET:.0f} %)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
