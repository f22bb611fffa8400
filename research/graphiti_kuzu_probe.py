"""Does Graphiti (graphiti-core) run offline on an embedded Kuzu graph? A feasibility probe (docs/memory-systems.md).

    python3 -m venv /tmp/graphitivenv && /tmp/graphitivenv/bin/pip install 'graphiti-core[kuzu]==0.31.2'
    echo "import site; site.addsitedir('$PWD/.venv/lib/python3.11/site-packages')" \
        > /tmp/graphitivenv/lib/python3.11/site-packages/zz_lme_project.pth
    PYTHONPATH=$PWD /tmp/graphitivenv/bin/python -m research.graphiti_kuzu_probe

Graphiti's LLM is an OpenAI-compatible endpoint: here the project's fake one, answering each structured-output
request (named by its `json_schema`) with a scripted object; its embedder and reranker wrap the project's
hashing embedder; Kuzu runs in memory. Prints which LLM calls one episode made, what was stored and found
for its group and for another group, and every non-loopback connection attempted. Not a dependency of the
project: a probe of the second engine of issue 23 item 3.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from harness.llm.loopback import Reply
from harness.retrieval.embedders import HashingEmbedder
from harness.testing.fake_openai import FakeOpenAIServer, completion

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

SCRIPTED: dict[str, Any] = {
    "ExtractedEntities": {
        "extracted_entities": [{"name": "Alice", "entity_type_id": 0}, {"name": "Lisbon", "entity_type_id": 0}]
    },
    "ExtractedEdges": {
        "edges": [
            {
                "relation_type": "LIVES_IN",
                "source_entity_name": "Alice",
                "target_entity_name": "Lisbon",
                "source_entity_id": 0,
                "target_entity_id": 1,
                "fact": "Alice moved to Lisbon in March 2023",
                "valid_at": None,
                "invalid_at": None,
            }
        ]
    },
}


def _minimal(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The smallest instance of a JSON schema (empty lists, empty strings, zeros)."""
    if "$ref" in schema:
        return _minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return _minimal(schema["anyOf"][0], defs)
    kind = schema.get("type")
    if kind == "object":
        return {k: _minimal(v, defs) for k, v in schema.get("properties", {}).items()}
    return {"array": [], "string": "", "integer": 0, "number": 0.0, "boolean": False}.get(kind or "", None)


def main() -> None:
    peers: list[Any] = []
    connect = socket.socket.connect

    def guarded(sock: socket.socket, addr: Any) -> Any:
        peers.append(addr)
        return connect(sock, addr)

    socket.socket.connect = guarded  # type: ignore[method-assign,assignment]
    import kuzu
    from graphiti_core import Graphiti
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.driver.driver import GraphProvider
    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.embedder.client import EmbedderClient
    from graphiti_core.graph_queries import get_fulltext_indices
    from graphiti_core.llm_client.config import LLMConfig
    from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient
    from graphiti_core.nodes import EpisodeType

    hashing = HashingEmbedder(256)
    calls: list[tuple[str | None, int]] = []

    def responder(req: dict[str, Any]) -> Reply:
        spec = (req.get("response_format") or {}).get("json_schema") or {}
        name, schema = spec.get("name"), spec.get("schema") or {}
        calls.append((name, len(json.dumps(req["messages"]))))
        body = SCRIPTED.get(name or "", _minimal(schema, schema.get("$defs", {})) if schema else {})
        return completion(json.dumps(body))

    class Embedder(EmbedderClient):
        async def create(self, input_data: Any) -> list[float]:
            text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
            return [float(x) for x in hashing.embed([text])[0]]

        async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in hashing.embed(input_data_list)]

    class Ranker(CrossEncoderClient):
        async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
            q = hashing.embed([query])[0]
            return sorted(((p, float(q @ hashing.embed([p])[0])) for p in passages), key=lambda x: -x[1])

    async def run() -> None:
        with FakeOpenAIServer(responder) as srv:
            driver = KuzuDriver(db=":memory:")
            driver._database = None  # graphiti-core 0.31.2: add_episode reads it, KuzuDriver never sets it
            config = LLMConfig(api_key="k", base_url=srv.base_url, model="fake-model", small_model="fake-model")
            g = Graphiti(
                graph_driver=driver,
                llm_client=OpenAIGenericClient(config=config),
                embedder=Embedder(),
                cross_encoder=Ranker(),
            )
            await g.build_indices_and_constraints()  # a no-op for Kuzu: its full-text indexes are never created ...
            conn = kuzu.Connection(driver.db)
            for q in get_fulltext_indices(
                GraphProvider.KUZU
            ):  # ... so search fails ("doesn't have an index") without these
                conn.execute(q)
            conn.close()
            t0 = time.perf_counter()
            added = await g.add_episode(
                name="s1",
                episode_body="user: I'm Alice, I moved to Lisbon in March.\nassistant: Nice!",
                source=EpisodeType.message,
                source_description="chat",
                reference_time=datetime(2023, 6, 1, tzinfo=UTC),
                group_id="unit1",
            )
            out = {
                "add_episode_s": round(time.perf_counter() - t0, 2),
                "nodes": [n.name for n in added.nodes],
                "edges": [e.fact for e in added.edges],
                "search_unit1": [e.fact for e in await g.search("Where does Alice live?", group_ids=["unit1"])],
                "search_unit2": [e.fact for e in await g.search("Where does Alice live?", group_ids=["unit2"])],
                "llm_calls": calls,
                "non_loopback_connects": [p for p in peers if not (isinstance(p, tuple) and p[0] == "127.0.0.1")],
            }
            print(json.dumps(out, indent=1))

    asyncio.run(run())


if __name__ == "__main__":
    main()
