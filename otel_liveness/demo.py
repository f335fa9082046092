"""``otel-liveness demo``: an agent-shaped run on the embedded simulated provider.

Each turn is a real anthropic SDK streaming call through the liveness transport (one, an OpenAI
Responses background response read with httpx2), and meets one failure shape of the policy table.
Time is scaled (``--time-scale``): provider seconds and the policy's durations are multiplied by
it, so minutes of thinking take seconds.

The exit status is a self-check: 0 only if every turn behaved as the policy says.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from ._extras import missing_extra
from .core.errors import ProviderError, StreamTruncated, WallTimeout, liveness_error
from .core.events import AttemptEnded, Heartbeats, RetryScheduled, SemanticNotice, Verdict
from .core.policy import Policy, parse_candidate
from .core.wire.anthropic import continuation_message
from .testing import Scenario, SimulatedProvider, anthropic_reply
from .testing import steps as s
from .testing.scripts import anthropic_error, anthropic_status, background_response, sse_event
from .transport._base import BUDGETS

__all__ = ["SCENARIOS", "fleet_failures", "run_demo"]

MODEL = "claude-sim-1"


@dataclass(frozen=True)
class Expect:
    outcome: str  # completed | truncated_then_continued | resumed | wall_budget | provider_failure
    attempts: int  # provider attempts the server receives
    continuations: int = 0  # model-visible continuations the agent makes
    min_notices: int = 0


@dataclass(frozen=True)
class DemoScenario:
    name: str
    title: str
    script: Callable[[float], list[list[Any]]]  # time_scale -> attempt scripts
    expect: Expect
    wall: float | None = None  # provider seconds
    prompt_bytes: int = 0  # pad the turn's prompt to this size (the first-byte bound scales with it)
    fleet_failures: int = 0  # calls of other agents of this process that failed just before the turn
    #: The turn's wire: ``anthropic`` (an anthropic SDK streaming call), or ``responses-background``
    #: (an OpenAI Responses background response read with the agent's own httpx2 client).
    wire: str = "anthropic"


def _continuation_scripts(ts: float) -> list[list[Any]]:
    first_block = [
        s.Raw(sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "text", "text": ""}})),
        s.Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": "I read the three files."}})),
        s.Raw(sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})),
        s.Raw(sse_event("content_block_start", {"type": "content_block_start", "index": 1,
                                                "content_block": {"type": "text", "text": ""}})),
        s.Raw(sse_event("content_block_delta", {"type": "content_block_delta", "index": 1,
                                                "delta": {"type": "text_delta", "text": " The bug is in"}})),
    ]
    stalled = [s.Headers(), anthropic_reply(msg_id="msg_partial")[0], *first_block, s.Stall()]
    resumed = [s.Headers(), *anthropic_reply(" parse_config(): it ignores CRLF.", msg_id="msg_resumed")]
    return [stalled, resumed]


SCENARIOS: list[DemoScenario] = [
    DemoScenario(
        "long_think", "a 3-minute think with only pings (far past a 90 s event watchdog)",
        lambda ts: [[s.Headers(), *anthropic_reply("Here is the plan.", thinking="...", think_pings=36, ping_every=5.0)]],
        Expect("completed", 1, min_notices=4),
    ),
    DemoScenario(
        "large_prompt", "a 4 MiB (about 1M-token) prompt: 3 silent minutes of prefill before the first byte",
        lambda ts: [[s.Sleep(180.0), s.Headers(), *anthropic_reply("Read all of it.", msg_id="msg_large")]],
        Expect("completed", 1, min_notices=5), prompt_bytes=4 * 1024 * 1024,
    ),
    DemoScenario(
        "dead_socket", "a connection that dies before any content (retried invisibly)",
        lambda ts: [[s.Headers(), anthropic_reply()[0], s.Sleep(1.0), s.Reset()],
                    [s.HangBeforeHeaders()],
                    [s.Headers(), *anthropic_reply("Recovered on the third attempt.", msg_id="msg_dead_ok")]],
        Expect("completed", 3),
    ),
    DemoScenario(
        "rate_limit_storm", "a 429 storm with retry-after-ms (the patient tier)",
        lambda ts: [[anthropic_status(429, "rate_limit_error", (("retry-after-ms", str(int(4000 * ts))),))]] * 4
        + [[s.Headers(), *anthropic_reply("Through the rate limit.", msg_id="msg_429_ok")]],
        Expect("completed", 5),
    ),
    DemoScenario(
        "inband_overload", "an in-band overloaded_error before any content",
        lambda ts: [[s.Headers(), anthropic_reply()[0], s.Raw(anthropic_error("overloaded_error"))],
                    [s.Headers(), *anthropic_reply("Served after the overload.", msg_id="msg_overload_ok")]],
        Expect("completed", 2),
    ),
    DemoScenario(
        "stall_after_partial", "a stall after partial text (truncation -> one continuation)",
        _continuation_scripts,
        Expect("truncated_then_continued", 2, continuations=1),
    ),
    DemoScenario(
        "wall_budget", "a reply slower than the harness's 60 s wall budget",
        lambda ts: [[s.Headers(), *anthropic_reply("x" * 60, deltas=60, delta_every=2.0)]],
        Expect("wall_budget", 1), wall=60.0,
    ),
    DemoScenario(
        "exhausted", "a provider that stays overloaded (529) for every attempt",
        lambda ts: [[anthropic_status(529, "overloaded_error")]],
        Expect("provider_failure", 3),
    ),
    DemoScenario(
        "provider_down", "a provider down for every agent: the host's retry budget, spent by other agents' "
        "failures, sheds this call's retries (one attempt, not three)",
        lambda ts: [[anthropic_status(529, "overloaded_error")]],
        Expect("provider_failure", 1), fleet_failures=3,
    ),
    DemoScenario(
        "background_resumed", "an OpenAI Responses background response whose connection is reset mid-event "
        "after content: resumed after the last whole event (starting_after), not truncated, not re-run",
        lambda ts: background_response("The report is ready: three findings.", deltas=6, die_after=7, dead=s.Reset()),
        Expect("resumed", 2), wire="responses-background",
    ),
]


@dataclass
class TurnResult:
    scenario: str
    title: str
    outcome: str = "?"
    text: str = ""
    attempts: int = 0  # provider attempts the server received
    requests: int = 0  # SDK calls the agent made
    continuations: int = 0
    heartbeats: int = 0
    notices: int = 0
    retries: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    truncation_prefix_bytes: int | None = None
    error: str | None = None
    seconds: float = 0.0
    ok: bool = False
    expected: dict[str, Any] = field(default_factory=dict)
    #: The canary's candidates' counts over the turn's attempts (``{name: {verdict: n}}``).
    canary: dict[str, dict[str, int]] = field(default_factory=dict)


#: The demo's policy canary: a candidate judged live on every attempt, enforcing nothing -- the
#: 45 s watchdog on any silence that harnesses use (``otel-liveness whatif``'s ``watchdog-45``).
CANARY = "watchdog-45=raw=45,raw_no_keepalive=45,first_byte=45"


def scale_policy(policy: Policy, ts: float) -> Policy:
    """``policy`` with its clocks in scaled time (``ts`` real seconds per provider second)."""
    changes: dict[str, Any] = {}
    for name in ("raw_idle_timeout", "raw_idle_timeout_no_keepalive", "raw_idle_timeout_non_streaming",
                 "first_byte_base", "first_byte_per_mib", "first_byte_max", "raw_idle_floor",
                 "semantic_notice_interval", "semantic_timeout", "wall_timeout", "first_byte_timeout"):
        value = getattr(policy, name)
        if isinstance(value, float):
            changes[name] = value * ts
    return policy.replace(**changes)


def canary_candidates(ts: float) -> dict[str, Policy]:
    """The demo's candidates, in scaled time."""
    name, policy = parse_candidate(CANARY)
    return {name: scale_policy(policy, ts)}


