"""``otel-liveness serve``: the embedded simulated provider as a long-running server.

One named scenario, spoken on three wires at the server's root: Anthropic Messages
(``POST /v1/messages``: give an anthropic SDK the printed URL as its base URL), OpenAI Chat
Completions and Responses (``POST /v1/chat/completions``, ``POST /v1/responses``: the URL +
``/v1`` for an openai SDK). A request without ``"stream": true`` gets the JSON body the API sends
(a ``Message``, a ``ChatCompletion``, a ``Response``) under the same scenario. Standard error also
prints the environment line that points auto-instrumentation at the server
(``OTEL_LIVENESS_HOSTS=127.0.0.1``: loopback is no provider's host). The first line
of standard output is the URL; what it serves goes to standard error. It runs until SIGINT or
SIGTERM, then closes its connections and exits 0.

A scenario is a sequence of attempt scripts that *cycles*: request n plays script
``n mod len``, so every call a retrying client makes meets the same failures before its reply (a
transport that retries below the SDK turns each into one successful call; a client without one
sees the failure, and its own retry gets the reply). Durations are provider seconds, multiplied
by ``--time-scale``; the client's bounds are its own (a stall is found when the client's
raw-silence bound expires: 90 s for Anthropic, 600 s for OpenAI by default).

The server is :class:`~otel_liveness.testing.SimulatedProvider` and the scripts are built with
:mod:`otel_liveness.testing.scripts` (the demo's, where they do not depend on a scaled client).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, TextIO

from . import demo
from .testing import Scenario, SimulatedProvider, anthropic_reply, openai_chat_reply
from .testing import steps as s
from .testing.scripts import anthropic_status, openai_responses_reply, sse_event
from .testing.steps import Status

__all__ = ["SCENARIOS", "ServeScenario", "serve"]

Attempts = list[list[Any]]


@dataclass(frozen=True)
class ServeScenario:
    name: str
    title: str
    anthropic: Callable[[float], Attempts]  # time scale -> attempt scripts on the Anthropic wire
    openai: Callable[[float], Attempts]  # ... on the OpenAI Chat Completions wire
    responses: Callable[[float], Attempts]  # ... on the OpenAI Responses wire


def _demo(name: str) -> Callable[[float], Attempts]:
    """The demo's scripts of scenario ``name`` (one source for what the two commands play)."""
    (scenario,) = [sc for sc in demo.SCENARIOS if sc.name == name]
    return scenario.script


def _openai_status(status: int, error_type: str, code: str, headers: tuple[tuple[str, str], ...] = ()) -> Status:
    body = json.dumps({"error": {"message": error_type, "type": error_type, "param": None, "code": code}}).encode()
    return Status(status, body, headers)


def _openai_error(error_type: str = "server_error") -> bytes:
    return sse_event(None, {"error": {"message": "The server had an error while processing your request.",
                                      "type": error_type, "param": None, "code": None}})


def _retry_after(ts: float, seconds: float) -> tuple[tuple[str, str], ...]:
    """``retry-after-ms`` of ``seconds`` provider seconds (a header the server does not scale)."""
    return (("retry-after-ms", str(max(1, int(seconds * 1000 * ts)))),)


