"""Coverage-guided fuzzing (atheris) of the SSE scanner, the classifiers and the engine's feed.

    python fuzz/fuzz_sse.py -max_total_time=600          # on demand, longer
    python fuzz/fuzz_sse.py -atheris_runs=20000          # bounded (the default test run does this)

Checks on every input: no exception but FrameTooLarge/MalformedStream; the buffer never exceeds
the bound; any chunking gives the same frames and kinds; the bulk scanner (C, where built, and
its pure-Python reference) gives the same kinds, the same content journal and the same bound;
the engine releases only bytes it was given, in order.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import functools

    from otel_liveness.core import bulk
    from otel_liveness.core.commands import READ, Release, Respond
    from otel_liveness.core.engine import Engine
    from otel_liveness.core.errors import FrameTooLarge
    from otel_liveness.core.framing import _ROLES, _comment_kind
    from otel_liveness.core.policy import Policy
    from otel_liveness.core.providers import PREFIX, PROFILES, StreamFacts
    from otel_liveness.core.request import RequestFacts
    from otel_liveness.core.sse import SSEScanner

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


def bulk_scan(cls: type, data: bytes, cuts: list[int], provider: str) -> tuple[list[str], bytes, int] | None:
    """The bulk scanner's kinds, journal and journal state (reads through admit() where it takes them)."""
    profile = PROFILES[provider]
    slow = functools.partial(profile.classify_block, facts=StreamFacts())
    scanner = cls(BOUND, tuple(profile.fast.items()), slow, _comment_kind(profile), _ROLES, 1 << 20, PREFIX)
    kinds: list[str] = []
    pos = 0
    try:
        for cut in [*cuts, len(data)]:
            piece = data[pos:cut]
            pos = cut
            frames = scanner.admit(piece)
            kinds += ["semantic"] * frames if frames >= 0 else [k.value for k in scanner.feed(piece)]
            assert scanner.buffered <= BOUND
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
            if command.then is not READ:
                break
        command = engine.received(float(i), data[pos:cut])
        pos = cut
        if isinstance(command, bytes):
            released += command
    else:
        command = engine.eof(float(len(cuts) + 1))
    if isinstance(command, Respond):
        released += command.first
    elif isinstance(command, Release):
        released += command.data
    elif isinstance(command, bytes):
        released += command
    # Only what was received, in order; whatever the bytes, the engine answers a command, never raises.
    assert data.startswith(released), (data, released)


def main() -> None:
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
