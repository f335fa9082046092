"""Composition rules of the engine, driven with bytes and a fake clock (issue #23): call identity
in the exhausted-request cache, bodies that cannot be replayed, shadow mode that never kills,
2xx JSON error objects on streaming requests, and a close after the reply's stop reason."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from otel_liveness.core import errors as E
from otel_liveness.core.commands import COMPLETE, READ, Fail, Respond, Send
from otel_liveness.core.events import Verdict
from otel_liveness.core.memory.caches import ExhaustedCache, RequestKey, auth_identity, request_key
from otel_liveness.core.outcome import AttemptOutcome
from otel_liveness.core.request.engine import Engine
from otel_liveness.core.request.facts import RequestFacts
from otel_liveness.testing.scripts import Raw, anthropic_error, bedrock_reply, gemini_reply

from .test_engine import FINISH, POLICY, REPLY, SSE, START, Outcome, drive, ok, status, stream

JSON = {"content-type": "application/json"}
ANTHROPIC_OVERLOADED = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                                   "request_id": "req_1"}).encode()
OPENAI_SERVER_ERROR = json.dumps({"error": {"message": "The server had an error", "type": "server_error",
                                            "param": None, "code": None}}).encode()
GEMINI_UNAVAILABLE = json.dumps([{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}]).encode()
INVALID_REQUEST = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}).encode()
REPLY_JSON = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                         "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}).encode()


def json_body(body: bytes, *, split: int | None = None) -> list[Any]:
    """A 2xx JSON answer (in two reads when ``split`` is given)."""
    parts = [body] if split is None else [body[:split], body[split:]]
    steps: list[Any] = [("headers", 0.0, 200, JSON)]
    t = 0.05
    for part in parts:
        steps.append(("data", t, part))
        t += 0.05
    steps.append(("eof", t))
    return steps


# -- 2: call identity ------------------------------------------------------------------------------


def test_a_fresh_call_ends_what_the_cache_remembers_for_its_key() -> None:
    cache: ExhaustedCache[Fail] = ExhaustedCache()
    first = drive([[("silence",)]], facts=RequestFacts(streaming=True, key="k"), exhausted=cache)
    assert isinstance(first.error, Fail) and len(cache) == 1
    # Call 2, same bytes: a fresh call (retry count 0) -- it forgets call 1's error ...
    second = drive([status(529), ok()], facts=RequestFacts(streaming=True, key="k"), exhausted=cache)
    assert second.error is None and len(cache) == 0
    # ... so the SDK's retry of call 2 is a new attempt, not call 1's error.
    retry = Engine(POLICY, RequestFacts(streaming=True, key="k", sdk_retry=True), 2.0, provider="anthropic",
                   exhausted=cache)
    assert isinstance(retry.start(2.0), Send) and not retry.ended


def test_the_key_names_the_tenant_by_a_digest_never_the_secret() -> None:
    body = b'{"model":"m","stream":true}'
    a = request_key("POST", "https://api/x", body, auth_identity({"x-api-key": "sk-ant-TENANT-A"}))
    b = request_key("POST", "https://api/x", body, auth_identity({"x-api-key": "sk-ant-TENANT-B"}))
    again = request_key("POST", "https://api/x", body, auth_identity({"x-api-key": "sk-ant-TENANT-A"}))
    bearer = request_key("POST", "https://api/x", body, auth_identity({"authorization": "Bearer sk-ant-TENANT-A"}))
    assert a == again and len({a, b, bearer}) == 3
    for name in ("api-key", "x-goog-api-key", "authorization", "proxy-authorization", "cookie"):
        assert auth_identity({name: "one"}) != auth_identity({name: "two"}) != b""
    assert auth_identity({}) == b"" and auth_identity({"content-type": "x"}) == b""
    identity = auth_identity({"x-api-key": "sk-ant-TENANT-A"})
    assert b"TENANT" not in identity and "TENANT" not in a
    # SigV4: the signature changes on every request, the access key names the caller.
    sig = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261203/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature="
    assert auth_identity({"authorization": sig + "aaa"}) == auth_identity({"authorization": sig + "bbb"})
    assert auth_identity({"authorization": sig + "aaa"}) != auth_identity({"authorization": sig.replace("AKIDEX", "AKIDEY")})


def test_facts_key_includes_the_auth_identity() -> None:
    common: dict[str, Any] = {"method": "POST", "url": "https://h/v1/messages", "host": "h", "port": None,
                              "path": "/v1/messages", "body": b"{}", "read_timeout": None}
    one = RequestFacts.read(headers={"x-api-key": "k1"}, **common)
    two = RequestFacts.read(headers={"x-api-key": "k2"}, **common)
    same = RequestFacts.read(headers={"x-api-key": "k1", "x-stainless-retry-count": "1"}, **common)
    assert one.key != two.key and one.key == same.key and same.sdk_retry and not one.sdk_retry


def test_the_key_is_computed_only_when_the_cache_needs_it_and_keeps_no_credentials() -> None:
    common: dict[str, Any] = {"method": "POST", "url": "https://h/v1/messages", "host": "h", "port": None,
                              "path": "/v1/messages", "body": b'{"model":"m"}', "read_timeout": None}
    fresh = RequestFacts.read(headers={"x-api-key": "sk-ant-SECRET"}, **common)
    key = fresh.key
    assert isinstance(key, RequestKey)
    cache: ExhaustedCache[str] = ExhaustedCache()
    assert not cache.discard(key)  # a fresh call, an empty cache (the common case): nothing hashed
    assert key._digest is None and key._body is not None
    assert "sk-ant-SECRET" not in repr(key._head)  # the credentials are only ever kept as a digest
    cache.put(key, "exhausted", 0.0)  # the key is computed here, and the body dropped
    assert key._digest == request_key("POST", "https://h/v1/messages", b'{"model":"m"}',
                                      auth_identity({"x-api-key": "sk-ant-SECRET"}))
    assert key._body is None and key._head is None
    retry = RequestFacts.read(headers={"x-api-key": "sk-ant-SECRET", "x-stainless-retry-count": "1"}, **common)
    assert cache.get(retry.key, 1.0) == "exhausted"  # equal by digest, though a different object
    empty: ExhaustedCache[str] = ExhaustedCache()
    unhashed = RequestFacts.read(headers={"x-stainless-retry-count": "1"}, **common).key
    assert isinstance(unhashed, RequestKey) and empty.get(unhashed, 1.0) is None and unhashed._digest is None
    other = RequestFacts.read(headers={"x-api-key": "sk-ant-OTHER", "x-stainless-retry-count": "1"}, **common)
    assert cache.get(other.key, 1.0) is None
    assert cache.discard(RequestFacts.read(headers={"x-api-key": "sk-ant-SECRET"}, **common).key)  # a new call forgets
    assert len(cache) == 0


# -- 1: bodies that cannot be replayed ------------------------------------------------------------


def test_a_retry_due_on_a_body_that_cannot_be_replayed_is_a_typed_error_with_no_resend() -> None:
    asked: list[int] = []

    def over_bound() -> str | None:
        asked.append(1)
        return "over_bound"

    for first in ([("headers", 0.0, 200, SSE), ("data", 0.1, START), ("reset", 0.2)], status(529), [("silence",)]):
        out = drive_body([first, ok()], over_bound)
        assert isinstance(out.error, Fail) and out.error.error is E.BodyNotReplayable
        assert out.error.fields["attempts"] == 1 and out.error.fields["reason"] == "over_bound"
        assert out.error.fields["limit"] == POLICY.max_replay_body_bytes
        assert len(out.report["attempts"]) == 1 and out.report["stop_reason"] == "not_replayable"
        assert out.sleeps == [] and out.body == b""
    assert len(asked) == 3
    cause = drive_body([[("headers", 0.0, 200, SSE), ("data", 0.1, START), ("reset", 0.2)]], lambda: "over_bound")
    assert isinstance(cause.error, Fail) and cause.error.fields["last_cause"] == "read_error"
    assert "cannot be sent again" in cause.error.args[0]


def test_a_replayable_body_is_retried_and_a_rejection_never_asks() -> None:
    out = drive_body([status(529), ok()], lambda: None)
    assert out.error is None and out.body == b"".join(REPLY) and len(out.report["attempts"]) == 2
    asked: list[int] = []
    rejected = drive_body([status(400)], lambda: asked.append(1) or "over_bound")  # type: ignore[func-returns-value]
    assert rejected.passthrough and asked == []  # no retry was due: the 400 goes to the caller as it came


def drive_body(attempts: list[list[Any]], problem: Any) -> Outcome:
    return drive(attempts, facts=RequestFacts(streaming=True, body_size=None), body_replayable=problem)


# -- 5: shadow never kills ------------------------------------------------------------------------

BIG = b"data: " + b"a" * 5000 + b"\n\n"


def _bedrock_bytes() -> bytes:
    return b"".join(step.data for step in bedrock_reply("hi") if isinstance(step, Raw))


def _corrupt_bedrock() -> bytes:
    data = bytearray(_bedrock_bytes())
    data[20] ^= 0xFF  # inside the first message: its CRC no longer matches
    return bytes(data)


GZIP = {**SSE, "content-encoding": "gzip"}

# Every way the engine ends a request with Fail in enforce mode; in shadow mode, none of them may
# change what the caller receives: (name, attempt script, policy changes, provider).
FAIL_PATHS: list[tuple[str, list[Any], dict[str, Any], str]] = [
    ("raw silence before content", [("headers", 0.0, 200, SSE), ("data", 0.1, START), ("data", 2.5, b"".join(REPLY[1:])),
                                    ("eof", 2.6)], {}, "anthropic"),
    ("first-byte timeout", [("headers", 0.0, 200, SSE), ("data", 9.0, b"".join(REPLY)), ("eof", 9.1)],
     {"first_byte_timeout": 2.0}, "anthropic"),
    ("raw silence after content (truncation)", [*stream(REPLY[:3], eof=False), ("data", 5.0, b"".join(REPLY[3:])),
                                                ("eof", 5.1)], {}, "anthropic"),
    ("in-band error before content", stream([START, anthropic_error("overloaded_error"), *REPLY[1:]]), {}, "anthropic"),
    ("in-band error after content", stream([*REPLY[:3], anthropic_error("overloaded_error"), *REPLY[3:]]), {},
     "anthropic"),
    ("in-band rejection", stream([START, anthropic_error("invalid_request_error")]), {}, "anthropic"),
    ("EOF before content", stream([START]), {}, "anthropic"),
    ("EOF after content (cut reply)", stream(REPLY[:3]), {}, "anthropic"),
    ("semantic timeout", [("headers", 0.0, 200, SSE), ("data", 0.1, START),
                          *[("data", 0.5 + 0.5 * i, b": ping\n\n") for i in range(8)],
                          ("data", 4.6, b"".join(REPLY[1:])), ("eof", 4.7)], {"semantic_timeout": 2.0}, "anthropic"),
    ("wall budget", [*stream(REPLY[:3], eof=False), ("data", 0.6, REPLY[3]), ("data", 3.0, b"".join(REPLY[4:])),
                     ("eof", 3.1)], {"wall_timeout": 1.0}, "anthropic"),
    ("frame over the bound", stream([START, BIG, *REPLY[1:]]), {"max_frame_bytes": 1024}, "anthropic"),
    ("frame over the bound after content", stream([*REPLY[:3], BIG, *REPLY[3:]]), {"max_frame_bytes": 1024},
     "anthropic"),
    ("held bytes over the bound", stream([START, *[b": " + b"p" * 200 + b"\n\n"] * 8, *REPLY[1:]]),
     {"max_frame_bytes": 1024}, "anthropic"),
    ("corrupt event-stream frame", [("headers", 0.0, 200, {"content-type": "application/vnd.amazon.eventstream"}),
                                    ("data", 0.1, _corrupt_bedrock()), ("eof", 0.2)], {}, "bedrock"),
    ("undecodable gzip", [("headers", 0.0, 200, GZIP), ("data", 0.1, b"\x1f\x8b\x08\x00garbage-not-deflate"),
                          ("data", 0.2, b"more"), ("eof", 0.3)], {}, "anthropic"),
    ("2xx JSON error object", json_body(ANTHROPIC_OVERLOADED), {}, "anthropic"),
    ("exhausted 529", status(529), {}, "anthropic"),
]


@pytest.mark.parametrize(("name", "script", "changes", "provider"), FAIL_PATHS, ids=[p[0] for p in FAIL_PATHS])
def test_shadow_never_changes_what_the_caller_receives(name: str, script: list[Any], changes: dict[str, Any],
                                                       provider: str) -> None:
    enforced = drive([script], POLICY.replace(**changes), provider=provider)
    assert enforced.report["stop_reason"] not in ("completed", None), f"{name}: not a failure when enforced"
    cache: ExhaustedCache[Fail] = ExhaustedCache()
    facts = RequestFacts(streaming=True, body_size=1000, key="k")
    shadow = drive([script], POLICY.replace(shadow=True, **changes), provider=provider, facts=facts, exhausted=cache)
    # What the caller receives: every byte the wire sent, in order, and no error.
    wire = b"".join(step[2] for step in script if step[0] == "data")
    assert shadow.error is None, f"{name}: shadow raised {shadow.error!r}"
    assert shadow.body == wire or shadow.passthrough, name
    assert len(shadow.report["attempts"]) == 1 and shadow.sleeps == []
    # What enforcement would have done is reported.
    assert shadow.report["stop_reason"] == enforced.report["stop_reason"], name
    assert shadow.outcomes[0] == enforced.outcomes[0], name
    assert shadow.report["shadow"] is True
    # Nothing was remembered for an SDK retry: the next try is a real attempt.
    assert len(cache) == 0
    retry = Engine(POLICY.replace(shadow=True), RequestFacts(streaming=True, key="k", sdk_retry=True), 9.0,
                   provider=provider, exhausted=cache)
    assert isinstance(retry.start(9.0), Send)


def test_a_shadow_transport_never_answers_from_the_cache() -> None:
    cache: ExhaustedCache[Fail] = ExhaustedCache()
    drive([[("silence",)]], facts=RequestFacts(streaming=True, key="k"), exhausted=cache)  # an enforcing transport
    assert len(cache) == 1
    shadow = Engine(POLICY.replace(shadow=True), RequestFacts(streaming=True, key="k", sdk_retry=True), 1.0,
                    provider="anthropic", exhausted=cache)
    assert isinstance(shadow.start(1.0), Send)


def test_shadow_survives_a_fault_of_the_judging_itself() -> None:
    class Broken:
        """A framer whose classifier has a bug: feeding it raises (everything else is the real one's)."""

        def __init__(self, real: Any) -> None:
            self.real = real

        def feed(self, data: bytes) -> list[Any]:
            raise RuntimeError("a bug in a classifier")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    engine = Engine(POLICY.replace(shadow=True), RequestFacts(streaming=True), 0.0, provider="anthropic")
    engine.start(0.0)
    assert isinstance(engine.headers(0.01, 200, SSE), Respond)
    assert engine.attempt is not None
    engine.attempt.framer = Broken(engine.attempt.framer)  # type: ignore[assignment]
    assert engine.received(0.02, START) == START
    assert engine.received(0.03, REPLY[1]) == REPLY[1]  # unjudged from then on, passed as it comes
    assert engine.eof(0.04) is COMPLETE
    assert engine.published["stop_reason"] == "malformed"
    enforcing = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
    enforcing.start(0.0)
    enforcing.headers(0.01, 200, SSE)
    assert enforcing.attempt is not None
    enforcing.attempt.framer = Broken(enforcing.attempt.framer)  # type: ignore[assignment]
    with pytest.raises(RuntimeError):  # enforce mode does not hide it
        enforcing.received(0.02, START)


# -- 7: a 2xx JSON error object on a streaming request --------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason", "split"),
    [
        (ANTHROPIC_OVERLOADED, "overloaded", None),
        (ANTHROPIC_OVERLOADED, "overloaded", 3),  # the first key split across reads
        (ANTHROPIC_OVERLOADED, "overloaded", 12),
        (OPENAI_SERVER_ERROR, "server_error", None),
        (GEMINI_UNAVAILABLE, "overloaded", 1),
        (b'  {"type": "error", "error": {"type": "rate_limit_error"}}', "rate_limited", None),
    ],
)
def test_a_2xx_json_error_object_is_retried_before_content(body: bytes, reason: str, split: int | None) -> None:
    out = drive([json_body(body, split=split), ok()])
    assert out.error is None and out.body == b"".join(REPLY)  # nothing of the error reached the caller
    assert out.outcomes[0] in ("provider_error", "rate_limited") and out.outcomes[1] == "completed"
    assert out.report["attempts"][0]["retry_reason"] == reason
    verdicts = [v for v in out.events if isinstance(v, Verdict)]
    assert verdicts and verdicts[0].kind is AttemptOutcome.PROVIDER_ERROR and verdicts[0].enforced


