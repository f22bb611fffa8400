"""How far the gate's metrics move between two runs of the same gate benchmark (e.g. two llama.cpp builds).

    python -m research.gate_cross_build RUN_A RUN_B

Prints a Markdown table of every scoreboard figure that differs (both values, the delta, and the tolerance the
default gate policy gives it), then which answers, summaries and tool calls differ per case.
Measured numbers and the commands are in docs/ci-gate.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.records import RECORDS_FILE, load_records
from reports.aggregate import read_run, scoreboard
from reports.gate import DEFAULT_POLICY, policy_for

SKIP = ("query_ms", "wall_ms")  # latency: noisy on shared CPUs whatever the build


def deltas(a: Path, b: Path) -> list[tuple[str, str, float | None, float | None]]:
    ba, bb = scoreboard(read_run(a).frame), scoreboard(read_run(b).frame)
    keys = sorted(set(ba) | set(bb))
    return [(m, k, ba.get((m, k)), bb.get((m, k))) for m, k in keys if k not in SKIP]


def case_diffs(a: Path, b: Path) -> list[str]:
    ra = {(r["question_id"], r["mode"]): r for r in load_records(a / RECORDS_FILE)}
    rb = {(r["question_id"], r["mode"]): r for r in load_records(b / RECORDS_FILE)}
    out = []
    for key in sorted(set(ra) & set(rb)):
        x, y = ra[key], rb[key]
        diff = [
            what
            for what, get in (
                ("prediction", lambda r: r.get("prediction")),
                ("summary", lambda r: (r.get("summary") or {}).get("text")),
                ("tool calls", lambda r: [(t.get("name"), t.get("arguments")) for t in r.get("tool_calls") or []]),
            )
            if get(x) != get(y)
        ]
        out.append(f"- {key[0]} / {key[1]}: {', '.join(diff) if diff else 'identical'}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args()
    rows = deltas(args.run_a, args.run_b)
    print(f"| mode | metric | A ({args.run_a.name}) | B ({args.run_b.name}) | B − A | default policy |")
    print("|---|---|---|---|---|---|")
    for mode, metric, va, vb in rows:
        if va is not None and vb is not None and abs(vb - va) <= 1e-9:
            continue  # only what moved: the rest is equal
        d = "" if va is None or vb is None else f"{vb - va:+.6g}"
        pol = policy_for(DEFAULT_POLICY, mode, metric)
        print(
            f"| {mode} | {metric} | {va if va is None else f'{va:.6g}'} | {vb if vb is None else f'{vb:.6g}'} | "
            f"{d} | {pol or ''} |"
        )
    same = sum(1 for _, _, va, vb in rows if va is not None and vb is not None and abs(vb - va) <= 1e-9)
    print(f"\n{same} of {len(rows)} gated figures are equal (latency left out).\n")
    print("\n".join(case_diffs(args.run_a, args.run_b)))


if __name__ == "__main__":
    main()