def scaled_policy(ts: float, *, shadow: bool, wall: float | None) -> Policy:
    base = Policy()
    assert base.raw_idle_timeout and base.raw_idle_timeout_no_keepalive and base.semantic_notice_interval
    return base.replace(
        raw_idle_timeout=base.raw_idle_timeout * ts,
        raw_idle_timeout_no_keepalive=base.raw_idle_timeout_no_keepalive * ts,
        first_byte_base=base.first_byte_base * ts,
        first_byte_per_mib=base.first_byte_per_mib * ts,
        first_byte_max=base.first_byte_max * ts,
        semantic_notice_interval=base.semantic_notice_interval * ts,
        backoff_initial=base.backoff_initial * ts,
        backoff_max=base.backoff_max * ts,
        max_retry_after=base.max_retry_after * ts,
        wall_timeout=wall * ts if wall else None,
        shadow=shadow,
    )


def _telemetry(otlp: str | None) -> tuple[Any, Any, Any, Any, Any]:
    """(hook, span exporter or None, metric reader or None, shutdown, tracer for the agent's turn
    spans or None). The OpenTelemetry SDK is
    an extra (``sdk``): without it the demo runs without the telemetry summary, and ``--otlp``
    raises a ``ModuleNotFoundError`` naming the extra."""
    from .telemetry import TelemetryHook

    exporter = reader = None
    if otlp:
        try:
            from .telemetry.export import otlp_http

            tracer_provider, meter_provider, _, _ = otlp_http(otlp, service_name="otel-liveness-demo",
                                                              export_interval_ms=2000)
        except ModuleNotFoundError as exc:
            raise missing_extra(exc, "sdk", "otel-liveness demo --otlp") from exc
    else:
        try:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        except ImportError:  # the demo still runs, without the telemetry summary
            return None, None, None, lambda: None, None
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        tracer_provider = TracerProvider()
        exporter = InMemorySpanExporter()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    tracer = tracer_provider.get_tracer("otel-liveness-demo")
    return TelemetryHook(tracer_provider, meter_provider, logs=False), exporter, reader, shutdown, tracer


