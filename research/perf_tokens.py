"""Tokens spent for the three-mode table, this harness's defaults vs the reference protocol, same 70 `_s` cases.

Both protocols run against a deterministic fake endpoint that reports usage as the hosted models count
it (chat: o200k_base, like gpt-4o-mini; embeddings: cl100k_base, like text-embedding-3-small) and tallies
every request it serves: answers (incl. tool rounds), summaries, judge, embeddings. The response cache
is off and the retrieval index store is fresh, so everything is spent, as on a first run.

  ours       the defaults: one summary per case shared by both summary modes (run.share_summary=true),
             local static embeddings (no embedding API tokens), compact search results, trpc judge on EM misses
  reference  summary regenerated per mode (run.share_summary=false), text-embedding-3-small over every
             event (retrieval=trpc_parity_openai, against the fake /embeddings), reference search results,
             trpc judge on every EM miss, summaries with API defaults (summarizer.max_tokens/temperature=null)

The reference run seeded both the summary and the ondemand session into pgvector (spec §3, §5.1), so it
embedded every event twice; the harness embeds a case once. `reference_as_run` adds that second pass;
the measured `reference` total (one pass) is the conservative denominator. Target: ours ≤ 50 % of reference.

    python -m research.perf_tokens [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from research.perf_common import emit, fake_server, loadavg, machine, run_harness, s_data_args

PROTOCOLS = {
    "ours": [],
    "reference": [
        "run.share_summary=false",
        "retrieval=trpc_parity_openai",
        "summarizer.max_tokens=null",
        "summarizer.temperature=null",
    ],
}


def total(tally: dict[str, dict[str, int]]) -> int:
    return sum(t.get("prompt_tokens", 0) + t.get("completion_tokens", 0) for t in tally.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out")
    args = ap.parse_args()

    result: dict = {"machine": machine(), "protocols": {}}
    extra = [f"dataset.limit={args.limit}"] if args.limit else []
    with tempfile.TemporaryDirectory(prefix="lme-tok-") as tmp_dir:
        tmp = Path(tmp_dir)
        for name, overrides in PROTOCOLS.items():
            cache = tmp / f"cache-{name}"
            cache.mkdir()
            with fake_server(usage="o200k") as srv:
                more = [*extra, *overrides, "cache.enabled=false", f"retrieval.store={cache / 'index.sqlite'}"]
                if name == "reference":
                    more.append(f"retrieval.embedder.base_url={srv['base_url']}")
                res = run_harness(
                    s_data_args(srv["base_url"], tmp / name, cache, *more),
                    log=tmp / f"{name}.log",
                    env={"OPENAI_API_KEY": "sk-fake-for-the-fake-endpoint"},
                )
            if res["code"] not in (0, 3):
                raise SystemExit(f"{name} failed ({res['code']}):\n" + (tmp / f"{name}.log").read_text()[-3000:])
            tally = srv["stats"]["tokens"]
            meta = json.loads((tmp / name / "run.json").read_text())
            records = [json.loads(line) for line in open(tmp / name / "records.jsonl")]
            result["protocols"][name] = {
                "overrides": overrides,
                "wall_s": res["wall_s"],
                "exit": res["code"],
                "records": len(records),
                "failed": sum(r["status"] != "ok" for r in records),
                "by_kind": tally,
                "total_tokens": total(tally),
                "harness_llm_stats_tokens": meta["llm_stats"].get("tokens"),
            }
            print(
                f"{name}: {total(tally):,} tokens ({json.dumps({k: v.get('calls') for k, v in tally.items()})} calls), "
                f"{res['wall_s']} s, load {loadavg()}",
                flush=True,
            )
    ours, ref = (result["protocols"][k] for k in ("ours", "reference"))
    emb = ref["by_kind"].get("embedding", {}).get("prompt_tokens", 0)
    result["reference_as_run_total_tokens"] = ref["total_tokens"] + emb  # the second pgvector seeding
    result["ratio_vs_reference"] = round(ours["total_tokens"] / ref["total_tokens"], 4)
    result["ratio_vs_reference_as_run"] = round(ours["total_tokens"] / result["reference_as_run_total_tokens"], 4)
    result["target_met"] = result["ratio_vs_reference"] <= 0.5
    result["loadavg_at_end"] = loadavg()
    emit(result, args.out)


if __name__ == "__main__":
    main()
