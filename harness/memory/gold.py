"""Gold-label retrieval recall for black-box memory providers: which returned items carry the case's evidence.

The evidence is LongMemEval's own labels, as the retrieval evaluation uses them (harness/retrieval/evaluation.py):
the turns marked `has_answer`, and the sessions holding such a turn. No language model is involved.

Mapping rule, one item at a time (docs/memory-contract.md "Measurements"):
1. Provenance naming a known (session id, turn index): the item is that turn.
2. Provenance naming a known session only: the item is in that session; which of its turns it holds is decided
   by text overlap (3) among that session's turns.
3. No usable provenance: text overlap against every turn. An item and a turn match when they share at least
   `MIN_SHARED` distinct content words (lower-cased letter/digit runs, a few function words left out) and those
   are at least `OVERLAP` of the turn's words (the item holds the turn: a chunk, a whole session) or of the
   item's words (the turn holds the item: a fact extracted from it), and at least one of the shared words is not
   in the question (`overlaps`' `query`): a match that rests on the question's own words alone is an echo of it.
Before any of these, an item that echoes the question (`echoes`: equal to it, a part of it, or at least
`ECHO_SHARE` of its distinct content words the question's) is labelled `echo` and holds no turn, whatever its
provenance says: a provider that hands the question back has retrieved nothing.
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
# "Mostly made of the question": at least this share of an item's distinct content words are the question's.
ECHO_SHARE = 0.8
# Function words shared by almost any two English texts: left out so that they cannot make a match alone.
STOPWORDS = frozenset(
    "a an and are as at be but by can do for from had has have he her his i if in is it its me my of on or our "
    "she so that the their them they this to was we were what when which who will with you your".split()
)


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in tokenize(text) if w not in STOPWORDS)


def overlaps(item: frozenset[str], turn: frozenset[str], query: frozenset[str] = frozenset()) -> bool:
    """The stated rule: ≥ MIN_SHARED shared words, ≥ OVERLAP of the turn's or of the item's words, and one shared
    word at least that the question (`query`, its content words) does not hold."""
    common = item & turn
    shared = len(common)
    return (
        shared >= MIN_SHARED
        and (shared >= OVERLAP * len(turn) or shared >= OVERLAP * len(item))
        and not common <= query
    )


def echoes(text: str, query: str) -> bool:
    """Whether an item is the question handed back rather than anything retrieved: every token of it is one of the
    question's (equal to it, or a part of it, in any order; case and punctuation aside), or at least ECHO_SHARE of
    its distinct content words are the question's (the question with a word or two changed or added)."""
    tokens = set(tokenize(text))
    if not tokens:
        return False
    if tokens <= set(tokenize(query)):
        return True
    own = words(text)
    return bool(own) and len(own & words(query)) >= ECHO_SHARE * len(own)


@dataclass(frozen=True)
class GoldTurn:
    session_id: str
    index: int
    words: frozenset[str]
    evidence: bool  # has_answer


@dataclass(frozen=True)
class Label:
    # "provenance" | "overlap" | "none" (matched nothing) | "echo" (the question handed back) |
    # "other_case" (another case's history: a cross-unit leak, harness/memory/isolation.py)
    by: str
    turns: frozenset[tuple[str, int]]
    sessions: frozenset[str]
    other_case: str | None = None  # the case it came from (by == "other_case")

    def record(self, gold: Gold) -> dict[str, Any]:
        out = {"by": self.by, "evidence_session": gold.hits_session(self), "evidence_turn": gold.hits_turn(self)}
        if self.other_case is not None:
            out["other_case"] = self.other_case
        return out


ECHO = Label("echo", frozenset(), frozenset())


def from_other_case(case: str) -> Label:
    """The label of an item from another case's history: it holds no turn of this case, whatever its text."""
    return Label("other_case", frozenset(), frozenset(), case)


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

    def label(self, text: str, provenance: Any = None, query: str | None = None) -> Label:
        """The item's label by the module's rule; `provenance` in the dataset's ids (the contestant maps the
        provider's opaque ones back first); `query` the question it was retrieved for (None: not a retrieval)."""
        if query is not None and echoes(text, query):
            return ECHO
        sid = getattr(provenance, "session_id", None)
        idx = getattr(provenance, "turn_index", None)
        if sid is not None and (sid, idx) in self.by_key:
            return Label("provenance", frozenset({(sid, idx)}), frozenset({sid}))  # type: ignore[arg-type]
        pool = [t for t in self.turns if t.session_id == sid] if sid in self.session_ids else self.turns
        w, q = words(text), words(query or "")
        hit = frozenset((t.session_id, t.index) for t in pool if overlaps(w, t.words, q))
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


__all__ = [
    "ECHO",
    "ECHO_SHARE",
    "MIN_SHARED",
    "OVERLAP",
    "Gold",
    "Label",
    "echoes",
    "from_other_case",
    "overlaps",
    "recall_record",
    "words",
]