def run_turn(provider: SimulatedProvider, scenario: DemoScenario, ts: float, *, shadow: bool, hooks: list[Any],
             tracer: Any = None, capture_dir: str | None = None) -> TurnResult:
    """One agent turn. ``tracer``: the agent's own, whose span for the turn is current while the
    SDK calls (an application span: without one, and with the SDK's tracing off, the transport
    makes no spans); ``capture_dir``: the flight recorder writes every attempt that did not
    complete there (for ``otel-liveness analyze``)."""
    import anthropic
    import httpx2

    from . import wrap

    result = TurnResult(scenario.name, scenario.title, expected=scenario.expect.__dict__)
    script = scenario.script(ts)
    provider.add(scenario.name, script if isinstance(script, Scenario) else Scenario(script))
    events: list[Any] = []
    policy = scaled_policy(ts, shadow=shadow, wall=scenario.wall).replace(capture_dir=capture_dir,
                                                                          candidates=canary_candidates(ts))
    BUDGETS.clear()  # each turn on its own: the host's retry budget full (core/memory/budget.py) ...
    fleet_failures(provider, scenario, policy)  # ... unless other agents spent it just before
    transport = wrap(httpx2.HTTPTransport(), policy, hooks=[events.append, *hooks])
    http = httpx2.Client(transport=transport, timeout=httpx2.Timeout(600 * ts, connect=5.0))
    client = anthropic.Anthropic(base_url=provider.base_url(scenario.name), api_key="sk-ant-demo-not-a-real-key",
                                 max_retries=0, http_client=http)
    prompt = f"Demo turn: {scenario.name}"
    if scenario.prompt_bytes:
        prompt += " " + "lorem ipsum " * (scenario.prompt_bytes // 12)
    started = time.monotonic()
    turn_span = tracer.start_as_current_span(f"agent turn {scenario.name}") if tracer is not None else nullcontext()
    with turn_span:
        try:
            if scenario.wire == "responses-background":
                _background_turn(http, provider.base_url(scenario.name), prompt, result)
            else:
                _sdk_turn(client, prompt, ts, result)
        finally:
            client.close()
    result.seconds = round(time.monotonic() - started, 3)
    result.attempts = provider.attempts(scenario.name)
    result.heartbeats = sum(e.count for e in events if isinstance(e, Heartbeats))
    result.notices = sum(1 for e in events if isinstance(e, SemanticNotice))
    result.retries = [{"reason": e.reason.value, "delay_provider_s": round(e.delay / ts, 2), "source": e.source.value}
                      for e in events if isinstance(e, RetryScheduled)]
    result.verdicts = [f"{e.kind.value}{'' if e.enforced else ' (observed)'}" for e in events if isinstance(e, Verdict)]
    ends = [e for e in events if isinstance(e, AttemptEnded)]
    for end in ends:
        for candidate in end.candidates:
            counts = result.canary.setdefault(candidate.name, {})
            for verdict in candidate.verdicts:
                counts[verdict] = counts.get(verdict, 0) + 1
    result.stop_reason = ends[-1].report.stop_reason.value if ends and ends[-1].report.stop_reason else None
    result.ok = _check(result, scenario.expect, shadow)
    return result


def _sdk_turn(client: Any, prompt: str, ts: float, result: TurnResult) -> None:
    """The agent's turn as an anthropic SDK streaming call, continued from a truncation's partial
    message (a new call, visible to the model) at most twice."""
    import anthropic

    messages: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(3):  # a continuation is another call, visible to the model
        result.requests += 1
        try:
            with client.messages.stream(model=MODEL, max_tokens=256, messages=messages) as stream:
                result.text += stream.get_final_text()
            result.outcome = "completed" if not result.continuations else "truncated_then_continued"
            break
        except Exception as exc:  # noqa: BLE001 - classified below
            err = liveness_error(exc)
            if isinstance(err, StreamTruncated):
                result.truncation_prefix_bytes = len(err.prefix)
                assistant = continuation_message(err.partial or {})
                if assistant is None:
                    result.outcome, result.error = "truncated", str(err)
                    break
                result.text += "".join(b.get("text", "") for b in assistant["content"])
                messages = [*messages, assistant]
                result.continuations += 1
                continue
            if isinstance(err, WallTimeout):
                result.outcome, result.error = "wall_budget", f"wall budget of {err.budget / ts:g} provider-s"
            elif isinstance(err, ProviderError) or isinstance(exc, anthropic.APIStatusError):
                status = getattr(exc, "status_code", None)
                cause = err.last_cause if isinstance(err, ProviderError) else None
                result.outcome = "provider_failure"
                result.error = f"provider failure: {status or cause}"
            else:
                result.outcome, result.error = "unexpected", f"{type(exc).__name__}: {exc}"
            break


def _background_turn(http: Any, base_url: str, prompt: str, result: TurnResult) -> None:
    """The agent's turn as an OpenAI Responses background response (``"background": true``,
    streamed), read with its own httpx2 client through the transport: the text of every
    ``response.output_text.delta`` event, once."""
    result.requests += 1
    body = {"model": "gpt-sim-1", "input": prompt, "stream": True, "background": True}
    try:
        with http.stream("POST", base_url + "/v1/responses", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and '"response.output_text.delta"' in line:
                    result.text += json.loads(line[6:])["delta"]
            report = response.extensions["liveness"]
    except Exception as exc:  # noqa: BLE001 - classified as the SDK turn's are
        err = liveness_error(exc)
        result.outcome, result.error = ("truncated" if isinstance(err, StreamTruncated) else "unexpected"), str(exc)
        return
    resumed = report.get("resumes", 0) and report["stop_reason"] == "completed"
    result.outcome = "resumed" if resumed else str(report["stop_reason"])


def fleet_failures(provider: SimulatedProvider, scenario: DemoScenario, policy: Policy) -> None:
    """Other agents of this process whose calls to the same host failed just before the turn
    (``fleet_failures``), each with the turn's own failure, through transports of their own (no
    telemetry: they are not the turn's)."""
    if not scenario.fleet_failures:
        return
    import anthropic
    import httpx2

    from . import wrap

    name = f"{scenario.name}-fleet"
    provider.add(name, Scenario(scenario.script(1.0)))
    quiet = policy.replace(capture_dir=None, candidates=None)
    for _ in range(scenario.fleet_failures):
        client = anthropic.Anthropic(base_url=provider.base_url(name), api_key="sk-ant-demo-not-a-real-key", max_retries=0,
                                     http_client=httpx2.Client(transport=wrap(httpx2.HTTPTransport(), quiet, telemetry=False)))
        try:
            client.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "another agent"}])
        except Exception:  # noqa: BLE001 - the failure is the point: it spends the host's budget
            pass
        finally:
            client.close()


