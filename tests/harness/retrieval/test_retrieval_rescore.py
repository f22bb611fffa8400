"""Issue 24, part 1: phrasing-independent mechanisms for a query that names both speakers, on tiny synthetic
conversations: re-scoring the turns inside the leading conversations (`session_rescore`) and query-side term
weighting by conversation frequency (`query_term_weight`); both off in every preset."""

from __future__ import annotations

import numpy as np
import pytest

from harness.retrieval.config import SearchConfig, preset
from harness.retrieval.keyword import analyze, local_bm25
from harness.retrieval.retriever import Retriever
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session
from tests.support.turn_sessions import generated_turns, turn_tools

# (conversation, role, text): conversation c1 holds the answer in the assistant's reply.
CLIMBING = [
    ("c1", "user", "What should I use for rope anchors when climbing?"),
    ("c1", "assistant", "Use the figure-eight knot for rope anchors: the knot climbing guides use for rope anchors."),
    ("c1", "user", "Which climbing shoes should I buy for my first climbing season?"),
    ("c1", "assistant", "A snug, flat climbing pair for beginners; avoid aggressive downturned shoes at first."),
    ("c2", "user", "How long should I boil an egg?"),
    ("c2", "assistant", "Nine minutes for a firm yolk."),
]
NEUTRAL = "Can you remind me which knot you said to use for climbing rope anchors?"  # "me" and "you"
FIRST_PERSON = "Which knot should I use for climbing rope anchors?"


def _hits(cfg: SearchConfig, query: str, turns=CLIMBING, *, conversations: bool = True) -> list[str]:
    out = turn_tools(cfg, turns, conversations=conversations).call("session_search", {"query": query})
    return [h["event_id"] for h in out.trace["hits"]]


def _cfg(**kw) -> SearchConfig:
    # The project default's ranking without its recall-cue list, on the keyword index (no embedder needed).
    return preset("bm25", assistant_weight=0.5, propagate=0.5, speaker_prior="user", **kw)


def test_local_bm25_uses_only_the_given_documents_idf():
    docs = [analyze(t) for t in ("knot knot rope", "rope climbing", "rope shoes")]
    s = local_bm25(docs, analyze("rope knot"))
    assert s[0] > s[1] > 0 and s[1] == pytest.approx(s[2])  # "rope" is in every document: it barely counts
    assert local_bm25(docs, []).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("by", ["bm25", "fused"])
def test_rescoring_puts_the_best_matching_turn_of_the_conversation_first_whatever_the_speaker(by):
    plain = _hits(_cfg(), NEUTRAL)
    assert plain[0] == "e0000"  # issue 24's failure: the reply's credit lifts the question above the answer
    rescored = _hits(_cfg(session_rescore=1, session_rescore_by=by), NEUTRAL)
    assert rescored[0] == "e0001"  # the reply matches the query best inside c1
    # the conversations keep the places they held; only which of c1's turns fills them changes
    conv = {f"e{i:04d}": c for i, (c, _, _) in enumerate(CLIMBING)}
    assert [conv[e] for e in rescored] == [conv[e] for e in plain]
    assert sorted(rescored) == sorted(plain)


def test_rescoring_leaves_one_speaker_queries_alone_unless_asked_and_then_keeps_the_prior():
    assert _hits(_cfg(session_rescore=1), FIRST_PERSON) == _hits(_cfg(), FIRST_PERSON)
    # "all": a first-person query is re-scored too, the user prior (assistant × 0.5) still applying
    assert _hits(_cfg(session_rescore=1, session_rescore_queries="all"), FIRST_PERSON)[0] == "e0000"


def test_turns_without_a_conversation_are_never_rescored():
    off = _hits(_cfg(), NEUTRAL, conversations=False)
    assert _hits(_cfg(session_rescore=3), NEUTRAL, conversations=False) == off


REMINDERS = [
    ("c1", "user", "Remind me, remind me, please remind me about the dentist."),
    ("c1", "assistant", "Noted."),
    ("c2", "user", "Remind me to water the plants."),
    ("c2", "assistant", "Sure."),
    ("c3", "user", "Remind me later about it."),
    ("c3", "assistant", "The bowline is the knot sailors trust, a loop knot that will not slip."),
    ("c3", "user", "Thanks, that helps."),
    ("c3", "assistant", "Glad to help with anything else."),
]


