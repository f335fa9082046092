"""Every error otel-liveness raises, in one tree.

::

    LivenessError                      base of everything below
    ├── MalformedStream                the body is not the wire format the provider speaks
    │   ├── FrameTooLarge              one SSE line/frame or event-stream message exceeded the bound
    │   └── CorruptFrame               a binary frame failed validation (CRC, length, header, cut short)
    ├── InvalidPolicy (ValueError)     a Policy field or OTEL_LIVENESS_* variable is wrong
    │                                  (from the environment of a transport: ConfigurationWarning, ignored)
    ├── StreamTruncated                content was released, then the stream died; carries the prefix
    ├── ProviderError                  the retry budget is spent; names attempts and the last cause
    │   ├── RateLimited                ... and the last cause was a 429 / rate-limit error
    │   └── BodyNotReplayable          ... a retry was due, but the request body cannot be sent again
    ├── WallTimeout                    the request's wall budget expired; reports the budget
    └── IllegalInput (RuntimeError)    a driver fed the engine an input its state does not accept

Failures of single attempts are not errors the caller sees: they are retried below it, or end
as one of the errors above, and are reported (``response.extensions["liveness"]``, telemetry).
The transport drivers raise subclasses that are *also* instances of the HTTP library's matching
exception (a truncation by raw silence is an ``httpx.ReadTimeout``, by a broken connection an
``httpx.ReadError``, by an in-band error an ``httpx.RemoteProtocolError``...), so ``except``
clauses written for the HTTP library keep working.
This module imports nothing but the standard library.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BodyNotReplayable",
    "ConfigurationWarning",
    "CorruptFrame",
    "FrameTooLarge",
    "IllegalInput",
    "InvalidPolicy",
    "LivenessError",
    "MalformedStream",
    "ProviderError",
    "RateLimited",
    "StreamTruncated",
    "WallTimeout",
    "liveness_error",
    "liveness_report",
]


class LivenessError(Exception):
    """Base class of all otel-liveness errors. ``report``: the outcome report of the request it
    ended (what ``response.extensions["liveness"]`` holds for a response), when a transport raised it."""

    report: dict[str, Any] | None = None


class MalformedStream(LivenessError):
    """The response body could not be read as the provider's wire format.

    ``decoded`` is set by decoders that return whole units per call (the event-stream scanner):
    the units the failing call completed before the fault, so that no decoded unit is lost and the
    units seen are the same however the bytes were split into reads. Empty otherwise.
    """

    decoded: tuple[Any, ...] = ()


class FrameTooLarge(MalformedStream):
    """An SSE line or frame, or an event-stream message, grew past the configured bound
    (``max_frame_bytes`` / ``max_message_bytes``)."""

    def __init__(self, size: int, limit: int, *, what: str = "SSE frame") -> None:
        super().__init__(f"{what} of at least {size} bytes exceeds the bound of {limit} bytes")
        self.size = size
        self.limit = limit
        self.what = what


class CorruptFrame(MalformedStream):
    """A length-prefixed binary frame (an ``application/vnd.amazon.eventstream`` message) failed
    validation.

    ``what`` names the check that failed: ``prelude_crc`` or ``message_crc`` (then ``expected`` is
    the CRC the frame carries and ``actual`` the one computed), ``length`` (a total or headers
    length the format cannot have; ``actual`` is the offending value), ``header`` (a header of an
    unknown type, running past the headers section, duplicated, or with a name or string value
    that is not UTF-8) or ``truncated`` (the stream ended inside a frame: ``actual`` is the bytes
    held, ``expected`` the frame's total length when its prelude had arrived, else ``None``).
    ``offset`` is the stream offset of the frame's first byte.
    """

    def __init__(self, what: str, message: str, *, offset: int, expected: int | None = None,
                 actual: int | None = None) -> None:
        super().__init__(f"corrupt frame at byte {offset} ({what}): {message}")
        self.what = what
        self.detail = message
        self.offset = offset
        self.expected = expected
        self.actual = actual


class InvalidPolicy(LivenessError, ValueError):
    """A configuration value is invalid; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class ConfigurationWarning(UserWarning):
    """An ``OTEL_LIVENESS_*`` variable is unknown or invalid: it is ignored, the default is used.
    (A warning, not an error: a typo must not stop an application's transports or its other
    instrumentation from loading.)"""


class StreamTruncated(LivenessError):
    """Content was released to the caller, then the stream failed.

    The reply is *not* retried (its prefix is already in the caller's hands). What it carries is
    what a continuation needs, kept as the reply streamed rather than the reply itself:

    - ``released``: exactly how many bytes were released in all;
    - ``prefix``: exactly the first ``Policy.max_prefix_bytes`` (8 KiB) of the bytes released --
      all of them for a shorter reply (decoded when the response was content-encoded): the
      reply's head for diagnosis (its ``message_start``, the first events). The bound was 16 MiB,
      then 64 KiB; memory per stream is what many concurrent streams pay for a truncation that
      rarely comes, and the partial message is decoded from the journal, not from it. On wires
      without a partial decoder, raise ``max_prefix_bytes`` to keep more;
    - ``partial``: on the Anthropic wires (Anthropic, Vertex, Bedrock) the decoded partial
      message of the *whole* released reply (the complete content blocks and the open one; see
      :func:`~otel_liveness.core.wire.anthropic.decode_partial`), decoded from a compact journal of the
      content events kept while the reply was released (bounded by
      ``Policy.max_partial_bytes``, 1 MiB: past it the message says ``"clipped": True`` and the
      blocks still open then are incomplete); ``None`` on other wires;
    - ``cause``: a short machine-readable reason: ``raw_silence`` (no byte for the raw bound),
      ``semantic_timeout`` (only when configured), ``read_error`` (the connection broke, or the
      caller's own read timeout), ``eof`` (the body ended before the reply did) or
      ``error_event:<type>`` (an in-band error, e.g. ``error_event:overloaded_error``;
      ``error_type`` holds ``<type>``).

    Per stream, the transport so retains at most ``max_prefix_bytes + max_partial_bytes`` (plus
    the frame in progress) for a truncation, however long the reply.
    """

    def __init__(
        self,
        message: str,
        *,
        prefix: bytes,
        cause: str,
        partial: Any = None,
        attempts: int = 1,
        error_type: str | None = None,
        released: int | None = None,
    ) -> None:
        super().__init__(message)
        self.prefix = prefix
        self.cause = cause
        self.partial = partial
        self.attempts = attempts
        self.error_type = error_type
        self.released = len(prefix) if released is None else released


class ProviderError(LivenessError):
    """Every attempt the policy allows failed before content; nothing was released.

    ``attempts`` is how many provider attempts were made, ``last_cause`` a short reason for the
    last failure (``status_529``, ``raw_silence``, ``error_event:overloaded_error``...),
    ``status`` the last HTTP status when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        last_cause: str,
        status: int | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_cause = last_cause
        self.status = status
        self.error_type = error_type


class RateLimited(ProviderError):
    """The rate-limit (patient) budget is spent."""


class BodyNotReplayable(ProviderError):
    """An attempt failed before content and the policy would retry it, but the request body
    cannot be sent again: it was a stream (an iterator, a generator, an async iterable, a file
    object) longer than ``Policy.max_replay_body_bytes``, so the transport did not keep all of it
    (a shorter one is kept and replayed byte for byte on every attempt). Nothing was re-sent --
    never an empty or partial body. ``attempts`` and ``last_cause`` (``status``, ``error_type``)
    are those of the failed attempt, as for :class:`ProviderError`; ``reason`` says why the body
    could not be replayed (``over_bound``), ``limit`` is the bound in bytes.
    """

    def __init__(self, message: str, *, attempts: int, last_cause: str, status: int | None = None,
                 error_type: str | None = None, reason: str = "over_bound", limit: int = 0) -> None:
        super().__init__(message, attempts=attempts, last_cause=last_cause, status=status, error_type=error_type)
        self.reason = reason
        self.limit = limit


class WallTimeout(LivenessError):
    """The request's wall-clock budget expired. ``budget`` is the configured budget in seconds."""

    def __init__(self, message: str, *, budget: float, attempts: int = 1, committed: bool = False,
                 prefix: bytes = b"") -> None:
        super().__init__(message)
        self.budget = budget
        self.attempts = attempts
        self.committed = committed
        self.prefix = prefix


class IllegalInput(LivenessError, RuntimeError):
    """An engine input arrived in a state where it is not legal (``headers`` before ``start``,
    ``slept`` with no backoff running...): a bug in the driver feeding the engine, never the
    provider's doing. ``input`` and ``state`` name the call and the request's state
    (:data:`otel_liveness.core.request.state.INPUTS` says which inputs each state accepts)."""

    def __init__(self, input: str, state: str) -> None:
        super().__init__(f"engine input {input}() is not legal in state {state!r}")
        self.input = input
        self.state = state


def liveness_report(exc: BaseException | None) -> dict[str, Any] | None:
    """The outcome report of the request behind ``exc``, whatever raised it -- the one public way to
    learn how the transport ended a request that failed: from our typed error (its ``report``), or
    from an SDK's status error whose response the transport passed up (a status or an in-band
    error the budget did not retry, or the last of a spent budget: ``exc.response.extensions``),
    or from an SDK's error raised from a provider's error frame after content (the request's
    extensions too: the openai SDK's ``APIError`` carries only the request).
    ``report["stop_reason"]`` says why it ended (``exhausted``, ``rate_limited``, ``retry_budget``,
    ``rejected``, ``truncated``, ``wall_budget``...), ``report["cause"]`` the last failure, and
    ``report["attempts"]`` each attempt. ``None`` when no transport judged the request::

        except Exception as exc:
            report = otel_liveness.liveness_report(exc)
            if report and report["stop_reason"] in ("exhausted", "rate_limited", "retry_budget"):
                ...  # the provider is failing: back off, fail over
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, LivenessError) and exc.report is not None:
            return exc.report
        for carrier in (getattr(exc, "response", None), getattr(exc, "request", None)):
            extensions = getattr(carrier, "extensions", None)
            if isinstance(extensions, dict) and isinstance(extensions.get("liveness"), dict):
                report: dict[str, Any] = extensions["liveness"]
                return report
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def liveness_error(exc: BaseException | None) -> LivenessError | None:
    """The otel-liveness error behind ``exc``, following ``__cause__``/``__context__``.

    SDKs wrap some transport exceptions (the anthropic SDK turns a failure before the response
    into ``APIConnectionError``; the openai SDK turns a mid-stream timeout into
    ``APITimeoutError``); this finds ours inside them::

        except Exception as exc:
            if isinstance(err := otel_liveness.liveness_error(exc), otel_liveness.StreamTruncated):
                ...
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, LivenessError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
