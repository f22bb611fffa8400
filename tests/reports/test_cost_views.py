"""Issue 37 item 4: ingest is in every cost view. The headline, the cost table, the memory section and `compare`
count a contestant's answer + ingest + retrieve tokens and USD, with the split (reports/phases.py, reports/cost.py):
mem0's extraction calls priced by the run's model, a provider's own `cost_usd` kept, a service that reports no cost
unknown (n/a), never free."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from harness.contestants.base import CaseHistory
from harness.session.events import Session
from reports.aggregate import cost_table, headline, load_run, records_frame
from reports.cost import Endpoints, PriceTable, load_price_table, record_costs
from reports.render import build_report
from tests.support.report_fixtures import call, meta, rec, write_run

PER_M = 1e-6
MINI = {"input": 0.15, "output": 0.60}  # gpt-4o-mini in configs/pricing/default.yaml


def memory_rec(
    qid: str,
    mode: str,
    provider: str,
    *,
    lme: float = 1.0,
    answer_prompt: int = 1000,
    ingest_usage: dict[str, Any] | None = None,
    retrieve_usage: dict[str, Any] | None = None,
    spend: dict[str, Any] | None = None,
    variant: str = "fair",
    top_k: int = 10,
    ingest_ms: float = 100.0,
    query_ms: float = 50.0,
) -> dict[str, Any]:
    """A memory contestant's record as ProviderContestant writes it (trace fields: harness/memory/contestant.py)."""
    r = rec(qid, mode, lme=lme, calls=[call(answer_prompt, 10)], query_ms=query_ms)
    who = {"provider": provider, "version": "1", "variant": variant, **(spend or {})}
    r["ingest"] = {
        "calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "embedding_tokens": 0,
        "model_ms": 0.0,
        "wall_ms": ingest_ms,
        "trace": [
            {
                **who,
                "call": "ingest",
                "sessions": 3,
                "ingested_tokens": 4000,
                "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": None, **(ingest_usage or {})},
                "ingest_ms": ingest_ms,
                "ready_wait_ms": 0.0,
                "ready_polls": 0,
            }
        ],
    }
    r["tool_calls"] = [
        {
            "name": "memory_retrieve",
            **who,
            "top_k": top_k,
            "returned": 3,
            "after_as_of": 0,
            "items": [],
            "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": None, **(retrieve_usage or {})},
            "retrieve_ms": 5.0,
            "gold": None,
        }
    ]
    r["truncation"] = {"truncated": False, "context_tokens_cap": 4000}
    return r


MEM0_INGEST = {"input_tokens": 15000, "output_tokens": 600, "llm_calls": 4}  # ~15K ingest tokens a question


def mem0_vs_bm25(run_dir: Path, **meta_kw: Any) -> Path:
    """One run with both providers as contestants: mem0's reader sees short memories (fewer answer tokens), its
    ingest costs 15,600 tokens; bm25's reader sees whole turns and ingest is free."""
    recs = []
    for qid in ("q1", "q2"):
        recs.append(
            memory_rec(
                qid,
                "memory_mem0",
                "mem0",
                answer_prompt=800,
                ingest_usage=MEM0_INGEST,
                spend={"llm": "answer_model"},
            )
        )
        recs.append(memory_rec(qid, "memory_bm25", "bm25", answer_prompt=3000))
    return write_run(run_dir, recs, meta(**meta_kw))


