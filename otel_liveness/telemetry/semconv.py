"""Every telemetry name otel-liveness emits, in one place: the contract that the collector
pipeline, the Prometheus rules and the dashboards query. Reused OpenTelemetry conventions
(GenAI, HTTP, error) first; everything else under the ``liveness.*`` namespace, with closed,
low-cardinality value sets (the ``StrEnum``s of :mod:`otel_liveness.core.outcome`).
"""

from __future__ import annotations

from typing import Final

# -- instrumentation scope ---------------------------------------------------------------------------
SCOPE: Final = "otel_liveness"
#: The semantic-conventions version the reused names (``gen_ai.*``, ``http.*``, ``server.*``,
#: ``error.type``) follow, set on the tracer and the meter (OpenTelemetry's convention for
#: instrumentation libraries) so a backend can translate them when the conventions move on.
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.40.0"

# -- reused conventions (attributes) ---------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
HTTP_REQUEST_RESEND_COUNT: Final = "http.request.resend_count"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

# -- project attributes ------------------------------------------------------------------------------
ATTEMPT_OUTCOME: Final = "liveness.attempt.outcome"  # AttemptOutcome
ATTEMPT_PHASE: Final = "liveness.attempt.phase"  # Phase reached
ATTEMPT_RAW_IDLE: Final = "liveness.attempt.raw_idle"  # s, at the end
ATTEMPT_SEMANTIC_IDLE: Final = "liveness.attempt.semantic_idle"  # s, at the end
ATTEMPT_MAX_SEMANTIC_GAP: Final = "liveness.attempt.max_semantic_gap"  # s
ATTEMPT_MAX_RAW_GAP: Final = "liveness.attempt.max_raw_gap"  # s
ATTEMPT_HEARTBEATS: Final = "liveness.attempt.heartbeats"  # exact count
ATTEMPT_NOTICES: Final = "liveness.attempt.notices"  # exact count
ATTEMPT_BYTES: Final = "liveness.attempt.bytes"
ATTEMPT_FIRST_BYTE_BOUND: Final = "liveness.attempt.first_byte_bound"  # s, the bound on the prefill wait
ATTEMPT_RAW_BOUND: Final = "liveness.attempt.raw_bound"  # s, the raw-silence bound at the end (learned when adaptive)
ATTEMPT_MAX_HEARTBEAT_GAP: Final = "liveness.attempt.max_heartbeat_gap"  # s
ATTEMPT_COMPLETION: Final = "liveness.attempt.completion"  # Completion: how a completed attempt ended
REQUEST_SIZE_BUCKET: Final = "liveness.request.size_bucket"  # lt_64k .. ge_4m: the prompt's size class
PROVIDER_REQUEST_ID: Final = "liveness.provider.request_id"  # request-id header
STOP_REASON: Final = "liveness.stop_reason"  # StopReason (request span and requests metric)
RETRY_REASON: Final = "liveness.retry.reason"  # RetryReason
RETRY_DELAY: Final = "liveness.retry.delay"  # s
RETRY_DELAY_SOURCE: Final = "liveness.retry.delay_source"  # DelaySource
RETRY_TIER: Final = "liveness.retry.tier"  # "transient" | "rate_limit"
EVENT_KIND: Final = "liveness.event.kind"  # on every span event; the collector counts by it
NOTICE_NUMBER: Final = "liveness.notice.number"
NOTICE_KIND: Final = "liveness.notice.kind"  # NoticeKind: prefill | semantic
SEMANTIC_IDLE: Final = "liveness.semantic_idle"  # s, on notice events
RAW_IDLE: Final = "liveness.raw_idle"  # s, on notice events
HEARTBEATS_SINCE_SEMANTIC: Final = "liveness.heartbeats_since_semantic"
HEARTBEAT_COUNT: Final = "liveness.heartbeat.count"
HEARTBEATS_DROPPED: Final = "liveness.events.heartbeats_coalesced"  # heartbeat events not recorded
NOTICES_DROPPED: Final = "liveness.events.notices_coalesced"
COMMITTED: Final = "liveness.committed"
ENFORCED: Final = "liveness.enforced"  # false in shadow mode
WALL_BUDGET: Final = "liveness.wall_budget"  # s, the configured budget
MODE: Final = "liveness.mode"  # "enforce" | "shadow"
RETRY_BUDGET_FILL: Final = "liveness.retry_budget.fill"  # the host's budget as a fraction of its capacity
WIRE: Final = "liveness.wire"  # the wire profile: anthropic, vertex, bedrock, bedrock-converse, openai-chat, ...

