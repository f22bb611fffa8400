"""How close `lme-harness plan` comes to what the run then records: the reference protocol on the `_s` cases.

The plan is made first (it must send no request), then the run goes to the deterministic fake endpoint that
reports usage as the hosted models count it (chat: o200k, embeddings: cl100k; harness/testing/faults.py), with
gpt-4o-mini / text-embedding-3-small prices under the fake's model ids. The response cache and the retrieval
stores are fresh, so the run spends everything the plan priced. Target: tokens and USD within ±15 %.

    python -m research.plan_accuracy [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from research.perf_common import emit, fake_server, machine, run_harness

PROTOCOL = ["dataset=s", "run.share_summary=false", "retrieval=trpc_parity_openai"]
PRICES = """date: "2026-06-20"
currency: USD
source: gpt-4o-mini and text-embedding-3-small prices, under the fake endpoint's model ids
models:
  fake-model: {input: 0.15, cached_input: 0.075, output: 0.60}
  fake-embedding: {input: 0.02}
  text-embedding-3-small: {input: 0.02}
"""


def recorded(run_dir: Path, prices: Path) -> dict:
    from harness.records import load_records
    from reports.cost import Endpoints, embedding_calls, judge_calls, load_price_table, record_costs, summary_calls

    recs = load_records(run_dir / "records.jsonl")
    by_key = {(r["question_id"], r["mode"]): r for r in recs}
    table = load_price_table(prices)
    tokens, usd, calls = 0, 0.0, 0
    for r in recs:
        for c in [*r.get("calls", []), *summary_calls(r, by_key), *judge_calls(r), *embedding_calls(r)]:
            tokens += c["usage"]["prompt_tokens"] + c["usage"].get("completion_tokens", 0)
            calls += 1
        usd += (
            record_costs(r, by_key, table, Endpoints(answer_model="fake-model", judge_model="fake-model"))[0][
                "cost_total"
            ]
            or 0.0
        )
    return {
        "records": len(recs),
        "failed": sum(r["status"] != "ok" for r in recs),
        "calls": calls,
        "tokens": tokens,
        "cost_usd": round(usd, 6),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lme-plan-") as tmp_dir:
        tmp = Path(tmp_dir)
        prices = tmp / "prices.yaml"
        prices.write_text(PRICES)
        env = {"OPENAI_API_KEY": "sk-fake-for-the-fake-endpoint", "LME_HARNESS_CACHE_DIR": str(tmp / "cache")}
        with fake_server(usage="o200k") as srv:
            common = [
                f"hydra.run.dir={tmp / 'run'}",
                *PROTOCOL,
                "model=endpoint",
                f"model.base_url={srv['base_url']}",
                "model.model=fake-model",
                "model.context_window=128000",
                "run.progress=false",
                f"cache.path={tmp / 'responses.sqlite'}",
                f"retrieval.embedder.base_url={srv['base_url']}",
                *([f"dataset.limit={args.limit}"] if args.limit else []),
            ]
            plan_res = run_harness(
                ["plan", *common, "--out", str(tmp / "plan.json"), "--pricing", str(prices)],
                env=env,
                log=tmp / "plan.log",
            )
            if plan_res["code"] != 0:
                raise SystemExit("plan failed:\n" + (tmp / "plan.log").read_text()[-3000:])
            run_res = run_harness(["run", *common], env=env, log=tmp / "run.log")
        if run_res["code"] not in (0, 3):
            raise SystemExit("run failed:\n" + (tmp / "run.log").read_text()[-3000:])
        sent = sum(t.get("calls", 0) for t in srv["stats"]["tokens"].values())
        plan = json.loads((tmp / "plan.json").read_text())
        got = recorded(tmp / "run", prices)
        total = plan["total"]
        result = {
            "machine": machine(),
            "cases": plan["cases"],
            "command": "lme-harness plan " + " ".join(PROTOCOL),
            "plan_wall_s": plan_res["wall_s"],
            "run_wall_s": run_res["wall_s"],
            "plan": {
                "calls": sum(total["calls"].values()),
                "tokens": total["tokens_total"],
                "cost_usd": total["cost_usd"],
                "by_part": total["calls"],
            },
            "run": {**got, "requests_served": sent},
            "tokens_error": round(total["tokens_total"] / got["tokens"] - 1, 4),
            "cost_error": round(total["cost_usd"] / got["cost_usd"] - 1, 4),
        }
        result["within_15_percent"] = abs(result["tokens_error"]) <= 0.15 and abs(result["cost_error"]) <= 0.15
        emit(result, args.out)


if __name__ == "__main__":
    main()
