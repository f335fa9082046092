"""Coverage-guided fuzzing (atheris) of the SSE scanner, the classifiers and the engine's feed.

    python fuzz/fuzz_sse.py -max_total_time=600          # on demand, longer
    python fuzz/fuzz_sse.py -atheris_runs=20000          # bounded (the default test run does this)

Checks on every input: no exception but FrameTooLarge/MalformedStream; the buffer never exceeds
the bound; any chunking gives the same frames and kinds; the bulk scanner (C, where built, and
its pure-Python reference) gives the same kinds, the same content journal and the same bound;
whether the frame bound is exceeded does not depend on the chunking (also with a bound near the
input's own size, where it matters); the engine releases only bytes it was given, in order.

``fuzz/corpus.py DIR`` writes a seed corpus of real replies (pass DIR after the options).

Where libFuzzer's coverage cannot work -- under gcc's AddressSanitizer, whose runtime answers the
coverage hooks atheris registers with, so libFuzzer keeps no input but one -- a blind mutation
run over the seed corpus does the job instead (``make sanitize`` runs it)::

    python fuzz/fuzz_sse.py --mutate RUNS --seconds S --seed N CORPUS ARTIFACTS

Each run takes a seed, applies one to eight mutations (byte flips, inserted line ends, colons and
blank lines, deleted and repeated ranges, splices with another seed) and checks it as above; the
first failing input is written to ARTIFACTS and the run exits non-zero.
"""

from __future__ import annotations

import hashlib
import random
import sys

import atheris

with atheris.instrument_imports():
    import functools

    from otel_liveness.core.commands import READ, Release, Respond
    from otel_liveness.core.errors import FrameTooLarge
    from otel_liveness.core.policy import Policy
    from otel_liveness.core.request.engine import Engine
    from otel_liveness.core.request.facts import RequestFacts
    from otel_liveness.core.wire import bulk
    from otel_liveness.core.wire.framing import _ROLES, _comment_kind
    from otel_liveness.core.wire.providers import PREFIX, PROFILES, StreamFacts
    from otel_liveness.core.wire.sse import SSEScanner

BOUND = 512
PROVIDERS = sorted(name for name, profile in PROFILES.items() if profile.framing == "sse")


def scan(data: bytes, cuts: list[int], provider: str) -> tuple[list[tuple[object, bytes]], list[str]] | None:
    scanner = SSEScanner(BOUND)
    profile = PROFILES[provider]
    facts = StreamFacts()
    frames: list[tuple[object, bytes]] = []
    kinds: list[str] = []
    pos = 0
    try:
        for cut in [*cuts, len(data)]:
            piece = data[pos:cut]
            pos = cut
            new = scanner.feed(piece)
            frames += [(f.event, f.data) for f in new]
            kinds += [profile.classify(f, facts).value for f in new]
            assert scanner.buffered <= BOUND
        tail = scanner.close()
        frames += [(f.event, f.data) for f in tail]
        kinds += [profile.classify(f, facts).value for f in tail]
    except FrameTooLarge:
        return None
    return frames, kinds


def bound_verdict(data: bytes, cuts: list[int], bound: int) -> bool:
    """Whether the SSE scanner refuses the stream (FrameTooLarge) at ``bound``."""
    scanner = SSEScanner(bound)
    pos = 0
    try:
        for cut in [*cuts, len(data)]:
            scanner.feed_blocks(data[pos:cut])
            pos = cut
            assert scanner.buffered <= bound
    except FrameTooLarge:
        return True
    return False


def blocks_kinds(data: bytes, cuts: list[int], provider: str) -> list[str]:
    scanner = SSEScanner(BOUND)
    profile = PROFILES[provider]
    facts = StreamFacts()
    kinds: list[str] = []
    pos = 0
    for cut in [*cuts, len(data)]:
        kinds += [k.value for k in profile.classify_blocks(scanner.feed_blocks(data[pos:cut]), facts)]
        pos = cut
    return kinds + [k.value for k in profile.classify_blocks(scanner.close_blocks(), facts)]


def bulk_scan(cls: type, data: bytes, cuts: list[int], provider: str,
              bound: int = BOUND) -> tuple[list[str], bytes, int] | None:
    """The bulk scanner's kinds, journal and journal state (reads through admit() where it takes them)."""
    profile = PROFILES[provider]
    slow = functools.partial(profile.classify_block, facts=StreamFacts())
    scanner = cls(bound, tuple(profile.fast.items()), slow, _comment_kind(profile), _ROLES, 1 << 20, PREFIX)
    kinds: list[str] = []
    pos = 0
    try:
        for cut in [*cuts, len(data)]:
            piece = data[pos:cut]
            pos = cut
            frames = scanner.admit(piece)
            kinds += ["semantic"] * frames if frames >= 0 else [k.value for k in scanner.feed(piece)]
            assert scanner.buffered <= bound
        kinds += [k.value for k in scanner.close(complete_lines=False)]
    except FrameTooLarge:
        return None
    return kinds, scanner.journal(), scanner.journal_state


