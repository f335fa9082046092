"""pytest plugin (installed with the package): the ``simulated_provider`` fixture (a started
:class:`SimulatedProvider`), and every test started with the process's retry budgets full
(:func:`~otel_liveness.testing.reset_retry_budgets`): a failure-heavy test must not shed a later
test's retries, whatever order the tests run in. ``-p no:otel_liveness`` turns the plugin off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import reset_retry_budgets
from .provider import SimulatedProvider


@pytest.fixture(autouse=True)
def _otel_liveness_full_retry_budgets() -> None:
    """Each test starts with the retry budgets of every provider host full."""
    reset_retry_budgets()


@pytest.fixture
def simulated_provider() -> Iterator[SimulatedProvider]:
    """A simulated provider on loopback, time scale 1 (set ``.time_scale`` to speed scripts up)."""
    with SimulatedProvider() as provider:
        yield provider
