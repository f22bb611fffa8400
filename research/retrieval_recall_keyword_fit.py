"""A recall query ranked by plain BM25 inside the default, fitted without the cases it is reported on (issue 24,
part 1).

    python -m research.retrieval_recall_keyword_fit --out runs/recall_keyword_fit

Why (docs/retrieval.md, "BM25 rank fusion, more whole hits and the recalled conversation's neighbours"): in all 36
settings of `retrieval_bm25_fusion_fit` (retired: research/README.md) the default stays below `bm25` on single-session-assistant @5 and
evidence on the fit data (@5 0.750-0.825 against 0.850), and rank fusion with BM25 helped there only at a cost to
preference and single-session-user questions, which the recall trigger does not fire on. So the fusion's gain and
its cost come from different queries. This study tries the whole of BM25's ranking for the queries the recall
trigger fires on, and nothing for the others.

Mechanism (a SearchConfig setting, off in every preset): `recall_ranking: keyword`: a query the recall trigger fires
on is ranked by plain BM25 over the same turns (the `bm25` preset's ranking: no dense score, no speaker prior, no
credit, no re-scoring or fusion), and its response keeps the default's compact shape and recall budget. Every other
query is ranked and answered byte for byte as before. It uses the trigger the shipped default already uses (the
recall cues), so it adds no dependence on phrasing beyond what is shipped.

Hypothesis, fixed before the first run: on single-session-assistant questions the trigger fires on, @5 becomes
`bm25`'s; with the recalled conversation's neighbours (`recall_window`, for what `bm25` carries in its ±2 windows)
evidence in the response reaches `bm25`'s; other types change only on the few questions the trigger fires on.
Grid, fixed before the first run (GRID): recall_ranking fused / keyword × recall_window 0 / 1 / 2 (6 settings;
fused and 0 is the shipped default).

Protocol (as the retired `retrieval_bm25_fusion_fit`; `research.retrieval_heldout_proxy.fit_grid`): fit data = every answerable
development question plus fold A of the held-out proxy (370 questions); reported = fold B of the proxy (100), its
fourth report (the earlier three: docs/retrieval.md). The rule of `research.retrieval_fold_fit` picks one setting on
the fit data. The pick is proposed for the default preset only if it is at or above `bm25` on fold B on every type,
natively and at budget; otherwise the default is unchanged.
"""

from __future__ import annotations

from typing import Any

from research.retrieval_heldout_proxy import fit_grid

GRID: dict[str, list[Any]] = {"recall_ranking": ["fused", "keyword"], "recall_window": [0, 1, 2]}
SHIPPED = {"recall_ranking": "fused", "recall_window": 0}


def main() -> None:
    fit_grid(__doc__, "runs/recall_keyword_fit", "recall_keyword_fit", "recall_ranking × recall_window", GRID, SHIPPED)


if __name__ == "__main__":
    main()
