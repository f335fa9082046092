"""Which requests the liveness policy applies to: host names and host patterns.

A pattern is a host name in which ``*`` stands for one DNS label or part of one (it never spans a
dot): ``bedrock-runtime.*.amazonaws.com`` matches ``bedrock-runtime.us-east-1.amazonaws.com``
but not ``bedrock-runtime.a.b.amazonaws.com``; ``*-aiplatform.googleapis.com`` matches
``us-east5-aiplatform.googleapis.com``. Matching is case-insensitive; a name without ``*`` is
compared exactly. A lone ``*`` is every host (``OTEL_LIVENESS_HOSTS=*``: the policy for every request of
every instrumented client -- for a gateway of your own, or to run a peer's test suite with the
transport in the path).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["HostMatcher", "host_of"]

_LABEL_PART = "[a-z0-9_-]+"


_HOST = re.compile(r"[a-z0-9_*.-]+|\[[0-9a-f:.]+\]")


def host_of(entry: str) -> str | None:
    """The host an ``OTEL_LIVENESS_HOSTS`` entry names: a host name or pattern as it is, the host of
    a URL (``http://127.0.0.1:8765/v1`` -> ``127.0.0.1``) or of ``host:port``; ``None`` for what
    names no host (the caller warns)."""
    text = entry.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
    if text.startswith("["):  # [IPv6]:port
        text = text.split("]", 1)[0] + "]"
    elif text.count(":") == 1:
        name, _, port = text.partition(":")
        text = name if port.isdigit() else text
    text = text.rstrip(".")
    return text.strip("[]") if text and _HOST.fullmatch(text) else None


class HostMatcher:
    """``host in matcher``: whether a request's host is one of ``patterns``."""

    __slots__ = ("_every", "_exact", "_patterns", "_regex")

    def __init__(self, patterns: Iterable[str]) -> None:
        names = [p.strip().lower().rstrip(".") for p in patterns if p and p.strip()]
        self._patterns = tuple(dict.fromkeys(names))
        self._every = "*" in self._patterns
        self._exact = frozenset(n for n in self._patterns if "*" not in n)
        wild = [n for n in self._patterns if "*" in n]
        self._regex = (re.compile("|".join(_LABEL_PART.join(map(re.escape, n.split("*"))) for n in wild))
                       if wild else None)

    @property
    def patterns(self) -> tuple[str, ...]:
        return self._patterns

    def __contains__(self, host: object) -> bool:
        if not isinstance(host, str):
            return False
        if self._every:
            return True
        host = host.lower().rstrip(".")
        return host in self._exact or (self._regex is not None and self._regex.fullmatch(host) is not None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HostMatcher):
            return set(self._patterns) == set(other._patterns)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._patterns))

    def __repr__(self) -> str:
        return f"HostMatcher({list(self._patterns)!r})"
