"""The transport against a real loopback server, through every client variant (httpx/httpx2 x
sync/asyncio/trio): what a caller sees for each row of the policy table."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

import otel_liveness
from otel_liveness import ProviderError, StreamTruncated, WallTimeout
from otel_liveness.core.events import Heartbeats, RetryScheduled, SemanticNotice, Verdict
from otel_liveness.testing import anthropic_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import anthropic_error, anthropic_status

from .clients import VARIANT_IDS, VARIANTS, Result, run
from .conftest import FAST

pytestmark = pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)

URL = "/v1/messages"


def frames(body: bytes) -> list[str]:
    return [line[7:] for line in body.decode().split("\n") if line.startswith("event: ")]


def outcomes(result: Result) -> list[str]:
    assert result.report is not None
    return [a["outcome"] for a in result.report["attempts"]]


def wait_idle(provider, timeout: float = 2.0) -> None:  # type: ignore[no-untyped-def]
    """Every connection the client opened is closed again (no leaked sockets)."""
    deadline = time.monotonic() + timeout
    while provider.open_connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert provider.open_connections() == 0


def test_long_think_with_pings_completes_with_notices(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # 60 provider-seconds of pings (0.6 s real), twice the raw bound and six times the notice interval.
    url = provider.add("think", [[s.Headers(), *anthropic_reply("Hello", think_pings=12, ping_every=5.0)]])
    result = run(variant, FAST, url + URL)
    assert result.error is None and result.status == 200
    assert frames(result.body)[0] == "message_start" and frames(result.body)[-1] == "message_stop"
    assert frames(result.body).count("ping") == 12
    assert provider.attempts("think") == 1
    assert result.report["stop_reason"] == "completed" and outcomes(result) == ["completed"]
    notices = [e for e in result.events if isinstance(e, SemanticNotice)]
    assert len(notices) >= 3 and [n.number for n in notices] == list(range(1, len(notices) + 1))
    assert sum(e.count for e in result.events if isinstance(e, Heartbeats)) == 12
    record = result.report["attempts"][0]
    assert record["heartbeats"] == 12 and record["response_id"] == "msg_sim_0001"
    assert record["time_to_first_semantic"] > 0.5
    wait_idle(provider)


@pytest.mark.parametrize(
    "failed",
    [
        [s.HangBeforeHeaders()],
        [s.Headers(), *anthropic_reply(stall_after=0)[:1], s.Stall()],  # message_start, then nothing
        [s.Headers(), *anthropic_reply()[:1], s.Reset()],
        [s.Headers(), *anthropic_reply()[:1], s.Close()],  # EOF before content
        [s.Headers(), *anthropic_reply()[:1], s.Raw(anthropic_error("overloaded_error"))],
        [anthropic_status(529, "overloaded_error")],
        [anthropic_status(500, "api_error")],
        [anthropic_status(408, "timeout_error")],
    ],
    ids=["dead-before-headers", "dead-before-content", "reset", "eof", "in-band-overload", "529", "500", "408"],
)
def test_pre_content_failure_is_retried_invisibly(variant, provider, failed) -> None:  # type: ignore[no-untyped-def]
    good = [s.Headers(), *anthropic_reply("Recovered", msg_id="msg_good")]
    url = provider.add("flaky", [failed, good])
    result = run(variant, FAST, url + URL)
    assert result.error is None and result.status == 200
    assert provider.attempts("flaky") == 2
    # One attempt visible: its headers and one message id, no bytes of the failed attempt.
    assert result.headers["request-id"] == provider.requests("flaky")[1].request_id
    assert result.body.count(b'"type":"message_start"') == 1 and b"msg_good" in result.body
    assert b"error" not in result.body
    assert result.report["stop_reason"] == "completed"
    assert outcomes(result)[1] == "completed" and len(outcomes(result)) == 2
    retry = [e for e in result.events if isinstance(e, RetryScheduled)]
    assert len(retry) == 1 and retry[0].delay <= 0.05
    wait_idle(provider)


def test_rate_limit_honours_retry_after_ms(variant, provider) -> None:  # type: ignore[no-untyped-def]
    limited = anthropic_status(429, "rate_limit_error", (("retry-after-ms", "250"),))
    url = provider.add("limited", [[limited], [limited], [s.Headers(), *anthropic_reply()]])
    started = time.monotonic()
    result = run(variant, FAST.replace(max_attempts=1), url + URL)
    elapsed = time.monotonic() - started
    assert result.error is None and result.status == 200
    assert provider.attempts("limited") == 3  # the patient tier has its own budget
    assert 0.5 <= elapsed < 2.0
    retries = [e for e in result.events if isinstance(e, RetryScheduled)]
    assert [(r.delay, r.source.value, r.rate_limited) for r in retries] == [(0.25, "retry_after_ms", True)] * 2
    assert outcomes(result) == ["rate_limited", "rate_limited", "completed"]


def test_rate_limit_honours_retry_after_seconds(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # The loopback equivalent of the pytest-httpx case (tests/test_transport_misc.py): measured.
    limited = anthropic_status(429, "rate_limit_error", (("retry-after", "1"),))
    url = provider.add("limited-s", [[limited], [s.Headers(), *anthropic_reply()]])
    started = time.monotonic()
    result = run(variant, FAST.replace(max_retry_after=5.0), url + URL)
    elapsed = time.monotonic() - started
    assert result.error is None and result.status == 200 and provider.attempts("limited-s") == 2
    first, second = result.report["attempts"]
    assert (first["outcome"], first["retry_delay"], first["delay_source"]) == ("rate_limited", 1.0, "retry_after")
    assert second["started"] - (first["started"] + first["duration"]) >= 1.0 and elapsed >= 1.0
    (retry,) = [e for e in result.events if isinstance(e, RetryScheduled)]
    assert (retry.delay, retry.source.value, retry.rate_limited) == (1.0, "retry_after", True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Forwarder:
    """Listens on ``port`` once started (connections are refused until then) and forwards each
    connection to ``target``: a server that comes up while the client is backing off."""

    def __init__(self, port: int, target: int) -> None:
        self.port, self.target = port, target
        self.listener: socket.socket | None = None

    def start(self) -> None:
        if self.listener is not None:
            return
        listener = socket.create_server(("127.0.0.1", self.port))
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()


def test_connect_errors_are_retried_until_the_server_listens(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # The loopback equivalent of the pytest-httpx case: connection refused, then the server is up.
    provider.add("late", [[s.Headers(), *anthropic_reply("Up now", msg_id="msg_late")]])
    forwarder = Forwarder(free_port(), provider.port)

    def listen_on_retry(event: object) -> None:
        if isinstance(event, RetryScheduled) and event.reason.value == "connect_error":
            forwarder.start()  # listening before the backoff ends

    try:
        result = run(variant, FAST, f"http://127.0.0.1:{forwarder.port}/s/late{URL}", hooks=[listen_on_retry])
    finally:
        forwarder.close()
    assert result.error is None and result.status == 200 and b"msg_late" in result.body
    assert [(a["outcome"], a["retry_reason"]) for a in result.report["attempts"]] == [
        ("connection_error", "connect_error"), ("completed", None)]
    assert provider.attempts("late") == 1  # the refused attempt never reached the server


def test_connect_errors_exhaust_the_budget_as_a_typed_error(variant) -> None:  # type: ignore[no-untyped-def]
    result = run(variant, FAST, f"http://127.0.0.1:{free_port()}{URL}")  # nothing listens there
    assert isinstance(result.error, ProviderError) and result.error.attempts == FAST.max_attempts
    assert result.error.last_cause == "connect_error" and result.status is None and result.body == b""
    assert isinstance(result.error, __import__(variant[0]).ConnectError)  # existing except clauses keep working
    retries = [e for e in result.events if isinstance(e, RetryScheduled)]
    assert [r.reason.value for r in retries] == ["connect_error"] * (FAST.max_attempts - 1)


def test_exhausted_status_returns_final_response_marked(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("down", [[anthropic_status(529, "overloaded_error", (("x-should-retry", "true"),))]])
    result = run(variant, FAST, url + URL)
    assert result.error is None
    assert result.status == 529 and result.headers["x-should-retry"] == "false"
    assert json.loads(result.body)["error"]["type"] == "overloaded_error"
    assert provider.attempts("down") == FAST.max_attempts
    assert result.report["stop_reason"] == "exhausted" and result.report["cause"] == "status_529"


def test_rejected_request_is_not_retried(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("bad", [[anthropic_status(400, "invalid_request_error")]])
    result = run(variant, FAST, url + URL)
    assert result.status == 400 and provider.attempts("bad") == 1
    assert "x-should-retry" not in result.headers
    assert result.report["stop_reason"] == "rejected"


def test_exhausted_stream_failures_raise_provider_error(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("dead", [[s.Headers(), *anthropic_reply()[:1], s.Stall()]])
    result = run(variant, FAST, url + URL)
    assert isinstance(result.error, ProviderError)
    assert result.error.attempts == 3 and result.error.last_cause == "raw_silence"
    assert provider.attempts("dead") == 3
    # ...and it is also the HTTP library's read timeout, so existing except clauses work.
    family = __import__(variant[0])
    assert isinstance(result.error, family.ReadTimeout)
    wait_idle(provider)


def test_stall_after_content_is_a_truncation_with_the_exact_prefix(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("stall", [[s.Headers(), *anthropic_reply("abcdefgh", deltas=8, stall_after=3), s.Stall()]])
    result = run(variant, FAST, url + URL)
    exc = result.error
    assert isinstance(exc, StreamTruncated), exc
    assert exc.cause == "raw_silence" and exc.prefix == result.body and exc.released == len(result.body)
    text = exc.partial["content"][0]
    assert text["type"] == "text" and text["text"] == "abc" and text["complete"] is False
    assert otel_liveness.continuation_message(exc.partial) is None  # nothing complete: nothing invented
    assert provider.attempts("stall") == 1  # never retried after content
    assert outcomes(result) == ["truncated"] and result.report is not None
    wait_idle(provider)


def test_in_band_error_after_content_reaches_the_reader_as_sent(variant, provider) -> None:  # type: ignore[no-untyped-def]
    sent = [s.Headers(), *anthropic_reply("abcd", deltas=4, error_after=2)]
    url = provider.add("late-error", [sent])
    result = run(variant, FAST, url + URL)
    # The provider's answer, not a stream that died: every byte as sent, the error frame included.
    assert result.error is None and result.body == b"".join(x.data for x in sent if isinstance(x, s.Raw))
    assert b"event: error" in result.body
    assert result.report is not None
    assert (result.report["stop_reason"], result.report["cause"]) == ("truncated", "error_event:overloaded_error")
    assert outcomes(result) == ["provider_error"] and provider.attempts("late-error") == 1


def test_wall_budget_stops_and_reports_the_budget(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("slow", [[s.Headers(), *anthropic_reply("x" * 40, deltas=40, delta_every=2.0)]])
    result = run(variant, FAST.replace(wall_timeout=0.3), url + URL)
    assert isinstance(result.error, WallTimeout) and result.error.budget == 0.3
    assert result.error.committed is True
    assert provider.attempts("slow") == 1
    wait_idle(provider)


def test_wall_budget_before_content_is_not_retried(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("hang", [[s.HangBeforeHeaders()]])
    result = run(variant, FAST.replace(wall_timeout=0.2, raw_idle_timeout=5.0), url + URL)
    assert isinstance(result.error, WallTimeout) and result.error.committed is False
    assert provider.attempts("hang") == 1


def test_caller_closing_early_cancels_and_releases_the_connection(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("long", [[s.Headers(), *anthropic_reply("y" * 50, deltas=50, delta_every=1.0)]])
    result = run(variant, FAST, url + URL, read_limit=1)
    assert result.error is None
    assert outcomes(result) == ["cancelled"] and result.report["stop_reason"] == "cancelled"
    wait_idle(provider)
    assert provider.requests("long")[0].disconnected


def test_shadow_mode_observes_without_enforcing(variant, provider) -> None:  # type: ignore[no-untyped-def]
    script = [s.Headers(), *anthropic_reply("abcd", deltas=4, stall_after=2), s.Sleep(50.0), s.Close()]
    url = provider.add("shadow", [script])
    result = run(variant, FAST.replace(shadow=True), url + URL)
    assert result.error is None  # no kill, no truncation error
    verdicts = [e for e in result.events if isinstance(e, Verdict)]
    assert [(v.kind.value, v.enforced, v.committed) for v in verdicts] == [("raw_silence", False, True)]
    assert outcomes(result) == ["truncated"]  # what would have happened, reported
    assert provider.attempts("shadow") == 1


def test_non_streaming_request_is_not_killed_by_the_raw_clock(variant, provider) -> None:  # type: ignore[no-untyped-def]
    body = json.dumps({"id": "msg_json", "type": "message", "content": [{"type": "text", "text": "hi"}]}).encode()
    url = provider.add("json", [[s.Sleep(60.0), s.Status(200, body)]])
    result = run(variant, FAST, url + URL, body={"model": "m", "max_tokens": 5, "messages": []})
    assert result.error is None and result.status == 200 and json.loads(result.body)["id"] == "msg_json"
    assert result.report["streaming"] is False and outcomes(result) == ["completed"]


def test_giant_frame_is_a_typed_error(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("giant", [[s.Headers(), s.Raw(b"data: " + b"x" * 5000)]])
    result = run(variant, FAST.replace(max_frame_bytes=1024), url + URL)
    assert isinstance(result.error, otel_liveness.FrameTooLarge)
    # Held before any content, so no response: the caller gets the error, the hooks the verdict.
    assert result.status is None and result.report is None and result.body == b""
    assert [e.record.outcome.value for e in result.events if isinstance(e, otel_liveness.AttemptEnded)] == ["malformed"]
    assert [e.stop_reason.value for e in result.events if isinstance(e, otel_liveness.RequestEnded)] == ["malformed"]
    assert provider.attempts("giant") == 1  # a malformed stream is not retried


def test_a_stream_that_cannot_be_decoded_is_a_typed_error(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # Content-Encoding: gzip on bytes that are not gzip: the transport's decoded copy fails, and the
    # caller gets a typed error that is also the HTTP library's decoding error -- not zlib's.
    url = provider.add("bad-gzip", [[s.Headers(headers=(("content-encoding", "gzip"),)), s.Raw(b"not gzip at all")]])
    result = run(variant, FAST, url + URL)
    assert isinstance(result.error, otel_liveness.MalformedStream)
    assert isinstance(result.error, __import__(variant[0]).DecodingError)
    assert "could not be decoded" in str(result.error) and provider.attempts("bad-gzip") == 1
    assert [e.stop_reason.value for e in result.events if isinstance(e, otel_liveness.RequestEnded)] == ["malformed"]


def test_credentials_never_reach_hooks_or_reports(variant, provider) -> None:  # type: ignore[no-untyped-def]
    url = provider.add("ok2", [[s.Headers(), *anthropic_reply("SECRET-COMPLETION")]])
    result = run(variant, FAST, url + URL)
    dumped = json.dumps(result.report) + repr(result.events)
    assert "sk-ant-SECRET-KEY" not in dumped and "SECRET-COMPLETION" not in dumped


@pytest.mark.parametrize("after", [s.Stall(), s.Reset()], ids=["stall", "reset"])
def test_silence_or_reset_after_the_end_frame_completes(variant, provider, after) -> None:  # type: ignore[no-untyped-def]
    # message_stop arrived, then the server neither closes nor finishes the chunked body: the reply
    # is complete, so the caller gets it and no error (the raw bound ends the wait).
    url = provider.add("lingering", [[s.Headers(), *anthropic_reply("done", deltas=2), after]])
    result = run(variant, FAST, url + URL)
    assert result.error is None, result.error
    assert frames(result.body)[-1] == "message_stop"
    assert outcomes(result) == ["completed"] and result.report["stop_reason"] == "completed"
    assert provider.attempts("lingering") == 1
    wait_idle(provider)


@pytest.mark.serial  # notices within 0.1 s of due: a first notice was 0.16 s late once, with sibling workers on a slowed host
@pytest.mark.parametrize("where", ["before-headers", "before-headers-reused", "preamble", "after-content"])
def test_notices_arrive_on_time_during_total_silence(variant, provider, where) -> None:  # type: ignore[no-untyped-def]
    # 40 provider-seconds (0.4 s) without a byte -- no pings: a wire-silent provider thinking. The
    # reader is blocked in a socket read all that time; the notices must still come when they fall
    # due (every 0.1 s), not when the next byte ends the wait.
    from otel_liveness.core.events import RequestStarted

    reply = anthropic_reply("abcd", deltas=4)
    silence = s.Sleep(40.0)
    steps = {
        "before-headers": [silence, s.Headers(), *reply],
        # the same wait on a connection an earlier request opened: the engine reaches the network
        # stream through the connection, not through the trace of a new connection's connect
        "before-headers-reused": [silence, s.Headers(), *reply],
        "preamble": [s.Headers(), reply[0], silence, *reply[1:]],
        "after-content": [s.Headers(), *reply[:4], silence, *reply[4:]],
    }[where]
    url = provider.add("silent", [steps])
    first = provider.add("quick", [[s.Headers(), *anthropic_reply("a", deltas=1)]]) if where.endswith("reused") else None
    seen: list[tuple[float, object]] = []
    accepted = provider.connections_accepted
    result = run(variant, FAST.replace(raw_idle_timeout=2.0), url + URL,
                 hooks=[lambda e: seen.append((time.monotonic(), e))], first=None if first is None else first + URL)
    assert result.error is None and outcomes(result) == ["completed"]
    if first is not None:  # one connection: the silent request reused the first one's
        assert provider.connections_accepted - accepted == 1 and provider.attempts("quick") == 1
    start = [t for t, e in seen if isinstance(e, RequestStarted)][-1]
    notices = [(t - start, e) for t, e in seen if isinstance(e, SemanticNotice)]
    assert len(notices) >= 3, notices
    late = [round(t - e.at, 3) for t, e in notices]
    assert max(late) < 0.1, late  # delivered when due (within one interval), from inside the blocked read
    assert [e.number for _, e in notices] == list(range(1, len(notices) + 1))
    wait_idle(provider)


def test_a_notice_that_cannot_be_delivered_does_not_spin_the_read(variant, provider) -> None:  # type: ignore[no-untyped-def]
    # semantic_timeout == notice interval: the first notice is never delivered (the failure comes
    # first). The blocked read must then simply wait for its own deadline, not wake every ms.
    from otel_liveness.core.request.engine import Engine

    calls = []
    original = Engine.woke

    def counting(self, now, start):  # type: ignore[no-untyped-def]
        calls.append(now)
        return original(self, now, start)

    url = provider.add("silent", [[s.Headers(), *anthropic_reply("ab", deltas=2)[:3], s.Sleep(60.0), s.Close()]])
    policy = FAST.replace(raw_idle_timeout=0.5, semantic_notice_interval=0.2, semantic_timeout=0.2)
    Engine.woke = counting  # type: ignore[method-assign]
    try:
        result = run(variant, policy, url + URL)
    finally:
        Engine.woke = original  # type: ignore[method-assign]
    assert isinstance(result.error, StreamTruncated)
    assert len(calls) <= 3, len(calls)


@pytest.mark.parametrize("silence", ["pings", "total"])
@pytest.mark.parametrize("committed", [False, True], ids=["before-content", "after-content"])
def test_semantic_timeout_is_enforced_on_time(variant, provider, silence, committed) -> None:  # type: ignore[no-untyped-def]
    # semantic_timeout 1 s, raw bound 10 s: a stream that keeps pinging (or is wholly silent) but
    # sends no content fails on the semantic clock, when it falls due -- not at the raw bound.
    # (1 s rather than less: the content before the silence must reach the client before the
    # semantic clock runs out, also on a loaded machine.)
    reply = anthropic_reply("abcd", deltas=4)
    gap = [s.Raw(b'event: ping\ndata: {"type": "ping"}\n\n'), s.Sleep(5.0)] * 100 if silence == "pings" else [s.Sleep(1000.0)]
    head = reply[:4] if committed else reply[:1]  # a delta released, or only message_start
    url = provider.add("quiet", [[s.Headers(), *head, *gap, *reply[len(head):]]] * 3)
    policy = FAST.replace(raw_idle_timeout=10.0, semantic_timeout=1.0, max_attempts=1)
    started = time.monotonic()
    result = run(variant, policy, url + URL)
    elapsed = time.monotonic() - started
    assert elapsed < 5.0, elapsed  # half the raw bound
    if committed:
        assert isinstance(result.error, StreamTruncated) and result.error.cause == "semantic_timeout"
        assert result.error.prefix == result.body and result.body.count(b"event: content_block_delta") == 2
    else:
        assert isinstance(result.error, ProviderError) and result.error.last_cause == "semantic_timeout"
    verdicts = [e for e in result.events if isinstance(e, Verdict)]
    assert [(v.kind.value, v.committed) for v in verdicts] == [("semantic_timeout", committed)]
    # Judged when it fell due: one semantic bound after the last content (or the request), not later
    # than the read's wake-up allows.
    (attempt,) = [e.record for e in result.events if isinstance(e, otel_liveness.AttemptEnded)]
    assert 1.0 <= attempt.semantic_idle < 1.0 + (elapsed - 1.0), (attempt.semantic_idle, elapsed)
    assert provider.attempts("quiet") == 1
