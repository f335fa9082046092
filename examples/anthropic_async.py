"""The anthropic SDK (async, asyncio or trio) with the liveness transport and OpenTelemetry.
Reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL (`otel-liveness serve` prints a base URL to try it with)."""

import asyncio

import anthropic
import httpx2

import otel_liveness
from otel_liveness.telemetry import TelemetryHook


async def main() -> None:
    transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), hooks=[TelemetryHook()])
    async with anthropic.AsyncAnthropic(http_client=httpx2.AsyncClient(transport=transport), max_retries=0) as client:
        async with client.messages.stream(model="claude-opus-4-5", max_tokens=1024,
                                          messages=[{"role": "user", "content": "Hello"}]) as stream:
            print(await stream.get_final_text())


asyncio.run(main())