def _check(result: TurnResult, expect: Expect, shadow: bool) -> bool:
    if shadow:
        # Observe only: the transport never retries or rewrites anything; what it saw is reported.
        return result.attempts == result.requests
    return (
        result.outcome == expect.outcome
        and result.attempts == expect.attempts
        and result.continuations == expect.continuations
        and result.notices >= expect.min_notices
    )


def _span_summary(exporter: Any, reader: Any) -> dict[str, Any]:
    from collections import Counter

    from .telemetry import semconv as S

    spans = list(exporter.get_finished_spans())
    attempts = [sp for sp in spans if S.HTTP_REQUEST_RESEND_COUNT in sp.attributes and sp.name.startswith(("POST", "GET"))]
    kinds: Counter[str] = Counter(e.attributes.get(S.EVENT_KIND, "?") for sp in attempts for e in sp.events)
    outcomes = Counter(sp.attributes.get(S.ATTEMPT_OUTCOME, "?") for sp in attempts)
    metrics: dict[str, float] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name.startswith("liveness.") and hasattr(m.data, "is_monotonic"):
                    metrics[m.name] = sum(p.value for p in m.data.data_points)
    return {"spans": len(spans), "attempt_spans": len(attempts), "attempt_outcomes": dict(outcomes),
            "span_events": dict(kinds), "counters": metrics}


