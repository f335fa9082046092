"""AWS event-stream scanner: format, chunking invariance, typed errors, bounds, botocore agreement."""

from __future__ import annotations

import base64
import itertools
import json
import struct
import time
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_liveness.core.errors import CorruptFrame, FrameTooLarge, MalformedStream
from otel_liveness.core.wire.eventstream import (
    CONTENT_TYPE,
    EventStreamScanner,
    Message,
    bedrock_chunk,
    bedrock_exception,
    converse_event,
    decode_chunk,
    encode_message,
)

botocore_eventstream = pytest.importorskip("botocore.eventstream")

BOUND = 1 << 16


# -- helpers ----------------------------------------------------------------------------------------


def ref_message(headers: list[tuple[str, int, Any]], payload: bytes) -> bytes:
    """An encoder written from the format description alone (independent of the module's), able to
    emit every header type, including the ones ``encode_message`` never picks (byte, short,
    timestamp, uuid)."""
    block = b""
    for name, kind, value in headers:
        raw = name.encode()
        block += struct.pack("!B", len(raw)) + raw + struct.pack("!B", kind)
        if kind in (0, 1):
            pass
        elif kind in (6, 7):
            data = value.encode() if kind == 7 else value
            block += struct.pack("!H", len(data)) + data
        elif kind == 9:
            block += value
        else:
            block += struct.pack({2: "!b", 3: "!h", 4: "!i", 5: "!q", 8: "!q"}[kind], value)
    prelude = struct.pack("!II", 16 + len(block) + len(payload), len(block))
    body = prelude + struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF) + block + payload
    return body + struct.pack("!I", zlib.crc32(body) & 0xFFFFFFFF)


def with_prelude(total: int, headers_length: int) -> bytes:
    """A prelude with a correct CRC for arbitrary (possibly impossible) lengths."""
    head = struct.pack("!II", total, headers_length)
    return head + struct.pack("!I", zlib.crc32(head))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def scan(pieces: list[bytes], bound: int = BOUND) -> tuple[list[Message], MalformedStream | None, int]:
    """Feed ``pieces``, then close. Returns every message (including those an error carried),
    the error (or None) and the largest ``pending`` seen."""
    scanner = EventStreamScanner(bound)
    out: list[Message] = []
    peak = 0
    try:
        for piece in pieces:
            out += scanner.feed(piece)
            peak = max(peak, scanner.pending)
        scanner.close()
    except MalformedStream as exc:
        out += exc.decoded
        return out, exc, peak
    return out, None, peak


def botocore_decode(data: bytes, pieces: list[bytes] | None = None) -> list[tuple[dict[str, Any], bytes]]:
    buffer = botocore_eventstream.EventStreamBuffer()
    out = []
    for piece in pieces if pieces is not None else [data]:
        buffer.add_data(piece)
        out += [(m.headers, m.payload) for m in buffer]
    return out


def pairs(messages: list[Message]) -> list[tuple[dict[str, object], bytes]]:
    return [(m.headers, m.payload) for m in messages]


def error_key(exc: MalformedStream | None) -> tuple[Any, ...] | None:
    if exc is None:
        return None
    if isinstance(exc, CorruptFrame):
        return ("corrupt", exc.what, exc.offset, exc.expected, exc.actual)
    assert isinstance(exc, FrameTooLarge)
    return ("too_large", exc.size, exc.limit)


# -- strategies -------------------------------------------------------------------------------------

names = st.text(min_size=1, max_size=30).filter(lambda s: len(s.encode()) < 256)
values = st.one_of(
    st.text(max_size=60),
    st.binary(max_size=60),
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
)
header_maps = st.dictionaries(names, values, max_size=6)
payloads = st.binary(max_size=400)
messages = st.lists(st.tuples(header_maps, payloads), min_size=1, max_size=8)
cuts = st.lists(st.integers(min_value=0, max_value=1 << 14), max_size=40)

ref_headers = st.lists(
    st.one_of(
        st.tuples(names, st.sampled_from([0, 1]), st.none()),
        st.tuples(names, st.just(2), st.integers(-128, 127)),
        st.tuples(names, st.just(3), st.integers(-(1 << 15), (1 << 15) - 1)),
        st.tuples(names, st.just(4), st.integers(-(1 << 31), (1 << 31) - 1)),
        st.tuples(names, st.sampled_from([5, 8]), st.integers(-(1 << 63), (1 << 63) - 1)),
        st.tuples(names, st.just(6), st.binary(max_size=40)),
        st.tuples(names, st.just(7), st.text(max_size=40)),
        st.tuples(names, st.just(9), st.binary(min_size=16, max_size=16)),
    ),
    max_size=8,
    unique_by=lambda h: h[0],
)


