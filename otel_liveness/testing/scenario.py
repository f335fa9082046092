"""What the simulated provider plays and what it logs: a :class:`Scenario` of attempt scripts, and
a :class:`RequestLog` for each request it received -- shared by its HTTP/1.1 server
(:mod:`.provider`) and its HTTP/2 sessions (:mod:`.h2server`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RequestLog", "Scenario"]


@dataclass
class Scenario:
    """Attempt scripts: request n of the scenario plays ``attempts[n]`` (the last one repeats);
    with ``cycle=True``, ``attempts[n % len(attempts)]`` (the sequence starts over: each call a
    retrying client makes meets the same failures first)."""

    attempts: Sequence[Sequence[Any]]
    cycle: bool = False

    def script(self, n: int) -> Sequence[Any]:
        if self.cycle:
            return self.attempts[n % len(self.attempts)]
        return self.attempts[min(n, len(self.attempts) - 1)]


@dataclass
class RequestLog:
    scenario: str
    attempt: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    request_id: str
    disconnected: bool = False  # the client went away before the script ended
    finished: bool = False
