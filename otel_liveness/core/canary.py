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

Pure: no clock, no I/O. The canary never changes what the enforced policy does.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .events import CandidateVerdict, CaptureItem
from .policy import Policy
from .recording import Recording, recording_of
from .replay import Judged, judge

__all__ = ["KILLS", "VERDICTS", "Count", "count", "judge_candidates"]

#: The verdicts that are kills of silence.
KILLS = ("raw_silence", "first_byte_timeout", "semantic_timeout")
#: The values of ``liveness.candidate.verdict`` (see the module docstring).
VERDICTS = ("judged", "kill", "false_kill", "upload", "missed", "caught", "fault")
_EPS = 1e-6


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


def judge_candidates(candidates: Sequence[tuple[str, Policy]], capture: Sequence[tuple[float, CaptureItem]],
                     meta: Mapping[str, Any], max_frame_bytes: int) -> tuple[CandidateVerdict, ...]:
    """Each candidate's verdict on one attempt: ``capture`` its recorder capture (a timing
    reduction, or bytes), ``meta`` the recorder's description of it. Never raises: a candidate
    whose judgment fails counts ``fault``."""
    try:
        rec = recording_of(capture, meta, max_frame_bytes=max_frame_bytes)
        went_silent = rec.went_silent
        dead = went_silent or rec.censored
    except Exception:  # noqa: BLE001 - the canary is a shadow of a shadow: a fault is counted, never raised
        return tuple(CandidateVerdict(name, ("fault",), None) for name, _ in candidates)
    out: list[CandidateVerdict] = []
    for name, policy in candidates:
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