# -- the format -------------------------------------------------------------------------------------


def test_known_vector_empty_message() -> None:
    # The smallest message: a 16-byte prelude + CRC frame with no headers and no payload.
    wire = bytes.fromhex("000000100000000005c248eb7d98c8ff")
    assert encode_message({}, b"") == wire
    assert EventStreamScanner().feed(wire) == [Message({}, b"")]


def test_bedrock_chunk_message_decodes_to_its_headers_and_inner_event() -> None:
    event = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}'
    wire = bedrock_chunk(event, padding="abcdefgh")
    (message,) = EventStreamScanner().feed(wire)
    assert message.headers == {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    assert (message.message_type, message.event_type, message.content_type, message.exception_type) == (
        "event", "chunk", "application/json", None)
    assert json.loads(message.payload) == {"bytes": base64.b64encode(event).decode(), "p": "abcdefgh"}
    assert decode_chunk(message.payload) == event
    assert CONTENT_TYPE == "application/vnd.amazon.eventstream"


def test_bedrock_exception_message() -> None:
    (message,) = EventStreamScanner().feed(bedrock_exception("throttlingException", "Too many requests"))
    assert (message.message_type, message.exception_type, message.event_type) == (
        "exception", "throttlingException", None)
    assert json.loads(message.payload) == {"message": "Too many requests"}


def test_message_is_frozen() -> None:
    message = Message({"a": "b"}, b"x")
    with pytest.raises(AttributeError):
        message.payload = b"y"  # type: ignore[misc]
    assert not hasattr(message, "__dict__")


def test_header_properties_ignore_non_string_values() -> None:
    message = Message({":message-type": 7, ":event-type": b"chunk"}, b"")
    assert message.message_type is None and message.event_type is None


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"bytes":"eyJ0eXBlIjoicGluZyJ9"}', b'{"type":"ping"}'),
        (b'{"bytes":"eyJ0eXBlIjoicGluZyJ9","p":"abc"}', b'{"type":"ping"}'),
        (b'{"p": "abc", "bytes": "eyJ0eXBlIjoicGluZyJ9"}', b'{"type":"ping"}'),  # another key order
        (b'{ "bytes" : "eyJ0eXBlIjoicGluZyJ9" }', b'{"type":"ping"}'),
        (b'{"bytes":""}', b""),
        (b'{"bytes":"not base64!"}', None),
        (b'{"bytes":"eyJ0eXBlIjoicGluZyJ9"', None),  # not JSON
        (b'{"bytes":"QQ=="}trailing', None),
        (b'{"bytes":12}', None),
        (b'{"message":"x"}', None),
        (b"[1,2]", None),
        (b"\xff\xfe", None),
        (b"", None),
    ],
)
def test_decode_chunk(payload: bytes, expected: bytes | None) -> None:
    assert decode_chunk(payload) == expected


@given(st.binary(max_size=300), st.one_of(st.none(), st.text(alphabet="abcXYZ", max_size=40)))
def test_decode_chunk_inverts_bedrock_chunk(event: bytes, padding: str | None) -> None:
    (message,) = EventStreamScanner().feed(bedrock_chunk(event, padding=padding))
    assert decode_chunk(message.payload) == event


def test_encode_message_rejects_what_the_format_cannot_carry() -> None:
    with pytest.raises(ValueError):
        encode_message({"": "x"}, b"")
    with pytest.raises(ValueError):
        encode_message({"n" * 256: "x"}, b"")
    with pytest.raises(ValueError):
        encode_message({"n": "x" * 65536}, b"")
    with pytest.raises(ValueError):
        encode_message({"n": 1 << 63}, b"")
    with pytest.raises(TypeError):
        encode_message({"n": 1.5}, b"")  # type: ignore[dict-item]


