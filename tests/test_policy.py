from __future__ import annotations

from datetime import timedelta

import pytest

from otel_liveness import InvalidPolicy, Policy


def test_defaults_are_documented_values() -> None:
    p = Policy()
    assert (p.raw_idle_timeout, p.semantic_notice_interval, p.semantic_timeout, p.wall_timeout) == (90.0, 30.0, None, None)
    assert (p.max_attempts, p.max_rate_limit_attempts, p.max_retry_after) == (3, 6, 60.0)
    assert p.raw_idle_timeout_non_streaming is None


def test_timedelta_and_int_durations() -> None:
    p = Policy(raw_idle_timeout=timedelta(seconds=45), wall_timeout=600)
    assert p.raw_idle_timeout == 45.0 and isinstance(p.wall_timeout, float)


def test_frozen() -> None:
    with pytest.raises(AttributeError):
        Policy().max_attempts = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"raw_idle_timeout": 0}, "raw_idle_timeout"),
        ({"raw_idle_timeout": -1.0}, "raw_idle_timeout"),
        ({"wall_timeout": float("nan")}, "wall_timeout"),
        ({"semantic_notice_interval": "30"}, "semantic_notice_interval"),
        ({"semantic_timeout": 10, "semantic_notice_interval": 30}, "semantic_timeout"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_rate_limit_attempts": 2.5}, "max_rate_limit_attempts"),
        ({"max_retry_after": None}, "max_retry_after"),
        ({"backoff_initial": 10, "backoff_max": 1}, "backoff_max"),
        ({"provider": "palm"}, "provider"),
        ({"max_frame_bytes": True}, "max_frame_bytes"),
    ],
)
def test_invalid_values_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidPolicy) as info:
        Policy(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field and str(info.value).startswith(field)
    assert isinstance(info.value, ValueError)


def test_from_env() -> None:
    p = Policy.from_env(
        {
            "OTEL_LIVENESS_RAW_IDLE_TIMEOUT": "30",
            "OTEL_LIVENESS_SEMANTIC_NOTICE_INTERVAL": "off",
            "OTEL_LIVENESS_MAX_ATTEMPTS": "5",
            "OTEL_LIVENESS_SHADOW": "true",
            "OTEL_LIVENESS_PROVIDER": "openai-chat",
            "OTEL_LIVENESS_MODE": "shadow",  # the mode, as OTEL_LIVENESS_SHADOW says it (a contradiction: tested below)
            "PATH": "/bin",
        }
    )
    assert (p.raw_idle_timeout, p.semantic_notice_interval, p.max_attempts, p.shadow, p.provider) == (
        30.0, None, 5, True, "openai-chat",
    )


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"OTEL_LIVENESS_RAW_IDLE": "30"}, "OTEL_LIVENESS_RAW_IDLE"),
        ({"OTEL_LIVENESS_MAX_ATTEMPTS": "lots"}, "OTEL_LIVENESS_MAX_ATTEMPTS"),
        ({"OTEL_LIVENESS_SHADOW": "maybe"}, "OTEL_LIVENESS_SHADOW"),
        ({"OTEL_LIVENESS_MAX_ATTEMPTS": "off"}, "OTEL_LIVENESS_MAX_ATTEMPTS"),
        ({"OTEL_LIVENESS_WALL_TIMEOUT": "-3"}, "wall_timeout"),
    ],
)
def test_from_env_rejects_bad_values(env: dict[str, str], name: str) -> None:
    with pytest.raises(InvalidPolicy) as info:
        Policy.from_env(env)
    assert info.value.field == name


def test_every_field_is_in_exactly_one_group() -> None:
    # The groups docs/configuration.md presents the fields in: none left out, none twice, none stale.
    import dataclasses

    from otel_liveness.core.policy import FIELD_GROUPS

    grouped = [name for names in FIELD_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(f.name for f in dataclasses.fields(Policy))
    assert len(grouped) == len(set(grouped)) and len(FIELD_GROUPS["essentials"]) == 6
    # ... and Policy() takes the essentials alone, by keyword (the constructor is unchanged).
    p = Policy(raw_idle_timeout=120, first_byte_timeout="auto", semantic_notice_interval=15, wall_timeout=900,
               max_attempts=2, shadow=True)
    assert (p.raw_idle_timeout, p.wall_timeout, p.max_attempts, p.shadow) == (120.0, 900.0, 2, True)
