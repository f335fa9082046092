"""Top-level members of a JSON body (core/wire/members.py): the C walk equals the Python reference on
every input, well-formed or not; on well-formed bodies both equal what ``json.loads`` says; the
request facts read the model and the stream flag through it."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_liveness.core.commands import Send
from otel_liveness.core.policy import Policy
from otel_liveness.core.request.engine import Engine
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.core.wire import members
from otel_liveness.core.wire.members import py_top_level

try:
    from otel_liveness.core.wire._bulk import top_level as c_top_level
except ImportError:  # pragma: no cover - built without a C compiler
    c_top_level = None

NAMES = (b"model", b"stream")
needs_c = pytest.mark.skipif(c_top_level is None, reason="the C extension is not built")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
plain_keys = ["model", "stream", "messages", "mode", "models", "x", ""]
keys = st.sampled_from([*plain_keys, 'q"uote', "back\\slash", "é"])  # the last three escape (é with ensure_ascii)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(keys, inner, max_size=4)), max_leaves=12)
members_ = st.lists(st.tuples(keys, values), max_size=6)  # duplicate keys allowed: json.loads keeps the last
#: top-level keys that are never written with an escape (nested values keep every key): the walk follows every body
plain_members = st.lists(st.tuples(st.sampled_from(plain_keys), values), max_size=6)


def encode(pairs: list[tuple[str, Any]], style: int) -> tuple[bytes, bool]:
    """An object with these members (duplicates kept), in one of several encoders' layouts; and
    whether a key was written with an escape (the walk then gives up)."""
    seps = [(", ", ": "), (",", ":"), (" ,\n ", " :\t")][style % 3]
    ascii_ = style % 2 == 0
    names = [json.dumps(k, ensure_ascii=ascii_) for k, _ in pairs]
    inner = seps[0].join(name + seps[1] + json.dumps(v, ensure_ascii=ascii_, indent=None if style < 3 else 2)
                         for name, (_, v) in zip(names, pairs, strict=True))
    body = "{" + inner + "}" if style % 4 else " \n{ " + inner + " }\r\n"
    return body.encode(), any("\\" in name for name in names)


@settings(max_examples=400, deadline=None)
@given(plain_members, st.integers(0, 5))
def test_well_formed_bodies_give_what_json_loads_gives(pairs: list[tuple[str, Any]], style: int) -> None:
    body, escaped_key = encode(pairs, style)
    assert not escaped_key
    found = py_top_level(body, NAMES)
    if c_top_level is not None:
        assert c_top_level(body, NAMES) == found
    assert found is not None
    obj = json.loads(body)
    for name, raw in zip(NAMES, found, strict=True):
        key = name.decode()
        if key not in obj:
            assert raw is None
        else:
            assert raw is not None and json.loads(raw) == obj[key]  # the last occurrence, as json.loads keeps


@settings(max_examples=100, deadline=None)
@given(members_, st.integers(0, 5))
def test_a_top_level_key_written_with_an_escape_stops_the_walk(pairs: list[tuple[str, Any]], style: int) -> None:
    body, escaped_key = encode(pairs, style)
    found = py_top_level(body, NAMES)
    assert (found is None) == escaped_key  # not compared: the caller parses the body instead
    if c_top_level is not None:
        assert c_top_level(body, NAMES) == found


def mutate(body: bytes, data: st.DataObject) -> bytes:
    kind = data.draw(st.sampled_from(["cut", "flip", "insert", "delete"]))
    at = data.draw(st.integers(0, max(len(body) - 1, 0)))
    if kind == "cut":
        return body[:at]
    byte = data.draw(st.sampled_from(list(b'{}[]",:\\ x0')))
    if kind == "flip":
        return body[:at] + bytes([byte]) + body[at + 1:]
    if kind == "insert":
        return body[:at] + bytes([byte]) + body[at:]
    return body[:at] + body[at + 1:]


@needs_c
@settings(max_examples=1500, deadline=None)
@given(members_, st.integers(0, 5), st.data())
def test_the_c_walk_equals_the_reference_on_any_bytes(pairs: list[tuple[str, Any]], style: int,
                                                      data: st.DataObject) -> None:
    body, _ = encode(pairs, style)
    for _ in range(data.draw(st.integers(1, 3))):
        body = mutate(body, data)
    assert c_top_level(body, NAMES) == py_top_level(body, NAMES)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_the_c_walk_equals_the_reference_on_random_bytes(body: bytes) -> None:
    assert c_top_level(body, NAMES) == py_top_level(body, NAMES)


WALKS = [py_top_level] + ([c_top_level] if c_top_level is not None else [])


@pytest.mark.parametrize("walk", WALKS)
@pytest.mark.parametrize(("body", "want"), [
    (b'{"model":"m","stream":true}', (b'"m"', b"true")),
    (b'{"messages":[{"model":"inner","stream":true}],"model":"outer"}', (b'"outer"', None)),  # nested: not top-level
    (b'{"model":"a","model":"b"}', (b'"b"', None)),  # the last, as json.loads
    (b'{"system":"say \\"model\\": \\"x\\" \\\\","stream":false}', (None, b"false")),  # escaped quotes in a value
    (b'{"s":"ends in a backslash \\\\","model":"m"}', (b'"m"', None)),  # an even run of backslashes
    (b'{}', (None, None)),
    (b' {"stream" : true } \n', (None, b"true")),
])
def test_known_bodies(walk: Any, body: bytes, want: tuple[bytes | None, ...]) -> None:
    assert walk(body, NAMES) == want


@pytest.mark.parametrize("walk", WALKS)
@pytest.mark.parametrize("body", [
    b"", b"[]", b'"model"', b"{", b'{"model":"m"', b'{"model":"m"} x', b'{"model" "m"}', b'{"model":}',
    b'{"mod\\u0065l":"m"}',  # a key with an escape: not compared, the caller parses instead
    b'{"model":"unterminated}', b'{"a":[1,2}',  # brackets that never balance to zero
    b'{model:"m"}', b'{"model":"m",}',
])
def test_bodies_the_walk_cannot_follow(walk: Any, body: bytes) -> None:
    assert walk(body, NAMES) is None


@pytest.mark.parametrize("walk", WALKS)
def test_both_walks_take_the_same_arguments(walk: Any) -> None:
    with pytest.raises(TypeError):
        walk(b"{}", [b"model"])
    with pytest.raises(TypeError):
        walk(b"{}", ("model",))
    with pytest.raises(ValueError):
        walk(b"{}", tuple(b"k%d" % i for i in range(9)))
    for body in (bytearray(b'{"model":"m"}'), memoryview(b'{"model":"m"}')):
        found = walk(body, (b"model",))
        assert found == (b'"m"',) and type(found[0]) is bytes


def test_native_walk_is_in_use() -> None:
    if members.PURE or os.environ.get("OTEL_LIVENESS_ALLOW_PURE_LANE"):
        pytest.skip("pure-Python selected or allowed")
    assert members.NATIVE and members.top_level is c_top_level


def facts(body: bytes, **headers: str) -> RequestFacts:
    return RequestFacts.read(method="POST", url="https://api.anthropic.com/v1/messages", host="api.anthropic.com",
                             port=None, path="/v1/messages", headers=headers, body=body, read_timeout=None)


def test_the_facts_read_the_model_and_the_stream_flag_at_the_top_level() -> None:
    prompt = {"role": "user", "content": 'a tool said {"model": "not-me", "stream": true}'}
    f = facts(json.dumps({"model": "claude-x", "stream": False, "messages": [prompt],
                          "tools": [{"input_schema": {"stream": True, "model": "nested"}}]}).encode())
    assert f.model == "claude-x"
    assert f.streaming is False  # a nested "stream": true is not the request's
    assert facts(json.dumps({"messages": [prompt], "stream": True, "model": "m"}, indent=2).encode()).streaming
    assert facts(b'{"model":"' + b"m" * 300 + b'"}').model == "m" * 128  # bounded, as before


def test_a_body_the_walk_cannot_follow_is_parsed_as_before() -> None:
    escaped = facts(b'{"\\u0061": 1, "stream": true, "model": "m"}')  # a key with an escape: the walk gives up
    assert escaped.model == "m" and escaped.streaming
    assert facts(b"not json, but \"stream\":true").streaming  # the substring rule still covers a non-JSON body
    assert facts(b"not json").model is None


def test_the_model_is_a_string_decoded_as_json_loads_decodes_it() -> None:
    assert facts(b'{"model": 7}').model is None
    assert facts(b'{"model": "x\\u00e9\\n"}').model == "x\u00e9\n"  # a value with escapes is decoded
    assert facts(b'{"model": "\xed\xa0\x80x"}').model == json.loads(b'{"model": "\xed\xa0\x80x"}')["model"]
    assert facts(b'{"model": "\xff"}').model is None  # not UTF-8: no name, as before


def test_a_non_streaming_call_whose_history_holds_stream_true_is_not_judged_as_a_stream() -> None:
    """An agent's history can hold `"stream": true` as structure (a tool call's input). The old rule
    (the bytes `"stream":true` anywhere in the body) judged such a non-streaming call as a stream:
    a 90 s socket bound on a reply that is silent until it is whole -- a long generation killed and
    generated again. Only the body's own top-level member says it streams."""
    history = [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "fetch",
                                                  "input": {"url": "https://example.invalid", "stream": True}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]
    for stream in (False, True):
        body = json.dumps({"model": "claude-x", "max_tokens": 64000, "messages": history,
                           **({"stream": True} if stream else {})}, separators=(",", ":")).encode()
        assert b'"stream":true' in body  # what the old rule looked for, present either way
        f = facts(body)
        assert f.streaming is stream
        send = Engine(Policy(), f, 0.0, provider="anthropic").start(0.0)
        assert isinstance(send, Send)
        if stream:
            assert send.read_timeout is not None  # a stream's silence is bounded
        else:
            assert send.read_timeout is None  # a non-streaming reply is silent until whole: not bounded by default
