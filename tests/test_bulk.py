"""The bulk scanner: the C class equals the Python reference, the reference equals the SSE
scanner + classifier it replaces, every split of a stream into reads gives the same frames, and
the content journal replays into exactly the partial message the released bytes decode to."""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from otel_liveness.core.errors import FrameTooLarge
from otel_liveness.core.outcome import FrameKind
from otel_liveness.core.wire import bulk
from otel_liveness.core.wire.anthropic import decode_partial
from otel_liveness.core.wire.bulk import JOURNAL_CLIPPED, JOURNAL_OPEN, JOURNAL_STOPPED, PyScanner
from otel_liveness.core.wire.framing import _ROLES, SSEFramer, _comment_kind
from otel_liveness.core.wire.journal import replay_journal
from otel_liveness.core.wire.providers import PREFIX, StreamFacts, profile_for
from otel_liveness.core.wire.sse import SSEScanner

H, P, S, E, X, U = (FrameKind.HEARTBEAT, FrameKind.PREAMBLE, FrameKind.SEMANTIC, FrameKind.END, FrameKind.ERROR,
                    FrameKind.UNKNOWN)


def test_native_bulk_is_built() -> None:
    # `make install` compiles the C scanner; a silent fallback would leave the fast path untested.
    if bulk.PURE or os.environ.get("OTEL_LIVENESS_ALLOW_PURE_LANE"):
        pytest.skip("pure-Python scanner selected or allowed")
    assert bulk.NATIVE and bulk.Scanner is not PyScanner


def make(cls: Any, profile: str = "anthropic", max_frame: int = 1 << 20, journal: int = 1 << 20) -> tuple[Any, StreamFacts]:
    p = profile_for(profile)
    facts = StreamFacts()
    slow = functools.partial(p.classify_block, facts=facts)
    return cls(max_frame, tuple(p.fast.items()), slow, _comment_kind(p), _ROLES, journal, PREFIX), facts


def delta(text: Any, index: int = 0, kind: str = "text_delta", field: str = "text") -> bytes:
    body = json.dumps({"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text}},
                      separators=(",", ":"))
    return b"event: content_block_delta\ndata: " + body.encode() + b"\n\n"


def event(name: str, payload: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


START = event("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "usage": {
    "input_tokens": 3, "output_tokens": 1}}})
TEXT0 = event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                                                    "text": ""}})
TOOL1 = event("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
    "type": "tool_use", "id": "tu_1", "name": "f", "input": {}}})
THINK2 = event("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {
    "type": "thinking", "thinking": "", "signature": ""}})
STOP0 = event("content_block_stop", {"type": "content_block_stop", "index": 0})
STOP1 = event("content_block_stop", {"type": "content_block_stop", "index": 1})
MDELTA = event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}})
MSTOP = event("message_stop", {"type": "message_stop"})
PING = b'event: ping\ndata: {"type": "ping"}\n\n'
ERROR = event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}})

RAW_DELTA = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
             b'"text":@}}\n\n')
TEXTS = ["a", "", "h\u00e9llo \u4e16\u754c", 'say "hi"', "back\\slash", "line\nbreak\ttab", "\U0001f600", "\x00\x1f",
         "\ud83d", "\ude00", "end\\"]
PIECES = [
    *(delta(t) for t in TEXTS),
    *(delta(t, 1, "input_json_delta", "partial_json") for t in ('{"a":', "1}", '"q\\"')),
    delta("hm", 2, "thinking_delta", "thinking"), delta("sig", 2, "signature_delta", "signature"),
    delta("x", 7),  # no such block
    delta("x", 0, "text_delta", "thinking"),  # a type and field that do not go together
    delta("c", 0, "citations_delta", "citation"),
    *(RAW_DELTA.replace(b"@", body) for body in (
        b'"a","x":"b', b'"a\\"', b'"\\q"', b'"\xff"', b'"two\ndata: lines"')),
    RAW_DELTA.replace(b'"index":0', b'"index":00').replace(b"@", b'"z"'),
    RAW_DELTA.replace(b"data: ", b"data:").replace(b"@", b'"ns"'),
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", '
    b'"text": "sp"}}\n\n',
    START, TEXT0, TOOL1, THINK2, STOP0, STOP1, MDELTA, MSTOP, PING, ERROR,
    b": comment\n", b":\n", b": a\n: b\n\n", b": head\n" + STOP0, b"id: 7\n\n", b"retry: 10\n\n", b"event: weird\n\n",
    b"\n", b"\n\n\n", b"data: [DONE]\n\n", b"garbage without end",
]
_stream_parts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=24)
_line_ends = st.sampled_from(["lf", "crlf", "cr", "mixed"])


def with_line_ends(data: bytes, mode: str, seed: int) -> bytes:
    if mode == "lf":
        return data
    if mode == "crlf":
        return data.replace(b"\n", b"\r\n")
    if mode == "cr":
        return data.replace(b"\n", b"\r")
    out = bytearray()
    for i, b in enumerate(data):
        if b == 10:
            out += (b"\n", b"\r\n", b"\r")[(i * 7 + seed) % 3]
        else:
            out.append(b)
    return bytes(out)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in [*points, len(data)]:
        out.append(data[last:p])
        last = p
    return out


@st.composite
def streams(draw: Any) -> tuple[bytes, list[bytes]]:
    data = b"".join(draw(_stream_parts))
    if draw(st.booleans()):
        data = with_line_ends(data, draw(_line_ends), draw(st.integers(0, 2)))
    if draw(st.integers(0, 4)) == 0:
        data = b"\xef\xbb\xbf" + data
    cuts = draw(st.lists(st.integers(0, 1 << 16), max_size=12))
    return data, split(data, cuts)


def state(s: Any) -> tuple[Any, ...]:
    return (s.idle, s.buffered, s.discarded, s.journal(), s.journal_state, s.journal_size, s.pending(),
            None if s.hold is None else list(s.hold))


def outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return ("ok", fn(*args, **kwargs))
    except FrameTooLarge as exc:
        return ("too large", exc.size, exc.limit)


_ops = st.lists(st.one_of(
    st.tuples(st.just("feed"), st.integers(0, 1 << 16)),
    st.tuples(st.just("blocks"), st.integers(0, 1 << 16)),
    st.tuples(st.just("admit"), st.integers(0, 1 << 16)),
    st.tuples(st.just("hold"), st.booleans()),
    st.tuples(st.just("retract")),
    st.tuples(st.just("close"), st.booleans()),
), max_size=30)


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@settings(max_examples=500, deadline=None)
@given(stream=streams(), ops=_ops, max_frame=st.sampled_from([40, 120, 400, 1 << 20]),
       journal=st.sampled_from([-1, 0, 300, 1 << 20]), profile=st.sampled_from(["anthropic", "openai-chat", "sse"]))
def test_c_scanner_equals_the_reference(stream: tuple[bytes, list[bytes]], ops: list[tuple[Any, ...]], max_frame: int,
                                       journal: int, profile: str) -> None:
    data, _ = stream
    c, c_facts = make(bulk.Scanner, profile, max_frame, journal)
    py, py_facts = make(PyScanner, profile, max_frame, journal)
    pos = 0
    for op in ops:
        if op[0] in ("feed", "blocks", "admit"):
            take = op[1] % 97
            chunk, pos = data[pos : pos + take], pos + take
            method = {"feed": "feed", "blocks": "feed_blocks", "admit": "admit"}[op[0]]
            got_c, got_py = outcome(getattr(c, method), chunk), outcome(getattr(py, method), chunk)
            assert got_c == got_py, (op, chunk)
            if got_c[0] != "ok":
                return  # the engine ends the attempt at a FrameTooLarge: no state after it matters
        elif op[0] == "hold":
            c.hold = [] if op[1] else None
            py.hold = [] if op[1] else None
        elif op[0] == "retract":
            c.retract()
            py.retract()
        else:
            got_c, got_py = outcome(c.close, complete_lines=op[1]), outcome(py.close, complete_lines=op[1])
            assert got_c == got_py
            if got_c[0] != "ok":
                return
        assert state(c) == state(py), op
        assert c_facts.to_dict() == py_facts.to_dict()


_MERGED = (b'\xef\xbb\xbf: comment\revent: content_block_delta\rdata: {"type":"content_block_delta","index":0,"delta":'
           b'{"type":"text_delta","text":""}}\r\n' + START + b"\r\n")  # hypothesis's find: two events merged


@settings(max_examples=300, deadline=None)
@given(stream=streams(), profile=st.sampled_from(["anthropic", "openai-chat", "openai-responses", "gemini", "sse"]))
@example(stream=(_MERGED, [_MERGED[:14], _MERGED[14:]]), profile="anthropic")
def test_kinds_are_the_sse_scanner_and_classifier_for_every_split(stream: tuple[bytes, list[bytes]], profile: str) -> None:
    data, chunks = stream
    p = profile_for(profile)
    expected_facts = StreamFacts()
    reference = SSEScanner(1 << 20)
    expected = [k for chunk in chunks for k in p.classify_blocks(reference.feed_blocks(chunk), expected_facts)]
    expected += p.classify_blocks(reference.close_blocks(complete_lines=True), expected_facts)
    whole = None
    for cls in {bulk.Scanner, PyScanner}:
        scanner, facts = make(cls, profile)
        kinds = [k for chunk in chunks for k in scanner.feed(chunk)] + scanner.close(complete_lines=True)
        assert kinds == expected
        assert facts.to_dict() == expected_facts.to_dict()
        assert scanner.discarded == reference.discarded
        one, _ = make(cls, profile)  # the same bytes in one read: the same frames
        whole = one.feed(data) + one.close(complete_lines=True)
        if merges_events(data):  # the same frames; their kinds may differ (see the test below)
            assert len(whole) == len(kinds)
        else:
            assert whole == kinds


def merges_events(data: bytes) -> bool:
    """Whether an event of the stream has two ``event:`` fields: a lost blank line (a CR and the
    next event's LF read as one CRLF) merged two events into one."""
    scanner = SSEScanner(1 << 20)
    blocks = scanner.feed_blocks(data) + scanner.close_blocks(complete_lines=True)
    return any(sum(line == b"event" or line.startswith(b"event:") for line in re.split(rb"\r\n|\r|\n", block)) > 1
               for block in blocks)


def test_an_event_with_two_event_fields_is_kinded_by_its_first_line_on_the_fast_path() -> None:
    """A known divergence, pinned so that its fix shows: the fast table keys a block by its first
    line, while the parse (the SSE rule: the last ``event:`` field wins) takes the last. Only a
    stream that lost a blank line has such an event (hypothesis found one: CR line ends, a CR and
    the next event's LF read as one CRLF); split after a leading comment, the comment is a
    heartbeat of its own and the rest meets the fast table, read whole the block is parsed. No
    provider sends it and the SDK above fails to decode its data (two JSON documents); one road
    per chunk (a single classifier) removes it."""
    merged = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
              b'"text":"a"}}\nevent: message_start\ndata: {"type":"message_start","message":{"id":"m"}}')
    p = profile_for("anthropic")
    assert p.classify_blocks([merged], StreamFacts()) == [S]  # the fast table: its first line
    assert p.classify_blocks([b": ping\n" + merged], StreamFacts()) == [H, P]  # parsed: its last
    assert merges_events(merged + b"\n\n") and not merges_events(START + TEXT0)


