"""Text helpers of the reference recall tools: query variants, lexical scan scoring, snippets.

Behaviour follows trpc-group/trpc-agent-go @ 9b4e406 internal/session/tool/recall/search.go
(searchQueries, clauseSearchQueries, fallbackSearchQueries, keywordTokens, lexicalEventScore,
compactSnippetText, windowSnippet); re-implemented, not copied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MAX_SNIPPET = 280
MAX_SNIPPET_LINE = 96

# The reference's small stopword list for keyword extraction (search.go searchStopWords).
SCAN_STOPWORDS = frozenset(
    """a about an and are as at be by did discuss discussed do does for from had has have how in into is it
    its me of on or say said session summary tell that the their them they this to was were what when where
    which who why with would""".split()
)
# Lead-ins stripped from clause queries (search.go searchLeadIns), checked in this order.
LEAD_INS = (
    "summarize the discussion about ",
    "summarize the discussion on ",
    "summarize the discussion around ",
    "summarize discussion about ",
    "what did ",
    "what were ",
    "what was ",
    "what are ",
    "what is ",
    "who said ",
    "how did ",
)
_WORD = re.compile(r"[^\W_]+")  # runs of letters/digits (Go: !IsLetter && !IsDigit separates)


def normalize_ws(text: str) -> str:
    return " ".join(text.split())


def dedupe(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for v in values:
        v = v.strip()
        if v and v not in seen:
            seen.add(v)
            out.append(v)
    return out


def tokens(text: str) -> list[str]:
    return _WORD.findall(text)


def keyword_tokens(query: str) -> list[str]:
    """Lowercased tokens minus stopwords, length ≥ 3 unless they contain a digit; deduplicated."""
    out = []
    for tok in tokens(query):
        low = tok.lower()
        if low in SCAN_STOPWORDS:
            continue
        if len(low) < 3 and not any(c.isdigit() for c in low):
            continue
        out.append(low)
    return dedupe(out)


def _split_clauses(query: str) -> list[str]:
    for sep in (",", ";", " and ", " or "):
        query = query.replace(sep, "\n").replace(sep.upper(), "\n")
    return [c for c in query.split("\n") if c]


def _trim_lead_in(query: str) -> str:
    low = query.lower()
    for prefix in LEAD_INS:
        if low.startswith(prefix):
            return query[len(prefix) :].strip()
    return query.strip()


def clause_queries(query: str) -> list[str]:
    clauses = _split_clauses(query)
    if len(clauses) <= 1:
        return []
    out: list[str] = []
    for clause in clauses:
        clause = normalize_ws(_trim_lead_in(clause.strip()).strip(" .?!:"))
        if not clause:
            continue
        out.append(clause)
        kw = " ".join(keyword_tokens(clause))
        if kw and kw != clause:
            out.append(kw)
    return dedupe(out)


def fallback_queries(query: str) -> list[str]:
    primary = normalize_ws(query)
    kws = keyword_tokens(primary)
    if not kws:
        return []
    if len(kws) > 8:
        kws = dedupe(kws[:4] + kws[-4:])
    fallback = " ".join(kws)
    if not fallback or fallback == primary:
        return []
    out = [fallback]
    if len(kws) >= 3:
        size = 4 if len(kws) >= 5 else 3
        for start in range(0, len(kws) - size + 1):
            out.append(" ".join(kws[start : start + size]))
            if len(out) >= 4:
                break
    return dedupe(out)


def query_variants(query: str) -> list[str]:
    """[primary] + clause queries + keyword fallbacks, deduplicated (search.go searchQueries)."""
    primary = normalize_ws(query)
    if not primary:
        return []
    return dedupe([primary, *clause_queries(primary), *fallback_queries(primary)])


def has_compound_intent(query: str) -> bool:
    low = query.lower()
    return "," in low or ";" in low or " and " in low or " or " in low


def should_broaden(query: str, n_results: int, max_results: int) -> bool:
    if n_results == 0:
        return True
    if max_results > 0 and n_results >= max_results:
        return False
    if has_compound_intent(query):
        return True
    return n_results < min(2, max_results)


def lexical_score(normalized_query: str, keywords: Sequence[str], text: str) -> float:
    """Substring keyword coverage, +0.75 for the whole query, +0.15 for ≥2 matches; < 0.45 → 0."""
    low = normalize_ws(text).lower()
    if not low:
        return 0.0
    matched = sum(1 for k in keywords if k and k.lower() in low)
    if matched == 0:
        return 0.0
    score = matched / len(keywords)
    if normalized_query and normalized_query in low:
        score += 0.75
    if matched >= min(2, len(keywords)):
        score += 0.15
    return 0.0 if score < 0.45 else score


def compact(text: str, limit: int) -> str:
    """Collapse whitespace and cut to `limit` characters with "..." (compactSnippetText)."""
    text = normalize_ws(text)
    if not text or limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    if limit <= 3:
        return text[:limit]
    return text[: limit - 3] + "..."


def window_snippet(lines: Sequence[tuple[str, str, bool]]) -> str:
    """Snippet of a window: "[match] "-marked "<role>: <text≤96>" lines joined by newlines, ≤ 280.

    `lines` holds (role, text, is_anchor). Like the Go code, the running length is counted in UTF-8
    bytes while each line is measured in characters.
    """
    parts: list[str] = []
    for role, text, is_anchor in lines:
        text = compact(text, MAX_SNIPPET_LINE)
        if text:
            parts.append(("[match] " if is_anchor else "") + f"{role}: {text}")
    out = ""
    for line in parts:
        size = len(out.encode("utf-8"))
        if size > 0:
            if size + 1 > MAX_SNIPPET:
                break
            out += "\n"
            size += 1
        remaining = MAX_SNIPPET - size
        if remaining <= 0:
            break
        if len(line) > remaining:
            out += compact(line, remaining)
            break
        out += line
    return out.strip()


def hit_snippet(text: str) -> str:
    return compact(text, MAX_SNIPPET) or "<empty>"


_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")


def excerpt(text: str, terms: set[str], limit: int) -> str:
    """`text` with whitespace collapsed if it fits in `limit`; else the run of sentences around the one
    sharing most analysed terms with the query, cut to `limit` with "..." marking the gaps."""
    from harness.retrieval.keyword import analyze

    flat = normalize_ws(text)
    if len(flat) <= limit:
        return flat
    sentences = [normalize_ws(s) for s in _SENTENCE.findall(text)]
    sentences = [s for s in sentences if s]
    if not sentences:
        return compact(flat, limit)
    scores = [len(terms & set(analyze(s))) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
    lo = hi = best
    size = len(sentences[best])
    # Grow around the best sentence, preferring the following sentence (answers tend to follow the cue).
    while True:
        grown = False
        for j in (hi + 1, lo - 1):
            if 0 <= j < len(sentences) and size + 1 + len(sentences[j]) <= limit - 6:
                size += 1 + len(sentences[j])
                lo, hi = min(lo, j), max(hi, j)
                grown = True
        if not grown:
            break
    body = " ".join(sentences[lo : hi + 1])
    if len(body) > limit - 6:
        body = body[: limit - 6]
    return ("..." if lo > 0 else "") + body + ("..." if hi < len(sentences) - 1 or len(body) < size else "")