def test_mem0s_ingest_makes_it_dearer_than_bm25_in_the_headline_and_the_cost_table(tmp_path):
    run = load_run(mem0_vs_bm25(tmp_path / "r"))
    head = headline(run, "lme_acc").set_index("mode")
    mem0, bm25 = head.loc["memory_mem0"], head.loc["memory_bm25"]
    assert (mem0["answer_tokens"], mem0["ingest_tokens"], mem0["retrieve_tokens"]) == (810, 15600, 0)
    assert mem0["tokens"] == 810 + 15600 and bm25["tokens"] == 3010
    assert mem0["tokens"] > bm25["tokens"]  # on main the headline read 800 prompt tokens against bm25's 3,000
    costs = cost_table(run).set_index("mode")
    m = costs.loc["memory_mem0"]
    assert m["cost_ingest"] == pytest.approx((15000 * MINI["input"] + 600 * MINI["output"]) * PER_M)
    assert m["cost_answer"] == pytest.approx((800 * MINI["input"] + 10 * MINI["output"]) * PER_M)
    assert m["cost_contestant"] == pytest.approx(m["cost_answer"] + m["cost_ingest"] + m["cost_retrieve"])
    assert m["cost_total"] == pytest.approx(m["cost_contestant"] + m["cost_judge"])
    assert costs.loc["memory_bm25"]["cost_ingest"] == 0
    assert m["cost_contestant"] > costs.loc["memory_bm25"]["cost_contestant"]
    assert (m["total_tokens"], m["ingest_tokens"]) == (16410, 15600)


def test_the_report_shows_ingest_in_the_headline_cost_table_and_memory_section(tmp_path):
    out = build_report(mem0_vs_bm25(tmp_path / "r"))
    md = out["markdown"].read_text()
    head = md[md.index("## Headline") : md.index("## Reference table")]
    assert "| memory_mem0 | 1.0000 [1.0000, 1.0000] (n=2) | 16,410 | 810 / 15,600 / 0 |" in head
    assert "| memory_bm25 | 1.0000 [1.0000, 1.0000] (n=2) | 3,010 | 3,010 / 0 / 0 |" in head
    cost = md[md.index("## Cost") :].split("\n## ")[0]
    assert "| ingest tokens | retrieve tokens |" in cost and "| ingest $/case | retrieve $/case |" in cost
    ingest_usd = (15000 * MINI["input"] + 600 * MINI["output"]) * PER_M
    row = next(line for line in cost.splitlines() if line.startswith("| memory_mem0 |"))
    assert f"| {ingest_usd:.6f} |" in row
    memory = md[md.index("### Ingest apart from answer") :].split("###")[1]
    mem0_row = next(line for line in memory.splitlines() if line.startswith("| memory_mem0: mem0 (fair) |"))
    assert f"| {ingest_usd:.6f} |" in mem0_row  # ingest $ priced as the run's model, no longer "n/a"
    ranked = md[md.index("### Contestants: quality, cost and latency") :].split("###")[1]
    assert ranked.index("| bm25 |") < ranked.index("| mem0 |")  # equal quality: the cheaper first


def test_a_local_run_model_prices_mem0s_extraction_at_zero(tmp_path):
    run = load_run(mem0_vs_bm25(tmp_path / "r", kind="local", model="qwen"))
    m = cost_table(run).set_index("mode").loc["memory_mem0"]
    assert m["cost_ingest"] == 0 and m["ingest_tokens"] == 15600  # free, and still counted in tokens


def _priced(record: dict[str, Any], table: PriceTable | None = None) -> tuple[dict[str, float | None], set[str]]:
    return record_costs(record, {}, table or load_price_table(), Endpoints(answer_model="gpt-4o-mini"))


def test_a_providers_reported_cost_is_kept_and_an_unreported_remote_cost_is_unknown():
    service = {"remote": True}
    paid = memory_rec(
        "q1",
        "memory",
        "my-service",
        spend=service,
        ingest_usage={"input_tokens": 9000, "cost_usd": 0.002},
        retrieve_usage={"embedding_tokens": 12, "cost_usd": 0.0005},
    )
    costs, unpriced = _priced(paid)
    assert (costs["cost_ingest"], costs["cost_retrieve"]) == (0.002, 0.0005) and not unpriced
    silent = memory_rec("q1", "memory", "my-service", spend=service)  # a service reporting nothing
    costs, unpriced = _priced(silent)
    assert costs["cost_ingest"] is None and costs["cost_retrieve"] is None and costs["cost_total"] is None
    assert unpriced == {"memory provider 'my-service' (no cost_usd reported)"}
    tokens_only = memory_rec("q1", "memory", "other", ingest_usage={"input_tokens": 50})  # whose model?
    costs, unpriced = _priced(tokens_only)
    assert costs["cost_ingest"] is None and unpriced == {"memory provider 'other' (LLM tokens without cost_usd)"}
    builtin = memory_rec("q1", "memory", "bm25")  # in-process, no model of its own, nothing reported: free
    assert _priced(builtin)[0]["cost_ingest"] == 0