@settings(max_examples=300, deadline=None)
@given(stream=streams(), cut=st.integers(0, 1 << 16), impl=st.sampled_from(["native", "python"]))
def test_the_journal_replays_to_the_partial_of_the_released_bytes(stream: tuple[bytes, list[bytes]], cut: int,
                                                                  impl: str) -> None:
    # Truncated anywhere: the partial decoded from the journal is the partial the bytes decode to.
    _, chunks = stream
    cls = bulk.Scanner if impl == "native" else PyScanner
    scanner, _ = make(cls)
    released = b""
    stop = cut % (len(chunks) + 1)
    for chunk in chunks[:stop]:
        kinds = scanner.feed(chunk)
        if X in kinds:
            break  # an error frame ends the attempt (its bytes and what follows are not released)
        released += chunk
    else:
        scanner.close()  # as SSEFramer.partial does: the attempt is over
    if scanner.journal_state == JOURNAL_STOPPED:
        return
    assert scanner.journal_state == JOURNAL_OPEN
    assert replay_journal(scanner.journal()) == decode_partial(released)


def test_the_journal_is_compact_and_keeps_the_wire_escapes() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        assert scanner.feed(START + TEXT0 + delta("hi") + delta('a"b') + PING) == [P, S, S, S, H]
        journal = scanner.journal()
        # one run for block 0's text: code, index, length, then each body after its varint length
        assert journal.endswith(b"t\x00\x00\x00\x00\x08\x00\x00\x00\x02hi\x04a\\\"b")
        assert journal.startswith(b"R") and len(journal) == (5 + len(START) - 2) + (5 + len(TEXT0) - 2) + 9 + 3 + 5
        assert replay_journal(journal)["content"] == [{"type": "text", "text": 'hia"b', "complete": False}]


def test_the_journal_stops_at_an_error_and_is_clipped_at_its_bound() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        scanner.feed(START + TEXT0 + delta("a") + ERROR + delta("b"))
        assert scanner.journal_state == JOURNAL_STOPPED
        assert replay_journal(scanner.journal())["content"][0]["text"] == "a"
        small, _ = make(cls, journal=(5 + len(START) - 2) + (5 + len(TEXT0) - 2) + 9 + 1 + 10)  # room for one delta
        small.feed(START + TEXT0 + delta("0123456789") + delta("more") + STOP0)
        assert small.journal_state == JOURNAL_CLIPPED
        partial = replay_journal(small.journal(), clipped=True)
        assert partial["clipped"] and partial["content"] == [{"type": "text", "text": "0123456789", "complete": False}]


def test_retract_forgets_the_last_read() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        scanner.feed(START + TEXT0 + delta("kept"))
        before = scanner.journal()
        scanner.feed(delta(" not released") + STOP0)
        scanner.retract()
        assert scanner.journal() == before


def test_other_wires_keep_no_journal() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls, "openai-chat", journal=-1)
        scanner.feed(b'data: {"id":"c","choices":[{"delta":{"content":"hi"}}]}\n\n')
        assert scanner.journal() == b"" and scanner.journal_size == 0


def test_admit_consumes_only_reads_of_semantic_frames() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        assert scanner.feed(START + TEXT0) == [P, S]
        run = delta("a") * 3
        assert scanner.admit(run) == 3
        assert scanner.admit(run + run[:10]) == 3 and scanner.buffered == 10  # a frame in progress stays pending
        assert scanner.admit(run[10:] + run) == 6 and scanner.idle
        for declined in (PING, delta("a") + PING, MDELTA, run.replace(b"\n", b"\r\n"), b"", b": c\n",
                         bytearray(run)):
            before = state(scanner)
            assert scanner.admit(declined) == -1
            assert state(scanner) == before
        # a read that completes no frame (a network read that ended inside one): raw progress, taken
        assert scanner.admit(run[:20]) == 0 and scanner.buffered == 20
        assert scanner.admit(run[20:30]) == 0 and scanner.buffered == 30
        assert scanner.admit(run[30:]) == 3 and scanner.idle
        assert replay_journal(scanner.journal())["content"][0]["text"] == "a" * 15


def test_admit_declines_past_the_frame_bound() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls, max_frame=60)
        scanner.feed(b"\n")  # past the stream head
        big = delta("x" * 100)
        assert scanner.admit(big) == -1 and scanner.idle
        with pytest.raises(FrameTooLarge):
            scanner.feed(big)


def test_hold_keeps_the_frames_that_are_not_heartbeats() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        scanner.hold = []
        scanner.feed(b": flood\n" * 5 + PING + START + b": x\n" + PING + b"event: message_st")
        assert scanner.hold == [START]
        assert scanner.pending() == b"event: message_st"
        scanner.feed(b"art\r")
        assert scanner.pending() == b"event: message_start\r"


def test_comment_lines_are_heartbeats_the_moment_they_end() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        assert scanner.feed(b": OPENROUTER") == []
        assert scanner.feed(b" PROCESSING\n: and") == [H]
        assert scanner.feed(b" more\n\n" + b":\n" * 1000) == [H] + [H] * 1000
        assert scanner.idle


def test_framer_partial_covers_the_whole_reply_not_only_the_prefix() -> None:
    framer = SSEFramer(profile_for("anthropic"), 1 << 20)
    body = START + TEXT0 + b"".join(delta(f"w{i} ") for i in range(5000))
    for i in range(0, len(body), 700):
        framer.feed(body[i : i + 700])
    partial = framer.partial(body[:100])  # the raw head a truncation carries is not what it decodes
    assert partial == decode_partial(body)
    assert partial["content"][0]["text"] == "".join(f"w{i} " for i in range(5000))
    assert framer.retained < len(body) // 2


def test_pure_mode_selects_the_references(tmp_path: Any) -> None:
    # OTEL_LIVENESS_PURE=1 (make test-pure) runs the pure-Python scanner and lane whatever is built.
    import subprocess
    import sys

    code = ("from otel_liveness.core.wire import bulk, lane, framing; from otel_liveness.core.request import engine; "
            "print(bulk.PURE, bulk.NATIVE, lane.NATIVE, engine.Lane is lane.PyLane, framing.Scanner is bulk.PyScanner)")
    env = {**os.environ, "OTEL_LIVENESS_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False", "True", "True"]
    from otel_liveness import Policy

    assert Policy.from_env({"OTEL_LIVENESS_PURE": "1"}) == Policy()  # not a policy setting


