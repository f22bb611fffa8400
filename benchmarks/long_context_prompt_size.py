"""Measure the long_context prompt size (o200k_base tokens) of LongMemEval cases, with no model call.

The prompt is the reference's: system instruction + one chat message per turn + the question,
counted with 3 tokens of chat overhead per message (as OpenAI bills chat prompts).

    python benchmarks/long_context_prompt_size.py [--dataset PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness.data.longmemeval import find_local, parse_cases, read_json_bytes, select
from harness.prompts.answer import LME_INSTRUCTION
from harness.session.tokens import o200k_counter

REPLY_PRIMING = 3  # OpenAI adds 3 tokens priming the assistant reply to every chat prompt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--dataset", default=None, help="default: longmemeval_s_single_session_user.json.gz in the data dirs"
    )
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    path = args.dataset or find_local("longmemeval_s_single_session_user.json.gz")
    if path is None:
        raise SystemExit("dataset not found; pass --dataset PATH")
    cases = select(parse_cases(read_json_bytes(path), str(path)), ["single-session-user"], args.limit)
    counter = o200k_counter()
    t0 = time.time()
    sizes = []
    for c in cases:
        msgs = [
            {"role": "system", "content": LME_INSTRUCTION},
            *(e.to_message() for e in c.events()),
            {"role": "user", "content": c.question},
        ]
        sizes.append(counter.count_messages(msgs) + REPLY_PRIMING)
    print(f"dataset: {path}")
    print(f"cases: {len(sizes)}")
    print(f"mean long_context prompt tokens (o200k_base): {statistics.mean(sizes):,.1f}")
    print(f"median: {statistics.median(sizes):,.0f}  min: {min(sizes):,}  max: {max(sizes):,}")
    print("published (gpt-4o-mini usage.prompt_tokens): 103,565")
    print(f"elapsed: {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
