"""Anthropic partial content (``otel_liveness.core.wire.anthropic``): the released prefix of a truncated
stream decoded into blocks, and the continuation message built from the complete ones only --
text, thinking with its signature, redacted thinking, tool use from ``input_json_delta`` pieces,
server tool use and citations."""

from __future__ import annotations

from typing import Any

from otel_liveness.core.wire.anthropic import continuation_message, decode_partial
from otel_liveness.testing.scripts import sse_event

START = sse_event("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x"}})


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse_event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> bytes:
    return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})


def text(index: int, value: str, *, complete: bool = True) -> bytes:
    out = block_start(index, {"type": "text", "text": ""}) + block_delta(index, {"type": "text_delta", "text": value})
    return out + (block_stop(index) if complete else b"")


def tool(index: int, pieces: list[str], *, complete: bool, kind: str = "tool_use", name: str = "get_weather") -> bytes:
    out = block_start(index, {"type": kind, "id": f"toolu_{index}", "name": name, "input": {}})
    for piece in pieces:
        out += block_delta(index, {"type": "input_json_delta", "partial_json": piece})
    return out + (block_stop(index) if complete else b"")


CITATION = {"type": "char_location", "cited_text": "The sky is blue.", "document_index": 0, "document_title": "Sky",
            "start_char_index": 0, "end_char_index": 16}


def test_message_identity_and_stop_reason() -> None:
    finish = sse_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
    partial = decode_partial(START + text(0, "hi") + finish)
    assert (partial["id"], partial["model"], partial["stop_reason"]) == ("msg_1", "claude-x", "tool_use")
    assert partial["content"] == [{"type": "text", "text": "hi", "complete": True}]


def test_a_tool_call_cut_mid_arguments_is_partial_and_dropped_from_the_continuation() -> None:
    prefix = START + text(0, "Let me check. ") + tool(1, ['{"city": "Par'], complete=False)
    partial = decode_partial(prefix)
    assert partial["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {},
                                     "partial_json": '{"city": "Par', "complete": False}
    # Only the complete text survives; its trailing space is trimmed (the API rejects it on a final turn).
    assert continuation_message(partial) == {"role": "assistant", "content": [{"type": "text", "text": "Let me check."}]}


def test_a_complete_tool_call_is_rebuilt_from_its_json_pieces() -> None:
    prefix = START + tool(0, ['{"ci', 'ty": "Paris", ', '"unit": "c"}'], complete=True) + text(1, "cut", complete=False)
    partial = decode_partial(prefix)
    assert partial["content"][0]["partial_json"] == '{"city": "Paris", "unit": "c"}' and partial["content"][0]["complete"]
    assert continuation_message(partial) == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Paris", "unit": "c"}}]}


def test_a_tool_call_with_no_arguments_and_a_server_tool_call() -> None:
    prefix = START + tool(0, [], complete=True) + tool(1, ['{"query": "x"}'], complete=True, kind="server_tool_use",
                                                       name="web_search")
    partial = decode_partial(prefix)
    assert partial["content"][0]["partial_json"] == ""
    assert continuation_message(partial)["content"] == [  # type: ignore[index]
        {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {}},
        {"type": "server_tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "x"}},
    ]


def test_a_complete_tool_call_whose_json_does_not_parse_is_dropped_not_repaired() -> None:
    partial = decode_partial(START + tool(0, ['{"city": '], complete=True) + text(1, "after"))
    assert continuation_message(partial) == {"role": "assistant", "content": [{"type": "text", "text": "after"}]}


def test_citations_are_decoded_and_carried_into_the_continuation() -> None:
    prefix = (START + block_start(0, {"type": "text", "text": ""})
              + block_delta(0, {"type": "citations_delta", "citation": CITATION})
              + block_delta(0, {"type": "text_delta", "text": "The sky is blue."})
              + block_delta(0, {"type": "citations_delta", "citation": {**CITATION, "start_char_index": 4}})
              + block_stop(0))
    partial = decode_partial(prefix)
    block = partial["content"][0]
    assert block["citations"] == [CITATION, {**CITATION, "start_char_index": 4}] and block["text"] == "The sky is blue."
    assert continuation_message(partial) == {"role": "assistant", "content": [
        {"type": "text", "text": "The sky is blue.", "citations": [CITATION, {**CITATION, "start_char_index": 4}]}]}


def test_text_without_citations_has_no_citations_key() -> None:
    assert continuation_message(decode_partial(START + text(0, "plain"))) == {
        "role": "assistant", "content": [{"type": "text", "text": "plain"}]}


def test_thinking_is_kept_only_with_its_signature() -> None:
    signed = (block_start(0, {"type": "thinking", "thinking": "", "signature": ""})
              + block_delta(0, {"type": "thinking_delta", "thinking": "plan "})
              + block_delta(0, {"type": "thinking_delta", "thinking": "it"})
              + block_delta(0, {"type": "signature_delta", "signature": "sig"})
              + block_delta(0, {"type": "signature_delta", "signature": "_1"}) + block_stop(0))
    unsigned = (block_start(1, {"type": "thinking", "thinking": ""})
                + block_delta(1, {"type": "thinking_delta", "thinking": "no signature"}) + block_stop(1))
    partial = decode_partial(START + signed + unsigned)
    assert partial["content"][0]["thinking"] == "plan it" and partial["content"][0]["signature"] == "sig_1"
    assert continuation_message(partial) == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "plan it", "signature": "sig_1"}]}


