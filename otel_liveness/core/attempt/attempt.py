"""One provider attempt: what it holds, what it released, and how it reads its body.

The engine (:mod:`..request.engine`) decides; an :class:`Attempt` keeps the books of one attempt
under those decisions -- the clock, the framer, what it holds back (:mod:`.hold`), what it
released (:mod:`.ledger`), the flight recorder's capture -- and answers, for each read, which
bytes go to the caller now.

Holding rule ("one attempt visible"): before the first semantic frame, every byte of a streaming
attempt is held; the read that carries the first semantic (or end) frame releases the held bytes
and itself, in order (:meth:`Attempt.commit`, :meth:`Attempt.take_held`). From then on each read is
released as it arrives (:meth:`Attempt.hold_or_release`); an in-band error frame before content is
held with the rest, and after content released as the provider's answer
(:meth:`Attempt.error_frame`). Held heartbeats carry nothing for the caller: past
:data:`HOLD_VERBATIM_BYTES` of held bytes (an SSE body, not content-encoded), the held bytes are
replaced by the frames that are not heartbeats plus the frame in progress, so that what is released
at the first content stays small however long a peer flooded comments or pings.

A 2xx JSON body on a streaming request is *probed* (:meth:`Attempt.probe_read`): held until its
first key tells an error object from a reply.

Shadow mode is the engine's rule where a failure is decided (``Engine._failed``, ``_observe``: a
clock's verdict, a body it cannot judge is kept as the reporter's ``observed``, reported, never
acted on; no socket timeout is set, no terminal deadline ends a read) and, in the attempt, one
rule: it retries nothing, so it keeps nothing back (``keeps`` False: its hold and probe only
count and copy, :mod:`.hold`) -- the response goes to the caller at its headers, every read as it
comes, a hold past the bound is reported as the malformed stream it would have been, and an
in-band error frame is observed rather than acted on (:meth:`Attempt.error_frame`).

What a truncation carries: the ledger's ``released`` (exact) and ``prefix`` (the raw head of the
released bytes up to ``Policy.max_prefix_bytes``), and on the Anthropic wires the partial
message, decoded from the framer's journal of the whole reply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .. import errors as E
from ..capture.timing import new_capture
from ..events import CaptureItem, Event
from ..outcome import AttemptOutcome, AttemptRecord, Completion, FrameKind, Phase, RequestReport
from ..policy import Policy
from ..wire.encoding import Decoder, UnsupportedEncoding, decoder_for
from ..wire.framing import Framer, SSEFramer, framer_for
from ..wire.lane import LaneLike
from ..wire.providers import ProviderProfile, json_error_type, request_id
from .clocks import AttemptClock, Notice, SemanticTimeoutExpired, Terminal, WallBudgetExpired
from .hold import Hold, Probe
from .ledger import Ledger
from .modes import BODY_MODES, BodyMode
from .retry import Failure, FailureKind

__all__ = ["HOLD_VERBATIM_BYTES", "JSON_PROBE_BYTES", "Attempt", "Reports"]

_HEARTBEAT = FrameKind.HEARTBEAT
_SEMANTIC = FrameKind.SEMANTIC
_END = FrameKind.END
_ERROR = FrameKind.ERROR
_SSE = "text/event-stream"
_EVENTSTREAM = "application/vnd.amazon.eventstream"
_SCANNED, _PROBING, _OPAQUE, _UNJUDGED = BodyMode.SCANNED, BodyMode.PROBING, BodyMode.OPAQUE, BodyMode.UNJUDGED
#: Held bytes (before content) replayed byte for byte; past this, held heartbeats are dropped.
HOLD_VERBATIM_BYTES = 16 * 1024
#: A 2xx JSON body on a streaming request is held up to this size to tell an error object from a
#: reply (an error envelope is a few hundred bytes); a longer body is a reply, released as it comes.
JSON_PROBE_BYTES = 64 * 1024


class Reports(Protocol):
    """What an attempt reports through: the request's ``Reporter`` (``request/report.py``)."""

    report: RequestReport
    start_time: float
    observed: Failure | None

    def emit(self, event: Event) -> None: ...

    def observe(self, failure: Failure) -> Failure: ...

    def heartbeats(self, attempt: int, at: float, count: int, total: int) -> None: ...

    def notice(self, record: AttemptRecord, item: Notice) -> None: ...

    def verdict(self, at: float, attempt: int, outcome: AttemptOutcome, phase: Phase, committed: bool) -> None: ...