def test_query_term_weighting_discounts_words_found_in_every_conversation():
    query = "remind me about the knot"
    plain = _hits(preset("bm25"), query, REMINDERS)
    assert plain[0] == "e0000"  # "remind" three times outweighs the one turn that names the knot
    weighted = _hits(preset("bm25", query_term_weight=1.0), query, REMINDERS)
    assert weighted[0] == "e0005"
    # "remind" and "me" are in all three conversations: weight (1 − 3/3)^1 = 0, so a turn with nothing else
    # scores 0 and is no hit ("about", in two of three, still counts a third)
    assert "e0002" in plain and "e0002" not in weighted


def test_query_term_weights_are_the_conversation_share():
    events = [
        Event(id=f"e{i}", index=i, role=r, content=t, timestamp=1.0 + i, source_session=c)
        for i, (c, r, t) in enumerate(REMINDERS)
    ]
    s = Session(id="s", user_id="u")
    s.extend(events)
    tools = Retriever(preset("bm25", query_term_weight=2.0)).tools(
        s, boundary=SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)
    )
    mask = np.ones(len(tools.index), dtype=bool)
    w = tools._term_weights(s, tools.index, mask, "remind knot dentist")
    assert w == pytest.approx({"remind": 0.0, "knot": (1 - 1 / 3) ** 2, "dentist": (1 - 1 / 3) ** 2})


@pytest.mark.parametrize(
    "bad",
    [
        {"session_rescore": -1},
        {"session_rescore_queries": "some"},
        {"session_rescore_by": "dense"},
        {"query_term_weight": -0.1},
    ],
)
def test_out_of_range_settings_are_one_clear_error(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SearchConfig(**bad)


# Conversation c1 is about the trip; a stray turn in c2 repeats the query's rarest word.
TRIP = [
    ("c1", "user", "I am planning a trip to Kyoto in April with my sister."),
    ("c1", "assistant", "Book the ryokan early for the Kyoto trip: cherry blossom season fills it."),
    ("c1", "user", "Temples worth a visit there?"),
    ("c1", "assistant", "Kinkaku-ji and Fushimi Inari are the Kyoto temples most visitors start with."),
    ("c2", "user", "My spreadsheet has a ryokan ryokan column we picked."),
    ("c2", "assistant", "You can delete the duplicate column from the spreadsheet."),
    ("c3", "user", "How long should I boil an egg?"),
]
TRIP_QUERY = "Which ryokan did we pick for the Kyoto trip in April?"


def test_session_boost_lifts_the_conversation_the_query_is_about_over_a_stray_match():
    plain = _hits(preset("bm25"), TRIP_QUERY, TRIP)
    assert plain[0] == "e0004"  # the stray c2 turn: "ryokan" three times
    boosted = _hits(preset("bm25", session_boost=2.0), TRIP_QUERY, TRIP)
    assert boosted[0] == "e0000" and boosted.index("e0004") == 1  # the trip's conversation leads
    assert "e0006" not in boosted  # a turn that matches nothing is not lifted by its conversation


def test_session_boost_needs_conversations_and_is_off_by_default():
    assert preset("default").session_boost == 0.0 and preset("bm25").session_boost == 0.0
    # Without conversation ids no turn has a conversation: nothing to boost, the plain ranking.
    assert _hits(preset("bm25", session_boost=2.0), TRIP_QUERY, TRIP, conversations=False) == _hits(
        preset("bm25"), TRIP_QUERY, TRIP, conversations=False
    )
    with pytest.raises(ValueError, match="session_boost"):
        _cfg(session_boost=-1.0)


@pytest.mark.parametrize("seed", range(8))
def test_session_boost_on_generated_conversations_reorders_conversations_never_turns_within_one(seed):
    """Generated conversations and queries: the boost never brings in a turn that matches nothing, and keeps the
    order of each conversation's turns (it multiplies a conversation's turns by one factor)."""
    rng = np.random.default_rng(seed)
    turns, query = generated_turns(rng, words=30, conversations=6)
    plain = _hits(preset("bm25"), query, turns)
    boosted = _hits(preset("bm25", session_boost=float(rng.choice([0.5, 1.0, 3.0]))), query, turns)
    conv = {f"e{i:04d}": c for i, (c, _, _) in enumerate(turns)}
    assert set(boosted) <= {f"e{i:04d}" for i, (_, _, t) in enumerate(turns) if set(t.split()) & set(query.split())}
    for c in set(conv.values()):
        both = [e for e in boosted if conv[e] == c and e in plain]
        assert both == [e for e in plain if e in both]