# -- span event names and their liveness.event.kind values (closed set) ------------------------------
EVENT_HEARTBEAT: Final = "liveness.heartbeat"
EVENT_NOTICE: Final = "liveness.semantic_notice"
EVENT_PREFILL_WAIT: Final = "liveness.prefill_wait"  # a notice before the first body byte
EVENT_RETRY: Final = "liveness.retry_scheduled"
EVENT_RAW_SILENCE: Final = "liveness.raw_silence"
EVENT_SEMANTIC_TIMEOUT: Final = "liveness.semantic_timeout"
EVENT_ERROR: Final = "liveness.provider_error"
EVENT_TRUNCATION: Final = "liveness.truncation"
EVENT_WALL_BUDGET: Final = "liveness.wall_budget"
EVENT_CANCELLED: Final = "liveness.cancelled"
EVENT_RETRY_DENIED: Final = "liveness.retry_denied"  # a retry was due; the host's retry budget refused it
EVENT_KINDS: Final = {
    EVENT_HEARTBEAT: "heartbeat",
    EVENT_NOTICE: "semantic_notice",
    EVENT_PREFILL_WAIT: "prefill_wait",
    EVENT_RETRY: "retry_scheduled",
    EVENT_RAW_SILENCE: "raw_silence",
    EVENT_SEMANTIC_TIMEOUT: "semantic_timeout",
    EVENT_ERROR: "provider_error",
    EVENT_TRUNCATION: "truncation",
    EVENT_WALL_BUDGET: "wall_budget",
    EVENT_CANCELLED: "cancelled",
    EVENT_RETRY_DENIED: "retry_denied",
}

#: The SDK keeps 128 events per span and evicts the oldest. Heartbeat events are capped well below
#: that and notices get their own cap, so terminal events (retry, silence, truncation...) always fit.
MAX_HEARTBEAT_EVENTS: Final = 16
MAX_NOTICE_EVENTS: Final = 100

# -- metrics (name, unit, description) ---------------------------------------------------------------
M_ATTEMPTS: Final = ("liveness.attempts", "{attempt}", "Provider attempts by outcome")
M_REQUESTS: Final = ("liveness.requests", "{request}", "Logical requests by stop reason")
M_HEARTBEATS: Final = ("liveness.heartbeats", "{heartbeat}", "Keep-alive frames (pings, SSE comments) received")
M_NOTICES: Final = ("liveness.semantic_notices", "{notice}",
                    "Notices of waiting without content, by kind (prefill: no body byte yet; semantic: thinking)")
M_RETRIES: Final = ("liveness.retries", "{retry}", "Retries scheduled inside the transport, by reason")
M_RETRIES_DENIED: Final = ("liveness.retries.denied", "{retry}",
                            "Retries that were due but the provider host's retry budget refused, by reason")
M_RETRY_BUDGET: Final = ("liveness.retry_budget.fill", "1",
                         "The provider host's retry budget as a fraction of its capacity: retries stop at or below 0.5")
M_TRUNCATIONS: Final = ("liveness.truncations", "{truncation}", "Replies truncated after content was released")
M_WALL_STOPS: Final = ("liveness.wall_budget_stops", "{stop}", "Requests stopped by their wall-clock budget")
M_ATTEMPT_DURATION: Final = ("liveness.attempt.duration", "s", "Duration of one provider attempt")
M_TTFB: Final = ("liveness.attempt.time_to_first_byte", "s",
                 "Time from sending an attempt to the first byte of its body (its headers, when it has none)")