def run_demo(*, names: list[str] | None = None, time_scale: float = 0.02, shadow: bool = False,
             otlp: str | None = None, out: Any = sys.stdout, as_json: bool = False,
             rounds: int = 1, capture_dir: str | None = None) -> tuple[int, dict[str, Any]]:
    """Run the turns; (exit status, result). Raises ``ModuleNotFoundError`` naming the extra when
    the anthropic SDK (``anthropic``) or, for ``otlp``, the OpenTelemetry SDK (``sdk``) is missing."""
    try:
        import anthropic  # noqa: F401 - every turn is an anthropic SDK call
        import httpx2  # noqa: F401
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "anthropic", "otel-liveness demo") from exc
    chosen = [sc for sc in SCENARIOS if not names or sc.name in names] * rounds
    hook, exporter, reader, shutdown, tracer = _telemetry(otlp)
    turns: list[TurnResult] = []
    def say(*args: Any) -> None:
        if not as_json:
            print(*args, file=out, flush=True)

    say(f"otel-liveness demo: {len(chosen)} turns on the simulated provider "
        f"(time scale {time_scale:g}: 1 provider-minute = {60 * time_scale:.1f} s){' [shadow mode]' if shadow else ''}")
    with SimulatedProvider(time_scale=time_scale) as provider:
        for scenario in chosen:
            say(f"  - {scenario.name}: {scenario.title} ...")
            turn = run_turn(provider, scenario, time_scale, shadow=shadow, hooks=[hook] if hook else [], tracer=tracer,
                            capture_dir=capture_dir)
            turns.append(turn)
            say(f"    {'ok ' if turn.ok else 'FAIL'} {turn.outcome}: {turn.attempts} provider attempt(s), "
                f"{turn.heartbeats} heartbeats, {turn.notices} notices, {len(turn.retries)} retries ({turn.seconds:.2f}s)")
    shutdown_summary = _span_summary(exporter, reader) if exporter is not None else None
    shutdown()
    accounting = {
        "turns": len(turns),
        "agent_requests": sum(t.requests for t in turns),
        "provider_attempts": sum(t.attempts for t in turns),
        "model_visible_continuations": sum(t.continuations for t in turns),
        "provider_failures": sum(1 for t in turns if t.outcome == "provider_failure"),
        "wall_budget_stops": sum(1 for t in turns if t.outcome == "wall_budget"),
        "no_reply": sum(1 for t in turns if t.outcome in ("unexpected", "truncated")),
        "fake_continue_turns": 0,
    }
    ok = all(t.ok for t in turns)
    result = {"ok": ok, "time_scale": time_scale, "shadow": shadow, "turns": [t.__dict__ for t in turns],
              "accounting": accounting, "telemetry": shutdown_summary, "otlp": otlp, "capture_dir": capture_dir}
    if as_json:
        print(json.dumps(result, indent=2), file=out)
    else:
        _render(turns, accounting, shutdown_summary, ok, out, otlp=otlp, capture_dir=capture_dir)
    return (0 if ok else 1), result


