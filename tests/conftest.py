from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest

from otel_liveness import Policy
from otel_liveness.testing import SimulatedProvider

# 1 provider second = 10 ms of real time; the policies below are on the same (real) scale.
TIME_SCALE = 0.01

# ``first_byte_timeout=None``: the raw bound applies from the request on (the first-byte phase has
# tests of its own).
FAST = Policy(
    raw_idle_timeout=0.3,
    first_byte_timeout=None,
    semantic_notice_interval=0.1,
    backoff_initial=0.01,
    backoff_max=0.05,
    max_retry_after=1.0,
)


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider(time_scale=TIME_SCALE) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_retry_budgets() -> Iterator[None]:
    """Each test starts with the process's retry budgets full: they are shared by every transport
    of a process (core/memory/budget.py), and one test's outage must not deny the next test's retries."""
    from otel_liveness.transport._base import BUDGETS

    BUDGETS.clear()
    yield


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def no_thread_leak() -> Iterator[None]:
    before = {t.ident for t in threading.enumerate()}
    yield
    after = [t for t in threading.enumerate() if t.ident not in before and t.name != "simulated-provider"]
    assert after == [], f"threads leaked: {after}"


# -- the test loop (docs/testing.md, "Contributing: the test loop") --------------------------------
#
# ``make test`` runs the suite with pytest-xdist, one test module per work unit (``--dist loadfile``:
# a module's tests run on one worker in file order, so its module-scoped fixtures -- a collector,
# Prometheus and Alertmanager, a built helper binary -- start once per run, as in one process).
# - The modules are handed out longest first (``--no-loadscope-reorder`` keeps the order chosen
#   here): what each module took in the last run (the pytest cache, ``file_seconds``), else the
#   figure below, so the long end-to-end modules start at once and the short ones fill in around
#   them.
# - A test marked ``serial`` runs after the parallel pass, alone (``-m serial``, no workers).
# - ``--io-free`` (``make check``) fails any test that opens a socket or starts a program other
#   than this Python: the fast loop stays free of servers, binaries and wall-clock waits.

#: Seconds per module in a parallel run (4 workers) on the 2-core development machine: the order on a
#: fresh clone (CI), before the cache knows better. A new long module belongs here.
MODULE_SECONDS = {
    "tests/test_fleet_e2e.py": 175, "tests/test_no_false_kills.py": 130, "tests/test_topology_e2e.py": 90,
    "tests/test_transport_wire.py": 90, "tests/test_fuzz.py": 75, "tests/test_examples.py": 60,
    "tests/test_collector_e2e.py": 45, "tests/test_http2.py": 40, "tests/test_install.py": 35,
    "tests/test_soak.py": 35, "tests/test_reliability.py": 30, "tests/test_sdk_matrix.py": 25,
    "tests/test_frameworks.py": 25, "tests/test_otel_native.py": 25, "tests/test_bulk.py": 20,
    "tests/test_whatif.py": 20, "tests/test_eventstream.py": 15, "tests/test_demo.py": 15,
    "tests/test_store_e2e.py": 90,
}
CACHE_KEY = "otel-liveness/file_seconds"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--io-free", action="store_true", default=False,
                     help="fail a test that binds or connects a socket or starts a program other than this "
                          "Python (make check: the I/O-free tests)")


def _forbid_io(event: str, args: tuple[object, ...]) -> None:
    if event in ("socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg"):
        raise RuntimeError(f"--io-free: {event}{args[1:]!r} in a test `make check` runs; move the test out of "
                           "CHECK_TESTS (Makefile) or keep it off the network")
    if event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        if executable is None:
            executable = argv[0] if isinstance(argv, (list, tuple)) and argv else argv
        if os.fsdecode(executable) != sys.executable:  # type: ignore[call-overload]
            raise RuntimeError(f"--io-free: subprocess {executable!r} in a test `make check` runs; only this Python "
                               "may be started")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("io_free"):
        sys.addaudithook(_forbid_io)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # only xdist workers: a one-process run keeps the file order
        return
    cache = getattr(config, "cache", None)  # absent with -p no:cacheprovider
    known = {**MODULE_SECONDS, **(cache.get(CACHE_KEY, {}) if cache is not None else {})}
    first_seen = {module: i for i, module in reversed(list(enumerate(_module(item.nodeid) for item in items)))}
    items.sort(key=lambda item: (-known.get(_module(item.nodeid), 0.0), first_seen[_module(item.nodeid)]))


#: Seconds per module in this run, added up from every report (in the controller, which sees every
#: worker's); None when the run does not cover whole modules (-k, a test id, -m other than the
#: parallel pass's), which would record a part as the whole.
_run_seconds: dict[str, float] | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _run_seconds
    config = session.config
    whole = (not config.option.keyword and config.option.markexpr in ("", "not serial")
             and not any("::" in arg for arg in config.args))
    cached = getattr(config, "cache", None) is not None
    _run_seconds = {} if whole and cached and not hasattr(config, "workerinput") else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _run_seconds is not None:
        module = _module(report.nodeid)
        _run_seconds[module] = _run_seconds.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if _run_seconds and cache is not None:
        known = cache.get(CACHE_KEY, {})
        known.update({module: round(seconds, 1) for module, seconds in _run_seconds.items()})
        cache.set(CACHE_KEY, known)
