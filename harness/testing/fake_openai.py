"""Test doubles on the loopback server (harness/llm/loopback.py): the fake OpenAI endpoint the tests script.

`FakeOpenAIServer` is the production `LoopbackServer` under the name the tests use; `embeddings`, `scripted` and
`mem0_extraction` are test-only reply builders. harness/testing/faults.py builds fault mixes and a fake model on these
(its `FakeModel`, served by `python -m harness.testing.faults`, answers mem0's extraction calls with `mem0_facts`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.llm.loopback import LoopbackServer, Reply, Responder, completion

FakeOpenAIServer = LoopbackServer

__all__ = [
    "FakeOpenAIServer",
    "Reply",
    "Responder",
    "completion",
    "embeddings",
    "is_mem0_extraction",
    "mem0_extraction",
    "mem0_facts",
    "mem0_new_messages",
    "scripted",
]

MEM0_NEW_MESSAGES = "## New Messages"  # mem0 2.x's extraction prompt: the section holding the turns being ingested
MEM0_FACT_CHARS = 300  # a fact is its user line, cut to this length


def _last_content(req: Mapping[str, Any]) -> str:
    msgs = req.get("messages") or []
    last = msgs[-1].get("content") if msgs else None
    return last if isinstance(last, str) else ""


def is_mem0_extraction(req: Mapping[str, Any]) -> bool:
    """Whether a chat request is mem0's fact-extraction call (harness/memory/mem0_provider.py ingests through it)."""
    return MEM0_NEW_MESSAGES in _last_content(req)


def mem0_new_messages(req: Mapping[str, Any]) -> str:
    """The "## New Messages" section of mem0's extraction prompt (the turns being ingested, `role: text` lines)."""
    return _last_content(req).split(MEM0_NEW_MESSAGES, 1)[1].split("## Observation Date", 1)[0]


def mem0_facts(req: Mapping[str, Any]) -> str:
    """A deterministic stand-in for mem0's extraction LLM, in the JSON mem0 2.x parses (`{"memory": [{"text": ...}]}`):
    one fact per user line of the prompt's new messages, its text verbatim (cut to MEM0_FACT_CHARS)."""
    facts = [
        {"text": line[len("user: ") :][:MEM0_FACT_CHARS]}
        for line in mem0_new_messages(req).strip().splitlines()
        if line.startswith("user: ") and line[len("user: ") :].strip()
    ]
    return json.dumps({"memory": facts})


def mem0_extraction(req: Mapping[str, Any], *, prompt_tokens: int = 100, completion_tokens: int = 7) -> Reply:
    """mem0's extraction reply (`mem0_facts`) as a chat completion with fixed usage: a responder of its own."""
    return completion(mem0_facts(req), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def embeddings(n: int, dim: int = 8, *, prompt_tokens: int = 0, model: str = "fake-embedding") -> Reply:
    """A well-formed /embeddings reply with `n` deterministic unit vectors."""
    data = []
    for i in range(n):
        v = [0.0] * dim
        v[i % dim] = 1.0
        data.append({"object": "embedding", "index": i, "embedding": v})
    return Reply(
        body={
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        }
    )


def scripted(replies: list[Reply]) -> Responder:
    """Answer requests with `replies` in order (the last one repeats)."""
    it = iter(replies)
    last: list[Reply] = []

    def responder(_req: dict[str, Any]) -> Reply:
        try:
            last[:] = [next(it)]
        except StopIteration:
            pass
        return last[0]

    return responder
