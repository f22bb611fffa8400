"""BM25 rank fusion and more of the recalled conversation in the response, fitted without the cases they are reported
on (issue 24, part 1).

    python -m research.retrieval_bm25_fusion_fit --out runs/bm25_fusion_fit

Why (docs/retrieval.md, "A proxy of the held-out half"): on the held-out proxy the default is below `bm25`
natively on single-session-assistant (@5 0.697 and evidence in the response 0.697, against 0.848 / 0.939) and on
single-session-preference evidence (0.600 against 0.733). Neither `recall_user_weight` nor `session_boost` closed it
on proxy fold B. Causes read on proxy fold A only (fold B's questions are never read one by one): (1) the evidence
is the user's turn and the recall prior (user turns × 0.5) pushes it down; (2) turns that share the question's
framing words fill the top 5 (often other turns of the right conversation); (3) the compact response keeps only the
top 2 hits whole, so a reply at rank 3-5 is not in it whole. Read before this study was written (fold A, 17
single-session-assistant questions): `bm25`'s @5 there is 0.765 but its evidence 0.941, so most of its evidence comes
from the ±2 context windows of its top 2 hits, not from its ranking: the recalled reply sits next to a turn that
matched (the user's question before it, a later reply of the same conversation).

Mechanisms (SearchConfig settings, off in every preset):

- `bm25_fusion` w: the default's final ranking (every searched turn) fused with a plain BM25 ranking of the same
  turns by reciprocal rank, 1/(60 + rank) + w/(60 + BM25 rank); phrasing-independent; for causes (1) and (2);
- `recall_top_hits` n: for a query the recall trigger fires on, the top n hits go out whole (null: the shipped 2);
  for cause (3), at a token cost;
- `recall_window` w: for a query the recall trigger fires on, the first hit comes with the turns of its
  conversation within ±w places, each whole up to 3,000 characters, outside the budget (the reference's window,
  for the first hit only); for cause (3) and the finding above, at a token cost.

Hypothesis, fixed before the first run: fusion lifts single-session-assistant @5 towards `bm25`'s, the two response
settings turn that into evidence in the response, and fusion costs the default little elsewhere (multi-session,
temporal-reasoning, preference: where BM25 alone is weaker). Grid, fixed before the first run (GRID): bm25_fusion
0 / 0.5 / 1 / 2 × recall_top_hits null / 3 / 4 × recall_window 0 / 1 / 2 (36 settings; all three at their defaults
is the shipped default). Before writing it, a few of these settings were measured on proxy fold A's
single-session-assistant and -preference questions only (fit data) to check that the code works.

Protocol (as `research.retrieval_recall_prior_fit`; run by `research.retrieval_heldout_proxy.fit_grid`): fit data = every answerable development question (the `_s`
development half and the 70 single-session-user questions, both folds) plus fold A of the held-out proxy; reported =
fold B of the held-out proxy. The rule of `research.retrieval_fold_fit` (`key`: single-session-user tokens ≤ 450,
fewest (type, metric) pairs below bm25 among @5, evidence and evidence at the setting's budget, then @5 + evidence,
@1, tokens) picks one setting on the fit data; every setting's fold-B figures are printed beside it. The pick is
worth proposing for a preset only if it is at or above bm25 on fold B on every type, natively and at budget.
"""

from __future__ import annotations

from typing import Any

from research.retrieval_heldout_proxy import fit_grid

GRID: dict[str, list[Any]] = {
    "bm25_fusion": [0.0, 0.5, 1.0, 2.0],
    "recall_top_hits": [None, 3, 4],
    "recall_window": [0, 1, 2],
}
SHIPPED = {"bm25_fusion": 0.0, "recall_top_hits": None, "recall_window": 0}


def main() -> None:
    title = "bm25_fusion × recall_top_hits × recall_window"
    fit_grid(__doc__, "runs/bm25_fusion_fit", "bm25_fusion_fit", title, GRID, SHIPPED)


if __name__ == "__main__":
    main()
