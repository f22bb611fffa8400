"""A recorded-response fixture (JSONL) and the loopback endpoints that record and replay it.

The replay gate (docs/ci-gate.md) runs the whole benchmark against `replay_responder`: every request the
harness sends is looked up by its content (the OpenAI request body, canonical JSON) and answered with the
recorded response; a request that was never recorded is answered with HTTP 400 naming it, so a changed prompt,
tool schema or generation parameter fails its case instead of reaching a model. Recording puts
`recording_responder` between the harness and a real endpoint (the embedded llama.cpp server).

One line per distinct request, sorted by key so that a re-recording diffs line by line:
    {"key": "<sha256[:16]>", "request": {...body...}, "response": {content, tool_calls, ...}}
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from harness.llm.loopback import Reply, completion

# Added by LoopbackServer to each request it logs, not part of what the harness sent.
_TRANSPORT_KEYS = ("_path", "_auth")
UNRECORDED_STATUS = 400  # not retried by LLMClient: the case fails at once with the message below


class FixtureError(ValueError):
    """The fixture file is unusable (bad JSON, a line without request/response)."""


def request_key(body: Mapping[str, Any]) -> str:
    """Content key of a request body: sha256 over its canonical JSON (transport fields dropped)."""
    clean = {k: v for k, v in body.items() if k not in _TRANSPORT_KEYS}
    blob = json.dumps(clean, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _response_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """The deterministic part of a chat completion (no ids, timestamps)."""
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    usage = body.get("usage") or {}
    return {
        "content": msg.get("content"),
        # the id too: the next request carries it back (assistant tool_calls, tool message), so it is content
        "tool_calls": [
            {
                "id": tc.get("id"),
                "name": (tc.get("function") or {}).get("name"),
                "arguments": (tc.get("function") or {}).get("arguments"),
            }
            for tc in msg.get("tool_calls") or []
        ],
        "finish_reason": choice.get("finish_reason"),
        "usage": {
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
        },
        "model": body.get("model"),
    }


def _reply_of(resp: Mapping[str, Any]) -> Reply:
    u = resp.get("usage") or {}
    tool_calls = [{k: v for k, v in tc.items() if v is not None} for tc in resp.get("tool_calls") or []]
    return completion(
        resp.get("content"),
        tool_calls or None,
        prompt_tokens=int(u.get("prompt_tokens", 0)),
        completion_tokens=int(u.get("completion_tokens", 0)),
        model=resp.get("model") or "replay",
        finish_reason=resp.get("finish_reason"),
    )


class ResponseFixture:
    """key → (request, response); thread-safe for the recording proxy."""

    def __init__(self, entries: Mapping[str, dict[str, Any]] | None = None):
        self.entries: dict[str, dict[str, Any]] = dict(entries or {})
        self.misses: list[str] = []  # keys of unrecorded requests seen while replaying
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> ResponseFixture:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{p}: replay fixture not found (record it: docs/ci-gate.md)")
        entries = {}
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FixtureError(f"{p}:{n}: not JSON ({exc})") from None
            if (
                not isinstance(e, dict)
                or not isinstance(e.get("request"), dict)
                or not isinstance(e.get("response"), dict)
            ):
                raise FixtureError(f"{p}:{n}: needs 'request' and 'response' objects")
            key = request_key(e["request"])
            if e.get("key") not in (None, key):  # a hand-edited request must be re-recorded, not silently re-keyed
                raise FixtureError(f"{p}:{n}: key {e.get('key')} does not match its request (content key {key})")
            entries[key] = e
        return cls(entries)

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            lines = [json.dumps(self.entries[k], ensure_ascii=False, sort_keys=False) for k in sorted(self.entries)]
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return p

    def add(self, request: Mapping[str, Any], response_body: Mapping[str, Any]) -> None:
        body = {k: v for k, v in request.items() if k not in _TRANSPORT_KEYS}
        key = request_key(body)
        with self._lock:
            self.entries[key] = {"key": key, "request": body, "response": _response_of(response_body)}

    def lookup(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        e = self.entries.get(request_key(request))
        return None if e is None else e["response"]


def replay_responder(fixture: ResponseFixture):
    """Answer recorded requests exactly; an unrecorded one gets HTTP 400 naming its key and last message."""

    def respond(req: dict[str, Any]) -> Reply:
        if req.get("_path", "").rstrip("/").endswith("/embeddings"):
            return Reply(status=UNRECORDED_STATUS, body={"error": {"message": "replay: embeddings are not recorded"}})
        resp = fixture.lookup(req)
        if resp is not None:
            return _reply_of(resp)
        key = request_key(req)
        with fixture._lock:
            fixture.misses.append(key)
        last = json.dumps((req.get("messages") or [{}])[-1], ensure_ascii=False)[:160]
        return Reply(
            status=UNRECORDED_STATUS,
            body={
                "error": {
                    "message": f"replay: unrecorded request {key} (the harness sent something the fixture does not hold: "
                    f"a prompt, tool or parameter changed; re-record if intended). last message: {last}"
                }
            },
        )

    return respond


def recording_responder(fixture: ResponseFixture, upstream_base_url: str, *, timeout_s: float = 600.0):
    """Forward each request to `upstream_base_url` (an OpenAI-compatible /v1 URL) and record the exchange."""
    client = httpx.Client(base_url=upstream_base_url.rstrip("/"), timeout=timeout_s)

    def respond(req: dict[str, Any]) -> Reply:
        body = {k: v for k, v in req.items() if k not in _TRANSPORT_KEYS}
        path = req.get("_path", "/v1/chat/completions")
        path = path[3:] if path.startswith("/v1") else path
        r = client.post(path, json=body)
        if r.status_code != 200:
            return Reply(status=r.status_code, body=r.content)
        data = r.json()
        fixture.add(body, data)
        return Reply(body=data)

    return respond
