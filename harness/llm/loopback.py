"""An OpenAI-compatible HTTP server on loopback that answers through a `responder(request_json) -> Reply`.

Production code: the replay gate (commands/replay_gate.py) serves recorded responses through it and records
through it as a proxy (harness/llm/fixture.py). The test doubles in harness/testing/ build on it too: real HTTP
through the real openai SDK, with every request kept (unless `record=False`). Only 127.0.0.1 is ever bound.
Transport faults (a connection reset mid-body, a hang past the client's timeout) are `Reply` fields, so a test
can script them.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server sends back: a chat completion body, or an error status / raw body."""

    status: int = 200
    body: Any = None  # dict → JSON; str/bytes → sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before anything is sent; longer than the client's timeout = a hang
    reset_after: int | None = None  # send the headers and this many body bytes, then reset the connection (RST)


def completion(
    content: str | None = "",
    tool_calls: list[dict] | None = None,
    *,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    model: str = "fake-model",
    finish_reason: str | None = None,
) -> Reply:
    """A well-formed chat.completion reply."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [
            {
                "id": tc.get("id", f"call_{i}"),
                "type": "function",
                "function": {
                    "name": tc["name"],
                    "arguments": tc["arguments"] if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"]),
                },
            }
            for i, tc in enumerate(tool_calls)
        ]
    return Reply(
        body={
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": msg, "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


Responder = Callable[[dict[str, Any]], Reply]


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many clients connecting at once (concurrency studies) must not see SYN drops
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout) or a reset we injected is expected here, not worth a traceback


class LoopbackServer:
    """Context manager: `with LoopbackServer(responder) as srv: client(base_url=srv.base_url)`.

    `on_get(path) -> Reply` answers GET requests (default: a one-model `/models` list); `record=False`
    keeps no request log (long benchmark runs).
    """

    def __init__(
        self, responder: Responder, *, on_get: Callable[[str], Reply] | None = None, record: bool = True, port: int = 0
    ):
        self.responder = responder
        self.on_get = on_get
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: with Nagle on, the client's delayed ACK adds ~40 ms a reply.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, reply: Reply) -> None:
                if reply.delay_s and server._stop.wait(reply.delay_s):
                    self.close_connection = True  # shutting down: drop the hung request
                    return
                body = reply.body
                data = (
                    body
                    if isinstance(body, bytes)
                    else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                )
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if reply.reset_after is not None:
                    self.wfile.write(data[: reply.reset_after])
                    self.wfile.flush()
                    # SO_LINGER 0: close() sends RST instead of FIN, the client sees a reset mid-body
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                self.wfile.write(data)

            def do_GET(self) -> None:
                if server.on_get is not None:
                    self._send(server.on_get(self.path))
                    return
                self._send(Reply(body={"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                req["_path"] = self.path
                req["_auth"] = self.headers.get("Authorization")
                if server.record:
                    with server._lock:
                        server.requests.append(req)
                try:
                    reply = server.responder(req)
                except Exception as e:  # a broken script must be visible, not a hung client
                    reply = Reply(status=500, body={"error": {"message": f"responder failed: {e}"}})
                self._send(reply)

        self._httpd = _Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
