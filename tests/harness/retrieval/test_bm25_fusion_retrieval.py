"""Issue 24, part 1: for a recall query, the first hit's conversation neighbours (`recall_window`) in the compact
response; off in every preset. (BM25 rank fusion and `recall_top_hits`, measured beside it and not adopted, were
removed from the retriever: research/README.md.)"""

from __future__ import annotations

import json

import pytest

from harness.retrieval.config import SearchConfig, preset
from harness.retrieval.embedders import HashingEmbedder
from tests.support.paths import REPO
from tests.support.turn_sessions import turn_tools

NEW = {"recall_window": 0}


def _tools(cfg: SearchConfig, turns, *, embedder=True):
    """(conversation, role, text) turns as one session, everything hidden."""
    return turn_tools(cfg, turns, embedder=HashingEmbedder() if embedder else None)


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "configs" / "retrieval").glob("*.yaml")))
def test_every_preset_has_the_setting_off(name):
    cfg = preset(name)
    assert {k: getattr(cfg, k) for k in NEW} == NEW


def test_recall_window_is_range_checked():
    with pytest.raises(ValueError, match="recall_window"):
        preset("default", recall_window=-1)


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
