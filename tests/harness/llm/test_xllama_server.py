"""The prebuilt runtime (model.runtime=xllamacpp): GGUF metadata, the chat template rendered as the other runtime
renders it, the runtime as part of the endpoint's identity, and a real server with tool calls (slow)."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from harness.llm.endpoint import cache_namespace
from harness.llm.gguf_meta import GGUFError, read_chat_meta
from harness.llm.local_server import LlamaServer, LocalServerError, xllama_server_args
from harness.llm.models import ModelError, ModelSpec, load_spec
from tests.support.paths import FIXTURES

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}"
    "{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(path: Path, *, template: str | None = TEMPLATE, tokens=("<s>", "a", "<|im_end|>"), bos=0, eos=2) -> Path:
    """A GGUF with metadata only, its fields in an order that makes the reader skip every value type it meets."""
    kv = [
        _s("general.architecture") + struct.pack("<I", 8) + _s("llama"),
        _s("general.file_type") + struct.pack("<I", 4) + struct.pack("<I", 15),
        _s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + struct.pack("<3f", 0, 0, 0),
        _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(_s(t) for t in tokens),
        _s("tokenizer.ggml.bos_token_id") + struct.pack("<I", 4) + struct.pack("<I", bos),
        _s("tokenizer.ggml.eos_token_id") + struct.pack("<I", 4) + struct.pack("<I", eos),
        _s("general.flag") + struct.pack("<I", 7) + struct.pack("<?", True),
    ]
    if template is not None:
        kv.append(_s("tokenizer.chat_template") + struct.pack("<I", 8) + _s(template))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
    return path


def test_reads_the_chat_template_and_special_tokens(tmp_path):
    meta = read_chat_meta(write_gguf(tmp_path / "m.gguf"))
    assert (meta.chat_template, meta.bos_token, meta.eos_token, meta.eos_token_id) == (TEMPLATE, "<s>", "<|im_end|>", 2)
    assert read_chat_meta(write_gguf(tmp_path / "n.gguf", template=None)).chat_template is None


@pytest.mark.parametrize(
    "damage, expected",
    [(lambda b: b"GGML" + b[4:], "bad magic"), (lambda b: b[:-20], "truncated")],
)
def test_a_damaged_file_is_named(tmp_path, damage, expected):
    path = write_gguf(tmp_path / "m.gguf")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(GGUFError, match=expected) as e:
        read_chat_meta(path)
    assert str(path) in str(e.value)


GOLDEN = FIXTURES / "chat_templates.json"


def _golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_golden_covers_every_local_model_and_request():
    """The fixture is complete: no model or request silently left unchecked (regenerate: scripts/chat_template_golden)."""
    from harness.llm.models import available_models
    from scripts.chat_template_golden import REQUESTS

    golden = _golden()
    assert sorted(golden["models"]) == available_models(kind="local")
    for name, entry in golden["models"].items():
        assert entry["sha256"] == load_spec(name).sha256, f"{name}: model changed, re-record the fixture"
        assert sorted(entry["prompts"]) == sorted(REQUESTS) and all(entry["prompts"].values())


@pytest.mark.parametrize("name", sorted(_golden()["models"]))
def test_template_matches_llama_cpp_python_rendering(name):
    """Both runtimes must send the model the same text for the same request (prompt tokens stay comparable):
    xllama_server renders each real template as llama-cpp-python rendered it (recorded in tests/fixtures/
    chat_templates.json by scripts/chat_template_golden.py, so this runs where only the prebuilt runtime is)."""
    from harness.llm.local_server import for_template
    from harness.llm.xllama_server import ChatTemplate
    from scripts.chat_template_golden import REQUESTS

    entry = _golden()["models"][name]
    spec = load_spec(name)
    if spec.path.is_file():  # the fixture holds this very file's template and tokens
        meta = read_chat_meta(spec.path)
        assert (meta.chat_template, meta.bos_token, meta.eos_token) == (
            entry["chat_template"], entry["bos_token"], entry["eos_token"]
        )  # fmt: skip
    ours = ChatTemplate(entry["chat_template"], entry["bos_token"], entry["eos_token"])
    for req, (msgs, tools) in REQUESTS.items():
        assert ours.render([for_template(dict(m)) for m in msgs], tools) == entry["prompts"][req], req


def test_golden_is_what_installed_llama_cpp_python_renders_now():
    """Where the compiled runtime is installed (make runtime-compiled), the fixture is checked against it live."""
    pytest.importorskip("llama_cpp.llama_chat_format", reason="compiled runtime not installed (make runtime-compiled)")
    from harness.llm.models import available_models
    from scripts.chat_template_golden import record

    if not all(load_spec(n).path.is_file() for n in available_models(kind="local")):
        pytest.skip("not every local model file is here (lme-harness models pull NAME)")
    assert record()["models"] == _golden()["models"]


def test_synthetic_template_matches_llama_cpp_python_rendering():
    """The synthetic template (markup, non-ASCII, tool calls) where the compiled runtime is installed."""
    llama_chat_format = pytest.importorskip(
        "llama_cpp.llama_chat_format", reason="compiled runtime not installed (make runtime-compiled)"
    )
    from harness.llm.local_server import for_template
    from harness.llm.xllama_server import ChatTemplate
    from scripts.chat_template_golden import REQUESTS

    theirs = llama_chat_format.Jinja2ChatFormatter(template=TEMPLATE, eos_token="<|im_end|>", bos_token="<s>")
    for msgs, tools in REQUESTS.values():
        plain = [for_template(dict(m)) for m in msgs]
        assert (
            ChatTemplate(TEMPLATE, "<s>", "<|im_end|>").render(plain, tools)
            == theirs(messages=plain, tools=tools).prompt
        )


def test_runtime_is_validated_and_part_of_the_endpoint_identity():
    spec = replace(load_spec("smollm2_135m"), runtime="llama-cpp-python")
    with pytest.raises(ModelError, match="runtime must be one of llama-cpp-python, xllamacpp, not 'llamafile'"):
        ModelSpec.from_config(
            {"name": "m", "kind": "local", "model": "m", "file": "f", "sha256": "x", "runtime": "llamafile"}
        )
    other = replace(spec, runtime="xllamacpp")
    assert cache_namespace(spec) != cache_namespace(other)
    assert cache_namespace(spec) == f"llama.cpp:{spec.sha256}:n_ctx={spec.n_ctx}:{spec.chat_format}"  # old caches hold
    with pytest.raises(LocalServerError, match="server_args"):
        xllama_server_args(replace(other, extra={"server_args": {"flash_attn": True}}), 1, 1)


CITY_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


@pytest.mark.slow
def test_real_xllamacpp_server_answers_and_calls_tools(tmp_path):
    pytest.importorskip("xllamacpp")
    openai = pytest.importorskip("openai")
    spec = replace(load_spec("smollm2_135m"), runtime="xllamacpp")
    if not spec.path.is_file():
        pytest.skip(f"model file absent: {spec.path} (lme-harness models pull smollm2_135m)")
    with LlamaServer(spec, log_path=tmp_path / "llama.log", n_threads=2) as srv:
        srv.check_compute()
        client = openai.OpenAI(base_url=srv.base_url, api_key="local", max_retries=0, timeout=300)
        msgs = [{"role": "user", "content": "What is the capital of France? One word."}]
        r = client.chat.completions.create(model=srv.model, messages=msgs, temperature=0, max_tokens=8)
        assert r.choices[0].message.content.strip() and r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
        # a forced call is one schema-valid call of an offered tool, even from a 135M model
        r = client.chat.completions.create(
            model=srv.model, messages=msgs, tools=CITY_TOOL, tool_choice="required", temperature=0, max_tokens=48
        )
        call = r.choices[0].message.tool_calls[0]
        assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
        assert isinstance(json.loads(call.function.arguments)["city"], str)
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny"}'},
        ]
        r = client.chat.completions.create(
            model=srv.model, messages=msgs, tools=CITY_TOOL, tool_choice="auto", temperature=0, max_tokens=16
        )
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
        # response_format json_object (mem0 asks for it): the reply is held to a JSON object by a grammar
        r = client.chat.completions.create(
            model=srv.model,
            messages=[{"role": "user", "content": "Give the capital of France as JSON."}],
            response_format={"type": "json_object"},
            temperature=0,
            max_tokens=24,
        )
        assert r.choices[0].message.content.lstrip().startswith("{")
        # a field this server would otherwise ignore is refused by name
        req = urllib.request.Request(
            srv.base_url + "/chat/completions",
            data=json.dumps({"model": srv.model, "messages": msgs[:1], "logprobs": True}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=60)
        assert e.value.code == 400 and "logprobs" in e.value.read().decode()
        perf = srv.perf()  # the measured speed, read from this runtime's log as from the other's
        assert perf["prefill_tokens"] > 0 and perf["generated_tokens"] > 0 and perf["prefill_tokens_per_s"] > 0


def test_the_report_header_names_the_runtime_only_where_the_config_names_one():
    from harness.run_meta import RunMeta
    from reports.report_sections import _provenance_lines

    def model_line(model: dict) -> str:
        meta = RunMeta.from_json({"model": model, "dataset": {"source": "d"}})
        return next(line for line in _provenance_lines(meta) if line.startswith("- model:"))

    base = {"name": "qwen25_coder_15b", "model": "qwen", "sha256": "cc324af070c2aaaa"}
    assert model_line({**base, "runtime": "xllamacpp"}).endswith("sha256 cc324af070c2…, runtime xllamacpp)")
    assert "runtime" not in model_line(base)


@pytest.mark.parametrize(
    ("fmt", "schema"),
    [
        (None, None),
        ({"type": "text"}, None),
        ({"type": "json_object"}, {"type": "object"}),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array"}}}, {"type": "array"}),
    ],
)
def test_response_format_becomes_the_schema_the_reply_follows(fmt, schema):
    from harness.llm.xllama_server import check_request, response_format_schema

    assert response_format_schema(fmt) == schema
    check_request({"messages": [{"role": "user", "content": "hi"}], "response_format": fmt})


@pytest.mark.parametrize(
    "fmt", ["json", {"type": "xml"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": 1}}]
)
def test_a_malformed_response_format_is_refused_by_name(fmt):
    from harness.llm.xllama_server import BadRequest, check_request

    with pytest.raises(BadRequest, match="response_format"):
        check_request({"messages": [{"role": "user", "content": "hi"}], "response_format": fmt})


def test_a_json_object_response_format_is_an_llguidance_grammar():
    pytest.importorskip("xllamacpp")
    from harness.llm.xllama_server import json_grammar

    grammar = json_grammar({"type": "object"})
    assert grammar.startswith("%llguidance")
