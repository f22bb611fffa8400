"""Local server lifecycle (with a tiny fake server), tool-call parsing, and one slow real-model test."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.llm import local_server as ls
from harness.llm.local_server import LlamaServer, LocalServerError, llama_server_args, parse_tool_calls
from harness.llm.models import ModelIntegrityError, ModelSpec, load_spec

# The compiled runtime is opt-in (issue 21): these tests run where `make runtime-compiled` installed it.
COMPILED = "the compiled llama-cpp-python runtime is not installed (opt-in: make runtime-compiled)"

FAKE_SERVER = textwrap.dedent("""
    import http.server, json, signal, sys, time
    port, mode = int(sys.argv[1]), sys.argv[2]
    print("fake server starting", flush=True)
    if mode == "crash":
        print("boom: model file unreadable", flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(60)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "fake-model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def wait_dead(pid: int, timeout_s: float = 10.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def model(tmp_path, monkeypatch) -> ModelSpec:
    """A local spec whose (tiny) model file exists and verifies."""
    monkeypatch.setenv("LME_HARNESS_MODEL_DIR", str(tmp_path / "models"))
    data = b"not really a gguf"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "fake.gguf").write_bytes(data)
    return ModelSpec.from_config(
        {
            "name": "fake",
            "kind": "local",
            "model": "fake-model",
            "file": "fake.gguf",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "n_ctx": 512,
            "chat_format": "template-tools",
        }
    )


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    return lambda mode: lambda port: [sys.executable, str(script), str(port), mode]


@pytest.mark.process
def test_start_ready_stop(model, fake, tmp_path):
    log = tmp_path / "logs" / "server.log"
    with LlamaServer(model, log_path=log, command=fake("ok")) as srv:
        pid = srv.pid
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1" and srv.model == "fake-model"
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as r:
            assert json.load(r)["data"][0]["id"] == "fake-model"
        assert srv.load_s is not None and srv.load_s < 30
    assert wait_dead(pid)
    assert "fake server starting" in log.read_text()


@pytest.mark.process
def test_crash_before_ready_reports_log_tail(model, fake, tmp_path):
    with pytest.raises(LocalServerError, match=r"exited with code 3 before it was ready(.|\n)*boom: model file"):
        LlamaServer(model, log_path=tmp_path / "s.log", command=fake("crash")).start()


@pytest.mark.process
def test_startup_timeout_kills_the_process(model, fake, tmp_path):
    srv = LlamaServer(model, log_path=tmp_path / "s.log", command=fake("hang"), startup_timeout_s=1.0)
    started: list[int] = []
    orig = srv._wait_ready
    srv._wait_ready = lambda t0: (started.append(srv.pid), orig(t0))[1]  # type: ignore[method-assign]
    with pytest.raises(LocalServerError, match="not ready after 1 s"):
        srv.start()
    assert wait_dead(started[0])


@pytest.mark.process
def test_exception_inside_block_stops_server(model, fake, tmp_path):
    with pytest.raises(RuntimeError, match="harness failed"):
        with LlamaServer(model, log_path=tmp_path / "s.log", command=fake("ok")) as srv:
            pid = srv.pid
            raise RuntimeError("harness failed")
    assert wait_dead(pid)


@pytest.mark.process
def test_stop_escalates_to_kill(model, fake, tmp_path):
    srv = LlamaServer(model, log_path=tmp_path / "s.log", command=fake("stubborn"), stop_grace_s=0.5).start()
    pid = srv.pid
    t0 = time.monotonic()
    srv.stop()
    assert wait_dead(pid) and time.monotonic() - t0 < 10


def test_refuses_model_that_fails_verification(model, fake, tmp_path):
    model.path.write_bytes(b"tampered weights!")
    called: list[int] = []
    srv = LlamaServer(model, log_path=tmp_path / "s.log", command=lambda port: called.append(port) or [])
    with pytest.raises(ModelIntegrityError, match="fake.gguf"):
        srv.start()
    assert called == [] and srv.pid is None


