"""The embedded model on the prebuilt `xllamacpp` runtime: an OpenAI-compatible chat server with no compile at setup.

`llama-cpp-python` (the `llama-cpp-python` runtime, `harness/llm/local_server.py`) ships as source only, and its
compile was the longest step of a fresh machine's setup on a slow host (issue 21). `xllamacpp` is a prebuilt CPU
wheel of llama.cpp (checked for instructions outside the portable baseline like our own build:
`scripts/llama_runtime.py check --runtime xllamacpp`). Its own chat endpoint reads Qwen's tool calls as plain text, so
this server does what `local_server.template_tools_handler` does for the other runtime, the same way:

- the prompt is the GGUF's own chat template rendered with Jinja2 as llama-cpp-python renders it (sandboxed,
  `trim_blocks`/`lstrip_blocks`, Transformers' `tojson`), so both runtimes send the model the same text;
- a forced call (`tool_choice` required or named) is constrained by a grammar to one schema-valid JSON call;
- `<tool_call>` blocks in the output become OpenAI `tool_calls` (`local_server.parse_tool_calls`).

Each completion's timings are logged in llama.cpp's `llama_perf_context_print` form, so `LlamaServer.perf()` reads
the measured speed from either runtime's log. Run as `python -m harness.llm.xllama_server --model FILE ...`; started
by `LlamaServer` when the model's `runtime` is `xllamacpp`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.llm.gguf_meta import read_chat_meta
from harness.llm.local_server import for_template, forced_call_schema, parse_tool_calls, watch_parent

_PARENT_ENV = "LME_HARNESS_PARENT_PID"
# What a chat request may carry. Anything else is refused with its name rather than silently ignored.
_ACCEPTED = {
    "model", "messages", "tools", "tool_choice", "temperature", "top_p", "max_tokens", "stop", "seed", "n",
    "response_format",
}  # fmt: skip


class BadRequest(ValueError):
    pass


class ChatTemplate:
    """The GGUF chat template rendered as llama-cpp-python's `Jinja2ChatFormatter` renders it."""

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = _tojson
        self._template = env.from_string(template)
        self.bos_token, self.eos_token = bos_token, eos_token

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        def raise_exception(message: str) -> None:
            raise BadRequest(message)

        return self._template.render(
            messages=messages,
            eos_token=self.eos_token,
            bos_token=self.bos_token,
            raise_exception=raise_exception,
            add_generation_prompt=True,
            functions=None,
            function_call=None,
            tools=tools,
            tool_choice=None,
            strftime_now=lambda f: datetime.now().strftime(f),
        )


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:  # fmt: skip
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def forced_call_grammar(tools: Sequence[dict[str, Any]]) -> str:
    """One JSON call that names an offered tool and carries arguments valid for its schema."""

    # An llguidance grammar for the JSON object alone: the `<tool_call>` tags are special tokens in Qwen's vocabulary,
    # which a text grammar cannot require; `parse_tool_calls` takes an untagged call that names an offered tool.
    return json_grammar(forced_call_schema(tools, closed=True))


def response_format_schema(fmt: Any) -> dict[str, Any] | None:
    """OpenAI's `response_format` as the JSON schema the reply must follow: `json_object` any JSON object (what mem0
    asks for), `json_schema` its `schema`; `text` (or none) no constraint. BadRequest naming the field otherwise."""
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        inner = fmt.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest("response_format.json_schema.schema must be a JSON schema object")
        return schema
    raise BadRequest(f"response_format.type must be text, json_object or json_schema, got {str(fmt)[:100]}")


def json_grammar(schema: dict[str, Any]) -> str:
    """An llguidance grammar for one JSON value following `schema`."""
    import xllamacpp

    grammar = xllamacpp.json_schema_to_grammar(json.dumps(schema))
    if not grammar.startswith("%llguidance"):
        raise RuntimeError("xllamacpp returned a grammar in an unexpected form")
    return grammar


