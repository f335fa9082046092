"""The framework matrix: every agent framework of docs/frameworks.md, driven through its own public
API against the loopback provider at scaled time, attached exactly as the recipe says (a client
argument, or the instrumentor where the framework hides its client).

For each framework:

- a ping-only long think (3 provider-minutes of keep-alives) completes on one attempt;
- a dead socket before content is retried below the framework: the caller sees one answer;
- a stall after text reaches the caller as an exception ``liveness_error`` turns into
  ``StreamTruncated``;
- a healthy call is recorded ``completed``, and its attempt span is exported.

A framework that is not installed is reported SKIPPED with the reason (``pytest.importorskip``).
All of them co-install with the dev extra's pins (anthropic 2.x, openai 3.x, httpx 0.28, httpx2),
so they run in the dev environment.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

import otel_liveness
from otel_liveness import StopReason, StreamTruncated, liveness_error
from otel_liveness.core.events import RequestEnded
from otel_liveness.telemetry import instrument, uninstrument
from otel_liveness.telemetry import semconv as S
from otel_liveness.testing import SimulatedProvider, anthropic_reply, openai_chat_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import openai_responses_reply

from .test_telemetry import Telemetry

# 1 provider-second = 2 ms; the policy below is on the same (real) scale: 90 s of raw silence,
# 200 s for a wire that has shown no keep-alive yet, notices every 30 s; the first-byte bound is
# wider (0.5 s: no case here waits for it, and a loaded 2-core host can take more than 120 ms to
# start a reply -- which would be a retry before content where the test expects one attempt).
TIME_SCALE = 0.002
POLICY = otel_liveness.Policy(raw_idle_timeout=0.18, raw_idle_timeout_no_keepalive=0.4, first_byte_base=0.5,
                              first_byte_max=1.0, semantic_notice_interval=0.06, backoff_initial=0.01, backoff_max=0.05)
TEXT = "Recovered after the think."
MESSAGES = [{"role": "user", "content": "hi"}]

# litellm: its model-cost map from the package (it would fetch one at import otherwise).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# litellm's types trip a pydantic warning at import (not ours to fix); the recipes name current
# models, whose retirement dates the SDK warns about.
pytestmark = [pytest.mark.filterwarnings("ignore:.*the `ReadOnly` qualifier:UserWarning"),
              pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]


# -- wires ---------------------------------------------------------------------------------------


def reply(wire: str, text: str = TEXT, *, think: bool = False, stall_after: int | None = None) -> list[Any]:
    """One attempt's steps on ``wire``; ``think``: 3 provider-minutes of keep-alives before content."""
    if wire == "anthropic":
        return [s.Headers(), *anthropic_reply(text, think_pings=36 if think else 0, stall_after=stall_after)]
    if wire == "openai-responses":
        return [s.Headers(), *openai_responses_reply(text, reasoning=think, keepalives=6 if think else 0,
                                                     stall_after=stall_after)]
    steps = openai_chat_reply(text, stall_after=stall_after)
    if think:  # Chat Completions streams nothing while a model reasons; a proxy's SSE comments keep it alive
        steps = steps[:1] + [step for _ in range(36) for step in (s.Sleep(5.0), s.Raw(b": keep-alive\n\n"))] + steps[1:]
    return [s.Headers(), *steps]


def dead_before_content(wire: str) -> list[Any]:
    """The response head and the stream's opening frame, then nothing (a dead provider, live socket)."""
    return [*reply(wire)[:2], s.Stall()]


# -- the harness: a recording hook and in-memory telemetry, attached by client or instrumentor -----


