"""Transport surface: wrap(), per-call overrides, hooks, the flight recorder, pytest-httpx
(request/response-level cases for the httpx family), leaks, and the generated sync driver."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import httpx2
import pytest

import otel_liveness
from otel_liveness import Policy
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.tools.analyze import analyze, parse_capture

from .clients import run
from .conftest import FAST

ROOT = pathlib.Path(__file__).resolve().parent.parent
SSE = {"content-type": "text/event-stream"}


def test_generated_sync_driver_is_up_to_date() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_unasync_check_covers_every_generated_file(tmp_path: pathlib.Path) -> None:
    # A copy of the script and both drivers: --check names a generated file that was edited by
    # hand, one that is missing and one with no source; writing mends all three.
    import shutil

    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "unasync.py", tmp_path / "scripts")
    for kind in ("_async", "_sync"):
        shutil.copytree(ROOT / "otel_liveness" / "transport" / kind, tmp_path / "otel_liveness" / "transport" / kind,
                        ignore=shutil.ignore_patterns("__pycache__"))
    script, sync = str(tmp_path / "scripts" / "unasync.py"), tmp_path / "otel_liveness" / "transport" / "_sync"

    def check() -> tuple[int, str]:
        proc = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
        return proc.returncode, proc.stderr

    assert check() == (0, "")
    generated = sorted(path.name for path in sync.glob("*.py"))
    assert generated == ["__init__.py", "http2.py", "network.py", "stream.py", "transport.py"]
    (sync / "network.py").write_text((sync / "network.py").read_text() + "# edited by hand\n")
    (sync / "http2.py").unlink()
    (sync / "orphan.py").write_text("")
    code, err = check()
    assert code == 1 and all(f"_sync/{name} is out of date" in err for name in ("network.py", "http2.py", "orphan.py"))
    assert "stream.py" not in err
    subprocess.run([sys.executable, script], check=True)
    assert check() == (0, "") and sorted(path.name for path in sync.glob("*.py")) == generated


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_the_public_transports_are_declared_classes(family) -> None:  # type: ignore[no-untyped-def]
    import importlib
    import inspect

    from otel_liveness.transport import is_liveness_transport

    public = importlib.import_module(f"otel_liveness.{family.__name__}")
    for inner, cls in ((family.HTTPTransport(), public.LivenessTransport),
                       (family.AsyncHTTPTransport(), public.AsyncLivenessTransport)):
        transport = otel_liveness.wrap(inner)
        assert type(transport) is cls and is_liveness_transport(transport) and not is_liveness_transport(inner)
        assert inspect.getsource(cls).startswith(f"class {cls.__name__}(")  # a class statement, not type()
        assert transport.inner is inner


def test_a_hook_offering_a_send_context_wraps_every_attempts_send() -> None:
    from otel_liveness.core.events import EmitsTelemetry, SendsInContext
    from otel_liveness.telemetry import TelemetryHook, with_telemetry

    sends: list[str] = []

    class Scoped:
        emits_telemetry = True  # no default telemetry hook beside it

        def __init__(self) -> None:
            self.events: list[object] = []

        def __call__(self, event: object) -> None:
            self.events.append(event)

        def send_context(self) -> contextlib.AbstractContextManager[None]:
            @contextlib.contextmanager
            def scope() -> Iterator[None]:
                sends.append("enter")
                yield
                sends.append("exit")

            return scope()

    statuses = iter([529, 200])

    def handler(request: httpx2.Request) -> httpx2.Response:
        sends.append("send")
        status = next(statuses)
        return httpx2.Response(status, headers=SSE, content=b"".join(
            step.data for step in anthropic_reply("ok") if isinstance(step, s.Raw)) if status == 200 else b"{}")

    hook = Scoped()
    assert isinstance(hook, SendsInContext) and isinstance(hook, EmitsTelemetry)
    assert isinstance(TelemetryHook(), SendsInContext) and isinstance(TelemetryHook(), EmitsTelemetry)
    assert with_telemetry([hook]) == [hook] and len(with_telemetry([print])) == 2
    transport = otel_liveness.wrap(httpx2.MockTransport(handler), FAST, hooks=[hook])
    with httpx2.Client(transport=transport) as client:
        assert client.post("https://api.anthropic.com/v1/messages", json={"stream": True}).status_code == 200
    assert sends == ["enter", "send", "exit"] * 2  # each attempt's send, inside the hook's context
    assert not any(isinstance(h, TelemetryHook) for h in transport._hooks)


@pytest.mark.parametrize("family", [httpx, httpx2])
def test_wrap_keeps_family_and_kind(family) -> None:  # type: ignore[no-untyped-def]
    sync = otel_liveness.wrap(family.HTTPTransport())
    asyn = otel_liveness.wrap(family.AsyncHTTPTransport())
    assert isinstance(sync, family.BaseTransport) and not isinstance(sync, family.AsyncBaseTransport)
    assert isinstance(asyn, family.AsyncBaseTransport)
    other = httpx2 if family is httpx else httpx
    assert not isinstance(sync, other.BaseTransport)


def test_wrap_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="httpx or httpx2 transport"):
        otel_liveness.wrap(object())


KEEPALIVES = {  # the anthropic/openai SDKs' values: probe after 60 s idle, every 60 s, 5 probes
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE): 1,
    (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE): 60,
    (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL): 60,
    (socket.IPPROTO_TCP, socket.TCP_KEEPCNT): 5,
}


@pytest.mark.parametrize("family", ["httpx", "httpx2"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_family_classes_build_a_default_transport_with_keepalives(provider, family, is_async) -> None:  # type: ignore[no-untyped-def]
    import importlib

    import anyio

    x = importlib.import_module(family)
    classes = importlib.import_module(f"otel_liveness.{family}")
    cls = classes.AsyncLivenessTransport if is_async else classes.LivenessTransport
    transport = cls(policy=FAST, hooks=[], retries=0)  # transport options go to the default inner transport
    assert isinstance(transport.inner, x.AsyncHTTPTransport if is_async else x.HTTPTransport)
    assert transport.policy is FAST and type(transport).__module__ == f"otel_liveness.{family}"
    assert {(level, name): value for level, name, value in transport.inner._pool._socket_options} == KEEPALIVES
    # ...and the connection it opens carries them.
    url = provider.add(f"keepalive-{family}-{is_async}", [[s.Headers(), *anthropic_reply("kept")]])

    async def read_async() -> tuple[bytes, dict[tuple[int, int], int], dict]:  # type: ignore[type-arg]
        async with x.AsyncClient(transport=transport) as client:
            async with client.stream("POST", url + "/v1/messages", json={"stream": True}) as response:
                sock = response.extensions["network_stream"].get_extra_info("socket")
                options = {key: sock.getsockopt(*key) for key in KEEPALIVES}
                return await response.aread(), options, response.extensions["liveness"]

    def read_sync() -> tuple[bytes, dict[tuple[int, int], int], dict]:  # type: ignore[type-arg]
        with x.Client(transport=transport) as client:
            with client.stream("POST", url + "/v1/messages", json={"stream": True}) as response:
                sock = response.extensions["network_stream"].get_extra_info("socket")
                options = {key: sock.getsockopt(*key) for key in KEEPALIVES}
                return response.read(), options, response.extensions["liveness"]

    body, options, report = anyio.run(read_async) if is_async else read_sync()
    assert options == KEEPALIVES
    assert body.endswith(b'{"type":"message_stop"}\n\n') and report["stop_reason"] == "completed"


def test_family_classes_reject_transport_options_with_an_inner_transport() -> None:
    from otel_liveness.httpx import LivenessTransport

    with pytest.raises(TypeError, match="only when no inner transport"):
        LivenessTransport(httpx.HTTPTransport(), verify=False)
    from otel_liveness.transport import keepalive_socket_options

    assert {(level, name): value for level, name, value in keepalive_socket_options()} == KEEPALIVES


def test_anthropic_sdk_accepts_the_httpx2_transport() -> None:
    import anthropic

    # The SDK's own client class inspects the transport's classes: ours must be pure httpx2.
    http_client = anthropic.DefaultHttpxClient(transport=otel_liveness.wrap(httpx2.HTTPTransport()))
    anthropic.Anthropic(api_key="k", http_client=http_client).close()
    with pytest.raises(TypeError, match="httpx2"):  # an httpx (0.28) transport is the wrong family
        anthropic.DefaultHttpxClient(transport=otel_liveness.wrap(httpx.HTTPTransport()))


def test_per_call_override_through_any_sdk(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("slowish", [[s.Headers(), *anthropic_reply("x" * 20, deltas=20, delta_every=2.0)]])
    with otel_liveness.liveness_policy(wall_timeout=0.15):
        result = run(("httpx2", None), FAST, url + "/v1/messages")
    assert isinstance(result.error, otel_liveness.WallTimeout) and result.error.budget == 0.15
    result = run(("httpx2", None), FAST, url + "/v1/messages")  # outside the block: no budget
    assert result.error is None


def test_override_rejects_bad_values_at_once() -> None:
    with pytest.raises(otel_liveness.InvalidPolicy, match="wall_timeout"):
        with otel_liveness.liveness_policy(wall_timeout=-1):
            pass


def test_override_follows_asyncio_tasks(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("slow-async", [[s.Headers(), *anthropic_reply("x" * 20, deltas=20, delta_every=2.0)]])

    async def one(budget: float | None) -> object:
        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), FAST)
        async with httpx2.AsyncClient(transport=transport) as client:
            try:
                if budget is None:
                    await client.post(url + "/v1/messages", json={"stream": True})
                else:
                    with otel_liveness.liveness_policy(wall_timeout=budget):
                        await client.post(url + "/v1/messages", json={"stream": True})
            except otel_liveness.WallTimeout as exc:
                return exc.budget
        return None

    async def main() -> list[object]:
        return list(await asyncio.gather(one(0.1), one(None)))

    assert asyncio.run(main()) == [0.1, None]


def test_a_raising_hook_changes_nothing(provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("ok-hook", [[s.Headers(), *anthropic_reply("fine", think_pings=3)]])

    def bad_hook(event: object) -> None:
        raise RuntimeError("hook bug")

    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[bad_hook])
    with httpx2.Client(transport=transport) as client:
        response = client.post(url + "/v1/messages", json={"stream": True})
    assert response.status_code == 200 and b"message_stop" in response.content
    assert response.extensions["liveness"]["stop_reason"] == "completed"


def test_flight_recorder_writes_a_replayable_capture(provider, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("rec", [[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
    result = run(("httpx2", None), FAST.replace(capture_dir=str(tmp_path)), url + "/v1/messages")
    assert isinstance(result.error, otel_liveness.StreamTruncated)
    (capture,) = list(tmp_path.glob("*.jsonl"))
    chunks = parse_capture(capture.read_text().splitlines())
    assert b"".join(c.data for c in chunks if isinstance(c.data, bytes)) == result.error.prefix
    # The capture records the silence the transport judged: replayed with a bound a little under
    # it, the same verdict; with a bound over it, the capture ends first (incomplete).
    last_byte = max(c.t for c in chunks if isinstance(c.data, bytes))
    silence = chunks[-1].t - last_byte
    assert chunks[-1].data == "end" and silence >= 0.3 - 0.01
    judged = analyze(chunks, raw_idle=silence * 0.9, notice_every=None)
    assert judged["verdict"] == "raw_silence" and judged["committed"] is True and judged["frames"]["semantic"] == 3
    assert analyze(chunks, raw_idle=silence + 0.5, notice_every=None)["verdict"] == "incomplete"


def test_flight_recorder_is_off_by_default(provider, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    url = provider.add("rec2", [[s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Stall()]])
    run(("httpx2", None), FAST, url + "/v1/messages")
    assert list(tmp_path.rglob("*.jsonl")) == []


def test_no_thread_or_task_leaks(provider, no_thread_leak) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("mixed", [[s.Headers(), *anthropic_reply()[:1], s.Stall()], [s.Headers(), *anthropic_reply()]])
    for _ in range(3):
        assert run(("httpx2", None), FAST, url + "/v1/messages").error is None

    async def main() -> int:
        before = len(asyncio.all_tasks())
        for _ in range(3):
            transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), FAST)
            async with httpx2.AsyncClient(transport=transport) as client:
                async with client.stream("POST", url + "/v1/messages", json={"stream": True}) as response:
                    async for _chunk in response.aiter_raw():
                        pass
        return len(asyncio.all_tasks()) - before

    assert asyncio.run(main()) == 0  # no task outlives its stream (threads: the no_thread_leak fixture)


# -- pytest-httpx: request/response-level behaviour of the httpx family (patched below the wrapper)


def _client(policy: Policy = FAST) -> httpx.Client:
    return httpx.Client(transport=otel_liveness.wrap(httpx.HTTPTransport(), policy))


def test_httpx_status_retries(httpx_mock) -> None:  # type: ignore[no-untyped-def]
    httpx_mock.add_response(status_code=503, json={"error": {"type": "api_error"}})
    httpx_mock.add_response(status_code=200, json={"id": "msg_1"})
    with _client() as client:
        response = client.post("https://api.anthropic.com/v1/messages", json={"model": "m"})
    assert response.json() == {"id": "msg_1"}
    assert len(httpx_mock.get_requests()) == 2
    assert [a["outcome"] for a in response.extensions["liveness"]["attempts"]] == ["provider_error", "completed"]


def test_httpx_retry_after_seconds_is_honoured(httpx_mock) -> None:  # type: ignore[no-untyped-def]
    import time

    httpx_mock.add_response(status_code=429, headers={"retry-after": "0.2"})
    httpx_mock.add_response(status_code=200, json={})
    events: list = []
    transport = otel_liveness.wrap(httpx.HTTPTransport(), FAST, hooks=[events.append])
    started = time.monotonic()
    with httpx.Client(transport=transport) as client:
        assert client.post("https://api.anthropic.com/v1/messages", json={}).status_code == 200
    assert time.monotonic() - started >= 0.2
    (retry,) = [e for e in events if isinstance(e, otel_liveness.RetryScheduled)]
    assert (retry.delay, retry.source.value) == (0.2, "retry_after")


@pytest.mark.parametrize(("header", "status", "requests"), [("true", 400, 3), ("false", 503, 1)])
def test_httpx_should_retry_header_wins(httpx_mock, header, status, requests) -> None:  # type: ignore[no-untyped-def]
    httpx_mock.add_response(status_code=status, headers={"x-should-retry": header}, is_reusable=True)
    with _client() as client:
        response = client.post("https://api.anthropic.com/v1/messages", json={})
    assert response.status_code == status and len(httpx_mock.get_requests()) == requests
    assert response.headers["x-should-retry"] == "false"


def test_httpx_connect_errors_are_retried(httpx_mock) -> None:  # type: ignore[no-untyped-def]
    httpx_mock.add_exception(httpx.ConnectError("refused"))
    httpx_mock.add_response(status_code=200, json={"ok": True})
    with _client() as client:
        response = client.post("https://api.anthropic.com/v1/messages", json={})
    assert response.json() == {"ok": True} and len(httpx_mock.get_requests()) == 2
    attempts = response.extensions["liveness"]["attempts"]
    assert [(a["outcome"], a["retry_reason"]) for a in attempts] == [("connection_error", "connect_error"), ("completed", None)]


def test_httpx_sse_body_through_the_mock(httpx_mock) -> None:  # type: ignore[no-untyped-def]
    body = b"".join(step.data for step in anthropic_reply("mocked") if isinstance(step, s.Raw))
    httpx_mock.add_response(status_code=200, headers=SSE, content=body)
    with _client() as client:
        response = client.post("https://api.anthropic.com/v1/messages", json={"stream": True})
    assert response.content == body
    report = response.extensions["liveness"]
    assert report["stop_reason"] == "completed" and report["stop_detail"] == "end_turn"
    assert json.dumps(report)  # JSON-serialisable


def test_a_raising_hook_is_logged_and_counted(provider, caplog) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("ok-hook2", [[s.Headers(), *anthropic_reply("fine")]])
    transport = otel_liveness.wrap(httpx2.HTTPTransport(), FAST, hooks=[lambda e: 1 / 0])
    with caplog.at_level("WARNING", logger="otel_liveness"), httpx2.Client(transport=transport) as client:
        assert client.post(url + "/v1/messages", json={"stream": True}).status_code == 200
    assert any("ZeroDivisionError" in r.getMessage() for r in caplog.records)


def test_task_cancellation_ends_the_attempt_and_releases_the_connection(provider, anyio_backend) -> None:  # type: ignore[no-untyped-def]
    import anyio

    url = provider.add("cancel", [[s.Headers(), *anthropic_reply("z" * 100, deltas=100, delta_every=1.0)]])
    events: list = []

    async def main() -> None:
        transport = otel_liveness.wrap(httpx2.AsyncHTTPTransport(), FAST, hooks=[events.append])
        async with httpx2.AsyncClient(transport=transport) as client:
            with anyio.move_on_after(0.15):
                async with client.stream("POST", url + "/v1/messages", json={"stream": True}) as response:
                    async for _ in response.aiter_raw():
                        pass

    anyio.run(main, backend=anyio_backend)
    ended = [e for e in events if isinstance(e, otel_liveness.AttemptEnded)]
    assert [e.record.outcome.value for e in ended] == ["cancelled"]
    assert [e.stop_reason.value for e in events if isinstance(e, otel_liveness.RequestEnded)] == ["cancelled"]
    import time

    deadline = time.monotonic() + 2
    while provider.open_connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert provider.open_connections() == 0


_HEADER_NAMES = ["Accept", "accept", "X-Api-Key", "x-stainless-retry-count", "Set-Cookie", "content-type", "X-Ünïcode"]


@pytest.mark.parametrize("module", [httpx, httpx2])
def test_header_dict_is_what_items_gives(module) -> None:  # type: ignore[no-untyped-def]
    # The engine's view of request and response headers: lower-case names, a repeated name's
    # values joined (as Headers.items() does), each library's own decoding -- ASCII, UTF-8 and
    # bytes only latin-1 can decode.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from otel_liveness.transport._base import header_dict

    value = st.one_of(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
                      st.text(max_size=6).map(lambda t: t.encode("utf-8", "replace")),
                      st.binary(max_size=6).map(lambda b: bytes(x for x in b if x >= 32)))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(_HEADER_NAMES), value), max_size=8))
    def check(pairs: list[tuple[str, str | bytes]]) -> None:
        names = [n.encode("utf-8") if not n.isascii() else n for n in (name for name, _ in pairs)]
        headers = module.Headers(list(zip(names, (v for _, v in pairs), strict=True)))
        assert header_dict(headers) == {k.lower(): v for k, v in headers.items()}

    check()
