"""A pytest plugin for a peer's own test suite (``make peer``, ``scripts/peer.py``): puts the
liveness transport under every httpx/httpx2 client the peer's tests create, for every host, and
records what happened so the runner can compare modes.

Environment:

- ``PEER_MODE``: ``plain`` (nothing instrumented), ``shadow`` or ``enforce``;
- ``PEER_OUT``: a directory; each process writes ``calls-<worker>.json`` (how many requests went
  through a liveness transport's engine, and their attempts -- the proof the transport was in the
  path), and the controller writes ``outcomes.json`` (test id -> passed / failed / skipped / error).

Loaded with ``-p peer_plugin`` after the peer's own early plugins (the anthropic SDK's
``tests._alias_httpx`` makes ``import httpx`` resolve to httpx2 first, as its suite runs).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

_MODE = os.environ.get("PEER_MODE", "plain")
_OUT = Path(os.environ.get("PEER_OUT", "."))
_COUNTS = {"requests": 0, "attempts": 0}
_LOCK = threading.Lock()
_OUTCOMES: dict[str, str] = {}
_INSTRUMENTOR: Any = None


def _count(event: Any) -> None:
    name = type(event).__name__
    if name in ("RequestStarted", "AttemptStarted"):
        with _LOCK:
            _COUNTS["requests" if name == "RequestStarted" else "attempts"] += 1


def pytest_configure(config: pytest.Config) -> None:
    global _INSTRUMENTOR
    if _MODE == "plain":
        return
    from otel_liveness.telemetry.instrumentor import LivenessInstrumentor

    _INSTRUMENTOR = LivenessInstrumentor()
    _INSTRUMENTOR.instrument(enforce=_MODE == "enforce", hosts=["*"], hooks=[_count])


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts with the process's retry budgets full: a test is a unit of work of its own
    (as in the project's suite), so its outcome does not depend on the tests before it on its worker."""
    if _MODE != "plain":
        from otel_liveness.transport._base import BUDGETS

        BUDGETS.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    previous = _OUTCOMES.get(report.nodeid)
    if report.when == "call" or report.failed or report.skipped:
        outcome = "error" if report.failed and report.when != "call" else report.outcome
        if previous in ("failed", "error"):
            return  # a teardown error after a failure: the failure stands
        _OUTCOMES[report.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
    _OUT.mkdir(parents=True, exist_ok=True)
    (_OUT / f"calls-{worker}.json").write_text(json.dumps(_COUNTS))
    if worker == "main":
        (_OUT / "outcomes.json").write_text(json.dumps(_OUTCOMES, indent=0, sort_keys=True))
