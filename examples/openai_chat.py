"""The openai SDK (Chat Completions, streaming) with the liveness transport. Reads OPENAI_API_KEY / OPENAI_BASE_URL.

Without a key: `otel-liveness serve --scenario inband_overload --port 8765 &`, then
OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sk-sim python examples/openai_chat.py
"""

import httpx2
import openai

import otel_liveness

client = openai.OpenAI(http_client=httpx2.Client(transport=otel_liveness.wrap(httpx2.HTTPTransport())), max_retries=0)
stream = client.chat.completions.create(model="gpt-5", stream=True, messages=[{"role": "user", "content": "Hello"}])
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
