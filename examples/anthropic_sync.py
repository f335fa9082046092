"""The anthropic SDK (sync) with the liveness transport. Reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.

Without a key, against the simulated provider (a dead socket, retried below the SDK):
    otel-liveness serve --scenario dead_socket --port 8765 &
    ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=sk-ant-sim python examples/anthropic_sync.py
"""

import anthropic
import httpx2

import otel_liveness

transport = otel_liveness.wrap(httpx2.HTTPTransport(), otel_liveness.Policy(wall_timeout=600))
client = anthropic.Anthropic(http_client=httpx2.Client(transport=transport), max_retries=0)

try:
    with client.messages.stream(model="claude-opus-4-5", max_tokens=1024,
                                messages=[{"role": "user", "content": "Think hard, then answer."}]) as stream:
        print(stream.get_final_text())
        print(stream.response.extensions["liveness"]["attempts"][-1]["heartbeats"], "heartbeats")
except otel_liveness.StreamTruncated as exc:
    # Content was released, then the stream died: continue from the complete blocks only.
    print("truncated after", len(exc.prefix), "bytes:", otel_liveness.continuation_message(exc.partial))
except Exception as exc:
    error = otel_liveness.liveness_error(exc)  # the SDK wraps failures before the response
    if isinstance(error, otel_liveness.ProviderError):
        print("provider failure after", error.attempts, "attempts:", error.last_cause)
    else:
        raise