def test_one(raw: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(raw)
    provider = PROVIDERS[fdp.ConsumeIntInRange(0, len(PROVIDERS) - 1)]
    ncuts = fdp.ConsumeIntInRange(0, 8)
    cuts_raw = [fdp.ConsumeIntInRange(0, 4096) for _ in range(ncuts)]
    data = fdp.ConsumeBytes(fdp.remaining_bytes())
    cuts = sorted({c % (len(data) + 1) for c in cuts_raw})
    whole = scan(data, [], provider)
    chunked = scan(data, cuts, provider)
    assert (whole is None) == (chunked is None), (data, cuts)
    assert whole == chunked, (data, cuts)
    # The bulk scanner: the reference gives the kinds of SSEScanner blocks + classify_blocks (the
    # fast path by head); C gives what the reference gives.
    reference = bulk_scan(bulk.PyScanner, data, cuts, provider)
    assert reference is None or reference[0] == blocks_kinds(data, cuts, provider), (data, cuts)
    if bulk.NATIVE:
        assert bulk_scan(bulk.Scanner, data, cuts, provider) == reference, (data, cuts)
    # The frame bound, near the input's size: one verdict for every split, in all three scanners.
    small = 1 + len(data) // 3
    verdict = bound_verdict(data, [], small)
    assert bound_verdict(data, cuts, small) == verdict, (data, cuts, small)
    for cls in {bulk.PyScanner, bulk.Scanner}:
        assert (bulk_scan(cls, data, [], provider, small) is None) == verdict, (cls, data, small)
        assert (bulk_scan(cls, data, cuts, provider, small) is None) == verdict, (cls, data, cuts, small)
    # The engine: releases only what it received, in order; never raises anything untyped.
    engine = Engine(Policy(max_frame_bytes=BOUND, provider=provider, first_byte_timeout=None), RequestFacts(streaming=True),
                    0.0, provider=provider)
    engine.start(0.0)
    command: object = engine.headers(0.0, 200, {"content-type": "text/event-stream"})
    released = b""
    pos = 0
    for i, cut in enumerate([*cuts, len(data)]):
        if command is not READ and not isinstance(command, (Respond, bytes)):
            break
        if isinstance(command, Respond):
            released += command.first
            command = command.then  # consumed: what follows it is the command now (counted once)
            if command is not READ:
                break
        command = engine.received(float(i), data[pos:cut])
        pos = cut
        if isinstance(command, bytes):
            released += command
    else:
        # the body ended -- told only to an engine still reading it (a retry's backoff, or an
        # ended request, takes no eof: IllegalInput, as the drivers never send it)
        if isinstance(command, Respond):
            released += command.first
            command = command.then
        if command is READ or isinstance(command, bytes):
            command = engine.eof(float(len(cuts) + 1))
    if isinstance(command, Respond):
        released += command.first
    elif isinstance(command, Release):
        released += command.data
    elif isinstance(command, bytes):
        released += command
    # Only what was received, in order; whatever the bytes, the engine answers a command, never raises.
    assert data.startswith(released), (data, released)


_INSERTS = [b"\n", b"\r", b"\r\n", b"\n\n", b":", b": ping\n", b"data: ", b"\xef\xbb\xbf", b"\\", b'"']


def mutate(rng: random.Random, seed: bytes, seeds: list[bytes]) -> bytes:
    """One to eight blind mutations of ``seed``."""
    data = bytearray(seed)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(6)
        at = rng.randint(0, len(data))
        if op == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[at:at] = rng.choice(_INSERTS)
        elif op == 2:
            del data[at : at + rng.randint(1, 64)]
        elif op == 3:
            data[at:at] = data[at : at + rng.randint(1, 256)] * rng.randint(1, 8)
        elif op == 4:
            other = rng.choice(seeds)
            start = rng.randint(0, len(other))
            data[at:] = other[start : start + rng.randint(0, 2048)]
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(data)


def mutation_run(argv: list[str]) -> int:
    import argparse
    import pathlib
    import time
    import traceback

    parser = argparse.ArgumentParser(prog="fuzz_sse.py --mutate")
    parser.add_argument("--mutate", type=int, required=True, metavar="RUNS")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("corpus", type=pathlib.Path)
    parser.add_argument("artifacts", type=pathlib.Path)
    args = parser.parse_args(argv)
    seeds = [path.read_bytes() for path in sorted(args.corpus.iterdir()) if path.is_file()]
    if not seeds:
        print(f"no seeds in {args.corpus}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.seconds
    runs = 0
    for runs in range(1, args.mutate + 1):
        raw = seeds[runs - 1] if runs <= len(seeds) else mutate(rng, rng.choice(seeds), seeds)
        try:
            test_one(raw)
        except Exception:
            args.artifacts.mkdir(parents=True, exist_ok=True)
            path = args.artifacts / f"crash-{hashlib.sha1(raw).hexdigest()}"  # the hash names the file
            path.write_bytes(raw)
            traceback.print_exc()
            print(f"mutation run {runs}: a failing input, written to {path}", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            break
    print(f"mutation run: {runs} inputs from {len(seeds)} seeds, no failure")
    return 0


def main() -> None:
    if "--mutate" in sys.argv[1:]:
        sys.exit(mutation_run(sys.argv[1:]))
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
