"""Summaries for the benchmark: one generation per case shared by the summary modes (default),
or one per mode as the reference run did (`share_across_modes=false`)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from harness.session.summary import Summarizer, SummaryOutcome


@dataclass
class ProvidedSummary:
    outcome: SummaryOutcome
    generated_for: str  # the mode whose request generated it
    reused: bool

    @property
    def summary(self):
        return self.outcome.summary

    def record(self) -> dict[str, Any]:
        s = self.outcome.summary
        calls = [] if self.reused else [c.to_record() for c in self.outcome.calls]
        return {
            "text": s.text,
            "chars": len(s.text),
            "boundary": {"version": s.boundary.version, "filter_key": s.boundary.filter_key,
                         "cutoff_at": s.boundary.cutoff_at, "last_event_id": s.boundary.last_event_id},
            "generated_for": self.generated_for,
            "reused": self.reused,
            "chunks": self.outcome.chunks,
            "build_ms": 0.0 if self.reused else round(self.outcome.duration_s * 1000, 1),
            "calls": calls,  # generation calls are attributed to the mode that generated them, once
        }


class SummaryProvider:
    def __init__(self, summarizer: Summarizer, share_across_modes: bool = True):
        self.summarizer = summarizer
        self.share = share_across_modes
        self._memo: dict[tuple[str, str], ProvidedSummary] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, ctx: Any, mode: str) -> ProvidedSummary:
        qid = ctx.case.question_id
        key = (qid, "*" if self.share else mode)
        with self._guard:
            lock = self._locks.setdefault(qid, threading.Lock())
        with lock:
            if key in self._memo:
                prev = self._memo[key]
                return ProvidedSummary(prev.outcome, prev.generated_for, reused=True)
            outcome = self.summarizer.summarize(ctx.session, None, force=True)
            if outcome.summary is None:
                raise RuntimeError(f"{qid}: summarizer produced no summary ({outcome.skipped_reason})")
            got = ProvidedSummary(outcome, mode, reused=False)
            self._memo[key] = got
            return got

    def forget(self, question_id: str) -> None:
        with self._guard:
            for k in [k for k in self._memo if k[0] == question_id]:
                del self._memo[k]
