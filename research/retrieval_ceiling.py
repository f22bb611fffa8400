"""How far do cheap ranking signals take turn recall_any@1? (issue 4 asks ≥ 0.85; the default gives 0.812)

    python -m research.retrieval_ceiling --out runs/retrieval_ceiling            # ~1 min on 2 cores
    python -m research.retrieval_ceiling --llm-rerank qwen25_coder_15b           # + a local LLM reranker (~5 min)

For the 64 answerable LongMemEval_s single-session-user cases, with the question as the query over the whole
haystack (as `lme-harness retrieval-eval` does), it scores every turn once with the default preset's parts
(BM25, static-embedding cosine, speaker prior, reply propagation) and then measures @1/@3/@5 for:

1. the shipped default, recomputed here and checked against `evaluate_case` (the retrieval-eval path);
2. a grid over the default's knobs: fusion weight, reply propagation, assistant weight, BM25 k1/b (400 settings);
3. an answer-type bonus (the classic QA cue: a "how long" question wants a duration, "who" a name, ...);
4. static token-level MaxSim (soft lexical matching through the model2vec token vectors), and BM25 re-scored
   inside the top session with that session's own IDF (topic words shared by the whole session weigh less);
5. a logistic-regression reranker over 12 features of the top 20 turns, in-sample (fit and scored on the same
   64 cases: an optimistic ceiling) and leave-one-case-out;
6. optionally, a local LLM as a listwise reranker of the top 3 (through the project's client layer and the
   embedded llama.cpp server), which is also what a reader-based reranker costs in latency on these CPUs.

Every row is tuned on the evaluation cases themselves (no held-out split exists for this question type), so
each is an upper bound for its family. Writes retrieval_ceiling.{md,json} to --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.config_files import CONFIG_DIR
from harness.retrieval.config import preset_node

KS = (1, 3, 5)
BM25_PARAMS = ((1.5, 0.75), (0.9, 0.9), (1.2, 0.5), (2.0, 0.9))


# --- per-case signals, computed once -------------------------------------------------------------------------
def case_signals(retriever, case) -> dict[str, Any]:
    from harness.retrieval.keyword import KeywordIndex

    events = case.events()
    index = retriever.index(events)
    q = case.question
    docs = index.docs
    sig: dict[str, Any] = {
        "qid": case.question_id,
        "q": q,
        "index": index,
        "texts": [d.text for d in docs],
        "roles": index._roles,
        "ts": index.timestamps,
        "nxt": index._next_reply,
        "evidence": np.array([events[d.position].has_answer for d in docs]),
        "sessions": [events[d.position].source_session for d in docs],
        "cos": np.clip(index.dense_scores(q).astype(np.float64), 0.0, None),
        "kw": {},
    }
    for k1, b in BM25_PARAMS:  # the first is the shipped setting: the index's own BM25
        keyword = index.keyword if (k1, b) == BM25_PARAMS[0] else KeywordIndex(index.doc_tokens, k1=k1, b=b)
        kw = keyword.scores(q)[0].astype(np.float64)
        sig["kw"][(k1, b)] = kw / kw.max() if kw.max() > 0 else kw
    return sig


def fused(sig, *, alpha=1.0, propagate=0.5, assistant_weight=0.5, bm25=(1.5, 0.75)) -> np.ndarray:
    """The default preset's score: BM25/max + alpha·cos, reply propagation, speaker prior (project functions)."""
    scores = sig["kw"][bm25] + alpha * sig["cos"]
    return sig["index"].apply_priors(scores, user_weight=1.0, assistant_weight=assistant_weight, propagate=propagate)


def order_of(sig, scores: np.ndarray) -> np.ndarray:
    return np.lexsort((-sig["ts"], -scores))  # best first, ties newer first (as the tools rank)


def recall(sigs, score_fn: Callable[[dict], np.ndarray]) -> dict[str, float]:
    hits = {k: 0 for k in KS}
    for sig in sigs:
        order = order_of(sig, score_fn(sig))
        for k in KS:
            hits[k] += bool(sig["evidence"][order[:k]].any())
    return {f"@{k}": round(hits[k] / len(sigs), 3) for k in KS}