KINDS = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature",
         "input_json_delta": "partial_json"}
KINDS_CODE = {"text_delta": b"t", "thinking_delta": b"k", "signature_delta": b"s", "input_json_delta": b"j"}


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=48), index=st.integers(0, 2 * 10**9), kind=st.sampled_from(sorted(KINDS)),
       cut=st.integers(0, 260), insert=st.binary(max_size=3))
def test_canonical_deltas_are_recognised_alike(text: str, index: int, kind: str, cut: int, insert: bytes) -> None:
    # A delta, and the same delta with a few bytes spliced in anywhere: both scanners journal it alike.
    block = delta(text, index, kind, KINDS[kind])[:-2]
    mutated = block[:cut] + insert + block[cut:]
    for candidate in (block, mutated):
        journals = []
        for cls in (bulk.Scanner, PyScanner):
            scanner, _ = make(cls)
            scanner.feed(candidate.replace(b"\n\n", b"\n") + b"\n\n")
            journals.append(scanner.journal())
        assert journals[0] == journals[1]
    assert bulk.canonical_delta(block) == (KINDS_CODE[kind], index, json.dumps(text)[1:-1].encode()) or index > 999_999_999



@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@pytest.mark.parametrize("journal", [1 << 20, 200])
@pytest.mark.parametrize("max_frame", [1 << 20, 190])
def test_one_delta_a_read_is_admitted_alike(journal: int, max_frame: int) -> None:
    # The steady lane's usual read -- one delta, alone -- has a shortcut in both implementations.
    reads = [delta(t) for t in TEXTS] + [delta("x" * 200), delta("y", 1), delta("z"), delta("z", 0, "thinking_delta",
                                                                                           "thinking")]
    reads += [r.replace(b"\n\n", b"\n\n" + PING) for r in reads[:3]] + [delta("w")[:-1], b"\n", delta("v")]
    got = []
    for cls in (bulk.Scanner, PyScanner):
        scanner, _ = make(cls, max_frame=max_frame, journal=journal)
        scanner.feed(START + TEXT0)
        answers = []
        for chunk in reads:
            answer = scanner.admit(chunk)
            if answer < 0:
                try:
                    scanner.feed(chunk)
                except FrameTooLarge:
                    answers.append(("too large", scanner.journal()))
                    break  # the attempt ends there
            answers.append((answer, scanner.journal(), scanner.journal_state, scanner.buffered))
        scanner.retract()
        got.append((answers, scanner.journal()))
    assert got[0] == got[1]


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
def test_a_text_body_ends_alike_wherever_its_bytes_fall_in_a_word() -> None:
    # The C scanner finds a delta's closing quote eight bytes at a time after its first two:
    # each byte that ends or breaks a string body (a quote, a backslash with what it takes, an LF),
    # at every offset across the first words, in bodies that end there or run on -- admitted and
    # journaled as the reference does, a read at a time and the body alone.
    specials = [b'\\"', b'\\\\', b"\\n", b'"', b"\n", b"\\", b'\\u00e9', b"\xc3\xa9", b"\r", b"\\\r", b"\r\n"]
    reads = []
    for lead in range(0, 26):
        for special in specials:
            for tail in (b"", b"z" * 9):
                reads.append(RAW_DELTA.replace(b"@", b'"' + b"a" * lead + special + tail + b'"'))
    reads += [RAW_DELTA.replace(b"@", b'"' + b"b" * n + b'"') for n in range(0, 40)]
    reads += [r[:cut] for r in reads[:60] for cut in (len(r) - 5, len(r) - 4, len(r) - 3)]  # cut before its end
    # A CR elsewhere in a read of deltas -- in another semantic block, in the frame in progress, at
    # the end -- makes it a read of CR line ends (the general path's): declined alike.
    plain = RAW_DELTA.replace(b"@", b'"ok"')
    reads += [plain + TEXT0.replace(b'"text":""', b'"text":"\r"'), plain + b"event: content_block_delta\r",
              plain + b"\r", plain * 3 + STOP0.replace(b"\n\n", b"\r\n\r\n"), plain]
    got = []
    for cls in (bulk.Scanner, PyScanner):
        scanner, _ = make(cls)
        scanner.feed(START + TEXT0)
        answers = []
        for chunk in reads:
            answer = scanner.admit(chunk)
            if answer < 0:
                scanner.feed(chunk + b"\n\n")  # (a read it declined, judged the general way and ended)
            answers.append((answer, scanner.journal_size, scanner.buffered))
        got.append((answers, scanner.journal()))
    assert got[0] == got[1]
    assert sum(1 for answer, _, _ in got[0][0] if answer > 0) > 300  # most are canonical deltas, admitted
    from otel_liveness.core.wire.bulk import canonical_delta as reference

    for chunk in reads:
        block = chunk[:-2] if chunk.endswith(b"\n\n") else chunk
        assert bulk.canonical_delta(block) == reference(block), block


# -- hardening: objects Python can reach in odd states, and the C/reference agreements -------------

ROLES = ("H", "P", "S", "E")  # (heartbeat, preamble, semantic, error): identity is what counts


