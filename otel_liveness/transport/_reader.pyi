"""Type stub of the sync driver's reader in C (``_reader.c``): built beside the C lane, whose
``step`` it calls from C (``otel_liveness/core/wire/lane_api.h``)."""

from collections.abc import Callable, Iterator
from typing import Any

from ..core.wire._lane import Lane

class Reader:
    """A sync body's steady reads in C: while ``body`` has yielded ``steady``, each read of
    ``iterator`` is timed by ``clock()`` and stepped through ``lane``; an admitted read is returned,
    the first other one is sent into ``body`` as ``(now, chunk)`` (the end as ``None``, an exception
    thrown in), and what ``body`` yields next is returned."""

    def __init__(self, lane: Lane, iterator: Iterator[bytes], clock: Callable[[], float], body: Iterator[Any],
                 steady: object) -> None: ...
    def __iter__(self) -> Reader: ...
    def __next__(self) -> bytes: ...
    def close(self) -> None: ...
