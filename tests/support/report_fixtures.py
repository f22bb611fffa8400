"""Synthetic run directories for the report / compare / gate tests (records in the replay's schema)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.records import RECORDS_FILE, RecordWriter


def call(
    prompt: int,
    completion: int = 10,
    *,
    model: str = "gpt-4o-mini-2024-07-18",
    purpose: str = "answer",
    cached_tokens: int | None = None,
    tool_calls: Sequence[dict] = (),
) -> dict[str, Any]:
    return {
        "cached": False,
        "content": "x",
        "finish_reason": "stop",
        "latency_s": 0.5,
        "model": model,
        "purpose": purpose,
        "tool_calls": list(tool_calls),
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached_tokens},
    }


def rec(
    qid: str,
    mode: str,
    *,
    em: float = 0.0,
    f1: float = 0.0,
    rouge_l: float = 0.0,
    tokens: int = 1000,
    lme: float | None = None,
    lme_strict: float | None = -1.0,
    lme_verdict: str | None = None,
    calls: Sequence[dict] | None = None,
    summary: dict | None = None,
    n_search: int = 0,
    n_load: int = 0,
    query_ms: float = 100.0,
    status: str = "ok",
    question: str = "Where did I go?",
    reference: str = "Paris",
    prediction: str = "You went to Paris.",
    tool_calls: Sequence[dict] | None = None,
    judge_model: str | None = None,
    qtype: str = "single-session-user",
    trpc: dict | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """One record. `lme` set → a LongMemEvalJudge result (`lme_strict` defaults to `lme`; None = not_run)."""
    if status != "ok":
        return {
            "question_id": qid,
            "question_type": qtype,
            "is_abstention": "_abs" in qid,
            "mode": mode,
            "question": question,
            "reference": reference,
            "status": status,
            "error": error or "boom",
            "prediction": None,
            "metrics": {},
            "usage": {},
            "latency": {"wall_ms": 1.0},
        }
    calls = list(calls) if calls is not None else [call(tokens)]
    metrics: dict[str, Any] = {"em": em, "f1": f1, "rouge_l": rouge_l, "bleu1": f1, "rouge1": f1, "rouge2": 0.0}
    details: dict[str, Any] = {"LexicalScorer": {"pred_tokens": 3, "ref_tokens": 1}}
    if lme is not None or lme_verdict == "not_run":
        strict = lme if lme_strict == -1.0 else lme_strict
        metrics.update(lme_acc=lme, lme_acc_strict=strict)
        details["LongMemEvalJudge"] = {
            "prompt_kind": "abstention" if "_abs" in qid else qtype,
            "judge_called": lme is not None,
            "raw": None if lme is None else ("yes" if lme else "no"),
            "verdict": "not_run" if lme is None else ("correct" if lme else "incorrect"),
            "verdict_strict": "not_run" if strict is None else ("correct" if strict else "incorrect"),
            "usage": None if lme is None else call(200, 1, purpose="judge", model=judge_model or calls[-1]["model"]),
            "error": "LLMError: down" if lme is None else None,
        }
    if trpc is not None:
        metrics.update(llm_score=trpc.get("llm_score"), llm_score_strict=trpc.get("llm_score_strict"))
        details["TrpcJudge"] = trpc["details"]
    summ_calls = (summary or {}).get("calls", [])
    return {
        "question_id": qid,
        "question_type": qtype,
        "is_abstention": "_abs" in qid,
        "mode": mode,
        "question": question,
        "reference": reference,
        "prediction": prediction,
        "status": "ok",
        "error": error,
        "metrics": metrics,
        "metric_details": details,
        "usage": {
            "final_prompt_tokens": calls[-1]["usage"]["prompt_tokens"],
            "prompt_tokens_total": sum(c["usage"]["prompt_tokens"] for c in calls),
            "completion_tokens_total": sum(c["usage"]["completion_tokens"] for c in calls),
            "cached_tokens_total": sum(c["usage"]["cached_tokens"] or 0 for c in calls),
            "summary_prompt_tokens": sum(c["usage"]["prompt_tokens"] for c in summ_calls),
            "summary_completion_tokens": sum(c["usage"]["completion_tokens"] for c in summ_calls),
            "answer_calls": len(calls),
            "cache_hits": 0,
        },
        "calls": calls,
        "tool_calls": list(tool_calls or []),
        "n_search": n_search,
        "n_load": n_load,
        "latency": {"query_ms": query_ms, "wall_ms": query_ms + 5},
        "truncation": {"truncated": False},
        "summary": summary,
        "final_messages": 3,
    }


def summary_block(
    text: str = "User went to Paris.",
    *,
    generated_for: str = "summary",
    reused: bool = False,
    prompt: int = 300,
    completion: int = 40,
    model: str = "gpt-4o-mini-2024-07-18",
) -> dict[str, Any]:
    calls = [] if reused else [call(prompt, completion, purpose="summary", model=model)]
    return {
        "text": text,
        "chars": len(text),
        "boundary": {},
        "generated_for": generated_for,
        "reused": reused,
        "chunks": 1,
        "build_ms": 1.0,
        "calls": calls,
    }


def set_dotted(node: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """`node` with `value` at the dotted `key` (`memory.generation.max_tokens`), the dicts on the way made as needed:
    a composed config as run.json holds it, built from the dotted keys the reports compare."""
    *parents, leaf = key.split(".")
    at = node
    for p in parents:
        at = at.setdefault(p, {})
    at[leaf] = value
    return node


def meta(
    *,
    kind: str = "remote",
    model: str = "gpt-4o-mini",
    prompt: str = "trpc_default",
    judge: dict | None = None,
    dataset_sha: str = "d" * 64,
) -> dict[str, Any]:
    return {
        "dataset": {"source": "synthetic", "sha256": dataset_sha, "n_total": 5, "n_selected": 5},
        "git": {"sha": "0" * 40, "dirty": False},
        "python": "3.11",
        "platform": "test",
        "packages": {"pandas": "x"},
        "model": {"name": "openai" if kind == "remote" else "local", "kind": kind, "model": model},
        "judge_model": judge,
        "fingerprint": "f" * 16,
        "config": {
            "prompt": {"name": prompt},
            "model": {"model": model, "kind": kind},
            "judge": {"_target_": "harness.scoring.judges.LongMemEvalJudge"},
        },
    }


def write_run(run_dir: Path, records: Sequence[dict[str, Any]], run_meta: dict[str, Any] | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    w = RecordWriter(run_dir / RECORDS_FILE)
    for r in records:
        w.append(r)
    (run_dir / "run.json").write_text(json.dumps(run_meta if run_meta is not None else meta()))
    return run_dir


def standard_run(
    run_dir: Path, *, ondemand_em: Sequence[float] = (1, 1, 0, 1), summary_tokens: int = 400, **meta_kw: Any
) -> Path:
    """4 cases × 3 modes with a LongMemEval judge, a shared summary, tool calls and a hostile prediction."""
    records = []
    lc_tokens = [1000, 2000, 4000, 8000]
    for i, qid in enumerate(["q1", "q2", "q3_abs", "q4"]):
        records.append(rec(qid, "long_context", em=1.0, f1=0.5, tokens=lc_tokens[i], lme=1.0, query_ms=900 + i))
        records.append(
            rec(
                qid,
                "summary",
                em=0.0,
                f1=0.1,
                tokens=summary_tokens,
                lme=0.0,
                query_ms=200 + i,
                summary=summary_block(),
                prediction="I don't know <script>alert(1)</script>",
            )
        )
        tc = [
            {
                "id": "c1",
                "name": "session_search",
                "arguments": '{"query": "Paris"}',
                "ok": True,
                "error": None,
                "response_chars": 100,
                "round": 1,
                "trace": {"hits": [{"event_id": "e1", "score": 1.0}]},
            }
        ]
        records.append(
            rec(
                qid,
                "summary_ondemand",
                em=float(ondemand_em[i]),
                f1=0.4,
                lme=float(ondemand_em[i]),
                calls=[call(500, tool_calls=[{"id": "c1"}]), call(summary_tokens + 600)],
                n_search=1,
                query_ms=500 + i,
                tool_calls=tc,
                summary=summary_block(reused=True),
            )
        )
    return write_run(run_dir, records, meta(**meta_kw))


def memory_record(r: dict, rng: random.Random) -> dict:
    """`r` as a memory contestant records it: the provider's ingest trace and a retrieval with gold labels."""
    hit = rng.random() < 0.6
    r["ingest"] = {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "embedding_tokens": 0,
        "trace": [
            {
                "call": "ingest",
                "provider": "p",
                "variant": "fair",
                "ingested_tokens": 1000,
                "ingest_ms": rng.uniform(1, 50),
                "usage": {"input_tokens": rng.randint(0, 500), "output_tokens": 10, "cost_usd": 0.001},
            }
        ],
    }
    gold = {
        "evidence_turns": 1,
        "turn_recall_any@5": float(hit),
        "session_recall_any@5": 1.0,
        "shown_evidence_turn": hit,
    }
    r["tool_calls"] = [
        {
            "name": "memory_retrieve",
            "after_as_of": rng.randint(0, 1),
            "other_cases": 0,
            "items": [{"chars": 5, "date": "2023-05-01"}],
            "retrieve_ms": 1.0,
            "gold": gold,
        }
    ]
    return r