class Harness:
    def __init__(self) -> None:
        self.tel = Telemetry()
        self.events: list[Any] = []
        self.instrumented = False

    def transport(self, asynchronous: bool = False) -> Any:
        inner = httpx2.AsyncHTTPTransport() if asynchronous else httpx2.HTTPTransport()
        return otel_liveness.wrap(inner, POLICY, hooks=[self.events.append],
                                  tracer_provider=self.tel.tracer_provider, meter_provider=self.tel.meter_provider)

    def instrument(self) -> None:
        instrument(enforce=True, policy=POLICY, hosts=["127.0.0.1"], hooks=[self.events.append],
                   tracer_provider=self.tel.tracer_provider, meter_provider=self.tel.meter_provider)
        self.instrumented = True

    def reports(self) -> list[Any]:
        return [event.report for event in self.events if isinstance(event, RequestEnded)]


# -- the frameworks: the least code a user writes (docs/frameworks.md) ----------------------------


def call_anthropic(url: str, h: Harness) -> str:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0, http_client=httpx2.Client(transport=h.transport()))
    with client.messages.stream(model="claude-sim-1", max_tokens=64, messages=MESSAGES) as stream:
        return stream.get_final_text()


def call_openai(url: str, h: Harness) -> str:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0,
                           http_client=httpx2.Client(transport=h.transport()))
    stream = client.chat.completions.create(model="gpt-sim-1", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def call_pydantic_ai(url: str, h: Harness) -> str:
    import anthropic
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = anthropic.AsyncAnthropic(base_url=url, api_key="test", max_retries=0,
                                      http_client=httpx2.AsyncClient(transport=h.transport(asynchronous=True)))
    agent = Agent(AnthropicModel("claude-sim-1", provider=AnthropicProvider(anthropic_client=client)))

    async def run() -> str:
        async with agent.run_stream("hi") as result:
            return await result.get_output()

    return asyncio.run(run())


def call_langchain_anthropic(url: str, h: Harness) -> str:
    from langchain_anthropic import ChatAnthropic

    h.instrument()  # ChatAnthropic takes no http_client: only the instrumentor reaches its client
    model = ChatAnthropic(model="claude-sim-1", base_url=url, api_key="test", max_retries=0, streaming=True)  # type: ignore[call-arg]
    return str(model.invoke("hi").content)


def call_langchain_openai(url: str, h: Harness) -> str:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-sim-1", base_url=url + "/v1", api_key="test", max_retries=0, streaming=True,  # type: ignore[arg-type]
                       http_client=httpx2.Client(transport=h.transport()))
    return str(model.invoke("hi").content)


def _litellm() -> Any:
    import litellm

    # litellm makes its clients lazily and keeps them for the process (a module-level client, a
    # cache): made again here, under this test's instrumentation. (An application instruments once,
    # before its first call: the clients it then makes are wrapped for good.)
    for name in ("module_level_client", "module_level_aclient"):
        litellm.__dict__.pop(name, None)
    litellm.in_memory_llm_clients_cache.flush_cache()
    return litellm


def call_litellm(url: str, h: Harness) -> str:
    litellm = _litellm()
    h.instrument()  # litellm builds its own httpx clients
    stream = litellm.completion(model="anthropic/claude-sim-1", api_base=url, api_key="test", messages=MESSAGES,
                                stream=True, max_retries=0)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream)


def call_litellm_async(url: str, h: Harness) -> str:
    litellm = _litellm()
    h.instrument()

    async def run() -> str:
        stream = await litellm.acompletion(model="anthropic/claude-sim-1", api_base=url, api_key="test", messages=MESSAGES,
                                           stream=True, max_retries=0)
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])

    return asyncio.run(run())


def call_openai_agents(url: str, h: Harness) -> str:
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)  # the SDK's own tracing exports to OpenAI; OpenTelemetry carries ours
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=h.transport(asynchronous=True)))
    agent = Agent(name="assistant", instructions="Be brief.", model=OpenAIResponsesModel("gpt-sim-1", client))

    async def run() -> str:
        result = Runner.run_streamed(agent, "hi")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    return asyncio.run(run())


@dataclass(frozen=True)
class Framework:
    name: str
    module: str  # what pytest.importorskip needs
    wire: str
    call: Callable[[str, Harness], str]


