"""``otel-liveness serve``: the simulated provider as a server, answering the real SDKs through
the transport, and stopping cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import openai
import pytest

import otel_liveness
from otel_liveness.core.events import RetryScheduled
from otel_liveness.serve import SCENARIOS


class Server:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``signum``; the exit status and what the server wrote on standard error."""
        self.proc.send_signal(signum)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


def first_line(proc: subprocess.Popen[str], within: float = 30.0) -> str:
    """The first line the server prints (its URL), waiting at most ``within`` seconds for it."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], within)
    assert ready, "no URL printed"
    return proc.stdout.readline().strip()


def _as_in_a_terminal() -> None:
    # The server as a terminal's foreground command has it: SIGINT handled (Ctrl-C). A shell
    # without job control starts a background command ("make test &") with SIGINT ignored, every
    # process below inherits that, and Python then raises no KeyboardInterrupt -- a trait of how
    # the suite was started, not of the server.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def serve(*args: str) -> Iterator[Server]:
    proc = subprocess.Popen([sys.executable, "-m", "otel_liveness", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy(), preexec_fn=_as_in_a_terminal)
    try:
        yield Server(proc, first_line(proc))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def anthropic_client(url: str, events: list[Any]) -> anthropic.Anthropic:
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), hooks=[events.append], telemetry=False)
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-serve-test", max_retries=0,
                               http_client=httpx2.Client(transport=transport, timeout=30))


def test_the_anthropic_sdk_through_the_transport_meets_a_dead_socket_and_gets_the_reply() -> None:
    with serve("--scenario", "dead_socket", "--time-scale", "0.05") as server:
        assert server.url.startswith("http://127.0.0.1:") and int(server.url.rsplit(":", 1)[1]) > 0
        events: list[Any] = []
        with anthropic_client(server.url, events) as client:
            for call in range(2):  # the scenario cycles: every call meets the dead socket first
                with client.messages.stream(model="claude-sim-1", max_tokens=64,
                                            messages=[{"role": "user", "content": "hi"}]) as stream:
                    text = stream.get_final_text()
                    report = stream.response.extensions["liveness"]
                assert text == "Recovered after a dead socket.", call
                assert len(report["attempts"]) == 2 and report["attempts"][0]["outcome"] == "connection_error", report
        retries = [e for e in events if isinstance(e, RetryScheduled)]
        assert len(retries) == 2  # one per call, below the SDK (max_retries=0)
        status, err = server.stop(signal.SIGTERM)
    assert status == 0, err
    assert "scenario dead_socket" in err and err.rstrip().endswith("otel-liveness serve: stopped")
    assert "Traceback" not in err


def test_the_openai_sdk_through_the_transport_meets_an_in_band_error_and_gets_the_reply() -> None:
    with serve("--scenario", "inband_overload", "--time-scale", "0.05") as server:
        events: list[Any] = []
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), hooks=[events.append], telemetry=False)
        with openai.OpenAI(base_url=server.url + "/v1", api_key="sk-serve-test", max_retries=0,
                           http_client=httpx2.Client(transport=transport, timeout=30)) as client:
            stream = client.chat.completions.create(model="gpt-sim-1", stream=True,
                                                    messages=[{"role": "user", "content": "hi"}])
            text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == "Served after the overload."
        assert [e.reason.value for e in events if isinstance(e, RetryScheduled)] == ["server_error"]
        status, err = server.stop(signal.SIGINT)  # Ctrl-C
    assert status == 0 and "Traceback" not in err, err


def test_a_healthy_reply_on_a_chosen_port_and_a_clean_exit_on_sigint() -> None:
    with socket.socket() as probe:  # a free port to ask for
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with serve("--port", str(port)) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        with anthropic_client(server.url, []) as client:
            with client.messages.stream(model="claude-sim-1", max_tokens=64,
                                        messages=[{"role": "user", "content": "hi"}]) as stream:
                assert stream.get_final_text() == "Hello from otel-liveness serve."
        status, err = server.stop(signal.SIGINT)
    assert status == 0 and "Traceback" not in err, err


def test_serve_answers_like_the_api_and_says_how_to_point_auto_instrumentation_at_it() -> None:
    """A non-streaming call gets the API's JSON (a Message, a ChatCompletion, a Response), the
    Responses wire streams too, and standard error gives the OTEL_LIVENESS_HOSTS line."""
    with serve("--scenario", "dead_socket", "--time-scale", "0.05") as server:
        with anthropic_client(server.url, []) as client:
            message = client.messages.create(model="claude-sim-1", max_tokens=64,
                                             messages=[{"role": "user", "content": "hi"}])
        assert isinstance(message, anthropic.types.Message)
        assert message.content[0].text == "Recovered after a dead socket." and message.stop_reason == "end_turn"
        transport = otel_liveness.wrap(httpx2.HTTPTransport(), telemetry=False)
        with openai.OpenAI(base_url=server.url + "/v1", api_key="sk-serve-test", max_retries=0,
                           http_client=httpx2.Client(transport=transport, timeout=30)) as oai:
            completion = oai.chat.completions.create(model="gpt-sim-1", messages=[{"role": "user", "content": "hi"}])
            assert completion.choices[0].message.content == "Recovered after a dead socket."
            response = oai.responses.create(model="gpt-sim-1", input="hi")
            assert response.output_text == "Recovered after a dead socket."
            events = list(oai.responses.create(model="gpt-sim-1", input="hi", stream=True))
            assert events[-1].type == "response.completed"
        status, err = server.stop(signal.SIGTERM)
    assert status == 0, err
    assert "OTEL_LIVENESS_HOSTS=127.0.0.1 OTEL_LIVENESS_MODE=enforce" in err and "POST /v1/responses" in err


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "otel_liveness", "serve", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"otel-liveness serve: cannot listen on 127.0.0.1:{port}: ")
    assert proc.stderr.count("\n") == 1, proc.stderr


def test_list_and_an_unknown_scenario() -> None:
    listed = subprocess.run([sys.executable, "-m", "otel_liveness", "serve", "--list"], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [sc.name for sc in SCENARIOS]
    unknown = subprocess.run([sys.executable, "-m", "otel_liveness", "serve", "--scenario", "nope"],
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and "unknown scenario 'nope'" in unknown.stderr


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_every_scenario_has_all_three_wires(scenario: Any) -> None:
    # Scripts for the three wires, at any time scale, and each attempt a non-empty script.
    for wire in (scenario.anthropic, scenario.openai, scenario.responses):
        attempts = wire(0.05)
        assert attempts and all(attempts), scenario.name


def test_the_provider_keeps_the_last_log_limit_requests_and_cycles() -> None:
    from otel_liveness.testing import Scenario, SimulatedProvider, anthropic_reply
    from otel_liveness.testing import steps as s

    with SimulatedProvider(log_limit=2) as provider:
        url = provider.add("x", Scenario([[s.Status(503)], [s.Headers(), *anthropic_reply()]], cycle=True))
        with httpx2.Client() as client:
            statuses = [client.post(f"{url}/v1/messages", json={}).status_code for _ in range(3)]
    assert statuses == [503, 200, 503]  # request n plays script n mod 2
    assert provider.attempts("x") == 3 and [r.attempt for r in provider.requests("x")] == [1, 2]
