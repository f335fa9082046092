from __future__ import annotations

import otel_liveness
import otel_liveness.core


def _isort_style(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then everything else (functions, dunders) -- ruff RUF022's order."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2), name


def test_all_is_complete_sorted_and_importable() -> None:
    for module in (otel_liveness, otel_liveness.core):
        names = module.__all__
        public = {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), type(module))}
        assert names == sorted(names, key=_isort_style)
        assert set(names) - {"__version__"} >= public - {"annotations"}
        for name in names:
            assert getattr(module, name) is not None


def test_error_tree() -> None:
    from otel_liveness import (
        FrameTooLarge,
        LivenessError,
        MalformedStream,
        ProviderError,
        RateLimited,
        StreamTruncated,
        WallTimeout,
    )

    assert issubclass(FrameTooLarge, MalformedStream)
    assert issubclass(RateLimited, ProviderError)
    for cls in (StreamTruncated, WallTimeout, ProviderError, MalformedStream):
        assert issubclass(cls, LivenessError)
