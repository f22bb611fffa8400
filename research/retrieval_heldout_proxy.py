"""Retrieval on a proxy of the held-out half of `_s` (issue 24): questions nothing here was fitted on.

    python -m research.retrieval_heldout_proxy --out runs/heldout_proxy [--seed 0]

The `_s` haystacks of the held-out half are not in this checkout, but their questions are: the oracle file holds
all 500 questions with their evidence sessions (`has_answer` turns labelled). The proxy gives each held-out
question (oracle, five types other than single-session-user, not in `longmemeval_s_dev`, answerable) a haystack
made the way LongMemEval made `_s`, from pieces that are all in this checkout:

- its own evidence sessions from the oracle file (ids, dates and turns unchanged);
- filler sessions drawn without replacement from the pool of every `_s` development haystack session that is no
  question's evidence session (`answer_session_ids` of all 500 oracle questions; 8,859 sessions of ShareGPT,
  UltraChat and simulated user chats; their `has_answer` flags, all false there, are dropped), so many that the
  haystack has as many sessions as a development question of the same type drawn at random;
- the evidence sessions placed at random positions among the filler, in their own order (the development
  haystacks are in date order in only 109 of 215 cases, so no order is imposed).

Every draw is `random.Random(f"{seed}:{question_id}")`, fixed before the first run. The construction reads no
retrieval result; the presets are measured once, as `research.retrieval_fold_fit` measures them (question as the
query, top_k 10 for the ranking, the model-like call for the response), and reported per type beside `bm25`,
native and cut to each preset's own per-case response size. Nothing is chosen on these figures.

The proxy is not the held-out half: its filler is other questions' filler and its dates are the sessions' own.
The check that it behaves like it: `bm25` is a fixed preset, and the issue measured it on the real held-out half
(recall_any@5 / evidence: knowledge-update 0.946 / 0.973, multi-session 0.828 / 0.776, single-session-assistant
0.875 / 0.938, single-session-preference 0.400 / 0.533, temporal-reasoning 0.712 / 0.678); printed beside.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.data.longmemeval import find_local, parse_cases, read_json_bytes
from harness.retrieval.config import preset, preset_node, recall_cue
from harness.retrieval.folds import assign_folds
from harness.session.tokens import o200k_counter
from research.retrieval_fold_fit import (
    by_type,
    key,
    load_cases,
    measure,
    measured,
    name_of,
    shortfalls,
    study_args,
    write_outputs,
)

SSU = "single-session-user"
# What the issue measured on the real held-out half (bm25 preset): recall_any@5, evidence in the response.
ISSUE_BM25 = {
    "knowledge-update": (0.946, 0.973),
    "multi-session": (0.828, 0.776),
    "single-session-assistant": (0.875, 0.938),
    "single-session-preference": (0.400, 0.533),
    "temporal-reasoning": (0.712, 0.678),
}
# The presets (and candidates of docs/retrieval.md) measured: name -> (preset, overrides). The kept tables
# (docs/measurements/retrieval_heldout_proxy*.md) also have a "rescore candidate" row: its settings (session_rescore,
# query_term_weight) were removed from the retriever, not adopted; that row runs at commit f86b023 (research/README.md).
SETTINGS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("default", {}),
    "default without recall cues": ("default", {"recall_cues": False}),
    "speaker_neutral": ("speaker_neutral", {}),
}


def load_file(name: str) -> list[dict[str, Any]]:
    path = find_local(name)
    if path is None:
        raise SystemExit(f"{name}: not found (set LME_DATA_DIR to the folder holding the LongMemEval files)")
    rows: list[dict[str, Any]] = json.loads(read_json_bytes(path))
    return rows


def build_proxy(
    oracle: list[dict[str, Any]], dev: list[dict[str, Any]], seed: int, questions: str = "heldout"
) -> list[dict[str, Any]]:
    """The held-out questions (`questions="dev"`: the development half's, a control) with proxy `_s` haystacks
    (LongMemEval rows), as the module docstring says."""
    dev_ids = {q["question_id"] for q in dev}
    evidence_ids = {sid for q in oracle for sid in q["answer_session_ids"]}
    pool: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for q in dev:
        for sid, date, turns in zip(q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"]):
            if sid not in evidence_ids:
                pool[sid] = (date, [{"role": t["role"], "content": t["content"]} for t in turns])
    pool_ids = sorted(pool)
    sizes: dict[str, list[int]] = defaultdict(list)
    for q in dev:
        sizes[q["question_type"]].append(len(q["haystack_sessions"]))
    out = []
    for q in oracle:
        if (q["question_id"] in dev_ids) != (questions == "dev") or q["question_type"] == SSU:
            continue
        rng = random.Random(f"{seed}:{q['question_id']}")
        total = rng.choice(sorted(sizes[q["question_type"]]))
        own = list(zip(q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"]))
        filler = [(sid, *pool[sid]) for sid in rng.sample(pool_ids, max(0, total - len(own)))]
        slots = sorted(rng.sample(range(len(filler) + len(own)), len(own)))
        sessions, it_own, it_fill = [], iter(own), iter(filler)
        for k in range(len(filler) + len(own)):
            sessions.append(next(it_own) if k in slots else next(it_fill))
        out.append(
            {
                **{k: q[k] for k in ("question_id", "question_type", "question", "answer", "question_date")},
                "answer_session_ids": q["answer_session_ids"],
                "haystack_session_ids": [s[0] for s in sessions],
                "haystack_dates": [s[1] for s in sessions],
                "haystack_sessions": [s[2] for s in sessions],
            }
        )
    return out


def proxy_cases(seed: int, questions: str = "heldout") -> tuple[list[dict[str, Any]], list[tuple[str, str, str, list]]]:
    """(the proxy's LongMemEval rows, its answerable cases as `research.retrieval_fold_fit` measures them)."""
    rows = build_proxy(load_file("longmemeval_oracle.json.gz"), load_file("longmemeval_s_dev.json.gz"), seed, questions)
    cases = [
        (c.question_id, c.question_type, c.question, c.events())
        for c in parse_cases(json.dumps(rows).encode(), f"proxy of the {questions} questions")
        if not c.is_abstention and c.has_evidence_label
    ]
    return rows, cases


def fit_and_unseen(store: str) -> tuple[list[tuple[str, str, str, list]], dict[str, str], dict[str, Any]]:
    """The protocol of the studies fitted against the proxy: every development question and the held-out proxy (seed
    0); each question's role ("fit": the development questions and proxy fold A; "unseen": proxy fold B); and every
    case's index, built by the default preset in `store`."""
    dev = load_cases()
    _, proxy = proxy_cases(0)
    proxy_folds = assign_folds((qid, qt) for qid, qt, _, _ in proxy)
    role = {qid: "fit" for qid, _, _, _ in dev} | {
        qid: "fit" if proxy_folds[qid] == "A" else "unseen" for qid, _, _, _ in proxy
    }
    cases = dev + proxy
    retr = instantiate(OmegaConf.merge(preset_node("default"), {"store": store}))
    return cases, role, {qid: retr.index(ev) for qid, _, _, ev in cases}


def figures(v: dict[str, float]) -> str:
    """One `by_type` entry as two table cells: the setting's @1 / @5 / evidence / tokens, then bm25's with its
    evidence at the setting's budget in bold."""
    return (
        f"{v['r1']:.3f} / {v['r5']:.3f} / {v['ev']:.3f} / {v['tok']:,.0f} | {v['bm25_r1']:.3f} / {v['bm25_r5']:.3f} / "
        f"{v['bm25_ev']:.3f} / **{v['bm25_ev_budget']:.3f}** / {v['bm25_tok']:,.0f}"
    )


def fit_report(rows: dict[str, list], bm25_rows: list, role: dict[str, str]) -> dict[str, Any]:
    """The fit studies' report: each setting's per-type tables on the fit data and the unseen fold (against `bm25`),
    the settings in the rule's order on the fit data (`key`), the pick, and each setting's pairs below `bm25`."""
    tables = {
        w: {part: {t: v for t, v in by_type(r, bm25_rows, role, part).items() if v["n"]} for part in ("fit", "unseen")}
        for w, r in rows.items()
    }
    ranked = sorted(tables, key=lambda w: key(tables[w]["fit"]), reverse=True)
    return {
        "grid": list(rows),
        "chosen": ranked[0],
        "fit_order": ranked,
        "fit_cases": sum(v == "fit" for v in role.values()),
        "unseen_cases": sum(v == "unseen" for v in role.values()),
        "tables": tables,
        "shortfalls": {w: {p: shortfalls(t[p]) for p in t} for w, t in tables.items()},
    }


def fit_grid(
    doc: str | None, default_out: str, stem: str, title: str, grid: dict[str, list[Any]], shipped: dict
) -> None:
    """Measure every setting of `grid` (the default preset with those settings) and `bm25` on the fit data and the
    unseen fold, pick one by the rule on the fit data, and write `stem`.json / .md in --out: every setting's pairs
    below `bm25` on both parts, and per-type tables for the shipped default (`shipped`), the pick and the next four.
    Per-case rows are cached in --out/grid_cases.jsonl (a rerun measures only new settings)."""
    out, store = study_args(doc, default_out)
    cases, role, indexes = fit_and_unseen(store)  # "fit": development and proxy fold A; "unseen": proxy fold B
    settings = [dict(zip(grid, v)) for v in itertools.product(*grid.values())]
    todo = [("bm25", preset("bm25"))] + [(name_of(s), preset("default", **s)) for s in settings]
    rows = measured(out, todo, cases, indexes, o200k_counter())
    report = fit_report({name_of(s): rows[name_of(s)] for s in settings}, rows["bm25"], role)
    tables, ranked, pick = report["tables"], report["fit_order"], report["chosen"]
    lines = [
        f"# {title} fitted on {report['fit_cases']} questions, reported on {report['unseen_cases']}",
        "",
        f"Chosen on the fit data: {pick}",
        "",
        "Every setting in fit order: (type, metric) pairs below bm25 (fit / unseen); mean tokens (fit / unseen)",
        "",
        "| setting | below bm25, fit | below bm25, unseen | tokens, fit | tokens, unseen |",
        "|---|---|---|---|---|",
    ]
    for w in ranked:
        s, t = report["shortfalls"][w], tables[w]
        tok = {p: sum(v["tok"] * v["n"] for v in t[p].values()) / sum(v["n"] for v in t[p].values()) for p in t}
        lines.append(f"| {w} | {s['fit']} | {s['unseen']} | {tok['fit']:,.0f} | {tok['unseen']:,.0f} |")
    lines += [
        "",
        "Per type: the shipped default, the pick and the next four on the fit data",
        "",
        "| setting | part | type | n | @1 / @5 / evidence / tokens | bm25 @1 / @5 / evidence / at budget / tokens |",
        "|---|---|---|---|---|---|",
    ]
    for w in dict.fromkeys([name_of(shipped)] + ranked[:5]):
        for part, tab in tables[w].items():
            for typ, v in tab.items():
                lines.append(f"| {w} | {part} | {typ} | {v['n']} | {figures(v)} |")
    write_outputs(out, stem, report, lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/heldout_proxy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--questions", choices=("heldout", "dev"), default="heldout", help="dev: the control")
    ap.add_argument("--store", default="/tmp/lme-retrieval-heldout-proxy.sqlite", help="index cache (SQLite)")
    ap.add_argument(
        "--write-dataset",
        metavar="PATH",
        help="only write the proxy as a LongMemEval file (gzip JSON) for `lme-harness retrieval-eval dataset.path=PATH`",
    )
    args = ap.parse_args()
    rows, cases = proxy_cases(args.seed, args.questions)
    if args.write_dataset:
        Path(args.write_dataset).write_bytes(gzip.compress(json.dumps(rows).encode(), mtime=0))
        print(f"{args.write_dataset}: {len(rows)} questions, {len(cases)} answerable", flush=True)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"proxy of the {args.questions} questions: {len(rows)}, {len(cases)} answerable", flush=True)
    retr = instantiate(OmegaConf.merge(preset_node("default"), {"store": args.store}))
    indexes = {qid: retr.index(ev) for qid, _, _, ev in cases}
    counter = o200k_counter()
    folds = {qid: "H" for qid, _, _, _ in cases}
    base = measure(preset("bm25"), cases, indexes, counter)
    report: dict[str, Any] = {
        "questions_of": args.questions,
        "seed": args.seed,
        "questions": len(rows),
        "answerable": len(cases),
        "settings": {},
    }
    report["bm25"] = by_type(base, base, folds, "H")
    cue: dict[str, int] = defaultdict(int)
    for _, qt, q, _ in cases:
        cue[qt] += recall_cue(q)
    report["recall_cue_fires"] = dict(cue)
    lines = [f"# Proxy of the {args.questions} questions (seed {args.seed}): {len(cases)} answerable", ""]
    against = (
        "the issue's real held-out half" if args.questions == "heldout" else "(other questions) the issue's held-out"
    )
    lines += [f"bm25 here vs {against} (@5 / evidence):", ""]
    for t, v in report["bm25"].items():
        lines.append(
            f"- {t} (n={v['n']}): {v['r5']:.3f} / {v['ev']:.3f}; issue {ISSUE_BM25[t][0]} / {ISSUE_BM25[t][1]}"
        )
    lines += ["", "| setting | type | n | @1 / @5 / evidence / tokens | bm25 @1 / @5 / evidence / at budget / tokens |"]
    lines += ["|---|---|---|---|---|"]
    for name, (pre, over) in SETTINGS.items():
        rows_s = measure(preset(pre, **over), cases, indexes, counter)
        table = by_type(rows_s, base, folds, "H")
        report["settings"][name] = {"table": table, "shortfalls": shortfalls(table), "rows": rows_s}
        for t, v in table.items():
            lines.append(f"| {name} | {t} | {v['n']} | {figures(v)} |")
        print("measured", name, flush=True)
    lines += ["", "(type, metric) pairs below bm25 (@5, evidence, evidence at the setting's budget):", ""]
    lines += [f"- {n}: {s['shortfalls']}" for n, s in report["settings"].items()]
    lines += ["", f"recall cue fires (answerable questions): {dict(cue)}"]
    report["bm25_rows"] = base
    write_outputs(out, "heldout_proxy", report, lines)


if __name__ == "__main__":
    main()