def test_a_2xx_json_error_object_exhausted_is_typed() -> None:
    # A gateway's quirk no SDK types (a 2xx JSON error on a streaming request): a typed error.
    out = drive([json_body(ANTHROPIC_OVERLOADED)])
    assert isinstance(out.error, Fail) and out.error.error is E.ProviderError
    assert out.error.fields["last_cause"] == "error_event:overloaded_error" and out.error.fields["status"] == 200
    assert out.error.fields["attempts"] == 3 and out.body == b""
    rejected = drive([json_body(INVALID_REQUEST), ok()])
    assert isinstance(rejected.error, Fail) and rejected.error.fields["attempts"] == 1
    assert rejected.report["stop_reason"] == "rejected"


@pytest.mark.parametrize(
    "body",
    [
        REPLY_JSON,
        json.dumps({"id": "resp_1", "object": "response", "error": None, "output": []}).encode(),
        json.dumps({"error": None, "id": "x", "choices": []}).encode(),  # error-shaped head, a reply whole
        json.dumps({"type": "message", "content": []}).encode(),
        b"[1, 2, 3]",
        b"not json at all",
    ],
)
def test_a_2xx_json_reply_still_passes_through(body: bytes) -> None:
    for split in (None, 1, 7):
        out = drive([json_body(body, split=split), ok()])
        assert out.error is None and out.body == body and out.outcomes == ["completed"], (body, split)