def test_the_bedrock_runtime_model_parses_our_messages_as_the_sdk_expects() -> None:
    """botocore's own event parser, with bedrock-runtime's service model (what the anthropic SDK's
    Bedrock decoder runs), reads our chunk, exception and ConverseStream messages."""
    from botocore.loaders import Loader  # type: ignore[import-untyped]
    from botocore.model import ServiceModel  # type: ignore[import-untyped]
    from botocore.parsers import EventStreamJSONParser  # type: ignore[import-untyped]

    model = ServiceModel(Loader().load_service_model("bedrock-runtime", "service-2"))
    parser = EventStreamJSONParser()

    def parse(wire: bytes, shape: str) -> Any:
        buffer = botocore_eventstream.EventStreamBuffer()
        buffer.add_data(wire)
        (event,) = list(buffer)
        return parser.parse(event.to_response_dict(), model.shape_for(shape))

    assert parse(bedrock_chunk(b'{"type":"ping"}', padding="pp"), "ResponseStream") == {
        "chunk": {"bytes": b'{"type":"ping"}'}}
    for exc in ("throttlingException", "internalServerException", "modelStreamErrorException",
                "validationException", "modelTimeoutException", "serviceUnavailableException"):
        assert parse(bedrock_exception(exc, "why"), "ResponseStream") == {"Error": {"Code": exc, "Message": "why"}}
    converse = [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockStart", {"start": {"toolUse": {"toolUseId": "tu_1", "name": "get_weather"}},
                               "contentBlockIndex": 1}),
        ("contentBlockDelta", {"delta": {"text": "Hello"}, "contentBlockIndex": 0}),
        ("contentBlockDelta", {"delta": {"reasoningContent": {"text": "hmm"}}, "contentBlockIndex": 0}),
        ("contentBlockDelta", {"delta": {"toolUse": {"input": '{"city":'}}, "contentBlockIndex": 1}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "end_turn"}),
        ("metadata", {"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
                      "metrics": {"latencyMs": 321}}),
    ]
    for event_type, body in converse:
        assert parse(converse_event(event_type, body, padding="xyz"), "ConverseStreamOutput") == {event_type: body}


# -- properties -------------------------------------------------------------------------------------


@given(messages)
def test_round_trip(items: list[tuple[dict[str, Any], bytes]]) -> None:
    wire = b"".join(encode_message(h, p) for h, p in items)
    scanner = EventStreamScanner(BOUND)
    got = scanner.feed(wire)
    scanner.close()
    assert pairs(got) == items
    assert scanner.pending == 0 and scanner.messages == len(items)


@given(messages, cuts)
def test_any_chunking_gives_the_same_messages(items: list[tuple[dict[str, Any], bytes]], at: list[int]) -> None:
    wire = b"".join(encode_message(h, p) for h, p in items)
    whole, error, _ = scan([wire])
    assert error is None
    pieces = split(wire, at)
    chunked, error, peak = scan(pieces)
    assert error is None
    assert chunked == whole
    # The buffer held at most one message (never a whole read's worth of later ones).
    assert peak < max(len(encode_message(h, p)) for h, p in items)


@given(messages, cuts)
def test_one_byte_and_arbitrary_reads_agree_with_botocore(items: list[tuple[dict[str, Any], bytes]],
                                                          at: list[int]) -> None:
    wire = b"".join(encode_message(h, p) for h, p in items)
    ours, error, _ = scan(split(wire, at))
    assert error is None
    assert pairs(ours) == botocore_decode(wire, split(wire, at))
    ones, _, _ = scan([wire[i : i + 1] for i in range(len(wire))])
    assert ones == ours


@given(st.lists(st.tuples(ref_headers, payloads), min_size=1, max_size=6), cuts)
def test_every_header_type_decodes_as_botocore_decodes_it(items: list[tuple[list[tuple[str, int, Any]], bytes]],
                                                          at: list[int]) -> None:
    wire = b"".join(ref_message(h, p) for h, p in items)
    ours, error, _ = scan(split(wire, at))
    assert error is None
    assert pairs(ours) == botocore_decode(wire)
    for message, (headers, _) in zip(ours, items, strict=True):
        for name, kind, value in headers:
            expected = {0: True, 1: False}.get(kind, value)
            assert message.headers[name] == expected and type(message.headers[name]) is type(expected)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(messages, st.data(), cuts)
def test_any_flipped_byte_is_a_typed_crc_error_at_its_message(items: list[tuple[dict[str, Any], bytes]],
                                                              data: st.DataObject, at: list[int]) -> None:
    encoded = [encode_message(h, p) for h, p in items]
    wire = bytearray(b"".join(encoded))
    index = data.draw(st.integers(0, len(wire) - 1))
    wire[index] ^= data.draw(st.integers(1, 255))
    starts = [sum(map(len, encoded[:i])) for i in range(len(encoded))]
    victim = max(i for i, s in enumerate(starts) if s <= index)
    whole, error, _ = scan([bytes(wire)])
    assert isinstance(error, CorruptFrame)
    assert error.offset == starts[victim]
    assert error.what == ("prelude_crc" if index - starts[victim] < 12 else "message_crc")
    assert error.expected is not None and error.actual is not None and error.expected != error.actual
    assert pairs(whole) == items[:victim]  # everything before the damaged message was delivered
    chunked, chunk_error, _ = scan(split(bytes(wire), at))
    assert chunked == whole and error_key(chunk_error) == error_key(error)
    with pytest.raises(botocore_eventstream.ChecksumMismatch):  # the reference rejects it too
        botocore_decode(bytes(wire))


