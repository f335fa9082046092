"""Top-level members of a JSON request body, found without parsing the body.

The engine learns two things from a request's JSON body: the model it names (a telemetry
attribute) and whether it asks for a stream (``"stream": true``, which picks the raw-silence
bound). Parsing the whole body for them costs what the body costs: a 1M-token prompt is a
4 MB body, and ``json.loads`` of it took 8 ms of CPU and 10 MB of transient objects on the
development machine -- more than the caller's own ``json.dumps`` of it, on every request.

:func:`top_level` walks the body's top-level object instead: the keys are compared as they are
on the wire, and every value is skipped -- a string by searching for its closing quote, an
object or an array by counting brackets outside strings -- so a prompt's text is crossed by
``memchr`` (C) or ``bytes.find`` (this reference), and nothing is built but the few values
asked for. ``_bulk.top_level`` is the same function in C; ``tests/test_members.py`` keeps the
two equal, and equal to ``json.loads`` on well-formed bodies.

What the walk checks: the body is one object (whitespace around it), its members are
``"key": value`` separated by commas, strings end, brackets balance. What it does not check:
the inside of skipped values (numbers, literals, escapes, control characters, which bracket
closes which). So for a body ``json.loads`` would reject, a model may still be named -- a body
the provider will reject too, with a 400. A key written with an escape (``"mod\\u0065l"``) is
not compared: the walk gives up (``None``) and the caller parses the body as before.
"""

from __future__ import annotations

from collections.abc import Callable

from .bulk import PURE

__all__ = ["MAX_NAMES", "NATIVE", "py_top_level", "top_level"]

#: The most names one call looks for (the C one keeps their positions on its stack).
MAX_NAMES = 8

_WS = b" \t\n\r"
_SCALAR_END = frozenset(b",}] \t\n\r")


def _skip_ws(body: bytes, p: int, end: int) -> int:
    while p < end and body[p] in _WS:
        p += 1
    return p


def _skip_string(body: bytes, p: int, end: int) -> int:
    """``body[p]`` is an opening quote: the index after its closing quote, or -1 (unterminated)."""
    start = p = p + 1
    while True:
        q = body.find(b'"', p, end)
        if q < 0:
            return -1
        b = q
        while b > start and body[b - 1] == 0x5C:  # the backslashes right before the quote
            b -= 1
        if (q - b) & 1:  # an odd run escapes it
            p = q + 1
            continue
        return q + 1


def _skip_value(body: bytes, p: int, end: int) -> int:
    """The index after the value at ``body[p]``, or -1 (it does not end)."""
    if p >= end:
        return -1
    c = body[p]
    if c == 0x22:  # "
        return _skip_string(body, p, end)
    if c == 0x7B or c == 0x5B:  # { [
        depth = 0
        while p < end:
            c = body[p]
            if c == 0x22:
                p = _skip_string(body, p, end)
                if p < 0:
                    return -1
                continue
            if c == 0x7B or c == 0x5B:
                depth += 1
            elif c == 0x7D or c == 0x5D:  # } ]
                depth -= 1
                if depth == 0:
                    return p + 1
            p += 1
        return -1
    start = p
    while p < end and body[p] not in _SCALAR_END:
        p += 1
    return p if p > start else -1


def py_top_level(body: bytes, names: tuple[bytes, ...]) -> tuple[bytes | None, ...] | None:
    """For each of ``names`` (keys as they appear between the quotes), the raw value of that
    top-level member of the JSON object ``body`` -- its last occurrence, as ``json.loads`` keeps
    the last -- or ``None`` when it has none. ``None`` for the whole when ``body`` is not one
    object the walk can follow, or a key has an escape (see the module docstring)."""
    if not isinstance(names, tuple) or not all(type(name) is bytes for name in names):
        raise TypeError("top_level(body, names): names must be a tuple of bytes")
    if len(names) > MAX_NAMES:
        raise ValueError(f"top_level: at most {MAX_NAMES} names")
    if type(body) is not bytes:
        body = bytes(memoryview(body))  # (bytearray, memoryview: what the C one reads through the buffer protocol)
    found: list[bytes | None] = [None] * len(names)
    end = len(body)
    p = _skip_ws(body, 0, end)
    if p >= end or body[p] != 0x7B:
        return None
    p = _skip_ws(body, p + 1, end)
    if p < end and body[p] == 0x7D:
        p += 1
    else:
        while True:
            if p >= end or body[p] != 0x22:
                return None
            key_end = _skip_string(body, p, end)
            if key_end < 0:
                return None
            key = body[p + 1:key_end - 1]
            if b"\\" in key:
                return None
            p = _skip_ws(body, key_end, end)
            if p >= end or body[p] != 0x3A:  # :
                return None
            p = _skip_ws(body, p + 1, end)
            value_end = _skip_value(body, p, end)
            if value_end < 0:
                return None
            for i, name in enumerate(names):
                if key == name:
                    found[i] = body[p:value_end]
            p = _skip_ws(body, value_end, end)
            if p < end and body[p] == 0x2C:  # ,
                p = _skip_ws(body, p + 1, end)
                continue
            if p < end and body[p] == 0x7D:
                p += 1
                break
            return None
    if _skip_ws(body, p, end) != end:
        return None  # something after the object
    return tuple(found)


top_level: Callable[[bytes, tuple[bytes, ...]], tuple[bytes | None, ...] | None] = py_top_level
#: Whether :func:`top_level` is the C one (``_bulk.top_level``).
NATIVE = False
if not PURE:
    try:
        from ._bulk import top_level as _native_top_level
    except ImportError:  # pragma: no cover - built without a C compiler
        pass
    else:
        top_level = _native_top_level
        NATIVE = True
