"""Gold-label retrieval recall for black-box memory providers: which returned items carry the case's evidence.

The evidence is LongMemEval's own labels, as the retrieval evaluation uses them (harness/retrieval/evaluation.py):
the turns marked `has_answer`, and the sessions holding such a turn. No language model is involved.

Mapping rule, one item at a time (docs/memory-systems.md "Measurements"):
1. Provenance naming a known (session id, turn index): the item is that turn.
2. Provenance naming a known session only: the item is in that session; which of its turns it holds is decided
   by text overlap (3) among that session's turns.
3. No usable provenance: text overlap against every turn. An item and a turn match when they share at least
   `MIN_SHARED` distinct content words (lower-cased letter/digit runs, a few function words left out) and those
   are at least `OVERLAP` of the turn's words (the item holds the turn: a chunk, a whole session) or of the
   item's words (the turn holds the item: a fact extracted from it).
An item cut by the context cap counts as shown to the reader only when its kept text still matches (rule 3, within
the provenance session when named). recall_any@k (as evaluation.py defines it): an evidence turn (session) is
among the first k items the reader could be shown (items dated after the question already dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.retrieval.evaluation import KS
from harness.scoring.lexical import tokenize

OVERLAP = 0.5
MIN_SHARED = 3
# Function words shared by almost any two English texts: left out so that they cannot make a match alone.
STOPWORDS = frozenset(
    "a an and are as at be but by can do for from had has have he her his i if in is it its me my of on or our "
    "she so that the their them they this to was we were what when which who will with you your".split()
)


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in tokenize(text) if w not in STOPWORDS)


def overlaps(item: frozenset[str], turn: frozenset[str]) -> bool:
    """The stated rule: ≥ MIN_SHARED shared words, and ≥ OVERLAP of the turn's or of the item's words."""
    shared = len(item & turn)
    return shared >= MIN_SHARED and (shared >= OVERLAP * len(turn) or shared >= OVERLAP * len(item))


@dataclass(frozen=True)
class GoldTurn:
    session_id: str
    index: int
    words: frozenset[str]
    evidence: bool  # has_answer


@dataclass(frozen=True)
class Label:
    by: str  # "provenance" | "overlap" | "none" (matched nothing)
    turns: frozenset[tuple[str, int]]
    sessions: frozenset[str]

    def record(self, gold: Gold) -> dict[str, Any]:
        return {"by": self.by, "evidence_session": gold.hits_session(self), "evidence_turn": gold.hits_turn(self)}


class Gold:
    """A case's evidence labels, kept by the contestant for its unit; never sent to the provider or the reader."""

    def __init__(self, sessions: Sequence[tuple[str, Sequence[tuple[str, bool]]]]) -> None:
        """`sessions`: (session id, [(turn text, has_answer), ...]) in the history's order."""
        self.turns = [
            GoldTurn(sid, i, words(text), bool(ev)) for sid, turns in sessions for i, (text, ev) in enumerate(turns)
        ]
        self.by_key = {(t.session_id, t.index): t for t in self.turns}
        self.session_ids = {t.session_id for t in self.turns}
        self.evidence_turns = {(t.session_id, t.index) for t in self.turns if t.evidence}
        self.evidence_sessions = {sid for sid, _ in self.evidence_turns}

    @classmethod
    def of(cls, history: Any) -> Gold:
        """From a CaseHistory (harness/contestants/base.py): its dated sessions and their dataset turns."""
        return cls([(s.session_id, [(t.content, t.has_answer) for t in s.turns]) for s in history.sessions])

    def label(self, text: str, provenance: Any = None) -> Label:
        sid = getattr(provenance, "session_id", None)
        idx = getattr(provenance, "turn_index", None)
        if sid is not None and (sid, idx) in self.by_key:
            return Label("provenance", frozenset({(sid, idx)}), frozenset({sid}))  # type: ignore[arg-type]
        pool = [t for t in self.turns if t.session_id == sid] if sid in self.session_ids else self.turns
        w = words(text)
        hit = frozenset((t.session_id, t.index) for t in pool if overlaps(w, t.words))
        if sid in self.session_ids:
            return Label("provenance", hit, frozenset({sid}))  # type: ignore[arg-type]
        return Label("overlap" if hit else "none", hit, frozenset(s for s, _ in hit))

    def hits_turn(self, label: Label) -> bool:
        return bool(label.turns & self.evidence_turns)

    def hits_session(self, label: Label) -> bool:
        return bool(label.sessions & self.evidence_sessions)

    def recall(self, labels: Sequence[Label], ks: Sequence[int], prefix: str = "") -> dict[str, float | None]:
        """recall_any@k over turns and sessions (None when the case has no evidence labels)."""
        out: dict[str, float | None] = {}
        for k in ks:
            top = labels[:k]
            out[f"{prefix}turn_recall_any@{k}"] = (
                float(any(self.hits_turn(x) for x in top)) if self.evidence_turns else None
            )
            out[f"{prefix}session_recall_any@{k}"] = (
                float(any(self.hits_session(x) for x in top)) if self.evidence_sessions else None
            )
        return out


def recall_record(
    gold: Gold, labels: Sequence[Label], top_k: int, shown: Sequence[Label] | None = None
) -> dict[str, Any]:
    """A retrieval's `gold` in the record: evidence counts, recall_any@k for k in evaluation.KS up to top_k and
    at top_k, and whether evidence reached the reader (`shown`: the labels of the items kept under the cap)."""
    ks = sorted({k for k in KS if k < top_k} | {top_k})
    out: dict[str, Any] = {
        "evidence_sessions": len(gold.evidence_sessions),
        "evidence_turns": len(gold.evidence_turns),
        **gold.recall(labels, ks),
    }
    if shown is not None:
        out["shown_evidence_turn"] = any(gold.hits_turn(x) for x in shown) if gold.evidence_turns else None
        out["shown_evidence_session"] = any(gold.hits_session(x) for x in shown) if gold.evidence_sessions else None
    return out


__all__ = ["MIN_SHARED", "OVERLAP", "Gold", "Label", "overlaps", "recall_record", "words"]
