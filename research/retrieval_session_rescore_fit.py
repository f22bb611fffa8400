"""Conversation re-scoring, query term weighting and the fusion weight without the recall-cue list, fitted on one
fold and reported on the other (issue 24, part 1).

    python -m research.retrieval_session_rescore_fit --out runs/rescore_fit

Every setting of GRID on top of the `default` preset without its phrase list (`recall_cues: false`; the user prior,
assistant × 0.5 and reply→question 0.5, unchanged) is measured on every answerable `s_dev` and `dataset=s`
question as `research.retrieval_fold_fit` measures it (same cases, folds, metrics and selection rule, fixed before
the first run); for each fold F the rule picks one setting from fold F's rows only and the other fold is reported,
with the chosen setting with one knob changed (each mechanism's contribution on the unseen fold). The knobs:
`session_rescore` (0 = off; 1 = the leading conversation; 10 = every conversation among the hits),
`session_rescore_queries` (speaker-neutral queries only, or all), `session_rescore_by` (the order inside a
conversation: BM25 with its own IDF, or the fused score before prior and credit), `query_term_weight` (0 = off),
`alpha` (the BM25/cosine fusion weight) and `neutral_top_hits` (whole hits for a speaker-neutral query). Rows are cached in `--out`/grid_cases.jsonl, so a rerun measures only what is new.
"""

from __future__ import annotations

import itertools
from typing import Any

from harness.retrieval.config import preset
from research.retrieval_fold_fit import (
    by_type,
    fit_on,
    measured,
    name_of,
    prepare,
    shortfalls,
    study_args,
    write_outputs,
)

BASE: dict[str, Any] = {"recall_cues": False}  # the default preset otherwise (assistant × 0.5, propagation 0.5)
GRID: dict[str, list[Any]] = {
    "session_rescore": [0, 1, 10],
    "session_rescore_queries": ["neutral", "all"],
    "session_rescore_by": ["bm25", "fused"],
    "query_term_weight": [0.0, 1.0, 2.0],
    "alpha": [1.0, 0.5, 2.0],
    "neutral_top_hits": [None, 3],
}
CUE_FREE_DEFAULT = {k: v[0] for k, v in GRID.items()}  # every knob off: the default preset without its cue list
SHIPPED = "shipped (recall cues)"


def same_as(s: dict[str, Any]) -> dict[str, Any]:
    """The setting whose rows `s` shares (how and for which queries re-scoring works is moot when it is off)."""
    return dict(s, session_rescore_queries="neutral", session_rescore_by="bm25") if s["session_rescore"] == 0 else s


def short(name: str) -> str:
    """A setting's name as the kept tables write it: rescore=N/queries/by (or rescore=0), qtw, alpha, nth."""
    if name == SHIPPED:
        return name
    v = dict(part.split("=", 1) for part in name.split(" "))
    rescore = v["session_rescore"]
    if rescore != "0":
        rescore += f"/{v['session_rescore_queries']}/{v['session_rescore_by']}"
    return f"rescore={rescore} qtw={v['query_term_weight']} alpha={v['alpha']} nth={v['neutral_top_hits']}"


def row(t: str, v: dict[str, float]) -> str:
    return (
        f"| {t} | {v['n']:.0f} | {v['r1']:.3f} / {v['r5']:.3f} / {v['ev']:.3f} / {v['tok']:,.0f} | "
        f"{v['bm25_r1']:.3f} / {v['bm25_r5']:.3f} / {v['bm25_ev']:.3f} / **{v['bm25_ev_budget']:.3f}** / "
        f"{v['bm25_tok']:,.0f} |"
    )


def brief(t: dict[str, dict[str, float]]) -> str:
    """The figures that move: shortfalls, and @1 / @5 / evidence of the types below bm25 anywhere in this study."""
    cells = [
        f"{k.removeprefix('single-session-')} {v['r1']:.3f}/{v['r5']:.3f}/{v['ev']:.3f}"
        for k, v in t.items()
        if k != "single-session-user" or v["r5"] < 1
    ]
    return f"{shortfalls(t)}; " + "; ".join(cells)


