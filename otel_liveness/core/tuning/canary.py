"""The policy canary: candidate policies judged live, in shadow, on every attempt.

At the end of every attempt the enforced policy judged, the engine hands its timing reduction (the
flight recorder's per-frame ``{t, kind, size}``, kept in memory for the attempt whether or not
anything is written) to :func:`judge_candidates`, which builds the recording the flight recorder
would write of it (:func:`~.recording.recording_of`) and replays it under each candidate
(:func:`~.replay.judge`) -- the replay ``otel-liveness whatif`` runs over recordings on disk, and
:func:`count` is ``whatif``'s own tally of one replay. So over the same attempts, the live counts
equal ``whatif --json``'s ``kills``, ``false_kills`` and ``missed``.

What one candidate's judgment of one attempt counts (:data:`VERDICTS`, the values of the
``liveness.candidate.verdict`` attribute; an attempt may count several):

- ``judged``: every attempt (the denominator);
- ``kill``: a verdict of silence (raw silence, first byte, semantic timeout) before the attempt's
  own end; ``false_kill``: a kill while the wire was still active after it (the stream was alive);
  ``upload``: a kill before content was released (a retry: one more upload of the request body);
- ``missed``: the attempt went silent for good (see :attr:`~.recording.Recording.went_silent`) and
  no kill caught it; ``caught``: it went silent and a kill caught it;
- ``fault``: the candidate's judgment failed (a fault of the canary): counted, dropped, never raised.

And the **detection shift**, for a dead attempt (one that went silent for good, or that the
enforced policy's own kill of silence cut short): when the attempt ended minus when the candidate
would have ended it -- positive, sooner; negative, later (an attempt that ended with its read in
silence is followed past its end, as if it had stayed silent, to the candidate's verdict).

**What a replay can be spared.** Most attempts complete, and most candidates could not have
ended them: no clock of the candidate falls due between two of the attempt's wire events (every
gap under its smallest possible bound). For such an attempt the replay has nothing to find -- no
verdict of silence can fall, so it counts ``judged`` alone -- and it is not run
(:func:`cannot_kill`: a bound on every clock the engine could apply, never a second judgment;
tests/test_canary.py checks it against the replay on thousands of drawn attempts). Every other
attempt -- dead, failed, or with a gap a candidate's clock could reach -- is replayed.

Pure: no clock, no I/O. The canary never changes what the enforced policy does.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..capture.recording import Recording, recording_of
from ..events import CandidateVerdict, CaptureItem
from ..outcome import AttemptOutcome
from ..policy import Policy
from .replay import Judged, judge

__all__ = ["KILLS", "VERDICTS", "Count", "cannot_kill", "count", "judge_candidates"]

#: The verdicts that are kills of silence.
KILLS = ("raw_silence", "first_byte_timeout", "semantic_timeout")
#: The values of ``liveness.candidate.verdict`` (see the module docstring).
VERDICTS = ("judged", "kill", "false_kill", "upload", "missed", "caught", "fault")
_EPS = 1e-6
_JUDGED = ("judged",)


@dataclass(frozen=True, slots=True)
class Count:
    """What one replay of one recording counts (``whatif``'s definitions, module docstring)."""

    kill: bool
    false_kill: bool
    upload: bool
    missed: bool
    caught: bool
    censored_kill: bool
    #: A caught attempt's detection delay: the kill's time minus its last wire activity.
    delay: float | None

    def names(self) -> tuple[str, ...]:
        """The :data:`VERDICTS` this counts (``judged`` first)."""
        flags = (("kill", self.kill), ("false_kill", self.false_kill), ("upload", self.upload),
                 ("missed", self.missed), ("caught", self.caught))
        return ("judged", *(name for name, on in flags if on))


def count(rec: Recording, judged: Judged, went_silent: bool) -> Count:
    """Count one replay (``judged``) of ``rec`` (``went_silent``: ``rec.went_silent``)."""
    killed = judged.verdict in KILLS and judged.at is not None and judged.at < rec.end - _EPS
    false_kill = upload = caught = False
    delay = None
    if killed:
        assert judged.at is not None
        false_kill = bisect.bisect_right(rec.activity, judged.at + _EPS) < len(rec.activity)
        upload = not judged.committed
    if went_silent and killed and judged.at is not None and judged.at >= rec.last_activity - _EPS:
        caught = True
        delay = judged.at - rec.last_activity
    # (killed while its wire was still active: a false kill, neither a detection nor a miss)
    return Count(killed, false_kill, upload, went_silent and not killed, caught, killed and rec.censored, delay)


#: A gap this close to a bound (or closer) is left to the replay (the clocks' own tolerances).
_MARGIN = 1e-3


def _least(*bounds: float | None) -> float:
    values = [b for b in bounds if b is not None]
    return min(values) if values else math.inf


def cannot_kill(times: Sequence[float], first_read: int, policy: Policy) -> bool:
    """Whether no verdict of silence of ``policy`` can fall within an attempt whose wire events
    came at ``times`` (seconds since its request was sent, in order; ``times[first_read]`` the
    first body read, ``len(times)`` when none): every gap from the request's sending is under
    the smallest bound the engine could apply there -- before the first body byte, the first-byte
    bound (``auto``: at least its base and the raw bound; ``None``: the raw bound); after it, the
    raw bound (the least of the keep-alive, no-keep-alive and non-streaming bounds, and the
    adaptive floor); and the whole attempt under the semantic timeout. ``False`` means "replay"."""
    raw = _least(policy.raw_idle_timeout, policy.raw_idle_timeout_no_keepalive, policy.raw_idle_timeout_non_streaming,
                 policy.raw_idle_floor if policy.raw_idle_adaptive else None)
    first_byte = policy.first_byte_timeout
    if first_byte is None:
        before = raw
    elif first_byte == "auto":
        before = max(min(policy.first_byte_base, policy.first_byte_max), raw)
    else:
        before = float(first_byte)
    last = 0.0
    for i, t in enumerate(times):
        bound = before if i <= first_read else raw
        if t - last >= bound - max(_MARGIN, bound * 0.01):
            return False
        last = t
    semantic = policy.semantic_timeout
    return semantic is None or last < semantic - max(_MARGIN, semantic * 0.01)


def _spared(capture: Sequence[tuple[float, CaptureItem]], outcome: Any) -> tuple[list[float], int] | None:
    """The wire events' times of a completed attempt (and its first body read's index) -- the
    attempts a replay may be spared -- or ``None``."""
    if outcome != AttemptOutcome.COMPLETED.value or not capture or capture[-1][1] is not None:
        return None  # (a completed attempt's capture ends with its body's end)
    times = [t for t, _ in capture]
    first_read = next((i for i, (_, item) in enumerate(capture) if isinstance(item, (bytes, tuple))), len(times))
    return times, first_read


def judge_candidates(candidates: Sequence[tuple[str, Policy]], capture: Sequence[tuple[float, CaptureItem]],
                     meta: Mapping[str, Any], max_frame_bytes: int) -> tuple[CandidateVerdict, ...]:
    """Each candidate's verdict on one attempt: ``capture`` its recorder capture (a timing
    reduction, or bytes), ``meta`` the recorder's description of it. Never raises: a candidate
    whose judgment fails counts ``fault``."""
    calm: list[bool] = []
    try:
        spared = _spared(capture, meta.get("outcome"))
        if spared is not None:
            calm = [cannot_kill(spared[0], spared[1], policy) for _, policy in candidates]
            if all(calm):
                return tuple(CandidateVerdict(name, _JUDGED, None) for name, _ in candidates)
    except Exception:  # noqa: BLE001 - as below
        return tuple(CandidateVerdict(name, ("fault",), None) for name, _ in candidates)
    try:
        rec = recording_of(capture, meta, max_frame_bytes=max_frame_bytes)
        went_silent = rec.went_silent
        dead = went_silent or rec.censored
    except Exception:  # noqa: BLE001 - the canary is a shadow of a shadow: a fault is counted, never raised
        return tuple(CandidateVerdict(name, ("fault",), None) for name, _ in candidates)
    out: list[CandidateVerdict] = []
    for i, (name, policy) in enumerate(candidates):
        if spared is not None and calm[i]:
            out.append(CandidateVerdict(name, _JUDGED, None))
            continue
        try:
            judged = judge(rec.chunks, rec.provider, policy, rec.body_bytes, silent_after=True)
            counted = count(rec, judged, went_silent)
            shift = None
            if (dead and judged.verdict in KILLS and judged.at is not None
                    and judged.at >= rec.last_activity - _EPS):  # (a false kill is not a detection)
                shift = rec.end - judged.at
            out.append(CandidateVerdict(name, counted.names(), shift))
        except Exception:  # noqa: BLE001 - as above
            out.append(CandidateVerdict(name, ("fault",), None))
    return tuple(out)
