"""The wires nobody here wrote: ``tests/wires/`` holds one stream or more of every provider and
model family the transport judges, each a VCR cassette naming its source -- a recording (vcrpy
cassettes of agent projects' test suites, SDK fixtures) or, where none is published, the
provider's documented shapes -- and what its wire says (``liveness: expect:``: the stop reason,
the keep-alives, the usage, how it ends).

Every stream is replayed through the transport on loopback by ``otel-liveness replay``'s own
code, split at its frames and at random offsets under several seeds: the bytes a caller reads
are identical to a plain client's, in one attempt, with the heartbeats, stop reason and usage
the wire states. The OpenAI-shaped and Anthropic wires are also read through their SDK, with and
without the transport: the same events, or the same error. And the command itself runs on the
corpus, and on bad input."""

from __future__ import annotations

import gzip
import json
import pathlib
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import anthropic
import httpx2
import openai
import pytest
import yaml

import otel_liveness
from otel_liveness import Policy
from otel_liveness.testing import SimulatedProvider
from otel_liveness.testing import steps as s
from otel_liveness.tools.replay import Stream, load_cassettes, replay, split

WIRES = pathlib.Path(__file__).parent / "wires"
STREAMS, SKIPPED, ERRORS = load_cassettes([str(WIRES)])


def meta(path: pathlib.Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else {}
    out: dict[str, Any] = data.get("liveness") or {}
    return out


def test_the_corpus_covers_every_provider_and_family_and_names_its_sources() -> None:
    assert not ERRORS and not SKIPPED
    files = sorted(WIRES.rglob("*.yaml"))
    labels = {meta(f)["provider"] for f in files}
    assert len(labels) >= 25, sorted(labels)
    for f in files:
        described = meta(f)
        assert described.get("source") and f.read_text().startswith("# "), f  # each names its source
        assert {"stop_detail", "heartbeats", "usage", "ends"} <= set(described["expect"]), f
    providers = {stream.provider for stream in STREAMS}
    assert {"anthropic", "vertex", "bedrock", "bedrock-converse", "openai-chat", "openrouter", "openai-responses",
            "gemini", "cohere"} <= providers
    assert sum(1 for stream in STREAMS if stream.expect.get("ends") == "provider_error") >= 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_stream_is_transparent_complete_and_read_as_its_wire_says(seed: int) -> None:
    rows = replay(STREAMS, seed=seed * 7919)
    assert len(rows) == 2 * len(STREAMS)
    different = [(row["stream"], row["split"], row["differences"]) for row in rows if row["differences"]]
    assert different == []
    assert all(row["identical"] and row["attempts"] == 1 for row in rows)


def test_the_random_splits_do_split() -> None:
    """(The property above means something: the random split cuts inside frames.)"""
    stream = STREAMS[0]
    frames = split(stream.body, stream.content_type, "frames")
    cuts = split(stream.body, stream.content_type, "random", 3)
    assert b"".join(cuts) == stream.body == b"".join(frames)
    ends = {len(b"".join(frames[: i + 1])) for i in range(len(frames))}
    assert any(len(b"".join(cuts[: i + 1])) not in ends for i in range(len(cuts) - 1))


def test_every_event_stream_body_is_what_botocore_parses() -> None:
    from botocore.eventstream import EventStreamBuffer

    bodies = [stream for stream in STREAMS if "eventstream" in stream.content_type]
    assert len(bodies) >= 9
    for stream in bodies:
        buffer = EventStreamBuffer()
        buffer.add_data(stream.body)
        messages = list(buffer)
        assert messages and all(m.headers.get(":message-type") == "event" for m in messages), stream.source


# -- through the SDKs, with and without the transport ------------------------------------------------


def _sdk_read(stream: Stream, base: str, client: httpx2.Client) -> Any:
    path = urlsplit(stream.uri).path
    model = str(json.loads(stream.request_body or b"{}").get("model") or "m")
    messages: Any = [{"role": "user", "content": "hi"}]
    try:
        if path.endswith("/chat/completions"):
            sdk = openai.OpenAI(api_key="k", base_url=base + path.removesuffix("/chat/completions"), max_retries=0,
                                http_client=client)
            events = sdk.chat.completions.create(model=model, messages=messages, stream=True)
            return [e.model_dump() for e in events]
        if path.endswith("/responses"):
            sdk = openai.OpenAI(api_key="k", base_url=base + path.removesuffix("/responses"), max_retries=0,
                                http_client=client)
            return [e.model_dump() for e in sdk.responses.create(model=model, input="hi", stream=True)]
        assert path.endswith("/messages")
        claude = anthropic.Anthropic(api_key="k", base_url=base + path.removesuffix("/v1/messages"), max_retries=0,
                                     http_client=client)
        return [e.model_dump() for e in claude.messages.create(model=model, max_tokens=64, messages=messages,
                                                               stream=True)]
    except (openai.APIError, anthropic.APIError) as exc:
        return (type(exc).__name__, str(exc), getattr(exc, "code", None), getattr(exc, "type", None))


SDK_STREAMS = [stream for stream in STREAMS if urlsplit(stream.uri).path.endswith(("/chat/completions", "/messages"))
               or (urlsplit(stream.uri).path.endswith("/responses") and stream.method == "POST")]


@pytest.mark.parametrize("stream", SDK_STREAMS, ids=[s.source.split("wires/")[1] for s in SDK_STREAMS])
def test_an_sdk_parses_the_same_events_or_raises_the_same_error_through_the_transport(stream: Stream) -> None:
    with SimulatedProvider(time_scale=0.001) as server:
        script = [s.Headers(stream.status, tuple(stream.headers), stream.content_type),
                  *(s.Raw(c) for c in split(stream.body, stream.content_type, "random", 11))]
        server.add("plain", [script])
        server.add("wrapped", [script])
        with httpx2.Client() as client:
            plain = _sdk_read(stream, server.base_url("plain"), client)
        policy = Policy(provider=stream.provider)
        with httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport(), policy, telemetry=False)) as client:
            wrapped = _sdk_read(stream, server.base_url("wrapped"), client)
        assert server.attempts("wrapped") == 1
    assert wrapped == plain
    if stream.expect.get("ends") == "provider_error":
        assert isinstance(plain, tuple) and plain[0] == "APIError"  # the provider's own error, its message intact


