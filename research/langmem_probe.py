"""Does LangMem run offline? A feasibility probe of a second memory engine (docs/memory-systems.md).

    python3 -m venv /tmp/langmemvenv && /tmp/langmemvenv/bin/pip install langmem==0.0.30 langchain-openai
    echo "import site; site.addsitedir('$PWD/.venv/lib/python3.11/site-packages')" \
        > /tmp/langmemvenv/lib/python3.11/site-packages/zz_lme_project.pth
    PYTHONPATH=$PWD /tmp/langmemvenv/bin/python -m research.langmem_probe

LangMem's store manager extracts memories with tool calls (trustcall); its model here is `ChatOpenAI` on the
project's fake endpoint, which answers with scripted `Memory` tool calls (one per fact named in the new messages
and not yet stored); its store is LangGraph's `InMemoryStore` indexed with the project's hashing embedder, one
namespace per unit. Prints the LLM calls (tools offered, tool_choice, request size), what each unit finds, and
every non-loopback connection attempted. Not a dependency of the project.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from harness.llm.loopback import Reply
from harness.retrieval.embedders import HashingEmbedder
from harness.testing.fake_openai import FakeOpenAIServer, completion

FACTS = {"Lisbon": "User moved to Lisbon in March 2023", "yoga": "User takes yoga on Tuesdays", "tea": "User likes tea"}


def main() -> None:
    peers: list[Any] = []
    connect = socket.socket.connect

    def guarded(sock: socket.socket, addr: Any) -> Any:
        peers.append(addr)
        return connect(sock, addr)

    socket.socket.connect = guarded  # type: ignore[method-assign,assignment]
    from langchain_openai import ChatOpenAI
    from langgraph.store.memory import InMemoryStore
    from langmem import create_memory_store_manager

    calls: list[tuple[list[str], Any, int]] = []

    def responder(req: dict[str, Any]) -> Reply:
        tools = [t["function"]["name"] for t in req.get("tools") or []]
        text = json.dumps(req["messages"])
        calls.append((tools, req.get("tool_choice"), len(text)))
        new = [fact for cue, fact in FACTS.items() if cue in text and fact not in text]  # not stored yet
        if "Memory" in tools and new:
            return completion(
                None, [{"id": f"c{i}", "name": "Memory", "arguments": {"content": f}} for i, f in enumerate(new)]
            )
        return completion("nothing new")

    hashing = HashingEmbedder(256)
    t0 = time.perf_counter()
    with FakeOpenAIServer(responder) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="k", model="fake-model", max_retries=0)
        store = InMemoryStore(index={"dims": 256, "embed": lambda texts: hashing.embed(list(texts)).tolist()})
        manager = create_memory_store_manager(model, namespace=("memories", "{unit}"), store=store)
        for unit, said in (
            ("u1", "I moved to Lisbon in March."),
            ("u1", "I take yoga every Tuesday."),
            ("u2", "I like tea."),
        ):
            messages = [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}]
            manager.invoke({"messages": messages}, config={"configurable": {"unit": unit}})
        found = {
            unit: [
                h.value["content"]["content"]
                for h in store.search(("memories", unit), query="Lisbon yoga tea", limit=5)
            ]
            for unit in ("u1", "u2")
        }
    print(
        json.dumps(
            {
                "seconds": round(time.perf_counter() - t0, 1),
                "llm_calls": calls,
                "found": found,
                "non_loopback_connects": [p for p in peers if not (isinstance(p, tuple) and p[0] == "127.0.0.1")],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