def _plain(cls: Any, fast: Any = (), slow: Any = None, max_frame: int = 1 << 20, journal: int = 1 << 20,
           prefix: int = 27) -> Any:
    return cls(max_frame, tuple(fast), slow or (lambda block: ["slow"]), "C", ROLES, journal, prefix)


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
def test_an_uninitialised_c_scanner_raises_instead_of_crashing() -> None:
    calls = [("feed", (b"x",)), ("feed_blocks", (b"x",)), ("admit", (b"data: x\n\n",)), ("close", ()),
             ("close_blocks", ()), ("pending", ()), ("journal", ()), ("retract", ())]

    failed = bulk.Scanner.__new__(bulk.Scanner)
    with pytest.raises(TypeError):
        failed.__init__(1 << 20, [(b"x", "S")], 42, "C", ROLES)  # slow is not callable: still not initialised
    for scanner in (bulk.Scanner.__new__(bulk.Scanner), failed):
        for name, args in calls:
            with pytest.raises(RuntimeError, match=r"__init__\(\) was not called"):
                getattr(scanner, name)(*args)
        for attr in ("idle", "buffered", "journal_size", "journal_state", "retained", "hold"):
            with pytest.raises(RuntimeError):
                getattr(scanner, attr)
        with pytest.raises(RuntimeError):
            scanner.hold = []
        assert scanner.discarded == 0 and scanner.max_frame_bytes == 0  # plain fields: zero, harmless
    # __init__ later makes it a scanner like any other
    late = bulk.Scanner.__new__(bulk.Scanner)
    late.__init__(1 << 20, [], lambda block: ["slow"], "C", ROLES)
    assert late.feed(b"data: x\n\n") == ["slow"]


IMPLS = [pytest.param(PyScanner, id="python"),
         pytest.param(bulk.Scanner, id="c", marks=pytest.mark.skipif(not bulk.NATIVE, reason="not built"))]


@pytest.mark.parametrize("cls", IMPLS)
def test_a_classifier_that_calls_back_into_its_scanner_is_refused(cls: Any) -> None:
    # The classifier runs in the middle of a read (C: while a block of the scanner's own buffers is
    # being read). Calling back into the same scanner raises RuntimeError; the read itself completes.
    refused: list[str] = []
    box: dict[str, Any] = {}

    def slow(block: bytes) -> list[Any]:
        scanner = box["scanner"]
        for name, args in [("feed", (b"data: inner\n\n" * 50,)), ("feed_blocks", (b"data: y\n\n",)),
                           ("admit", (b"data: y\n\n",)), ("close", ()), ("close_blocks", ()), ("retract", ())]:
            try:
                getattr(scanner, name)(*args)
            except RuntimeError as exc:
                assert "busy" in str(exc)
                refused.append(name)
        assert scanner.pending() is not None and scanner.journal() is not None  # reading is harmless
        return ["slow:" + block.decode()]

    scanner = _plain(cls, [(b"data: fast", "S")], slow, prefix=10)
    box["scanner"] = scanner
    stream = b"data: fast\n\n" + b"data: a\n\ndata: b" + b"\n\n" + b"data: fast\n\n"
    assert scanner.feed(stream[:20]) == ["S"]  # the straddling block comes next, from pend
    assert scanner.feed(stream[20:]) == ["slow:data: a", "slow:data: b", "S"]
    assert refused == ["feed", "feed_blocks", "admit", "close", "close_blocks", "retract"] * 2
    reference = _plain(cls, [(b"data: fast", "S")], lambda b: ["slow:" + b.decode()], prefix=10)
    assert reference.feed(stream[:20]) + reference.feed(stream[20:]) == ["S", "slow:data: a", "slow:data: b", "S"]
    assert scanner.journal() == reference.journal() and scanner.idle


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
def test_the_c_scanner_cannot_be_reinitialised_or_rehold_during_its_classifier() -> None:
    seen: list[str] = []
    box: dict[str, Any] = {}

    def slow(block: bytes) -> list[Any]:
        scanner = box["scanner"]
        with pytest.raises(RuntimeError, match="busy"):
            scanner.__init__(1 << 20, [], lambda b: [], "C", ROLES)  # would free the keys being compared
        with pytest.raises(RuntimeError, match="busy"):
            scanner.hold = None  # would free the list being appended to
        seen.append("x")
        return ["P"]

    scanner = _plain(bulk.Scanner, (), slow)
    box["scanner"] = scanner
    scanner.hold = []
    assert scanner.feed(b"data: a\n\ndata: b\n\n") == ["P", "P"]
    assert seen == ["x", "x"] and scanner.hold == [b"data: a\n\n", b"data: b\n\n"]


@pytest.mark.parametrize("cls", IMPLS)
def test_another_thread_during_the_classifier_is_refused(cls: Any) -> None:
    # The classifier is Python: another thread may run while it does. It gets RuntimeError, and
    # the read in progress is not disturbed.
    import threading

    box: dict[str, Any] = {}
    errors: list[BaseException] = []

    def other() -> None:
        try:
            box["scanner"].feed(b"data: from another thread\n\n" * 100)
        except BaseException as exc:  # recorded for the assertion below
            errors.append(exc)

    def slow(block: bytes) -> list[Any]:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
        return ["slow"]

    scanner = _plain(cls, (), slow)
    box["scanner"] = scanner
    assert scanner.feed(b"data: a\n\ndata: b\n\n") == ["slow", "slow"]
    assert [type(e) for e in errors] == [RuntimeError, RuntimeError]
    assert scanner.idle and scanner.feed(b"data: c\n\n") == ["slow"]
    assert [type(e) for e in errors] == [RuntimeError] * 3


# The fast table is keyed as a dict: a block's first `prefix` bytes, or the whole block when it is
# shorter (never the blank line's LF); the first of duplicate keys wins. Small alphabets and short
# prefixes make short keys, keys holding LFs and duplicates common.
_ALPHABET = list(b"ab:\n")
_KIND = st.sampled_from(["H", "P", "S", "E", "X"])


@st.composite
def _tables(draw: Any) -> tuple[int, list[tuple[bytes, str]], bytes]:
    prefix = draw(st.integers(2, 6))
    key = st.lists(st.sampled_from(_ALPHABET), min_size=1, max_size=prefix).map(bytes)
    fast = draw(st.lists(st.tuples(key, _KIND), min_size=1, max_size=8))
    fast += [(k, draw(_KIND)) for k, _ in fast if draw(st.booleans())]  # duplicates, other kinds
    suffix = st.lists(st.sampled_from(_ALPHABET), max_size=8).map(bytes)
    pieces = st.one_of(
        st.sampled_from([k for k, _ in fast]).map(lambda k: k.rstrip(b"\n") + b"\n\n"),  # a block that is a key
        st.tuples(st.sampled_from([k for k, _ in fast]), suffix).map(lambda t: t[0] + t[1] + b"\n\n"),
        suffix, st.just(b"\n"), st.just(b": c\n"),
    )
    data = b"".join(draw(st.lists(pieces, max_size=16)))
    return prefix, fast, data