def generated_run(run_dir: Path, seed: int) -> Path:
    """A run of drawn records: judge verdicts missing (not_run), failed pairs, several question types or one,
    abstention questions, tool use, priced and unpriced models, and a memory contestant."""
    rng = random.Random(seed)
    types = rng.choice([["single-session-user"], ["multi-session", "temporal-reasoning", "knowledge-update"]])
    modes = rng.sample(["long_context", "summary", "summary_ondemand", "memory"], rng.randint(2, 4))
    records = []
    for i in range(rng.randint(3, 14)):
        qid = f"q{i}{'_abs' if rng.random() < 0.2 else ''}"
        qtype = rng.choice(types)
        for mode in modes:
            if rng.random() < 0.1:
                records.append(rec(qid, mode, status="failed", qtype=qtype, error=rng.choice(["down", "slow"])))
                continue
            model = rng.choice(["gpt-4o-mini", "gpt-4o-mini", "unknown-model"])
            r = rec(
                qid,
                mode,
                em=float(rng.random() < 0.5),
                f1=rng.random(),
                rouge_l=rng.random(),
                lme=rng.choice([0.0, 1.0, 1.0, None]),
                calls=[call(rng.randint(50, 9000), rng.randint(1, 50), model=model)],
                n_search=rng.randint(0, 2),
                query_ms=rng.uniform(1, 2000),
                qtype=qtype,
            )
            records.append(memory_record(r, rng) if mode == "memory" else r)
    return write_run(run_dir, records)


def as_version_1(doc: dict[str, Any]) -> dict[str, Any]:
    """A results.json document (schema 2) as schema version 1 wrote it: without the fields version 2 added."""
    doc["schema_version"] = 1
    for key in ("source", "questions"):
        del doc[key]
    for c in doc["contestants"]:
        for key in ("judges", "savings", "tools", "latency", "provider", "memory"):
            del c[key]
    return doc