def test_ingest_embeddings_are_ingest_and_query_vectors_retrieve(tmp_path):
    from reports.phases import split_embedding_calls  # the new module: imported here, so main's other tests run

    r = rec("q1", "summary_ondemand", calls=[call(100)])
    emb = [{"model": "text-embedding-3-small", "usage": {"prompt_tokens": n}} for n in (300, 200, 7, 5)]
    r["embedding_calls"] = emb
    r["ingest"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "embedding_tokens": 500}
    ingest, query = split_embedding_calls(r)
    assert ingest == emb[:2] and query == emb[2:]
    costs, _ = _priced(r)
    price = load_price_table().lookup("text-embedding-3-small")
    assert price is not None
    assert costs["cost_ingest"] == pytest.approx(500 * price.input * PER_M)
    assert costs["cost_retrieve"] == pytest.approx(12 * price.input * PER_M)
    assert costs["cost_embedding"] == pytest.approx(costs["cost_ingest"] + costs["cost_retrieve"])


def _random_record(rng: random.Random, qid: str, mode: str) -> dict[str, Any]:
    """A record of any contestant kind: plain, summary (own or reused), a memory provider of any spend kind."""
    kind = rng.choice(["plain", "summary", "memory"])
    calls = [call(rng.randint(1, 5000), rng.randint(0, 300)) for _ in range(rng.randint(1, 3))]
    r = rec(qid, mode, lme=float(rng.random() < 0.5), calls=calls)
    r["ingest"] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "embedding_tokens": 0}
    if kind == "plain" and rng.random() < 0.5:
        r["ingest"].update(calls=1, prompt_tokens=rng.randint(1, 900), completion_tokens=rng.randint(0, 90))
    if kind == "summary":
        r["summary"] = {
            "generated_for": mode,
            "reused": False,
            "calls": [call(rng.randint(1, 3000), rng.randint(1, 200), purpose="summary")],
        }
    if kind == "memory":
        spend = rng.choice([{}, {"llm": "answer_model"}, {"remote": True}])
        usage = {"input_tokens": rng.randint(0, 20000), "output_tokens": rng.randint(0, 900)}
        if rng.random() < 0.5:
            usage["cost_usd"] = round(rng.random() / 100, 6)
        r = {**memory_rec(qid, mode, "p", ingest_usage=usage, spend=spend), "calls": calls}
    if rng.random() < 0.5:
        emb = [{"model": "text-embedding-3-small", "usage": {"prompt_tokens": rng.randint(1, 400)}} for _ in range(3)]
        k = rng.randint(0, 3)
        r["embedding_calls"] = emb
        r["ingest"]["embedding_tokens"] = sum(e["usage"]["prompt_tokens"] for e in emb[:k])
    return r


