"""Index, store, embedders, presets/configs, the retrieval metrics and the retrieval-eval runner."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.retrieval.config import preset_node
from harness.retrieval.embedders import HashingEmbedder
from harness.retrieval.evaluation import case_metrics, evidence_in_response, ndcg, recall_all, recall_any
from harness.retrieval.index import build_docs, content_hash, event_text
from harness.retrieval.keyword import analyze
from harness.retrieval.retriever import Retriever
from harness.retrieval.store import IndexStore
from harness.retrieval.tools import SearchConfig, preset, speaker_weights
from harness.session.events import Event, ToolCall
from tests.support.paths import REPO

CONFIGS = REPO / "configs" / "retrieval"


def ev(i, role, content, **kw):
    return Event(id=f"e{i:04d}", index=i, role=role, content=content, timestamp=1_700_000_000.0 + i / 1000, **kw)


def test_indexed_text_follows_the_reference_extraction():
    assert event_text(ev(0, "user", "  hi  ")) == "hi"
    assert event_text(ev(1, "tool", "42", tool_name="calc")) == "calc: 42"
    assert event_text(ev(2, "assistant", "calling", tool_calls=(ToolCall("c1", "f", "{}"),))) is None
    assert event_text(ev(3, "system", "rules")) is None
    assert event_text(ev(4, "assistant", "   ")) is None
    docs = build_docs([ev(0, "user", "a b"), ev(1, "system", "x"), ev(2, "assistant", "c d")])
    assert [(d.event_id, d.position) for d in docs] == [("e0000", 0), ("e0002", 2)]


def test_analyzer_stems_and_drops_stopwords():
    assert analyze("The runners were running in my parks", "snowball") == ["runner", "run", "park"]
    assert analyze("The runners were running in my parks") == ["runner", "were", "run", "my", "park"]


def test_content_hash_changes_with_any_event_field():
    a = [ev(0, "user", "hello"), ev(1, "assistant", "hi")]
    b = [ev(0, "user", "hello!"), ev(1, "assistant", "hi")]
    assert content_hash(a) == content_hash(list(a)) != content_hash(b)


def test_store_builds_once_and_reuses_across_retrievers(tmp_path):
    events = [ev(i, "user" if i % 2 == 0 else "assistant", f"message {i} about topic {i % 3}") for i in range(30)]
    path = tmp_path / "idx.sqlite"
    r1 = Retriever(SearchConfig(), embedder=HashingEmbedder(), store=str(path))
    i1 = r1.index(events)
    assert r1.store.stats["vector_builds"] == 1 and r1.store.stats["token_builds"] == 1
    r2 = Retriever(preset("default"), embedder=HashingEmbedder(), store=IndexStore(path))  # another run/mode
    i2 = r2.index(events)
    assert r2.store.stats == {"token_hits": 1, "token_builds": 0, "vector_hits": 1, "vector_builds": 0}
    np.testing.assert_array_equal(i1.vectors, i2.vectors)
    assert i1.doc_tokens == i2.doc_tokens
    # the parity preset analyses with other stopwords: new tokens, same vectors
    rp = Retriever(preset("trpc_parity"), embedder=HashingEmbedder(), store=IndexStore(path))
    rp.index(events)
    assert rp.store.stats == {"token_hits": 0, "token_builds": 1, "vector_hits": 1, "vector_builds": 0}
    # another embedder identity or changed content is a new entry, never a stale hit
    r3 = Retriever(SearchConfig(), embedder=HashingEmbedder(dim=64), store=IndexStore(path))
    assert r3.index(events).vectors.shape == (30, 64) and r3.store.stats["vector_builds"] == 1
    changed = events[:-1] + [ev(29, "assistant", "changed")]
    r2.index(changed)
    assert r2.store.stats["token_builds"] == 1


def test_retriever_memoises_indexes_per_content():
    events = [ev(0, "user", "hello there"), ev(1, "assistant", "general kenobi")]
    r = Retriever(SearchConfig(), memo_size=1)
    assert r.index(events) is r.index(list(events))
    r.index([ev(0, "user", "other")])
    assert len(r._memo) == 1


def test_hashing_embedder_is_normalised_and_deterministic():
    e = HashingEmbedder(32)
    v = e.embed(["golden retriever", "golden retriever", ""])
    assert v.shape == (3, 32) and np.allclose(np.linalg.norm(v[:2], axis=1), 1.0)
    assert np.array_equal(v[0], v[1]) and not v[2].any()


@pytest.mark.parametrize(
    "query, expected",
    [
        ("What breed is my dog?", (1.0, 0.5)),
        ("What did you recommend for dinner?", (0.5, 1.0)),
        ("What did you tell me about Rome?", (1.0, 1.0)),
        ("capital of France", (1.0, 1.0)),
    ],
)
def test_speaker_prior_follows_the_question_person(query, expected):
    assert speaker_weights(query, 0.5) == expected
    assert speaker_weights(query, 1.0) == (1.0, 1.0)
    neutral = expected == (1.0, 1.0) and query == "capital of France"
    assert speaker_weights(query, 0.5, "user") == ((1.0, 0.5) if neutral else expected)


def test_default_ranking_prefers_the_users_own_statement():
    events = [
        ev(
            0,
            "user",
            "Could you recommend resources for music theory and fingerpicking techniques? By the way, "
            "I've been practicing guitar for 30 minutes daily and it helps me progress nicely.",
        ),
        ev(
            1,
            "assistant",
            "Guitar practice every day is great! Daily guitar practice time: guitar scales, guitar chords.",
        ),
        ev(2, "user", "Thanks, unrelated: how do I cook rice?"),
        ev(3, "assistant", "Rinse the rice and simmer."),
    ]
    from harness.session.events import Session

    s = Session(id="s", user_id="u")
    s.extend(events)
    from harness.session.boundary import SummaryBoundary

    b = SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)
    q = {"query": "How much time do I practice guitar every day?"}
    plain = Retriever(preset("bm25")).tools(s, boundary=b).call("session_search", q)
    assert plain.trace["hits"][0]["event_id"] == "e0001"
    default = Retriever(preset("default"), embedder=HashingEmbedder()).tools(s, boundary=b).call("session_search", q)
    assert default.trace["hits"][0]["event_id"] == "e0000"
    body = json.loads(default.content)
    assert body["results"][0]["snippet"] == events[0].content


def test_metrics_match_longmemeval_definitions():
    ranked = ["a", "b", "c", "d"]
    assert recall_any(ranked, {"c"}, 2) == 0 and recall_any(ranked, {"c"}, 3) == 1
    assert recall_all(ranked, {"a", "d"}, 3) == 0 and recall_all(ranked, {"a", "d"}, 4) == 1
    assert ndcg(ranked, {"a"}, 5) == 1.0
    assert ndcg(ranked, {"b"}, 5) == pytest.approx(1 / np.log2(3))
    events = [
        Event("a", 0, "user", "x", 1.0, source_session="s1"),
        Event("b", 1, "user", "y", 2.0, source_session="s2", has_answer=True),
        Event("c", 2, "user", "z", 3.0, source_session="s2"),
    ]
    m = case_metrics(["c", "a", "b"], events)
    assert m["turn_recall_any@1"] == 0 and m["turn_recall_any@3"] == 1 and m["session_recall@1"] == 1


def test_evidence_in_response_checks_full_text_and_ids():
    events = [Event("e1", 0, "user", "I live in Oslo.", 1.0, has_answer=True), Event("e2", 1, "assistant", "Nice", 2.0)]
    assert evidence_in_response(
        json.dumps({"results": [{"event_id": "e1", "snippet": "I live in Oslo."}]}), events
    ) == (True, True)
    assert evidence_in_response(
        json.dumps({"results": [{"event_id": "e2", "snippet": "Nice", "context": [{"content": "I live in Oslo."}]}]}),
        events,
    ) == (True, False)
    assert evidence_in_response("Error: x", events) == (False, False)


@pytest.mark.parametrize("name", ["bm25", "hybrid", "trpc_parity", "trpc_parity_openai", "default", "speaker_neutral"])
def test_preset_configs_instantiate(name, tmp_path, monkeypatch):
    cfg = preset_node(name)  # the file with its defaults list applied, as Hydra composes it
    monkeypatch.setenv("LME_HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    # No model files in unit tests: swap any real embedder for the hashing one, keep everything else.
    if cfg.get("embedder") is not None:
        cfg.embedder = {"_target_": "harness.retrieval.embedders.HashingEmbedder"}
    r = instantiate(cfg)
    assert isinstance(r, Retriever) and r.config.name == name
    from dataclasses import replace

    base = {"trpc_parity_openai": "trpc_parity"}.get(name, name)
    assert r.config == replace(preset(base), name=name)


def test_openai_embedder_config_targets_the_reference_model():
    cfg = OmegaConf.load(CONFIGS / "trpc_parity_openai.yaml")
    assert cfg.embedder.model == "text-embedding-3-small" and cfg.max_embed_tokens == 8192


def _length_vectors(req):
    """An /embeddings reply whose vectors encode each input's length, listed in reverse order."""
    from harness.testing.fake_openai import Reply

    data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(req["input"])]
    return Reply(
        body={
            "object": "list",
            "data": data[::-1],
            "model": req["model"],
            "usage": {"prompt_tokens": 3 * len(data), "total_tokens": 3 * len(data)},
        }
    )