# --- 3. answer-type cue ------------------------------------------------------------------------------------------
_NUM = r"(?:\d+(?:[.,]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|twenty|thirty|a few|a couple|several|half)"
_UNIT = r"(?:minutes?|hours?|days?|weeks?|months?|years?|times?|miles?|pounds?|dollars?|percent|pages?|people|sessions?|classes?)"
QUANTITY = re.compile(rf"\b{_NUM}[\s-]+{_UNIT}\b|\$\s?\d", re.I)
DATE = re.compile(
    r"\b(?:january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|christmas|thanksgiving|easter|"
    r"halloween|valentine's day)\b|\b\d{1,2}(?:st|nd|rd|th)\b|\b(?:19|20)\d\d\b",
    re.I,
)
_COMMON_CAPS = {
    "i",
    "i'm",
    "i've",
    "i'd",
    "i'll",
    "by",
    "the",
    "a",
    "an",
    "it",
    "my",
    "and",
    "but",
    "so",
    "also",
    "thanks",
    "yes",
    "oh",
    "well",
    "actually",
    "what",
    "how",
    "can",
    "do",
    "that",
    "this",
    "speaking",
}


def answer_type(question: str) -> str:
    ql = question.lower()
    if re.search(r"\bhow (long|many|much|often|far|old)\b", ql):
        return "quantity"
    if re.search(r"\b(when|what date|what day|which day|what year|what month|what time)\b", ql):
        return "date"
    return "name"  # who / where / what X: a proper name or title, mostly


def has_answer_type(text: str, question: str, kind: str) -> bool:
    ql = question.lower()
    pattern = {"quantity": QUANTITY, "date": DATE}.get(kind)
    if pattern is not None:
        return any(m.group(0).lower() not in ql for m in pattern.finditer(text))
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        for i, word in enumerate(sentence.split()):
            w = word.strip("\"'“”‘’()[],.!?:;")
            if i and w[:1].isupper() and w.lower() not in _COMMON_CAPS and w.lower() not in ql:
                return True
    return bool(re.search(r"[\"“][^\"”]{2,80}[\"”]", text))


def answer_type_bonus(beta: float, top: int = 10) -> Callable[[dict], np.ndarray]:
    def score(sig):
        s = fused(sig).copy()
        kind = answer_type(sig["q"])
        for i in order_of(sig, s)[:top]:
            if has_answer_type(sig["texts"][i], sig["q"], kind):
                s[i] *= 1 + beta
        return s

    return score


# --- 4. static token MaxSim --------------------------------------------------------------------------------------
def add_maxsim(sigs, model) -> None:
    from harness.retrieval.keyword import STOPWORDS

    table = model.embedding.astype(np.float32)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-9)
    stop = STOPWORDS["snowball"] | {"did", "name", "long", "many", "much"}

    def ids(text: str) -> np.ndarray:
        words = [w for w in re.findall(r"\w+", text.lower()) if w not in stop]
        enc = model.tokenizer.encode(" ".join(words), add_special_tokens=False) if words else None
        return np.unique(np.array(enc.ids, dtype=int)) if enc and enc.ids else np.zeros(0, int)

    for sig in sigs:
        doc_ids = [ids(t) for t in sig["texts"]]
        df: dict[int, int] = {}
        for d in doc_ids:
            for i in d:
                df[int(i)] = df.get(int(i), 0) + 1
        n, q = len(doc_ids), ids(sig["q"])
        idf = np.array([np.log(1 + (n - df.get(int(i), 0) + 0.5) / (df.get(int(i), 0) + 0.5)) for i in q])
        qv = table[q]
        sig["maxsim"] = np.array(
            [
                float((idf * (qv @ table[d].T).max(axis=1)).sum() / max(idf.sum(), 1e-9)) if len(d) and len(q) else 0.0
                for d in doc_ids
            ]
        )


def session_local_bm25(weight: float) -> Callable[[dict], np.ndarray]:
    """Add `weight` x BM25 over the user turns of the top-ranked session, with IDF from that session alone."""
    from harness.retrieval.keyword import KeywordIndex

    def score(sig):
        s = fused(sig)
        top_session = sig["sessions"][order_of(sig, s)[0]]
        idx = [
            i
            for i, (sess, role) in enumerate(zip(sig["sessions"], sig["roles"]))
            if sess == top_session and role == "user"
        ]
        out = s.copy()
        if len(idx) > 1:
            local = KeywordIndex([sig["index"].doc_tokens[i] for i in idx]).scores(sig["q"])[0].astype(np.float64)
            out[idx] += weight * (local / local.max() if local.max() > 0 else local)
        return out

    return score