def test_generated_records_keep_every_cost_view_whole():
    """Seeded records of every kind: the phases add up to the totals, each phase's tokens are worked out from the
    raw record, and a record with no provider usage costs what it cost before the split (answer + summary + judge +
    embedding)."""
    from reports.cost import COST_PARTS, PHASES
    from reports.phases import phase_tokens

    rng = random.Random(37)
    table = load_price_table()
    for i in range(300):
        r = _random_record(rng, f"q{i}", rng.choice(["a", "b"]))
        costs, _ = record_costs(r, {}, table, Endpoints(answer_model="gpt-4o-mini", judge_model="gpt-4o-mini"))
        parts = [costs[f"cost_{p}"] for p in COST_PARTS]
        if all(v is not None for v in parts):
            assert costs["cost_total"] == pytest.approx(sum(parts))  # type: ignore[arg-type]
            assert costs["cost_contestant"] == pytest.approx(sum(costs[f"cost_{p}"] for p in PHASES))  # type: ignore[misc]
        else:
            assert costs["cost_total"] is None
        tokens = phase_tokens(r, {})
        answer = sum(c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"] for c in r["calls"])
        summary = sum(
            c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"]
            for c in (r.get("summary") or {}).get("calls", [])
        )
        own = 0 if r.get("summary") else r["ingest"]["prompt_tokens"] + r["ingest"]["completion_tokens"]
        trace = (r["ingest"].get("trace") or [{}])[0].get("usage") or {}
        provider = int(trace.get("input_tokens") or 0) + int(trace.get("output_tokens") or 0)
        assert (tokens.answer, tokens.ingest, tokens.retrieve) == (answer, summary + own + provider, 0)
        assert tokens.total == answer + summary + own + provider
        if "trace" not in r["ingest"] and not own:
            before = [costs["cost_answer"], costs["cost_summary"], costs["cost_judge"], costs["cost_embedding"]]
            expected = None if any(v is None for v in before) else sum(before)  # type: ignore[arg-type]
            assert (
                costs["cost_total"] == pytest.approx(expected) if expected is not None else costs["cost_total"] is None
            )


def test_the_records_frame_carries_tokens_by_phase_for_every_scored_record():
    rng = random.Random(4)
    records = [_random_record(rng, f"q{i}", "m") for i in range(40)]
    frame = records_frame(records, meta=meta(), prices=load_price_table())
    df = frame.df
    assert (df["total_tokens"] == df["answer_tokens"] + df["ingest_tokens"] + df["retrieve_tokens"]).all()
    both = df.dropna(subset=["cost_contestant"])
    assert not both.empty
    for _, row in both.iterrows():
        assert row["cost_contestant"] == pytest.approx(row["cost_answer"] + row["cost_ingest"] + row["cost_retrieve"])
    assert not math.isnan(df["ingest_ms"].sum())


def test_the_contestant_records_how_a_providers_usage_is_priced():
    """What the reports need to price a provider's usage is written by the contestant, in every trace: `llm` for a
    provider whose LLM calls go through the run's model (mem0), `remote` for a service."""
    from harness.memory.contestant import ProviderContestant
    from harness.memory.http import HttpProvider
    from tests.harness.memory.test_memory_contestant import Reader, Recorder, _case, _kit

    class Binding(Recorder):
        def bind_model(self, llm: Any) -> None:
            self.llm = llm

    case = _case()
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    traces = {}
    for name, provider in (("plain", Recorder()), ("bound", Binding())):
        ingested = ProviderContestant(provider, ready_poll_s=0).ingest(CaseHistory.of(case, s), _kit(Reader()))
        traces[name] = ingested.trace[0]
    assert traces["bound"]["llm"] == "answer_model" and "llm" not in traces["plain"]
    assert "remote" not in traces["plain"]
    assert ProviderContestant(HttpProvider(url="http://127.0.0.1:9/v1"))._spend() == {"remote": True}


def test_compares_paired_tokens_count_ingest(tmp_path):
    """`compare bm25 mem0`: besides the answer's prompt tokens, the paired rows hold the tokens including ingest,
    so mem0's extraction shows as the cost it is."""
    from reports.compare import compare_runs, load_runs

    bm25 = write_run(tmp_path / "bm25", [memory_rec(q, "memory", "bm25", answer_prompt=3000) for q in ("q1", "q2")])
    mem0 = write_run(
        tmp_path / "mem0",
        [
            memory_rec(q, "memory", "mem0", answer_prompt=800, ingest_usage=MEM0_INGEST, spend={"llm": "answer_model"})
            for q in ("q1", "q2")
        ],
    )
    (pair,) = compare_runs(load_runs([bm25, mem0], prices=load_price_table()))
    rows = pair.stats.set_index("metric")
    assert rows.loc["prompt_tokens_total", "delta"] == -2200  # the answer's prompt alone: mem0 looks cheaper
    assert rows.loc["total_tokens", "mean_a"] == 3010 and rows.loc["total_tokens", "mean_b"] == 16410
    assert rows.loc["ingest_tokens", "delta"] == 15600 and rows.loc["total_tokens", "losses"] == 2
    assert rows.loc["cost_total", "delta"] > 0  # and it costs more