@given(messages, st.data())
def test_a_stream_cut_inside_a_message_is_a_typed_error_at_close(items: list[tuple[dict[str, Any], bytes]],
                                                                 data: st.DataObject) -> None:
    encoded = [encode_message(h, p) for h, p in items]
    victim = data.draw(st.integers(0, len(encoded) - 1))
    keep = data.draw(st.integers(1, len(encoded[victim]) - 1))
    wire = b"".join(encoded[:victim]) + encoded[victim][:keep]
    scanner = EventStreamScanner(BOUND)
    got = scanner.feed(wire)
    assert pairs(got) == items[:victim] and scanner.pending == keep
    with pytest.raises(CorruptFrame) as info:
        scanner.close()
    assert info.value.what == "truncated"
    assert info.value.actual == keep
    assert info.value.expected == (len(encoded[victim]) if keep >= 12 else None)
    assert info.value.offset == len(wire) - keep
    assert f"{keep} bytes" in str(info.value)


@settings(max_examples=300)
@given(st.binary(max_size=2000), cuts, st.integers(16, 4096))
def test_arbitrary_bytes_never_hang_never_overflow_and_fail_only_typed(wire: bytes, at: list[int], bound: int) -> None:
    got, error, peak = scan(split(wire, at), bound)
    assert peak <= bound
    assert error is None or isinstance(error, (CorruptFrame, FrameTooLarge))
    whole, whole_error, _ = scan([wire], bound)
    assert got == whole and error_key(error) == error_key(whole_error)


# -- impossible and oversized lengths ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("prelude", "what", "actual"),
    [
        (with_prelude(0, 0), "length", 0),
        (with_prelude(15, 0), "length", 15),
        (with_prelude(16, 1), "length", 1),
        (with_prelude(100, 85), "length", 85),
        (with_prelude(100, 0xFFFFFFFF), "length", 0xFFFFFFFF),
    ],
)
def test_impossible_lengths_are_corrupt_as_soon_as_the_prelude_is_in(prelude: bytes, what: str, actual: int) -> None:
    for pieces in ([prelude], [prelude[i : i + 1] for i in range(12)]):
        scanner = EventStreamScanner(BOUND)
        with pytest.raises(CorruptFrame) as info:
            for piece in pieces:
                scanner.feed(piece)
        assert (info.value.what, info.value.actual, info.value.offset) == (what, actual, 0)


@pytest.mark.parametrize("total", [BOUND + 1, 1 << 24, 0xFFFFFFFF])
def test_an_oversized_message_raises_frame_too_large_from_its_prelude(total: int) -> None:
    good = encode_message({"a": "b"}, b"payload")
    scanner = EventStreamScanner(BOUND)
    with pytest.raises(FrameTooLarge) as info:
        scanner.feed(good + with_prelude(total, 0) + b"x" * 100)
    assert (info.value.size, info.value.limit) == (total, BOUND)
    assert "event-stream message" in str(info.value)
    assert pairs(list(info.value.decoded)) == [({"a": "b"}, b"payload")]
    assert scanner.pending <= 12 + 100  # nothing of the announced size was waited for


def test_a_message_of_exactly_the_bound_is_accepted() -> None:
    wire = encode_message({"k": "v"}, b"z" * (BOUND - 16 - len(b"\x01k\x07\x00\x01v")))
    assert len(wire) == BOUND
    assert EventStreamScanner(BOUND).feed(wire)[0].headers == {"k": "v"}