def check_request(req: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, once its fields are known ones (BadRequest naming every other), n is 1 and
    messages is a non-empty list; needs no model."""
    unknown = sorted(set(req) - _ACCEPTED)
    if unknown:
        raise BadRequest(f"unsupported request field(s) for this server: {', '.join(unknown)}")
    if req.get("n", 1) != 1:
        raise BadRequest("n must be 1")
    response_format_schema(req.get("response_format"))  # a malformed one is refused before any work
    messages = req.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    return messages


class ChatEngine:
    """Chat completions over one loaded model (one request at a time, as the other runtime serves them)."""

    def __init__(self, model_path: str, alias: str, n_ctx: int, n_threads: int) -> None:
        import xllamacpp

        meta = read_chat_meta(model_path)
        if not meta.chat_template:
            raise SystemExit(f"{model_path}: the GGUF has no chat template (tokenizer.chat_template)")
        self.template = ChatTemplate(meta.chat_template, meta.bos_token, meta.eos_token)
        self.alias = alias
        params = xllamacpp.CommonParams()
        params.model.path = model_path
        params.n_ctx = n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        self._server = xllamacpp.Server(params)
        self._lock = threading.Lock()

    def chat(self, req: dict[str, Any]) -> dict[str, Any]:
        messages = check_request(req)
        tools = req.get("tools") or None
        choice = req.get("tool_choice")
        if choice == "none":
            tools = None
        body: dict[str, Any] = {"temperature": req.get("temperature", 0.8), "cache_prompt": True}
        for key, name in (("max_tokens", "n_predict"), ("top_p", "top_p"), ("seed", "seed")):
            if req.get(key) is not None:
                body[name] = req[key]
        stop = req.get("stop") or []
        body["stop"] = ([stop] if isinstance(stop, str) else list(stop)) + [self.template.eos_token]
        if tools and (choice == "required" or isinstance(choice, dict)):
            if isinstance(choice, dict):
                tools = [t for t in tools if t["function"]["name"] == choice["function"]["name"]]
                if not tools:
                    raise BadRequest(f"tool_choice names no offered tool: {choice}")
            body["grammar"] = forced_call_grammar(tools)
        if (schema := response_format_schema(req.get("response_format"))) is not None:
            if "grammar" in body:
                raise BadRequest("response_format cannot be combined with a forced tool call")
            body["grammar"] = json_grammar(schema)
        body["prompt"] = self.template.render([for_template(dict(m)) for m in messages], tools)
        with self._lock:
            out = self._server.handle_completions(body)
        if not isinstance(out, dict) or "choices" not in out:
            raise RuntimeError(f"completion failed: {str(out)[:300]}")
        self._log_timings(out.get("timings") or {})
        text = out["choices"][0].get("text") or ""
        finish = out["choices"][0].get("finish_reason") or "stop"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tools:
            rest, calls = parse_tool_calls(text, [t["function"]["name"] for t in tools])
            if calls:
                message = {"role": "assistant", "content": rest or None, "tool_calls": calls}
                finish = "tool_calls"
        usage = out.get("usage") or {}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.alias,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "completion_tokens": int(usage.get("completion_tokens", 0)),
                "total_tokens": int(usage.get("total_tokens", 0)),
            },
        }

    @staticmethod
    def _log_timings(t: dict[str, Any]) -> None:
        # The other runtime's line format, which LlamaServer.perf() reads: prefill counts only evaluated tokens.
        print(
            f"llama_perf_context_print: prompt eval time = {float(t.get('prompt_ms', 0)):10.2f} ms / "
            f"{int(t.get('prompt_n', 0)):5d} tokens\n"
            f"llama_perf_context_print:        eval time = {float(t.get('predicted_ms', 0)):10.2f} ms / "
            f"{int(t.get('predicted_n', 0)):5d} runs",
            file=sys.stderr,
            flush=True,
        )


def _handler(engine: ChatEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:  # one line a request, on stderr (the server log)
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": engine.alias, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if not isinstance(req, dict):
                    raise BadRequest("the request body must be a JSON object")
                self._send(200, engine.chat(req))
            except (BadRequest, json.JSONDecodeError) as e:
                self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
            except Exception as e:  # noqa: BLE001 - reported to the client as a server error, and logged
                sys.stderr.write(f"chat completion failed: {type(e).__name__}: {e}\n")
                self._send(500, {"error": {"message": f"{type(e).__name__}: {e}", "type": "server_error"}})

    return Handler


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m harness.llm.xllama_server")
    ap.add_argument("--model", required=True)
    ap.add_argument("--model_alias", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n_ctx", type=int, default=4096)
    ap.add_argument("--n_threads", type=int, default=max(1, len(os.sched_getaffinity(0))))
    args = ap.parse_args(argv)
    parent = os.environ.get(_PARENT_ENV)
    if parent:
        watch_parent(int(parent))
    # Bind first, load after: the port the harness chose is held from the first second, not only once the weights
    # are in (seconds in which another process could take it). Requests wait in the backlog until then.
    httpd = ThreadingHTTPServer((args.host, args.port), BaseHTTPRequestHandler)
    engine = ChatEngine(args.model, args.model_alias, args.n_ctx, args.n_threads)
    httpd.RequestHandlerClass = _handler(engine)
    sys.stderr.write(f"xllama_server: serving {args.model_alias} on http://{args.host}:{args.port}/v1\n")
    sys.stderr.flush()
    httpd.serve_forever()


if __name__ == "__main__":
    main()
