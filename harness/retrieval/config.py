"""Retriever settings: `SearchConfig` (what `session_search` does and returns), presets and the speaker prior.

The Hydra files in configs/retrieval/ instantiate these; `preset(name)` reads the same file in code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.settings import CONFIG_FILE, check_fields, group_default, group_field

MODES = ("dense", "hybrid", "keyword")
NEUTRAL_RANKINGS = ("propagate", "plain", "pair", "interleave_assistant", "interleave_user")


def _default(key: str, **spec: Any) -> Any:
    """A setting whose default is configs/search/default.yaml's (every preset starts from that file)."""
    return group_field("search", "default", key, **spec)


@dataclass(frozen=True)
class SearchConfig:
    """How `session_search` retrieves and what it returns. Each setting's default is configs/search/default.yaml's;
    the presets in configs/retrieval/ start from that file and list only what they set otherwise (the run
    fingerprint leaves out a setting at its default: runners/fingerprint.py)."""

    name: str = _default("name")
    # used when the model omits or garbles search_mode
    default_mode: str = _default("default_mode", choices=MODES)
    # False: "keyword" maps to the default, as in the reference
    allow_keyword_mode: bool = _default("allow_keyword_mode")
    # hybrid mode: "rrf" (reference) or "score" (BM25/max + alpha·cosine)
    fusion: str = _default("fusion", choices=("rrf", "score"))
    alpha: float = _default("alpha", minimum=0)
    # Speaker prior for first-person queries ("what did I ..."): weight of assistant messages, and the
    # share of an assistant reply's score credited to the user message before it. 1.0 / 0.0 = off.
    assistant_weight: float = _default("assistant_weight", minimum=0)
    propagate: float = _default("propagate", minimum=0)
    # When the prior applies: "pronouns" = only for first-person queries; "user" = also for queries with no
    # person cue (keyword queries such as "yoga classes"), the second person still flipping it.
    speaker_prior: str = _default("speaker_prior", choices=("pronouns", "user"))
    # Recall cues ("you mentioned", "our previous chat": the hand-written `recall_cue` pattern): the query asks what
    # the assistant said, even when it also says "I"/"me" ("can you remind me what you recommended"); such queries
    # flip the prior to the assistant and get no reply→question propagation. Off in the reference presets.
    recall_cues: bool = _default("recall_cues")
    # A query that favours neither speaker (speaker_weights gives equal weights, e.g. "can you remind me what
    # you said" without a recall cue, or "can you suggest ... for me"): "propagate" = reply→question credit as
    # for a first-person query; "plain" = no credit; "pair" = a question and its reply each credited with the
    # other's full score; "interleave_assistant" / "interleave_user" = the best assistant messages (own score)
    # and the best user messages (with reply credit) alternate, that speaker first: the query does not say
    # whose words hold the answer, so the response carries the best of both.
    neutral_ranking: str = _default("neutral_ranking", choices=NEUTRAL_RANKINGS)
    # compact, for such a query: how many top hits go out whole (None: `top_hits`)
    neutral_top_hits: int | None = _default("neutral_top_hits", minimum=0)
    candidate_ratio: int = _default("candidate_ratio", minimum=1)
    rrf_k: int = _default("rrf_k", minimum=1)
    # True: plainto_tsquery AND semantics (reference FTS)
    keyword_require_all: bool = _default("keyword_require_all")
    # keyword analyzer's list: "lucene" (bm25s' English list; keeps pronouns: measured better) or "snowball"
    # (PostgreSQL english)
    stopwords: str = _default("stopwords")
    # reference quirk: keep only hits among the last `visible_events` events
    tail_filter: bool = _default("tail_filter")
    visible_events: int = _default("visible_events", minimum=1)
    # substring scan when the (filtered) search found nothing
    lexical_fallback: bool = _default("lexical_fallback")
    expand_top: int = _default("expand_top", minimum=0)  # hits that carry a context window
    window: int = _default("window", minimum=0)  # messages before/after in that window
    snippet_chars: int = _default("snippet_chars", minimum=1)
    wire_exact_schema: bool = _default("wire_exact_schema")  # send the schema exactly as the reference did
    # "reference": the reference's response shape. "compact": hits only (event_id, role, score, snippet),
    # each snippet the hit's full text or, when long, a query-focused excerpt, within `budget_chars` in all.
    response_style: str = _default("response_style", choices=("reference", "compact"))
    budget_chars: int = _default("budget_chars", minimum=80)
    hit_chars: int = _default("hit_chars", minimum=80)
    # compact: the first `top_hits` hits whole up to this length (None: off)
    top_hit_chars: int | None = _default("top_hit_chars", minimum=80)
    top_hits: int = _default("top_hits", minimum=0)
    # compact, for a recall query (`recall_cue`: what the assistant said, long replies, and the evidence is the
    # reply itself): budget and per-hit cap become this (None: unchanged).
    recall_chars: int | None = _default("recall_chars", minimum=80)
    # The response budget (issue 40), in o200k tokens, every preset: the response keeps its entries in order while the
    # whole JSON stays within it (an entry that does not fit is left out, keeping the context messages that fit; a
    # later, shorter one still gets its chance). None: the preset's own response, unbounded (every shipped preset).
    budget_tokens: int | None = _default("budget_tokens", minimum=50)
    # compact, with `budget_tokens`: the preset of configs/retrieval/ whose response to the same call at the same budget
    # (its ranking over this index, in its default mode) is held whole, its hits first; this preset's own hits get the
    # rest (harness/retrieval/floor.py, docs/retrieval.md "The response budget"). None: this preset's response, cut.
    budget_fill: str | None = _default("budget_fill")

    def __post_init__(self) -> None:
        check_fields(self, "SearchConfig")  # ranges and choices: the declarations above
        from harness.retrieval.keyword import STOPWORDS  # bm25s: imported when a retriever is built, not before

        if self.stopwords not in STOPWORDS:
            raise ValueError(f"SearchConfig.stopwords must be one of {sorted(STOPWORDS)}, got {self.stopwords!r}")
        if (
            self.budget_fill is not None
            and not (CONFIG_FILE.parent / "retrieval" / f"{self.budget_fill}.yaml").exists()
        ):
            known = sorted(p.stem for p in (CONFIG_FILE.parent / "retrieval").glob("*.yaml"))
            raise ValueError(
                f"SearchConfig.budget_fill must be a retrieval preset {known} or null, got {self.budget_fill!r}"
            )


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
    query: str, assistant_weight: float, mode: str = "pronouns", *, recall: bool = False
) -> tuple[float, float]:
    """(user weight, assistant weight) for a query: a first-person question asks what the user said;
    a second-person one ("what did you recommend") what the assistant said; a query with both or (in
    "pronouns" mode) neither gets no preference, while "user" mode leans to the user when neither.
    `recall`: the query recalls the assistant's words (`recall_cue`): then the assistant, whatever the pronouns."""
    if assistant_weight == 1.0:
        return 1.0, 1.0
    if recall:
        return assistant_weight, 1.0
    first, second = bool(_FIRST_PERSON.search(query)), bool(_SECOND_PERSON.search(query))
    if second and not first:
        return assistant_weight, 1.0
    if first and not second or (mode == "user" and not first and not second):
        return 1.0, assistant_weight
    return 1.0, 1.0


