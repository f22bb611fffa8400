"""Issue 40: the response budget (`SearchConfig.budget_tokens`, o200k tokens) of every preset, the compact presets'
fill of it with bm25's response (`budget_fill`), and `retrieval-eval` at a list of budgets paired against bm25.

Probed on seeded generated turn sets: every preset within its budget; without a budget the preset's own response;
with one, the compact presets' own entries byte for byte where the budget holds them beside bm25's response, and
bm25's best hit wherever bm25's own response at that budget holds it. That the compact presets are at or above bm25 at
every budget for any gold turns is tests/harness/retrieval/test_retrieval_dominance.py."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from harness.golang import go_json
from harness.retrieval.config import SearchConfig, preset, preset_node
from harness.retrieval.embedders import HashingEmbedder
from harness.retrieval.retriever import Retriever
from harness.session.tokens import o200k_counter
from tests.support.turn_sessions import generated_turns, turn_tools

PRESETS = ("bm25", "hybrid", "trpc_parity", "default", "speaker_neutral")
COMPACT = ("default", "speaker_neutral")


def _turn_set(seed: int):
    """Turns of 3 to 600 words (long ones are excerpted in the compact head and whole in bm25's windows), a query."""
    rng = np.random.default_rng(seed)
    turns, query = generated_turns(rng, words=int(rng.integers(20, 60)), conversations=3, n=30, lengths=(3, 600))
    return rng, turns, query


def _search(name: str, turns, query: str, **settings):
    tools = turn_tools(preset(name, **settings), turns, embedder=HashingEmbedder(64))
    return tools.call("session_search", {"query": query})


def _hits(out) -> list[str]:
    return list(dict.fromkeys(r["event_id"] for r in json.loads(out.content)["results"]))


@pytest.mark.parametrize("seed", range(10))
def test_every_preset_keeps_its_response_within_the_budget(seed):
    rng, turns, query = _turn_set(seed)
    count = o200k_counter().count
    for name in PRESETS:
        budget = int(rng.integers(50, 3000))
        out = _search(name, turns, query, budget_tokens=budget)
        body = json.loads(out.content)
        assert out.ok and count(out.content) <= budget, (name, budget)
        assert body["count"] == len(body["results"])
        assert [h["event_id"] for h in out.trace["hits"]] == _hits(out)  # the trace names what the model got
        assert out.trace["budget"]["tokens"] == budget
    # a preset shaped to be as long as it likes gains nothing past the budget
    greedy = {"top_hits": 10, "top_hit_chars": 50_000, "hit_chars": 50_000, "budget_chars": 50_000}
    budget = int(rng.integers(50, 3000))
    out = _search("default", turns, query, budget_tokens=budget, recall_chars=50_000, **greedy)
    assert count(out.content) <= budget


@pytest.mark.parametrize("seed", range(10))
def test_a_budget_that_holds_the_presets_response_beside_bm25s_holds_each_own_entry_byte_for_byte(seed):
    _, turns, query = _turn_set(seed)
    for name in COMPACT:
        plain = _search(name, turns, query)
        assert "budget" not in plain.trace  # without a budget the response is the preset's own, as before
        head = [go_json(r) for r in json.loads(plain.content)["results"]]
        size = o200k_counter().count(plain.content) + o200k_counter().count(_search("bm25", turns, query).content)
        for budget in (size, size + 1000, 100_000):  # its own response and bm25's whole (the floor is smaller)
            out = _search(name, turns, query, budget_tokens=budget)
            cut = [go_json(r) for r in json.loads(out.content)["results"]]
            assert out.trace["budget"]["entries_left_out"] == 0, budget
            positions = [cut.index(r) for r in head]
            assert positions == sorted(positions), budget  # each whole, in its order


@pytest.mark.parametrize("seed", range(16))
def test_bm25s_best_hit_is_in_the_defaults_response_at_every_budget_where_bm25s_response_holds_it(seed):
    _, turns, query = _turn_set(seed)
    best = _hits(_search("bm25", turns, query))[0]
    held = 0
    for budget in (200, 300, 500, 800, 1500, 3000):
        if best in _hits(_search("bm25", turns, query, budget_tokens=budget)):
            held += 1
            assert best in _hits(_search("default", turns, query, budget_tokens=budget)), budget
    assert held  # 3,000 tokens hold it


def test_the_fill_shows_no_turn_twice_and_a_head_excerpt_whole():
    turns = [
        ("c1", "user", "alpha beta " * 400 + "the long pasted brief"),  # over every compact cap: excerpted in the head
        ("c1", "assistant", "alpha beta noted"),
        ("c2", "user", "gamma delta"),
        ("c2", "assistant", "alpha reply"),
    ]
    out = _search("default", turns, "alpha beta", budget_tokens=100_000, top_hit_chars=None, hit_chars=200)
    body = json.loads(out.content)
    snippets = [r.get("snippet") for r in body["results"]]
    assert turns[0][2] not in snippets[:2] and turns[0][2] in snippets  # the head's excerpt, then bm25's whole text
    whole = [s for s in snippets if s is not None] + [
        m["content"] for r in body["results"] for m in r.get("context") or ()
    ]
    assert len(whole) == len(set(whole))  # no turn's whole text twice


def test_bad_budget_settings_are_refused_naming_the_setting():
    with pytest.raises(ValueError, match="budget_tokens"):
        SearchConfig(budget_tokens=10)
    with pytest.raises(ValueError, match="budget_fill must be a retrieval preset"):
        SearchConfig(budget_fill="nonesuch")
    # the fill ranks over this retriever's index: another stopword list cannot be honoured (refused at start)
    with pytest.raises(ValueError, match="budget_fill='bm25'.*stopwords"):
        Retriever(preset("default", budget_tokens=500, stopwords="snowball"))
    Retriever(preset("default", stopwords="snowball"))  # no budget: no fill, nothing to refuse
    Retriever(preset("trpc_parity", budget_tokens=500))  # a reference response is cut, never filled


def _current_default():
    return OmegaConf.merge(preset_node("default"), {"embedder": None, "store": None})


def test_retrieval_eval_reports_every_preset_at_each_budget_paired_against_bm25(tmp_path, paris_dataset):
    from commands.retrieval_eval import run_retrieval_eval

    cfg = OmegaConf.create(
        {
            "dataset": paris_dataset,
            "retrieval": _current_default(),
            "retrieval_eval": {"presets": ["bm25", "current"], "budgets": [60, 4000]},
        }
    )
    md = run_retrieval_eval(cfg, tmp_path / "out").read_text()
    report = json.loads((tmp_path / "out" / "retrieval_eval.json").read_text())
    assert report["budgets"] == [60, 4000] and set(report["at_budgets"]) == {"60", "4000"}
    for b in ("60", "4000"):
        at = report["at_budgets"][b]
        assert set(at["presets"]) == {"bm25", "current"} and set(at["paired"]) == {"current"}
        assert set(at["paired"]["current"]["multi-session"]) == {"evidence", "hit", "turn_recall_any@5"}
        assert at["presets"]["bm25"]["all"]["tokens_mean"] <= int(b)
    assert report["at_budgets"]["4000"]["presets"]["current"]["all"]["evidence"] == 1.0
    assert "## At each response budget" in md and "**4,000 tokens**" in md
    rows = list(csv.DictReader((tmp_path / "out" / "retrieval_eval_budgets.csv").open()))
    assert {(r["preset"], r["budget_tokens"], r["question_type"]) for r in rows} == {
        (p, b, t) for p in ("bm25", "current") for b in ("60", "4000") for t in ("multi-session", "all")
    }
    case = json.loads((tmp_path / "out" / "retrieval_eval_cases.jsonl").read_text().splitlines()[0])
    assert set(case["at_budget"]) == {"60", "4000"}


@pytest.mark.parametrize(
    "budgets, match",
    [([10], "is not a whole number of tokens"), ("500", "must be a list"), ([500, 500], "twice"), ([1.5], "whole")],
)
def test_retrieval_eval_refuses_bad_budgets_before_writing(tmp_path, paris_dataset, budgets, match):
    from commands.retrieval_eval import run_retrieval_eval

    cfg = OmegaConf.create({"dataset": paris_dataset, "retrieval_eval": {"presets": ["bm25"], "budgets": budgets}})
    with pytest.raises(ValueError, match=match):
        run_retrieval_eval(cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_hit_too_long_for_what_is_left_goes_out_as_a_snippet_so_the_later_hits_still_come():
    turns = [
        ("c1", "user", "alpha beta. " + "filler words here. " * 300),  # the top hit, far over a small budget
        ("c1", "assistant", "alpha noted"),
        ("c2", "user", "alpha beta again"),
        ("c2", "assistant", "beta"),
    ]
    out = _search("default", turns, "alpha beta", budget_tokens=150, budget_fill=None)
    ids = [r["event_id"] for r in json.loads(out.content)["results"]]
    long = json.loads(out.content)["results"][ids.index("e0000")]
    assert len(long["snippet"]) <= preset("default").snippet_chars and long["snippet"].startswith("alpha beta.")
    assert ids[-1] != "e0000"  # a later, short hit kept its chance
    assert o200k_counter().count(out.content) <= 150
