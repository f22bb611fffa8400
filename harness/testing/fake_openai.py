"""Test doubles on the loopback server (harness/llm/loopback.py): the fake OpenAI endpoint the tests script.

`FakeOpenAIServer` is the production `LoopbackServer` under the name the tests use; `embeddings` and `scripted`
are test-only reply builders. harness/testing/faults.py builds fault mixes and a fake model on these.
"""

from __future__ import annotations

from typing import Any

from harness.llm.loopback import LoopbackServer, Reply, Responder, completion

FakeOpenAIServer = LoopbackServer

__all__ = ["FakeOpenAIServer", "Reply", "Responder", "completion", "embeddings", "scripted"]


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
