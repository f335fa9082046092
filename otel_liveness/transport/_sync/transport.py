# GENERATED from _async/transport.py by scripts/unasync.py: do not edit.
"""The request loop: the transport's ``handle_request`` runs one request's attempts, doing
the I/O each command of the engine asks for (:mod:`otel_liveness.core.commands`); every decision
is the engine's (:mod:`otel_liveness.core.engine`)."""

from __future__ import annotations

from typing import Any

from ...core.commands import READ, Respond, Send, Sleep
from .._backends import SyncBackend
from .._base import TransportBase, error_for, header_dict, io_failed
from .http2 import install_wakeups
from .network import READING

__all__ = ["SyncLivenessMixin"]


class SyncLivenessMixin(TransportBase):
    """The transport; :func:`otel_liveness.wrap` combines it with the family's base class."""

    _is_async = False
    _backend = SyncBackend

    def __enter__(self) -> Any:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def close(self) -> None:
        self._inner.close()

    def _install_wakeups(self, inner: Any) -> None:
        install_wakeups(inner)

    def handle_request(self, request: Any) -> Any:
        if not self._applies(request):
            return self._inner.handle_request(request)  # not a provider: untouched
        backend = self._backend
        clock = backend.now
        engine = self._engine(request, clock())
        if engine is None:
            return self._inner.handle_request(request)  # not a generation: untouched
        command: Any = engine.start(clock())
        self._answered_from_memory(engine)
        response = iterator = None
        token = READING.set(engine)  # reads made meanwhile wake for this engine (SyncWakingStream)
        try:
            while True:
                if type(command) is Send:
                    _discard(response)
                    response = iterator = None
                    try:
                        with self._send_context():
                            response = self._inner.handle_request(self._attempt_request(request, command))
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                        continue
                    headers = header_dict(response.headers)
                    command = engine.headers(clock(), response.status_code, headers)
                elif command is READ:
                    assert response is not None  # READ comes after the headers
                    if iterator is None:
                        iterator = response.stream.__iter__()
                    try:
                        chunk = iterator.__next__()
                    except StopIteration:
                        command = engine.eof(clock())
                    except Exception as exc:  # noqa: BLE001 - io_failed re-raises what is not an I/O error
                        command = io_failed(self._family, engine, clock(), exc)
                    else:
                        command = engine.received(clock(), chunk)
                elif type(command) is Sleep:
                    _discard(response)
                    response = iterator = None
                    backend.sleep(command.seconds)
                    command = engine.slept(clock())
                elif type(command) is Respond:
                    assert response is not None  # Respond comes after the headers
                    result = self._response(request, engine, response, iterator, command)
                    if response.is_closed:
                        # The inner transport gave a body it had read whole (a response made from
                        # bytes, a mock, a middleware's): ours is read whole too, as it would be.
                        result.read()
                    return result
                else:
                    raise error_for(self._family, request, command, engine.published)
        except BaseException as exc:
            engine.abandoned(clock(), exc)  # nothing if the engine ended it (a Fail it answered)
            _discard(response)
            raise
        finally:
            READING.reset(token)


def _discard(response: Any) -> None:
    if response is not None:
        with SyncBackend.shield():
            response.close()