FRAMEWORKS = [
    Framework("anthropic", "anthropic", "anthropic", call_anthropic),
    Framework("openai", "openai", "openai-chat", call_openai),
    Framework("pydantic-ai", "pydantic_ai", "anthropic", call_pydantic_ai),
    Framework("langchain-anthropic", "langchain_anthropic", "anthropic", call_langchain_anthropic),
    Framework("langchain-openai", "langchain_openai", "openai-chat", call_langchain_openai),
    Framework("litellm", "litellm", "anthropic", call_litellm),
    Framework("litellm-async", "litellm", "anthropic", call_litellm_async),
    Framework("openai-agents", "agents", "openai-responses", call_openai_agents),
]


@pytest.fixture(params=FRAMEWORKS, ids=[f.name for f in FRAMEWORKS])
def framework(request: pytest.FixtureRequest) -> Framework:
    fw: Framework = request.param
    pytest.importorskip(fw.module, reason=f"{fw.name} is not installed here (pip install '.[dev]' brings it)")
    return fw


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    if h.instrumented:
        uninstrument()


@pytest.fixture
def sim() -> Iterator[SimulatedProvider]:
    with SimulatedProvider(time_scale=TIME_SCALE) as provider:
        yield provider


# -- the matrix ------------------------------------------------------------------------------------


def test_a_ping_only_long_think_completes_on_one_attempt(framework: Framework, harness: Harness, sim: SimulatedProvider) -> None:
    url = sim.add("think", [reply(framework.wire, think=True)])
    assert framework.call(url, harness) == TEXT
    assert sim.attempts("think") == 1
    [report] = harness.reports()
    assert len(report.attempts) == 1 and report.attempts[0].heartbeats >= 6  # the keep-alives were seen, and were enough


def test_a_dead_socket_before_content_is_retried_invisibly(framework: Framework, harness: Harness,
                                                           sim: SimulatedProvider) -> None:
    url = sim.add("dead", [dead_before_content(framework.wire), reply(framework.wire)])
    assert framework.call(url, harness) == TEXT  # one answer, as if nothing happened
    assert sim.attempts("dead") == 2  # two reached the provider
    [report] = harness.reports()  # one request, retried below the framework
    assert len(report.attempts) == 2 and report.attempts[0].outcome == "raw_silence"


def test_a_stall_after_text_is_a_stream_truncated(framework: Framework, harness: Harness, sim: SimulatedProvider) -> None:
    url = sim.add("stall", [[*reply(framework.wire, stall_after=2), s.Stall()]])
    with pytest.raises(Exception) as caught:
        framework.call(url, harness)
    error = liveness_error(caught.value)
    assert isinstance(error, StreamTruncated), (type(caught.value), caught.value)
    assert error.released > 0 and error.cause == "raw_silence"
    outcomes = [[(a.outcome, a.phase) for a in r.attempts] for r in harness.reports()]
    assert sim.attempts("stall") == 1, outcomes  # content was released: never retried behind the caller's back


def test_a_healthy_call_is_recorded_completed_with_its_spans(framework: Framework, harness: Harness,
                                                             sim: SimulatedProvider) -> None:
    # litellm's sync Anthropic path closes the reply after its stop reason, before message_stop:
    # still 'completed' (finish_then_close), asserted below for every framework alike.
    url = sim.add("healthy", [reply(framework.wire)])
    assert framework.call(url, harness) == TEXT
    spans = harness.tel.attempts()
    assert len(spans) == 1 and spans[0].attributes[S.SERVER_ADDRESS] == "127.0.0.1"
    [report] = harness.reports()
    assert report.stop_reason == StopReason.COMPLETED
    assert spans[0].attributes[S.ATTEMPT_OUTCOME] == "completed"


