"""Plain httpx 0.28 (any SSE endpoint), with a hook that prints every liveness fact as it happens.
Reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL (`otel-liveness serve` prints a base URL to try it with)."""

import os

import httpx

import otel_liveness

base = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
transport = otel_liveness.wrap(httpx.HTTPTransport(), hooks=[lambda event: print(type(event).__name__)])
with httpx.Client(transport=transport, timeout=600) as client:
    with client.stream("POST", f"{base}/v1/messages",
                       headers={"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""), "anthropic-version": "2023-06-01"},
                       json={"model": "claude-opus-4-5", "max_tokens": 64, "stream": True,
                             "messages": [{"role": "user", "content": "Hello"}]}) as response:
        for _chunk in response.iter_raw():
            pass
        print(response.extensions["liveness"]["stop_reason"])
