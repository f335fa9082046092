"""The reference docs stay in sync with the code."""

from __future__ import annotations

import dataclasses
import pathlib

from otel_liveness import Policy
from otel_liveness.core.outcome import AttemptOutcome, StopReason
from otel_liveness.telemetry import semconv as S

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def test_every_policy_field_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text()
    for field in dataclasses.fields(Policy):
        assert f"`{field.name}`" in text or f"`{field.name}`," in text, field.name
        env = "OTEL_LIVENESS_" + field.name.upper()
        assert env in text, env


def test_every_telemetry_name_is_documented() -> None:
    text = (DOCS / "telemetry.md").read_text()
    names = [getattr(S, n) for n in dir(S) if n.isupper() and isinstance(getattr(S, n), str) and n != "SCOPE"]
    names += [spec[0] for n in dir(S) if n.startswith("M_") for spec in [getattr(S, n)]]
    names += list(S.EVENT_KINDS)
    for name in names:
        assert f"`{name}`" in text, name
    for value in list(AttemptOutcome) + list(StopReason):
        assert f"`{value.value}`" in text, value
