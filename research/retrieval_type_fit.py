"""How the default's type-robustness settings were chosen (issue 15 item 3): a grid on one fold of LongMemEval_s.

    python -m research.retrieval_type_fit 0     # the grid on fold 0 (then: 1); ~5 min per fold on 2 idle cores

Cases: the answerable questions of `longmemeval_s_dev` (5 types) and the 64 answerable single-session-user
ones (`dataset=s`, shown as `ssu70`), each in fold sha256(question_id)[0] % 2. For every setting of the grid
(recall cues on/off, recall_chars, top_hit_chars/top_hits, on top of the `default` preset) it prints, per
fold, how many (type, metric) pairs fall below the plain `bm25` preset for turn recall_any@5 and evidence text
in the response, measured as `lme-harness retrieval-eval` does (the question as the query, top_k 10 for the
ranking, the model-like default call for the response). Selection rule, fixed before the first run:
(1) single-session-user response tokens mean ≤ 450, (2) fewest pairs below bm25, (3) highest mean over types
of @5 + evidence, (4) fewest response tokens mean over the fold. The question type only groups the figures;
the retriever never sees it. Indexes are built once into --store (default retriever: BM25 + static embedder).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import sys

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.config_files import CONFIG_DIR
from harness.retrieval.config import preset, preset_node
from harness.retrieval.evaluation import case_metrics, evidence_in_response, hidden_session
from harness.retrieval.tools import SessionTools
from harness.session.tokens import o200k_counter


def load(name):
    cases, _ = instantiate(OmegaConf.load(CONFIG_DIR / f"dataset/{name}.yaml")).load()
    return [c for c in cases if not c.is_abstention and c.has_evidence_label]


def split(qid):  # the fold of a question: 0 or 1
    return hashlib.sha256(qid.encode()).digest()[0] % 2


STORE = os.environ.get("LME_TYPE_FIT_STORE", "/tmp/lme-retrieval-type-fit.sqlite")


@functools.cache
def prepared():
    """(retriever, cases, token counter), built on first use: importing the module loads nothing."""
    rcfg = OmegaConf.merge(preset_node("default"), {"store": STORE})
    cases = []
    for ds in ("s_dev", "s"):
        for c in load(ds):
            cases.append((ds, c.question_type, c.question_id, c.question, c.events()))
    return instantiate(rcfg), cases, o200k_counter()


def run(cfg, subset=None, tokens=True):
    retr, cases, counter = prepared()
    out = []
    for ds, qt, qid, q, ev in cases:
        if subset is not None and split(qid) != subset:
            continue
        session, boundary = hidden_session(qid, ev)
        t = SessionTools(session, retr.index(ev), boundary=boundary, config=cfg)
        o = t.call("session_search", {"query": q, "top_k": 10})
        ranked = [h["event_id"] for h in o.trace.get("hits", [])]
        m = case_metrics(ranked, ev, (1, 5))
        d = t.call("session_search", json.dumps({"query": q, "scope": "current_hidden"}))
        full, _ = evidence_in_response(d.content, ev)
        out.append(
            dict(
                ds=ds,
                qt=qt if ds == "s_dev" else "ssu70",
                qid=qid,
                r1=m["turn_recall_any@1"],
                r5=m["turn_recall_any@5"],
                ev=float(full),
                tok=counter.count(d.content) if tokens else 0,
                ranked=ranked,
            )
        )
    return out


def table(rows):
    res = {}
    for t in sorted({r["qt"] for r in rows}):
        rr = [r for r in rows if r["qt"] == t]
        res[t] = (
            len(rr),
            np.mean([r["r1"] for r in rr]),
            np.mean([r["r5"] for r in rr]),
            np.mean([r["ev"] for r in rr]),
            np.mean([r["tok"] for r in rr]),
        )
    return res


def show(name, res, base=None):
    print(f"== {name}")
    for t, (n, r1, r5, ev, tok) in res.items():
        flag = ""
        if base:
            b = base[t]
            flag = ("  r5<" if r5 < b[2] - 1e-9 else "") + ("  ev<" if ev < b[3] - 1e-9 else "")
        print(f"  {t:28s} n={n:3d} @1 {r1:.3f} @5 {r5:.3f} ev {ev:.3f} tok {tok:5.0f}{flag}")


def main(subset: int) -> None:
    bm = table(run(preset("bm25"), subset=subset, tokens=False))
    show(f"bm25 split {subset}", bm)
    results = []
    for cue, rc, (thc, th) in itertools.product([False, True], [None, 2000, 4000], [(None, 1), (3000, 1), (3000, 2)]):
        if rc and not cue:
            continue
        rows = run(preset("default", recall_cues=cue, recall_chars=rc, top_hit_chars=thc, top_hits=th), subset=subset)
        t = table(rows)
        short = sum((t[k][2] < bm[k][2] - 1e-9) + (t[k][3] < bm[k][3] - 1e-9) for k in t)
        qual = np.mean([t[k][2] + t[k][3] for k in t])
        tok_all = np.mean([r["tok"] for r in rows])
        key = (t["ssu70"][4] <= 450, -short, qual, -tok_all)
        name = f"cue={cue} recall_chars={rc} top_hit_chars={thc} top_hits={th}"
        results.append((key, name, t))
        print(
            name,
            "shortfalls",
            short,
            f"qual {qual:.4f}",
            f"tok_all {tok_all:.0f}",
            f"ssu tok {t['ssu70'][4]:.0f}",
            flush=True,
        )
    results.sort(key=lambda x: x[0], reverse=True)
    print("BEST", results[0][1])
    show(results[0][1], results[0][2], bm)


if __name__ == "__main__":
    main(int(sys.argv[1]))