# --- 5. learned reranker ------------------------------------------------------------------------------------------
def features(sig, top: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = fused(sig)
    order = order_of(sig, s)[:top]
    kw, cos, nxt = sig["kw"][(1.5, 0.75)], sig["cos"], sig["nxt"]
    kind = answer_type(sig["q"])
    rows = []
    for rank, i in enumerate(order):
        text, j = sig["texts"][i], nxt[i]
        rows.append(
            [
                s[i],
                s[i] - s[order[0]],
                kw[i],
                cos[i],
                kw[j] if j >= 0 else 0.0,
                cos[j] if j >= 0 else 0.0,
                float(sig["roles"][i] == "user"),
                np.log1p(len(text)),
                float("?" in text),
                float(has_answer_type(text, sig["q"], kind)),
                sig.get("maxsim", np.zeros(len(s)))[i],
                1 / (rank + 1),
            ]
        )
    return order, np.array(rows), sig["evidence"][order]


def learned_reranker(sigs, c_reg: float) -> dict[str, float]:
    from sklearn.linear_model import LogisticRegression

    data = [features(sig) for sig in sigs]

    def fit(idx):
        x = np.vstack([data[i][1] for i in idx])
        y = np.concatenate([data[i][2] for i in idx])
        mu, sd = x.mean(0), x.std(0) + 1e-9
        return LogisticRegression(C=c_reg, max_iter=5000).fit((x - mu) / sd, y), mu, sd

    def top1(i, model) -> bool:
        clf, mu, sd = model
        _, x, y = data[i]
        return bool(y[int(np.argmax(clf.decision_function((x - mu) / sd)))])

    everything = fit(range(len(data)))
    in_sample = np.mean([top1(i, everything) for i in range(len(data))])
    loo = np.mean([top1(i, fit([j for j in range(len(data)) if j != i])) for i in range(len(data))])
    return {"in_sample@1": round(float(in_sample), 3), "leave_one_out@1": round(float(loo), 3)}


# --- 6. LLM reranker ---------------------------------------------------------------------------------------------
RERANK_PROMPT = """Question about the user: {question}

Messages from the user's past conversations:
{messages}

Which message states the answer to the question? Reply with its number only."""


def llm_rerank(sigs, model_name: str, top: int, log_dir: Path) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir

    from harness.llm.endpoint import make_client, open_endpoint

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=[f"model={model_name}"])
    hits, seconds, unparsed = 0, [], 0
    with open_endpoint(cfg.model, log_dir=log_dir) as ep:
        client = make_client(ep, cfg.client, cache=None)
        for sig in sigs:
            order = order_of(sig, fused(sig))[:top]
            listing = "\n".join(f"{n + 1}. {sig['texts'][i][:600]}" for n, i in enumerate(order))
            t0 = time.perf_counter()
            reply = client.chat(
                [{"role": "user", "content": RERANK_PROMPT.format(question=sig["q"], messages=listing)}],
                purpose="rerank",
                temperature=0,
                max_tokens=4,
            )
            seconds.append(time.perf_counter() - t0)
            m = re.search(r"\d+", reply.content or "")
            pick = int(m.group(0)) - 1 if m and 0 < int(m.group(0)) <= len(order) else 0
            unparsed += not (m and 0 < int(m.group(0)) <= len(order))
            hits += bool(sig["evidence"][order[pick]])
    return {
        "model": model_name,
        "top": top,
        "@1": round(hits / len(sigs), 3),
        "seconds_per_query_p50": round(float(np.median(seconds)), 2),
        "unparsed_replies": unparsed,
    }


