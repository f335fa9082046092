"""The content journal (``core/wire/journal.py``): what its writer records, its reader replays into the
partial message the recorded frames decode to; a retracted read leaves it as it was; its bound
is never passed. The C half (``_journal.h``) is held to the same bytes in ``tests/test_bulk.py``
(through the scanners) and below."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_liveness.core.outcome import FrameKind
from otel_liveness.core.wire import bulk
from otel_liveness.core.wire.anthropic import decode_partial
from otel_liveness.core.wire.journal import (
    JOURNAL_CLIPPED,
    JOURNAL_OPEN,
    JOURNAL_STOPPED,
    Journal,
    canonical_delta,
    replay_journal,
)
from otel_liveness.core.wire.providers import StreamFacts, profile_for
from otel_liveness.core.wire.sse import SSEScanner
from tests.test_bulk import PIECES, make

# The content pieces of test_bulk's corpus (every canonical and non-canonical delta shape, block
# starts and stops, message events), each one LF-framed block.
_CONTENT = [piece for piece in PIECES if piece.startswith(b"event: ") and piece.endswith(b"\n\n")
            and piece.count(b"\n\n") == 1 and b"event: error" not in piece and b"event: ping" not in piece]
_reads = st.lists(st.lists(st.sampled_from(_CONTENT), min_size=1, max_size=5), min_size=1, max_size=12)
# ... of them, those the Anthropic profile calls content (semantic or preamble): what a scanner journals
_PROFILE = profile_for("anthropic")
_JOURNALED = [piece for piece in _CONTENT if all(
    kind in (FrameKind.SEMANTIC, FrameKind.PREAMBLE) for kind in _PROFILE.classify_block(piece[:-2], StreamFacts()))]


def blocks_of(data: bytes) -> list[bytes]:
    scanner = SSEScanner(1 << 20)
    return scanner.feed_blocks(data) + scanner.close_blocks()


def test_the_corpus_has_both_kinds_of_record() -> None:
    canonical = [p for p in _CONTENT if canonical_delta(p[:-2]) is not None]
    assert len(canonical) >= 10 and len(_CONTENT) - len(canonical) >= 10
    assert len([p for p in _JOURNALED if canonical_delta(p[:-2]) is not None]) >= 10 and len(_JOURNALED) > 20


@settings(max_examples=300, deadline=None)
@given(reads=_reads)
def test_written_then_read_is_the_partial_of_the_recorded_frames(reads: list[list[bytes]]) -> None:
    journal = Journal(1 << 20)
    for read in reads:
        journal.mark()
        journal.record(blocks_of(b"".join(read)))
    data = b"".join(b"".join(read) for read in reads)
    assert journal.state == JOURNAL_OPEN
    assert journal.size == len(journal.contents())
    assert replay_journal(journal.contents()) == decode_partial(data)


@settings(max_examples=200, deadline=None)
@given(reads=_reads, last=st.lists(st.sampled_from(_CONTENT), min_size=1, max_size=5))
def test_a_retracted_read_leaves_the_journal_as_it_was(reads: list[list[bytes]], last: list[bytes]) -> None:
    journal = Journal(1 << 20)
    for read in reads:
        journal.mark()
        journal.record(blocks_of(b"".join(read)))
    before = (journal.contents(), journal.state, journal.run_head)
    journal.mark()
    journal.record(blocks_of(b"".join(last)))
    journal.retract()
    assert (journal.contents(), journal.state, journal.run_head) == before
    # and it goes on as if the read had never come: the next read is recorded as it would have been
    again = Journal(1 << 20)
    for read in [*reads, last]:
        again.record(blocks_of(b"".join(read)))
    journal.record(blocks_of(b"".join(last)))
    assert journal.contents() == again.contents()


@settings(max_examples=200, deadline=None)
@given(reads=_reads, limit=st.integers(0, 600))
def test_a_clipped_journal_stays_within_its_bound_and_replays_a_prefix(reads: list[list[bytes]], limit: int) -> None:
    journal = Journal(limit)
    blocks: list[bytes] = []
    for read in reads:
        blocks += blocks_of(b"".join(read))
        journal.record(blocks_of(b"".join(read)))
    assert journal.size <= limit
    assert journal.state in (JOURNAL_OPEN, JOURNAL_CLIPPED)
    clipped = journal.state == JOURNAL_CLIPPED
    partial = replay_journal(journal.contents(), clipped=clipped)
    if not clipped:
        assert partial == decode_partial(b"".join(block + b"\n\n" for block in blocks))
    else:  # the partial of the blocks before the first that did not fit, said to be clipped
        prefixes = [decode_partial(b"".join(block + b"\n\n" for block in blocks[:k])) for k in range(len(blocks))]
        assert partial in [{**prefix, "clipped": True} for prefix in prefixes]


def test_stop_ends_an_open_journal_only() -> None:
    journal = Journal(1 << 20)
    journal.stop()
    assert journal.state == JOURNAL_STOPPED and not journal.writing
    clipped = Journal(0)
    clipped.record([PIECES[0][:-2]])
    assert clipped.state == JOURNAL_CLIPPED
    clipped.stop()
    assert clipped.state == JOURNAL_CLIPPED
    assert not Journal(-1).writing


@pytest.mark.parametrize("cls", [pytest.param(bulk.Scanner, id="scanner"), pytest.param(bulk.PyScanner, id="reference")])
@settings(max_examples=100, deadline=None)
@given(reads=st.lists(st.lists(st.sampled_from(_JOURNALED), min_size=1, max_size=5), min_size=1, max_size=12))
def test_a_scanners_journal_is_the_writers(cls: Any, reads: list[list[bytes]]) -> None:
    # The scanner (C where built) only tells the writer which blocks are content: the same bytes.
    scanner, _ = make(cls)
    journal = Journal(1 << 20)
    for read in reads:
        data = b"".join(read)
        scanner.feed(data)
        journal.record(blocks_of(data))
    assert scanner.journal() == journal.contents()
    assert scanner.journal_state == journal.state
