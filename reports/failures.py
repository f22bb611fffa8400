"""Failed or errored (case, mode) pairs grouped by their error: one row per distinct message, not per pair.

A dead endpoint fails every pair with the same message; the report shows it once, with a count and the pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from reports.sections import Note, Section, Table, num, text


@dataclass
class FailureGroup:
    status: str
    error: str  # whitespace collapsed
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (question_id, mode), sorted

    @property
    def count(self) -> int:
        return len(self.pairs)

    def pairs_text(self, limit: int | None = None) -> str:
        """The pairs as `qid / mode, ...`; all of them unless `limit` (every failed pair stays findable)."""
        shown = ", ".join(f"{q} / {m}" for q, m in self.pairs[:limit])
        return shown + (f", … and {self.count - limit} more" if limit is not None and self.count > limit else "")


def group_failures(df: pd.DataFrame) -> list[FailureGroup]:
    """Rows of `df` (the records frame) that failed or carry an error, grouped by (status, error message);
    the largest group first."""
    if df.empty or "status" not in df:
        return []
    errors = df["error"] if "error" in df else pd.Series(None, index=df.index)
    bad = df[(df["status"] != "ok") | errors.notna()]
    groups: dict[tuple[str, str], FailureGroup] = {}
    for qid, mode, status, error in zip(bad["question_id"], bad["mode"], bad["status"], errors[bad.index]):
        text = " ".join(str(error).split()) if error is not None and not pd.isna(error) else "(no error message)"
        g = groups.setdefault((str(status), text), FailureGroup(str(status), text))
        g.pairs.append((str(qid), str(mode)))
    for g in groups.values():
        g.pairs.sort()
    return sorted(groups.values(), key=lambda g: (-g.count, g.status, g.error))


def failures_section(df: pd.DataFrame, max_error: int = 300) -> Section | None:
    """The report's "Failed or errored cases" section: one row per distinct error, with its count and pairs (None
    when nothing failed). An error is shown to `max_error` characters; each case's drill-down has it whole."""
    groups = group_failures(df)
    if not groups:
        return None
    n = sum(g.count for g in groups)
    note = (
        f"{n} (case, mode) pairs, {len(groups)} distinct error{'s' if len(groups) != 1 else ''}. "
        "`failed`: not scored (retried on the next run); `scoring_failed`: answered, but scoring failed (e.g. the "
        "judge endpoint): no metric counted, scored again by the next run; `ok` with an error: scored as the "
        "reference scores it."
    )
    rows = [[num(g.count), text(g.status), text(g.error[:max_error]), text(g.pairs_text())] for g in groups]
    table = Table(["count", "status", "error", "(question_id / mode)"], rows, "failures")
    return Section("failures", "Failed or errored cases", [Note(note), table])