def test_a_json_reply_is_released_at_its_first_key_not_held_to_its_end() -> None:
    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider="anthropic")
    engine.start(0.0)
    assert engine.headers(0.01, 200, JSON) == READ
    assert engine.received(0.02, b'{"i') == READ  # too short to tell
    assert engine.received(0.03, b'd": "msg_1", ') == Respond(b'{"id": "msg_1", ')
    assert engine.received(0.04, b'"content": []}') == b'"content": []}'
    assert engine.eof(0.05) is COMPLETE


def test_a_long_error_shaped_body_is_released_past_the_probe_bound() -> None:
    body = b'{"error": {"type": "overloaded_error", "message": "' + b"x" * (70 * 1024) + b'"}}'
    out = drive([json_body(body, split=40 * 1024), ok()])
    assert out.error is None and out.body == body and out.outcomes == ["completed"]


def test_shadow_reports_a_json_error_object_and_passes_it_through() -> None:
    out = drive([json_body(ANTHROPIC_OVERLOADED, split=5)], POLICY.replace(shadow=True))
    assert out.error is None and out.body == ANTHROPIC_OVERLOADED
    assert out.outcomes == ["provider_error"] and out.report["stop_reason"] == "exhausted"
    verdicts = [v for v in out.events if isinstance(v, Verdict)]
    assert [v.enforced for v in verdicts] == [False]


