"""``otel-liveness tune-demo``: the tuning loop, end to end, on the embedded simulated provider.

1. **Record a fleet.** Real anthropic SDK streaming calls go through the liveness transport in
   shadow mode (it observes, enforces nothing: the recordings are uncensored) with the timing-only
   flight recorder writing every attempt (``capture_sample=1``). The provider behaves as the
   field reports say: a prefill that grows with the prompt (``PREFILL_BASE`` + ``PREFILL_PER_MIB``
   per MiB of request body, plus jitter), pings every 22-30 s while the model thinks, and a few
   dead sockets -- some during the prefill, some mid-thought; the SDK's read timeout
   (``CLIENT_READ_TIMEOUT``) ends those. Time is scaled (``--time-scale``) and the recordings are
   rewritten in provider seconds afterwards, so the figures read as the fleet's own, and named
   after the fleet's attempts (``tune-0007.jsonl``), so that ``tune``'s held-out split is the
   same on every run of a seed. The fleet (sizes, prefills, ping gaps, dead sockets) is drawn from
   the seed; the recorded times are measured, so the machine's scheduling noise is in them.
2. **whatif** on three policies: the defaults, a 45 s watchdog on everything (what harnesses do),
   and a tight 20 s raw bound.
3. **tune** on the recordings (three quarters fitted, one quarter held out).
4. **The tuned policy replayed** on every recording beside the defaults: the demo's self-check
   (exit status 0) is zero false kills and a shorter detection delay (p50) than the defaults,
   with no more misses.
5. **The canary.** A new fleet (the next seed) runs with the tuned policy and the 45 s watchdog
   as live candidates (``Policy.candidates``, what ``OTEL_LIVENESS_CANDIDATES`` sets): the engine
   judges every attempt under each as it ends, and their verdicts -- what the
   ``liveness.candidate.verdicts`` counter and the dashboards' "Candidates" row show -- are
   printed beside ``whatif`` over the same attempts' recordings; the self-check also asks that
   the two agree and that the tuned candidate kills no healthy stream.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..core.events import AttemptEnded
from ..core.policy import Policy
from ..core.tuning.canary import VERDICTS
from ..testing import Scenario, SimulatedProvider, anthropic_reply
from ..testing import steps as s
from ..testing.scripts import PING
from . import tune as tune_mod
from . import whatif as whatif_mod
from .recordings import iter_paths

__all__ = ["CLIENT_READ_TIMEOUT", "PREFILL_BASE", "PREFILL_PER_MIB", "fleet", "name_by_scenario", "render",
           "render_canary", "rescale", "run_tune_demo"]

PREFILL_BASE = 1.5  # s before the first byte of a tiny prompt
PREFILL_PER_MIB = 40.0  # s more per MiB of request body
PREFILL_JITTER = 2.5  # s, uniform
PING_GAP = (22.0, 30.0)  # s between pings while the model thinks (uniform)
CLIENT_READ_TIMEOUT = 200.0  # s: the SDK's read timeout in the demo (ends a dead socket in shadow mode)
MODEL = "claude-sim-1"
POLICIES = {
    "defaults": "defaults=",
    "watchdog-45": "watchdog-45=raw=45,first_byte=45",
    "tight-20": "tight-20=raw=20",
}


@dataclass(frozen=True)
class Attempt:
    name: str
    shape: str  # healthy | dead_prefill | dead_thinking
    body_bytes: int
    script: list[Any]


def fleet(n: int, seed: int) -> list[Attempt]:
    """``n`` attempts, request bodies from 4 KiB to 2 MiB (log-uniform), one in eight a dead
    socket (alternately in the prefill and mid-thought)."""
    rng = random.Random(seed)
    out: list[Attempt] = []
    for i in range(n):
        body = int(math.exp(rng.uniform(math.log(4 * 1024), math.log(2 * 1024 * 1024))))
        prefill = PREFILL_BASE + PREFILL_PER_MIB * body / (1024 * 1024) + rng.uniform(0, PREFILL_JITTER)
        reply = anthropic_reply(f"reply {i}", deltas=3, msg_id=f"msg_tune_{i:04d}", model=MODEL)
        thinking: list[Any] = []
        for _ in range(rng.randint(1, 3)):
            thinking += [s.Sleep(rng.uniform(*PING_GAP)), s.Raw(PING)]
        shape = "healthy"
        if i % 8 == 3:
            shape, script = "dead_prefill", [s.Headers(), s.Stall()]
        elif i % 8 == 7:
            shape, script = "dead_thinking", [s.Headers(), s.Sleep(prefill), reply[0], *thinking, s.Stall()]
        else:
            script = [s.Headers(), s.Sleep(prefill), reply[0], *thinking, *reply[1:]]
        out.append(Attempt(f"tune-{i:04d}", shape, body, script))
    return out


def _call(provider: SimulatedProvider, attempt: Attempt, policy: Policy, ts: float, start_at: float,
          hooks: tuple[Any, ...] = ()) -> str:
    import anthropic
    import httpx2

    from .. import wrap

    transport = wrap(httpx2.HTTPTransport(), policy, telemetry=False, hooks=hooks)
    client = anthropic.Anthropic(
        base_url=provider.base_url(attempt.name), api_key="sk-ant-demo-not-a-real-key", max_retries=0,
        http_client=httpx2.Client(transport=transport, timeout=httpx2.Timeout(CLIENT_READ_TIMEOUT * ts, connect=5.0)),
    )
    prompt = "Summarise: " + "lorem ipsum " * max(0, (attempt.body_bytes - 150) // 12)
    time.sleep(max(0.0, start_at - time.monotonic()))
    try:
        with client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": prompt}]) as stream:
            stream.get_final_text()
        return "completed"
    except Exception as exc:  # noqa: BLE001 - a dead socket ends as the SDK's timeout
        return type(exc).__name__
    finally:
        client.close()


def rescale(directory: str, time_scale: float) -> int:
    """Rewrite the recordings of ``directory`` in provider seconds; the number rewritten."""
    count = 0
    for path in iter_paths([directory]):
        records = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
        for record in records:
            if "meta" in record:
                for key in ("raw_bound", "first_byte_bound"):
                    if isinstance(record["meta"].get(key), (int, float)):
                        record["meta"][key] = round(record["meta"][key] / time_scale, 3)
            else:
                record["t"] = round(record["t"] / time_scale, 3)
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(record) + "\n" for record in records)
        count += 1
    return count


def name_by_scenario(directory: str, scenario_of: Mapping[str, str]) -> int:
    """Rename the recordings of ``directory`` after the fleet attempt each one recorded
    (``tune-0007.jsonl``), found by the request id in its file name (``scenario_of``: request id ->
    scenario, from the provider's log); the number renamed. The recorder names files from the time
    they were written, the process and a random tag, so their sorted order -- which ``tune``'s
    held-out split follows -- would change from run to run; after this it follows the seeded fleet."""
    count = 0
    for path in iter_paths([directory]):
        folder, name = os.path.split(path)
        ids = [part for part in name.split("-") if part in scenario_of]
        if len(ids) == 1:
            os.replace(path, os.path.join(folder, f"{scenario_of[ids[0]]}.jsonl"))
            count += 1
    return count


def run_tune_demo(*, attempts: int = 48, time_scale: float = 0.01, keep: str | None = None,
                  seed: int = 7, workers: int = 8, min_attempts: int = tune_mod.MIN_ATTEMPTS) -> dict[str, Any]:
    """Run the loop; the result object (``ok``: the tuned policy's self-check). ``min_attempts``:
    ``tune``'s (a fleet too small to fit from leaves the defaults, and the self-check fails)."""
    from ..demo import scaled_policy

    root = keep or tempfile.mkdtemp(prefix="otel-liveness-tune-demo-")
    # The parts apart: the fleet the bounds are tuned on, and the canary's fleet (whatif and tune
    # on ``fleet/`` reproduce steps 1-3; on the whole folder they would count both fleets).
    directory = os.path.join(root, "fleet")
    os.makedirs(directory, exist_ok=True)
    try:
        plan = fleet(attempts, seed)
        policy = scaled_policy(time_scale, shadow=True, wall=None).replace(
            max_attempts=1, capture_dir=directory, capture_mode="timing", capture_sample=1.0)
        started = time.monotonic()
        with SimulatedProvider(time_scale=time_scale) as provider:
            for attempt in plan:
                provider.add(attempt.name, Scenario([attempt.script]))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                # (staggered starts: a burst of SDK clients would hold the GIL the server's clock needs)
                endings = list(pool.map(lambda ia: _call(provider, ia[1], policy, time_scale, started + ia[0] * 0.02),
                                        enumerate(plan)))
            scenario_of = {log.request_id: log.scenario for log in provider.requests()}
        record_s = time.monotonic() - started
        named = name_by_scenario(directory, scenario_of)
        rescale(directory, time_scale)
        recordings, errors = whatif_mod.load([directory])
        policies = dict(whatif_mod.parse_policy(spec) for spec in POLICIES.values())
        started = time.monotonic()
        compared = whatif_mod.whatif(recordings, policies)
        tuned = tune_mod.tune(recordings, min_attempts=min_attempts)
        tuned_policy = Policy(**tuned["settings"])
        replayed = whatif_mod.whatif(recordings, {"defaults": Policy(), "tuned": tuned_policy})
        replay_s = time.monotonic() - started
        canary = _canary(attempts, seed + 1, policy, time_scale, workers, os.path.join(root, "canary"), {
            "tuned": tuned_policy, "watchdog-45": whatif_mod.parse_policy(POLICIES["watchdog-45"])[1]})
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    d, t = replayed["policies"]["defaults"], replayed["policies"]["tuned"]
    faster = (t["detection_s"]["p50"] is not None and d["detection_s"]["p50"] is not None
              and t["detection_s"]["p50"] < d["detection_s"]["p50"])
    ok = (t["false_kills"] == 0 and faster and t["missed"] <= d["missed"] and len(recordings) == attempts
          and named == attempts and canary["agree"] and canary["live"]["tuned"]["false_kill"] == 0)
    shapes = {shape: sum(1 for a in plan if a.shape == shape) for shape in ("healthy", "dead_prefill", "dead_thinking")}
    return {
        "ok": ok,
        "time_scale": time_scale,
        "seed": seed,
        "attempts": attempts,
        "fleet": shapes,
        "client_endings": {e: endings.count(e) for e in sorted(set(endings))},
        "recordings": len(recordings),
        "named_by_attempt": named,
        "unreadable": errors,
        "record_s": round(record_s, 2),
        "replay_s": round(replay_s, 2),
        "whatif": compared,
        "tune": tuned,
        "replayed": replayed,
        "canary": canary,
        "kept": keep,
        "reproduce": None if keep is None else [
            "otel-liveness whatif " + _quote(directory) + "".join(f" --policy {spec}" for spec in POLICIES.values()),
            "otel-liveness tune " + _quote(directory)
            + (f" --min-attempts {min_attempts}" if min_attempts != tune_mod.MIN_ATTEMPTS else ""),
        ],
    }


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _canary(attempts: int, seed: int, policy: Policy, ts: float, workers: int, directory: str,
            candidates: Mapping[str, Policy]) -> dict[str, Any]:
    """Step 5: a new fleet with ``candidates`` judged live; their counts beside whatif's over the
    same attempts' recordings (both in the run's scaled time; detection shifts in provider seconds)."""
    from ..demo import scale_policy

    live_policies = {name: scale_policy(candidate, ts) for name, candidate in candidates.items()}
    ended: list[AttemptEnded] = []

    def keep(event: Any) -> None:
        if isinstance(event, AttemptEnded):
            ended.append(event)  # (list.append is atomic: the fleet's threads share it)

    plan = fleet(attempts, seed)
    live_policy = policy.replace(capture_dir=directory, candidates=live_policies)
    started = time.monotonic()
    with SimulatedProvider(time_scale=ts) as provider:
        for attempt in plan:
            provider.add(attempt.name, Scenario([attempt.script]))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda ia: _call(provider, ia[1], live_policy, ts, started + ia[0] * 0.02, (keep,)),
                          enumerate(plan)))
    live: dict[str, dict[str, Any]] = {name: dict.fromkeys(VERDICTS, 0) | {"sooner_s": [], "later_s": []}
                                       for name in candidates}
    for event in ended:
        for verdict in event.candidates:
            row = live[verdict.name]
            for name in verdict.verdicts:
                row[name] += 1
            if verdict.shift is not None:
                row["sooner_s" if verdict.shift >= 0 else "later_s"].append(round(abs(verdict.shift) / ts, 1))
    recordings, _ = whatif_mod.load([directory])
    offline = whatif_mod.whatif(recordings, live_policies)["policies"]
    agree = all((row["kill"], row["false_kill"], row["missed"]) ==
                (offline[name]["kills"], offline[name]["false_kills"], offline[name]["missed"])
                for name, row in live.items())
    for row in live.values():
        row["sooner_s"] = whatif_mod.percentiles(row["sooner_s"])
        row["later_s"] = whatif_mod.percentiles(row["later_s"])
    return {"seed": seed, "attempts": len(ended), "live": live, "agree": agree,
            "whatif": {name: {k: offline[name][k] for k in ("kills", "false_kills", "missed")} for name in live}}