def _oracle_kinds(blocks: list[bytes], fast: list[tuple[bytes, str]], prefix: int) -> list[Any]:
    table: dict[bytes, str] = {}
    for key, kind in fast:
        table.setdefault(key, kind)
    out: list[Any] = []
    for block in blocks:
        kind = table.get(block[:prefix])
        if kind is not None:
            out.append(kind)
        elif all(line[:1] == b":" for line in block.split(b"\n")):
            out += ["C"] * (block.count(b"\n") + 1)
        else:
            out.append("slow")
    return out


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@settings(max_examples=600, deadline=None)
@given(table=_tables(), cuts=st.lists(st.integers(0, 1 << 10), max_size=8),
       how=st.lists(st.sampled_from(["feed", "admit", "blocks"]), min_size=1, max_size=10),
       journal=st.sampled_from([-1, 1 << 20]), hold=st.booleans())
def test_c_and_reference_key_the_fast_table_alike(table: tuple[int, list[tuple[bytes, str]], bytes], cuts: list[int],
                                                 how: list[str], journal: int, hold: bool) -> None:
    # Caught: a short key not re-checked on a block shorter than the prefix (C), the admit shortcut
    # keying on the blank line's LF (reference), duplicate keys (first wins in both).
    prefix, fast, data = table
    c = _plain(bulk.Scanner, fast, journal=journal, prefix=prefix)
    py = _plain(PyScanner, fast, journal=journal, prefix=prefix)
    for s in (c, py):
        s.feed(b"\n")  # past the stream head: admit() may take reads
        s.hold = [] if hold else None
    for i, chunk in enumerate(split(data, cuts)):
        method = {"feed": "feed", "admit": "admit", "blocks": "feed_blocks"}[how[i % len(how)]]
        assert outcome(getattr(c, method), chunk) == outcome(getattr(py, method), chunk), (method, chunk)
        assert state(c) == state(py)
    assert outcome(c.close, complete_lines=True) == outcome(py.close, complete_lines=True)
    assert state(c) == state(py)
    # and both are the dict lookup of each block's head
    blocks = SSEScanner(1 << 20).feed_blocks(data)
    for cls in (bulk.Scanner, PyScanner):
        whole = _plain(cls, fast, prefix=prefix)
        assert whole.feed(data) == _oracle_kinds(blocks, fast, prefix)


def test_the_known_disagreements_agree() -> None:
    # The three inputs C and the reference answered differently.
    for cls in {bulk.Scanner, PyScanner}:
        # a key shorter than the prefix, on a block as short, with more bytes after it in the read
        assert _plain(cls, [(b"ab", "S")], prefix=8).feed(b"ab\n\nxxxxxxxxxxxx\n\n") == ["S", "slow"]
        # duplicate keys, the head of a canonical delta among them: the first wins
        head = b"event: content_block_delta\n"
        assert _plain(cls, [(head, "S"), (head, "P")]).feed(delta("a")) == ["S"]
        # admit() keys a whole-frame read by its block's head, not by the blank line's LF
        scanner = _plain(cls, [(b"ab\n\n", "S")], prefix=8)
        scanner.feed(b"\n")
        assert scanner.admit(b"ab\n\n") == -1
        scanner = _plain(cls, [(b"ab", "S")], prefix=8)
        scanner.feed(b"\n")
        assert scanner.admit(b"ab\n\n") == 1


_DELTA_HEAD = b"event: content_block_delta\n"


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@settings(max_examples=300, deadline=None)
@given(stream=streams(), kinds=st.lists(st.sampled_from(["H", "P", "S", "E"]), min_size=2, max_size=3),
       ops=st.lists(st.sampled_from(["feed", "admit"]), min_size=1, max_size=6))
def test_duplicate_delta_heads_pick_the_first_in_both(stream: tuple[bytes, list[bytes]], kinds: list[str],
                                                      ops: list[str]) -> None:
    fast = [(_DELTA_HEAD, k) for k in kinds] + [(b"event: content_block_start\n", "S")]
    _, chunks = stream
    c = _plain(bulk.Scanner, fast)
    py = _plain(PyScanner, fast)
    for i, chunk in enumerate(chunks):
        method = ops[i % len(ops)]
        assert outcome(getattr(c, method), chunk) == outcome(getattr(py, method), chunk), (method, chunk)
        assert state(c) == state(py)


# -- the frame bound does not depend on how reads split the stream ---------------------------------

_FRAME_PIECES = st.one_of(
    st.integers(0, 24).map(lambda n: b":" + b"c" * n + b"\n"),  # a comment line
    st.integers(0, 24).map(lambda n: b"data: " + b"x" * n + b"\n"),
    st.just(b"event: e\n"), st.just(b"\n"), st.just(b"\n\n"),
)


def _verdict(kind: str, chunks: list[bytes], bound: int) -> tuple[Any, ...]:
    if kind == "sse":
        sse = SSEScanner(bound)
        frames: list[Any] = []
        try:
            for chunk in chunks:
                frames += sse.feed(chunk)
                assert sse.buffered <= bound
            frames += sse.close()
        except FrameTooLarge:
            return ("too large",)
        return ("ok", frames)
    scanner, _ = make(bulk.Scanner if kind == "c" else PyScanner, "sse", max_frame=bound)
    kinds: list[Any] = []
    try:
        for chunk in chunks:
            kinds += scanner.feed(chunk)
            assert scanner.buffered <= bound
        kinds += scanner.close(complete_lines=True)
    except FrameTooLarge:
        return ("too large",)
    return ("ok", kinds)


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(_FRAME_PIECES, min_size=1, max_size=10), bound=st.integers(1, 30),
       ends=st.sampled_from(["lf", "crlf", "cr", "mixed"]), seed=st.integers(0, 2),
       cuts=st.lists(st.integers(0, 1 << 10), max_size=10))