#: What the columns of the demo's table mean (printed under it, and in ``demo --help``).
COLUMNS = (
    ("turn", "the scenario: one agent turn, a real anthropic SDK streaming call through the transport"),
    ("outcome", "what the agent got: completed, truncated_then_continued, resumed, wall_budget, provider_failure"),
    ("att", "provider attempts the simulated provider received (the transport's retries below the SDK included)"),
    ("hb", "heartbeats (pings) the transport saw on the wire"),
    ("ntc", "notices: 30 provider-seconds of semantic silence (no text, thinking or tool call) -- told, never killed"),
    ("retries", "the transport's retries: reason:delay before the retry, in provider seconds"),
    ("stop", "the stop reason of the turn's last request (its liveness report)"),
    ("prefix", "bytes released to the SDK before a truncation: the continuation goes on from them"),
)


def _next_steps(otlp: str | None, capture_dir: str | None) -> list[str]:
    """What to look at after the demo."""
    if capture_dir:
        analyze = (f"otel-liveness analyze {capture_dir}/<file>.jsonl   replay an attempt the flight recorder "
                   "wrote, under the bounds it ran with")
    else:
        analyze = ("otel-liveness demo --capture-dir DIR, then otel-liveness analyze DIR/<file>.jsonl   replay a "
                   "failed attempt through the engine")
    dashboards = ("the dashboards: docker compose up, then Grafana at http://localhost:3000 (\"Provider liveness\")"
                  + ("" if otlp else "; this demo exports into it with --otlp http://localhost:4318"))
    return [
        "next:",
        "  " + analyze,
        "  otel-liveness serve --scenario dead_socket   this provider as a server, for your own agent (docs/testing.md)",
        "  " + dashboards,
        "  docs: README.md (quick starts), docs/configuration.md (every bound), docs/telemetry.md (every span, "
        "event and metric), docs/tuning.md (bounds from your own fleet: make tune-demo)",
    ]


def _retries_cell(retries: list[dict[str, Any]], width: int) -> str:
    """The retries of a turn in ``width`` characters: a run of the same reason once with its delays
    (``rate_limited:4,4,4,4``); what does not fit is counted (``+2 more``), never cut mid-word."""
    runs: list[tuple[str, list[str]]] = []
    for r in retries:
        delay = f"{r['delay_provider_s']:g}"
        if runs and runs[-1][0] == r["reason"]:
            runs[-1][1].append(delay)
        else:
            runs.append((r["reason"], [delay]))
    parts = [f"{reason}:{','.join(delays)}" for reason, delays in runs]
    if not parts:
        return "-"
    for shown in range(len(parts), 0, -1):
        cell = ", ".join(parts[:shown]) + ("" if shown == len(parts) else f", +{len(parts) - shown} more")
        if len(cell) <= width:
            return cell
    return f"{len(retries)} retries"


