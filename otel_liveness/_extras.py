"""Errors that name the extra to install when an optional dependency is missing."""

from __future__ import annotations

__all__ = ["install_hint", "missing_extra"]


def missing_extra(exc: ModuleNotFoundError, extra: str, feature: str) -> ModuleNotFoundError:
    """A ``ModuleNotFoundError`` (the same ``name``) saying which extra brings what ``feature`` needs:
    raise it ``from exc``."""
    module = exc.name or "a dependency"
    return ModuleNotFoundError(f"{feature} needs {module}, which is not installed: {install_hint(extra)}", name=exc.name)


def install_hint(extra: str) -> str:
    """How to install ``extra``: by name once released, from the checkout before (the README's
    "Install")."""
    return f"pip install 'otel-liveness[{extra}]' (from a checkout: pip install '.[{extra}]')"