def test_openai_embedder_goes_through_the_client_layer_and_logs_its_calls(tmp_path):
    from harness.llm.client import embedding_call_log
    from harness.retrieval.embedders import OpenAIEmbedder
    from harness.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(_length_vectors) as srv:
        e = OpenAIEmbedder(base_url=srv.base_url, api_key="x", batch_size=2, cache_path=str(tmp_path / "c.sqlite"))
        with embedding_call_log() as calls:
            v = e.embed(["a", "bbb", "cc"])
        assert v.shape == (3, 2) and np.allclose(np.linalg.norm(v, axis=1), 1.0)
        assert v[1, 0] > v[2, 0] > v[0, 0]  # order restored from `index`
        assert [r["input"] for r in srv.requests] == [["a", "bbb"], ["cc"]]
        assert [c["usage"]["prompt_tokens"] for c in calls] == [6, 3] and not any(c["cached"] for c in calls)
        assert calls[0]["model"] == "text-embedding-3-small" and calls[0]["n_inputs"] == 2
        # The same texts again: answered from the response cache, still logged (priced as if live).
        with embedding_call_log() as again:
            assert np.allclose(e.embed(["a", "bbb", "cc"]), v)
        assert len(srv.requests) == 2 and [c["cached"] for c in again] == [True, True]
    assert e.identity.startswith("openai:text-embedding-3-small")
    assert e.client.stats.as_dict()["tokens"]["embedding"]["prompt_tokens"] == 18


