"""Record how llama-cpp-python renders the real chat templates, so CI checks the prebuilt runtime against it uncompiled.

Both runtimes must send a model the same prompt text for the same request (prompt tokens and answers stay comparable
across them). CI installs only the prebuilt runtime (xllamacpp, issue 21), so llama-cpp-python's rendering is kept
here as a golden fixture: for every local model in configs/model/, the GGUF's chat template and special tokens, and
llama-cpp-python's `Jinja2ChatFormatter` prompt for each request below (messages passed through
`local_server.for_template`, as its `template_tools_handler` does). `tests/harness/llm/test_xllama_server.py` renders the same
requests with `xllama_server.ChatTemplate` and compares.

Regenerate after changing the requests, a model, `for_template`, or the pinned llama-cpp-python (needs it installed:
`make runtime-compiled`, and the model files: `lme-harness models pull NAME`):

    python -m scripts.chat_template_golden            # rewrites tests/fixtures/chat_templates.json
    python -m scripts.chat_template_golden --check    # exit 1 if the fixture differs from a fresh recording
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "chat_templates.json"

_TOOL = {
    "type": "function",
    "function": {
        "name": "session_search",
        "description": 'Search past sessions <&> "quoted", café',
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
_CALL = {"id": "c1", "type": "function", "function": {"name": "session_search", "arguments": '{"query": "Paris"}'}}

# name -> (messages, tools): the shapes the harness sends (a system prompt or none, a forced search and its result,
# a multi-turn history, text with markup and non-ASCII characters).
REQUESTS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "system_user": (
        [{"role": "system", "content": "You remember things."}, {"role": "user", "content": "Where did I go?"}],
        None,
    ),
    "user_only_with_tools": ([{"role": "user", "content": 'What did I say about <b>"Paris"</b>, café?'}], [_TOOL]),
    "tool_round_trip": (
        [
            {"role": "system", "content": "You remember things."},
            {"role": "user", "content": 'What did I say about <b>"Paris"</b>, café?'},
            {"role": "assistant", "content": None, "tool_calls": [_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "You said: Paris is lovely."},
        ],
        [_TOOL],
    ),
    "tool_round_trip_no_tools": (
        [
            {"role": "user", "content": "Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "lovely"},
        ],
        None,
    ),
    "multi_turn": (
        [
            {"role": "system", "content": "Answer briefly.\n\nBe kind."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "  Spaces and\ttabs\n\nkept?  "},
        ],
        None,
    ),
}


def record() -> dict[str, Any]:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from harness.llm.gguf_meta import read_chat_meta
    from harness.llm.local_server import for_template
    from harness.llm.models import available_models, load_spec

    models: dict[str, Any] = {}
    for name in available_models(kind="local"):
        spec = load_spec(name)
        meta = read_chat_meta(spec.path)  # FileNotFoundError names the file: pull it first
        if meta.chat_template is None:
            raise SystemExit(f"chat_template_golden: {spec.path} has no chat template")
        theirs: Any = Jinja2ChatFormatter(  # typed for llama-cpp-python's TypedDicts; ours are plain dicts
            template=meta.chat_template, eos_token=meta.eos_token, bos_token=meta.bos_token
        )
        prompts = {
            req: theirs(messages=[for_template(dict(m)) for m in msgs], tools=tools).prompt
            for req, (msgs, tools) in REQUESTS.items()
        }
        models[name] = {
            "sha256": spec.sha256,
            "chat_template": meta.chat_template,
            "bos_token": meta.bos_token,
            "eos_token": meta.eos_token,
            "prompts": prompts,
        }
    import llama_cpp

    return {"llama_cpp_python": llama_cpp.__version__, "models": models}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed fixture instead of writing it")
    a = ap.parse_args(argv)
    text = json.dumps(record(), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if a.check:
        same = FIXTURE.is_file() and FIXTURE.read_text(encoding="utf-8") == text
        print(f"chat_template_golden: {FIXTURE} {'matches' if same else 'DIFFERS from'} a fresh recording")
        return 0 if same else 1
    FIXTURE.write_text(text, encoding="utf-8")
    print(f"chat_template_golden: wrote {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