# -- the command ---------------------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otel_liveness", "replay", *args], capture_output=True, text=True,
                          timeout=300)


def test_replay_on_the_corpus_exits_0_and_names_every_stream() -> None:
    done = cli(str(WIRES), "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["ok"] and len(result["streams"]) == 2 * len(STREAMS)
    table = cli(str(WIRES / "groq"))
    assert table.returncode == 0 and "prov_error" in table.stdout and "0 differ" in table.stdout


def _cassette(body: Any, content_type: str = "text/event-stream", **response: Any) -> dict[str, Any]:
    return {"interactions": [{
        "request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
                    "body": '{"model":"m","stream":true}', "headers": {"Authorization": ["Bearer sk-secret"]}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {"Content-Type": [content_type]},
                     **({"body": body} if body is not None else {}), **response},
    }], "version": 1}


CHAT = ('data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def test_replay_reads_gzip_cassettes_and_binary_bodies_and_skips_what_is_not_a_stream(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.yaml.gz").write_bytes(gzip.compress(yaml.safe_dump(_cassette({"string": CHAT})).encode()))
    coded = _cassette({"string": gzip.compress(CHAT.encode())})
    coded["interactions"][0]["response"]["headers"]["Content-Encoding"] = ["gzip"]  # vcrpy keeps it so: !!binary
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(coded))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_cassette({"string": "{}"}, "application/json")))
    done = cli(str(tmp_path), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert len(result["streams"]) == 4 and all(r["identical"] and r["verdict"] == "completed" for r in result["streams"])
    assert [item["why"] for item in result["skipped"]] == ["not a stream (application/json)"]
    assert "sk-secret" not in done.stdout + done.stderr and "hi" not in done.stdout.replace("chat", "")


@pytest.mark.parametrize(("content", "message"), [
    ("interactions: [unclosed", "not YAML"),
    ("just: a mapping\n", "not a VCR cassette"),
    (yaml.safe_dump(_cassette(None)), "the response has no body"),
    (yaml.safe_dump(_cassette({"nothing": 1})), "no body string"),
    (yaml.safe_dump({"interactions": [{"request": {}}]}), "without a request and a response"),
])
def test_replay_names_a_bad_cassette_without_a_traceback(tmp_path: pathlib.Path, content: str, message: str) -> None:
    (tmp_path / "bad.yaml").write_text(content)
    done = cli(str(tmp_path))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(_cassette({"string": CHAT})))
    done = cli(str(tmp_path))  # the good one is still replayed; the bad one makes the run fail
    assert done.returncode == 1 and "UNREADABLE" in done.stdout and message in done.stdout, done.stdout


def test_replay_exits_1_naming_a_stream_that_differs(tmp_path: pathlib.Path) -> None:
    cassette = _cassette({"string": CHAT})
    cassette["liveness"] = {"expect": {"stop_detail": "length", "heartbeats": 0}}
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(cassette))
    done = cli(str(tmp_path))
    assert done.returncode == 1
    assert "DIFFERS" in done.stdout and "stop reason 'stop', the wire says 'length'" in done.stdout