@pytest.mark.process
def test_watchdog_exits_when_parent_dies():
    parent = textwrap.dedent("""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "import os, time; from harness.llm.local_server import watch_parent; "
            "watch_parent(int(os.environ['PARENT']), period_s=0.1); print('watching', flush=True); time.sleep(60)"],
            env={**os.environ, "PARENT": str(os.getpid())})
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    env = {**os.environ, "PYTHONPATH": str(ls.REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, env=env)
    child = int(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "watching" and alive(child)
    proc.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
    proc.wait()
    assert wait_dead(child)


def test_server_args_use_llama_cpp_flags(model):
    args = llama_server_args(model, Path("/m/fake.gguf"), 8123, 2)
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs == {
        "--model": "/m/fake.gguf",
        "--model_alias": "fake-model",
        "--host": "127.0.0.1",
        "--port": "8123",
        "--n_ctx": "512",
        "--n_threads": "2",
        "--n_threads_batch": "2",
        "--logits_all": "false",
        "--chat_format": "template-tools",
    }
    extra = ModelSpec.from_config({**model.__dict__, "sources": [], "server_args": {"flash_attn": True}})
    assert llama_server_args(extra, Path("/m"), 1, 1)[-2:] == ["--flash_attn", "true"]


# ------------------------------------------------------------------ tool-call parsing


def test_parse_tagged_and_untagged_calls():
    rest, calls = parse_tool_calls(
        'Let me look.\n<tool_call>\n{"name": "session_search", "arguments": {"query": "degree"}}\n</tool_call>',
        ["session_search"],
    )
    assert rest == "Let me look."
    assert calls[0]["function"] == {"name": "session_search", "arguments": '{"query": "degree"}'}
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    # wrong wrapper tags, string arguments, two calls
    rest, calls = parse_tool_calls(
        '<tools>\n{"name": "session_search", "arguments": "{\\"query\\": \\"x\\"}"}\n</tools>'
        '{"name": "session_load", "arguments": {"event_id": "e1"}}',
        ["session_search", "session_load"],
    )
    assert rest == "" and [c["function"]["name"] for c in calls] == ["session_search", "session_load"]
    assert calls[0]["function"]["arguments"] == '{"query": "x"}'


def test_plain_answers_and_unoffered_json_are_not_calls():
    assert parse_tool_calls("Business Administration", ["session_search"]) == ("Business Administration", [])
    text = 'Config: {"name": "get_weather", "arguments": {}} and {"a": 1}'
    assert parse_tool_calls(text, ["session_search"]) == (text, [])


class FakeLlama:
    """Stands in for llama_cpp.Llama: records what the template handler sends to the base handler."""

    def __init__(self, reply: str) -> None:
        self.seen: dict[str, Any] = {}
        self._chat_handlers = {"chat_template.default": self.base}
        self.reply = reply

    def base(self, **kw: Any) -> dict[str, Any]:
        self.seen = kw
        return {
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": self.reply}}]
        }


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "session_search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
]
# Bounded arguments so that a tiny model's forced call always completes within a few tokens.
CITY_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"]},
        },
    }
]


def test_template_handler_converts_calls_and_normalizes_history():
    llama = FakeLlama('<tool_call>\n{"name": "session_search", "arguments": {"query": "q"}}\n</tool_call>')
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "session_search", "arguments": '{"query": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    resp = ls.template_tools_handler(llama=llama, messages=history, tools=TOOLS, tool_choice="auto", temperature=0)
    choice = resp["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "session_search"
    sent = llama.seen["messages"][1]
    assert sent["content"] == "" and sent["tool_calls"][0]["function"]["arguments"] == {"query": "a"}
    assert history[1]["content"] is None  # the caller's messages are not mutated
    assert llama.seen["tools"] == TOOLS and llama.seen["temperature"] == 0


def test_template_handler_without_tools_passes_text_through():
    llama = FakeLlama("Paris")
    resp = ls.template_tools_handler(
        llama=llama, messages=[{"role": "user", "content": "?"}], tools=TOOLS, tool_choice="none"
    )
    assert resp["choices"][0]["message"]["content"] == "Paris" and "tools" not in llama.seen


def test_required_tool_choice_constrains_with_a_grammar():
    pytest.importorskip("llama_cpp", reason=COMPILED)
    llama = FakeLlama('<tool_call>\n{"name": "session_search", "arguments": {"query": "q"}}\n</tool_call>')
    resp = ls.template_tools_handler(
        llama=llama, messages=[{"role": "user", "content": "?"}], tools=TOOLS, tool_choice="required"
    )
    assert llama.seen["grammar"] is not None
    assert 'root ::= "<tool_call>\\n" call' in llama.seen["grammar"]._grammar
    assert '"\\"session_search\\""' in llama.seen["grammar"]._grammar
    assert resp["choices"][0]["finish_reason"] == "tool_calls"


def test_null_assistant_content_is_dropped_for_llama_cpp_schema():
    body = json.dumps(
        {"messages": [{"role": "assistant", "content": None, "tool_calls": []}, {"role": "user", "content": "x"}]}
    ).encode()
    assert json.loads(ls.fix_null_content(body))["messages"][0] == {"role": "assistant", "tool_calls": []}
    assert ls.fix_null_content(b"not json") == b"not json"

    seen: dict[str, Any] = {}

    async def app(scope, receive, send):
        seen["body"] = (await receive())["body"]
        seen["length"] = dict(scope["headers"])[b"content-length"]

    parts = [
        {"type": "http.request", "body": body[:10], "more_body": True},
        {"type": "http.request", "body": body[10:], "more_body": False},
    ]

    async def receive():
        return parts.pop(0)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"content-length", str(len(body)).encode())],
    }
    asyncio.run(ls._NullContentFix(app)(scope, receive, None))
    assert json.loads(seen["body"])["messages"][0] == {"role": "assistant", "tool_calls": []}
    assert int(seen["length"]) == len(seen["body"])


# ------------------------------------------------------------------ the real server (slow)


@pytest.mark.slow
def test_real_server_answers_and_calls_tools(tmp_path):
    pytest.importorskip("llama_cpp", reason=COMPILED)
    openai = pytest.importorskip("openai")
    spec = replace(load_spec("smollm2_135m"), runtime="llama-cpp-python")
    if not spec.path.is_file():
        pytest.skip(f"model file absent: {spec.path} (python -m research.models_probe --pull-only smollm2_135m)")
    with LlamaServer(spec, log_path=tmp_path / "llama.log", n_threads=2) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="local", max_retries=0, timeout=120)
        msgs = [{"role": "user", "content": "What is the capital of France? One word."}]
        r = client.chat.completions.create(model=srv.model, messages=msgs, temperature=0, max_tokens=8)
        assert r.choices[0].message.content.strip() and r.usage.prompt_tokens > 0
        r = client.chat.completions.create(
            model=srv.model, messages=msgs, tools=CITY_TOOL, tool_choice="required", temperature=0, max_tokens=96
        )
        call = r.choices[0].message.tool_calls[0]
        assert call.function.name == "get_weather" and json.loads(call.function.arguments)["city"] in ("Paris", "Rome")
        # the OpenAI wire shape of a tool turn (content null) must be accepted
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny"}'},
        ]
        r = client.chat.completions.create(
            model=srv.model, messages=msgs, tools=CITY_TOOL, tool_choice="auto", temperature=0, max_tokens=16
        )
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def _held_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


@pytest.mark.process
def test_a_chosen_port_taken_before_the_server_binds_it_is_chosen_again(model, fake, tmp_path, monkeypatch):
    holder, taken = _held_port()  # another process got there first
    ports = iter([taken])
    real = ls.free_port
    monkeypatch.setattr(ls, "free_port", lambda: next(ports, None) or real())
    try:
        with LlamaServer(model, log_path=tmp_path / "s.log", command=fake("ok")) as srv:
            assert srv.port != taken
            with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as r:
                assert r.status == 200
        assert f"port {taken} was taken before the server bound it" in (tmp_path / "s.log").read_text()
    finally:
        holder.close()


@pytest.mark.process
def test_a_named_port_that_is_taken_is_one_error_not_another_port(model, fake, tmp_path):
    holder, taken = _held_port()
    try:
        with pytest.raises(LocalServerError, match="exited with code") as e:
            LlamaServer(model, log_path=tmp_path / "s.log", command=fake("ok"), port=taken).start()
        assert "address already in use" in str(e.value).lower()
    finally:
        holder.close()


@pytest.mark.process
def test_a_server_that_fails_otherwise_is_not_started_again(model, fake, tmp_path, monkeypatch):
    calls = []
    real = ls.free_port
    monkeypatch.setattr(ls, "free_port", lambda: calls.append(1) or real())
    with pytest.raises(LocalServerError, match="boom"):
        LlamaServer(model, log_path=tmp_path / "s.log", command=fake("crash")).start()
    assert len(calls) == 1 and (tmp_path / "s.log").read_text().count("fake server starting") == 1