LONG_ERROR_SHAPED = b'{"error": {"type": "overloaded_error", "message": "' + b"x" * (70 * 1024) + b'"}}'


@pytest.mark.parametrize(("body", "split"), [(REPLY_JSON, None), (REPLY_JSON, 3), (REPLY_JSON, 40),
                                             (LONG_ERROR_SHAPED, 40 * 1024)])
def test_shadow_passes_a_probed_json_body_on_as_it_comes_once(body: bytes, split: int | None) -> None:
    # Shadow mode keeps nothing back: each read of a probed JSON body goes on as it comes -- none
    # held, none sent twice when the probe tells a reply or passes its bound -- and the body is
    # the caller's from its headers on (committed: a failure would come after content).
    out = drive([json_body(body, split=split)], POLICY.replace(shadow=True))
    assert out.error is None and out.body == body
    assert out.outcomes == ["completed"] and out.report["attempts"][0]["committed"] is True
    # Cut after its first read: what the caller had is content, so the failure is reported as
    # the truncation it is, not as a failure before content.
    cut = drive([[("headers", 0.0, 200, JSON), ("data", 0.05, body[:3]), ("reset", 0.1)]], POLICY.replace(shadow=True))
    assert cut.body == body[:3] and cut.report["attempts"][0]["committed"] is True
    assert cut.report["stop_reason"] == "truncated", cut.report["stop_reason"]


