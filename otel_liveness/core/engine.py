"""The engine: one logical request and its provider attempts, as a sans-I/O state machine.

A driver (``otel_liveness/transport``) turns every I/O outcome into one call here and executes
the :mod:`command <otel_liveness.core.commands>` it gets back -- h11's ``Connection``, with
commands instead of events::

    engine = Engine(policy, facts, now, ...)
    command = engine.start(now)                 # Send
    # ... send;                                 engine.headers(now, status, headers)
    # ... read a chunk;                         engine.received(now, chunk)
    # ... end of body;                          engine.eof(now)
    # ... a read timed out;                     engine.timed_out(now, exc)
    # ... connect/read error;                   engine.io_error(now, IOFailure.READ, exc)
    # ... slept after Sleep;                    engine.slept(now)
    # ... the caller closed / was cancelled;    engine.closed(now) / engine.abandoned(now, exc)

Everything a request's life decides lives here, once: what is held and what is released, which
failures are retried and after how long (:mod:`.retry`; a failure's outcome is
:func:`.retry.attempt_outcome`, a decision's stop reason :func:`_stop`), what shadow mode changes
(one rule, in :meth:`Engine._failed`), when notices fall due, and the ending sequence -- attempt
record, hooks, capture, request end, published report -- which runs exactly once per attempt and
once per request (:meth:`Engine._conclude`).

Holding rule ("one attempt visible"): before the first semantic frame, every byte of a streaming
attempt is held; the read that carries the first semantic (or end) frame releases the held bytes
and itself, in order. From then on each read is released as it arrives, except the bytes from an
in-band error frame onwards, which become a truncation instead. In shadow mode nothing is held and
nothing is enforced: verdicts are only reported. Held heartbeats carry nothing for the caller:
past :data:`HOLD_VERBATIM_BYTES` of held bytes (an SSE body, not content-encoded), the held bytes
are replaced by the frames that are not heartbeats plus the frame in progress, so that what is
released at the first content stays small however long a peer flooded comments or pings.

What a truncation carries: ``released`` (exact), the raw head of the released bytes up to
``Policy.max_prefix_bytes``, and on the Anthropic wires the partial message, decoded from the
framer's journal of the whole reply (bounded by ``Policy.max_partial_bytes``): per-stream memory
follows what a truncation needs, not the reply's length.

Liveness is judged on the wire: bytes count as progress the moment they are read, before any
verdict, so a caller that paused between reads is never mistaken for a dead provider; wire
silence is a verdict only for a read that waited the whole bound (:meth:`Engine.timed_out`,
:meth:`Engine.woke`). The steady lane (:mod:`.lane`) takes the per-read hot path of a live
stream; every input method applies its counts first (:func:`_input`, checked by a test).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import errors as E
from .capture import new_capture
from .clocks import AttemptClock, Notice, RawSilenceExpired, SemanticTimeoutExpired, Terminal, WallBudgetExpired
from .commands import COMPLETE, READ, Command, Complete, Fail, Read, Release, Reraise, Respond, Send, Sleep
from .encoding import Decoder, UnsupportedEncoding, decoder_for
from .events import (
    AttemptEnded,
    AttemptStarted,
    CaptureItem,
    Event,
    Heartbeats,
    Hook,
    RequestEnded,
    RequestStarted,
    RetryScheduled,
    SemanticNotice,
    Verdict,
)
from .framing import Framer, SSEFramer, framer_for
from .lane import Lane, PyLane
from .memory import CadenceMemory, ExhaustedCache
from .outcome import AttemptOutcome, AttemptRecord, Completion, FrameKind, NoticeKind, Phase, RequestReport, StopReason
from .policy import Policy
from .providers import PREFIX, PROFILES, json_error_shaped, json_error_type, profile_for, semconv_provider
from .request import RequestFacts
from .retry import Decision, Failure, FailureKind, GiveUp, Reject, Retry, RetryState, attempt_outcome, decide

__all__ = ["Engine", "IOFailure"]

_HEARTBEAT = FrameKind.HEARTBEAT
_SEMANTIC = FrameKind.SEMANTIC
_END = FrameKind.END
_ERROR = FrameKind.ERROR
_INF = float("inf")
#: A read cut this close before a deadline is judged at the deadline (timers may fire a hair early).
TOLERANCE = 0.005
#: Held bytes (before content) replayed byte for byte; past this, held heartbeats are dropped.
HOLD_VERBATIM_BYTES = 16 * 1024
#: A 2xx JSON body on a streaming request is held up to this size to tell an error object from a
#: reply (an error envelope is a few hundred bytes); a longer body is a reply, released as it comes.
JSON_PROBE_BYTES = 64 * 1024
_SSE = "text/event-stream"
_EVENTSTREAM = "application/vnd.amazon.eventstream"

P = ParamSpec("P")
R = TypeVar("R")


class IOFailure(StrEnum):
    """An I/O error a driver reports (a timeout is :meth:`Engine.timed_out`)."""

    CONNECT = "connect"  # the server never got the request (connect error or timeout, pool timeout)
    READ = "read"  # the connection broke after the request was (perhaps partly) sent


def _input(method: Callable[Concatenate[Engine, P], R]) -> Callable[Concatenate[Engine, P], R]:
    """Mark an input method: it applies the steady lane's counts before anything else, so no
    method can see stale clocks (``tests/test_engine.py`` checks every public method has it),
    and runs under the engine's lock (a caller may close a sync body from another thread while
    the reader's thread feeds it: one input at a time, so every ending still happens once)."""

    @functools.wraps(method)
    def wrapper(self: Engine, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            self._absorb()
            return method(self, *args, **kwargs)

    wrapper.__liveness_input__ = True  # type: ignore[attr-defined]  # a marker the engine's tests check
    return wrapper


class _Attempt:
    """One provider attempt: its clock, scanner, hold buffer and released prefix (engine-private)."""

    def __init__(self, engine: Engine, index: int, now: float) -> None:
        policy = engine.policy
        self.index = index
        self.record = AttemptRecord(index=index, started=now - engine.start_time)
        streaming = engine.facts.streaming
        raw = engine.raw_bound(streaming)
        learned = None
        if policy.raw_idle_adaptive and engine.cadence is not None:
            learned = engine.cadence.learned(engine.facts.host)
        first_byte = policy.first_byte_bound(engine.facts.body_size, raw) if streaming else None
        keepalive = policy.raw_idle_timeout if streaming and not engine.profile.keepalives else None
        self.clock = AttemptClock(
            now,
            raw_idle=raw,
            keepalive_idle=keepalive,
            first_byte=first_byte,
            notice_every=policy.semantic_notice_interval,
            semantic_timeout=policy.semantic_timeout,
            wall_deadline=engine.wall_deadline,
            wall_budget=policy.wall_timeout,
            adaptive=(policy.raw_idle_floor, learned) if policy.raw_idle_adaptive and streaming else None,
        )
        self.record.first_byte_bound = first_byte
        self.framer: Framer = SSEFramer(engine.profile, policy.max_frame_bytes, policy.max_partial_bytes)
        self.streaming = streaming  # judged as a stream (SSE) rather than an opaque body
        self.decoder: Decoder | None = None
        self.held: list[bytes] = []
        self.held_decoded: list[bytes] = []
        self.held_bytes = 0
        self.committed = False  # content was released to the caller
        self.done = False  # an end frame arrived
        self.ended = False
        self.completion: Completion | None = None
        self.prefix: list[bytes] = []  # released bytes (references), up to max_prefix_bytes
        self.prefix_room = policy.max_prefix_bytes
        self.released = 0
        #: The flight recorder's capture (``Policy.capture_dir``; :data:`~.events.CaptureItem`).
        self.capture: list[tuple[float, CaptureItem]] | None = (
            new_capture(policy, engine.profile.name) if policy.capture_dir else None)
        self.inject: dict[str, str] = {}  # headers hooks add to this attempt's request
        self.lane = Lane(engine.profile.semantic_keys, PREFIX, policy.max_frame_bytes, self.prefix)
        self.lane.attach(SSEFramer.scanner_of(self.framer))
        self.error: Failure | None = None  # an in-band error frame arrived
        #: A 2xx JSON body on a streaming request, kept (held, unless in shadow mode) until it is
        #: whole or past JSON_PROBE_BYTES: an error object is an in-band provider error.
        self.probe: list[bytes] | None = None
        self.probe_bytes = 0
        self.shaped: bool | None = None  # the probed body's first key: an error's (True), a reply's (False)
        self.observed: Failure | None = None  # shadow mode: what would have ended the attempt

    def set_framer(self, framer: Framer) -> None:
        """The response's framer (the steady lane admits reads through an SSE framer's scanner)."""
        self.framer = framer
        self.lane.attach(SSEFramer.scanner_of(framer))

    @property
    def retained(self) -> int:
        """Bytes this attempt keeps for the caller: the released prefix, what is held, and the
        framer's frame in progress and journal."""
        return sum(map(len, self.prefix)) + self.held_bytes + self.probe_bytes + self.framer.retained

    def keep(self, data: bytes) -> None:
        """Count ``data`` as released and keep it in the prefix while room lasts."""
        if self.prefix_room > 0 and data:
            kept = data[: self.prefix_room]
            self.prefix.append(kept)
            self.prefix_room -= len(kept)


class Engine:
    """One logical request across its attempts (see the module docstring).

    Inputs are the methods marked :func:`_input`; outputs are the commands they return, the
    hooks they call, and :attr:`published` -- the JSON-serialisable report the caller sees as
    ``response.extensions["liveness"]``, refreshed in place. ``wall_now`` and ``jitter`` are
    the caller's sources of epoch time (for HTTP dates) and backoff jitter in ``[0, 1)``;
    ``body_replayable`` says whether the request body can be sent again when a retry is due
    (drivers keep a streamed body up to ``Policy.max_replay_body_bytes``; past it a retry becomes
    :class:`~.errors.BodyNotReplayable`, never an empty or partial re-send); ``lock`` (re-entrant)
    serialises the inputs when more than one thread may call them.
    """

    def __init__(
        self,
        policy: Policy,
        facts: RequestFacts,
        now: float,
        *,
        provider: str,
        hooks: Iterable[Hook] = (),
        on_hook_error: Callable[[Hook, Exception], None] | None = None,
        wall_now: Callable[[], float] = lambda: 0.0,
        jitter: Callable[[], float] = lambda: 0.0,
        exhausted: ExhaustedCache[Fail] | None = None,
        cadence: CadenceMemory | None = None,
        body_replayable: Callable[[], str | None] | None = None,
        lock: AbstractContextManager[object] | None = None,
    ) -> None:
        #: Held by every input method; re-entrant (``timed_out`` answers through ``io_error``). The
        #: drivers pass a ``threading.RLock``; the default is for single-threaded use.
        self._lock: AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()
        self.policy = policy
        self.facts = facts
        self.profile = profile_for(provider)
        self.hooks = tuple(hooks)
        self.on_hook_error = on_hook_error
        self.hook_errors = 0
        self.wall_now = wall_now
        self.jitter = jitter
        self.exhausted = exhausted
        self.cadence = cadence
        #: Asked when a retry is due: ``None`` when the request body can be sent again (bytes, or
        #: a stream the driver kept whole), else why not (``over_bound``); ``None``: always.
        self.body_replayable = body_replayable
        self.enforce = not policy.shadow
        self.start_time = now
        self.wall_deadline = now + policy.wall_timeout if policy.wall_timeout is not None else None
        self.report = RequestReport(
            provider=provider,
            streaming=facts.streaming,
            wall_budget=policy.wall_timeout,
            shadow=policy.shadow,
            model=facts.model,
            provider_name=semconv_provider(provider, facts.host),
        )
        self.published: dict[str, Any] = {}
        self.retry_state = RetryState()
        self.ended = False
        self.responded = False  # the caller has the response: inputs now concern its body
        self.attempt: _Attempt | None = None
        self._ours = False  # the socket read timeout set on the request is ours, not the caller's
        self._expired: Terminal | None = None  # a deadline a waking read ended at
        self._sleeping_into_wall = False
        self._first: list[bytes] = []
        #: For reads that wait below the HTTP library (the drivers' waking network stream): wake
        #: no later than ``wake_hint`` (the next notice), end no later than ``stop_hint`` (an
        #: absolute terminal deadline) or ``raw_hint`` seconds after the read started (the raw
        #: bound, once the body started). ``inf`` for none; in shadow mode nothing ends a read.
        self.wake_hint = self.stop_hint = self.raw_hint = _INF
        self._publish()

    # -- facts about this request ---------------------------------------------------------------

    def raw_bound(self, streaming: bool) -> float | None:
        """The fixed raw-silence bound for this request's attempts (the learned one's ceiling)."""
        policy = self.policy
        if not streaming:
            return policy.raw_idle_timeout_non_streaming
        return policy.raw_idle_timeout if self.profile.keepalives else policy.raw_idle_timeout_no_keepalive

    @property
    def lane(self) -> PyLane:
        """The current attempt's steady lane: a driver may call ``lane.step(chunk, now)`` on each
        body read and release the chunk as is when it answers True; otherwise it calls
        :meth:`received`. The engine re-arms it after every input."""
        assert self.attempt is not None
        return self.attempt.lane

    def since(self, now: float) -> float:
        return now - self.start_time

    # -- inputs ---------------------------------------------------------------------------------

    @_input
    def start(self, now: float) -> Command:
        """Begin: the first attempt -- or, for an SDK retry of a call this transport already
        exhausted, the same error again at once (no attempt, no telemetry: it was all reported).
        A fresh call (not an SDK retry) ends what the cache remembers for its key first."""
        facts = self.facts
        if self.exhausted is not None and facts.key is not None and self.enforce:
            if not facts.sdk_retry:
                self.exhausted.discard(facts.key)  # a new call: an older call's error is not its answer
            else:
                cached = self.exhausted.get(facts.key, now)
                if cached is not None:
                    self.ended = True
                    return cached
        self._emit(RequestStarted(self.report, facts.method, facts.host, facts.port, facts.path, facts.model,
                                  dict(facts.carrier), facts.body_size))
        return self._send(now)

    @_input
    def headers(self, now: float, status: int, headers: Mapping[str, str]) -> Command:
        """The attempt's response headers arrived (``headers`` keys lower-case)."""
        attempt = self._current()
        attempt.clock.headers(now)
        if attempt.capture is not None:
            attempt.capture.append((now - attempt.clock.started, {"status": status, **{
                k: headers[k] for k in ("content-type", "content-encoding") if k in headers}}))
        record = attempt.record
        record.status = status
        record.request_id = (headers.get("request-id") or headers.get("x-request-id")
                             or headers.get("x-amzn-requestid") or "")[:128] or None
        if status >= 400 or (headers.get("x-should-retry") == "true" and status >= 300):
            failure = Failure(FailureKind.STATUS, attempt.clock.phase, status=status, headers=dict(headers))
            return self._failed(now, failure, status_response=True)
        if 300 <= status < 400:
            self._conclude(now, AttemptOutcome.REDIRECTED, None, StopReason.REDIRECTED, None)
            return self._respond(passthrough=True)
        content_type = headers.get("content-type", "").lower()
        if content_type.startswith(_EVENTSTREAM) and self.profile.framing != "eventstream":
            self.profile = PROFILES["bedrock"]  # the response says what the URL did not
            self.report.provider = self.profile.name
            self.report.provider_name = semconv_provider(self.profile.name, self.facts.host)
        if content_type.startswith(_SSE) or content_type.startswith(_EVENTSTREAM):
            if not self.facts.streaming:
                attempt.streaming = True  # found late: scanned, but keeps the non-streaming raw bound
            attempt.set_framer(framer_for(self.profile, self.policy.max_frame_bytes, content_type,
                                          self.policy.max_partial_bytes))
            encoding = headers.get("content-encoding", "")
            if encoding:
                try:
                    attempt.decoder = decoder_for(encoding)
                except UnsupportedEncoding:
                    attempt.streaming = False  # cannot be read: released as it comes, raw clock only
        elif attempt.streaming:
            # A 2xx that is not a stream (a JSON body, an HTML page): judged as a non-streaming
            # body. A JSON one may be a gateway's error object ({"type":"error",...} or
            # {"error":{...}}): held until whole (up to JSON_PROBE_BYTES) to tell (_probe); any
            # other body is released as it comes.
            attempt.streaming = False
            attempt.clock.raw_idle = self.raw_bound(False)
            attempt.clock.first_byte_bound = None
            if "json" in content_type and headers.get("content-encoding", "identity") == "identity":
                attempt.probe = []
                if self.enforce:
                    self._refresh_hints()
                    return READ
        if attempt.streaming and attempt.decoder is None:
            attempt.framer.hold(True)  # for a replay without held heartbeats (_hold_or_release)
        if not attempt.streaming or not self.enforce:
            if not attempt.streaming:
                attempt.committed = True
            return self._respond()
        self._refresh_hints()
        return READ

    @_input
    def received(self, now: float, chunk: bytes) -> Command | bytes:
        """A chunk of the body was read. Before the response, answers a command (``READ`` while
        holding, :class:`Respond` at the first content, or the failure's command); after it, the
        bytes to release (possibly none) or a terminal command."""
        attempt = self._current()
        clock = attempt.clock
        if attempt.capture is not None:
            attempt.capture.append((now - clock.started, chunk))
        if not self.enforce:
            self._observe_gap(now, attempt)
        clock.received(now, len(chunk))
        try:
            release = self._feed(now, attempt, chunk)
        except Exception as exc:
            if self.enforce:
                if isinstance(exc, (E.MalformedStream, ValueError)):
                    return self._malformed(now, exc)
                raise
            release = self._unjudged(attempt, chunk)  # shadow: never kills
        if attempt.error is not None and self.enforce:
            return self._answer(release, self._failed(now, attempt.error))
        terminal = self._poll(now)
        if terminal is not None:
            return self._answer(release, self._expire(now, terminal))
        if not self.responded:
            if release:
                self._first.append(release)
            if attempt.committed or attempt.done:
                return self._respond()
            self._refresh_hints()
            return READ
        self._arm_lane()
        return release

    @_input
    def eof(self, now: float) -> Command | bytes:
        """The body ended cleanly."""
        attempt = self._current()
        if attempt.capture is not None:
            attempt.capture.append((now - attempt.clock.started, None))
        if not self.enforce:
            self._observe_gap(now, attempt)
        release = b""
        if attempt.streaming:
            try:
                release = self._close_stream(now, attempt)
            except Exception as exc:
                if self.enforce:
                    if isinstance(exc, (E.MalformedStream, ValueError)):
                        return self._malformed(now, exc)
                    raise
                self._unjudged(attempt, b"")  # shadow: the body ended as it came
        if not attempt.streaming:
            if attempt.probe is not None:
                failure, release = self._probed(now, attempt)
                if failure is not None:
                    return self._failed(now, failure)
            attempt.done = True
            attempt.completion = Completion.EOF
        if not attempt.done:
            failure = attempt.error if attempt.error is not None and self.enforce else Failure(
                FailureKind.EOF, attempt.clock.phase, attempt.committed)
            return self._answer(release, self._failed(now, failure))
        self._complete(now)
        return self._answer(release, COMPLETE)

    @_input
    def timed_out(self, now: float, exc: BaseException) -> Command:
        """A read (of headers or body) timed out; ``exc`` is what the HTTP library raised."""
        attempt = self._current()
        expired, self._expired = self._expired, None
        if self.ended:  # as in io_error: the caller ended the request first
            return Reraise(exc)
        if attempt.done:
            self._complete(now)
            return COMPLETE  # after the end frame nothing was lost
        if expired is None and self.enforce and self._ours:
            expired = attempt.clock.poll_terminal(now + TOLERANCE) or self._wire_silence(now, attempt)
        if expired is None:  # the caller's own read timeout (or shadow mode): a broken read
            return self.io_error(now, IOFailure.READ, exc)
        return self._expire(now, expired, exc)

    @_input
    def io_error(self, now: float, kind: IOFailure, exc: BaseException) -> Command:
        """The connection failed (``CONNECT``: before the server got the request)."""
        attempt = self._current()
        if self.ended:
            # The caller closed the body (or abandoned it) and the read under it failed: not the
            # provider's failure, and the request's verdict is already given. As it came.
            return Reraise(exc)
        if attempt.done:
            self._complete(now)
            return COMPLETE
        if not self.enforce:
            self._observe_gap(now, attempt)
        failure_kind = FailureKind.CONNECT_ERROR if kind is IOFailure.CONNECT else FailureKind.READ_ERROR
        if attempt.capture is not None:
            attempt.capture.append((now - attempt.clock.started, failure_kind.value))
        if not attempt.streaming and attempt.probe is not None and not self.responded:
            attempt.committed = True  # a JSON body held to be judged: it breaks as an opaque body does
        failure = Failure(failure_kind, attempt.clock.phase, attempt.committed)
        if not attempt.streaming and (self.responded or attempt.probe is not None):
            # An opaque body (JSON) breaks as it would without the transport.
            self._conclude_failure(now, failure)
            return Reraise(exc)
        return self._failed(now, failure, exc=exc)

    @_input
    def slept(self, now: float) -> Command:
        """The :class:`Sleep` is over: the next attempt, or the wall budget's end."""
        if self._sleeping_into_wall:
            return self._wall_timeout(now, None)
        return self._send(now)

    @_input
    def closed(self, now: float) -> None:
        """The caller closed the body before its end. After the reply's stop reason (its finish
        reason was on the wire and released) that is a completed reply, not a cancellation:
        clients close once they have what they need (litellm's sync Anthropic path closes after
        ``message_delta``, before ``message_stop``, on every call)."""
        attempt = self.attempt
        if attempt is None or self.ended:
            return
        if attempt.done or self._finished(attempt):
            self._complete(now)
        else:
            self._conclude(now, AttemptOutcome.CANCELLED, "closed", StopReason.CANCELLED, "closed")

    @_input
    def abandoned(self, now: float, exc: BaseException) -> None:
        """An exception that is not the engine's answer escaped the driver (the task was cancelled,
        the host raised): the attempt and request end as cancelled, once -- or as completed when
        the reply's stop reason had already arrived (as :meth:`closed`)."""
        attempt = self.attempt
        if self.ended or attempt is None:
            return
        if self.responded and self._finished(attempt):
            self._complete(now)
            return
        self._conclude(now, AttemptOutcome.CANCELLED, type(exc).__name__, StopReason.CANCELLED, "cancelled")

    def _finished(self, attempt: _Attempt) -> bool:
        """The wire carried the reply's stop reason (Anthropic ``message_delta.stop_reason``, an
        OpenAI ``finish_reason``, a Gemini ``finishReason``, the Anthropic events inside Bedrock's
        chunks) and it was released: the reply is whole even if the body is not over. Marks the
        attempt done (completion ``finish_then_close``) when so."""
        if attempt.done:
            return True
        if not (attempt.committed and attempt.streaming and attempt.error is None
                and attempt.framer.facts.stop_reason is not None):
            return False
        attempt.done = True
        attempt.completion = Completion.FINISH_THEN_CLOSE
        return True

    @_input
    def woke(self, now: float, start: float) -> bool:
        """A read that started at ``start`` woke at ``now`` at :attr:`wake_hint`, :attr:`stop_hint`
        or ``start`` + :attr:`raw_hint` with nothing read: deliver the notices due, and answer
        True when a terminal deadline has passed (the read must end; :meth:`timed_out` then
        answers the verdict). Refreshes the hints."""
        attempt = self.attempt
        if attempt is None or attempt.ended:
            return False
        clock = attempt.clock
        while (notice := clock.poll_notice(now)) is not None:
            self._notice(attempt, notice)
        if self.enforce:
            expired = clock.expired(now + TOLERANCE, start)
            if expired is not None:
                self._expired = expired
                return True
        self._refresh_hints()
        return False

    @_input
    def notify(self, now: float) -> None:
        """Deliver the notices due at ``now`` and refresh the hints; never a verdict. For a driver
        that wakes on behalf of a stream it does not read for (an HTTP/2 sibling waiting for the
        shared connection, whose next bytes may already be queued): its deadlines are its own
        reader's to judge, with :meth:`woke`."""
        attempt = self.attempt
        if attempt is None or attempt.ended:
            return
        clock = attempt.clock
        while (notice := clock.poll_notice(now)) is not None:
            self._notice(attempt, notice)
        self._refresh_hints()

    # -- the attempt ----------------------------------------------------------------------------

    def _current(self) -> _Attempt:
        assert self.attempt is not None, "start() first"
        return self.attempt

    def _send(self, now: float) -> Send:
        attempt = _Attempt(self, len(self.report.attempts), now)
        self.attempt = attempt
        self.report.attempts.append(attempt.record)
        self._first = []
        self._expired = None
        self._emit(AttemptStarted(self.report, attempt.index, self.since(now), attempt.inject))
        attempt.clock.request_sent(now)
        self._refresh_hints()
        return Send(self._read_timeout(now, attempt), dict(attempt.inject))

    def _read_timeout(self, now: float, attempt: _Attempt) -> float | None:
        """The socket read timeout for the attempt's request: the largest of our bounds (the
        waking network stream, where the driver has one, ends reads earlier at the phase's own
        bound), never above the caller's own or the wall budget's remainder."""
        self._ours = False
        if not self.enforce:
            return None
        clock = attempt.clock
        bounds = [b for b in (clock.first_byte_bound, clock.raw_idle) if b is not None]
        ours = max(bounds) if bounds else None
        if self.wall_deadline is not None:
            remaining = self.wall_deadline - now
            ours = remaining if ours is None else min(ours, remaining)
        caller = self.facts.read_timeout
        if ours is None:
            return None
        if caller is not None and caller < ours:
            return caller
        self._ours = True
        return max(ours, 0.001)

    def _feed(self, now: float, attempt: _Attempt, chunk: bytes) -> bytes:
        """Consume one read; return the bytes to release now (possibly ``b""``)."""
        if not attempt.streaming:
            if attempt.probe is not None:
                return self._probe(attempt, chunk)
            attempt.committed = True  # an opaque body is released as it arrives
            return self._release(attempt, chunk, chunk)
        data = attempt.decoder.decode(chunk) if attempt.decoder is not None else chunk
        kinds = attempt.framer.feed(data)
        return self._judge(now, attempt, chunk, data, kinds)

    def _judge(self, now: float, attempt: _Attempt, chunk: bytes, data: bytes, kinds: list[FrameKind]) -> bytes:
        """Apply the frames of one read (``data`` is ``chunk`` decoded) and answer what to release."""
        if not kinds:
            return self._hold_or_release(attempt, chunk, data)
        attempt.clock.frames_at(now, kinds)
        heartbeats = kinds.count(_HEARTBEAT)
        if heartbeats:
            self._emit(Heartbeats(self.report, attempt.index, self.since(now), heartbeats, attempt.clock.heartbeats))
        if _END in kinds:
            attempt.done = True
            attempt.completion = Completion.END_FRAME
        if _ERROR in kinds:
            return self._error_frame(now, attempt, chunk, data, kinds)
        if not attempt.committed and (_SEMANTIC in kinds or _END in kinds):
            self._commit(attempt)
            return self._release(attempt, self._take_held(attempt) + chunk, self._take_held_decoded(attempt) + data)
        return self._hold_or_release(attempt, chunk, data)

    def _hold_or_release(self, attempt: _Attempt, chunk: bytes, data: bytes) -> bytes:
        if attempt.committed:
            return self._release(attempt, chunk, data)
        if not self.enforce:
            # Shadow: released as it comes; what enforcement would hold is only counted, so that a
            # hold past the bound is reported as the malformed stream it would have been.
            attempt.held_bytes += len(chunk)
            if attempt.held_bytes > HOLD_VERBATIM_BYTES:
                replay = attempt.framer.replay()
                if replay is not None:
                    attempt.held_bytes = sum(map(len, replay))
            self._check_held(attempt)
            return self._release(attempt, chunk, data)
        attempt.held.append(chunk)
        if attempt.decoder is not None:
            attempt.held_decoded.append(data)
        attempt.held_bytes += len(chunk)
        if attempt.held_bytes > HOLD_VERBATIM_BYTES:
            replay = attempt.framer.replay()  # the held frames that are not heartbeats (None: verbatim)
            if replay is not None:
                attempt.held = replay
                attempt.held_bytes = sum(map(len, replay))
        self._check_held(attempt)
        return b""

    def _check_held(self, attempt: _Attempt) -> None:
        if attempt.held_bytes > self.policy.max_frame_bytes:
            raise E.MalformedStream(
                f"{attempt.held_bytes} bytes arrived before any content (bound {self.policy.max_frame_bytes})"
            )

    def _probe(self, attempt: _Attempt, chunk: bytes) -> bytes:
        """A read of a 2xx JSON body on a streaming request. Kept -- held, unless in shadow mode --
        until its first key tells (:func:`~.providers.json_error_shaped`): a reply is released
        from then on as it comes; an error-shaped body is kept until whole (:meth:`_probed` judges
        it at the end), or past :data:`JSON_PROBE_BYTES` released as the reply it then is."""
        probe = attempt.probe
        assert probe is not None
        probe.append(chunk)
        attempt.probe_bytes += len(chunk)
        shaped = attempt.shaped
        if shaped is None:
            shaped = attempt.shaped = json_error_shaped(b"".join(probe)[:512])
        if shaped is False or attempt.probe_bytes > JSON_PROBE_BYTES:
            attempt.probe = None
            attempt.probe_bytes = 0
            attempt.committed = True
            if self.enforce:
                body = b"".join(probe)
                return self._release(attempt, body, body)
            return self._release(attempt, chunk, chunk)
        if self.enforce:
            return b""
        attempt.committed = True
        return self._release(attempt, chunk, chunk)

    def _probed(self, now: float, attempt: _Attempt) -> tuple[Failure | None, bytes]:
        """The JSON body is whole: an error object is the in-band provider error it is (retried
        before content per the table, typed when exhausted); anything else is the reply, released
        now (in shadow mode it already was). Answers (the failure, the bytes to release)."""
        probe = attempt.probe
        assert probe is not None
        attempt.probe = None
        attempt.probe_bytes = 0
        body = b"".join(probe)
        error_type = json_error_type(body)
        if error_type is not None:
            failure = Failure(FailureKind.ERROR_EVENT, attempt.clock.phase, False, status=attempt.record.status,
                              error_type=error_type)
            self._emit(Verdict(self.report, attempt.index, self.since(now), AttemptOutcome.PROVIDER_ERROR,
                               attempt.clock.phase, False, self.enforce))
            return failure, b""
        if not self.enforce:
            return None, b""
        attempt.committed = True
        return None, self._release(attempt, body, body)

    def _unjudged(self, attempt: _Attempt, chunk: bytes) -> bytes:
        """Shadow mode: the body could not be judged (a frame over the bound, a corrupt frame, an
        encoding that fails, a fault of the judging itself). Enforcement would have ended the
        request as malformed: that is recorded; the body goes on to the caller as it comes,
        ``chunk`` included, unjudged (raw clock only) -- shadow never changes what the caller
        receives."""
        if attempt.observed is None:
            attempt.observed = Failure(FailureKind.MALFORMED, attempt.clock.phase, attempt.committed)
        attempt.streaming = False
        attempt.decoder = None
        attempt.committed = True
        return self._release(attempt, chunk, chunk)

    def _take_held(self, attempt: _Attempt) -> bytes:
        held = b"".join(attempt.held)
        attempt.held.clear()
        attempt.held_bytes = 0
        return held

    def _take_held_decoded(self, attempt: _Attempt) -> bytes:
        if attempt.decoder is None:
            return b""
        held = b"".join(attempt.held_decoded)
        attempt.held_decoded.clear()
        return held

    def _commit(self, attempt: _Attempt) -> None:
        attempt.committed = True
        attempt.clock.released()
        attempt.framer.hold(False)

    def _release(self, attempt: _Attempt, data: bytes, decoded: bytes) -> bytes:
        """``data`` goes to the caller; the prefix keeps ``decoded`` (the same bytes unless the
        response is content-encoded)."""
        attempt.released += len(data)
        attempt.keep(decoded if attempt.decoder is not None else data)
        return data

    def _error_frame(self, now: float, attempt: _Attempt, chunk: bytes, data: bytes, kinds: list[FrameKind]) -> bytes:
        """An in-band error frame: content before it (in earlier reads or this one) is released;
        the error frame and anything after it is not (unless in shadow mode). An encoded read
        cannot be split, so none of it is released."""
        first_error = kinds.index(_ERROR)
        content_first = _SEMANTIC in kinds[:first_error] or _END in kinds[:first_error]
        splittable = attempt.decoder is None
        committed = attempt.committed or (content_first and splittable)
        failure = Failure(FailureKind.ERROR_EVENT, attempt.clock.phase, committed, error_type=attempt.framer.facts.error_type)
        if self.enforce:
            attempt.error = failure
        elif attempt.observed is None:
            attempt.observed = failure
        self._emit(Verdict(self.report, attempt.index, self.since(now), AttemptOutcome.PROVIDER_ERROR,
                           attempt.clock.phase, committed, self.enforce))
        if not self.enforce:
            if content_first and not attempt.committed:
                self._commit(attempt)
            return self._release(attempt, chunk, data)
        if not committed:
            return b""  # pre-content: the whole attempt is discarded and retried
        if not splittable:
            attempt.framer.retract()  # nothing of this read was released: nor is its content partial
            return b""
        head = chunk[: attempt.framer.error_offset(chunk)]
        if not attempt.committed:
            self._commit(attempt)
            head = self._take_held(attempt) + head
        return self._release(attempt, head, head)

    def _close_stream(self, now: float, attempt: _Attempt) -> bytes:
        """The end of a scanned body: the last frames, and whether the reply is whole. A final
        frame whose lines are complete but lack the closing blank line is dispatched (as the SDKs
        read it); a cut line is not."""
        data = b""
        if attempt.decoder is not None:
            data = attempt.decoder.flush()
        kinds = attempt.framer.feed(data) if data else []
        kinds += attempt.framer.close()
        release = b""
        if kinds:
            release = self._judge(now, attempt, b"", data, kinds)
        if attempt.error is not None:
            return release
        if not attempt.done and attempt.framer.facts.stop_reason is not None and attempt.committed:
            attempt.done = True
            attempt.completion = Completion.FINISH_THEN_EOF
        if not attempt.done and self.profile.eof_is_end:
            attempt.done = True
            attempt.completion = Completion.EOF
        if attempt.done and not attempt.committed:
            self._commit(attempt)
            release = self._release(attempt, self._take_held(attempt), self._take_held_decoded(attempt))
        return release

    # -- clocks ---------------------------------------------------------------------------------

    def _absorb(self) -> None:
        """Apply the steady lane's reads to the clocks, the released count and the prefix room."""
        attempt = self.attempt
        if attempt is not None:
            lane = attempt.lane
            if lane.reads:
                reads, nbytes, last, max_gap, room, frames = lane.take()
                attempt.clock.semantic_reads(reads, nbytes, last, max_gap, frames)
                attempt.released += nbytes
                attempt.prefix_room = room

    def _arm_lane(self) -> None:
        """Re-arm the lane for the reads that follow: open while the stream is live after content,
        the previous read was semantic, the body is not encoded and no recorder is capturing;
        closed otherwise. (A frame in progress is the scanner's: the lane reads through it.)"""
        attempt = self._current()
        lane = attempt.lane
        if (
            attempt.committed
            and attempt.streaming
            and attempt.decoder is None
            and not attempt.done
            and attempt.error is None
            and attempt.observed is None
            and attempt.capture is None
            and not attempt.ended
            and isinstance(attempt.framer, SSEFramer)
        ):
            horizon, step, wall = attempt.clock.steady()
            lane.open(horizon, step, wall, attempt.clock.last_raw, attempt.prefix_room)
        else:
            lane.close()
        self._refresh_hints()

    def _refresh_hints(self) -> None:
        attempt = self.attempt
        if attempt is None or attempt.ended:
            self.wake_hint = self.stop_hint = self.raw_hint = _INF
            return
        clock = attempt.clock
        self.wake_hint = clock.next_notice_at()
        if not self.enforce or clock.terminal is not None:
            self.stop_hint = self.raw_hint = _INF
            return
        stop = clock.timed_deadline()
        raw = _INF
        if not clock.body_started and clock.first_byte_bound is not None:
            stop = min(stop, clock.sent_at + clock.first_byte_bound)
        else:
            bound = clock.raw_bound()
            raw = _INF if bound is None else bound
        self.stop_hint = stop
        self.raw_hint = raw

    def _poll(self, now: float) -> Terminal | None:
        """Deliver the notices due at ``now``; answer a time-based terminal verdict if one is due
        (in shadow mode, observed once and not answered)."""
        attempt = self._current()
        clock = attempt.clock
        while True:
            item = clock.poll(now)
            if isinstance(item, Notice):
                self._notice(attempt, item)
                continue
            if isinstance(item, (SemanticTimeoutExpired, WallBudgetExpired)):
                if self.enforce:
                    return item
                self._observe(now, attempt, item)
            return None

    def _wire_silence(self, now: float, attempt: _Attempt) -> RawSilenceExpired:
        """A read that waited the whole socket timeout we set got nothing."""
        clock = attempt.clock
        first_byte = not clock.body_started and clock.first_byte_bound is not None
        bound = (clock.first_byte_bound if first_byte else clock.raw_bound()) or 0.0
        verdict = RawSilenceExpired(now, bound, clock.phase, attempt.committed, first_byte)
        clock.terminal = verdict
        return verdict

    def _notice(self, attempt: _Attempt, item: Notice) -> None:
        attempt.record.notices += 1
        if item.kind is NoticeKind.PREFILL:
            attempt.record.prefill_notices += 1
        self._emit(
            SemanticNotice(self.report, attempt.index, self.since(item.at), item.number, item.semantic_idle,
                           item.raw_idle, item.heartbeats_since_semantic, item.phase, item.kind)
        )

    def _observe(self, now: float, attempt: _Attempt, verdict: Terminal) -> None:
        """Shadow mode: report a verdict that would have ended the attempt, once."""
        if attempt.observed is not None:
            return
        attempt.observed = Failure(_failure_kind(verdict), verdict.phase, attempt.committed)
        self._emit(Verdict(self.report, attempt.index, self.since(min(now, verdict.at)), _verdict_outcome(verdict),
                           verdict.phase, attempt.committed, False))

    def _observe_gap(self, now: float, attempt: _Attempt) -> None:
        """Shadow mode: bytes arrive after a silence longer than the bound (the first-byte one, or
        the raw one -- learned, when adaptive): report the verdict the bound would have given.
        Judged when the bytes arrive, so a paused reader can overstate the silence."""
        clock = attempt.clock
        if attempt.observed is not None or clock.phase is Phase.DONE:
            return
        if not clock.body_started and clock.first_byte_bound is not None:
            deadline, bound, first = clock.sent_at + clock.first_byte_bound, clock.first_byte_bound, True
        else:
            raw = clock.raw_bound()
            if raw is None:
                return
            deadline, bound, first = clock.last_raw + raw, raw, False
        if now >= deadline:
            self._poll(deadline)  # a wall or semantic deadline before it is what enforcement would have met first
            self._observe(now, attempt, RawSilenceExpired(deadline, bound, clock.phase, attempt.committed, first))

    # -- decisions ------------------------------------------------------------------------------

    def _expire(self, now: float, verdict: Terminal, exc: BaseException | None = None) -> Command:
        """A clock ran out (enforced)."""
        attempt = self._current()
        self._emit(Verdict(self.report, attempt.index, self.since(now), _verdict_outcome(verdict),
                           verdict.phase, attempt.committed, True))
        if isinstance(verdict, WallBudgetExpired):
            return self._wall_timeout(now, attempt)
        return self._failed(now, Failure(_failure_kind(verdict), verdict.phase, attempt.committed), exc=exc)

    def _failed(self, now: float, failure: Failure, *, status_response: bool = False,
                exc: BaseException | None = None) -> Command:
        """The one place a failure becomes a command. Shadow mode, as one rule: a failure changes
        nothing the caller sees -- everything passes through as it came, and what would have
        happened is reported; otherwise the retry policy decides."""
        attempt = self._current()
        if not self.enforce:
            if attempt.observed is None:
                attempt.observed = failure
            first = attempt.observed  # the first failure is what enforcement would have acted on
            if status_response:
                self._conclude_failure(now, first)
                return self._respond(passthrough=True)
            if exc is not None:
                self._conclude_failure(now, first)
                return Reraise(exc)
            self._conclude_failure(now, first)  # the body ended as it came (EOF): reported as observed
            return COMPLETE
        decision = decide(self.retry_state, failure, self.policy, wall_now=self.wall_now(), jitter=self.jitter())
        problem = None
        if isinstance(decision, Retry) and self.body_replayable is not None:
            problem = self.body_replayable()
            if problem is not None:
                decision = GiveUp(decision.reason, decision.rate_limited)
        self.retry_state = self.retry_state.record(failure, decision)
        self.report.cause = failure.cause
        if isinstance(decision, Retry):
            return self._retry(now, attempt, failure, decision)
        if problem is not None:
            return self._not_replayable(now, failure, problem)
        if status_response:
            mark = isinstance(decision, GiveUp) and self.policy.mark_exhausted_responses
            self._conclude(now, attempt_outcome(failure), _error_type(failure), _stop(decision), failure.cause)
            return self._respond(passthrough=True, replace=(("x-should-retry", "false"),) if mark else ())
        if not isinstance(decision, (GiveUp, Reject)):  # Truncate: content was released
            return self._truncation(now, attempt, failure)
        self._conclude(now, attempt_outcome(failure), _error_type(failure), _stop(decision), failure.cause)
        attempts = len(self.report.attempts)
        rate_limited = isinstance(decision, GiveUp) and decision.rate_limited
        verb = "failed" if isinstance(decision, GiveUp) else "rejected the request"
        return self._remember(now, Fail(
            E.RateLimited if rate_limited else E.ProviderError,
            failure.kind.value,
            (f"provider {verb} after {attempts} attempt{'s' if attempts != 1 else ''}; last cause: {failure.cause}",),
            {"attempts": attempts, "last_cause": failure.cause, "status": failure.status,
             "error_type": failure.error_type},
        ))

    def _not_replayable(self, now: float, failure: Failure, problem: str) -> Fail:
        """A retry was due but the body cannot be sent again: the request ends here, typed (a
        status response too: the caller gets the error, not the response of a request that could
        not be retried)."""
        self._conclude(now, attempt_outcome(failure), _error_type(failure), StopReason.NOT_REPLAYABLE, failure.cause)
        attempts = len(self.report.attempts)
        limit = self.policy.max_replay_body_bytes
        return Fail(
            E.BodyNotReplayable,
            failure.kind.value,
            (f"provider failed after {attempts} attempt{'s' if attempts != 1 else ''} (last cause: {failure.cause}) "
             f"and the request body cannot be sent again: a stream longer than the {limit}-byte replay bound",),
            {"attempts": attempts, "last_cause": failure.cause, "status": failure.status,
             "error_type": failure.error_type, "reason": problem, "limit": limit},
        )

    def _retry(self, now: float, attempt: _Attempt, failure: Failure, decision: Retry) -> Command:
        record = attempt.record
        record.retry_delay = decision.delay
        record.retry_reason = decision.reason
        record.delay_source = decision.source
        self._emit(RetryScheduled(self.report, attempt.index, self.since(now), decision.delay, decision.reason,
                                  decision.source, decision.rate_limited))
        self._conclude(now, attempt_outcome(failure), _error_type(failure), None, None)
        delay = decision.delay
        if self.wall_deadline is not None and now + delay >= self.wall_deadline:
            self._sleeping_into_wall = True
            delay = max(self.wall_deadline - now, 0.0)
        return Sleep(delay)

    def _truncation(self, now: float, attempt: _Attempt, failure: Failure) -> Fail:
        cause = failure.cause
        kind = cause.split(":")[0]
        self._conclude(now, AttemptOutcome.TRUNCATED, _error_type(failure), StopReason.TRUNCATED, cause)
        prefix = b"".join(attempt.prefix)
        partial = attempt.framer.partial(prefix)
        return Fail(
            E.StreamTruncated,
            kind,
            (f"stream truncated after {attempt.released} bytes of content; cause: {cause}",),
            {"prefix": prefix, "cause": cause, "partial": partial, "attempts": len(self.report.attempts),
             "error_type": failure.error_type, "released": attempt.released},
        )

    def _wall_timeout(self, now: float, attempt: _Attempt | None) -> Fail:
        budget = self.policy.wall_timeout or 0.0
        committed = bool(attempt is not None and attempt.committed)
        if attempt is not None:
            self._conclude(now, AttemptOutcome.WALL_BUDGET, "wall_budget", StopReason.WALL_BUDGET, "wall_budget")
        else:
            self._end(now, StopReason.WALL_BUDGET, "wall_budget")
        return self._remember(now, Fail(
            E.WallTimeout,
            "wall_budget",
            (f"wall-clock budget of {budget:g}s expired" + (" after content was released" if committed
                                                               else " before any content"),),
            {"budget": budget, "attempts": len(self.report.attempts), "committed": committed,
             "prefix": b"".join(attempt.prefix) if attempt is not None else b""},
        ))

    def _malformed(self, now: float, exc: Exception) -> Fail:
        self._conclude(now, AttemptOutcome.MALFORMED, "malformed", StopReason.MALFORMED, "malformed")
        if isinstance(exc, E.FrameTooLarge):
            return self._remember(now, Fail(E.FrameTooLarge, "malformed", (exc.size, exc.limit), {"what": exc.what}))
        if isinstance(exc, E.CorruptFrame):
            return self._remember(now, Fail(E.CorruptFrame, "malformed", (exc.what, exc.detail), {
                "offset": exc.offset, "expected": exc.expected, "actual": exc.actual}))
        message = str(exc) if isinstance(exc, E.MalformedStream) else f"the body could not be decoded: {exc}"
        return self._remember(now, Fail(type(exc) if isinstance(exc, E.MalformedStream) else E.MalformedStream,
                                   "malformed", (message,), {}))

    def _remember(self, now: float, fail: Fail) -> Fail:
        """An error the request ended with: an SDK retry of the same call gets it again (never
        in shadow mode, where nothing the transport does may change what the caller receives)."""
        if self.exhausted is not None and self.facts.key is not None and self.enforce:
            self.exhausted.put(self.facts.key, fail, now)
        return fail

    def _answer(self, release: bytes, command: Command) -> Command:
        """``command`` after ``release``: in the body, a :class:`Release` when there are bytes;
        before the response, the bytes join its first bytes, and a failure or the end after
        released content becomes the response, whose body then ends that way."""
        if not self.responded:
            if release:
                self._first.append(release)
            if isinstance(command, Complete) or (isinstance(command, Fail) and self._first):
                return self._respond(then=command)
            return command
        if release and isinstance(command, (Fail, Reraise, Complete)):
            return Release(release, command)
        return command

    def _respond(self, *, then: Read | Complete | Fail = READ, passthrough: bool = False,
                 replace: tuple[tuple[str, str], ...] = ()) -> Respond:
        self.responded = True
        first = b"".join(self._first)
        self._first = []
        self._publish()
        if not passthrough and self.attempt is not None:
            self._arm_lane()
        return Respond(first, then, passthrough, replace)

    # -- the ending sequence --------------------------------------------------------------------

    def _complete(self, now: float) -> None:
        self._conclude(now, AttemptOutcome.COMPLETED, None, StopReason.COMPLETED, None)

    def _conclude_failure(self, now: float, failure: Failure) -> None:
        """End the attempt and the request with ``failure`` as observed (not retried)."""
        self._conclude(now, attempt_outcome(failure), _error_type(failure), _observed_stop(failure), failure.cause)

    def _conclude(self, now: float, outcome: AttemptOutcome, error_type: str | None,
                  stop: StopReason | None, cause: str | None) -> None:
        """End the current attempt (exactly once) and, when ``stop`` is given, the request. In
        shadow mode an attempt that completed on the wire but would have failed is reported with
        the failure it would have had."""
        attempt = self._current()
        if not attempt.ended:
            observed = attempt.observed
            if outcome is AttemptOutcome.COMPLETED and observed is not None and not self.enforce:
                outcome, error_type = attempt_outcome(observed), _error_type(observed)
                stop, cause = _observed_stop(observed), observed.cause
            attempt.ended = True
            attempt.lane.close()
            capture = attempt.capture
            if capture is not None and (not capture or not (capture[-1][1] is None or isinstance(capture[-1][1], str))):
                capture.append((now - attempt.clock.started, "end"))
            self._finish_record(now, attempt, outcome, error_type)
            self._emit(AttemptEnded(self.report, attempt.record, attempt.capture))
            self._refresh_hints()
        if stop is not None:
            self._end(now, stop, cause)

    def _finish_record(self, now: float, attempt: _Attempt, outcome: AttemptOutcome, error_type: str | None) -> None:
        clock = attempt.clock
        record = attempt.record
        raw_bound = clock.raw_bound()
        max_heartbeat_gap = clock.max_heartbeat_gap
        if clock.adaptive and clock.heartbeat_gaps and self.cadence is not None:
            self.cadence.remember(self.facts.host, max_heartbeat_gap)
        record.raw_idle = now - clock.last_raw  # before finished(), which counts the end as raw progress
        clock.finished(now)
        record.outcome = outcome
        record.error_type = error_type
        record.phase = Phase.DONE if attempt.done else clock.phase
        record.duration = now - clock.started
        record.time_to_first_byte = clock.first_byte
        record.time_to_first_semantic = clock.first_semantic
        record.semantic_idle = 0.0 if attempt.done else now - clock.last_semantic
        record.max_raw_gap = clock.max_raw_gap
        record.max_semantic_gap = clock.max_semantic_gap
        record.max_heartbeat_gap = max_heartbeat_gap
        record.raw_bound = raw_bound
        record.heartbeats = clock.heartbeats
        record.frames = clock.frames
        record.bytes_received = clock.bytes
        record.completion = attempt.completion if outcome is AttemptOutcome.COMPLETED else None
        record.committed = attempt.committed
        facts = attempt.framer.facts
        record.response_id = facts.response_id
        record.usage = dict(facts.usage)
        record.stop_detail = facts.stop_reason
        if facts.model and not self.report.model:
            self.report.model = facts.model
        if facts.stop_reason:
            self.report.stop_detail = facts.stop_reason

    def _end(self, now: float, stop: StopReason, cause: str | None) -> None:
        """The request is over (exactly once; later calls are ignored)."""
        if self.ended:
            return
        self.ended = True
        report = self.report
        report.stop_reason = stop
        if cause is not None:
            report.cause = cause
        elif stop is StopReason.COMPLETED or stop is StopReason.REDIRECTED:
            report.cause = None
        report.duration = self.since(now)
        self._publish()
        self._emit(RequestEnded(report, stop))

    def _publish(self) -> None:
        """Refresh :attr:`published` in place (the caller holds a reference to it)."""
        published = self.published
        published.clear()
        published.update(self.report.to_dict())

    def _emit(self, event: Event) -> None:
        for hook in self.hooks:
            try:
                hook(event)
            except Exception as exc:  # noqa: BLE001 - a hook must never change what the application receives
                self.hook_errors += 1
                if self.on_hook_error is not None:
                    self.on_hook_error(hook, exc)


def _verdict_outcome(verdict: Terminal) -> AttemptOutcome:
    """The outcome a terminal verdict names (the failure table's, before any commitment)."""
    return attempt_outcome(Failure(_failure_kind(verdict)))


def _failure_kind(verdict: Terminal) -> FailureKind:
    if isinstance(verdict, RawSilenceExpired):
        return FailureKind.FIRST_BYTE_TIMEOUT if verdict.first_byte else FailureKind.RAW_SILENCE
    if isinstance(verdict, SemanticTimeoutExpired):
        return FailureKind.SEMANTIC_TIMEOUT
    return FailureKind.WALL_BUDGET


def _observed_stop(failure: Failure) -> StopReason:
    """Shadow mode: why the request would have stopped, had ``failure`` been enforced without retries."""
    if failure.kind is FailureKind.WALL_BUDGET:
        return StopReason.WALL_BUDGET
    if failure.kind is FailureKind.MALFORMED:
        return StopReason.MALFORMED
    if failure.committed:
        return StopReason.TRUNCATED
    return StopReason.REJECTED if attempt_outcome(failure) is AttemptOutcome.REJECTED else StopReason.EXHAUSTED


def _stop(decision: Decision) -> StopReason:
    """Why a request whose last failure got ``decision`` (not a retry) stopped."""
    if isinstance(decision, GiveUp):
        return StopReason.RATE_LIMITED if decision.rate_limited else StopReason.EXHAUSTED
    if isinstance(decision, Reject):
        return StopReason.REJECTED
    return StopReason.TRUNCATED


def _error_type(failure: Failure) -> str:
    """The ``error.type`` value: the in-band error type, the status code, or the failure kind."""
    if failure.kind is FailureKind.STATUS:
        return str(failure.status)
    if failure.kind is FailureKind.ERROR_EVENT:
        return failure.error_type or "error_event"
    return failure.kind.value
