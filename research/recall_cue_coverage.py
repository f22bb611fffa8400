"""How often the default retriever's recall cue (harness.retrieval.config.recall_cue) fires, per question type and
split: the development half of `_s` (where the cue list was written), the 70 single-session-user questions, and the
other oracle questions, whose `_s` haystacks are held out (a check only: nothing is tuned on it).

    python -m research.recall_cue_coverage [DATA_DIR]
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

from harness.retrieval.config import recall_cue


def main() -> None:
    data = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/data/longmemeval")
    dev = {q["question_id"] for q in json.load(gzip.open(data / "longmemeval_s_dev.json.gz"))}
    counts: Counter = Counter()
    for q in json.load(gzip.open(data / "longmemeval_oracle.json.gz")):
        t = q["question_type"]
        split = "dev" if q["question_id"] in dev else ("ssu70" if t == "single-session-user" else "held-out")
        counts[(t, split)] += 1
        counts[(t, split, "cue")] += recall_cue(q["question"])
    print("| type | split | questions | recall cue fires |\n|---|---|---|---|")
    for t, split in sorted(k for k in counts if len(k) == 2):
        print(f"| {t} | {split} | {counts[(t, split)]} | {counts[(t, split, 'cue')]} |")


if __name__ == "__main__":
    main()