# --- main ----------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from commands.retrieval_eval import answerable
    from harness.data.longmemeval import LongMemEvalSource
    from harness.retrieval.evaluation import evaluate_case

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/retrieval_ceiling")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--llm-rerank", default=None, metavar="MODEL", help="a configs/model/ name, e.g. qwen25_coder_15b")
    ap.add_argument("--llm-top", type=int, default=3)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    cases, _ = LongMemEvalSource(filename="longmemeval_s_single_session_user.json.gz").load()
    cases = answerable(cases)[: args.limit or None]
    retriever = instantiate(OmegaConf.merge(preset_node("default"), {"store": None}))
    sigs = [case_signals(retriever, c) for c in cases]
    rows: list[tuple[str, dict[str, Any]]] = []

    shipped = recall(sigs, fused)
    via_tools = np.mean(
        [evaluate_case(retriever, c.question_id, c.events(), c.question).metrics["turn_recall_any@1"] for c in cases]
    )
    rows.append(("1. shipped default (recomputed)", {**shipped, "retrieval-eval @1": round(float(via_tools), 3)}))

    grid = []
    for alpha, prop, aw, bm25 in itertools.product(
        (0.0, 0.5, 1.0, 1.5, 2.0), (0.0, 0.25, 0.5, 0.75, 1.0), (0.3, 0.5, 0.7, 1.0), BM25_PARAMS
    ):
        r = recall(sigs, lambda s: fused(s, alpha=alpha, propagate=prop, assistant_weight=aw, bm25=bm25))  # noqa: B023 (called now)
        grid.append(((alpha, prop, aw, bm25), r))
    best = max(grid, key=lambda g: (g[1]["@1"], g[1]["@5"]))
    rows.append(
        (
            f"2. best of {len(grid)} default-knob settings {best[0]}",
            {**best[1], "share of grid with @1 >= 0.85": round(sum(g[1]["@1"] >= 0.85 for g in grid) / len(grid), 3)},
        )
    )

    for beta in (0.1, 0.2, 0.3, 0.5):
        rows.append((f"3. answer-type bonus x{1 + beta:.1f} in the top 10", recall(sigs, answer_type_bonus(beta))))

    add_maxsim(sigs, retriever.embedder.model)
    rows.append(
        (
            "4. static token MaxSim alone (user turns)",
            recall(sigs, lambda s: s["maxsim"] * np.where(s["roles"] == "user", 1, 0.5)),
        )
    )
    for beta in (0.25, 0.5, 1.0):
        rows.append((f"4. default + {beta} x MaxSim", recall(sigs, lambda s: fused(s) + beta * s["maxsim"])))  # noqa: B023

    tops = [order_of(sig, fused(sig))[0] for sig in sigs]
    in_session = sum(
        sig["sessions"][top] == sig["sessions"][int(np.flatnonzero(sig["evidence"])[0])]
        for sig, top in zip(sigs, tops)
        if not sig["evidence"][top]
    )
    for weight in (0.25, 0.5, 1.0, 2.0):
        rows.append(
            (
                f"4. default + {weight} x session-local BM25 (misses in the evidence session: {in_session})",
                recall(sigs, session_local_bm25(weight)),
            )
        )

    try:
        for c_reg in (0.01, 0.1, 1.0):
            rows.append((f"5. logistic reranker over 12 features, C={c_reg}", learned_reranker(sigs, c_reg)))
    except ImportError:
        rows.append(("5. logistic reranker", {"skipped": "scikit-learn not installed (pip install scikit-learn)"}))

    if args.llm_rerank:
        rows.append(
            (f"6. LLM listwise rerank of the top {args.llm_top}", llm_rerank(sigs, args.llm_rerank, args.llm_top, out))
        )

    elapsed = time.perf_counter() - t0
    lines = [
        f"# Ranking-signal ceiling for turn recall_any@1 ({len(sigs)} answerable LongMemEval_s cases)",
        "",
        f"Command: `python -m research.retrieval_ceiling {' '.join(argv if argv is not None else sys.argv[1:])}`"
        f" ({elapsed:.0f} s)",
        "",
        "| variant | result |",
        "|---|---|",
    ]
    lines += [f"| {name} | {', '.join(f'{k} {v}' for k, v in res.items())} |" for name, res in rows]
    md = "\n".join(lines) + "\n"
    (out / "retrieval_ceiling.md").write_text(md)
    (out / "retrieval_ceiling.json").write_text(
        json.dumps([{"variant": n, **r} for n, r in rows], indent=2, default=str)
    )
    print(md)


if __name__ == "__main__":
    main()
