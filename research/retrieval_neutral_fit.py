"""Speaker-neutral ranking without the recall-cue list, fitted on one fold and reported on the other (issue 24).

    python -m research.retrieval_neutral_fit --out runs/neutral_fit

A question such as "can you remind me what you recommended …" names both speakers, so the speaker prior gives
equal weights and the answer may be the assistant's reply or the user's message. `SearchConfig.neutral_ranking`
says what such a query gets; this study measures it without any phrase list (`recall_cues: false`): every
setting of GRID on top of the `default` preset, on every answerable `s_dev` and `dataset=s` question, measured as
`research.retrieval_fold_fit` measures (same cases, folds, metrics and selection rule), then for each fold F the
rule picks one setting from fold F's rows only and the other fold is reported. Also reported on the unseen fold:
the chosen setting with one knob changed (each mechanism's contribution) and the shipped cue-based default.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from harness.retrieval.config import NEUTRAL_RANKINGS, preset
from research.retrieval_fold_fit import (
    by_type,
    fit_on,
    measure,
    name_of,
    prepare,
    shortfalls,
    study_args,
    write_outputs,
)

# Phrasing-independent only: no recall cue. The user prior (assistant × 0.5, reply→question 0.5) is unchanged.
BASE: dict[str, Any] = {"recall_cues": False, "assistant_weight": 0.5, "propagate": 0.5}
GRID: dict[str, list[Any]] = {
    "neutral_ranking": list(NEUTRAL_RANKINGS),
    "neutral_top_hits": [None, 3],
    "top_hit_chars": [3000, 4000],
}


def row(v: dict[str, float]) -> str:
    return (
        f"{v['r1']:.3f} / {v['r5']:.3f} / {v['ev']:.3f} / {v['tok']:,.0f} | {v['bm25_r1']:.3f} / {v['bm25_r5']:.3f} / "
        f"{v['bm25_ev']:.3f} / **{v['bm25_ev_budget']:.3f}** / {v['bm25_tok']:,.0f}"
    )


def main() -> None:
    out, store = study_args(__doc__, "runs/neutral_fit")
    cases, folds, indexes, counter = prepare(store)
    settings = [dict(zip(GRID, v)) for v in itertools.product(*GRID.values())]
    rows: dict[str, list] = {"bm25": measure(preset("bm25"), cases, indexes, counter)}
    rows["shipped (recall cues)"] = measure(preset("default", recall_cues=True), cases, indexes, counter)
    for s in settings:
        rows[name_of(s)] = measure(preset("default", **BASE, **s), cases, indexes, counter)
        print("measured", name_of(s), flush=True)
    (out / "grid_cases.jsonl").write_text(
        "".join(json.dumps({"setting": n, "rows": r}) + "\n" for n, r in rows.items())
    )

    def table(name: str, fold: str) -> dict[str, dict[str, float]]:
        return by_type(rows[name], rows["bm25"], folds, fold)

    report: dict[str, Any] = {"base": BASE, "grid": GRID, "fits": {}}
    lines = []
    for fit, held in (("A", "B"), ("B", "A")):
        entry = fit_on(rows, settings, GRID, folds, fit, held)
        chosen, effects = entry["chosen"], entry["one_knob_changed_unseen"]
        report["fits"][f"{fit}->{held}"] = {**entry, "shipped_unseen": table("shipped (recall cues)", held)}
        lines.append(
            f"fit {fit} -> {held}: {chosen} (shortfalls fit {shortfalls(table(chosen, fit))}, unseen "
            f"{shortfalls(table(chosen, held))})"
        )
        for t, v in table(chosen, held).items():
            lines.append(f"| {t} | {fit}→{held} | {v['n']:.0f} | {row(v)} |")
        for change, e in effects.items():
            unseen: dict[str, dict[str, float]] = e["unseen"]
            lines.append(
                f"  {change}: unseen shortfalls {e['shortfalls']}; "
                + "; ".join(
                    f"{t} {v['r1']:.3f}/{v['r5']:.3f}/{v['ev']:.3f}"
                    for t, v in unseen.items()
                    if t.startswith("single-session-a") or t.startswith("single-session-p")
                )
            )
    # Every setting on both folds (read across folds = in-sample; only the fits above are unseen estimates).
    lines.append(
        "\n| setting | shortfalls A / B | single-session-assistant @1 / @5 / evidence, A; B | "
        "single-session-preference @1 / @5 / evidence, A; B |"
    )
    lines.append("|---|---|---|---|")
    report["every_setting"] = {}
    for name in ["shipped (recall cues)"] + [name_of(s) for s in settings]:
        ta, tb = table(name, "A"), table(name, "B")
        report["every_setting"][name] = {"A": ta, "B": tb, "shortfalls": [shortfalls(ta), shortfalls(tb)]}
        cells = [
            "; ".join(f"{t[k]['r1']:.3f} / {t[k]['r5']:.3f} / {t[k]['ev']:.3f}" for t in (ta, tb))
            for k in ("single-session-assistant", "single-session-preference")
        ]
        lines.append(f"| {name} | {shortfalls(ta)} / {shortfalls(tb)} | {cells[0]} | {cells[1]} |")
    write_outputs(out, "neutral_fit", report, lines)


if __name__ == "__main__":
    main()
