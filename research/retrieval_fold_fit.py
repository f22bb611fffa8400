"""Fit the default retriever's ranking on one fold and report the other (issue 24).

    python -m research.retrieval_fold_fit --out runs/fold_fit          # grid over every case, then both fits

Cases: the answerable questions of `longmemeval_s_dev` (5 types) and of `dataset=s` (single-session-user), split
into folds A and B by `harness.retrieval.folds` (stratified by type, by sha256 of the question id). Every setting
of the grid (on top of the `default` preset) is measured on every case once, as `lme-harness retrieval-eval`
measures it: the question as the query, top_k 10 for the ranking, the model-like call for the response. Then,
for each fold F, the selection rule below picks one setting using fold F's rows only and the other fold is
reported; the grid never sees which fold it is judged on.

Selection rule (fixed before the first run):
 (1) single-session-user response tokens mean ≤ 450;
 (2) fewest (type, metric) pairs below `bm25` for recall_any@5, evidence in the response (native) and evidence
     in the response cut to the setting's own per-case response size (budget-matched);
 (3) highest mean over types of @5 + native evidence; (4) highest mean @1; (5) fewest response tokens.
The question type only groups the figures; the retriever never sees it.

The grid measured when the default was chosen (docs/design/retrieval.md) also held two knobs since removed from the
retriever, measured and adopted by no preset (issue 39): the turn-pair credit question→reply (`propagate_back`:
0.0 / 0.5 / 1.0) and a recency weight (`recency`: 0.0 / 0.1), with a knowledge-update fit of the recency weight.
That full grid runs at commit e9dfdf3 (research/README.md, "Retired studies").
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness import config_files
from harness.retrieval.config import preset, preset_node
from harness.retrieval.evaluation import case_metrics, evidence_tokens, hidden_session
from harness.retrieval.folds import assign_folds
from harness.retrieval.tools import SessionTools
from harness.session.tokens import o200k_counter

# Mechanisms measured (each on or off, or a strength): phrasing-dependent recall cues; the speaker prior
# (assistant × 0.5 for first-person/neutral queries, or neutral 1.0); reply→question propagation.
GRID: dict[str, list[Any]] = {
    "recall_cues": [True, False],
    "assistant_weight": [0.5, 1.0],
    "propagate": [0.5, 0.0],
}
# Phrasing-independent candidates with more room for whole replies in the response (no recall cue, so no
# recall budget): top hits whole.
GRID_NO_CUE: dict[str, list[Any]] = {
    "recall_cues": [False],
    "assistant_weight": [0.5],
    "propagate": [0.5, 0.0],
    "top_hits": [2, 3],
    "top_hit_chars": [3000, 4000],
}
TYPES_SSU = "single-session-user"


def load_cases() -> list[tuple[str, str, str, list]]:
    out = []
    for ds in ("s_dev", "s"):
        cases, _ = instantiate(OmegaConf.load(config_files.CONFIG_DIR / "dataset" / f"{ds}.yaml")).load()
        out += [
            (c.question_id, c.question_type, c.question, c.events())
            for c in cases
            if not c.is_abstention and c.has_evidence_label
        ]
    return out


def measure(cfg, cases, indexes, counter) -> list[dict[str, Any]]:
    rows = []
    for qid, qt, q, ev in cases:
        session, boundary = hidden_session(qid, ev)
        t = SessionTools(session, indexes[qid], boundary=boundary, config=cfg)
        ranked = [h["event_id"] for h in t.call("session_search", {"query": q, "top_k": 10}).trace.get("hits", [])]
        m = case_metrics(ranked, ev, (1, 5))
        d = t.call("session_search", json.dumps({"query": q, "scope": "current_hidden"}))
        rows.append(
            {
                "qid": qid,
                "type": qt,
                "r1": m["turn_recall_any@1"],
                "r5": m["turn_recall_any@5"],
                "tok": counter.count(d.content),
                "ev_tok": evidence_tokens(d.content, ev, counter),
            }
        )
    return rows


def by_type(rows, base_rows, folds, fold) -> dict[str, dict[str, float]]:
    """Per type on `fold`: @1, @5, native evidence, budget-matched evidence (every response cut to this
    setting's per-case size), tokens; and bm25's @5 / native / budget-matched figures beside them."""
    base = {r["qid"]: r for r in base_rows}
    out: dict[str, dict[str, float]] = {}
    for t in sorted({r["type"] for r in rows}):
        rr = [r for r in rows if r["type"] == t and folds[r["qid"]] == fold]
        bb = [base[r["qid"]] for r in rr]

        def ev(r, budget=None):
            return float(r["ev_tok"] is not None and (budget is None or r["ev_tok"] <= budget))

        out[t] = {
            "n": len(rr),
            "r1": float(np.mean([r["r1"] for r in rr])),
            "r5": float(np.mean([r["r5"] for r in rr])),
            "ev": float(np.mean([ev(r) for r in rr])),
            "tok": float(np.mean([r["tok"] for r in rr])),
            "bm25_r1": float(np.mean([b["r1"] for b in bb])),
            "bm25_r5": float(np.mean([b["r5"] for b in bb])),
            "bm25_ev": float(np.mean([ev(b) for b in bb])),
            "bm25_ev_budget": float(np.mean([ev(b, r["tok"]) for b, r in zip(bb, rr)])),
            "bm25_tok": float(np.mean([b["tok"] for b in bb])),
        }
    return out


def shortfalls(t: dict[str, dict[str, float]]) -> int:
    return sum(
        (v["r5"] < v["bm25_r5"] - 1e-9) + (v["ev"] < v["bm25_ev"] - 1e-9) + (v["ev"] < v["bm25_ev_budget"] - 1e-9)
        for v in t.values()
    )


def key(t: dict[str, dict[str, float]]) -> tuple:
    return (
        t[TYPES_SSU]["tok"] <= 450,
        -shortfalls(t),
        float(np.mean([v["r5"] + v["ev"] for v in t.values()])),
        float(np.mean([v["r1"] for v in t.values()])),
        -float(np.mean([v["tok"] for v in t.values()])),
    )


def name_of(s: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in s.items())


def rank(rows: dict[str, list], pool: list[dict[str, Any]], folds, fold: str) -> list[tuple[tuple, str]]:
    """Every setting of `pool` by the selection rule on `fold`'s rows, best first: (rule key, setting name)."""
    return sorted(((key(by_type(rows[name_of(s)], rows["bm25"], folds, fold)), name_of(s)) for s in pool), reverse=True)


def one_knob_changed(pick: dict[str, Any], grid: dict[str, list[Any]]) -> dict[str, str]:
    """ "knob=value" -> the name of `pick` with that one knob of `grid` set to that other value."""
    return {f"{k}={v}": name_of(dict(pick, **{k: v})) for k, values in grid.items() for v in values if v != pick[k]}


def write_outputs(out: Path, stem: str, report: dict[str, Any], lines: list[str]) -> None:
    """A fold-fit study's outputs: `<stem>.json` (the report), `<stem>.md` (its lines, also printed)."""
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def measured(out: Path, todo: list[tuple[str, Any]], cases, indexes, counter) -> dict[str, list]:
    """Each setting's per-case rows: read back from `out`/grid_cases.jsonl where an earlier run measured it, else
    measured now and appended there as soon as it is done (a rerun measures only what is new)."""
    cache = out / "grid_cases.jsonl"
    rows: dict[str, list] = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            r = json.loads(line)
            rows[r["setting"]] = r["rows"]
    with cache.open("a") as f:
        for name, cfg in todo:
            if name in rows:
                continue
            rows[name] = measure(cfg, cases, indexes, counter)
            f.write(json.dumps({"setting": name, "rows": rows[name]}) + "\n")
            f.flush()
            print("measured", name, flush=True)
    return rows


def fit_on(
    rows: dict[str, list], settings: list[dict[str, Any]], grid: dict[str, list[Any]], folds, fit: str, held: str
):
    """One fit: the setting the rule picks from fold `fit`'s rows only, its figures on both folds, and on the held
    fold each mechanism's effect (the chosen setting with one knob of `grid` changed)."""

    def table(name: str, fold: str) -> dict[str, dict[str, float]]:
        return by_type(rows[name], rows["bm25"], folds, fold)

    scored = rank(rows, settings, folds, fit)
    chosen = scored[0][1]
    pick = next(s for s in settings if name_of(s) == chosen)
    effects: dict[str, dict[str, Any]] = {
        change: {"unseen": table(alt, held), "shortfalls": shortfalls(table(alt, held))}
        for change, alt in one_knob_changed(pick, grid).items()
    }
    return {
        "chosen": chosen,
        "fit_shortfalls": shortfalls(table(chosen, fit)),
        "unseen_shortfalls": shortfalls(table(chosen, held)),
        "fit": table(chosen, fit),
        "unseen": table(chosen, held),
        "top5_on_fit": [n for _, n in scored[:5]],
        "one_knob_changed_unseen": effects,
    }


def study_args(description: str | None, out: str) -> tuple[Path, str]:
    """(--out folder, created; --store) of a fold-fit study's command line."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=out)
    ap.add_argument("--store", default="/tmp/lme-retrieval-fold-fit.sqlite", help="index cache (SQLite)")
    args = ap.parse_args()
    path = Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    return path, args.store


def prepare(store: str) -> tuple[list, dict[str, str], dict[str, Any], Any]:
    """(cases, their folds, each case's index under the default retriever, the token counter)."""
    cases = load_cases()
    folds = assign_folds((qid, qt) for qid, qt, _, _ in cases)
    rcfg = OmegaConf.merge(preset_node("default"), {"store": store})
    retr = instantiate(rcfg)
    indexes = {qid: retr.index(ev) for qid, _, _, ev in cases}  # kept in memory: every setting reuses them
    return cases, folds, indexes, o200k_counter()


def main() -> None:
    out, store = study_args(__doc__, "runs/fold_fit")
    cases, folds, indexes, counter = prepare(store)
    settings = [dict(zip(GRID, v)) for v in itertools.product(*GRID.values())]
    extra = [dict(zip(GRID_NO_CUE, v)) for v in itertools.product(*GRID_NO_CUE.values())]
    extra = [s for s in extra if (s["top_hits"], s["top_hit_chars"]) != (2, 3000)]  # = a GRID setting
    todo = [("bm25", preset("bm25"))] + [(name_of(s), preset("default", **s)) for s in settings + extra]
    done = measured(out, todo, cases, indexes, counter)
    report: dict[str, Any] = {"folds": {}, "settings": [name_of(s) for s in settings + extra]}
    # Twice: over every setting, and over the phrasing-independent ones only (no recall cue).
    pools = {"": settings + extra, " no-cue": [s for s in settings + extra if not s["recall_cues"]]}
    for (fit, held), (label, pool) in itertools.product((("A", "B"), ("B", "A")), pools.items()):
        scored = rank(done, pool, folds, fit)
        best = scored[0][1]
        report["folds"][f"{fit}->{held}{label}"] = {
            "chosen": best,
            "fit": by_type(done[best], done["bm25"], folds, fit),
            "unseen": by_type(done[best], done["bm25"], folds, held),
            "unseen_shortfalls": shortfalls(by_type(done[best], done["bm25"], folds, held)),
            "top5_on_fit": [n for _, n in scored[:5]],
        }
    # Each mechanism's effect on the unseen fold: the chosen setting with that one knob changed.
    for direction, r in report["folds"].items():
        held = direction.split(" ")[0][-1]
        chosen = next(s for s in settings + extra if name_of(s) == r["chosen"])
        if set(chosen) != set(GRID):
            continue
        r["one_knob_changed_unseen"] = {
            change: by_type(done[name], done["bm25"], folds, held)
            for change, name in one_knob_changed(chosen, GRID).items()
        }
    (out / "fold_fit.json").write_text(json.dumps(report, indent=1))
    for direction, r in report["folds"].items():
        print(f"== fit {direction}: {r['chosen']}  (unseen shortfalls vs bm25: {r['unseen_shortfalls']})")
        for part in ("fit", "unseen"):
            for t, v in r[part].items():
                print(
                    f"  {part:6s} {t:26s} n={v['n']:3d} @1 {v['r1']:.3f} (bm25 {v['bm25_r1']:.3f}) "
                    f"@5 {v['r5']:.3f} ({v['bm25_r5']:.3f}) ev {v['ev']:.3f} ({v['bm25_ev']:.3f}, "
                    f"at budget {v['bm25_ev_budget']:.3f}) tok {v['tok']:.0f} ({v['bm25_tok']:.0f})"
                )


if __name__ == "__main__":
    main()