def test_bound_must_fit_the_smallest_message() -> None:
    with pytest.raises(ValueError):
        EventStreamScanner(15)


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        (b"\x01a\x0a", "unknown type 10"),
        (b"\x01a\xff", "unknown type 255"),
        (b"\x05ab", "runs past"),  # name longer than the section
        (b"\x01a\x07\x00\x05ab", "runs past"),  # string value longer than the section
        (b"\x01a\x04\x00\x01", "runs past"),  # truncated int32
        (b"\x01a\x09" + b"\x00" * 8, "UUID runs past"),
        (b"\x01a\x00\x01a\x01", "duplicate header 'a'"),
        (b"\x02\xff\xfe\x00", "not UTF-8"),
        (b"\x01a\x07\x00\x02\xc3\x28", "not UTF-8"),
        (b"\x01a", "runs past"),  # no type byte
    ],
)
def test_bad_headers_are_corrupt_frames(headers: bytes, fragment: str) -> None:
    prelude = with_prelude(16 + len(headers) + 2, len(headers))
    body = prelude + headers + b"{}"
    wire = body + struct.pack("!I", zlib.crc32(body))
    with pytest.raises(CorruptFrame) as info:
        EventStreamScanner().feed(encode_message({"ok": True}, b"") + wire)
    assert info.value.what == "header" and fragment in str(info.value)
    assert info.value.offset == len(encode_message({"ok": True}, b""))
    assert pairs(list(info.value.decoded)) == [({"ok": True}, b"")]


def test_a_failed_scanner_stays_failed() -> None:
    scanner = EventStreamScanner()
    bad = bytearray(encode_message({"a": "b"}, b"x"))
    bad[-1] ^= 1
    with pytest.raises(CorruptFrame) as first:
        scanner.feed(bytes(bad))
    with pytest.raises(CorruptFrame) as again:
        scanner.feed(encode_message({"a": "b"}, b"x"))
    assert again.value is first.value
    with pytest.raises(CorruptFrame):
        scanner.close()


def test_close_on_a_clean_boundary_is_silent_and_accepts_bytearray_and_memoryview() -> None:
    wire = encode_message({"a": "b"}, b"x")
    scanner = EventStreamScanner()
    assert pairs(scanner.feed(bytearray(wire[:5])) + scanner.feed(memoryview(wire)[5:])) == [({"a": "b"}, b"x")]
    assert scanner.feed(b"") == []
    scanner.close()
    assert type(EventStreamScanner().feed(bytearray(wire))[0].payload) is bytes


def test_header_cache_returns_independent_dicts() -> None:
    wire = bedrock_chunk(b"{}") * 3
    first, second, third = EventStreamScanner().feed(wire)
    first.headers[":event-type"] = "changed"
    assert second.headers[":event-type"] == "chunk" and third.headers[":event-type"] == "chunk"
    assert second.headers is not third.headers


def test_header_cache_stays_bounded() -> None:
    scanner = EventStreamScanner()
    for i in range(500):
        (message,) = scanner.feed(encode_message({"n": i}, b""))
        assert message.headers == {"n": i}
    assert len(scanner._cache) <= 64


# -- cost -------------------------------------------------------------------------------------------


def _one_byte_feeds_ns_per_byte(size: int, budget_ns_per_byte: float = float("inf")) -> float:
    """Best of three runs feeding a ``size``-byte message a byte at a time, in CPU time of this
    thread (time the scheduler gave other processes does not count: a loaded machine does not
    distort the ratio); a run that passes ``budget_ns_per_byte`` (checked as it goes) stops early,
    so a quadratic regression fails fast."""
    wire = encode_message({":event-type": "chunk"}, b"q" * (size - 16 - 20))
    assert len(wire) == size
    pieces = [wire[i : i + 1] for i in range(len(wire))]
    best = float("inf")
    for _ in range(3):
        scanner = EventStreamScanner(1 << 21)
        feed = scanner.feed
        t0 = time.thread_time_ns()
        for start in range(0, size, 4096):
            for piece in pieces[start : start + 4096]:
                feed(piece)
            if time.thread_time_ns() - t0 > budget_ns_per_byte * size:
                return float("inf")
        best = min(best, (time.thread_time_ns() - t0) / size)
        assert scanner.messages == 1 and scanner.pending == 0
    return best


def test_one_byte_reads_of_a_large_message_cost_linear_time() -> None:
    """Feeding a 1 MiB message a byte at a time costs, per byte, about what feeding a 64 KiB one
    does: the buffer is appended to, never re-copied per read (re-copying would make the 1 MiB case
    16 times dearer per byte, and the whole run minutes long). A ratio of two runs in the same
    process, in thread CPU time, not a wall-clock bound; the large run is abandoned once it passes 3x the small one's
    per-byte cost."""
    small = _one_byte_feeds_ns_per_byte(1 << 16)
    large = _one_byte_feeds_ns_per_byte(1 << 20, budget_ns_per_byte=3 * small)
    assert large / small < 3, (large, small)
