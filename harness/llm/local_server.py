"""The embedded llama.cpp server (llama-cpp-python's OpenAI-compatible server) and its lifecycle.

`LlamaServer(spec, log_path=...)` verifies the model file, starts the server on a free local port,
waits until `/v1/models` answers, exposes `.base_url`, and always stops the process on exit.

The server process is started through this module (`python -m harness.llm.local_server ARGS`), which
before handing over to `llama_cpp.server`:
- registers the `template-tools` chat format (see `template_tools_handler`), and
- runs a watchdog that exits when the harness process goes away, even on SIGKILL, so that no
  orphan server survives the harness. (atexit and the context manager cover the ordinary exits.)
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.llm.liveness import ServerDied, wait_dead
from harness.llm.models import ModelError, ModelSpec, verify

REPO_ROOT = Path(__file__).resolve().parents[2]
_PARENT_ENV = "LME_HARNESS_PARENT_PID"
_LIVE: set[LlamaServer] = set()  # servers to stop at interpreter exit
_PROCS: set[subprocess.Popen[bytes]] = set()  # server processes not yet reaped (also those being stopped)


class LocalServerError(ModelError):
    """The local server could not start (the message carries the tail of its log)."""


PORT_ATTEMPTS = 3  # a chosen port taken by another process before the server bound it: choose again, twice


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def llama_server_args(spec: ModelSpec, model_path: Path, port: int, n_threads: int) -> list[str]:
    """Arguments of `llama_cpp.server` (llama-cpp-python 0.3.36 flag names)."""
    args = [
        "--model",
        str(model_path),
        "--model_alias",
        spec.model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(spec.n_ctx or 4096),
        "--n_threads",
        str(n_threads),
        "--n_threads_batch",
        str(n_threads),
        # The default (true) keeps logits for every prompt token: ~1.6x slower per question.
        "--logits_all",
        "false",
    ]
    if spec.chat_format:
        args += ["--chat_format", spec.chat_format]
    for key, value in dict(spec.extra.get("server_args") or {}).items():  # e.g. {flash_attn: true}
        args += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return args


def xllama_server_args(spec: ModelSpec, port: int, n_threads: int) -> list[str]:
    """Arguments of `harness.llm.xllama_server` (the prebuilt runtime). It always serves the GGUF's own chat template
    with tool calls (what `template-tools` does on the other runtime); per-model server flags are not supported."""
    if spec.extra.get("server_args"):
        raise LocalServerError(f"model {spec.name!r}: server_args are not supported by the xllamacpp runtime")
    if spec.chat_format not in (None, "template-tools"):
        raise LocalServerError(
            f"model {spec.name!r}: chat_format {spec.chat_format!r} is not supported by the xllamacpp runtime "
            "(it serves the GGUF's own chat template, as template-tools does)"
        )
    return [
        "--model", str(spec.path), "--model_alias", spec.model, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(spec.n_ctx or 4096), "--n_threads", str(n_threads),
    ]  # fmt: skip


class LlamaServer:
    """Context manager running one local model; `.base_url` is `http://127.0.0.1:PORT/v1`.

    `command` replaces the server command (tests use a tiny fake server); it is called with the
    port and must return argv. The model file is verified (sha256) before anything starts.
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        log_path: Path | str,
        n_threads: int | None = None,
        port: int | None = None,
        startup_timeout_s: float = 180.0,
        stop_grace_s: float = 10.0,
        command: Callable[[int], Sequence[str]] | None = None,
        verify_model: bool = True,
    ) -> None:
        if not spec.is_local:
            raise ValueError(f"model {spec.name!r} is {spec.kind}, not a local model")
        self.spec = spec
        self.log_path = Path(log_path)
        self.n_threads = n_threads or default_threads()
        self.port = port or free_port()
        self._port_chosen = port is None  # ours to change when another process took it first
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self._command = command
        self._verify_model = verify_model
        self._proc: subprocess.Popen[bytes] | None = None
        self.load_s: float | None = None  # seconds from process start until ready
        self._perf_from = 0  # the log offset after which `perf()` counts the model's timings

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The model id to send in requests (the server's alias)."""
        return self.spec.model

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def command(self) -> list[str]:
        if self._command is not None:
            return list(self._command(self.port))
        if self.spec.runtime == "xllamacpp":
            return [
                sys.executable,
                "-m",
                "harness.llm.xllama_server",
                *xllama_server_args(self.spec, self.port, self.n_threads),
            ]
        args = llama_server_args(self.spec, self.spec.path, self.port, self.n_threads)
        return [sys.executable, "-m", "harness.llm.local_server", *args]

    # ------------------------------------------------------------ lifecycle

    def start(self) -> LlamaServer:
        if self._proc is not None:
            raise LocalServerError(f"server for {self.spec.name} already started (pid {self._proc.pid})")
        if self._verify_model:
            verify(self.spec.path, self.spec.sha256, size=self.spec.size)  # type: ignore[arg-type]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # A free port is free when chosen, not when the server binds it: another process (a parallel test
        # worker, a second run) may take it in between. Then the server exits at once saying so, and a port we
        # chose is chosen again; a port the caller named is theirs, and the error says who holds it.
        for _ in range(PORT_ATTEMPTS - 1):
            try:
                return self._start_once()
            except LocalServerError:
                if not (self._port_chosen and self._port_taken()):
                    raise
            taken, self.port = self.port, free_port()
            with open(self.log_path, "ab") as log:
                log.write(f"port {taken} was taken before the server bound it: trying port {self.port}\n".encode())
        return self._start_once()  # the last try: its error is the caller's

    def _port_taken(self) -> bool:
        """Whether the server's log ends saying its port was already in use (EADDRINUSE)."""
        return "address already in use" in self.log_tail().lower()

    def _start_once(self) -> LlamaServer:
        env = dict(os.environ)
        env[_PARENT_ENV] = str(os.getpid())
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        cmd = self.command()
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            # Own session: a Ctrl-C meant for the harness doesn't hit the server mid-request,
            # and stop() can signal the whole group.
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=REPO_ROOT,
                start_new_session=True,
            )
        _LIVE.add(self)
        _PROCS.add(self._proc)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.load_s = time.monotonic() - t0
        return self

    def _wait_ready(self, t0: float) -> None:
        assert self._proc is not None
        url = self.base_url + "/models"
        while True:
            rc = self._proc.poll()
            if rc is not None:
                raise LocalServerError(
                    f"{self.spec.name} server exited with code {rc} before it was ready; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - t0 > self.startup_timeout_s:
                raise LocalServerError(
                    f"{self.spec.name} server not ready after {self.startup_timeout_s:.0f} s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def exit_status(self) -> int | None:
        """The server's exit status once it has exited on its own (Popen returncode: -N = killed by signal N);
        None while it runs, before `start()` and after `stop()`."""
        proc = self._proc
        return proc.poll() if proc is not None else None

    def died(self) -> ServerDied | None:
        """None while the server runs, else the `ServerDied` that says how it exited (an endpoint's liveness)."""
        rc = self.exit_status()
        if rc is None:
            return None
        return ServerDied(self.spec.name, rc, self.log_path, self.log_tail(12))

    def check_compute(self, timeout_s: float = 120.0) -> None:
        """One tiny completion (1 token, never cached): a model that loads but cannot compute (a runtime built
        for another CPU crashes on the first matrix product) fails here, once, before any case runs."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "user", "content": "Say OK."}],
                "max_tokens": 1,
                "temperature": 0,
            }
        ).encode()
        req = urllib.request.Request(
            self.base_url + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                reply = json.load(r)
            if not reply.get("choices"):
                raise ValueError(f"no choices in {str(reply)[:200]}")
            time.sleep(0.05)  # the server logs its timing lines just after the reply
            self._perf_from = _size(self.log_path)  # a 1-token warm-up is no measure of speed
            return
        except urllib.error.HTTPError as e:
            problem = f"answered HTTP {e.code}: {e.read()[:300].decode(errors='replace')}"
        except (urllib.error.URLError, OSError, ValueError) as e:
            problem = f"failed: {type(e).__name__}: {e}"
        died = wait_dead(self.died, 2.0)
        if died is not None:
            raise LocalServerError(
                f"{self.spec.name}: the server loaded the model, then died on a 1-token test "
                f"completion (before any case ran): {died}"
            )
        raise LocalServerError(
            f"{self.spec.name}: a 1-token test completion {problem}; log {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, grace_s: float | None = None) -> None:
        """Terminate (SIGTERM to the process group), then SIGKILL after the grace period (`grace_s`, default
        `stop_grace_s`; a stopping run passes a short one: uvicorn would wait for the requests in flight)."""
        proc, self._proc = self._proc, None
        _LIVE.discard(self)
        if proc is None:
            return
        try:
            if proc.poll() is not None:
                return
            grace = self.stop_grace_s if grace_s is None else grace_s
            for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    return
                try:
                    proc.wait(timeout=wait_s)
                    return
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if proc.poll() is not None:
                _PROCS.discard(proc)

    def perf(self) -> dict[str, Any]:
        """The model's measured speed in this process's calls: llama.cpp's own per-completion timings, which
        the server logs (`llama_perf_context_print`), summed from where the 1-token compute check ended."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._perf_from)
                text = f.read().decode(errors="replace")
        except OSError:
            text = ""
        return perf_summary(text)

    def log_tail(self, n: int = 30) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def kill_all_now() -> None:
    """SIGKILL every server's process group at once, those being stopped too, waiting for nothing (a second
    Ctrl-C exits right after)."""
    for proc in list(_PROCS):
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# llama.cpp's timing lines, one pair per completion: "prompt eval time = 812.3 ms / 120 tokens (...)" (prefill:
# only the tokens evaluated, a prefix reused from the KV cache is not) and "eval time = 95.1 ms / 8 runs" (generation)
_PERF = re.compile(r"llama_perf_context_print:\s+(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) (?:tokens|runs)")


def perf_summary(log_text: str) -> dict[str, Any]:
    """Prefill and generation tokens/s over every completion timed in `log_text` (None where none was)."""
    sums = {"prompt eval": [0.0, 0], "eval": [0.0, 0]}
    for kind, ms, n in _PERF.findall(log_text):
        sums[kind][0] += float(ms)
        sums[kind][1] += int(n)

    def rate(kind: str) -> float | None:
        ms, n = sums[kind]
        return round(n / ms * 1000, 1) if ms > 0 and n > 0 else None

    return {
        "prefill_tokens_per_s": rate("prompt eval"),
        "generation_tokens_per_s": rate("eval"),
        "prefill_tokens": int(sums["prompt eval"][1]),
        "generated_tokens": int(sums["eval"][1]),
        "source": "llama.cpp timings in the server log (this invocation's calls)",
    }


# ---------------------------------------------------------------- chat format "template-tools"
# llama-cpp-python's "chatml-function-calling" drops role=tool messages from the prompt (its template
# has no branch for them), so the model never sees a tool result. Qwen2.5's own GGUF chat template
# does render tools and tool results (Hermes style); the server just doesn't parse the
# `<tool_call>{...}</tool_call>` blocks the model answers with. This format renders with the model's
# template and turns those blocks into OpenAI `tool_calls`.

_WRAPPERS = re.compile(r"</?(?:tool_call|tools|function_call)>|```(?:json)?", re.I)


def parse_tool_calls(text: str, tool_names: Sequence[str]) -> tuple[str, list[dict[str, Any]]]:
    """Split model output into (remaining text, OpenAI tool_calls).

    A call is a JSON object `{"name": ..., "arguments": ...}`: inside `<tool_call>` tags (the format the
    Qwen template asks for; any name is kept, an unknown tool is the caller's error to report), or
    anywhere else when it names an offered tool, since small models often drop or misspell the tags.
    """
    decoder = json.JSONDecoder()
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    pos = i = 0
    while (i := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        tagged = text[:i].rstrip().endswith("<tool_call>")
        if (
            isinstance(obj, dict)
            and isinstance(obj.get("name"), str)
            and "arguments" in obj
            and (tagged or obj["name"] in tool_names)
        ):
            kept.append(text[pos:i])
            calls.append(_tool_call(obj))
            pos = end
        i = end
    kept.append(text[pos:])
    rest = "".join(kept)
    if calls:
        rest = _WRAPPERS.sub("", rest)
    return rest.strip(), calls


def _tool_call(obj: dict[str, Any]) -> dict[str, Any]:
    args = obj.get("arguments", {})
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


def for_template(msg: dict[str, Any]) -> dict[str, Any]:
    """OpenAI wire messages → what HF chat templates expect (dict arguments, no None content)."""
    m = dict(msg)
    if m.get("content") is None:
        m["content"] = ""
    if m.get("tool_calls"):
        calls = []
        for tc in m["tool_calls"]:
            fn = dict(tc.get("function") or tc)
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except json.JSONDecodeError:
                    pass
            calls.append({**tc, "function": fn})
        m["tool_calls"] = calls
    return m


def template_tools_handler(
    *,
    llama: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    **kwargs: Any,
) -> Any:
    base = llama._chat_handlers.get("chat_template.default")
    if base is None:
        raise ValueError("template-tools needs a GGUF with a chat template (tokenizer.chat_template)")
    msgs = [for_template(dict(m)) for m in messages]
    if not tools or tool_choice == "none":
        return base(llama=llama, messages=msgs, stream=stream, **kwargs)
    if stream:
        return base(llama=llama, messages=msgs, tools=tools, tool_choice=tool_choice, stream=True, **kwargs)
    if tool_choice == "required" or isinstance(tool_choice, dict):
        # A call is forced: constrain sampling to one well-formed, schema-valid <tool_call> block.
        if isinstance(tool_choice, dict):
            tools = [t for t in tools if t["function"]["name"] == tool_choice["function"]["name"]]
            if not tools:
                raise ValueError(f"tool_choice names no offered tool: {tool_choice}")
        kwargs["grammar"] = _forced_call_grammar(tools)
    resp = base(llama=llama, messages=msgs, tools=tools, stream=False, **kwargs)
    choice = resp["choices"][0]
    names = [t["function"]["name"] for t in tools]
    rest, calls = parse_tool_calls(choice["message"].get("content") or "", names)
    if calls:
        choice["message"] = {"role": "assistant", "content": rest or None, "tool_calls": calls}
        choice["finish_reason"] = "tool_calls"
    return resp


def forced_call_schema(tools: Sequence[dict[str, Any]], closed: bool = False) -> dict[str, Any]:
    """One JSON call naming an offered tool with arguments valid for its schema (both runtimes' forced call);
    `closed` forbids keys besides name/arguments."""
    extra: dict[str, Any] = {"additionalProperties": False} if closed else {}
    return {
        "oneOf": [
            {
                "type": "object",
                "required": ["name", "arguments"],
                "properties": {
                    "name": {"const": t["function"]["name"]},
                    "arguments": t["function"].get("parameters") or {"type": "object"},
                },
                **extra,
            }
            for t in tools
        ]
    }


def _forced_call_grammar(tools: Sequence[dict[str, Any]]) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    schema = forced_call_schema(tools)
    gbnf = json_schema_to_gbnf(json.dumps(schema), prop_order=["name", "arguments"])
    gbnf = re.sub(r"^root ::=", "call ::=", gbnf, flags=re.M)
    return LlamaGrammar.from_string(gbnf + '\nroot ::= "<tool_call>\\n" call "\\n</tool_call>"\n', verbose=False)


def register_chat_formats() -> None:
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        "template-tools",
        # a plain function; llama-cpp types the handler as a Protocol listing every option
        template_tools_handler,  # type: ignore[arg-type]
        overwrite=True,
    )


class _NullContentFix:
    """ASGI wrapper: llama-cpp-python's request schema rejects `content: null` on assistant messages
    (the OpenAI wire shape of a tool-call turn) with a 500; drop the key so such requests validate."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not scope["path"].endswith("/chat/completions"):
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        body = fix_null_content(b"".join(chunks))
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await self.app({**scope, "headers": headers}, replay, send)


def fix_null_content(body: bytes) -> bytes:
    try:
        req = json.loads(body)
    except ValueError:
        return body  # let the server report the bad request
    changed = False
    for m in req.get("messages") or () if isinstance(req, dict) else ():
        if isinstance(m, dict) and m.get("role") == "assistant" and "content" in m and m["content"] is None:
            del m["content"]
            changed = True
    return json.dumps(req).encode() if changed else body


def watch_parent(parent_pid: int, period_s: float = 1.0) -> None:
    """Exit when the harness that started us is gone (we get re-parented)."""

    def loop() -> None:
        while True:
            time.sleep(period_s)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=loop, name="parent-watchdog", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> None:
    parent = os.environ.get(_PARENT_ENV)
    if parent:
        watch_parent(int(parent))
    register_chat_formats()
    import llama_cpp.server.__main__ as server

    create_app = server.create_app
    server.create_app = lambda *a, **kw: _NullContentFix(create_app(*a, **kw))  # type: ignore[assignment]
    server_main = server.main
    sys.argv = ["llama_cpp.server", *(sys.argv[1:] if argv is None else argv)]
    server_main()


if __name__ == "__main__":
    main()
