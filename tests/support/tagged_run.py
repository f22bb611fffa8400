"""A small benchmark whose every request says which case it is for: N_CASES cases tagged `[case-qI]` in every turn,
the fake model's answers naming case and mode, the arguments of `lme-harness run` against an endpoint, and the
records of a run without what differs between two runs of the same inputs. Shared by the tests that kill, resume,
shard, lock or merge runs and compare their records with an uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

from harness.records import load_records
from harness.testing.faults import request_kind
from tests.support.dataset_rows import make_row
from tests.support.rerun import RERUN_VOLATILE, without_keys

MODES = ("long_context", "summary", "summary_ondemand")
N_CASES = 4


def dataset(tmp_path: Path) -> Path:
    rows = []
    for i in range(N_CASES):
        tag = f"case-q{i}"
        sessions = [
            [
                {"role": "user", "content": f"[{tag}] In session {s} I bought item {s} for my {tag} project."},
                {"role": "assistant", "content": f"[{tag}] Noted, item {s}."},
                {"role": "user", "content": f"[{tag}] Also, my dog is called Rex{s}."},
                {"role": "assistant", "content": f"[{tag}] Rex{s} is a nice name."},
            ]
            for s in range(3)
        ]
        rows.append(
            make_row(qid=f"q{i}", question=f"[{tag}] What did I buy in session 1?", answer="item 1", sessions=sessions)
        )
    p = tmp_path / "data.json"
    p.write_text(json.dumps(rows))
    return p


def attribute(req) -> tuple[str, str]:
    """(question_id, what for): the mode of an answer or judge call, `summarize` for a summary generation."""
    text = json.dumps(req.get("messages"))
    qid = next(f"q{i}" for i in range(N_CASES) if f"case-q{i}]" in text)
    kind = request_kind(req)
    if kind == "summary":
        return qid, "summarize"
    if kind == "judge":
        return qid, next(m for m in MODES[::-1] if f"via {m}." in text)
    return qid, answer_mode(req)


def answer_mode(req) -> str:
    if req.get("tools"):
        return "summary_ondemand"
    system = req["messages"][0]["content"] if req["messages"][0]["role"] == "system" else ""
    return "summary" if "summary_of_previous_interactions" in system else "long_context"


def answer(req) -> str:
    text = json.dumps(req["messages"])
    qid = next(f"q{i}" for i in range(N_CASES) if f"case-q{i}]" in text)
    return f"answer for {qid} via {answer_mode(req)}."


def args(tmp_path: Path, base_url: str, data: Path, name: str) -> list[str]:
    return [
        "run",
        f"hydra.run.dir={tmp_path / name}",
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        f"dataset.path={data}",
        "dataset.sha256=null",
        "dataset.limit=null",
        "cache.enabled=false",
        "run.progress=false",
        "run.concurrency=1",
        "retrieval=bm25",
    ]


def _stable(obj):
    """A record without what differs between two runs of the same inputs: times and cache flags."""
    return without_keys(obj, RERUN_VOLATILE)


def stable_records(run_dir: Path) -> dict:
    return {(r["question_id"], r["mode"]): _stable(r) for r in load_records(run_dir / "records.jsonl")}