SCENARIOS: list[ServeScenario] = [
    ServeScenario(
        "ok", "a healthy reply",
        lambda ts: [[s.Headers(), *anthropic_reply("Hello from otel-liveness serve.")]],
        lambda ts: [[s.Headers(), *openai_chat_reply("Hello from otel-liveness serve.")]],
        lambda ts: [[s.Headers(), *openai_responses_reply("Hello from otel-liveness serve.")]],
    ),
    ServeScenario(
        "long_think", "a 3-minute think: pings every 5 s (OpenAI: silent) before the reply",
        _demo("long_think"),
        lambda ts: [[s.Headers(), *openai_chat_reply("Here is the plan.", think_seconds=180.0)]],
        lambda ts: [[s.Headers(), *openai_responses_reply("Here is the plan.", reasoning=True, keepalives=6)]],
    ),
    ServeScenario(
        "dead_socket", "the connection dies before any content (reset 1 s in), then a good reply",
        lambda ts: [[s.Headers(), anthropic_reply()[0], s.Sleep(1.0), s.Reset()],
                    [s.Headers(), *anthropic_reply("Recovered after a dead socket.", msg_id="msg_dead_ok")]],
        lambda ts: [[s.Headers(), openai_chat_reply()[0], s.Sleep(1.0), s.Reset()],
                    [s.Headers(), *openai_chat_reply("Recovered after a dead socket.")]],
        lambda ts: [[s.Headers(), openai_responses_reply()[0], s.Sleep(1.0), s.Reset()],
                    [s.Headers(), *openai_responses_reply("Recovered after a dead socket.")]],
    ),
    ServeScenario(
        "rate_limit_storm", "three 429s with retry-after-ms (2 s each), then the reply",
        lambda ts: [[anthropic_status(429, "rate_limit_error", _retry_after(ts, 2.0))]] * 3
        + [[s.Headers(), *anthropic_reply("Through the rate limit.", msg_id="msg_429_ok")]],
        lambda ts: [[_openai_status(429, "requests", "rate_limit_exceeded", _retry_after(ts, 2.0))]] * 3
        + [[s.Headers(), *openai_chat_reply("Through the rate limit.")]],
        lambda ts: [[_openai_status(429, "requests", "rate_limit_exceeded", _retry_after(ts, 2.0))]] * 3
        + [[s.Headers(), *openai_responses_reply("Through the rate limit.")]],
    ),
    ServeScenario(
        "inband_overload", "an in-band overload error before any content, then the reply",
        _demo("inband_overload"),
        lambda ts: [[s.Headers(), openai_chat_reply()[0], s.Raw(_openai_error())],
                    [s.Headers(), *openai_chat_reply("Served after the overload.")]],
        lambda ts: [[s.Headers(), *openai_responses_reply(error_after=0)],
                    [s.Headers(), *openai_responses_reply("Served after the overload.")]],
    ),
    ServeScenario(
        "stall_after_partial", "partial text, then silence on a live socket; the next call gets a reply",
        _demo("stall_after_partial"),
        lambda ts: [[s.Headers(), *openai_chat_reply("I read the three files. The bug is in", stall_after=4), s.Stall()],
                    [s.Headers(), *openai_chat_reply(" parse_config(): it ignores CRLF.")]],
        lambda ts: [[s.Headers(), *openai_responses_reply("I read the three files. The bug is in", stall_after=4),
                     s.Stall()],
                    [s.Headers(), *openai_responses_reply(" parse_config(): it ignores CRLF.")]],
    ),
    ServeScenario(
        "exhausted", "a provider that stays overloaded (529; OpenAI: 503) on every attempt",
        _demo("exhausted"),
        lambda ts: [[_openai_status(503, "server_error", "service_unavailable")]],
        lambda ts: [[_openai_status(503, "server_error", "service_unavailable")]],
    ),
]
BY_NAME = {sc.name: sc for sc in SCENARIOS}


class _Stop(Exception):
    """Raised in the main thread by the SIGTERM handler (SIGINT raises KeyboardInterrupt)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def serve(name: str, *, host: str = "127.0.0.1", port: int = 0, time_scale: float = 1.0,
          out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Serve scenario ``name`` until SIGINT or SIGTERM; 0 then, 2 when it cannot listen.
    Call from the main thread (it installs the SIGTERM handler)."""
    scenario = BY_NAME[name]
    provider = SimulatedProvider(time_scale=time_scale, host=host, port=port, log_limit=1000)
    provider.add("ok", Scenario(scenario.anthropic(time_scale), cycle=True))  # POST /v1/messages
    provider.add("openai-ok", Scenario(scenario.openai(time_scale), cycle=True))  # POST .../chat/completions
    provider.add("responses-ok", Scenario(scenario.responses(time_scale), cycle=True))  # POST .../responses
    previous_int = signal.getsignal(signal.SIGINT)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        try:
            provider.start()
        except OSError as exc:
            print(f"otel-liveness serve: cannot listen on {host}:{port}: {exc.strerror or exc}", file=err)
            return 2
        try:
            print(provider.url, file=out, flush=True)
            print(f"otel-liveness serve: scenario {scenario.name} ({scenario.title}); time scale {time_scale:g}\n"
                  f"  anthropic: base URL {provider.url}  (POST /v1/messages)\n"
                  f"  openai:    base URL {provider.url}/v1  (POST /v1/chat/completions, POST /v1/responses)\n"
                  "  a request without \"stream\": true gets the JSON reply the API sends\n"
                  f"  auto-instrumentation (opentelemetry-instrument) judges it with: "
                  f"OTEL_LIVENESS_HOSTS={provider.host} OTEL_LIVENESS_MODE=enforce\n"
                  "  Ctrl-C or SIGTERM stops it", file=err, flush=True)
            while True:
                time.sleep(3600)
        except (KeyboardInterrupt, _Stop):
            pass
        finally:
            # A second signal while the connections close must not end it half-way.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            provider.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    print("otel-liveness serve: stopped", file=err, flush=True)
    return 0
