"""Measure the long_context prompt size (o200k_base tokens) of LongMemEval cases, with no model call.

The prompt is the one `mode=long_context` sends: system instruction + one chat message per turn from the first
user turn on (the newest `mode.long_context.max_events`) + the question. Counted by two rules:

- published (`api_prompt_tokens`, OpenAI's counting guide, which gpt-4o-mini's `usage.prompt_tokens` follows):
  3 + the role's tokens + the content's per message, then 3 priming the reply;
- harness (`count_messages`, what the harness budgets windows with and records as estimated_prompt_tokens):
  3 + the content's tokens per message, nothing per prompt.

    python -m research.long_context_prompt_size [--dataset PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness.data.longmemeval import find_local, parse_cases, read_json_bytes, select
from harness.prompts.answer import LME_INSTRUCTION
from harness.session.summary import drop_leading_non_user
from harness.session.tokens import api_prompt_tokens, o200k_counter
from harness.settings import group_default

PUBLISHED_MEAN = 103_565  # the reference report's long_context prompt tokens (gpt-4o-mini usage.prompt_tokens)


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
    max_events = group_default("mode", "long_context", "max_events")
    counter = o200k_counter()
    t0 = time.time()
    sizes: dict[str, list[int]] = {"published": [], "harness": []}
    dropped = 0
    for c in cases:
        events = c.events()
        shown = drop_leading_non_user(events[-max_events:] if max_events else events)
        dropped += len(events) - len(shown)
        msgs = [
            {"role": "system", "content": LME_INSTRUCTION},
            *(e.to_message() for e in shown),
            {"role": "user", "content": c.question},
        ]
        sizes["published"].append(api_prompt_tokens(counter, msgs))
        sizes["harness"].append(counter.count_messages(msgs))
    print(f"dataset: {path}")
    print(f"cases: {len(cases)}  events before the first user turn (not sent): {dropped}")
    for rule, xs in sizes.items():
        mean = statistics.mean(xs)
        print(
            f"{rule} rule: mean {mean:,.1f}  median {statistics.median(xs):,.0f}  min {min(xs):,}  max {max(xs):,}"
            f"  vs published {PUBLISHED_MEAN:,}: {100 * (mean / PUBLISHED_MEAN - 1):+.2f} %"
        )
    print(f"elapsed: {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
