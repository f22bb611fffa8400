"""The forced tool call's JSON schema, one builder for both runtimes: the prebuilt runtime closes each call object
(no keys besides name/arguments); llama-cpp-python's GBNF keeps it open, as before."""

from __future__ import annotations

import json

from harness.llm.local_server import forced_call_schema

TOOLS = [
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {}}}}},
    {"type": "function", "function": {"name": "noop"}},
]


def _branch(name: str, arguments: dict, closed: bool) -> dict:
    b = {
        "type": "object",
        "required": ["name", "arguments"],
        "properties": {"name": {"const": name}, "arguments": arguments},
    }
    return {**b, "additionalProperties": False} if closed else b


def test_one_branch_per_tool_and_a_missing_schema_means_any_object():
    for closed in (False, True):
        want = {
            "oneOf": [
                _branch("search", {"type": "object", "properties": {"q": {}}}, closed),
                _branch("noop", {"type": "object"}, closed),
            ]
        }
        # serialised as each grammar builder reads it: same keys in the same order
        assert json.dumps(forced_call_schema(TOOLS, closed=closed)) == json.dumps(want)


def test_the_prebuilt_runtime_grammar_is_built_from_the_closed_schema(monkeypatch):
    import xllamacpp

    from harness.llm import xllama_server

    seen: list[str] = []
    monkeypatch.setattr(xllamacpp, "json_schema_to_grammar", lambda s: seen.append(s) or "%llguidance {}\nstart: x")
    xllama_server.forced_call_grammar(TOOLS)
    assert json.loads(seen[0]) == forced_call_schema(TOOLS, closed=True)
    assert all(b["additionalProperties"] is False for b in json.loads(seen[0])["oneOf"])
