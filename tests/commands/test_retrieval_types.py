"""Retrieval that holds on every LongMemEval question type (issue 15 item 3): recall cues, whole hits in
compact responses, and per-type retrieval-eval output."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from harness.retrieval import render
from harness.retrieval.config import SearchConfig, preset, recall_cue, speaker_weights
from harness.retrieval.embedders import HashingEmbedder
from harness.retrieval.evaluation import CaseResult, evidence_in_response, summarize_by_type
from harness.retrieval.index import CaseIndex, build_docs
from harness.retrieval.retriever import Retriever
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session


def ev(i, role, content, **kw):
    return Event(id=f"e{i:04d}", index=i, role=role, content=content, timestamp=1_700_000_000.0 + i / 1000, **kw)


def session_of(events):
    s = Session(id="s", user_id="u")
    s.extend(events)
    return s, SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)


@pytest.mark.parametrize(
    "query, without_cues",
    [
        (
            "Can you remind me of the name of the romantic Italian restaurant in Rome you recommended for dinner?",
            (1.0, 1.0),
        ),
        ("I remember you told me about the refining processes at CITGO. What kind of processes are used?", (1.0, 1.0)),
        (
            "I wanted to follow up on our previous conversation about binaural beats. How many subjects were there?",
            (1.0, 0.5),
        ),
        ("You mentioned some great resources for guided imagery, can you remind me of the first one?", (1.0, 1.0)),
    ],
)
def test_a_recall_cue_flips_the_speaker_prior_to_the_assistant(query, without_cues):
    assert recall_cue(query)
    assert speaker_weights(query, 0.5, "user", recall=recall_cue(query)) == (0.5, 1.0)
    assert speaker_weights(query, 0.5, "user") == without_cues  # off (the reference presets): pronouns only
    assert speaker_weights(query, 1.0, "user", recall=recall_cue(query)) == (1.0, 1.0)  # no prior at all stays off


@pytest.mark.parametrize(
    "query",
    [
        "Can you suggest some activities that I can do in the evening?",  # a request for new advice, not recall
        "What did I say my dog's name was?",
        "How many days passed since I started ukulele lessons?",
        "Can you recommend a show for me to watch tonight?",
    ],
)
def test_requests_and_first_person_questions_are_not_recall(query):
    assert not recall_cue(query)
    assert speaker_weights(query, 0.5, "user", recall=recall_cue(query)) == speaker_weights(query, 0.5, "user")


RECALL_EVENTS = [
    ev(0, "user", "Can you recommend a restaurant in Rome for dinner?"),
    ev(1, "assistant", "Roscioli is a romantic Italian restaurant in Rome, perfect for dinner."),
    ev(2, "user", "Thanks! Also, how do I cook rice?"),
    ev(3, "assistant", "Rinse the rice, then simmer it."),
]
RECALL_QUERY = "Can you remind me of the romantic Italian restaurant in Rome you recommended for dinner?"


def test_with_a_recall_cue_the_assistant_reply_outranks_the_question_before_it():
    s, b = session_of(RECALL_EVENTS)
    before = Retriever(preset("default", recall_cues=False), embedder=HashingEmbedder()).tools(s, boundary=b)
    assert before.call("session_search", {"query": RECALL_QUERY}).trace["hits"][0]["event_id"] == "e0000"
    after = Retriever(preset("default"), embedder=HashingEmbedder()).tools(s, boundary=b)
    assert after.call("session_search", {"query": RECALL_QUERY}).trace["hits"][0]["event_id"] == "e0001"


def _index(events):
    return CaseIndex(build_docs(events))


def test_compact_hit_that_fits_goes_out_verbatim_with_its_line_breaks():
    reply = "Here are three options:\n\n1. Roscioli\n2. Armando al Pantheon\n3. Da Enzo"
    events = [ev(0, "user", "Restaurants in Rome?"), ev(1, "assistant", reply, has_answer=True)]
    idx = _index(events)
    out = render.compact_hits([(idx, 1, 1.0, None)], set(), budget_chars=1800, hit_chars=700)
    assert out[0]["snippet"] == reply
    assert evidence_in_response(json.dumps({"results": out}), events) == (True, True)


def test_top_hits_are_whole_up_to_top_hit_chars_without_eating_the_budget():
    long_reply = " ".join(f"Sentence {i} about Rome and its trattorias." for i in range(40))  # ~1,700 chars
    events = [
        ev(0, "assistant", long_reply),
        ev(1, "user", "Short note about Rome."),
        ev(2, "user", "Another about Rome."),
    ]
    idx = _index(events)
    hits = [(idx, 0, 1.0, None), (idx, 1, 0.9, None), (idx, 2, 0.8, None)]
    plain = render.compact_hits(hits, {"rome"}, budget_chars=900, hit_chars=700)
    assert len(plain[0]["snippet"]) <= 700 and plain[0]["snippet"] != long_reply
    whole = render.compact_hits(hits, {"rome"}, budget_chars=900, hit_chars=700, top_hit_chars=3000)
    assert whole[0]["snippet"] == long_reply
    assert [r["event_id"] for r in whole] == ["e0000", "e0001", "e0002"]  # later hits keep their share
    capped = render.compact_hits(hits, {"rome"}, budget_chars=900, hit_chars=700, top_hit_chars=1000)
    assert len(capped[0]["snippet"]) <= 1000  # over the cap: still an excerpt
    second = render.compact_hits(
        [hits[1], hits[0]], {"rome"}, budget_chars=900, hit_chars=700, top_hit_chars=3000, top_hits=2
    )
    assert second[1]["snippet"] == long_reply


def test_recall_queries_get_whole_assistant_replies():
    long_reply = "Try Roscioli, a romantic Italian restaurant in Rome. " + "It has a long wine list and more. " * 60
    events = [
        ev(0, "user", "Can you recommend a romantic Italian restaurant in Rome for dinner?"),
        ev(1, "assistant", long_reply, has_answer=True),
        ev(2, "user", "How do I cook rice?"),
        ev(3, "assistant", "Rinse the rice, then simmer it."),
    ]
    s, b = session_of(events)
    cfg = preset("default", top_hit_chars=None, recall_chars=4000)
    tools = Retriever(cfg, embedder=HashingEmbedder()).tools(s, boundary=b)
    out = tools.call("session_search", {"query": RECALL_QUERY})
    assert evidence_in_response(out.content, events)[0]
    off = Retriever(preset("default", top_hit_chars=None, recall_chars=None), embedder=HashingEmbedder())
    assert not evidence_in_response(
        off.tools(s, boundary=b).call("session_search", {"query": RECALL_QUERY}).content, events
    )[0]


def test_new_settings_are_validated_and_off_in_the_reference_presets():
    for name in ("bm25", "hybrid", "trpc_parity"):
        c = preset(name)
        assert (c.recall_cues, c.top_hit_chars, c.recall_chars) == (False, None, None)
    with pytest.raises(ValueError, match="SearchConfig.top_hit_chars"):
        SearchConfig(top_hit_chars=10)
    with pytest.raises(ValueError, match="SearchConfig.top_hits"):
        SearchConfig(top_hits=-1)


def test_summarize_by_type_groups_cases_and_names_a_missing_type():
    def res(qid, r1, has):
        return CaseResult(
            qid,
            3,
            0.0,
            1.0,
            [],
            {"turn_recall_any@1": r1, "turn_recall_any@5": 1.0},
            response_tokens=100,
            response_has_evidence=has,
        )

    out = summarize_by_type(
        [res("a", 1.0, True), res("b", 0.0, False), res("c", 1.0, True)],
        {"a": "multi-session", "b": "multi-session", "c": "knowledge-update"},
    )
    assert list(out) == ["knowledge-update", "multi-session"]
    assert out["multi-session"]["cases"] == 2 and out["multi-session"]["turn_recall_any@1"] == 0.5
    assert (
        out["multi-session"]["response_has_evidence"] == 0.5 and out["knowledge-update"]["response_tokens_mean"] == 100
    )
    with pytest.raises(KeyError, match="'c'"):
        summarize_by_type([res("c", 1.0, True)], {"a": "x"})


def test_retrieval_eval_writes_per_type_figures(tmp_path, write_dataset):
    from commands.retrieval_eval import run_retrieval_eval
    from tests.support.dataset_rows import make_row

    filler = [{"role": "user", "content": f"Tell me about topic {i} please."} for i in range(6)]
    user_fact = [
        [
            *filler[:3],
            {"role": "user", "content": "I went to Paris last May.", "has_answer": True},
            {"role": "assistant", "content": "Nice trip!"},
        ],
        filler[3:],
    ]
    reply_fact = [
        [
            *filler[:3],
            {"role": "user", "content": "Recommend a bakery in Lyon?"},
            {"role": "assistant", "content": "Try Boulangerie du Palais.", "has_answer": True},
        ]
    ]
    rows = [
        make_row(qid="q1", question="When did I go to Paris?", sessions=user_fact, qtype="multi-session"),
        make_row(
            qid="q2",
            question="Which bakery in Lyon did you recommend?",
            sessions=reply_fact,
            qtype="single-session-assistant",
        ),
    ]
    cfg = OmegaConf.create(
        {
            "dataset": {
                "_target_": "harness.data.longmemeval.LongMemEvalSource",
                "path": str(write_dataset(rows)),
                "question_types": None,
            },
            "retrieval_eval": {"presets": ["bm25"]},
        }
    )
    md = run_retrieval_eval(cfg, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "retrieval_eval.json").read_text())
    by_type = summary["presets"]["bm25"]["by_type"]
    assert set(by_type) == {"multi-session", "single-session-assistant"}
    assert all(v["cases"] == 1 and "response_has_evidence" in v for v in by_type.values())
    assert "| single-session-assistant | bm25 | 1 |" in md.read_text()
    cases = [json.loads(x) for x in (tmp_path / "out" / "retrieval_eval_cases.jsonl").read_text().splitlines()]
    assert {c["question_type"] for c in cases} == {"multi-session", "single-session-assistant"}


def _scores(cfg, events, query):
    s, b = session_of(events)
    tools = Retriever(cfg, embedder=HashingEmbedder()).tools(s, boundary=b)
    return {h["event_id"]: h["score"] for h in tools.call("session_search", {"query": query, "top_k": 4}).trace["hits"]}


def test_a_recall_query_gets_no_reply_to_question_credit():
    flipped = _scores(preset("default"), RECALL_EVENTS, RECALL_QUERY)  # user × 0.5, no credit
    no_cue = _scores(preset("default", recall_cues=False), RECALL_EVENTS, RECALL_QUERY)  # user prior + credit 0.5
    own = 2 * flipped["e0000"]  # the question's own score: the flip halves it and adds nothing
    assert no_cue["e0000"] == pytest.approx(own + 0.5 * flipped["e0001"])  # what the credit would have added


def test_retrieval_eval_labels_every_preset_by_its_settings_and_current_by_what_it_changes(tmp_path, paris_dataset):
    """`current` (the run's retrieval node, e.g. `retrieval=bm25 retrieval.config.window=1`) is labelled in the
    report and its JSON by the settings it changes from the preset it names; every preset by what it sets."""

    from commands.retrieval_eval import run_retrieval_eval
    from harness.retrieval.config import preset_node

    dataset = paris_dataset
    for name, want in (("bm25", {"window": 1, "snippet_chars": 100}), ("mine", None)):
        current = OmegaConf.merge(preset_node("bm25"), {"config": {"window": 1, "snippet_chars": 100, "name": name}})
        cfg = OmegaConf.create(
            {"dataset": dataset, "retrieval": current, "retrieval_eval": {"presets": ["bm25", "current"]}}
        )
        out = tmp_path / name
        md = run_retrieval_eval(cfg, out).read_text()
        presets = json.loads((out / "retrieval_eval.json").read_text())["presets"]
        assert presets["bm25"]["settings"] == {"name": "bm25", "default_mode": "keyword"}
        assert presets["current"]["settings"]["window"] == 1 and presets["current"]["settings"]["snippet_chars"] == 100
        if want is None:  # a name of the run's own: labelled by its settings only
            assert "changed_from" not in presets["current"]
            assert "| current | name=mine, default_mode=keyword, window=1, snippet_chars=100 |" in md
        else:
            assert presets["current"]["changed_from"] == {"preset": "bm25", "settings": want}
            assert "| current | preset `bm25` with window=1, snippet_chars=100; in all:" in md
        assert "| bm25 | name=bm25, default_mode=keyword |" in md