def main() -> None:
    out, store = study_args(__doc__, "runs/rescore_fit")
    cases, folds, indexes, counter = prepare(store)
    settings = [dict(zip(GRID, v)) for v in itertools.product(*GRID.values())]
    todo = [("bm25", preset("bm25")), (SHIPPED, preset("default", recall_cues=True))]
    todo += [(name_of(s), preset("default", **BASE, **s)) for s in settings if same_as(s) == s]
    rows = measured(out, todo, cases, indexes, counter)
    for s in settings:
        rows[name_of(s)] = rows[name_of(same_as(s))]

    def table(name: str, fold: str) -> dict[str, dict[str, float]]:
        return by_type(rows[name], rows["bm25"], folds, fold)

    report: dict[str, Any] = {"base": BASE, "grid": GRID, "fits": {}}
    lines = []
    for fit, held in (("A", "B"), ("B", "A")):
        entry = fit_on(rows, settings, GRID, folds, fit, held)
        chosen, effects = entry["chosen"], entry["one_knob_changed_unseen"]
        report["fits"][f"{fit}->{held}"] = {
            **entry,
            "shipped_unseen": table(SHIPPED, held),
            "cue_free_default_unseen": table(name_of(CUE_FREE_DEFAULT), held),
        }
        lines.append(
            f"\nfit {fit} -> {held}: {chosen} (shortfalls fit {shortfalls(table(chosen, fit))}, unseen "
            f"{shortfalls(table(chosen, held))}); top 5 on {fit}: {[short(n) for n in entry['top5_on_fit']]}"
        )
        lines.append("| type | cases | chosen @1 / @5 / ev / tok | bm25 @1 / @5 / ev / at budget / tok |")
        lines.append("|---|---|---|---|")
        lines += [row(t, v) for t, v in table(chosen, held).items()]
        lines.append(f"  unseen, chosen: {brief(table(chosen, held))}")
        lines.append(f"  unseen, shipped default (recall cues): {brief(table(SHIPPED, held))}")
        for change, e in effects.items():
            lines.append(f"  unseen, {change}: {brief(e['unseen'])}")
    # Every setting on both folds (read across folds = in-sample; only the fits above are unseen estimates).
    lines.append(
        "\n| setting | shortfalls A / B | single-session-assistant @1/@5/ev A; B | single-session-preference A; B "
        "| mean @1 over types A; B |"
    )
    lines.append("|---|---|---|---|---|")
    report["every_setting"] = {}
    for name in [SHIPPED] + [name_of(s) for s in settings if same_as(s) == s]:
        ta, tb = table(name, "A"), table(name, "B")
        report["every_setting"][name] = {"A": ta, "B": tb, "shortfalls": [shortfalls(ta), shortfalls(tb)]}
        cells = [
            "; ".join(f"{t[k]['r1']:.3f}/{t[k]['r5']:.3f}/{t[k]['ev']:.3f}" for t in (ta, tb))
            for k in ("single-session-assistant", "single-session-preference")
        ]
        mean_r1 = "; ".join(f"{sum(v['r1'] for v in t.values()) / len(t):.3f}" for t in (ta, tb))
        lines.append(f"| {short(name)} | {shortfalls(ta)} / {shortfalls(tb)} | {cells[0]} | {cells[1]} | {mean_r1} |")
    both = [n for n, r in report["every_setting"].items() if n != SHIPPED and r["shortfalls"] == [0, 0]]
    report["no_shortfall_on_either_fold"] = both
    lines.append(f"\nno pair below bm25 on either fold (in-sample; {len(both)}): {[short(n) for n in both]}")
    write_outputs(out, "rescore_fit", report, lines)


if __name__ == "__main__":
    main()