def _canary_line(turns: list[TurnResult]) -> str:
    """What the canary's candidate would have done to the demo's attempts (judged live, enforced nowhere)."""
    totals: dict[str, dict[str, int]] = {}
    for t in turns:
        for name, counts in t.canary.items():
            row = totals.setdefault(name, {})
            for verdict, n in counts.items():
                row[verdict] = row.get(verdict, 0) + n
    lines = []
    for name, row in totals.items():
        g = row.get
        lines.append(f"canary: candidate {name} (judged live on every attempt, enforcing nothing) would have killed "
                     f"{g('kill', 0)} of {g('judged', 0)} attempts, {g('false_kill', 0)} of them streams that were "
                     f"alive (false kills), and missed {g('missed', 0)} that went silent "
                     "(liveness.candidate.verdicts; docs/tuning.md, 'The policy canary')")
    return "\n".join(lines)


def _render(turns: list[TurnResult], accounting: dict[str, Any], telemetry: dict[str, Any] | None, ok: bool, out: Any,
            *, otlp: str | None = None, capture_dir: str | None = None) -> None:
    def p(*args: Any) -> None:
        print(*args, file=out)

    p()
    header = (f"{'turn':<20} {'outcome':<25} {'att':>3} {'hb':>4} {'ntc':>3} {'retries (reason:delay provider-s)':<44} "
              f"{'stop':<10} {'prefix':>6}")
    p(header)
    p("-" * len(header))
    for t in turns:
        retries = _retries_cell(t.retries, 44)
        prefix = "-" if t.truncation_prefix_bytes is None else str(t.truncation_prefix_bytes)
        p(f"{t.scenario:<20} {t.outcome + ('' if t.ok else ' (!)'):<25} {t.attempts:>3} {t.heartbeats:>4} {t.notices:>3} "
          f"{retries:<44} {(t.stop_reason or '-'):<10} {prefix:>6}")
    p()
    for name, meaning in COLUMNS[1:]:
        p(f"  {name:<8} {meaning}")
    p()
    a = accounting
    p(f"accounting: {a['turns']} turns, {a['agent_requests']} agent calls, {a['provider_attempts']} provider attempts, "
      f"{a['model_visible_continuations']} model-visible continuation(s), {a['provider_failures']} provider failure(s) "
      f"reported as provider failures, {a['wall_budget_stops']} wall-budget stop(s), {a['no_reply']} 'no reply', "
      f"{a['fake_continue_turns']} fake 'please continue' turns")
    if telemetry:
        p(f"telemetry: {telemetry['attempt_spans']} attempt spans {telemetry['attempt_outcomes']}; "
          f"span events {telemetry['span_events']}")
        p("counters: " + ", ".join(f"{k}={v:g}" for k, v in sorted(telemetry["counters"].items())))
        events, counted = telemetry["span_events"].get("heartbeat", 0), telemetry["counters"].get("liveness.heartbeats", 0)
        if events < counted:
            from .telemetry.semconv import MAX_HEARTBEAT_EVENTS

            p(f"  ({events} heartbeat span events for {counted:g} heartbeats: an attempt span records the first "
              f"{MAX_HEARTBEAT_EVENTS} reads that carried heartbeats as events and counts the rest in "
              "liveness.events.heartbeats_coalesced; the liveness.heartbeats counter and each span's "
              "liveness.attempt.heartbeats are exact)")
    elif otlp:
        p(f"telemetry: sent over OTLP/HTTP to {otlp}")
    else:
        p("telemetry: no summary -- the OpenTelemetry SDK is not installed (pip install 'otel-liveness[sdk]'; "
          "from a checkout '.[sdk]'); the transport's telemetry goes through the API, a no-op without it")
    canary = _canary_line(turns)
    if canary:
        p(canary)
    p()
    p("self-check: " + ("every turn behaved as the policy says" if ok else "SOME TURNS DID NOT BEHAVE AS EXPECTED"))
    p()
    for line in _next_steps(otlp, capture_dir):
        p(line)