# -- 8: a close after the reply's stop reason -----------------------------------------------------

OPENAI_FINISH = [b'data: {"id":"c1","choices":[{"delta":{"role":"assistant"}}]}\n\n',
                 b'data: {"id":"c1","choices":[{"delta":{"content":"Hi"}}]}\n\n',
                 b'data: {"id":"c1","choices":[{"delta":{},"finish_reason":"stop"}]}\n\n']
GEMINI = [step.data for step in gemini_reply("Hi there") if isinstance(step, Raw)]


def _closed_after(provider: str, parts: list[bytes], *, abandoned: bool = False) -> Engine:
    engine = Engine(POLICY, RequestFacts(streaming=True), 0.0, provider=provider)
    engine.start(0.0)
    headers = {"content-type": "application/vnd.amazon.eventstream"} if provider == "bedrock" else SSE
    command: Any = engine.headers(0.01, 200, headers)
    t = 0.02
    for part in parts:
        command = engine.received(t, part)
        t += 0.01
    assert command is not COMPLETE and not isinstance(command, Fail)
    if abandoned:
        engine.abandoned(t, GeneratorExit())
    else:
        engine.closed(t)
    return engine


def _bedrock_until_message_delta() -> list[bytes]:
    out = []
    for step in bedrock_reply("hi"):
        if isinstance(step, Raw):
            out.append(step.data)
            payload = json.loads(step.data[step.data.index(b'{"bytes"'):].split(b"}", 1)[0] + b"}")
            if b"message_delta" in base64.b64decode(payload["bytes"]):
                break
    return out


