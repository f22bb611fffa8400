"""Summaries for the benchmark, through the engine's content-keyed summary cache.

By default one generation per case serves both summary modes; `share_across_modes=false`
regenerates per mode, as the reference run did (its two summaries differed). The store lives in
the run directory, so an interrupted run resumes without regenerating summaries.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any

from harness.llm.types import SaltedModel
from harness.session.events import Session
from harness.session.store import CachedSummaries, Store
from harness.session.summary import Summarizer, SummaryOutcome


@dataclass
class ProvidedSummary:
    outcome: SummaryOutcome
    generated_for: str
    reused: bool  # served by this run's earlier generation (the other mode, or a resumed run)

    @property
    def summary(self):
        return self.outcome.summary

    def record(self) -> dict[str, Any]:
        s = self.outcome.summary
        assert s is not None, "a generation outcome without a summary is never recorded"
        b = s.boundary
        return {
            "text": s.text,
            "chars": len(s.text),  # code points
            "bytes": len(s.text.encode("utf-8")),  # the reference's SummaryChars: Go len() counts UTF-8 bytes
            "boundary": {
                "version": b.version,
                "filter_key": b.filter_key,
                "cutoff_at": b.cutoff_at,
                "last_event_id": b.last_event_id,
            },
            "generated_for": self.generated_for,
            "reused": self.reused,
            "chunks": self.outcome.chunks,
            "input_events": self.outcome.input_events,
            "build_ms": round(self.outcome.duration_s * 1000, 1),
            # model time of the generation calls, as measured (also when replayed from a cache)
            "generation_ms": round(sum(c.latency_s for c in self.outcome.calls) * 1000, 1),
            # Generation calls are attributed once, to the mode that generated the summary.
            "calls": [] if self.reused else [c.to_record() for c in self.outcome.calls],
            # only when the bound was hit: events cut to summarizer.max_event_chars for the summary request
            **({"truncated_events": self.outcome.truncated_events} if self.outcome.truncated_events else {}),
        }


class SummaryProvider:
    def __init__(self, summarizer: Summarizer, store: Store, share_across_modes: bool = True):
        self.share = share_across_modes
        self._summarizer = summarizer
        self._store = store
        self._per_mode: dict[str, CachedSummaries] = {}
        self._owner: dict[tuple[str, str], str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _cached(self, mode: str) -> CachedSummaries:
        key = "*" if self.share else mode
        with self._guard:
            if key not in self._per_mode:
                s = self._summarizer
                if not self.share:
                    s = copy.copy(s)
                    s.model = SaltedModel(s.model, f"summary-for:{mode}")
                self._per_mode[key] = CachedSummaries(s, self._store, share_across_modes=self.share)
            return self._per_mode[key]

    def get(self, unit_id: str, session: Session, mode: str) -> ProvidedSummary:
        """The summary of `session` (case `unit_id`) for contestant `mode`: generated, or this run's earlier one."""
        qid = unit_id
        with self._guard:
            lock = self._locks.setdefault(qid, threading.Lock())
        with lock:
            outcome, hit = self._cached(mode).summarize(session, mode=mode, force=True)
            if outcome.summary is None:
                raise RuntimeError(f"{qid}: summarizer produced no summary ({outcome.skipped_reason})")
            owner_key = (qid, "*" if self.share else mode)
            with self._guard:
                owner = self._owner.setdefault(owner_key, mode)
            # A hit that this run's other mode produced is a reuse; a hit from an earlier (interrupted) run
            # is attributed to the generating mode again so the record keeps its generation cost.
            return ProvidedSummary(outcome, owner, reused=hit and owner != mode)

    def adopt(self, question_id: str, generated_for: str) -> None:
        """An earlier, interrupted run of this directory recorded this case's shared summary as generated
        for `generated_for`: the other mode then reports it as reused, exactly as in an uninterrupted run."""
        if self.share:
            with self._guard:
                self._owner.setdefault((question_id, "*"), generated_for)

    def forget(self, question_id: str) -> None:
        with self._guard:
            self._locks.pop(question_id, None)
