"""`lme-harness gate --baseline FILE RUN_DIR`: exit 0 when every check passes, 1 when one fails.

The figures come from the run's results.json (rebuilt from the records, with a one-line note on stderr, when it is
missing, of an earlier schema or stale: reports/run_results.py `load_results`)."""

from __future__ import annotations

import sys
from pathlib import Path

from reports.cost import load_price_table
from reports.gate import baseline_from_run, load_baseline, run_gate, write_baseline
from reports.run_results import load_results

EXIT_GATE_FAILED = 1


def gate_main(
    run_dir: str, baseline: str, *, pricing: str | None = None, write: bool = False, policy: str | None = None
) -> int:
    prices = load_price_table(pricing)
    if write:
        old: dict = {}
        if Path(baseline).exists():  # keep the description, command and policy of an existing baseline
            old, _ = load_baseline(baseline)
        loaded = load_results(run_dir, prices=prices)
        if loaded.notice:
            print(f"note: {loaded.notice}", file=sys.stderr)
        doc = baseline_from_run(
            run_dir,
            policy=policy or old.get("policy") or "default",
            description=old.get("description", ""),
            command=old.get("command", ""),
            loaded=loaded,
        )
        print(f"baseline written: {write_baseline(doc, baseline)} ({len(doc['checks'])} checks)")
        return 0
    result = run_gate(baseline, run_dir, prices=prices)
    if result.notice:
        print(f"note: {result.notice}", file=sys.stderr)
    (Path(run_dir) / "gate.md").write_text(result.markdown())
    print(result.text())
    return 0 if result.passed else EXIT_GATE_FAILED