def test_the_frame_bound_gives_one_verdict_for_every_split(parts: list[bytes], bound: int, ends: str, seed: int,
                                                           cuts: list[int]) -> None:
    data = with_line_ends(b"".join(parts), ends, seed)
    impls = ["sse", "python"] + (["c"] if bulk.NATIVE else [])
    whole = {kind: _verdict(kind, [data], bound) for kind in impls}
    assert len({v[0] for v in whole.values()}) == 1, whole  # the three agree
    splits = [[data[:i], data[i:]] for i in range(1, len(data))]  # every split in two
    splits += [[data[i : i + 1] for i in range(len(data))], split(data, cuts)]  # byte by byte; any
    for kind in impls:
        for chunks in splits:
            assert _verdict(kind, chunks, bound) == whole[kind], (kind, chunks)


@pytest.mark.parametrize("cls", IMPLS)
def test_what_the_frame_bound_measures(cls: Any) -> None:
    def verdict(chunks: list[bytes], bound: int) -> str:
        scanner, _ = make(cls, "sse", max_frame=bound)
        try:
            for chunk in chunks:
                scanner.feed(chunk)
        except FrameTooLarge:
            return "too large"
        return "ok"

    wire = b": c\ndata: xxxxxxxxxx\n\n"  # a comment (3 bytes) at the head, a 16-byte frame
    assert verdict([wire], 16) == verdict([wire[:4], wire[4:]], 16) == "ok"
    assert verdict([wire], 15) == verdict([wire[:4], wire[4:]], 15) == "too large"
    block = b"data: xxxxxxxxxx"  # 16 bytes: exactly at a bound of 16, whether its last LF comes alone or not
    for chunks in ([block + b"\n\n"], [block + b"\n", b"\n"], [block, b"\n", b"\n"]):
        assert verdict(chunks, 16) == "ok" and verdict(chunks, 15) == "too large"
    line = b":" + b"c" * 20  # a comment line is a frame of its own: bounded too, whole or in pieces
    for chunks in ([line + b"\ndata: x\n\n"], [line[:10], line[10:] + b"\n", b"data: x\n\n"]):
        assert verdict(chunks, 20) == "too large" and verdict(chunks, 21) == "ok"
    crlf = block.replace(b"data", b"da\r\nta") + b"\r\n\r\n"  # CRLF counts as one byte
    assert verdict([crlf], 17) == verdict([crlf[:5], crlf[5:]], 17) == "ok"


# -- heartbeats inside runs of content (beating: the attempt's scanner) ---------------------------


def test_a_beating_scanner_admits_pings_among_content_and_counts_them() -> None:
    for cls in {bulk.Scanner, PyScanner}:
        scanner, _ = make(cls)
        scanner.feed(START + TEXT0)
        assert scanner.admit(delta("a") + PING) == -1  # not beating: the general path's
        scanner.beating = True
        assert scanner.admit(delta("a") + PING) == 2 and (scanner.beats, scanner.trailing) == (1, 1)
        assert scanner.admit(PING + delta("b") + PING + delta("c")) == 4 and (scanner.beats, scanner.trailing) == (2, 0)
        # pings alone: admitted, all of them after the last content (the lane keeps its horizon)
        assert scanner.admit(PING) == 1 and (scanner.beats, scanner.trailing) == (1, 1)
        assert scanner.admit(PING + PING) == 2 and (scanner.beats, scanner.trailing) == (2, 2)
        # part of a frame, no frame completed: raw progress, admitted (no heartbeat counted yet)
        assert scanner.admit(PING[:10]) == 0 and (scanner.beats, scanner.trailing) == (0, 0)
        assert scanner.admit(PING[10:]) == 1 and (scanner.beats, scanner.trailing) == (1, 1)
        assert scanner.admit(delta("d") + MDELTA) == -1  # a fact-bearing frame: the general path's
        assert scanner.admit(delta("e")) == 1 and (scanner.beats, scanner.trailing) == (0, 0)
        assert scanner.admit(delta("f") + b": keep-alive\n\n") == -1  # a comment is not a fast heartbeat
        assert scanner.admit(delta("g") + PING + delta("h")[:20]) == 2 and scanner.buffered == 20
        assert scanner.admit(delta("h")[20:] + PING) == 2 and (scanner.beats, scanner.trailing) == (1, 1)
        journal = scanner.journal()
        plain, _ = make(cls)
        plain.feed(START + TEXT0)
        for text in "abcegh":
            plain.feed(delta(text))
        assert journal == plain.journal()  # the pings are not journaled


def _beating_state(s: Any) -> tuple[Any, ...]:
    return (*state(s), s.beats, s.trailing)


_PINGED = st.lists(st.sampled_from([delta("a"), delta("bc"), delta('q"'), PING, PING, TEXT0, MDELTA, b": c\n\n"]),
                   max_size=30)


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@settings(max_examples=400, deadline=None)
@given(parts=_PINGED, cuts=st.lists(st.integers(0, 1 << 12), max_size=12), ops=_ops,
       max_frame=st.sampled_from([40, 120, 1 << 20]), journal=st.sampled_from([-1, 0, 300, 1 << 20]))
