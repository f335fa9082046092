from __future__ import annotations

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


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def no_thread_leak() -> Iterator[None]:
    before = {t.ident for t in threading.enumerate()}
    yield
    after = [t for t in threading.enumerate() if t.ident not in before and t.name != "simulated-provider"]
    assert after == [], f"threads leaked: {after}"
