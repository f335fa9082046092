"""Every example under examples/ and every block marked runnable in the README, docs/reference.md and
docs/testing.md, against the simulated provider."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from otel_liveness.testing import SimulatedProvider, anthropic_reply, openai_chat_reply
from otel_liveness.testing import steps as s
from otel_liveness.testing.scripts import BEDROCK_HEADERS, bedrock_reply

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with SimulatedProvider(time_scale=0.01) as provider:
        provider.add("ex", [[s.Headers(), *anthropic_reply("Example answer.", think_pings=3)]])
        provider.add("ex-openai", [[s.Headers(), *openai_chat_reply("Example answer.")]])
        provider.add("ex-bedrock", [[BEDROCK_HEADERS, *bedrock_reply("Example answer.")]])
        provider.add("ex-vertex", [[s.Headers(), *anthropic_reply("Example answer.")]])
        yield provider


def run(code_or_path: str | pathlib.Path, server: SimulatedProvider) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-example", "ANTHROPIC_BASE_URL": server.base_url("ex"),
           "OPENAI_API_KEY": "sk-example", "OPENAI_BASE_URL": server.base_url("ex-openai") + "/v1",
           "ANTHROPIC_BEDROCK_BASE_URL": server.base_url("ex-bedrock"), "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
           "AWS_SECRET_ACCESS_KEY": "example", "ANTHROPIC_VERTEX_BASE_URL": server.base_url("ex-vertex"),
           "GOOGLE_ACCESS_TOKEN": "example-token"}
    args = [sys.executable, str(code_or_path)] if isinstance(code_or_path, pathlib.Path) else [sys.executable, "-c", code_or_path]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)


# What each example prints against the scenario above (the reply, after three pings).
EXPECTED = {
    "anthropic_async.py": ["Example answer."],
    "anthropic_sync.py": ["Example answer.", "3 heartbeats"],
    "openai_chat.py": ["Example answer."],
}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path: pathlib.Path, server) -> None:  # type: ignore[no-untyped-def]
    proc = run(path, server)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    if path.name == "plain_httpx.py":
        # Every liveness fact as it happens, then the stop reason; the pings arrive in one to
        # three reads (a read may carry more than one), one Heartbeats event per read.
        assert lines[:2] == ["RequestStarted", "AttemptStarted"] and lines[-3:] == ["AttemptEnded", "RequestEnded", "completed"]
        assert 1 <= len(lines[2:-3]) <= 3 and set(lines[2:-3]) == {"Heartbeats"}, lines
    else:
        assert lines == EXPECTED[path.name], lines


def readme_blocks() -> list[str]:
    """The blocks marked runnable in the README, docs/reference.md (its further quick starts) and docs/testing.md."""
    blocks: list[str] = []
    for page in (ROOT / "README.md", ROOT / "docs" / "reference.md", ROOT / "docs" / "testing.md"):
        blocks += re.findall(r"<!-- runnable -->\s*```python\n(.*?)```", page.read_text(), re.S)
    return blocks


def test_readme_has_runnable_blocks() -> None:
    assert len(readme_blocks()) >= 7


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_block_runs(index: int, server) -> None:  # type: ignore[no-untyped-def]
    proc = run(readme_blocks()[index], server)
    assert proc.returncode == 0, proc.stderr[-2000:]
    block = readme_blocks()[index]
    assert proc.stdout.splitlines() == expected_output(block), (block, proc.stdout)


def expected_output(block: str) -> list[str]:
    """What a block prints against the scenarios above, told from what it asks for."""
    if 'provider.attempts("bad-day")' in block:    # docs/testing.md: a bad day, asserted inside
        return ["ok 3 attempts"]
    if "assert" in block:                            # docs/testing.md: asserts, prints nothing
        return []
    if '["provider_name"]' in block:                # the Vertex quick start
        return ["Example answer. gcp.vertex_ai"]
    if '["provider"]' in block:                     # the Bedrock quick start
        return ["Example answer. bedrock"]
    if "heartbeats" in block:
        return ["Example answer.", "completed 3 heartbeats"]
    return ["Example answer."]
