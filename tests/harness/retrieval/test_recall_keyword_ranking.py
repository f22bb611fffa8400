"""Issue 24, part 1: `recall_ranking: keyword` ranks a query the recall trigger fires on by plain BM25, the `bm25`
preset's ranking, while the response keeps the preset's own shape; every other query is ranked as before. Off
(`fused`) in every preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.retrieval.config import SearchConfig, preset, recall_cue
from harness.retrieval.embedders import HashingEmbedder
from tests.support.paths import REPO
from tests.support.turn_sessions import PASTED, PASTED_QUERY, generated_turns, turn_tools

PRESETS = sorted(p.stem for p in (REPO / "configs" / "retrieval").glob("*.yaml"))

# The pasted-text conversation and another that shares a word with the question ("house").
TURNS = [
    *PASTED,
    ("c2", "user", "What is a good name for a house plant?"),
    ("c2", "assistant", "Fern Gully is a good name for a house plant."),
]
RECALL = PASTED_QUERY


def _search(cfg: SearchConfig, query: str, turns, *, embedder: bool = True, top_k: int = 10):
    tools = turn_tools(cfg, turns, embedder=HashingEmbedder() if embedder else None)
    return tools.call("session_search", {"query": query, "top_k": top_k})


def _ids(out) -> list[str]:
    return [h["event_id"] for h in out.trace["hits"]]


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_ranks_a_recall_query_as_any_other(name):
    assert preset(name).recall_ranking == "fused"


def test_a_recall_query_is_ranked_as_bm25_ranks_it_and_answered_in_the_presets_shape():
    assert recall_cue(RECALL)
    shipped = _ids(_search(preset("default"), RECALL, TURNS))
    keyword = _search(preset("default", recall_ranking="keyword"), RECALL, TURNS)
    bm25 = _search(preset("bm25"), RECALL, TURNS, embedder=False)
    assert shipped[0] == "e0003"  # the recall prior (user × 0.5) pushed the user's pasted text down
    assert _ids(keyword) == _ids(bm25) and _ids(keyword)[0] == "e0000"
    # the default's compact response (hits only, each as the compact shape writes it), not bm25's reference shape
    compact = _search(preset("default"), RECALL, TURNS)
    shape = {tuple(h) for h in json.loads(compact.content)["results"]}
    assert {tuple(h) for h in json.loads(keyword.content)["results"]} == shape
    assert all("context" in h for h in json.loads(bm25.content)["results"][:2])
    assert PASTED[0][2] in keyword.content


@pytest.mark.parametrize("query", ["meta titles for the article", "Which case did I paste?", "name for a plant"])
def test_any_other_query_gets_the_shipped_response_byte_for_byte(query):
    assert not recall_cue(query)
    shipped = _search(preset("default"), query, TURNS).content
    assert _search(preset("default", recall_ranking="keyword"), query, TURNS).content == shipped


@pytest.mark.parametrize("seed", range(12))
def test_generated_recall_queries_get_bm25s_ranking_and_others_the_shipped_one(seed):
    """Generated turn sets (few words, so ties and empty results occur) and a query with and without a recall cue."""
    rng = np.random.default_rng(seed)
    turns, words = generated_turns(rng, words=int(rng.integers(6, 30)), conversations=int(rng.integers(1, 5)))
    recall, plain = f"in our previous chat you mentioned {words}", words
    assert recall_cue(recall) and not recall_cue(plain)
    k = int(rng.integers(1, 8))
    keyword = preset("default", recall_ranking="keyword")
    assert _ids(_search(keyword, recall, turns, top_k=k)) == _ids(_search(preset("bm25"), recall, turns, top_k=k))
    assert _search(keyword, plain, turns, top_k=k).content == _search(preset("default"), plain, turns, top_k=k).content


def test_the_setting_is_checked():
    with pytest.raises(ValueError, match="recall_ranking"):
        preset("default", recall_ranking="bm25")