@pytest.mark.parametrize(
    ("provider", "parts"),
    [
        ("anthropic", REPLY[:-1]),  # through message_delta (stop_reason), before message_stop
        ("vertex", REPLY[:-1]),
        ("openai-chat", OPENAI_FINISH),  # finish_reason, before [DONE]
        ("openrouter", OPENAI_FINISH),
        ("gemini", GEMINI),  # finishReason (Gemini has no end frame)
        ("bedrock", _bedrock_until_message_delta()),  # the Anthropic stop_reason inside a chunk
    ],
)
def test_a_close_after_the_stop_reason_is_completed_not_cancelled(provider: str, parts: list[bytes]) -> None:
    for abandoned in (False, True):
        engine = _closed_after(provider, parts, abandoned=abandoned)
        report = engine.published
        assert report["stop_reason"] == "completed", (provider, abandoned, report)
        assert report["attempts"][0]["outcome"] == "completed"
        assert report["attempts"][0]["completion"] == "finish_then_close"
        assert report["cause"] is None


@pytest.mark.parametrize(
    ("provider", "parts"),
    [("anthropic", REPLY[:4]), ("openai-chat", OPENAI_FINISH[:2]), ("gemini", GEMINI[:1])],
)
def test_a_close_before_the_stop_reason_is_still_a_cancellation(provider: str, parts: list[bytes]) -> None:
    engine = _closed_after(provider, parts)
    assert engine.published["stop_reason"] == "cancelled" and engine.published["attempts"][0]["outcome"] == "cancelled"


def test_a_stop_reason_with_an_error_after_it_is_not_a_completion() -> None:
    out = drive([stream([*REPLY[:-2], FINISH, anthropic_error("overloaded_error")])])
    assert out.error is None  # the provider's error, relayed as sent: the SDK raises its own
    assert (out.report["stop_reason"], out.outcomes) == ("truncated", ["provider_error"])


def test_the_whole_reply_through_the_end_frame_still_says_end_frame() -> None:
    out = drive([ok()])
    assert out.report["attempts"][0]["completion"] == "end_frame"


def test_the_replay_bound_is_configured_like_the_other_bounds() -> None:
    from otel_liveness import InvalidPolicy, Policy

    assert Policy().max_replay_body_bytes == 16 * 1024 * 1024
    assert Policy.from_env({"OTEL_LIVENESS_MAX_REPLAY_BODY_BYTES": "0"}).max_replay_body_bytes == 0
    for bad in (-1, True, 1.5):
        with pytest.raises(InvalidPolicy, match="max_replay_body_bytes"):
            Policy(max_replay_body_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidPolicy, match="OTEL_LIVENESS_MAX_REPLAY_BODY_BYTES"):
        Policy.from_env({"OTEL_LIVENESS_MAX_REPLAY_BODY_BYTES": "lots"})
