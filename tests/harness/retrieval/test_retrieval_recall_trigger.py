"""Issue 24 part 1: the learned recall trigger (harness/retrieval/recall_trigger.py) and `recall_trigger` in
`SearchConfig`. Offline, synthetic data only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from harness.retrieval import recall_trigger as rt
from harness.retrieval.config import SearchConfig, preset, recall_cue
from harness.retrieval.embedders import HashingEmbedder
from harness.retrieval.retriever import Retriever
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session
from runners.fingerprint import fingerprint

RECALL = [f"remind me what you recommended for {w}" for w in ("tea", "yoga", "chess", "piano", "knots", "paint")]
OTHER = [f"how many {w} lessons did I book last month" for w in ("tea", "yoga", "chess", "piano", "knots", "paint")]


def _trigger(tmp_path, bias: float, embedder=None, name: str = "t.json", **changes) -> str:
    """An artifact whose weights are zero: it fires on every query (bias > 0) or on none (bias < 0)."""
    e = embedder or HashingEmbedder(64)
    trig = rt.RecallTrigger(rt.Features(True, 0), np.zeros(e.dim), bias, e.identity, e.dim)
    path = tmp_path / name
    data = trig.to_json({"questions": 0})
    data.update(changes)
    path.write_text(json.dumps(data))
    return str(path)


def test_fitting_separates_a_separable_set_and_generalises_to_new_points():
    rng = np.random.default_rng(7)
    centre = rng.normal(size=20)
    x = np.vstack([rng.normal(size=(40, 20)) + 2 * centre, rng.normal(size=(40, 20)) - 2 * centre])
    y = np.array([1.0] * 40 + [0.0] * 40)
    w, b = rt.fit_logistic(x, y, l2=1.0)
    assert np.all(((x @ w + b) > 0) == (y == 1))
    fresh = np.vstack([rng.normal(size=(20, 20)) + 2 * centre, rng.normal(size=(20, 20)) - 2 * centre])
    assert np.all(((fresh @ w + b) > 0) == np.array([True] * 20 + [False] * 20))


def test_the_newton_solver_matches_the_penalised_optimum():
    # The Woodbury-form Newton step reaches the optimum of the stated objective: its gradient is zero there.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 50))  # fewer rows than features, as in the study
    y = (x[:, 0] + rng.logistic(size=30) > 0).astype(float)
    w, b = rt.fit_logistic(x, y, l2=2.0)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    assert np.abs(x.T @ (p - y) + 2.0 * w).max() < 1e-6
    assert abs(np.sum(p - y) + rt.BIAS_PENALTY * b) < 1e-6


def test_fit_and_prediction_are_deterministic_and_the_cv_split_ignores_order():
    e = HashingEmbedder(64)
    f = rt.Features(True, 128)
    x, y = f.matrix(RECALL + OTHER, e), np.array([1.0] * 6 + [0.0] * 6)
    a, b = rt.fit(x, y, f, 1.0, e), rt.fit(x, y, f, 1.0, e)
    assert np.array_equal(a.weights, b.weights) and a.bias == b.bias
    assert np.array_equal(a.probability(RECALL + OTHER, e), b.probability(RECALL + OTHER, e))
    ids = [f"q{i}" for i in range(12)]
    parts = dict(zip(ids, rt.cv_parts(ids)))
    assert dict(zip(ids[::-1], rt.cv_parts(ids[::-1]))) == parts and sorted(set(parts.values())) == [0, 1, 2, 3, 4]
    assert all(a.fires(q, e) for q in RECALL) and not any(a.fires(q, e) for q in OTHER)


def test_the_artifact_round_trips_without_any_question_text(tmp_path):
    e = HashingEmbedder(64)
    f = rt.Features(True, 256)
    x, y = f.matrix(RECALL + OTHER, e), np.array([1.0] * 6 + [0.0] * 6)
    trig = rt.fit(x, y, f, 0.5, e)
    path = tmp_path / "trigger.json"
    trig.save(path, {"questions": 12, "question_ids_sha256": rt.ids_digest([f"q{i}" for i in range(12)])})
    back = rt.load(path)
    assert back.features == f and back.embedder == e.identity and back.dim == 64 and back.source == str(path)
    assert np.allclose(back.weights, trig.weights, atol=1e-8) and back.bias == trig.bias
    assert np.allclose(back.probability(RECALL + OTHER, e), trig.probability(RECALL + OTHER, e), atol=1e-6)
    text = path.read_text()
    assert not any(q in text for q in RECALL + OTHER) and "recommended" not in text


@pytest.mark.parametrize(
    "spoil",
    [
        lambda p: p.write_text("{not json"),
        lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "format": "other/1"})),
        lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "weights": [0.0] * 10})),
        lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(p.read_text()).items() if k != "bias"})),
        lambda p: p.unlink(),
    ],
    ids=["not-json", "format", "weights-size", "missing-key", "missing-file"],
)
def test_a_corrupt_artifact_is_one_error_naming_the_file_when_the_retriever_is_built(tmp_path, spoil):
    path = _trigger(tmp_path, 5.0)
    spoil(tmp_path / "t.json")
    cfg = preset("default", recall_trigger="learned", recall_trigger_file=path)
    with pytest.raises(rt.RecallTriggerError, match=str(tmp_path / "t.json")):
        Retriever(cfg, embedder=HashingEmbedder(64))


class _SameNameOtherSize(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.identity = "hashing:64"  # claims the fitted embedder's identity, gives 32-dimensional vectors


@pytest.mark.parametrize("embedder", [HashingEmbedder(32), _SameNameOtherSize(), None], ids=["identity", "dim", "none"])
def test_a_mismatched_embedder_is_one_error_naming_the_file(tmp_path, embedder):
    path = _trigger(tmp_path, 5.0)
    cfg = preset("default", recall_trigger="learned", recall_trigger_file=path)
    with pytest.raises(rt.RecallTriggerError, match=path):
        Retriever(cfg, embedder=embedder)


def _session() -> tuple[Session, SummaryBoundary]:
    turns = [
        ("user", "I want to learn a climbing knot for rope anchors."),
        ("assistant", "For rope anchors I recommended the figure-eight knot; it is easy to check."),
        ("user", "I climbed with rope anchors and a figure-eight knot yesterday, great fun."),
        ("assistant", "Glad the climbing went well."),
        ("user", "What should I cook tonight?"),
        ("assistant", "A mushroom risotto " + "with plenty of stirring " * 60),
    ]
    events = [
        Event(id=f"e{i:04d}", index=i, role=r, content=t, timestamp=1_700_000_000.0 + i)
        for i, (r, t) in enumerate(turns)
    ]
    s = Session(id="s", user_id="u")
    s.extend(events)
    return s, SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)


def _search(cfg: SearchConfig, query: str) -> tuple[list[str], str]:
    s, b = _session()
    out = Retriever(cfg, embedder=HashingEmbedder(64)).tools(s, boundary=b).call("session_search", {"query": query})
    assert out.ok, out.error
    return [h["event_id"] for h in out.trace["hits"]], out.content


def test_a_firing_learned_trigger_does_exactly_what_the_cue_does(tmp_path):
    cue_query = "Can you remind me which knot you recommended for my rope anchors when climbing?"
    plain_query = "Which knot did I use for rope anchors when climbing?"
    assert recall_cue(cue_query) and not recall_cue(plain_query)
    always, never = _trigger(tmp_path, 9.0, name="always.json"), _trigger(tmp_path, -9.0, name="never.json")
    cues = preset("default", recall_chars=4000, budget_chars=300, hit_chars=200)
    learned_on = preset("default", recall_chars=4000, budget_chars=300, hit_chars=200, recall_trigger="learned",
                        recall_trigger_file=always)  # fmt: skip
    learned_off = preset("default", recall_chars=4000, budget_chars=300, hit_chars=200, recall_trigger="learned",
                         recall_trigger_file=never)  # fmt: skip
    none = preset("default", recall_chars=4000, budget_chars=300, hit_chars=200, recall_trigger="none")
    # On a cue query: firing = the cue (prior flipped to the assistant, budget raised), not firing = no trigger.
    assert _search(learned_on, cue_query) == _search(cues, cue_query)
    assert _search(learned_off, cue_query) == _search(none, cue_query)
    assert _search(cues, cue_query) != _search(none, cue_query)  # the comparison is not vacuous
    assert _search(cues, cue_query)[0][0] == "e0001" and _search(none, cue_query)[0][0] != "e0001"
    # The decision is the classifier's, not the pattern's: a firing trigger flips a query without any cue.
    assert _search(learned_on, plain_query) != _search(cues, plain_query)
    assert _search(learned_on, plain_query)[0][0] == "e0001"


def test_recall_cues_off_keeps_the_prior_even_when_the_learned_trigger_fires(tmp_path):
    always = _trigger(tmp_path, 9.0)
    q = "Which knot did I use for rope anchors when climbing?"
    off = preset("default", recall_cues=False, recall_chars=None)
    learned = preset(
        "default", recall_cues=False, recall_chars=None, recall_trigger="learned", recall_trigger_file=always
    )
    assert _search(learned, q) == _search(off, q)
    on = preset("default", recall_chars=None, recall_trigger="learned", recall_trigger_file=always)
    assert _search(on, q) != _search(off, q)  # with recall_cues the same trigger does flip it


def test_existing_presets_and_their_fingerprints_are_unchanged():
    for name in ("bm25", "default", "hybrid", "speaker_neutral", "trpc_parity", "trpc_parity_openai"):
        cfg = preset(name)
        assert (cfg.recall_trigger, cfg.recall_trigger_file) == ("cues", None)
    node = {
        "retrieval": {
            "config": {"_target_": "harness.retrieval.config.SearchConfig", "name": "default", "recall_cues": True}
        }
    }
    stated = {"retrieval": {"config": {**node["retrieval"]["config"], "recall_trigger": "cues"}}}
    learned = {"retrieval": {"config": {**node["retrieval"]["config"], "recall_trigger": "learned"}}}
    assert fingerprint(OmegaConf.create(stated)) == fingerprint(OmegaConf.create(node))
    assert fingerprint(OmegaConf.create(learned)) != fingerprint(OmegaConf.create(node))


def test_a_bad_recall_trigger_value_is_one_error():
    with pytest.raises(ValueError, match="recall_trigger"):
        SearchConfig(recall_trigger="regex")


@pytest.mark.e2e
def test_a_run_with_a_bad_artifact_ends_in_one_error_naming_it_before_any_case(tmp_path, capsys):
    from harness.testing.fake_openai import FakeOpenAIServer
    from harness.testing.faults import FakeModel
    from tests.support.bad_start import one_error_line, run

    bad = tmp_path / "trigger.json"
    bad.write_text("{not json")
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(
            tmp_path,
            "dataset.limit=1",
            "mode=[summary_ondemand]",
            "retrieval.config.recall_trigger=learned",
            f"retrieval.config.recall_trigger_file={bad}",
            base_url=srv.base_url,
        )
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and str(bad) in line and "not readable JSON" in line
    assert not srv.requests and not (tmp_path / "run" / "records.jsonl").exists()
