"""SSE scanner: spec framing, chunking invariance, size bound."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_liveness.core.errors import FrameTooLarge
from otel_liveness.core.wire.sse import COMMENT, Frame, SSEScanner, comment_frames, parse_block, without_head_comments


def scan(data: bytes, *, chunks: list[int] | None = None, bound: int = 1 << 20) -> list[Frame]:
    scanner = SSEScanner(bound)
    out: list[Frame] = []
    if chunks is None:
        out += scanner.feed(data)
    else:
        pos = 0
        for size in chunks:
            out += scanner.feed(data[pos : pos + size])
            pos += size
        out += scanner.feed(data[pos:])
    out += scanner.close()
    return out


def fields(frames: list[Frame]) -> list[tuple[str | None, bytes]]:
    return [(f.event, f.data) for f in frames]


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (b"event: ping\ndata: {}\n\n", [("ping", b"{}")]),
        (b"event: ping\r\ndata: {}\r\n\r\n", [("ping", b"{}")]),
        (b"event: ping\rdata: {}\r\r", [("ping", b"{}")]),
        (b"event:ping\ndata:{}\n\n", [("ping", b"{}")]),  # no space after the colon
        (b"data:  two spaces\n\n", [(None, b" two spaces")]),  # only one space is stripped
        (b"data: a\ndata: b\ndata:\n\n", [(None, b"a\nb\n")]),  # multi-line data
        (b"\xef\xbb\xbfdata: x\n\n", [(None, b"x")]),  # BOM at stream start
        # A BOM is stripped only at the very start; later it makes an unknown field name.
        (b"data: x\n\n\xef\xbb\xbfdata: y\n\n", [(None, b"x")]),
        (b"id: 1\nretry: 5\n\n", []),  # no data, no event: not a frame
        (b"event: ping\n\n", [("ping", b"")]),  # event without data: a frame, as the SDKs see it
        (b"id: 7\nretry: 100\ndata: x\n\n", [(None, b"x")]),  # id/retry parsed and ignored
        (b": OPENROUTER PROCESSING\n\n", [(COMMENT, b"OPENROUTER PROCESSING")]),
        (b": keep\n: alive\ndata: x\n\n", [(COMMENT, b"keep"), (COMMENT, b"alive"), (None, b"x")]),
        (b"data: x\n\n\n\n\ndata: y\n\n", [(None, b"x"), (None, b"y")]),
        (b"data: unterminated", []),  # an incomplete final event is not dispatched (spec)
        (b"event: message_stop\ndata: {\"t", []),
        (b"event: e\nfoo: bar\ndata: x\n\n", [("e", b"x")]),  # unknown field ignored
        (b"data\n\n", [(None, b"")]),  # a field name alone
        (b"\n\n\n", []),
    ],
)
def test_spec_framing(wire: bytes, expected: list[tuple[str | None, bytes]]) -> None:
    assert fields(scan(wire)) == expected


def test_comment_inside_block_is_counted_not_split() -> None:
    (frame,) = scan(b"event: e\n: note\ndata: x\n\n")
    assert (frame.event, frame.data, frame.comments) == ("e", b"x", 1)


def test_comment_line_is_a_heartbeat_before_its_blank_line() -> None:
    scanner = SSEScanner()
    assert fields(scanner.feed(b": OPENROUTER PROCESSING\n")) == [(COMMENT, b"OPENROUTER PROCESSING")]
    assert scanner.feed(b"\n") == []


def test_cr_at_chunk_end_is_held_for_crlf() -> None:
    scanner = SSEScanner()
    assert scanner.feed(b"data: x\r") == []
    assert fields(scanner.feed(b"\n\r\n")) == [(None, b"x")]
    assert scanner.close() == []


def test_split_bom() -> None:
    assert fields(scan(b"\xef\xbb\xbfdata: x\n\n", chunks=[1, 1, 1])) == [(None, b"x")]
    # A partial BOM that does not complete is ordinary bytes (an unknown field name here).
    assert fields(scan(b"\xefdata: x\n\n", chunks=[1])) == fields(scan(b"\xefdata: x\n\n")) == []


def test_frame_bound_raises_instead_of_buffering() -> None:
    scanner = SSEScanner(max_frame_bytes=64)
    scanner.feed(b"data: " + b"a" * 50)
    with pytest.raises(FrameTooLarge) as info:
        scanner.feed(b"a" * 50)
    assert info.value.limit == 64 and info.value.size > 64


def test_complete_oversized_frame_raises() -> None:
    with pytest.raises(FrameTooLarge):
        SSEScanner(max_frame_bytes=16).feed(b"data: " + b"x" * 40 + b"\n\n")


def test_frames_exactly_at_the_bound_pass() -> None:
    block = b"data: " + b"x" * 10
    assert fields(SSEScanner(max_frame_bytes=len(block)).feed(block + b"\n\n")) == [(None, b"x" * 10)]


def test_rejects_nonpositive_bound() -> None:
    with pytest.raises(ValueError):
        SSEScanner(0)


ANTHROPIC = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1"}}\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b": comment\r\n\r\n"
    b'event: content_block_delta\r\ndata: {"delta":{"text":"h\xc3\xa9"}}\r\n\r\n'
    b"data: a\rdata: b\r\r"
    b"\n\n\n"
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(ANTHROPIC)), max_size=30))
def test_any_chunking_gives_identical_frames(cuts: list[int]) -> None:
    whole = scan(ANTHROPIC)
    points = sorted(set(cuts))
    sizes = [b - a for a, b in itertools.pairwise([0, *points])]
    assert scan(ANTHROPIC, chunks=sizes) == whole
    assert len(whole) == 6


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=20))
def test_arbitrary_bytes_never_crash_and_are_chunking_invariant(data: bytes, cuts: list[int]) -> None:
    points = sorted({c for c in cuts if c <= len(data)})
    sizes = [b - a for a, b in itertools.pairwise([0, *points])]
    try:
        whole = scan(data, bound=128)
    except FrameTooLarge:
        with pytest.raises(FrameTooLarge):
            scan(data, chunks=sizes, bound=128)
        return
    assert scan(data, chunks=sizes, bound=128) == whole


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(min_size=1, max_size=200), max_size=40))
def test_buffer_never_exceeds_bound(chunks: list[bytes]) -> None:
    scanner = SSEScanner(max_frame_bytes=256)
    for chunk in chunks:
        try:
            scanner.feed(chunk)
        except FrameTooLarge:
            return
        assert scanner.buffered <= 256


def _verdict(chunks: list[bytes], bound: int) -> str:
    scanner = SSEScanner(bound)
    try:
        for chunk in chunks:
            scanner.feed(chunk)
            assert scanner.buffered <= bound
    except FrameTooLarge:
        return "too large"
    return "ok"


@pytest.mark.parametrize(
    ("wire", "fits", "over"),
    [
        (b": c\ndata: xxxxxxxxxx\n\n", 16, 15),  # a head comment is a frame of its own, measured alone
        (b"data: xxxxxxxxxx\n\n", 16, 15),  # the frame: its lines, the last one's LF not counted
        (b":" + b"c" * 20 + b"\ndata: x\n\n", 21, 20),  # a comment line is bounded too
        (b"data: a\r\ndata: b\r\n\r\n", 15, 14),  # CRLF counts as one LF
        (b"data: a\n: inside\n\n", 16, 15),  # a comment after a field line belongs to its frame
        (b"\n\n\ndata: a\n\n", 7, 6),  # blank lines before a frame are not part of it
    ],
)
def test_the_frame_bound_does_not_depend_on_the_split(wire: bytes, fits: int, over: int) -> None:
    splits = [[wire], [wire[i : i + 1] for i in range(len(wire))]] + [[wire[:i], wire[i:]] for i in range(1, len(wire))]
    assert {_verdict(chunks, fits) for chunks in splits} == {"ok"}
    assert {_verdict(chunks, over) for chunks in splits} == {"too large"}


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: b.replace(b"x", b"\r\n\r\n")), cuts=st.lists(st.integers(0, 200), max_size=4),
       detour=st.binary(max_size=60))
def test_restore_takes_back_everything_a_read_changed(data: bytes, cuts: list[int], detour: bytes) -> None:
    # A read fed after a snapshot and taken back with restore leaves no trace: the scanner then
    # reads the rest exactly as one that never saw it (the bulk scanner's admit relies on it).
    stream = b"\xef\xbb\xbf" + data if cuts and cuts[0] % 2 else data
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in itertools.pairwise([0, *points, len(stream)])]
    plain, detoured = SSEScanner(1 << 20), SSEScanner(1 << 20)
    expected: list[tuple[str | None, bytes]] = []
    got: list[tuple[str | None, bytes]] = []
    for piece in pieces:
        state = detoured.snapshot()
        detoured.feed(detour)
        detoured.restore(state)
        assert (detoured.held, detoured.in_progress(), detoured.steady) == (plain.held, plain.in_progress(), plain.steady)
        expected += [(f.event, f.data) for f in plain.feed(piece)]
        got += [(f.event, f.data) for f in detoured.feed(piece)]
    expected += [(f.event, f.data) for f in plain.close()]
    got += [(f.event, f.data) for f in detoured.close()]
    assert got == expected and detoured.discarded == plain.discarded


# -- the head-comment rules, one copy: what parse_block makes of a block is what the scanners'
#    helpers say (the bulk scanner counts and strips head comments with them, without parsing)

_LINES = [b": keep-alive", b":", b"::x", b": ", b"data: x", b"data:", b"event: e", b"event:e", b"id: 1", b"retry: 5",
          b"x", b"data: :", b" : y", b"\xff"]


@settings(max_examples=500, deadline=None)
@given(lines=st.lists(st.sampled_from(_LINES), min_size=1, max_size=8))
def test_the_head_comment_helpers_say_what_parse_block_makes(lines: list[bytes]) -> None:
    block = b"\n".join(lines)
    frames: list[Frame] = []
    parse_block(block, frames)
    heads = next((i for i, line in enumerate(lines) if line[:1] != b":"), len(lines))
    assert [f.event for f in frames[:heads]] == [COMMENT] * heads
    count = comment_frames(block)
    rest = without_head_comments(block)
    if heads == len(lines):  # comment lines only: each a frame, nothing after them
        assert count == len(frames) == len(lines)
        assert rest == b""
        return
    assert count == 0
    assert rest == b"\n".join(lines[heads:])
    after = frames[heads:]
    assert len(after) <= 1
    if after:  # the frame after the head comments is made of the rest, and measured on it
        assert after[0].size == len(rest) + 2
        alone: list[Frame] = []
        parse_block(rest, alone)
        assert alone == after