class Attempt:
    """One provider attempt's books (engine-private: the engine is its only writer).

    ``keeps`` False in shadow mode: nothing is kept back (see the module docstring). ``lane_class``
    the steady lane's class the engine uses (:data:`.lane.Lane`, the C one when built): the
    attempt's lane keeps its references in the ledger's prefix. ``reporter`` is the request's (:class:`Reports`): a read's
    in-band error frame is reported through it as it is found (its verdict), and so are the
    attempt's notices, a probed error object's verdict, its retry and a read's heartbeats.
    """

    __slots__ = (
        "capture",
        "clock",
        "decoder",
        "error",
        "framer",
        "hold",
        "lane",
        "ledger",
        "mode",
        "probe",
        "record",
        "reporter",
    )

    def __init__(self, index: int, started: float, clock: AttemptClock, policy: Policy, profile: ProviderProfile,
                 *, streaming: bool, lane_class: Callable[..., Any],
                 reporter: Reports, keeps: bool = True) -> None:
        # The request's reporter (no reference back to the engine, so that an engine and its
        # attempts are freed by reference counting, without a cycle).
        self.reporter = reporter
        self.record = AttemptRecord(index=index, started=started)
        self.record.first_byte_bound = clock.first_byte_bound
        self.clock = clock
        self.framer: Framer = SSEFramer(profile, policy.max_frame_bytes, policy.max_partial_bytes)
        #: How the body is read (:class:`~.modes.BodyMode`; moved by :meth:`become` only).
        self.mode = _SCANNED if streaming else _OPAQUE
        self.decoder: Decoder | None = None
        self.hold = Hold(policy.max_frame_bytes, keeps=keeps)  # before content: held
        #: What was released (:class:`~.ledger.Ledger`: its state moved by :meth:`commit` and :meth:`finish`).
        self.ledger = Ledger(policy.max_prefix_bytes)
        #: The flight recorder's capture (``Policy.capture_dir``; :data:`~.events.CaptureItem`), or the
        #: timing reduction the policy canary judges (``Policy.candidates``).
        self.capture: list[tuple[float, CaptureItem]] | None = (
            new_capture(policy, profile.name) if policy.capture_dir or policy.candidates else None)
        self.lane: LaneLike = lane_class(self.ledger.prefix)
        self.attach_lane()
        self.error: Failure | None = None  # an in-band error frame arrived
        #: A 2xx JSON body on a streaming request, kept until it is
        #: whole or past JSON_PROBE_BYTES: an error object is an in-band provider error.
        self.probe = Probe(keeps=keeps)

    # -- what the attempt is --------------------------------------------------------------------

    @property
    def index(self) -> int:
        """The attempt's number in its request, from 0 (its record's)."""
        return self.record.index

    @property
    def scanned(self) -> bool:
        """The body is judged as a stream (:attr:`mode` SCANNED) rather than as an opaque body."""
        return self.mode is _SCANNED

    @property
    def ended(self) -> bool:
        """The attempt is over: its record has its outcome (``Reporter.end_attempt``)."""
        return self.record.outcome is not None

    @property
    def committed(self) -> bool:
        """Content was released to the caller: a failure is a truncation (:attr:`ledger`)."""
        return self.ledger.committed

    @property
    def done(self) -> bool:
        """The reply is whole: an end frame arrived, or the reply's stop reason at a close or the
        body's end, or the end of a body whose end is the reply's (:attr:`ledger`)."""
        return self.ledger.done

    def become(self, mode: BodyMode) -> None:
        """Read the body as ``mode`` from now on: a move of :data:`~.modes.BODY_MODES`, else
        :class:`~.errors.IllegalInput`. The only writer of :attr:`mode` after ``__init__``."""
        if mode is not self.mode:
            if mode not in BODY_MODES[self.mode]:
                raise E.IllegalInput(f"(a body mode move to {mode.value})", self.mode.value)
            self.mode = mode

    def set_framer(self, framer: Framer) -> None:
        """The response's framer (the steady lane admits reads through an SSE framer's scanner)."""
        self.framer = framer
        self.attach_lane()

    def attach_lane(self) -> None:
        """The steady lane reads through the framer's scanner (an SSE framer's), which admits
        heartbeats inside runs of content: :meth:`absorb_lane` counts and announces them."""
        scanner = SSEFramer.scanner_of(self.framer)
        if scanner is not None:
            scanner.beating = True
        self.lane.attach(scanner)

    @property
    def retained(self) -> int:
        """Bytes this attempt keeps for the caller: the released prefix, what is held, and the
        framer's frame in progress and journal."""
        return self.ledger.retained + self.hold.size + self.probe.size + self.framer.retained

    def finished_reply(self) -> bool:
        """The wire carried the reply's stop reason (Anthropic ``message_delta.stop_reason``, an
        OpenAI ``finish_reason``, a Gemini ``finishReason``, the Anthropic events inside Bedrock's
        chunks) and it was released: the reply is whole even if the body is not over. Marks the
        attempt done (completion ``finish_then_close``) when so."""
        if self.done:
            return True
        if not (self.committed and self.scanned and self.error is None
                and self.framer.facts.stop_reason is not None):
            return False
        self.finish(Completion.FINISH_THEN_CLOSE)
        return True

    def finish(self, completion: Completion) -> None:
        """The reply is whole (``completion`` says how that was known): UNRELEASED -> WHOLE,
        COMMITTED -> DONE."""
        self.ledger.finish(completion)

    def absorb_lane(self) -> None:
        """The one hand-over of the steady lane's counts: the reads the driver's body loop
        stepped through the lane since the last call -- the lane's
        :meth:`~.lane.LaneLike.take` and :meth:`~.lane.LaneLike.take_beats` -- applied to the clock
        (:meth:`~.clocks.AttemptClock.steady_reads`), the released count and the prefix room, and
        their heartbeats announced, one :class:`~.events.Heartbeats` a read with its time, as the
        general path announces a read's (:meth:`_judge`). The engine calls it first thing in every
        input (``Engine._settle``)."""
        lane = self.lane
        if lane.reads:
            _, nbytes, last, max_gap, room, frames, semantic, max_semantic_gap = lane.take()
            beats = lane.take_beats() if lane.heartbeats else ()
            clock = self.clock
            total = clock.heartbeats
            clock.steady_reads(nbytes, last, max_gap, frames, beats, lane.since, semantic, max_semantic_gap)
            self.ledger.steady(nbytes, room)
            for now, count in beats:
                total += count
                self._heartbeats(now, count, total)

    def _heartbeats(self, now: float, count: int, total: int) -> None:
        """``count`` heartbeats of a read at ``now`` (``total`` of the attempt's so far): announced."""
        reporter = self.reporter
        reporter.heartbeats(self.index, now - reporter.start_time, count, total)

    def arm_lane(self) -> None:
        """Open the steady lane for the reads that follow while the attempt is a live stream
        after content, not encoded, with no in-band error or shadow observation pending and no
        recorder capturing, framed by an SSE framer (the lane reads through its scanner); close
        it otherwise."""
        if (
            self.committed
            and self.scanned
            and self.decoder is None
            and not self.done
            and self.error is None
            and self.reporter.observed is None
            and self.capture is None
            and not self.ended
            and isinstance(self.framer, SSEFramer)
        ):
            clock = self.clock
            horizon, step, wall = clock.steady()
            self.lane.open(horizon, step, wall, clock.last_raw, self.ledger.room, clock.heartbeats_since_semantic)
        else:
            self.lane.close()

    def capture_item(self, now: float, item: CaptureItem) -> None:
        """Record ``item`` at ``now`` when the flight recorder is capturing this attempt."""
        if self.capture is not None:
            self.capture.append((now - self.clock.started, item))

    def capture_end(self, now: float) -> None:
        """The capture's last record: the attempt ended here (unless a body end or an I/O failure
        already closes it)."""
        capture = self.capture
        if capture is not None and (not capture or not (capture[-1][1] is None or isinstance(capture[-1][1], str))):
            capture.append((now - self.clock.started, "end"))

    def poll(self, now: float) -> Terminal | None:
        """Deliver the notices due at ``now``; answer a time-based terminal verdict if one is due."""
        clock = self.clock
        while True:
            item = clock.poll(now)
            if isinstance(item, Notice):
                self.reporter.notice(self.record, item)
                continue
            if isinstance(item, (SemanticTimeoutExpired, WallBudgetExpired)):
                return item
            return None

    def breaks_as_opaque(self, responded: bool) -> bool:
        """A read of the body broke (``responded``: the caller has the response): True when it
        breaks as it would without the transport -- an opaque body (JSON) the caller has, or a
        probed one (committed here: it breaks as an opaque body does)."""
        if self.mode is _PROBING and not responded:
            self.commit()
            return True
        return responded and not self.scanned

    def callers_timeout(self, read_timeout: float | None) -> bool:
        """A read that timed out, not at our socket timeout, before content, while the caller set
        a read timeout of its own: the caller's verdict on the wait, not the provider's failure."""
        return not self.committed and self.clock.sent_bound is None and read_timeout is not None

    def unjudged(self, chunk: bytes) -> bytes:
        """The body cannot be judged (shadow mode, where enforcement would have ended the request as
        malformed): it goes on to the caller as it comes from here, ``chunk`` included, unjudged
        (raw clock only)."""
        self.become(_UNJUDGED)
        self.probe.drain()
        self.decoder = None
        self.commit()
        return self.release(chunk, chunk)

    def notices(self, now: float) -> None:
        """Deliver the notices due at ``now`` (``Reporter.notice``)."""
        clock = self.clock
        while (item := clock.poll_notice(now)) is not None:
            self.reporter.notice(self.record, item)

    # -- reading --------------------------------------------------------------------------------

    def headers_arrived(self, now: float, status: int, headers: Mapping[str, str]) -> None:
        """The response headers arrived (keys lower-case): on the clock, the capture and the record."""
        self.clock.headers(now)
        if self.capture is not None:
            self.capture_item(now, {"status": status, **{
                k: headers[k] for k in ("content-type", "content-encoding") if k in headers}})
        record = self.record
        record.status = status
        record.request_id = request_id(headers)

    def read_as(self, content_type: str, encoding: str | None, profile: ProviderProfile, policy: Policy) -> bool:
        """The response headers say how the body is read (``content_type`` lower-case,
        ``encoding`` the ``content-encoding`` header or ``None``): a stream (SSE, or Amazon's
        event stream) is scanned with ``profile``'s framer (``policy``'s bounds) and held; any
        other 2xx body is opaque -- judged by the non-streaming raw bound, released as it comes -- except a JSON
        one on a streaming request, probed (held until its first key tells an error object from
        a reply). Answers True when the body is held (the caller gets the response at its first
        content), False when the response goes to the caller now."""
        if content_type.startswith(_SSE) or content_type.startswith(_EVENTSTREAM):
            self.become(_SCANNED)  # a non-streaming request's stream (found late) keeps its raw bound
            framer = framer_for(profile, policy.max_frame_bytes, content_type, policy.max_partial_bytes,
                                unfed=self.framer)  # the default one, when it is the one asked for
            if framer is not self.framer:
                self.set_framer(framer)
            if encoding:
                try:
                    self.decoder = decoder_for(encoding)
                except UnsupportedEncoding:
                    self.become(_OPAQUE)  # cannot be read: released as it comes, raw clock only
        elif self.scanned:
            probing = "json" in content_type and (encoding is None or encoding == "identity")
            self.become(_PROBING if probing else _OPAQUE)
            self.clock.opaque(policy)
            if probing:
                if not self.probe.keeps:
                    self.commit()  # a probe that keeps nothing back: released as it comes
                return self.probe.keeps
        if self.scanned and self.decoder is None:
            self.framer.hold(True)  # for a replay without held heartbeats (hold_or_release)
        if not self.scanned:
            self.commit()
            return False
        return self.hold.keeps

    def read(self, now: float, chunk: bytes) -> bytes:
        """One read of the body (its bytes already counted on the clock): the bytes to release
        now (possibly ``b""``)."""
        if not self.scanned:
            return self.opaque_read(chunk)
        data = self.decoder.decode(chunk) if self.decoder is not None else chunk
        return self._judge(now, chunk, data, self.framer.feed(data))

    def end_of_body(self, now: float, eof_is_end: bool) -> bytes:
        """The end of a scanned body: the last frames, and whether the reply is whole -- an end
        frame, the reply's stop reason released (``finish_then_eof``), or, for a wire whose end
        is the body's (``eof_is_end``), the end itself. A final frame whose lines are complete
        but lack the closing blank line is dispatched (as the SDKs read it); a cut line is not.
        Answers the bytes to release."""
        data = b""
        framer = self.framer
        if self.decoder is not None:
            data = self.decoder.flush()
        kinds = framer.feed(data) if data else []
        boundary = framer.idle  # no frame in progress: the body ended between frames
        last = framer.close()
        boundary = boundary or bool(last)  # (or its last frame's lines all ended: dispatched)
        kinds += last
        release = b""
        if kinds:
            release = self._judge(now, b"", data, kinds)
        if self.error is not None:
            return release
        if not self.done and framer.facts.stop_reason is not None and self.committed:
            self.finish(Completion.FINISH_THEN_EOF)
        if not self.done and (eof_is_end or (boundary and self.committed and framer.facts.unrecognised)):
            # Failing open: a wire that showed frames the profile does not know may end as it
            # pleases -- a clean end after them is the reply's end, never a stream that died.
            self.finish(Completion.EOF)
        if self.done and not self.committed:
            release = self.release_held(b"", b"")
        return release

    def _judge(self, now: float, chunk: bytes, data: bytes, kinds: list[FrameKind]) -> bytes:
        """Apply the frames of one read (``data`` is ``chunk`` decoded) and answer what to release."""
        if not kinds:
            return self.hold_or_release(chunk, data)
        self.clock.frames_at(now, kinds)
        heartbeats = kinds.count(_HEARTBEAT)
        if heartbeats:
            self._heartbeats(now, heartbeats, self.clock.heartbeats)
        ended = self.done  # (the reply ended in an earlier read: what follows is past its end)
        if _END in kinds:
            self.finish(Completion.END_FRAME)
        if _ERROR in kinds and not ended and not (_END in kinds and kinds.index(_END) < kinds.index(_ERROR)):
            # An error frame of the reply -- not one after its end frame (a server's trailing frames,
            # which the SDKs never read: they stop at the end frame).
            failure, release = self.error_frame(chunk, data, kinds)
            self.reporter.verdict(now, self.index, AttemptOutcome.PROVIDER_ERROR, failure.phase, failure.committed)
            return release
        if not self.committed and (_SEMANTIC in kinds or _END in kinds):
            return self.release_held(chunk, data)
        return self.hold_or_release(chunk, data)

    # -- releasing ------------------------------------------------------------------------------

    def release(self, data: bytes, decoded: bytes) -> bytes:
        """``data`` goes to the caller; the prefix keeps ``decoded`` (the same bytes unless the
        response is content-encoded)."""
        self.ledger.count(len(data), decoded if self.decoder is not None else data)
        return data

    def commit(self) -> None:
        """Content goes to the caller from now on: failures are truncations (UNRELEASED -> COMMITTED,
        WHOLE -> DONE). With :meth:`finish`, the only mover of the ledger's state (``tests/
        test_engine.py`` checks it): a stream's first content, an opaque body's first read, a
        probed JSON body told a reply, a body left unjudged."""
        self.ledger.commit()
        self.framer.hold(False)  # (a body that is not held never turned the framer's hold on)

    def take_held(self) -> bytes:
        """What is held, taken (the engine releases it as it came when a failure is not retried)."""
        return self.hold.drain()[0]

    def release_held(self, chunk: bytes, data: bytes) -> bytes:
        """The first content: commit, and release what was held followed by ``chunk``."""
        self.commit()
        held, decoded = self.hold.drain()
        return self.release(held + chunk, decoded + data)

    def hold_or_release(self, chunk: bytes, data: bytes) -> bytes:
        """A read with no content of its own: held before content, released after it. Raises
        :class:`~.errors.MalformedStream` when what was held before content passes
        ``Policy.max_frame_bytes``."""
        if self.committed:
            return self.release(chunk, data)
        kept = self.hold.add(chunk, data if self.decoder is not None else None)
        self._bound_hold()
        return b"" if kept else self.release(chunk, data)

    def _bound_hold(self) -> None:
        """Past :data:`HOLD_VERBATIM_BYTES`, what is held becomes the held frames that are not
        heartbeats; :class:`~.errors.MalformedStream` past the frame bound."""
        hold = self.hold
        if hold.size > HOLD_VERBATIM_BYTES:
            replay = self.framer.replay()  # (None: verbatim)
            if replay is not None:
                hold.replace(replay)
        hold.check()

    def opaque_read(self, chunk: bytes) -> bytes:
        """A read of a body that is not judged as a stream: probed, or released as it arrives."""
        if self.mode is _PROBING:
            return self.probe_read(chunk)
        self.commit()
        return self.release(chunk, chunk)

    # -- a JSON body probed ---------------------------------------------------------------------

    def probe_read(self, chunk: bytes) -> bytes:
        """A read of a 2xx JSON body on a streaming request. Held until its first key tells
        (:func:`~.providers.json_error_shaped`): a reply is released from then on as it comes; an
        error-shaped body is kept until whole (:meth:`probed` judges it at the end), or past
        :data:`JSON_PROBE_BYTES` released as the reply it then is."""
        probe = self.probe
        passed = probe.add(chunk)  # (b"" while kept back)
        if probe.shaped is False or probe.size > JSON_PROBE_BYTES:
            self.become(_OPAQUE)
            _, unsent = probe.drain()
            self.commit()
            passed = unsent + passed
        return self.release(passed, passed) if passed else b""

    def probed(self) -> tuple[str | None, bytes]:
        """The probed JSON body is whole: ``(error type, b"")`` when it is an error object (the
        engine judges it as the in-band provider error it is), else ``(None, the bytes to
        release now)``."""
        self.become(_OPAQUE)
        body, unsent = self.probe.drain()
        error_type = json_error_type(body)
        if error_type is not None:
            return error_type, b""
        self.commit()
        return None, self.release(unsent, unsent)

    def unframed_end(self, now: float) -> tuple[bytes, Failure | None]:
        """The end of a body read unframed (opaque, or probing: :meth:`probed`): the bytes to
        release, and the failure a probed error object is (:meth:`probe_error`); else the reply is
        whole."""
        release = b""
        if self.mode is _PROBING:
            error_type, release = self.probed()
            if error_type is not None:
                return b"", self.probe_error(now, error_type)
        self.finish(Completion.EOF)
        return release, None

    def probe_error(self, now: float, error_type: str) -> Failure:
        """The probed JSON body is an error object (:meth:`probed`): the in-band provider error it
        is (retried before content per the table, typed when exhausted); its verdict emitted."""
        phase = self.clock.phase
        self.reporter.verdict(now, self.index, AttemptOutcome.PROVIDER_ERROR, phase, False)
        return Failure(FailureKind.ERROR_EVENT, phase, False, status=self.record.status, error_type=error_type)

    # -- an in-band error frame -----------------------------------------------------------------

    def error_failure(self, kinds: list[FrameKind]) -> Failure:
        """The failure an in-band error frame in a read of ``kinds`` is: after content when content
        was released or came before it in the read (then it is the provider's answer)."""
        first_error = kinds.index(_ERROR)
        content_first = _SEMANTIC in kinds[:first_error] or _END in kinds[:first_error]
        return Failure(FailureKind.ERROR_EVENT, self.clock.phase, self.committed or content_first,
                       error_type=self.framer.facts.error_type)

    def error_frame(self, chunk: bytes, data: bytes, kinds: list[FrameKind]) -> tuple[Failure, bytes]:
        """An in-band error frame in this read: the failure and the bytes to release. Kept as
        :attr:`error` -- the engine acts on it after the read -- or, by an attempt that keeps
        nothing back (shadow mode), observed (``Reporter.observe``) while the body goes on.
        Before content the read is held (the attempt is retried -- or, if not, given to the
        caller as it came: the engine releases what is held, this read included). After content
        the error is the provider's answer: the read goes to the caller as sent, the error frame
        included, so that the SDK raises its own error with the provider's type, code and message."""
        failure = self.error_failure(kinds)
        if self.hold.keeps:
            self.error = failure
        else:
            self.reporter.observe(failure)
        if not failure.committed:
            return failure, b"" if self.hold.add(chunk) else self.release(chunk, data)
        if not self.committed:
            return failure, self.release_held(chunk, data)
        return failure, self.release(chunk, data)
