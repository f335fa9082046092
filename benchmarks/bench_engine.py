"""The engine alone (no I/O), this tree against another revision: does a change to the core cost?

For a change that must not move behaviour or speed (a restructure), the transport benchmark's
whole-stream ratio is too noisy to see a few per cent of the engine. This one drives the pure
engine the way a driver does -- the steady lane first, the engine for every other read -- with a
fake clock, in three workloads:

* ``lane``: 20,000 one-event reads of a live reply (nearly all taken by the steady lane);
* ``general``: the same with a ping after every event (every read through ``Engine.received``);
* ``requests``: 2,000 whole small requests (start, headers, one body read, end).

The other revision is checked out in a temporary git worktree and its C extensions built there
(so each side runs its own); the two sides run alternately in fresh subprocesses, and the figure is
the ratio of medians of client CPU time (this tree / the other). Exits 1 when a workload is slower
than ``--limit`` (default 1.10: within noise on a shared 2-core machine).

Usage::

    python -m benchmarks.bench_engine --against REV [--runs 4] [--rounds 3] [--limit 1.10] [--json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent

WORKLOAD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from otel_liveness import Policy
from otel_liveness.core.commands import Respond
from otel_liveness.core.request.engine import Engine
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import PING

reply = [x.data for x in anthropic_reply("t" * 20000, deltas=20000) if isinstance(x, s.Raw)]
pinged = [read for chunk in reply for read in (chunk, PING)]
small = [x.data for x in anthropic_reply("hello world", deltas=5) if isinstance(x, s.Raw)]
SSE = {"content-type": "text/event-stream"}
policy = Policy()

def stream(reads):
    engine = Engine(policy, RequestFacts(streaming=True), 0.0, provider="anthropic")
    engine.start(0.0)
    engine.headers(0.001, 200, SSE)
    now, step = 0.002, None
    for chunk in reads:
        now += 1e-5
        if step is not None and step(chunk, now):
            continue
        if isinstance(engine.received(now, chunk), Respond):
            step = engine.lane.step
    engine.eof(now + 1e-5)

def requests(n):
    for _ in range(n):
        stream(small)

def cpu(f, *args):
    t0 = time.process_time()
    f(*args)
    return time.process_time() - t0

out = {"lane": [], "general": [], "requests": []}
for _ in range(int(sys.argv[2])):
    out["lane"].append(cpu(stream, reply))
    out["general"].append(cpu(stream, pinged))
    out["requests"].append(cpu(requests, 2000))
print(json.dumps(out))
"""


BUILD = r"""
import pathlib
from setuptools import Distribution, Extension
sources = sorted(pathlib.Path("otel_liveness/core").glob("_*.c"))
dist = Distribution({"ext_modules": [Extension(f"otel_liveness.core.{c.stem}", [str(c)], extra_compile_args=["-O2"])
                                     for c in sources]})
command = dist.get_command_obj("build_ext")
command.inplace = True
command.ensure_finalized()
command.run()
"""


def checkout(rev: str, into: pathlib.Path) -> None:
    """``rev`` of this repository in a worktree at ``into``, its C extensions built in place (as
    ``setup.py`` builds them; the configuration is not read, only the sources)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(into), rev], check=True)
    subprocess.run([sys.executable, "-c", BUILD], cwd=into, check=True, capture_output=True)


def run(tree: pathlib.Path, rounds: int) -> dict[str, list[float]]:
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(tree), str(rounds)], check=True,
                          capture_output=True, text=True)
    result: dict[str, list[float]] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the git revision to compare with (e.g. main~3)")
    parser.add_argument("--runs", type=int, default=4, help="subprocess pairs, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each workload per subprocess")
    parser.add_argument("--limit", type=float, default=1.10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        other = pathlib.Path(tmp) / "other"
        checkout(args.against, other)
        try:
            ours: dict[str, list[float]] = {}
            theirs: dict[str, list[float]] = {}
            for i in range(args.runs):
                for tree, into in ((other, theirs), (ROOT, ours)) if i % 2 == 0 else ((ROOT, ours), (other, theirs)):
                    for key, values in run(tree, args.rounds).items():
                        into.setdefault(key, []).extend(values)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False)
    result: dict[str, Any] = {"against": args.against, "limit": args.limit, "workloads": {}}
    for key in ours:
        a, b = statistics.median(ours[key]), statistics.median(theirs[key])
        result["workloads"][key] = {"this_tree_s": a, "other_s": b, "ratio": a / b}
    missed = [key for key, w in result["workloads"].items() if w["ratio"] > args.limit]
    result["missed"] = missed
    if args.json:
        print(json.dumps(result))
    else:
        print(f"engine alone, this tree vs {args.against} (client CPU, median of {args.runs * args.rounds} each):")
        for key, w in result["workloads"].items():
            print(f"  {key:9s} {w['this_tree_s'] * 1e3:8.1f} ms vs {w['other_s'] * 1e3:8.1f} ms   ratio {w['ratio']:.3f}"
                  f"   ({'within' if w['ratio'] <= args.limit else 'OVER'} {args.limit})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
