"""pytest plugin: the ``simulated_provider`` fixture (a started :class:`SimulatedProvider`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .provider import SimulatedProvider


@pytest.fixture
def simulated_provider() -> Iterator[SimulatedProvider]:
    """A simulated provider on loopback, time scale 1 (set ``.time_scale`` to speed scripts up)."""
    with SimulatedProvider() as provider:
        yield provider
