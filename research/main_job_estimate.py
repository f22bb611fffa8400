"""What a finished run spent on the embedded model, and how long its model calls would take on another CPU.

Reads a run directory's `records.jsonl` (every model call a record keeps: answers and tool rounds, summaries,
judge verdicts; a summary served to the second summary mode is counted once, response-cache hits not at all) and
the embedded server's log (`llama-server-<model>.log`: llama-cpp-python prints how many prompt tokens of each
request it took from the KV cache of the previous one). The time on another CPU is
prompt tokens evaluated / its prefill speed + generated tokens / its generation speed, with the speeds of the
model measured there, or those of a reference model there scaled by this model's measured ratio to it
(`research/runtime_speed.py`). Request overheads (tokenising, sampling, HTTP) are left out: they are small next to
the evaluation on these CPUs, and the run's own wall time on this machine shows what they add here.

    python -m research.main_job_estimate "runs/quickstart/+experiment=quickstart" --pp 14.4 --tg 7 \\
        --pp-ratio 2.9 --tg-ratio 2.4      # the slow host's 1.5B figures, scaled to the 0.5B by its ratio here
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


def model_calls(record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every chat call a record keeps (dicts with `purpose`, `usage` and `latency_s`), cache hits left out."""

    def walk(node: Any, skip_summary: bool) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            if {"purpose", "usage", "latency_s"} <= node.keys() and isinstance(node["usage"], dict):
                if not node.get("cached"):
                    yield node
                return
            for key, value in node.items():
                if key == "summary" and skip_summary and isinstance(value, dict) and value.get("reused"):
                    continue  # the other summary mode's (or an earlier invocation's) generation
                yield from walk(value, skip_summary)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value, skip_summary)

    yield from walk(record, True)


def tally(run_dir: Path) -> dict[str, Any]:
    seen: set[str] = set()
    by_purpose: dict[str, dict[str, float]] = {}
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("status") == "failed":
            continue
        for call in model_calls(record):
            key = json.dumps(call, sort_keys=True)
            if key in seen:  # the same call copied into two records
                continue
            seen.add(key)
            row = by_purpose.setdefault(str(call["purpose"]), {"calls": 0, "prompt": 0, "completion": 0, "wall_s": 0})
            row["calls"] += 1
            row["prompt"] += int(call["usage"].get("prompt_tokens") or 0)
            row["completion"] += int(call["usage"].get("completion_tokens") or 0)
            row["wall_s"] += float(call["latency_s"])
    reused = 0
    for log in run_dir.glob("llama-server-*.log"):
        reused += sum(int(m.group(1)) for m in _PREFIX_HIT.finditer(log.read_text(errors="replace")))
    prompt = sum(r["prompt"] for r in by_purpose.values())
    return {
        "by_purpose": by_purpose,
        "calls": sum(int(r["calls"]) for r in by_purpose.values()),
        "prompt_tokens": prompt,
        "prompt_tokens_from_kv_cache": reused,
        "prompt_tokens_evaluated": prompt - reused,
        "completion_tokens": sum(r["completion"] for r in by_purpose.values()),
        "model_wall_s": round(sum(r["wall_s"] for r in by_purpose.values()), 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--pp", type=float, required=True, help="prefill tokens/s of the reference model on that CPU")
    ap.add_argument("--tg", type=float, required=True, help="generation tokens/s of the reference model on that CPU")
    ap.add_argument("--pp-ratio", type=float, default=1.0, help="this run's model / the reference model, prefill")
    ap.add_argument("--tg-ratio", type=float, default=1.0, help="this run's model / the reference model, generation")
    a = ap.parse_args(argv)
    t = tally(a.run_dir)
    pp, tg = a.pp * a.pp_ratio, a.tg * a.tg_ratio
    prefill_s = t["prompt_tokens_evaluated"] / pp
    generate_s = t["completion_tokens"] / tg
    t["estimate"] = {
        "prefill_tok_s": round(pp, 1),
        "generation_tok_s": round(tg, 1),
        "prefill_s": round(prefill_s, 1),
        "generation_s": round(generate_s, 1),
        "model_calls_s": round(prefill_s + generate_s, 1),
        "without_kv_reuse_s": round(t["prompt_tokens"] / pp + generate_s, 1),
    }
    print(json.dumps(t, indent=2))


if __name__ == "__main__":
    main()