def test_openai_embedder_retries_transient_errors_and_rejects_malformed_replies():
    from harness.llm.types import LLMError
    from harness.retrieval.embedders import OpenAIEmbedder
    from harness.testing.fake_openai import FakeOpenAIServer, Reply, scripted

    flaky = scripted([Reply(status=503, body={"error": {"message": "busy"}}, headers={"retry-after": "0"})])
    calls = {"n": 0}

    def responder(req):
        calls["n"] += 1
        return flaky(req) if calls["n"] == 1 else _length_vectors(req)

    with FakeOpenAIServer(responder) as srv:
        e = OpenAIEmbedder(base_url=srv.base_url, api_key="sk-test")
        assert e.embed(["hello"]).shape == (1, 2) and calls["n"] == 2 and e.client.stats.retries == 1
    one = {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}
    short = Reply(body={"object": "list", "data": [one], "model": "m"})  # fewer vectors than inputs
    with FakeOpenAIServer(scripted([short])) as srv:
        e = OpenAIEmbedder(base_url=srv.base_url, api_key="sk-test", max_retries=1)
        with pytest.raises(LLMError, match="expected 2 embeddings, got 1"):
            e.embed(["hello", "world"])
        assert len(srv.requests) == 2  # a malformed 200 is retried once, then named
    with FakeOpenAIServer(scripted([Reply(body={"object": "list", "data": [], "model": "m"})])) as srv:
        e = OpenAIEmbedder(base_url=srv.base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(LLMError, match="malformed embeddings response"):
            e.embed(["hello"])


def test_retrieval_eval_runner_on_a_tiny_dataset(tmp_path, write_dataset):
    from commands.retrieval_eval import run_retrieval_eval
    from tests.support.dataset_rows import make_row

    filler = [{"role": "user", "content": f"Tell me about topic {i} please."} for i in range(6)]
    sessions = [
        [
            *filler[:3],
            {"role": "user", "content": "I went to Paris last May.", "has_answer": True},
            {"role": "assistant", "content": "Nice trip!"},
        ],
        filler[3:],
    ]
    rows = [make_row(qid=f"q{i}", question="When did I go to Paris?", sessions=sessions) for i in range(3)] + [
        make_row(qid="q9_abs", sessions=[filler])
    ]
    path = write_dataset(rows)
    cfg = OmegaConf.create(
        {
            "dataset": {
                "_target_": "harness.data.longmemeval.LongMemEvalSource",
                "path": str(path),
                "question_types": ["single-session-user"],
            },
            "retrieval_eval": {"presets": ["bm25", "current"]},
            "retrieval": {
                "_target_": "harness.retrieval.retriever.Retriever",
                "config": {
                    "_target_": "harness.retrieval.tools.SearchConfig",
                    "name": "mine",
                    "response_style": "compact",
                    "fusion": "score",
                    "assistant_weight": 0.5,
                },
                "embedder": {"_target_": "harness.retrieval.embedders.HashingEmbedder"},
                "store": None,
            },
        }
    )
    md = run_retrieval_eval(cfg, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "retrieval_eval.json").read_text())
    assert summary["cases"] == 3  # the abstention case has no evidence label
    for name in ("bm25", "current"):
        s = summary["presets"][name]
        assert s["turn_recall_any@1"] == 1.0 and s["response_has_evidence"] == 1.0
    assert (tmp_path / "out" / "retrieval_eval.png").stat().st_size > 0
    assert "| bm25 |" in md.read_text()
    lines = (tmp_path / "out" / "retrieval_eval_cases.jsonl").read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[0])["ranked"][0] == "e0003"


def test_keyword_query_form_is_what_a_model_would_type():
    from commands.retrieval_eval import query_for

    assert query_for("What breed is my dog?", "question") == "What breed is my dog?"
    assert query_for("What breed is my dog?", "keywords") == "breed dog"
    assert query_for("Who is it?", "keywords") == "Who is it?"  # nothing left: fall back to the question
    with pytest.raises(ValueError, match="query_form"):
        query_for("x", "nope")
