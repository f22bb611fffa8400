"""A loopback HTTP server that writes raw bytes, for faults a well-behaved server cannot produce: a reply trickled
a byte at a time (headers or body), a body shorter than its Content-Length."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

Script = Callable[[socket.socket, threading.Event], None]


class RawServer:
    """Per connection: reads one request whole, then `reply(conn, stop)` writes anything. `abandoned_at`: when a
    client went away mid-reply (a write failed), e.g. because a deadline shut its socket down."""

    def __init__(self, reply: Script) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.abandoned_at: list[float] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = [h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
            length = int(lines[0].split(b":", 1)[1]) if lines else 0
            while len(body) < length and (chunk := conn.recv(65536)):
                body += chunk
            try:
                self.reply(conn, self.stop)
            except OSError:
                self.abandoned_at.append(time.monotonic())

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.sock.close()


def trickle(every_s: float = 0.2, *, headers: bool = False) -> Script:
    """A 200 whose body (or, with `headers`, whose one header line) gets one byte every `every_s`, forever."""

    def reply(conn: socket.socket, stop: threading.Event) -> None:
        if headers:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
        while not stop.wait(every_s):
            conn.sendall(b"a" if headers else b" ")

    return reply
