"""Content decoding for the scanner's copy of an encoded stream (pure computation).

httpx and httpx2 ask for ``gzip`` (and ``br``/``zstd`` when their packages are installed) and
decode *above* the transport, so a provider, proxy or gateway that compresses
``text/event-stream`` hands the transport compressed bytes. The transport releases those bytes
untouched (the client decodes them as it would without the transport) and judges liveness on a
decoded copy: heartbeats and content are classified, held bytes are released at the first
content, and a truncation carries the *decoded* prefix.

Why a copy rather than asking for ``Accept-Encoding: identity``: rewriting the caller's request
would not help against servers that compress anyway, and decoding costs little next to the
scanner (``benchmarks/bench_scanner.py`` measures it).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

__all__ = ["Decoder", "UnsupportedEncoding", "decoder_for"]


class UnsupportedEncoding(ValueError):
    """A ``Content-Encoding`` this process cannot decode (the client cannot either)."""


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self._obj = zlib.decompressobj(wbits)
        self._fallback = wbits == zlib.MAX_WBITS  # deflate: zlib-wrapped, or raw as some servers send

    def decode(self, data: bytes) -> bytes:
        try:
            return self._obj.decompress(data)
        except zlib.error:
            if not self._fallback:
                raise
            self._fallback = False
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._obj.decompress(data)

    def flush(self) -> bytes:
        return self._obj.flush()


class _Multi:
    def __init__(self, decoders: list[Decoder]) -> None:
        self._decoders = decoders

    def decode(self, data: bytes) -> bytes:
        for decoder in self._decoders:
            data = decoder.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for decoder in self._decoders:
            data = decoder.decode(data) + decoder.flush()
        return data


class _Brotli:
    def __init__(self) -> None:
        try:
            import brotli
        except ImportError:
            try:
                import brotlicffi as brotli  # either package, under one name
            except ImportError:
                raise UnsupportedEncoding("br (install brotli)") from None
        self._obj = brotli.Decompressor()

    def decode(self, data: bytes) -> bytes:
        if hasattr(self._obj, "decompress"):
            return bytes(self._obj.decompress(data))
        return bytes(self._obj.process(data))

    def flush(self) -> bytes:
        return b""


class _Zstd:
    def __init__(self) -> None:
        try:
            import zstandard
        except ImportError:
            raise UnsupportedEncoding("zstd (install zstandard)") from None
        self._obj = zstandard.ZstdDecompressor().decompressobj()

    def decode(self, data: bytes) -> bytes:
        return bytes(self._obj.decompress(data))

    def flush(self) -> bytes:
        return b""


def _one(name: str) -> Decoder:
    if name in ("gzip", "x-gzip"):
        return _Zlib(zlib.MAX_WBITS | 16)
    if name == "deflate":
        return _Zlib(zlib.MAX_WBITS)
    if name == "br":
        return _Brotli()
    if name == "zstd":
        return _Zstd()
    raise UnsupportedEncoding(name)


class _Checked:
    """A decoder whose failures are ``ValueError`` (the engine's "could not be decoded"), whatever
    the codec library raises (``zlib.error``, ``brotli.error``, ``zstd.ZstdError``)."""

    def __init__(self, inner: Decoder) -> None:
        self._inner = inner

    def decode(self, data: bytes) -> bytes:
        return _as_value_error(self._inner.decode, data)

    def flush(self) -> bytes:
        return _as_value_error(self._inner.flush)


def _as_value_error(call: Callable[..., bytes], *args: bytes) -> bytes:
    try:
        return call(*args)
    except ValueError:
        raise
    except Exception as exc:  # each codec library has its own error class (re-raised as ValueError)
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc


def decoder_for(content_encoding: str) -> Decoder | None:
    """A decoder for a ``Content-Encoding`` header value (``None``: identity). Codings applied in
    order are undone in reverse. Raises :class:`UnsupportedEncoding` for one it cannot undo."""
    names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
    names = [n for n in names if n != "identity"]
    if not names:
        return None
    decoders = [_one(n) for n in reversed(names)]
    return _Checked(decoders[0] if len(decoders) == 1 else _Multi(decoders))