def preset_node(name: str) -> DictConfig:
    """configs/retrieval/<name>.yaml as Hydra composes it into `retrieval` (its defaults list applied), for code
    that instantiates a preset outside a composed run (retrieval-eval, studies)."""
    path = CONFIG_FILE.parent / "retrieval" / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ValueError(f"unknown retrieval preset {name!r}; known: {known}")
    node = OmegaConf.load(path)
    if not isinstance(node, DictConfig):
        raise ValueError(f"retrieval preset {name!r}: {path} is not a mapping")
    entries = node.pop("defaults", [])
    base: dict[str, Any] = {}
    for entry in entries:
        if entry == "_self_":
            continue
        # the one form the presets use: `/<group>@<key>: <option>` (that file placed under `key`)
        (spec, option), *rest = dict(entry).items() if isinstance(entry, DictConfig) else [(None, None)]
        group, _, key = str(spec).lstrip("/").partition("@")
        if rest or not key or "/" in group + key:
            raise ValueError(f"{path}: defaults entry {entry!r} is not of the form '/<group>@<key>: <option>'")
        base[key] = OmegaConf.load(CONFIG_FILE.parent / group / f"{option}.yaml")
    out = OmegaConf.merge(base, node)
    assert isinstance(out, DictConfig)
    return out


def preset(name: str, /, **overrides: Any) -> SearchConfig:
    """The `config:` of configs/retrieval/<name>.yaml as a `SearchConfig` (the presets are declared there once)."""
    try:
        node = group_default("retrieval", name, "config")
    except (FileNotFoundError, KeyError):
        known = sorted(p.stem for p in (CONFIG_FILE.parent / "retrieval").glob("*.yaml"))
        raise ValueError(f"unknown retrieval preset {name!r}; known: {known}") from None
    values = {k: v for k, v in node.items() if k != "_target_"}
    return SearchConfig(**{**values, **overrides})