M_MAX_SEMANTIC_GAP: Final = ("liveness.attempt.max_semantic_gap", "s", "Longest semantic silence within an attempt")
M_RETRY_DELAY: Final = ("liveness.retry.delay", "s", "Delay before a retry")
M_TTFC: Final = ("gen_ai.client.operation.time_to_first_chunk", "s", "Time to the first semantic frame of an attempt")
M_OPERATION_DURATION: Final = ("gen_ai.client.operation.duration", "s", "Duration of a GenAI operation (all attempts)")
M_TOKEN_USAGE: Final = ("gen_ai.client.token.usage", "{token}", "Tokens used")
M_EXPORT_FAILURES: Final = ("liveness.telemetry.export_failures", "{failure}",
                            "Telemetry exports that failed and were dropped (collector down, network)")
M_RECORDER_DROPS: Final = ("liveness.recorder.drops", "{recording}",
                           "Flight-recorder recordings not kept, by reason (write_error, too_large, evicted)")
M_CANDIDATE_VERDICTS: Final = ("liveness.candidate.verdicts", "{attempt}",
                                "Candidate policies' verdicts on the attempts the enforced policy judged "
                                "(the policy canary), by candidate and verdict")
M_CANDIDATE_SHIFT: Final = ("liveness.candidate.detection_shift", "s",
                            "For a dead attempt a candidate policy would have ended: how much sooner "
                            "(liveness.candidate.shift=sooner) or later (later) than it ended")
#: The policy canary's attributes: the candidate's configured name (at most four, validated), its
#: verdict (``judged``, ``kill``, ``false_kill``, ``upload``, ``missed``, ``caught``, ``fault``), and
#: the direction of a detection shift (``sooner``, ``later``).
CANDIDATE_NAME: Final = "liveness.candidate.name"
CANDIDATE_VERDICT: Final = "liveness.candidate.verdict"
CANDIDATE_SHIFT: Final = "liveness.candidate.shift"
#: Why a flight-recorder recording was not kept (on ``liveness.recorder.drops``).
RECORDER_REASON: Final = "liveness.recorder.reason"

#: Bucket advice. The GenAI conventions' duration buckets, extended to half an hour: long-thinking
#: models are silent for many minutes, and a fixed watchdog shows as a band at its threshold.
DURATION_BUCKETS: Final = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
                           81.92, 163.84, 327.68, 655.36, 1310.72, 1800.0)
TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

#: Attributes on metric points (low cardinality only: never ids, never content).
METRIC_ATTRIBUTES: Final = (GEN_AI_PROVIDER_NAME, GEN_AI_REQUEST_MODEL, ATTEMPT_OUTCOME, ERROR_TYPE)

#: Prometheus names as the collector's prometheus exporter writes them (what rules and dashboards
#: query): dots become underscores, counters get ``_total``, second-unit histograms ``_seconds``.
PROMETHEUS: Final = {
    "attempts": "liveness_attempts_total",
    "requests": "liveness_requests_total",
    "heartbeats": "liveness_heartbeats_total",
    "notices": "liveness_semantic_notices_total",
    "retries": "liveness_retries_total",
    "retries_denied": "liveness_retries_denied_total",
    "retry_budget": "liveness_retry_budget_fill_ratio",
    "truncations": "liveness_truncations_total",
    "wall_stops": "liveness_wall_budget_stops_total",
    "attempt_duration": "liveness_attempt_duration_seconds",
    "ttfb": "liveness_attempt_time_to_first_byte_seconds",
    "max_semantic_gap": "liveness_attempt_max_semantic_gap_seconds",
    "retry_delay": "liveness_retry_delay_seconds",
    "ttfc": "gen_ai_client_operation_time_to_first_chunk_seconds",
    "operation_duration": "gen_ai_client_operation_duration_seconds",
    "export_failures": "liveness_telemetry_export_failures_total",
    "candidate_verdicts": "liveness_candidate_verdicts_total",
    "candidate_shift": "liveness_candidate_detection_shift_seconds",
}
