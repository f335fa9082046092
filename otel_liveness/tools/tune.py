"""``otel-liveness tune``: recommend the policy's bounds from the fleet's own recordings.

The recordings (flight-recorder files, either format; see :mod:`.recordings`) are split in a
stable way -- sorted by file name, every ``round(1 / holdout)``-th one is held out -- and the
bounds are fitted on the rest:

- **raw bound**, per provider: each attempt's largest gap between wire events after its first
  body byte (the final silence of an attempt that went silent, or was cut, is its death, not a
  gap). The bound is the largest such gap -- or, with ``--max-false-kill-rate R``, the gap that
  only a share ``R`` of the attempts exceeds -- times the margin, rounded up to a whole second.
  An attempt that showed keep-alives (or whose provider sends them) sets ``raw_idle_timeout``,
  one on a wire-silent provider ``raw_idle_timeout_no_keepalive``; across providers, the largest
  recommendation of each field (the policy's bounds are global; per-provider figures are in the
  ``groups`` of the output).
- **first-byte bound**: ``(request body MiB, time to the first body byte)`` pairs of attempts
  whose body began. The slope is the least-squares slope (never negative); the base is the
  largest residual over that line (or the ``1 - R`` quantile); both times the margin: the line
  ``margin x (base + slope x MiB)`` lies above every recorded prefill.

**What is safe to paste.** A bound is printed as a ready ``OTEL_LIVENESS_*`` line only when it was
fitted from at least :data:`MIN_ATTEMPTS` attempts (``--min-attempts`` overrides) and is not below
its floor (:data:`RAW_FLOORS`): one and a half keep-alive intervals on a wire that sends them
(keep-alives come every 27-30 s on Anthropic and OpenAI Responses: below 45 s, one that comes late
kills a healthy stream -- what 4 recordings without a pause fit, 1 s, kills every long think), two
minutes on a wire-silent one (a model reasons there without a byte: what the recordings show is
not all it may do). Any other fit is printed as a comment saying why, and left out of
``settings``, ``env`` and the candidate: the default stays.

The margin (default 1.5: a gap half again as long as the longest recorded one is still no kill)
covers what the recordings did not show; ``--margin 2.2`` also survives one lost keep-alive on a
steady cadence. The fitted policy is then replayed (as ``whatif`` does) on the held-out part,
beside the defaults: its false kills and detection delay there are what the fit is worth.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.policy import Policy
from ..core.wire.providers import PROFILES
from .recordings import Recording
from .whatif import whatif

__all__ = ["ENV_FIELDS", "MIN_ATTEMPTS", "RAW_FLOORS", "fit_first_byte", "max_gaps", "render", "split", "tune"]

#: The fewest attempts (recordings with a body) a bound is fitted from before it is printed ready to use.
MIN_ATTEMPTS = 20
#: The lowest raw bound printed ready to use, per field (seconds): see the module docstring.
RAW_FLOORS = {"raw_idle_timeout": 45.0, "raw_idle_timeout_no_keepalive": 120.0}

_MIB = 1024 * 1024
#: The fields ``tune`` recommends, in the order of its output.
ENV_FIELDS = ("raw_idle_timeout", "raw_idle_timeout_no_keepalive", "first_byte_timeout", "first_byte_base",
              "first_byte_per_mib", "first_byte_max")


def split(recordings: Sequence[Recording], holdout: float) -> tuple[list[Recording], list[Recording]]:
    """(fit, held out): sorted by source, every ``round(1 / holdout)``-th recording held out
    (none when there are fewer than two recordings)."""
    ordered = sorted(recordings, key=lambda r: r.source)
    if len(ordered) < 2:
        return ordered, []
    k = max(2, round(1 / holdout))
    return ([r for i, r in enumerate(ordered) if i % k != k - 1], [r for i, r in enumerate(ordered) if i % k == k - 1])


def max_gaps(rec: Recording) -> float | None:
    """The largest gap between wire events after the first body byte (``None``: no body), up
    to the end of the body when it ended; a final silence that no byte ended is not a gap."""
    if rec.first_byte is None:
        return None
    times = [t for t in rec.activity if t >= rec.first_byte]  # (the end of the body included)
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def _allowed_quantile(values: Sequence[float], rate: float) -> float:
    """The smallest value that at most a share ``rate`` of ``values`` exceed."""
    ordered = sorted(values)
    allowed = math.floor(rate * len(ordered) + 1e-9)
    return ordered[max(0, len(ordered) - 1 - allowed)]


def _ceil(value: float, step: float) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 6)


def fit_first_byte(pairs: Sequence[tuple[float, float]], rate: float, margin: float) -> dict[str, Any]:
    """Base and per-MiB slope over ``(MiB, seconds)`` pairs (see the module docstring)."""
    xs = [x for x, _ in pairs]
    ys = [y for _, y in pairs]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    if var > 1e-12:
        slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in pairs) / var)
        per_mib = max(0.1, _ceil(slope * margin, 0.1))
    else:  # one prompt size: the slope is not in the recordings, keep the default one
        slope, per_mib = 0.0, Policy().first_byte_per_mib
    base_needed = max(0.0, _allowed_quantile([y - slope * x for x, y in pairs], rate))
    return {
        "pairs": len(pairs),
        "largest_mib": round(max(xs), 3),
        "slowest_s": round(max(ys), 3),
        "slope_s_per_mib": round(slope, 3),
        "base_needed_s": round(base_needed, 3),
        "first_byte_base": max(1.0, _ceil(base_needed * margin, 0.1)),
        "first_byte_per_mib": per_mib,
        "slope_known": var > 1e-12,
    }


def _field_of(rec: Recording) -> str:
    keepalive = PROFILES[rec.provider].keepalives or bool(rec.frame_kinds() & {"heartbeat", "comment"})
    return "raw_idle_timeout" if keepalive else "raw_idle_timeout_no_keepalive"


def tune(recordings: Sequence[Recording], *, max_false_kill_rate: float = 0.0, margin: float = 1.5,
         holdout: float = 0.25, min_attempts: int = MIN_ATTEMPTS) -> dict[str, Any]:
    """The recommendation, the figures behind it and its held-out validation (``--json``);
    ``withheld``: the bounds fitted but not recommended (too few attempts, below the floor), each
    with why."""
    fit, held = split(recordings, holdout)
    rate = max_false_kill_rate
    warnings: list[str] = []
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in fit:
        gap = max_gaps(rec)
        if gap is None:
            continue
        group = groups.setdefault((rec.provider, _field_of(rec)), {"gaps": [], "hosts": set()})
        group["gaps"].append(gap)
        if rec.host:
            group["hosts"].add(rec.host)
    settings: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    withheld: list[dict[str, Any]] = []
    for (provider, field), group in sorted(groups.items()):
        needed = _allowed_quantile(group["gaps"], rate)
        recommended = max(1.0, float(math.ceil(needed * margin - 1e-9)))
        rows.append({"provider": provider, "hosts": sorted(group["hosts"]), "field": field,
                     "attempts": len(group["gaps"]), "max_gap_s": round(max(group["gaps"]), 3),
                     "needed_s": round(needed, 3), "recommended_s": recommended})
        if len(group["gaps"]) < min_attempts:
            withheld.append({"field": field, "value": recommended, "provider": provider,
                             "why": f"fitted from {len(group['gaps'])} {provider} attempts, fewer than {min_attempts} "
                                    "(--min-attempts overrides)"})
        elif recommended < RAW_FLOORS[field]:
            withheld.append({"field": field, "value": recommended, "provider": provider,
                             "why": f"below the floor of {RAW_FLOORS[field]:g}s for {field} "
                                    + ("(one and a half 30 s keep-alive intervals)" if field == "raw_idle_timeout"
                                       else "(a wire-silent model reasons without a byte)")})
        else:
            settings[field] = max(settings.get(field, 0.0), recommended)
    for item in withheld:  # (another provider's fit of the same field may stand)
        if item["field"] in settings:
            item["why"] += f"; {item['field']} is set from another provider's fit"
    if not rows:
        warnings.append("no recording has a body: no raw bound can be fitted (the defaults stay)")
    pairs = [(rec.body_bytes / _MIB, rec.first_byte) for rec in fit
             if rec.first_byte is not None and rec.body_bytes is not None]
    first_byte: dict[str, Any] | None = None
    if pairs and len(pairs) < min_attempts:
        first_byte = fit_first_byte(pairs, rate, margin)
        withheld.append({"field": "first_byte_base", "value": first_byte["first_byte_base"], "provider": "*",
                         "why": f"fitted from {len(pairs)} prefills, fewer than {min_attempts} (--min-attempts overrides)"})
    elif pairs:
        first_byte = fit_first_byte(pairs, rate, margin)
        settings["first_byte_timeout"] = "auto"
        settings["first_byte_base"] = first_byte["first_byte_base"]
        settings["first_byte_per_mib"] = first_byte["first_byte_per_mib"]
        if not first_byte["slope_known"]:
            warnings.append("every recorded request body has the same size: the per-MiB slope keeps its default")
        if first_byte["first_byte_base"] > Policy().first_byte_max:
            settings["first_byte_max"] = first_byte["first_byte_base"]
    if not pairs:
        warnings.append("no recording has both a request body size and a first byte: the first-byte bound "
                        "keeps its defaults")
    if len(fit) < 20:
        warnings.append(f"only {len(fit)} recordings to fit: the bounds are only as good as what they show")
    if not held:
        warnings.append("no recording was held out: nothing validates the fit")
    tuned = Policy(**settings)
    validation = whatif(held, {"defaults": Policy(), "tuned": tuned}) if held else None
    if validation is not None:
        allowed = math.floor(rate * len(held) + 1e-9)
        if validation["policies"]["tuned"]["false_kills"] > allowed:
            warnings.append(f"the held-out recordings show {validation['policies']['tuned']['false_kills']} false "
                            f"kill(s) under the tuned bounds (allowed: {allowed}): record more, or raise --margin")
    return {
        "attempts": len(recordings),
        "fit_attempts": len(fit),
        "holdout_attempts": len(held),
        "max_false_kill_rate": rate,
        "margin": margin,
        "settings": settings,
        "env": [f"OTEL_LIVENESS_{name.upper()}={_env(settings[name])}" for name in ENV_FIELDS if name in settings],
        # The same policy as a candidate for the live canary, judged on every attempt before it is enforced.
        "candidate": "OTEL_LIVENESS_CANDIDATES=tuned=" + ",".join(
            f"{name}={_env(settings[name])}" for name in ENV_FIELDS if name in settings),
        "groups": rows,
        "first_byte": first_byte,
        "fit": whatif(fit, {"tuned": tuned})["policies"]["tuned"],
        "holdout": None if validation is None else validation["policies"],
        "warnings": warnings,
        "withheld": withheld,
        "min_attempts": min_attempts,
    }


def _env(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render(result: Mapping[str, Any]) -> str:
    """The ``OTEL_LIVENESS_*`` lines, usable as is, after ``#`` comments with the figures."""
    lines = [f"# {result['attempts']} recordings: {result['fit_attempts']} fitted, {result['holdout_attempts']} held out; "
             f"false-kill rate {result['max_false_kill_rate']:g}, margin x{result['margin']:g}"]
    for row in result["groups"]:
        hosts = f" ({', '.join(row['hosts'])})" if row["hosts"] else ""
        lines.append(f"# {row['provider']}{hosts}: {row['attempts']} attempts, largest gap {row['max_gap_s']:.1f}s, "
                     f"needs {row['needed_s']:.1f}s -> {row['field']}={row['recommended_s']:g}")
    fb = result["first_byte"]
    if fb:
        lines.append(f"# first byte: {fb['pairs']} prefills up to {fb['largest_mib']:.2f} MiB, slowest {fb['slowest_s']:.1f}s; "
                     f"{fb['base_needed_s']:.1f}s + {fb['slope_s_per_mib']:.1f}s/MiB -> "
                     f"base {fb['first_byte_base']:g}s + {fb['first_byte_per_mib']:g}s/MiB")
    holdout = result["holdout"]
    if holdout:
        lines.append("# held out:  policy    false kills  missed  detect p50     p95     max")
        for name, row in holdout.items():
            d = row["detection_s"]
            lines.append(f"#            {name:<8}  {row['false_kills']:>11}  {row['missed']:>6}  {_s(d['p50']):>10}  "
                         f"{_s(d['p95']):>6}  {_s(d['max']):>6}")
    for warning in result["warnings"]:
        lines.append(f"# warning: {warning}")
    for item in result.get("withheld", ()):
        lines.append(f"# not recommended: OTEL_LIVENESS_{item['field'].upper()}={_env(item['value'])} -- {item['why']}")
    lines += result["env"]
    if not result["env"]:
        lines.append("# no bound to recommend: the defaults stay")
    lines += ["# or first as a candidate the policy canary judges live beside the enforced policy (docs/tuning.md):",
              "# " + result["candidate"]]
    return "\n".join(lines)