def test_redacted_thinking_is_kept_with_its_data() -> None:
    prefix = (START + block_start(0, {"type": "redacted_thinking", "data": "opaque"}) + block_stop(0)
              + block_start(1, {"type": "redacted_thinking", "data": ""}) + block_stop(1))
    assert continuation_message(decode_partial(prefix)) == {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": "opaque"}]}


def test_nothing_complete_means_no_continuation() -> None:
    assert continuation_message(decode_partial(START + text(0, "cut", complete=False))) is None
    assert continuation_message(decode_partial(b"")) is None
    # A final text block of whitespace only is dropped (and with it the message).
    assert continuation_message(decode_partial(START + text(0, "  \n"))) is None
    # ...but only the final one: an empty-text block never becomes an item.
    assert continuation_message(decode_partial(START + text(0, "") + text(1, "x"))) == {
        "role": "assistant", "content": [{"type": "text", "text": "x"}]}


def test_whitespace_is_trimmed_only_at_the_end_of_the_final_text_block() -> None:
    prefix = START + text(0, " first ") + tool(1, ["{}"], complete=True) + text(2, " last \n")
    content = continuation_message(decode_partial(prefix))["content"]  # type: ignore[index]
    assert [c.get("text") for c in content] == [" first ", None, " last"]


def test_a_frame_cut_by_the_truncation_and_stray_frames_are_ignored() -> None:
    cut = block_delta(0, {"type": "text_delta", "text": "lost"})[:-12]
    stray = (block_delta(7, {"type": "text_delta", "text": "no such block"}) + block_stop(9)
             + sse_event("content_block_delta", [1, 2]) + sse_event("ping", {"type": "ping"})
             + sse_event("error", {"type": "error", "error": {"type": "overloaded_error"}}))
    partial = decode_partial(START + text(0, "kept", complete=False) + stray + cut)
    assert partial["content"] == [{"type": "text", "text": "kept", "complete": False}]


def test_blocks_are_ordered_by_index_not_arrival() -> None:
    prefix = START + text(1, "second") + text(0, "first")
    assert [b["text"] for b in decode_partial(prefix)["content"]] == ["first", "second"]


def test_a_payload_without_a_type_is_read_by_its_event_line() -> None:
    untyped = b'event: content_block_delta\ndata: {"index": 0, "delta": {"type": "text_delta", "text": "!"}}\n\n'
    partial = decode_partial(START + text(0, "hi", complete=False) + untyped)
    assert partial["content"][0]["text"] == "hi!"


def test_frames_without_an_index_touch_no_block() -> None:
    no_index_delta = sse_event("content_block_delta", {"type": "content_block_delta",
                                                       "delta": {"type": "text_delta", "text": "stray"}})
    no_index_stop = sse_event("content_block_stop", {"type": "content_block_stop"})
    partial = decode_partial(START + text(0, "a", complete=False) + text(1, "b", complete=False) + no_index_delta + no_index_stop)
    assert [(b["text"], b["complete"]) for b in partial["content"]] == [("a", False), ("b", False)]


def test_a_whole_frame_whose_data_is_not_json_is_skipped() -> None:
    bad = b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": \n\n'
    partial = decode_partial(START + text(0, "ok", complete=False) + bad + block_stop(0))
    assert partial["content"] == [{"type": "text", "text": "ok", "complete": True}]


def test_only_message_start_sets_the_message_identity() -> None:
    odd_start = sse_event("message_start", {"type": "message_start", "message": "not an object"})
    other = sse_event("content_block_start", {"type": "content_block_start", "index": 0, "message": {"id": "msg_wrong"},
                                              "content_block": {"type": "text", "text": ""}})
    partial = decode_partial(odd_start + other)
    assert partial["id"] is None and partial["model"] is None and partial["content"][0]["type"] == "text"


def test_trimming_looks_at_the_final_block_only() -> None:
    # A text block first and a tool call last: nothing to trim, the text keeps its whitespace.
    content = continuation_message(decode_partial(START + text(0, "first ") + tool(1, ["{}"], complete=True)))["content"]  # type: ignore[index]
    assert content == [{"type": "text", "text": "first "}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                            "input": {}}]


def test_frames_that_are_not_content_do_not_stop_the_decoding() -> None:
    ping = sse_event("ping", {"type": "ping"})
    stray = block_delta(7, {"type": "text_delta", "text": "no such block"})
    prefix = (START + block_start(0, {"type": "text", "text": ""}) + block_delta(0, {"type": "text_delta", "text": "a"})
              + ping + stray + block_delta(0, {"type": "text_delta", "text": "b"}) + block_stop(0))
    assert decode_partial(prefix)["content"] == [{"type": "text", "text": "ab", "complete": True}]


def test_an_incomplete_block_before_complete_ones_is_skipped_not_the_end() -> None:
    # Blocks are ordered by index: an earlier block can still be open when a later one completed.
    partial = decode_partial(START + block_start(0, {"type": "text", "text": ""}) + text(1, "later"))
    assert continuation_message(partial) == {"role": "assistant", "content": [{"type": "text", "text": "later"}]}


def test_a_final_whitespace_only_text_block_is_dropped_after_others() -> None:
    partial = decode_partial(START + text(0, "kept") + text(1, "  \n"))
    assert continuation_message(partial) == {"role": "assistant", "content": [{"type": "text", "text": "kept"}]}
