"""Probe the local models on the first oracle cases: speed and a rough answer quality.

    python -m research.models_probe                     # all local models, first 3 oracle cases
    python -m research.models_probe --models qwen25_coder_05b --n 5 --threads 2
    python -m research.models_probe --pull-only smollm2_135m

Per model: server load time (process start until /v1/models answers), and per question the
llama.cpp timings parsed from the server log (prompt tokens/s, generation tokens/s), wall seconds,
and containment-EM of the answer against the reference. The prompt is the long_context shape:
system instruction, every haystack turn as a chat message, then the question.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.llm.local_server import LlamaServer
from harness.llm.models import available_models, load_spec, pull
from harness.scoring.lexical import contains_match

ORACLE = Path("/work/shared/data/longmemeval/longmemeval_oracle_single_session_user.json.gz")
SYSTEM = (
    "You are a helpful assistant with access to prior conversation history. "
    "Answer the user's question based on what was discussed in past conversations, "
    "directly and concisely. Do not fabricate information not present in the history."
)
_PERF = re.compile(r"llama_perf_context_print:\s+(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) (?:tokens|runs)")


def oracle_path() -> Path:
    env = os.environ.get("LME_ORACLE_PATH")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[1]
    for p in (here.parent / "shared/data/longmemeval" / ORACLE.name, ORACLE):
        if p.is_file():
            return p
    raise SystemExit(f"oracle data not found ({ORACLE}); set LME_ORACLE_PATH")


def messages_for(case: dict[str, Any]) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": SYSTEM}]
    for session in case["haystack_sessions"]:
        msgs += [{"role": t["role"], "content": t["content"]} for t in session]
    msgs.append({"role": "user", "content": case["question"]})
    return msgs


def perf_since(log: Path, offset: int) -> tuple[dict[str, float], int]:
    """Sum llama.cpp's per-completion timings logged after `offset` (a request may run several)."""
    text = log.read_text(errors="replace")
    out = {"prompt_ms": 0.0, "prompt_tokens": 0, "gen_ms": 0.0, "gen_tokens": 0}
    for kind, ms, n in _PERF.findall(text[offset:]):
        key = "prompt" if kind == "prompt eval" else "gen"
        out[f"{key}_ms"] += float(ms)
        out[f"{key}_tokens"] += int(n)
    return out, len(text)


def probe(name: str, cases: list[dict[str, Any]], *, threads: int, max_tokens: int, log_dir: Path) -> dict[str, Any]:
    from openai import OpenAI

    spec = load_spec(name)
    pull(spec)
    log = log_dir / f"{name}.log"
    rows = []
    with LlamaServer(spec, log_path=log, n_threads=threads) as srv:
        client = OpenAI(base_url=srv.base_url, api_key="local", max_retries=0, timeout=1200)
        offset = len(log.read_text(errors="replace"))
        for case in cases:
            t0 = time.monotonic()
            r = client.chat.completions.create(  # plain message dicts: the SDK's TypedDict union does not take them
                model=srv.model,
                messages=messages_for(case),  # type: ignore[arg-type]
                temperature=0,
                max_tokens=max_tokens,
            )
            assert r.usage is not None, "llama.cpp's server reports usage on every completion"
            wall = time.monotonic() - t0
            time.sleep(0.2)  # let the server flush its timing lines
            perf, offset = perf_since(log, offset)
            answer = r.choices[0].message.content or ""
            rows.append(
                {
                    "question_id": case["question_id"],
                    "wall_s": round(wall, 2),
                    "prompt_tokens": r.usage.prompt_tokens,
                    "completion_tokens": r.usage.completion_tokens,
                    **perf,  # tokens actually evaluated: a prompt sharing a prefix with the last one evaluates less
                    "em": contains_match(answer, str(case["answer"])),
                    "answer": answer.strip()[:200],
                    "reference": str(case["answer"]),
                }
            )
            print(
                f"  {name} {case['question_id']}: {wall:.1f}s em={rows[-1]['em']} {answer.strip()[:80]!r}",
                file=sys.stderr,
                flush=True,
            )
        load_s = srv.load_s

    def rate(key: str) -> float | None:  # tokens per second over all questions
        ms = sum(r[f"{key}_ms"] for r in rows)
        return round(sum(r[f"{key}_tokens"] for r in rows) / ms * 1000, 1) if ms else None

    return {
        "model": name,
        "load_s": round(load_s or 0, 2),
        "prompt_tps": rate("prompt"),
        "gen_tps": rate("gen"),
        "s_per_question": round(statistics.median(r["wall_s"] for r in rows), 1),
        "prompt_tokens": round(statistics.median(r["prompt_tokens"] for r in rows)),
        "em": sum(r["em"] for r in rows) / len(rows),
        "n": len(rows),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    local = available_models(kind="local")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=local, choices=local)
    ap.add_argument("--n", type=int, default=3, help="first N oracle cases")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--pull-only", nargs="*", metavar="MODEL", help="only pull (and verify) these models")
    args = ap.parse_args(argv)
    if args.pull_only is not None:
        for name in args.pull_only or local:
            print(pull(load_spec(name)))
        return
    with gzip.open(oracle_path(), "rt") as f:
        cases = json.load(f)[: args.n]
    load_before = os.getloadavg()[0]
    log_dir = Path(tempfile.mkdtemp(prefix="models-probe-"))
    results = [probe(m, cases, threads=args.threads, max_tokens=args.max_tokens, log_dir=log_dir) for m in args.models]
    print(f"\nload average before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f}; server logs in {log_dir}\n")
    print("| model | load s | prompt tok/s | gen tok/s | median s/question | median prompt tokens | EM |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['model']} | {r['load_s']} | {r['prompt_tps']} | {r['gen_tps']} | {r['s_per_question']} "
            f"| {r['prompt_tokens']} | {r['em']:.2f} ({r['n']}) |"
        )
    if args.out:
        args.out.write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))


if __name__ == "__main__":
    main()
