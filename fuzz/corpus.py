"""A seed corpus for ``fuzz_sse.py``: real replies of every SSE wire, as the harness reads them.

    python fuzz/corpus.py DIR

Writes one file per seed into DIR. ``fuzz_sse.py`` reads an input with atheris's
``FuzzedDataProvider``, which takes its integers from the *end* of the input (one byte for the
provider, one for the number of cuts, two a cut) and the stream from the front; a seed is the
stream followed by those bytes. The streams are the simulated provider's replies (``otel_liveness.
testing``), each also with CRLF and CR line ends, comment heartbeats at block heads, an error
frame, and cut short. Coverage-guided runs find their way without it; a run that is not guided
(``make sanitize``: the sanitizer runtime, not libFuzzer, answers atheris's coverage hooks) starts
from real wire shapes instead of from nothing.
"""

from __future__ import annotations

import hashlib
import pathlib
import sys

from otel_liveness.core.wire.providers import PROFILES
from otel_liveness.testing import scripts
from otel_liveness.testing.steps import Raw

PROVIDERS = sorted(name for name, profile in PROFILES.items() if profile.framing == "sse")  # as fuzz_sse.py


def _body(steps: list[object]) -> bytes:
    return b"".join(step.data for step in steps if isinstance(step, Raw))


def streams() -> dict[str, list[bytes]]:
    """Reply bodies by the provider profile that judges them."""
    anthropic = [
        _body(scripts.anthropic_reply("Hello there, a reply in a few deltas.", deltas=6)),
        _body(scripts.anthropic_reply("Thought first.", thinking="hmm, let me see", think_pings=3)),
        scripts.anthropic_error("overloaded_error"),
    ]
    out = {
        "anthropic": anthropic,
        "openai-chat": [_body(scripts.openai_chat_reply("Hi from chat completions.", deltas=5))],
        "openai-responses": [_body(scripts.openai_responses_reply("Hi from responses.", deltas=5, keepalives=2))],
        "gemini": [_body(scripts.gemini_reply("Hi from gemini.", thinking="first, this"))],
        "openrouter": [_body(scripts.openrouter_reply("Hi via openrouter.", processing=3)),
                       _body([scripts.openrouter_error_chunk()])],
        "vertex": anthropic[:1],
        "sse": anthropic[:1],
    }
    return {name: bodies for name, bodies in out.items() if name in PROVIDERS}


def variants(stream: bytes) -> list[bytes]:
    """The stream, with other line ends, heartbeats at block heads, and cut short."""
    out = [stream, stream.replace(b"\n", b"\r\n"), stream.replace(b"\n", b"\r"),
           stream.replace(b"\n\n", b"\n\n: keep-alive\n", 3), b"\xef\xbb\xbf" + stream, stream[: len(stream) // 2]]
    return [v for v in out if v]


def seeds() -> list[bytes]:
    out = []
    for provider, bodies in streams().items():
        index = PROVIDERS.index(provider)
        for body in bodies:
            for stream in variants(body):
                out.append(stream + bytes([0, index]))  # no cuts
                # three cuts (two bytes each, read from the end, before the count and the provider)
                third = len(stream) // 3
                cuts = b"".join(c.to_bytes(2, "big") for c in (2 * third, third, 7))
                out.append(stream + cuts + bytes([3, index]))
    return out


def main() -> None:
    target = pathlib.Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    for seed in seeds():
        (target / hashlib.sha1(seed).hexdigest()).write_bytes(seed)  # the hash names the file
    print(f"{len(seeds())} seeds in {target}")


if __name__ == "__main__":
    main()
