"""Issue 24: what a speaker-neutral query ("can you remind me what you said …": both speakers named, so the
speaker prior gives equal weights) gets from `SearchConfig.neutral_ranking`, without any recall-cue phrase list."""

from __future__ import annotations

import json

import pytest

from harness.retrieval.config import SearchConfig, preset
from harness.retrieval.retriever import Retriever
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session

EVENTS = [
    ("user", "What should I use for rope anchors when climbing?"),
    ("assistant", "Use the figure-eight knot for rope anchors: the knot climbing guides use for rope anchors."),
    ("user", "Which climbing shoes should I buy for my first climbing season?"),
    ("assistant", "A snug, flat climbing pair for beginners; avoid aggressive downturned shoes at first."),
    ("user", "How long should I boil an egg?"),
    ("assistant", "Nine minutes for a firm yolk."),
]
NEUTRAL = "Can you remind me which knot you said to use for climbing rope anchors?"  # "me" and "you"
FIRST_PERSON = "Which knot should I use for climbing rope anchors?"


def _search(cfg: SearchConfig, query: str, pad: str = "", *, response: bool = False) -> list[dict]:
    events = [
        Event(id=f"e{i:04d}", index=i, role=role, content=text + pad, timestamp=1_700_000_000.0 + i)
        for i, (role, text) in enumerate(EVENTS)
    ]
    s = Session(id="s", user_id="u")
    s.extend(events)
    b = SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)
    out = Retriever(cfg).tools(s, boundary=b).call("session_search", {"query": query})
    return json.loads(out.content)["results"] if response else out.trace["hits"]


def _cfg(**kw) -> SearchConfig:
    # The project default's speaker prior and reply→question credit, on the keyword index (no embedder needed).
    return preset("bm25", assistant_weight=0.5, propagate=0.5, speaker_prior="user", **kw)


def _ids(cfg: SearchConfig, query: str = NEUTRAL) -> list[str]:
    return [h["event_id"] for h in _search(cfg, query)]


def test_propagation_puts_the_question_above_its_answer_for_a_neutral_query():
    # The failure of issue 24: the reply's own score lifts the user's question above the reply itself.
    assert _ids(_cfg())[0] == "e0000"
    assert _ids(_cfg(neutral_ranking="plain"))[0] == "e0001"  # without the credit the answer ranks first


def test_interleave_alternates_the_speakers_with_the_chosen_one_first():
    hits = _search(_cfg(neutral_ranking="interleave_assistant"), NEUTRAL)
    roles = [h["event_id"] for h in hits]
    assert roles[:2] == ["e0001", "e0000"]  # the best reply, then the best question (with its reply's credit)
    kinds = [int(e[-1]) % 2 for e in roles]  # odd ids are assistant messages
    assert kinds[: 2 * min(kinds.count(0), kinds.count(1))] == [1, 0] * min(kinds.count(0), kinds.count(1))
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert _ids(_cfg(neutral_ranking="interleave_user"))[:2] == ["e0000", "e0001"]


def test_pair_credits_each_member_of_a_turn_pair_with_the_other():
    assert set(_ids(_cfg(neutral_ranking="pair"))[:2]) == {"e0000", "e0001"}


@pytest.mark.parametrize("ranking", ["plain", "pair", "interleave_assistant", "interleave_user"])
def test_a_query_that_names_one_speaker_is_ranked_as_before(ranking):
    # First person only: the user prior applies, whatever neutral_ranking says.
    assert _ids(_cfg(neutral_ranking=ranking), FIRST_PERSON) == _ids(_cfg(), FIRST_PERSON)


def test_neutral_top_hits_keeps_more_hits_whole_only_for_neutral_queries():
    cfg = _cfg(
        neutral_ranking="interleave_assistant",
        neutral_top_hits=3,
        response_style="compact",
        hit_chars=80,
        budget_chars=4000,
        top_hit_chars=3000,
        top_hits=1,
    )
    pad = " That was written down in the shared notebook for later, with the date beside it."
    text = {f"e{i:04d}": t + pad for i, (_, t) in enumerate(EVENTS)}  # every message longer than hit_chars

    def hits(query):
        return [(h["event_id"], h["snippet"] == text[h["event_id"]]) for h in _search(cfg, query, pad, response=True)]

    neutral, first_person = hits(NEUTRAL), hits(FIRST_PERSON)
    assert len(neutral) >= 4 and len(first_person) >= 2
    assert [w for _, w in neutral[:4]] == [True, True, True, False]  # three whole, then excerpts
    assert [w for _, w in first_person[:2]] == [True, False]  # top_hits=1 for a query naming one speaker


def test_an_unknown_neutral_ranking_is_one_clear_error():
    with pytest.raises(ValueError, match="neutral_ranking"):
        SearchConfig(neutral_ranking="both")
