"""A simulated LLM provider: a real loopback HTTP/1.1 server speaking every wire the transport
judges -- Anthropic Messages SSE (also as served by Vertex AI), AWS Bedrock's binary event stream
(``invoke-with-response-stream`` and ``converse-stream``), OpenAI Chat Completions and Responses,
OpenRouter and Gemini -- driven by scripted, time-scaled scenarios (builders for each wire in
:mod:`otel_liveness.testing.scripts`); with
``http2=True``, HTTP/2 (h2c, or HTTPS with ALPN ``h2`` given an ``ssl_context``), every request a
stream of a shared connection.

    from otel_liveness.testing import SimulatedProvider, Scenario, steps as s, anthropic_reply

    with SimulatedProvider(time_scale=0.01) as provider:
        provider.add("think", Scenario([
            [s.Headers(), *anthropic_reply("Hello", think_pings=30, ping_every=5.0)],
        ]))
        client = anthropic.Anthropic(base_url=provider.base_url("think"), api_key="test", ...)

A scenario is a list of attempt scripts: the n-th request to ``/s/<name>/...`` plays script n
(the last one repeats). Durations in scripts are in *provider seconds*; the server multiplies them
by ``time_scale``. Requests are logged (``provider.requests(name)``) with their headers (credential
headers redacted) and body.

The pytest fixture ``simulated_provider`` (installed as a pytest plugin) yields a started server;
the plugin also starts every test with the process's retry budgets full
(:func:`reset_retry_budgets`), so a test that spends them on failures never sheds a later test's
retries.
"""

from __future__ import annotations

from . import steps
from .provider import SimulatedProvider
from .scenario import RequestLog, Scenario
from .scripts import anthropic_error, anthropic_reply, openai_chat_reply, sse_event


def reset_retry_budgets() -> None:
    """Fill the process's retry budgets again (every provider host's: ``core/memory/budget.py``). They are
    shared by every transport of a process -- what a fleet of agents takes from a provider that is
    down -- so in a test suite, tests that exercise failures drain them and a later test's retry
    is shed. The pytest plugin calls this before every test; call it yourself between cases of
    another test runner."""
    from ..transport._base import BUDGETS

    BUDGETS.clear()


__all__ = [
    "RequestLog",
    "Scenario",
    "SimulatedProvider",
    "anthropic_error",
    "anthropic_reply",
    "openai_chat_reply",
    "reset_retry_budgets",
    "sse_event",
    "steps",
]
