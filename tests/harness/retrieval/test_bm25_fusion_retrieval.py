"""Issue 24, part 1: the default's ranking fused with a plain BM25 ranking (`bm25_fusion`), and for a query the
recall trigger fires on, more whole hits (`recall_top_hits`) and the first hit's conversation neighbours
(`recall_window`) in the compact response; all off in every preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.retrieval.config import SearchConfig, preset, recall_cue
from harness.retrieval.embedders import HashingEmbedder
from tests.support.paths import REPO
from tests.support.turn_sessions import PASTED, PASTED_QUERY, generated_turns, turn_tools

NEW = {"bm25_fusion": 0.0, "recall_top_hits": None, "recall_window": 0}


def _tools(cfg: SearchConfig, turns, *, embedder=True):
    """(conversation, role, text) turns as one session, everything hidden."""
    return turn_tools(cfg, turns, embedder=HashingEmbedder() if embedder else None)


def _hits(cfg: SearchConfig, query: str, turns, *, top_k: int = 10, embedder=True) -> list[tuple[str, float]]:
    out = _tools(cfg, turns, embedder=embedder).call("session_search", {"query": query, "top_k": top_k})
    return [(h["event_id"], h["score"]) for h in out.trace["hits"]]


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "configs" / "retrieval").glob("*.yaml")))
def test_every_preset_has_the_three_settings_off(name):
    cfg = preset(name)
    assert {k: getattr(cfg, k) for k in NEW} == NEW


def test_fusion_off_leaves_the_response_byte_identical():
    for query in (PASTED_QUERY, "meta titles for the article", "Which case did I paste?"):
        shipped = _tools(preset("default"), PASTED).call("session_search", {"query": query}).content
        explicit = _tools(preset("default", **NEW), PASTED).call("session_search", {"query": query}).content
        assert shipped == explicit


def test_fusion_lifts_the_turn_bm25_ranks_first_over_the_recall_prior():
    assert recall_cue(PASTED_QUERY)
    default = [e for e, _ in _hits(preset("default"), PASTED_QUERY, PASTED)]
    bm25 = [e for e, _ in _hits(preset("bm25"), PASTED_QUERY, PASTED)]
    assert default[0] == "e0003" and bm25[0] == "e0000"  # the recall prior (user × 0.5) pushed the user's text down
    fused = _hits(preset("default", bm25_fusion=2.0), PASTED_QUERY, PASTED)
    assert fused[0][0] == "e0000"
    # every score is the fusion's: 1/(60 + rank) + w/(60 + BM25 rank), ranks from 1
    for event_id, score in fused:
        expect = 1 / (60 + default.index(event_id) + 1)
        expect += 2.0 / (60 + bm25.index(event_id) + 1) if event_id in bm25 else 0.0
        assert score == pytest.approx(expect)


def test_fusion_is_range_checked():
    with pytest.raises(ValueError, match="bm25_fusion"):
        preset("default", bm25_fusion=-0.5)
    with pytest.raises(ValueError, match="recall_top_hits"):
        preset("default", recall_top_hits=-1)
    with pytest.raises(ValueError, match="recall_window"):
        preset("default", recall_window=-1)


@pytest.mark.parametrize("seed", range(6))
def test_fusion_on_generated_conversations_stays_between_the_two_rankings(seed):
    """Generated conversations and queries (keyword index, the default's priors): a turn first in both rankings stays
    first; a very large weight gives BM25's order; every hit is a turn one of the two rankings holds."""
    rng = np.random.default_rng(seed)
    turns, query = generated_turns(rng, words=25, conversations=5)
    prior = {"assistant_weight": 0.5, "propagate": 0.5, "speaker_prior": "user"}
    default = [e for e, _ in _hits(preset("bm25", **prior), query, turns, embedder=False)]
    bm25 = [e for e, _ in _hits(preset("bm25"), query, turns, embedder=False)]
    fused = [
        e
        for e, _ in _hits(
            preset("bm25", bm25_fusion=float(rng.choice([0.5, 1, 2])), **prior), query, turns, embedder=False
        )
    ]
    assert set(fused) <= set(default) | set(bm25)
    if default and bm25 and default[0] == bm25[0]:
        assert fused[0] == default[0]
    heavy = [e for e, _ in _hits(preset("bm25", bm25_fusion=1000.0, **prior), query, turns, embedder=False)]
    assert heavy == bm25


# A recalled conversation of three long replies (each ~1,500 characters) and an unrelated one.
def _long(part: int) -> str:
    return " ".join(f"Point {part}.{i} on the Rome trip and its trattorias." for i in range(30))


ROME = [
    ("c1", "user", "Plan my Rome trip: restaurants, museums and walks."),
    ("c1", "assistant", "Restaurants. " + _long(1)),
    ("c1", "user", "And the museums?"),
    ("c1", "assistant", "Museums. " + _long(2)),
    ("c1", "user", "And the walks?"),
    ("c1", "assistant", "Walks. " + _long(3)),
    ("c2", "user", "How long should I boil an egg?"),
]
ROME_QUERY = "Can you remind me of the trattorias on the Rome trip you recommended?"


def _response(cfg: SearchConfig, query: str) -> list[dict]:
    return json.loads(_tools(cfg, ROME).call("session_search", {"query": query}).content)["results"]


def test_recall_top_hits_sends_more_whole_hits_for_a_recall_query_only():
    assert recall_cue(ROME_QUERY)
    texts = {f"e{i:04d}": t for i, (_, _, t) in enumerate(ROME)}

    def whole(results):
        return [r["event_id"] for r in results if r["snippet"] == texts[r["event_id"]] and len(r["snippet"]) > 700]

    assert len(whole(_response(preset("default"), ROME_QUERY))) == 2  # the shipped top 2
    assert len(whole(_response(preset("default", recall_top_hits=3), ROME_QUERY))) == 3
    plain = "trattorias on the Rome trip"  # no recall cue: unchanged
    assert _response(preset("default", recall_top_hits=3), plain) == _response(preset("default"), plain)


def test_recall_window_brings_the_first_hits_conversation_neighbours_whole():
    on = _response(preset("default", recall_window=1), ROME_QUERY)
    first = int(on[0]["event_id"][1:])
    context = on[0]["context"]
    expect = [i for i in (first - 1, first + 1) if 0 <= i < 6]  # c1's turns only: e0006 is another conversation
    assert [c["event_id"] for c in context] == [f"e{i:04d}" for i in expect]
    assert all(c["content"] == ROME[int(c["event_id"][1:])][2] for c in context)  # whole (≤ 3,000 characters)
    assert all("context" not in r for r in on[1:])
    assert "context" not in _response(preset("default"), ROME_QUERY)[0]
    plain = "trattorias on the Rome trip"
    assert _response(preset("default", recall_window=2), plain) == _response(preset("default"), plain)
