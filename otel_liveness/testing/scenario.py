"""What the simulated provider plays and what it logs: a :class:`Scenario` of attempt scripts, and
a :class:`RequestLog` for each request it received -- shared by its HTTP/1.1 server
(:mod:`.provider`) and its HTTP/2 sessions (:mod:`.h2server`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BackgroundScenario", "RequestLog", "Scenario"]

_STARTING_AFTER = re.compile(r"[?&]starting_after=(\d+)")
_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')


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

    def script_for(self, n: int, method: str, target: str) -> Sequence[Any]:
        """The script request ``n`` of the scenario plays (``method`` and ``target`` may choose it)."""
        return self.script(n)


@dataclass
class BackgroundScenario(Scenario):
    """An OpenAI Responses background response the provider keeps: a ``POST`` plays its attempt
    scripts (the stream as it went: whole, or dying part-way); a ``GET .../responses/{id}?stream=true``
    -- the background response's stream -- plays the kept ``events`` whose ``sequence_number`` is
    above ``starting_after`` (all of them without it), each whole, and ends."""

    events: Sequence[Any] = ()  # the response's SSE events as Raw steps, in order

    def script_for(self, n: int, method: str, target: str) -> Sequence[Any]:
        if method != "GET":
            return self.script(n)
        from .steps import Headers, Raw

        found = _STARTING_AFTER.search(target)
        after = int(found.group(1)) if found else -1
        kept = []
        for step in self.events:
            number = _SEQUENCE.search(step.data) if isinstance(step, Raw) else None
            if number is None or int(number.group(1)) > after:
                kept.append(step)
        return [Headers(), *kept]


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
    query: str = ""  # the request target's query string
