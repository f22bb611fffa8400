"""Retriever settings: `SearchConfig` (what `session_search` does and returns), presets and the speaker prior.

The Hydra files in configs/retrieval/ instantiate these; `preset(name)` builds the same values in code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from harness.retrieval import text as tx

MODES = ("dense", "hybrid", "keyword")


@dataclass(frozen=True)
class SearchConfig:
    """How `session_search` retrieves and what it returns. Presets live in configs/retrieval/."""

    name: str = "hybrid"
    default_mode: str = "hybrid"  # used when the model omits or garbles search_mode
    allow_keyword_mode: bool = True  # False: "keyword" maps to the default, as in the reference
    fusion: str = "rrf"  # hybrid mode: "rrf" (reference) or "score" (BM25/max + alpha·cosine)
    alpha: float = 1.0
    # Speaker prior for first-person queries ("what did I ..."): weight of assistant messages, and the
    # share of an assistant reply's score credited to the user message before it. 1.0 / 0.0 = off.
    assistant_weight: float = 1.0
    propagate: float = 0.0
    # When the prior applies: "pronouns" = only for first-person queries; "user" = also for queries with no
    # person cue (keyword queries such as "yoga classes"), the second person still flipping it.
    speaker_prior: str = "pronouns"
    # Recall cues ("you mentioned", "our previous chat"): the query asks what the assistant said, even when it
    # also says "I"/"me" ("can you remind me what you recommended"); such queries flip the prior to the
    # assistant and get no reply→question propagation. Off in the reference presets.
    recall_cues: bool = False
    # Turn-pair scoring: share of a user message's score credited to the assistant reply right after it (the
    # mirror of `propagate`), so a reply is found through the question it answers. 0.0 = off.
    propagate_back: float = 0.0
    # Recency: scores × (1 + recency · t), t the message's time scaled to [0, 1] over the searched messages,
    # so of two near-equal hits the later one (the updated fact) ranks first. 0.0 = off.
    recency: float = 0.0
    candidate_ratio: int = 3
    rrf_k: int = 60
    keyword_require_all: bool = False  # True: plainto_tsquery AND semantics (reference FTS)
    stopwords: str = "lucene"  # keyword analyzer's list: "lucene" (bm25s) or "snowball" (PostgreSQL english)
    tail_filter: bool = False  # reference quirk: keep only hits among the last `visible_events` events
    visible_events: int = 20
    lexical_fallback: bool = True  # substring scan when the (filtered) search found nothing
    expand_top: int = 2  # hits that carry a context window
    window: int = 2  # messages before/after in that window
    context_chars: int | None = None  # None: full text (reference); else cut each window message
    snippet_chars: int = tx.MAX_SNIPPET
    wire_exact_schema: bool = True  # send the schema exactly as the reference did
    # "reference": the reference's response shape. "compact": hits only (event_id, role, score, snippet),
    # each snippet the hit's full text or, when long, a query-focused excerpt, within `budget_chars` in all.
    response_style: str = "reference"
    budget_chars: int = 1800
    hit_chars: int = 700
    top_hit_chars: int | None = None  # compact: the first `top_hits` hits whole up to this length (None: off)
    top_hits: int = 1
    # compact, for a query with a recall cue (what the assistant said: long replies, and the evidence is the
    # reply itself): budget and per-hit cap become this (None: unchanged).
    recall_chars: int | None = None

    def __post_init__(self) -> None:
        if self.default_mode not in MODES:
            raise ValueError(f"SearchConfig.default_mode must be one of {MODES}, got {self.default_mode!r}")
        for name in ("candidate_ratio", "rrf_k", "visible_events", "snippet_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"SearchConfig.{name} must be ≥ 1, got {getattr(self, name)}")
        from harness.retrieval.keyword import STOPWORDS

        if self.stopwords not in STOPWORDS:
            raise ValueError(f"SearchConfig.stopwords must be one of {sorted(STOPWORDS)}, got {self.stopwords!r}")
        if self.speaker_prior not in ("pronouns", "user"):
            raise ValueError(f"SearchConfig.speaker_prior must be 'pronouns' or 'user', got {self.speaker_prior!r}")
        if self.fusion not in ("rrf", "score"):
            raise ValueError(f"SearchConfig.fusion must be 'rrf' or 'score', got {self.fusion!r}")
        if self.response_style not in ("reference", "compact"):
            raise ValueError(
                f"SearchConfig.response_style must be 'reference' or 'compact', got {self.response_style!r}"
            )
        for name in ("budget_chars", "hit_chars", "top_hit_chars", "recall_chars"):
            v = getattr(self, name)
            if v is not None and v < 80:
                raise ValueError(f"SearchConfig.{name} must be ≥ 80 characters, got {v}")
        for name in ("propagate", "propagate_back", "recency"):
            if getattr(self, name) < 0:
                raise ValueError(f"SearchConfig.{name} must be ≥ 0, got {getattr(self, name)}")
        if self.top_hits < 0:
            raise ValueError(f"SearchConfig.top_hits must be ≥ 0, got {self.top_hits}")
        if self.expand_top < 0 or self.window < 0:
            raise ValueError("SearchConfig.expand_top and .window must be ≥ 0")


_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.I)
_SECOND_PERSON = re.compile(r"\b(you|you're|you've|your|yours|yourself)\b", re.I)
# The user recalling the assistant's own words: a past-tense verb after "you", or "our previous/last chat".
# Present-tense requests ("can you suggest") are not recall: they ask for new advice about the user.
_RECALL_CUE = re.compile(
    r"\byou(?:'d| had| have|'ve)? (?:\w+ )?(?:mentioned|said|told|recommended|suggested|provided|gave|listed|shared"
    r"|explained|described|noted|wrote|proposed|advised|remembered|made|came up with|pointed out)\b"
    r"|\bour (?:previous|last|earlier|past|prior) (?:conversation|chat|discussion|session|game)s?\b"
    r"|\bwe (?:talked|discussed|chatted)\b",
    re.I,
)


def recall_cue(query: str) -> bool:
    """Whether the query recalls something the assistant said ("you recommended", "our previous chat")."""
    return bool(_RECALL_CUE.search(query))


def speaker_weights(
    query: str, assistant_weight: float, mode: str = "pronouns", recall_cues: bool = False
) -> tuple[float, float]:
    """(user weight, assistant weight) for a query: a first-person question asks what the user said;
    a second-person one ("what did you recommend") what the assistant said; a query with both or (in
    "pronouns" mode) neither gets no preference, while "user" mode leans to the user when neither.
    With `recall_cues`, a recall cue (`recall_cue`) means the assistant whatever the pronouns."""
    if assistant_weight == 1.0:
        return 1.0, 1.0
    if recall_cues and recall_cue(query):
        return assistant_weight, 1.0
    first, second = bool(_FIRST_PERSON.search(query)), bool(_SECOND_PERSON.search(query))
    if second and not first:
        return assistant_weight, 1.0
    if first and not second or (mode == "user" and not first and not second):
        return 1.0, assistant_weight
    return 1.0, 1.0


def preset(name: str, /, **overrides: Any) -> SearchConfig:
    """Built-in presets (the Hydra configs in configs/retrieval/ mirror these)."""
    base = {
        "bm25": SearchConfig(name="bm25", default_mode="keyword"),
        "hybrid": SearchConfig(name="hybrid"),
        "trpc_parity": SearchConfig(
            name="trpc_parity",
            allow_keyword_mode=False,
            keyword_require_all=True,
            tail_filter=True,
            stopwords="snowball",
        ),
        "default": SearchConfig(
            name="default",
            fusion="score",
            alpha=1.0,
            assistant_weight=0.5,
            propagate=0.5,
            speaker_prior="user",
            response_style="compact",
            expand_top=0,
            wire_exact_schema=False,
            recall_cues=True,
            top_hit_chars=3000,
            top_hits=2,
            recall_chars=4000,
        ),
    }
    if name not in base:
        raise ValueError(f"unknown retrieval preset {name!r}; known: {sorted(base)}")
    return replace(base[name], **overrides)
