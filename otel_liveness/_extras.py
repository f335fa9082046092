"""Errors that name the extra to install when an optional dependency is missing."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(exc: ModuleNotFoundError, extra: str, feature: str) -> ModuleNotFoundError:
    """A ``ModuleNotFoundError`` (the same ``name``) saying which extra brings what ``feature`` needs:
    raise it ``from exc``."""
    module = exc.name or "a dependency"
    return ModuleNotFoundError(
        f"{feature} needs {module}, which is not installed: pip install 'otel-liveness[{extra}]'", name=exc.name)