def render_canary(canary: Mapping[str, Any]) -> str:
    """The dashboards' "Candidates" row as text: per candidate, its live counts and whatif's."""
    def p50(value: Any) -> str:
        return "-" if value["p50"] is None else f"{value['p50']:.1f}s"

    lines = [f"{'candidate':<12}  {'kills':>5}  {'false kills':>11}  {'missed':>6}  {'sooner p50':>10}  {'later p50':>9}"
             f"  whatif (kills/false/missed)"]
    for name, row in canary["live"].items():
        w = canary["whatif"][name]
        lines.append(f"{name:<12}  {row['kill']:>5}  {row['false_kill']:>11}  {row['missed']:>6}  "
                     f"{p50(row['sooner_s']):>10}  {p50(row['later_s']):>9}  {w['kills']}/{w['false_kills']}/{w['missed']}")
    lines.append("live counts " + ("equal" if canary["agree"] else "DIFFER FROM") + " whatif over the same attempts")
    return "\n".join(lines)


def render(result: Mapping[str, Any]) -> str:
    shapes = result["fleet"]
    lines = [
        f"otel-liveness tune-demo: {result['attempts']} anthropic SDK streams through the transport in shadow mode, "
        f"timing-only recorder on (seed {result['seed']}, time scale {result['time_scale']:g}; "
        f"{result['record_s']:.1f}s to record, "
        f"{result['replay_s']:.1f}s to replay)",
        f"  fleet: {shapes['healthy']} healthy (prefill {PREFILL_BASE:g}s + {PREFILL_PER_MIB:g}s/MiB + up to "
        f"{PREFILL_JITTER:g}s, pings every {PING_GAP[0]:g}-{PING_GAP[1]:g}s), {shapes['dead_prefill']} dead in the "
        f"prefill, {shapes['dead_thinking']} dead mid-thought; {result['recordings']} recordings"
        + (f" (kept in {result['kept']}: fleet/ and canary/)" if result["kept"] else ""),
        "",
        "1. whatif on three policies:",
        "",
        *("   " + line for line in whatif_mod.render(result["whatif"]).splitlines()),
        "",
        "2. tune:",
        "",
        *("   " + line for line in tune_mod.render(result["tune"]).splitlines()),
        "",
        "3. the tuned policy replayed on every recording:",
        "",
        *("   " + line for line in whatif_mod.render(result["replayed"]).splitlines()),
        "",
        f"4. the canary: a new fleet (seed {result['canary']['seed']}), the tuned policy and watchdog-45 judged live "
        f"on its {result['canary']['attempts']} attempts (liveness.candidate.verdicts):",
        "",
        *("   " + line for line in render_canary(result["canary"]).splitlines()),
        "",
    ]
    d, t = result["replayed"]["policies"]["defaults"], result["replayed"]["policies"]["tuned"]
    def p50(row: Mapping[str, Any]) -> str:
        value = row["detection_s"]["p50"]
        return "-" if value is None else f"{value:.1f}s"

    if result.get("reproduce"):
        lines += ["the same figures from the kept recordings:", *("  " + command for command in result["reproduce"]), ""]
    lines.append(
        f"{'ok' if result['ok'] else 'FAIL'}: tuned {t['false_kills']} false kills, {t['missed']} missed, detection p50 "
        f"{p50(t)} (defaults: {d['false_kills']} false kills, {d['missed']} missed, p50 {p50(d)})")
    return "\n".join(lines)

