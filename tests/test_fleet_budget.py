"""The retry budget through the transport: one process's transports -- in threads, in asyncio
tasks, under the real anthropic SDK -- share one budget per provider host, so a provider that is
down for all of them gets about one attempt a call (core/memory/budget.py; docs/operations.md,
"Retries at fleet scale")."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anthropic
import httpx2

import otel_liveness
from otel_liveness.core.events import RequestEnded
from otel_liveness.testing.scripts import anthropic_status

from .conftest import FAST

MESSAGES = [{"role": "user", "content": "hi"}]
#: Retries a full budget lets through before failures bring it to half: one per failure while the
#: level stays above 5 of 10 (the first four failures, whatever their order across threads).
MOST_RETRIES = 4


def stops(events: list[Any]) -> list[str]:
    return [e.stop_reason.value for e in events if isinstance(e, RequestEnded)]


def test_threads_with_transports_of_their_own_share_the_hosts_budget(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("down", [[anthropic_status(529, "overloaded_error")]])
    events: list[Any] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def hook(event: Any) -> None:
        with lock:
            events.append(event)

    def agent() -> None:
        client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0, http_client=httpx2.Client(
            transport=otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[hook], telemetry=False)))
        for _ in range(3):
            try:
                client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES)
            except anthropic.APIStatusError as exc:
                with lock:
                    errors.append(exc)

    threads = [threading.Thread(target=agent) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    calls = 8 * 3
    assert len(errors) == calls and all(e.status_code == 529 for e in errors)  # the provider's own answer, each
    assert calls <= provider.attempts("down") <= calls + MOST_RETRIES
    assert stops(events).count("retry_budget") >= calls - MOST_RETRIES


def test_asyncio_tasks_share_it_on_a_429_storm(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("limited", [[anthropic_status(429, "rate_limit_error", (("retry-after", "0.3"),))]])
    events: list[Any] = []

    async def main() -> list[BaseException]:
        async def agent() -> list[BaseException]:
            transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), FAST.replace(max_retry_after=0.3),
                                           hooks=[events.append], telemetry=False)
            raised = []
            async with anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0,
                                                http_client=httpx2.AsyncClient(transport=transport)) as client:
                for _ in range(2):
                    try:
                        await client.messages.create(model="claude-sim-1", max_tokens=8, messages=MESSAGES)
                    except anthropic.RateLimitError as exc:
                        raised.append(exc)
            return raised

        return [e for got in await asyncio.gather(*(agent() for _ in range(20))) for e in got]

    errors = asyncio.run(main())
    calls = 20 * 2
    assert len(errors) == calls  # (a 429 storm: not six attempts a call -- about one)
    assert calls <= provider.attempts("limited") <= calls + MOST_RETRIES
    # Every retry that went waited the provider's Retry-After (the shared pause across requests is
    # tested with a fake clock in tests/test_budget.py).
    retries = [r for r in (getattr(e, "delay", None) for e in events) if r is not None]
    assert retries and all(d >= 0.25 for d in retries)


def test_a_fresh_provider_keeps_the_retries_of_isolated_failures(provider) -> None:  # type: ignore[no-untyped-def]
    # One call in ten meets a 529 first: every such call is retried to success, none denied.
    from otel_liveness.testing import anthropic_reply
    from otel_liveness.testing import steps as s

    ok = [s.Headers(), *anthropic_reply("fine")]
    for i in range(30):
        provider.add(f"mostly-{i}", [[anthropic_status(529, "overloaded_error")], ok] if i % 10 == 3 else [ok])
    events: list[Any] = []
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[events.append], telemetry=False)
    for i in range(30):
        client = anthropic.Anthropic(base_url=provider.base_url(f"mostly-{i}"), api_key="sk-ant-test", max_retries=0,
                                     http_client=httpx2.Client(transport=transport))
        with client.messages.stream(model="claude-sim-1", max_tokens=8, messages=MESSAGES) as stream:
            assert stream.get_final_text() == "fine"
    assert stops(events) == ["completed"] * 30