def test_c_beating_scanner_equals_the_reference(parts: list[bytes], cuts: list[int], ops: list[tuple[Any, ...]],
                                                max_frame: int, journal: int) -> None:
    data = START + b"".join(parts)
    c, c_facts = make(bulk.Scanner, "anthropic", max_frame, journal)
    py, py_facts = make(PyScanner, "anthropic", max_frame, journal)
    c.beating = py.beating = True
    pos = 0
    for op in ops:
        if op[0] in ("feed", "blocks", "admit"):
            take = op[1] % 311
            chunk, pos = data[pos : pos + take], pos + take
            method = {"feed": "feed", "blocks": "feed_blocks", "admit": "admit"}[op[0]]
            got_c, got_py = outcome(getattr(c, method), chunk), outcome(getattr(py, method), chunk)
            assert got_c == got_py, (op, chunk)
            if got_c[0] != "ok":
                return
        elif op[0] == "hold":
            c.hold = [] if op[1] else None
            py.hold = [] if op[1] else None
        elif op[0] == "retract":
            c.retract()
            py.retract()
        else:
            got_c, got_py = outcome(c.close, complete_lines=op[1]), outcome(py.close, complete_lines=op[1])
            assert got_c == got_py
            if got_c[0] != "ok":
                return
        assert _beating_state(c) == _beating_state(py), op
        assert c_facts.to_dict() == py_facts.to_dict()


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@settings(max_examples=300, deadline=None)
@given(table=_tables(), cuts=st.lists(st.integers(0, 1 << 10), max_size=8),
       how=st.lists(st.sampled_from(["feed", "admit", "blocks"]), min_size=1, max_size=10),
       journal=st.sampled_from([-1, 1 << 20]))
def test_c_and_reference_beating_key_the_fast_table_alike(table: tuple[int, list[tuple[bytes, str]], bytes],
                                                          cuts: list[int], how: list[str], journal: int) -> None:
    prefix, fast, data = table
    c = _plain(bulk.Scanner, fast, journal=journal, prefix=prefix)
    py = _plain(PyScanner, fast, journal=journal, prefix=prefix)
    for s in (c, py):
        s.feed(b"\n")
        s.beating = True
    for i, chunk in enumerate(split(data, cuts)):
        method = {"feed": "feed", "admit": "admit", "blocks": "feed_blocks"}[how[i % len(how)]]
        assert outcome(getattr(c, method), chunk) == outcome(getattr(py, method), chunk), (method, chunk)
        assert _beating_state(c) == _beating_state(py)


# -- one framing: the bulk scanners (C and reference) split every stream of an adversarial corpus
#    into the blocks the general path's SSEScanner does, for every way of reading it

def _corpus() -> list[tuple[str, bytes]]:
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "fuzz" / "corpus.py"
    spec = importlib.util.spec_from_file_location("_fuzz_corpus", path)
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    out = [(provider, stream) for provider, bodies in corpus.streams().items()
           for body in bodies for stream in corpus.variants(body)]
    adversarial = b"".join(PIECES)  # every delta shape, comments at heads, blank-line runs, an unended tail
    for mode, seed in (("lf", 0), ("crlf", 0), ("cr", 0), ("mixed", 1), ("mixed", 2)):
        out.append(("anthropic", with_line_ends(adversarial, mode, seed)))
        out.append(("anthropic", b"\xef\xbb\xbf" + with_line_ends(_MERGED + adversarial, mode, seed)))
    return out


def _reads(data: bytes) -> list[list[bytes]]:
    sizes = [len(data) or 1, 1, 2, 3, 7, 64, max(1, len(data) // 3)]
    return [[data[i : i + n] for i in range(0, len(data), n)] for n in sizes]


def test_the_bulk_scanners_frame_a_corpus_as_the_sse_scanner_does() -> None:
    corpus = _corpus()
    assert len(corpus) > 40 and {p for p, _ in corpus} >= {"anthropic", "openai-chat", "gemini", "openrouter"}
    for provider, data in corpus:
        for reads in _reads(data):
            general = SSEScanner(1 << 20)
            blocks = [b for r in reads for b in general.feed_blocks(r)] + general.close_blocks(complete_lines=True)
            p = profile_for(provider)
            kinds = p.classify_blocks(blocks, StreamFacts())
            for cls in {bulk.Scanner, PyScanner}:
                scanner, _ = make(cls, provider)
                got = [b for r in reads for b in scanner.feed_blocks(r)] + scanner.close_blocks(complete_lines=True)
                assert got == blocks, (cls, provider, len(reads))
                assert scanner.discarded == general.discarded
                kinded, _ = make(cls, provider)
                assert [k for r in reads for k in kinded.feed(r)] + kinded.close(complete_lines=True) == kinds


@pytest.mark.skipif(not bulk.NATIVE, reason="the C scanner is not built")
@pytest.mark.parametrize("journal", [400, 1500, 1 << 20])
@pytest.mark.parametrize("size", [300, 701, 4096])
def test_runs_of_deltas_in_long_reads_journal_alike(journal: int, size: int) -> None:
    # The C scanner extends the journal's open run delta by delta within a read and writes the
    # run's length back once: long reads of many deltas -- texts up to and past a one-byte length,
    # escapes, a thinking block and a second text block (new runs), pings among them -- cut
    # anywhere, some retracted, against a journal bound that clips mid-read: the same journal,
    # state and partial message as the reference, read by read.
    texts = ["a", "bc", "d" * 126, "e" * 127, "f" * 128, 'x"y\\z', "é€", "gg" * 40]
    frames = [delta(t) for t in texts] + [PING] + [delta(t, index=2, kind="thinking_delta", field="thinking") for t in texts]
    frames += [delta(t, index=3) for t in texts[:3]] + [PING, delta("end")]
    data = b"".join(frames * 4)
    scanners = []
    for cls in (bulk.Scanner, PyScanner):
        scanner, _ = make(cls, journal=journal)
        scanner.feed(START + TEXT0 + THINK2)
        scanner.beating = True
        scanners.append(scanner)
    c, py = scanners
    admitted = 0
    for i, at in enumerate(range(0, len(data), size)):
        chunk = data[at : at + size]
        got = c.admit(chunk)
        assert got == py.admit(chunk), i
        admitted += got > 0
        if i % 3 == 2:
            c.retract()
            py.retract()
        assert state(c) == state(py), i
    assert admitted > len(data) // size // 2
    if journal == 1 << 20:
        assert c.journal_state == JOURNAL_OPEN and replay_journal(c.journal()) == replay_journal(py.journal())
    else:
        assert c.journal_state == JOURNAL_CLIPPED
