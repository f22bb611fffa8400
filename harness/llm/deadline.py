"""A total deadline per HTTP attempt, on top of httpx's per-operation timeouts.

httpx's `read` timeout bounds each socket read, not the call: a server that sends its headers and then one
byte every so often keeps a call alive forever. `call_deadline(seconds)` sets a deadline for the calls made
in its block (in this thread); the client's transport then

- clamps connect/read/write/pool timeouts to the time left, so no single wait outlives the deadline;
- arms a shared watchdog that shuts the socket down at the deadline, which wakes a blocked read at once: the
  connection is abandoned (never returned to the pool) and no thread lingers. A connection opened for the call
  is watched from the moment it connects (httpcore's `trace` extension hands over its socket), so a server that
  trickles its *headers* is cut off too; a connection taken from the pool is watched from its response headers;
- raises `httpx.ReadTimeout` ("total deadline") on the body chunk read at or after the deadline, or when the
  watchdog's shutdown ends a read of the headers.

Known limit: on a connection reused from the pool, a server that trickles the headers byte by byte is only bounded
per read. A client that needs every call bounded whole keeps no idle connection (`deadline_client`, the memory
service client).
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import importlib
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import openai


def _sdk_httpx() -> Any:
    """The httpx package the openai SDK is built on (recent SDKs use the `httpx2` fork, older ones `httpx`)."""
    for cls in openai.DefaultHttpxClient.__mro__:
        if cls.__module__.split(".")[0] in ("httpx", "httpx2"):
            return importlib.import_module(cls.__module__.split(".")[0])
    return importlib.import_module("httpx")


if TYPE_CHECKING:  # the fork mirrors httpx's API: type against httpx
    import httpx
else:
    httpx = _sdk_httpx()

_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "llm_call_deadline", default=None
)


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[None]:
    """Calls made through a deadline-aware client in this block must finish within `seconds` (in total)."""
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class _Watchdog:
    """One daemon thread running callbacks at their due time; `cancel` guarantees the callback will not run."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, when: float, fn: Callable[[], None]) -> list[Any]:
        entry = [when, next(self._seq), fn]
        with self._cv:
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="llm-deadline-watchdog", daemon=True)
                self._thread.start()
            self._cv.notify()
        return entry

    def cancel(self, entry: list[Any]) -> None:
        with self._cv:  # the callback runs under this lock, so after cancel() returns it never runs
            entry[2] = None

    def _loop(self) -> None:
        with self._cv:
            while True:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    self._cv.wait(delay)
                    continue
                fn = heapq.heappop(self._heap)[2]
                try:
                    fn()  # only socket.shutdown: quick and non-blocking
                except Exception:
                    pass


_WATCHDOG = _Watchdog()


def _shutdown(sock: socket.socket) -> Callable[[], None]:
    def fire() -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    return fire


def _socket_of(stream: Any) -> socket.socket | None:
    """The socket under an httpcore network stream (None when it has none, e.g. a test transport)."""
    get = getattr(stream, "get_extra_info", None)
    sock = get("socket") if callable(get) else None
    return sock if isinstance(sock, socket.socket) else None


def _timeout_error(request: httpx.Request, seconds: float) -> httpx.ReadTimeout:
    return httpx.ReadTimeout(
        f"total deadline of {seconds:g} s passed before the response was complete", request=request
    )


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(
        self, inner: Any, request: httpx.Request, deadline: float, seconds: float, alarm: list[Any] | None
    ) -> None:
        self._inner, self._request, self._deadline, self._seconds, self._alarm = (
            inner,
            request,
            deadline,
            seconds,
            alarm,
        )

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                if time.monotonic() >= self._deadline:
                    raise _timeout_error(self._request, self._seconds)
                yield chunk
        except httpx.TransportError as e:  # a read woken by the watchdog's shutdown reads as a closed connection
            if isinstance(e, httpx.TimeoutException) or time.monotonic() < self._deadline:
                raise
            raise _timeout_error(self._request, self._seconds) from e
        finally:
            self._disarm()

    def _disarm(self) -> None:
        if self._alarm is not None:
            _WATCHDOG.cancel(self._alarm)
            self._alarm = None

    def close(self) -> None:
        self._disarm()  # before the connection can go back to the pool
        self._inner.close()


class DeadlineTransport(httpx.BaseTransport):
    """Wraps a transport; enforces the deadline set by `call_deadline` (none set: passes through)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        current = _DEADLINE.get()
        if current is None:
            return self._inner.handle_request(request)
        deadline, seconds = current
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timeout_error(request, seconds)
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {
            k: left if timeouts.get(k) is None else min(float(timeouts[k]), left)
            for k in ("connect", "read", "write", "pool")
        }
        armed: list[list[Any]] = []  # the watchdog's alarm, once the connection's socket is known
        outer = request.extensions.get("trace")

        def trace(name: str, info: dict[str, Any]) -> None:
            if name.endswith((".connect_tcp.complete", ".connect_unix_socket.complete")) and not armed:
                if (sock := _socket_of(info.get("return_value"))) is not None:
                    armed.append(_WATCHDOG.arm(deadline, _shutdown(sock)))
            if outer is not None:
                outer(name, info)

        request.extensions["trace"] = trace
        try:
            response = self._inner.handle_request(request)
        except httpx.TransportError as e:
            for entry in armed:
                _WATCHDOG.cancel(entry)
            if isinstance(e, httpx.TimeoutException) or time.monotonic() < deadline:
                raise
            raise _timeout_error(request, seconds) from e  # the watchdog ended a read of the headers
        except BaseException:
            for entry in armed:
                _WATCHDOG.cancel(entry)
            raise
        finally:  # the caller's own (a redirect's request shares these extensions: never a stale watch in them)
            if outer is None:
                request.extensions.pop("trace", None)
            else:
                request.extensions["trace"] = outer
        if armed:
            alarm: list[Any] | None = armed[0]
        else:  # a pooled connection: watched from here
            sock = _socket_of(response.extensions.get("network_stream"))
            alarm = _WATCHDOG.arm(deadline, _shutdown(sock)) if sock is not None else None
        response.stream = _DeadlineStream(response.stream, request, deadline, seconds, alarm)
        return response

    def close(self) -> None:
        self._inner.close()


class DeadlineHttpxClient(openai.DefaultHttpxClient):
    """The SDK's default httpx client, every transport (proxies from the environment too) deadline-aware."""

    # Typed against httpx while recent SDKs subclass the httpx2 fork (same API): the checker sees two packages.
    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx.BaseTransport:  # type: ignore[override]
        return DeadlineTransport(super()._init_transport(*args, **kwargs))  # type: ignore[arg-type]

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx.BaseTransport:  # type: ignore[override]
        return DeadlineTransport(super()._init_proxy_transport(*args, **kwargs))  # type: ignore[arg-type]


def deadline_client(timeout_s: float) -> httpx.Client:
    """A plain HTTP client for a service other than the model (the memory-service client, harness/memory/http.py):
    the SDK's client with a deadline-aware transport, `timeout_s` per operation, and no idle connection kept, so
    every call opens its own connection and `call_deadline` bounds all of it, headers included."""
    no_idle = _sdk_httpx().Limits(max_connections=None, max_keepalive_connections=0)
    client = DeadlineHttpxClient(timeout=timeout_s, limits=no_idle, follow_redirects=True)
    return client  # type: ignore[return-value]  # the SDK's httpx (the fork), typed against httpx (see above)