def test_litellm_async_sends_through_aiohttp_where_the_waking_stream_cannot_reach(harness: Harness) -> None:
    """docs/frameworks.md: litellm's async client is wrapped, but its inner transport is aiohttp's
    (no httpcore pool for the waking stream); ``disable_aiohttp_transport`` puts httpx's back."""
    pytest.importorskip("litellm", reason="litellm is not installed here (pip install '.[dev]' brings it)")
    from litellm.llms.custom_httpx.http_handler import get_async_httpx_client

    from otel_liveness.transport import liveness_in
    from otel_liveness.transport._async import AsyncWakingBackend

    litellm = _litellm()
    harness.instrument()

    async def transports() -> list[Any]:
        found = []
        for disabled in (False, True):
            litellm.disable_aiohttp_transport = disabled
            litellm.in_memory_llm_clients_cache.flush_cache()
            found.append(get_async_httpx_client(llm_provider="anthropic").client._transport)
        return found

    try:
        aiohttp_based, httpx_based = asyncio.run(transports())
    finally:
        litellm.disable_aiohttp_transport = False
        litellm.in_memory_llm_clients_cache.flush_cache()
    aiohttp_based, httpx_based = liveness_in(aiohttp_based), liveness_in(httpx_based)  # wrapped; seated
    assert aiohttp_based.policy.shadow is False and httpx_based.policy.shadow is False  # both enforcing
    assert type(aiohttp_based.inner).__name__ == "LiteLLMAiohttpTransport" and not hasattr(aiohttp_based.inner, "_pool")
    assert isinstance(httpx_based.inner._pool._network_backend, AsyncWakingBackend)


# -- the recipes of docs/frameworks.md, as written ---------------------------------------------------

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "frameworks.md"
RECIPES = re.findall(r"<!-- runnable -->\s*```python\n(.*?)```", DOC.read_text(), re.S)
# The framework each recipe needs, from its imports (skipped with the reason when it is absent).
NEEDS = {"pydantic_ai": "pydantic_ai", "langchain_anthropic": "langchain_anthropic", "langchain_openai": "langchain_openai",
         "litellm": "litellm", "from agents": "agents"}


@pytest.fixture(scope="module")
def recipe_provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider(time_scale=TIME_SCALE) as provider:
        provider.add("anthropic", [reply("anthropic", "Example answer.", think=True)])
        provider.add("openai-chat", [reply("openai-chat", "Example answer.")])
        provider.add("openai-responses", [reply("openai-responses", "Example answer.", think=True)])
        yield provider


def test_every_framework_has_a_recipe() -> None:
    assert len(RECIPES) == 8
    for needle in NEEDS:
        assert any(needle in recipe for recipe in RECIPES), needle


@pytest.mark.parametrize("index", range(len(RECIPES)))
def test_recipe_runs(index: int, recipe_provider: SimulatedProvider, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    """Each recipe as written, in this process (the frameworks are imported once for the whole
    file), with the SDKs' base-URL variables pointing at the loopback provider."""
    recipe = RECIPES[index]
    for needle, module in NEEDS.items():
        if needle in recipe:
            pytest.importorskip(module, reason=f"{module} is not installed here (pip install '.[dev]' brings it)")
    openai_wire = "openai-responses" if "from agents" in recipe else "openai-chat"
    wire = openai_wire if ("openai" in recipe.lower() and "anthropic" not in recipe.lower()) else "anthropic"
    before = recipe_provider.attempts(wire)
    for key, value in {"ANTHROPIC_API_KEY": "sk-ant-example", "ANTHROPIC_BASE_URL": recipe_provider.base_url("anthropic"),
                       "OPENAI_API_KEY": "sk-example", "OPENAI_BASE_URL": recipe_provider.base_url(openai_wire) + "/v1",
                       "OTEL_LIVENESS_HOSTS": "127.0.0.1"}.items():  # the loopback provider stands in for the provider hosts
        monkeypatch.setenv(key, value)
    if "litellm" in recipe:
        _litellm()  # its clients made again, under the recipe's instrumentation
    try:
        exec(compile(recipe, f"docs/frameworks.md recipe {index}", "exec"), {"__name__": "__main__"})
    finally:
        if "instrument(" in recipe:
            uninstrument()
    assert capsys.readouterr().out.strip() == "Example answer.", recipe
    assert recipe_provider.attempts(wire) == before + 1  # through the provider the recipe names
