"""The panels of the "Provider liveness" dashboard as data: titles, kinds and PromQL queries.

Kept apart from the builder code so that tests can parse every query with the real PromQL
parser (promtool) and run it against the end-to-end Prometheus, and so that the preview renderer
draws exactly what Grafana would query.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEL = 'job=~"$service", gen_ai_provider_name=~"$provider", gen_ai_request_model=~"$model"'
PSEL = 'gen_ai_provider_name=~"$provider"'
RI = "$__rate_interval"

#: RawIdleStorm's threshold, drawn on its panel (collector/rules/liveness.rules.yml).
RAW_IDLE_THRESHOLD = 0.25

#: Durations of the spans whose traces tail sampling kept (the gateway's span_metrics/sampled,
#: namespace traces.sampled.span.metrics): the only series with exemplars, so every exemplar on the
#: dashboard opens a trace the traces backend has. The library's own histograms carry none (the
#: gateway accumulates them across processes).
SAMPLED_DURATION = "traces_sampled_span_metrics_duration_seconds"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    heatmap: bool = False
    exemplar: bool = False


@dataclass(frozen=True)
class PanelSpec:
    title: str
    kind: str  # timeseries | heatmap | table | stat
    queries: tuple[Query, ...]
    unit: str = "short"
    description: str = ""
    row: str = ""
    threshold: float | None = None
    stacked: bool = False
    key: str = ""  # panels cross-checked by the end-to-end test and drawn by the preview
    width: int = 12
    extra: dict[str, object] = field(default_factory=dict)


def _hq(q: float, metric: str, by: str = "") -> str:
    return f"histogram_quantile({q}, sum by (le{by}) (rate({metric}_bucket{{{SEL}}}[{RI}])))"


PANELS: tuple[PanelSpec, ...] = (
    PanelSpec(
        "Attempts per second by outcome", "timeseries",
        (Query(f"sum by (liveness_attempt_outcome) (rate(liveness_attempts_total{{{SEL}}}[{RI}]))",
               "{{liveness_attempt_outcome}}"),),
        unit="reqps", row="Attempts", stacked=True, key="attempts_by_outcome",
        description="Every provider attempt, one series per outcome: completed, raw_silence, provider_error, "
                    "rate_limited, truncated, wall_budget, cancelled... never one blended error rate.",
    ),
    PanelSpec(
        "Requests by stop reason", "timeseries",
        (Query(f"sum by (liveness_stop_reason) (rate(liveness_requests_total{{{SEL}}}[{RI}]))",
               "{{liveness_stop_reason}}"),),
        unit="reqps", row="Attempts", stacked=True, key="requests_by_stop",
        description="What callers saw: completed, truncated, exhausted (ProviderError), rate_limited, wall_budget, rejected.",
    ),
    PanelSpec(
        "Waits: prefill vs thinking (notices)", "timeseries",
        (Query(f"sum by (liveness_notice_kind) (rate(liveness_semantic_notices_total{{{SEL}}}[{RI}]))",
               "{{liveness_notice_kind}}"),),
        unit="short", row="Waits", key="notices",
        description="Notices per second while nothing arrives, by kind: prefill (no byte of the reply yet: the "
                    "provider is still reading a long prompt) and semantic (the stream started, the model is "
                    "thinking). Waits, not failures.",
    ),
    PanelSpec(
        "Time to first byte by prompt size (p95)", "timeseries",
        (Query(_hq(0.95, "liveness_attempt_time_to_first_byte_seconds", ", liveness_request_size_bucket"),
               "{{liveness_request_size_bucket}}"),),
        unit="s", row="Waits", key="ttfb_by_size",
        description="The prefill grows with the prompt (a 1M-token prompt: minutes without a byte); the "
                    "first-byte bound scales with it (docs/configuration.md, first_byte_timeout).",
    ),
    PanelSpec(
        "Heartbeat rate", "timeseries",
        (Query(f"sum by (gen_ai_provider_name) (rate(liveness_heartbeats_total{{{SEL}}}[{RI}]))",
               "{{gen_ai_provider_name}}"),),
        unit="short", row="Waits", key="heartbeats",
        description="Keep-alive frames (pings, SSE comments) per second: the wire is alive.",
    ),
    PanelSpec(
        "Semantic gaps (longest silence per attempt)", "heatmap",
        (Query(f"sum by (le) (rate(liveness_attempt_max_semantic_gap_seconds_bucket{{{SEL}}}[{RI}]))",
               "{{le}}", heatmap=True),),
        unit="s", row="Waits", key="semantic_gaps",
    ),
    PanelSpec(
        "Time to first semantic frame", "timeseries",
        (Query(_hq(0.5, "gen_ai_client_operation_time_to_first_chunk_seconds"), "p50"),
         Query(_hq(0.95, "gen_ai_client_operation_time_to_first_chunk_seconds"), "p95")),
        unit="s", row="Waits", key="ttfc",
    ),
    PanelSpec(
        "Retries by reason", "timeseries",
        (Query(f"sum by (liveness_retry_reason) (rate(liveness_retries_total{{{SEL}}}[{RI}]))",
               "{{liveness_retry_reason}}"),),
        unit="short", row="Retries", stacked=True, key="retries_by_reason",
        description="Retries made inside the transport, below the transcript: invisible to the agent.",
    ),
    PanelSpec(
        "Retry delay", "timeseries",
        (Query(_hq(0.5, "liveness_retry_delay_seconds"), "p50"), Query(_hq(0.95, "liveness_retry_delay_seconds"), "p95")),
        unit="s", row="Retries", key="retry_delay",
    ),
    PanelSpec(
        "Retries shed by the retry budget", "timeseries",
        (Query(f"sum by (liveness_retry_reason) (rate(liveness_retries_denied_total{{{SEL}}}[{RI}]))",
               "shed: {{liveness_retry_reason}}"),
         Query(f'min by (gen_ai_provider_name) (liveness_retry_budget_fill_ratio{{job=~"$service", {PSEL}}})',
               "budget left: {{gen_ai_provider_name}}")),
        unit="short", row="Retries", key="retries_shed",
        description="Retries that were due but the provider host's retry budget refused (the request ended with its "
                    "error, stop reason retry_budget): the fleet shedding load from a provider that is down. Beside "
                    "them, the lowest budget a process reported, as a fraction of its capacity (retries stop at 0.5). "
                    "Alert: RetriesShed.",
    ),
    PanelSpec(
        "Attempts per request", "timeseries",
        (Query(f"sum(rate(liveness_attempts_total{{{SEL}}}[{RI}])) / sum(rate(liveness_requests_total{{{SEL}}}[{RI}]))",
               "attempts/request"),),
        unit="short", row="Retries", key="attempts_per_request",
    ),
    PanelSpec(
        "Candidates: kills and false kills beside the enforced policy's", "timeseries",
        (Query(f"sum by (liveness_candidate_name, liveness_candidate_verdict) "
               f"(rate(liveness_candidate_verdicts_total{{{SEL}, "
               f"liveness_candidate_verdict=~\"kill|false_kill|missed\"}}[{RI}]))",
               "{{liveness_candidate_name}} {{liveness_candidate_verdict}}"),
         Query(f"sum(rate(liveness_attempts_total{{{SEL}, liveness_attempt_outcome=~\"raw_silence|semantic_timeout\"}}[{RI}]))"
               f" or vector(0)", "enforced kill")),
        unit="short", row="Candidates", key="candidate_kills",
        description="The policy canary (Policy.candidates, OTEL_LIVENESS_CANDIDATES): each candidate policy judged "
                    "live on every attempt the enforced policy judged, enforcing nothing. kill: it would have ended "
                    "the attempt for silence; false_kill: of those, streams that were alive after; missed: attempts "
                    "that went silent for good and it would not have ended. Beside them, the attempts the enforced "
                    "policy ended for silence. The same counts as otel-liveness whatif over the same attempts.",
    ),
    PanelSpec(
        "Candidates over the dashboard's range", "table",
        (Query(f"sum by (liveness_candidate_name, liveness_candidate_verdict) "
               f"(increase(liveness_candidate_verdicts_total{{{SEL}}}[$__range]))",
               "{{liveness_candidate_name}} {{liveness_candidate_verdict}}", instant=True),),
        row="Candidates", key="candidate_table",
        description="Per candidate: attempts judged, kills, false kills, retries it would have made (upload), "
                    "dead attempts caught and missed, and faults of the canary itself, over the time range.",
    ),
    PanelSpec(
        "Candidates: detection gain (p50)", "timeseries",
        (Query(f"histogram_quantile(0.5, sum by (le, liveness_candidate_name, liveness_candidate_shift) "
               f"(rate(liveness_candidate_detection_shift_seconds_bucket{{{SEL}}}[{RI}])))",
               "{{liveness_candidate_name}} {{liveness_candidate_shift}}"),),
        unit="s", row="Candidates", key="candidate_gain",
        description="For dead attempts (silent for good, or cut by the enforced policy's kill of silence): how much "
                    "sooner (or later) than they ended each candidate would have ended them. A candidate worth "
                    "enforcing: sooner, with no false kills.",
    ),
    PanelSpec(
        "Truncations", "timeseries",
        (Query(f"sum by (gen_ai_provider_name) (rate(liveness_truncations_total{{{SEL}}}[{RI}]))",
               "{{gen_ai_provider_name}}"),),
        unit="short", row="Truncations", key="truncations",
        description="Replies cut after content was released (StreamTruncated: one model-visible continuation each).",
    ),
    PanelSpec(
        "Truncation share", "timeseries",
        (Query(f"sum(rate(liveness_truncations_total{{{SEL}}}[{RI}])) / sum(rate(liveness_requests_total{{{SEL}}}[{RI}]))",
               "share"),),
        unit="percentunit", row="Truncations", key="truncation_share",
    ),
    PanelSpec(
        "RawIdleStorm ratio (attempts dying of raw silence)", "timeseries",
        (Query(f"liveness:raw_idle_ratio:rate2m{{{PSEL}}}", "2m {{gen_ai_provider_name}}"),
         Query(f"liveness:raw_idle_ratio:rate10m{{{PSEL}}}", "10m {{gen_ai_provider_name}}")),
        unit="percentunit", row="Alerts", threshold=RAW_IDLE_THRESHOLD, key="raw_idle_ratio",
        description="The alert fires when both windows stay above the line at more than 20 attempts a minute.",
    ),
    PanelSpec(
        "Firing alerts", "table",
        (Query('ALERTS{alertstate="firing", alertname=~"RawIdleStorm|RetryStorm|RateLimitStorm|TruncationSpike|WaitAnomaly"}',
               "{{alertname}}", instant=True),),
        row="Alerts", key="alerts",
    ),
    PanelSpec(
        "Attempt durations", "heatmap",
        (Query(f"sum by (le) (rate(liveness_attempt_duration_seconds_bucket{{{SEL}}}[{RI}]))", "{{le}}", heatmap=True),),
        unit="s", row="Durations", width=24, key="attempt_durations",
        description="A fixed watchdog shows up as a band at a constant duration: the policy shining through.",
    ),
    PanelSpec(
        "Operation duration (all attempts)", "timeseries",
        (Query(_hq(0.5, "gen_ai_client_operation_duration_seconds"), "p50"),
         Query(_hq(0.95, "gen_ai_client_operation_duration_seconds"), "p95")),
        unit="s", row="Durations", key="operation_duration",
    ),
    PanelSpec(
        "Attempts in kept traces (exemplars open them)", "timeseries",
        (Query(f"histogram_quantile(0.95, sum by (le, liveness_attempt_outcome) "
               f"(rate({SAMPLED_DURATION}_bucket{{{SEL}, liveness_attempt_outcome!=\"\"}}[{RI}])))",
               "p95 {{liveness_attempt_outcome}}", exemplar=True),),
        unit="s", row="Durations", key="kept_traces",
        description="Attempt durations of the traces tail sampling kept (every failed, retried, truncated or slow "
                    "one and a sample of the rest). Each exemplar links a trace the traces backend has.",
    ),
)

VARIABLES = {
    "service": "label_values(liveness_attempts_total, job)",
    "provider": "label_values(liveness_attempts_total, gen_ai_provider_name)",
    "model": 'label_values(liveness_attempts_total{gen_ai_provider_name=~"$provider"}, gen_ai_request_model)',
}


def substitute(expr: str, rate_interval: str = "1m") -> str:
    """A panel query with Grafana's variables filled in (all values), for promtool and Prometheus."""
    return (expr.replace("$__rate_interval", rate_interval).replace("$__range", "1h").replace('=~"$service"', '=~".*"')
            .replace('=~"$provider"', '=~".*"').replace('=~"$model"', '=~".*"'))
