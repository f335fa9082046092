"""framer_for: the framer a response's content type asks for, reusing an attempt's unfed default."""

from __future__ import annotations

from otel_liveness.core.wire.framing import EventStreamFramer, SSEFramer, framer_for
from otel_liveness.core.wire.providers import PROFILES

SSE = "text/event-stream"
EVENTSTREAM = "application/vnd.amazon.eventstream"


def test_an_unfed_sse_framer_of_the_same_profile_and_bounds_is_reused() -> None:
    anthropic = PROFILES["anthropic"]
    default = SSEFramer(anthropic, 1 << 20, 1 << 16)
    assert framer_for(anthropic, 1 << 20, SSE, 1 << 16, unfed=default) is default
    # anything else gets a framer of its own
    for other in (framer_for(anthropic, 1 << 19, SSE, 1 << 16, unfed=default),
                  framer_for(anthropic, 1 << 20, SSE, 1 << 15, unfed=default),
                  framer_for(PROFILES["openai-chat"], 1 << 20, SSE, 1 << 16, unfed=default),
                  framer_for(anthropic, 1 << 20, SSE, 1 << 16)):
        assert isinstance(other, SSEFramer) and other is not default
    bedrock = PROFILES["bedrock"]
    assert isinstance(framer_for(bedrock, 1 << 20, EVENTSTREAM, 1 << 16, unfed=SSEFramer(bedrock, 1 << 20, 1 << 16)),
                      EventStreamFramer)


def test_the_reused_framer_frames_as_a_new_one() -> None:
    anthropic = PROFILES["anthropic"]
    data = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","model":"x"}}\n\n'
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"a"}}\n\n')
    reused = framer_for(anthropic, 1 << 20, SSE, 1 << 20, unfed=SSEFramer(anthropic, 1 << 20, 1 << 20))
    fresh = SSEFramer(anthropic, 1 << 20, 1 << 20)
    assert reused.feed(data) == fresh.feed(data) and reused.facts.to_dict() == fresh.facts.to_dict()
