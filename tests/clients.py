"""The four ways a caller can drive the transport with a plain client (family x sync/async),
behind one interface, so every wire test runs against all of them."""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import otel_liveness
from otel_liveness import Policy

BODY = {"model": "claude-sim-1", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Result:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    error: BaseException | None = None
    report: dict[str, Any] | None = None
    events: list[Any] = field(default_factory=list)


class PlainClient:
    def __init__(self, family: str, is_async: bool, policy: Policy, hooks: list[Any] | None = None) -> None:
        self.family = family
        self.x = importlib.import_module(family)
        self.is_async = is_async
        self.policy = policy
        self.events: list[Any] = []
        self.hooks = [self.events.append, *(hooks or [])]

    def _transport(self) -> Any:
        inner = self.x.AsyncHTTPTransport() if self.is_async else self.x.HTTPTransport()
        return otel_liveness.wrap(inner, self.policy, hooks=self.hooks)

    async def post(self, url: str, body: dict[str, Any] | None = None, *, read_limit: int | None = None,
                   headers: dict[str, str] | None = None, pause: float = 0.0, decoded: bool = False,
                   follow_redirects: bool = False, first: str | None = None) -> Result:
        """POST and read the body (at most ``read_limit`` bytes, then close early). ``pause``: the
        caller stops reading that long after each chunk (async: blocking its event loop);
        ``decoded``: read content-decoded bytes rather than raw ones; ``first``: a URL the same
        client POSTs to (and reads whole) before, so the request goes out on a reused connection."""
        payload = json.dumps(body if body is not None else BODY).encode()
        hdrs = {"content-type": "application/json", "x-api-key": "sk-ant-SECRET-KEY", **(headers or {})}
        result = Result(events=self.events)
        if self.is_async:
            async with self.x.AsyncClient(transport=self._transport(), timeout=30,
                                          follow_redirects=follow_redirects) as client:
                if first is not None:
                    (await client.post(first, content=payload, headers=hdrs)).raise_for_status()
                try:
                    async with client.stream("POST", url, content=payload, headers=hdrs) as response:
                        self._head(result, response)
                        async for chunk in (response.aiter_bytes() if decoded else response.aiter_raw()):
                            result.body += chunk
                            if read_limit is not None and len(result.body) >= read_limit:
                                break
                            if pause:
                                time.sleep(pause)  # a blocked event loop, not an await
                except Exception as exc:
                    result.error = exc
        else:
            with self.x.Client(transport=self._transport(), timeout=30, follow_redirects=follow_redirects) as client:
                if first is not None:
                    client.post(first, content=payload, headers=hdrs).raise_for_status()
                try:
                    with client.stream("POST", url, content=payload, headers=hdrs) as response:
                        self._head(result, response)
                        for chunk in (response.iter_bytes() if decoded else response.iter_raw()):
                            result.body += chunk
                            if read_limit is not None and len(result.body) >= read_limit:
                                break
                            if pause:
                                time.sleep(pause)
                except Exception as exc:
                    result.error = exc
        return result

    @staticmethod
    def _head(result: Result, response: Any) -> None:
        result.status = response.status_code
        result.headers = dict(response.headers)
        result.report = response.extensions.get("liveness")


CLIENTS = [("httpx", False), ("httpx", True), ("httpx2", False), ("httpx2", True)]


VARIANTS = [
    ("httpx", None), ("httpx", "asyncio"), ("httpx", "trio"),
    ("httpx2", None), ("httpx2", "asyncio"), ("httpx2", "trio"),
]
VARIANT_IDS = [f"{f}-{b or 'sync'}" for f, b in VARIANTS]


def run(variant: tuple[str, str | None], policy: Policy, url: str, *, hooks: list[Any] | None = None,
        **kwargs: Any) -> Result:
    """Make one request with the variant's client and return what the caller saw."""
    family, backend = variant
    client = PlainClient(family, backend is not None, policy, hooks)
    if backend is None:
        coro = client.post(url, **kwargs)
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the sync path awaited something")
    import anyio

    return anyio.run(lambda: client.post(url, **kwargs), backend=backend)
