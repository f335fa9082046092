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


def test_the_peer_differences_and_their_reasons_agree() -> None:
    # make peer reads the ids from scripts/peer_differences.txt; docs/compatibility.md gives the
    # reasons under the same headings, with the count of each: the two never drift apart.
    import importlib.util
    import re
    import sys

    root = DOCS.parent
    spec = importlib.util.spec_from_file_location("peer", root / "scripts" / "peer.py")
    assert spec is not None and spec.loader is not None
    peer = importlib.util.module_from_spec(spec)
    sys.modules["peer"] = peer  # (its dataclasses look their module up)
    try:
        spec.loader.exec_module(peer)
    finally:
        del sys.modules["peer"]
    data = (root / "scripts" / "peer_differences.txt").read_text()
    ids = peer.documented()
    assert len(ids) == sum(1 for line in data.splitlines() if line.startswith("tests/")) > 100  # one a line, no repeats
    doc = (DOCS / "compatibility.md").read_text()
    section = doc[doc.index("## Enforce mode's intended differences"):]
    reasons = re.findall(r"^#### (.+) \((\d+)\)$", section, flags=re.M)
    listed = re.findall(r"^### (.+) \((\d+)\)$", data, flags=re.M)
    assert reasons == listed and reasons  # the same headings, in the same order, with the same counts
    counted = [len([line for line in block.splitlines() if line.startswith("tests/")])
               for block in re.split(r"^##+ .*$", data, flags=re.M)[1:]]
    assert [int(n) for _, n in listed] == [n for n in counted if n]
    assert not re.search(r"`tests/[^`]+::", section)  # the ids live in the data file only


def test_the_field_table_runs_in_the_policy_groups() -> None:
    # docs/configuration.md's "Every field and variable" lists the fields group by group, in the
    # order of FIELD_GROUPS (a row naming several fields sits where its first one does).
    import re

    from otel_liveness.core.policy import FIELD_GROUPS

    text = (DOCS / "configuration.md").read_text()
    table = text[text.index("| field | env | default | why |"):].split("\n\n")[0]
    firsts = [re.search(r"`([a-z_]+)`", row.split("|")[1]).group(1)  # type: ignore[union-attr]
              for row in table.splitlines()[2:]]
    order = [name for names in FIELD_GROUPS.values() for name in names]
    assert firsts == sorted(firsts, key=order.index) and len(firsts) > 25


#: The prose budget of docs/ (its Markdown pages): each thing said once and linked to, not retold.
DOCS_BUDGET = 160_000


def test_the_docs_stay_within_their_budget() -> None:
    pages = sorted(DOCS.glob("*.md"))
    size = sum(len(page.read_bytes()) for page in pages)
    assert len(pages) >= 10 and size > DOCS_BUDGET // 2, "the pages are found"
    assert size <= DOCS_BUDGET, f"docs/*.md is {size:,} bytes, over its {DOCS_BUDGET:,}: say it once and link to it"
