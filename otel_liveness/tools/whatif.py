"""``otel-liveness whatif``: replay every recorded attempt through the engine under candidate
policies and count what each would have done -- kills, false kills, detection delay, misses.

Each recording is one attempt (a flight-recorder file, either format). Under each policy it is
replayed by :func:`~otel_liveness.tools.analyze.judge` -- the engine that judges live streams,
fed the recording instead of a socket -- and counted:

- **kill**: a verdict of silence (``raw_silence``, ``first_byte_timeout``, ``semantic_timeout``)
  at a time ``T`` before the recording's own end;
- **false kill**: a kill at ``T`` where the recording shows wire activity (headers, a body read,
  the end of the body) after ``T``: the stream was alive;
- **went silent** (the truth detection is measured against): the attempt ended with nothing more
  read -- no end of body, no connection error, no stop or error frame, not completed -- and was
  not cut by a kill of the recording-time policy; its **detection delay** is ``T`` minus its last
  wire activity (p50, p95, max by nearest rank), and it is **missed** when no kill catches it (a
  kill while its wire was still active is a false kill, neither a detection nor a miss);
- **censored**: recordings cut by the recording-time policy's own kill of silence (enforced, not
  shadow). Whether their wire would have recovered is unknown: they are counted apart, never as
  healthy nor as silent for good (a kill earlier than the recorded one still counts as a kill);
- **uploads**: kills before any content was released -- each is a retry, a new upload of the
  request body (``upload_bytes``: their request bodies' bytes, where recorded).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..core.policy import SHORTHANDS, Policy, parse_candidate
from ..core.tuning.canary import KILLS, count
from ..core.tuning.replay import judge
from .recordings import CaptureError, Recording, iter_paths, read_recording

__all__ = ["KILLS", "SHORTHANDS", "load", "parse_policy", "percentiles", "render", "whatif"]


def parse_policy(text: str) -> tuple[str, Policy]:
    """``NAME=SPEC`` -> (name, policy): :func:`~otel_liveness.core.policy.parse_candidate` (the
    same SPEC as a live candidate's, ``OTEL_LIVENESS_CANDIDATES``)."""
    return parse_candidate(text)


def load(paths: Iterable[str], provider: str = "anthropic") -> tuple[list[Recording], list[dict[str, str]]]:
    """Every recording under ``paths`` (``provider``: the wire of those that do not name one);
    files that cannot be read or parsed are reported (file, error naming the line) and skipped --
    the others are still read."""
    recordings: list[Recording] = []
    errors: list[dict[str, str]] = []
    for path in iter_paths(paths):
        try:
            recording = read_recording(path)
            recording.fallback_provider = provider
            recordings.append(recording)
        except CaptureError as exc:
            errors.append({"file": path, "error": str(exc)})
        except OSError as exc:
            errors.append({"file": path, "error": f"{path}: cannot read: {exc.strerror or exc}"})
    return recordings, errors


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95 (nearest rank) and max of ``values`` (``None`` when there are none)."""
    if not values:
        return {"p50": None, "p95": None, "max": None}
    ordered = sorted(values)

    def rank(p: float) -> float:
        return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)], 3)

    return {"p50": rank(50), "p95": rank(95), "max": round(ordered[-1], 3)}


@dataclass
class _Tally:
    kills: int = 0
    false_kills: int = 0
    missed: int = 0
    caught: int = 0
    uploads: int = 0
    upload_bytes: int = 0
    censored_killed: int = 0

    def __post_init__(self) -> None:
        self.delays: list[float] = []
        self.verdicts: Counter[str] = Counter()


def whatif(recordings: Sequence[Recording], policies: Mapping[str, Policy]) -> dict[str, Any]:
    """Replay every recording under every policy; the ``--json`` object (see the module docstring)."""
    censored = sum(1 for r in recordings if r.censored)
    silent = [r.went_silent for r in recordings]
    out: dict[str, Any] = {"attempts": len(recordings), "censored": censored, "went_silent": sum(silent),
                           "policies": {}}
    for name, policy in policies.items():
        tally = _Tally()
        for rec, went_silent in zip(recordings, silent, strict=True):
            judged = judge(rec.chunks, rec.provider, policy, rec.body_bytes)
            tally.verdicts[judged.verdict] += 1
            counted = count(rec, judged, went_silent)  # (the canary counts each live attempt the same)
            tally.kills += counted.kill
            tally.false_kills += counted.false_kill
            tally.missed += counted.missed
            tally.caught += counted.caught
            tally.censored_killed += counted.censored_kill
            if counted.upload:
                tally.uploads += 1
                tally.upload_bytes += rec.body_bytes or 0
            if counted.delay is not None:
                tally.delays.append(counted.delay)
        out["policies"][name] = {
            "kills": tally.kills,
            "false_kills": tally.false_kills,
            "false_kill_rate": round(tally.false_kills / len(recordings), 6) if recordings else 0.0,
            "missed": tally.missed,
            "caught": tally.caught,
            "censored": censored,
            "censored_killed_earlier": tally.censored_killed,
            "uploads": tally.uploads,
            "upload_bytes": tally.upload_bytes,
            "detection_s": percentiles(tally.delays),
            "verdicts": dict(sorted(tally.verdicts.items())),
            "settings": _settings(policy),
        }
    return out


def _settings(policy: Policy) -> dict[str, Any]:
    """The clock settings of ``policy`` that differ from the defaults (what the name stands for)."""
    default = Policy()
    return {f.name: getattr(policy, f.name) for f in fields(Policy)
            if getattr(policy, f.name) != getattr(default, f.name)}


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render(result: Mapping[str, Any], errors: Sequence[Mapping[str, str]] = ()) -> str:
    """A table a person reads at a glance."""
    lines = [
        f"{result['attempts']} attempts: {result['went_silent']} went silent for good, "
        f"{result['censored']} censored (cut by the recording-time policy's own kill)"
        + (f"; {len(errors)} file(s) unreadable" if errors else ""),
        "",
    ]
    policies: Mapping[str, Any] = result["policies"]
    width = max([len("policy"), *map(len, policies)])
    header = (f"{'policy':<{width}}  {'kills':>5}  {'false kills':>11}  {'missed':>6}  {'uploads':>7}  "
              f"{'detect p50':>10}  {'p95':>7}  {'max':>7}")
    lines += [header, "-" * len(header)]
    for name, row in policies.items():
        d = row["detection_s"]
        lines.append(f"{name:<{width}}  {row['kills']:>5}  {row['false_kills']:>11}  {row['missed']:>6}  "
                     f"{row['uploads']:>7}  {_s(d['p50']):>10}  {_s(d['p95']):>7}  {_s(d['max']):>7}")
    lines.append("")
    for name, row in policies.items():
        settings = ", ".join(f"{k}={v}" for k, v in row["settings"].items()) or "the defaults"
        lines.append(f"{name}: {settings}")
    for error in errors:
        lines.append(f"unreadable: {error['error']}")
    return "\n".join(lines)

