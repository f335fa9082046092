"""The seam between the reads that wake (network.py) and HTTP/2 (http2.py): the network stream
knows nothing of HTTP/2; the backend's ``multiplexed`` function (http2.h2_opened) recognises the
preface and takes the stream's reads and writes over from then on."""

from __future__ import annotations

import ast
import pathlib
from typing import Any

from otel_liveness.transport._sync import http2, network

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class _Inner:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.written.append(buffer)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return b"data"


def test_the_preface_hands_the_stream_to_http2() -> None:
    inner = _Inner()
    stream = network.SyncWakingStream(inner, TimeoutError, http2.h2_opened)
    stream.write(b"GET / HTTP/1.1\r\n\r\n")
    assert stream.h2 is None
    stream.write(_PREFACE + b"settings")
    assert isinstance(stream.h2, http2.SyncH2Connection) and stream.h2.network is stream
    assert stream.read(10) == b"data" and inner.written[-1].startswith(_PREFACE)


def test_without_the_function_a_stream_stays_http1() -> None:
    stream: Any = network.SyncWakingStream(_Inner(), TimeoutError)
    stream.write(_PREFACE)
    assert stream.h2 is None


def test_network_imports_nothing_of_http2() -> None:
    for kind in ("_async", "_sync"):
        path = pathlib.Path(network.__file__).parent.parent / kind / "network.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "http2" and "http2" not in (alias.name for alias in node.names)
