"""How long `lme_official` takes to fit a long history into the model's window: the one-count-per-dropped-session
definition against `runners.official_mode.first_kept`, on the first N `_s` single-session-user haystacks
(~115K o200k tokens each), for an 8K window (8192 - 384 answer tokens - 64 reserved). Both must keep the same sessions.

    python -m research.official_fit [N]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from harness.contestants.base import CaseHistory
from harness.contestants.official import first_kept, session_blocks
from harness.data.longmemeval import Case, find_local, parse_cases, read_json_bytes
from harness.session.events import Session
from harness.session.tokens import o200k_counter

BUDGET = 8192 - 384 - 64


def one_count_per_drop(
    blocks: Sequence[str], prompt: Callable[[list[str]], str], count: Callable[[str], int], budget: int
) -> int:
    i = 0
    while i < len(blocks) - 1 and count(prompt(list(blocks[i:]))) > budget:
        i += 1
    return i


def prompt_of(case: Case) -> Callable[[list[str]], str]:
    """The prompt a fit counts: the kept sessions, then the question."""

    def prompt(kept: list[str]) -> str:
        return "".join(kept) + case.question

    return prompt


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    path = find_local("longmemeval_s_single_session_user.json.gz")
    if path is None:
        sys.exit("longmemeval_s_single_session_user.json.gz not found: set LME_DATA_DIR")
    cases = parse_cases(read_json_bytes(path), str(path))[:n]
    count = o200k_counter().count
    print("| fit | s per case | sessions kept (all cases) |\n|---|---|---|")
    for fit in (one_count_per_drop, first_kept):
        kept, t0 = [], time.perf_counter()
        for case in cases:
            blocks = session_blocks(CaseHistory.of(case, Session(id="s", user_id=case.question_id)).sessions)
            kept.append(len(blocks) - fit(blocks, prompt_of(case), count, BUDGET))
        print(f"| {fit.__name__} | {(time.perf_counter() - t0) / len(cases):.3f} | {kept} |")


if __name__ == "__main__":
    main()
