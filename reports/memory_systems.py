"""The report's "Memory systems" section: measurements of `mode=memory` runs (docs/memory-systems.md "Measurements").

Read from the records alone (the contestant recorded each retrieval's gold labels, harness/memory/gold.py):
- gold-label retrieval recall, per provider (and variant) and question type; abstention questions left out, as
  LongMemEval's retrieval evaluation leaves them out;
- every wrong answer by cause: evidence not retrieved, retrieved but cut by the context cap, shown to the reader
  but not used;
- leakage audits: items dated after the question and items from another case's history (both dropped before the
  reader, counted; the latter flagged in the report's headline), echoes of the question, items without a date, and
  whether the providers saw opaque ids (harness/memory/ids.py) or the dataset's own;
- ingest cost and time apart from retrieve and answer cost and time, per question and per million ingested tokens;
- p50/p95/p99 latency per phase (ingest, retrieve, answer).
A run without memory contestants gets no section at all, so other reports are unchanged byte for byte.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from harness.memory.gold import ECHO_SHARE
from harness.memory.isolation import WINDOW
from reports import sections
from reports.safe import md_code
from reports.sections import Block, Figure, Figures, Note, Section, Sub, text
from reports.sections import Table as Grid

# The percentiles of the latency table (numpy's default linear interpolation).
PERCENTILES = (50, 95, 99)


@dataclass
class MemoryCase:
    """One answered record of a memory contestant, as the section reads it."""

    group: str  # "<mode>: <provider> (<variant>)"
    question_id: str
    question_type: str
    abstention: bool
    correct: bool | None  # by the report's headline metric (`lead`), when it is a 0/1 verdict
    lead: str | None
    gold: Mapping[str, Any] | None
    retrieval: Mapping[str, Any]  # the memory_retrieve (or memory_answer) trace
    ingest: Mapping[str, Any]  # the record's `ingest` (trace[0]: the provider's ingest)
    usage: Mapping[str, Any]
    answer_ms: float | None
    cost_answer: float | None
    mode: str = ""  # the record's mode (the contestant's name)
    cost_ingest: float | None = None  # priced by phase (reports/cost.py): None when unpriced or not reported
    cost_retrieve: float | None = None

    @property
    def ingest_trace(self) -> Mapping[str, Any]:
        """The provider's ingest entry (ingest.trace[0])."""
        trace = self.ingest.get("trace") or [{}]
        return trace[0] if isinstance(trace[0], Mapping) else {}


@dataclass
class Table:
    title: str
    intro: str
    headers: list[str]
    rows: list[list[Any]] = field(default_factory=list)


def _trace(rec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    trace = (rec.get("ingest") or {}).get("trace") or []
    first = trace[0] if trace and isinstance(trace[0], Mapping) else None
    return first if first and first.get("call") == "ingest" and "provider" in first else None


def memory_cases(
    records: Iterable[Mapping[str, Any]],
    lead: str | None,
    costs: Mapping[tuple[str, str], Mapping[str, float | None]],
    run: str | None = None,
) -> list[MemoryCase]:
    """The answered records of memory contestants (those whose ingest trace names a provider), with their costs by
    phase (`costs_of`); `run` labels the rows when several runs are shown side by side (compare)."""
    out = []
    for rec in records:
        ing = _trace(rec)
        if ing is None or rec.get("status") not in ("ok", "scoring_failed"):
            continue
        tools = [t for t in rec.get("tool_calls") or () if t.get("name") in ("memory_retrieve", "memory_answer")]
        retrieval = tools[0] if tools else {}
        value = (rec.get("metrics") or {}).get(lead) if lead else None
        calls = rec.get("calls") or []
        if retrieval.get("name") == "memory_answer":
            answer_ms = retrieval.get("answer_ms")
        else:
            answer_ms = sum(float(c.get("latency_s") or 0.0) for c in calls) * 1000 if calls else None
        out.append(
            MemoryCase(
                group=(f"{run} · " if run else "") + f"{rec['mode']}: {ing['provider']} ({ing.get('variant', '?')})",
                question_id=rec["question_id"],
                question_type=rec.get("question_type") or "",
                abstention=bool(rec.get("is_abstention")),
                correct=None if value is None or value not in (0, 1) else bool(value),
                lead=lead,
                gold=retrieval.get("gold"),
                retrieval=retrieval,
                ingest=rec.get("ingest") or {},
                usage=rec.get("usage") or {},
                answer_ms=answer_ms,
                cost_answer=(cost := costs.get((rec["question_id"], rec["mode"])) or {}).get("cost_answer"),
                mode=str(rec["mode"]),
                cost_ingest=cost.get("cost_ingest"),
                cost_retrieve=cost.get("cost_retrieve"),
            )
        )
    return out


def _ks(cases: Sequence[MemoryCase], level: str) -> list[str]:
    keys = {k for c in cases if c.gold for k in c.gold if k.startswith(f"{level}_recall_any@")}
    return sorted(keys, key=lambda k: int(k.rsplit("@", 1)[1]))


def _mean(values: Iterable[Any]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def _groups(cases: Sequence[MemoryCase]) -> dict[str, list[MemoryCase]]:
    out: dict[str, list[MemoryCase]] = {}
    for c in cases:
        out.setdefault(c.group, []).append(c)
    return dict(sorted(out.items()))


def recall_table(cases: Sequence[MemoryCase]) -> Table:
    measured = [c for c in cases if c.gold and not c.abstention]
    turn_ks, session_ks = _ks(measured, "turn"), _ks(measured, "session")
    t = Table(
        "Retrieval recall from gold labels",
        "recall_any@k: a `has_answer` turn (its session) is among the first k items the reader could be shown, "
        "items dated after the question or from another case left out. Items are mapped to turns by provenance "
        "(the providers' opaque ids mapped back), else by text overlap (docs/memory-systems.md, Measurements); no "
        "model involved; an echo of the question is never evidence. `shown`: the evidence was in what the "
        "context cap kept. Abstention questions are left out.",
        ["provider (variant)", "question type", "cases", *turn_ks, *session_ks, "shown (turn)"],
    )
    for group, cs in _groups(measured).items():
        by_type: dict[str, list[MemoryCase]] = {}
        for c in cs:
            by_type.setdefault(c.question_type, []).append(c)
        for qtype, sub in [*sorted(by_type.items()), ("all", cs)]:
            g = [c.gold for c in sub if c.gold]
            t.rows.append(
                [
                    group,
                    qtype,
                    len(sub),
                    *[_mean(x.get(k) for x in g) for k in turn_ks + session_ks],
                    _mean(None if x.get("shown_evidence_turn") is None else float(x["shown_evidence_turn"]) for x in g),
                ]
            )
    return t


def _cause(c: MemoryCase) -> str:
    g = c.gold
    if c.abstention:
        return "abstention"
    if not g:
        return "not measured"
    if not g.get("evidence_turns"):
        return "no evidence labels"
    top = _ks([c], "turn")[-1]
    if not g.get(top):
        stored = ((c.ingest.get("trace") or [{}])[0].get("stored") or {}).get("evidence_turn")
        return "not stored" if stored is False else "not retrieved"
    return "shown, not used" if g.get("shown_evidence_turn") else "retrieved, cut by the cap"


CAUSES = (
    "not stored",
    "not retrieved",
    "retrieved, cut by the cap",
    "shown, not used",
    "abstention",
    "no evidence labels",
)


def failure_table(cases: Sequence[MemoryCase]) -> Table:
    lead = ", ".join(sorted({str(c.lead) for c in cases}))
    t = Table(
        "Wrong answers by cause",
        f"Every wrong answer (by `{lead}`) of a memory contestant, by where its evidence (the `has_answer` turns) "
        "was lost: `not stored` (a provider that lists what it stored, e.g. mem0's `get_all` after ingest, kept no "
        "memory holding an evidence turn, by the gold mapping rule), `not retrieved` (stored, or not listable, "
        "but no evidence turn among the items; of these, how many had the evidence session retrieved), "
        "`retrieved, cut by the cap`, `shown, not used` (the reader had it).",
        ["provider (variant)", "scored", "wrong", *CAUSES, "not measured", "of not retrieved: session retrieved"],
    )
    for group, cs in _groups(cases).items():
        scored = [c for c in cs if c.correct is not None]
        wrong = [c for c in scored if not c.correct]
        causes = [_cause(c) for c in wrong]
        missed = [c for c, why in zip(wrong, causes) if why == "not retrieved"]
        session_hit = sum(bool(c.gold and c.gold.get(_ks([c], "session")[-1])) for c in missed)
        t.rows.append(
            [
                group,
                len(scored),
                len(wrong),
                *[causes.count(k) for k in CAUSES],
                causes.count("not measured"),
                session_hit,
            ]
        )
    return t


OPAQUE_IDS = (
    "Ids: every unit and session id the providers saw was opaque, a keyed hash per run (harness/memory/ids.py): "
    "LongMemEval's own ids, which carry its gold labels (its `answer_*` sessions are the evidence), never reached "
    "them, and the harness mapped the ids they handed back to the dataset's before measuring."
)


def ids_note(cases: Sequence[MemoryCase]) -> str:
    """What the providers were told the units and sessions are called: opaque ids, or (records written before them)
    the dataset's own, which carry its gold labels."""
    raw = sorted({c.group for c in cases if c.ingest_trace.get("ids") != "opaque"})
    if not raw:
        return OPAQUE_IDS
    return (
        f"Ids: {', '.join(md_code(g) for g in raw)} saw the dataset's own unit and session ids (records written before ids were made "
        "opaque): those ids carry LongMemEval's gold labels (its `answer_*` sessions are the evidence), so a "
        "provider could rank by them; such recall is not comparable with a run on opaque ids."
    )


def leakage_table(cases: Sequence[MemoryCase]) -> Table:
    t = Table(
        "Leakage audits",
        "Items dated after the question, and items from another case's history (by their provenance, or a run of "
        f"{WINDOW} content words copied from it: a unit returning what another unit holds), are dropped before the "
        "reader and counted here; the latter are flagged in the headline. Echoes of the question (equal to it, a "
        f"part of it, or at least {ECHO_SHARE:.0%} of their content words the question's) are counted; none of "
        "these is ever credited as evidence. Items without a date cannot be audited. Ingest never receives the "
        "question (the contestant sends the sessions only; tests/harness/memory/test_memory_contestant.py checks it); a canary "
        "ingested for one unit never returned for another is checked before a run by `lme-harness provider-check "
        "URL`. " + ids_note(cases),
        [
            "provider (variant)",
            "retrievals",
            "items returned",
            "dated after the question",
            "cases with any",
            "undated",
            "from another case",
            "cases with any from another case",
            "echoes of the question",
        ],
    )
    for group, cs in _groups(cases).items():
        rs = [c.retrieval for c in cs if c.retrieval.get("name") == "memory_retrieve"]
        items = [i for r in rs for i in r.get("items") or ()]
        t.rows.append(
            [
                group,
                len(rs),
                len(items),
                sum(int(r.get("after_as_of") or 0) for r in rs),
                sum(bool(r.get("after_as_of")) for r in rs),
                sum("date" not in i for i in items),
                sum(int(c.retrieval.get("other_cases") or 0) for c in cs),
                sum(bool(c.retrieval.get("other_cases")) for c in cs),
                sum(int(c.retrieval.get("echoes") or 0) for c in cs),
            ]
        )
    return t


def integrity_flags(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Lines for the report's headline: memory contestants whose units returned another case's memory, or that
    saw the dataset's own (gold-carrying) ids; empty when there is none."""
    cases = memory_cases(records, None, {})
    out = []
    for group, cs in _groups(cases).items():
        if leaks := sum(int(c.retrieval.get("other_cases") or 0) for c in cs):
            hit = sum(bool(c.retrieval.get("other_cases")) for c in cs)
            out.append(
                f"memory isolation broken: {group} returned {leaks} item(s) from other cases' histories in {hit} of "
                f"{len(cs)} cases (dropped before the reader, never credited; see Leakage audits)"
            )
    if cases and (note := ids_note(cases)) != OPAQUE_IDS:
        out.append(note)
    return out


def _provider_usage(c: MemoryCase) -> Mapping[str, Any]:
    return (c.ingest.get("trace") or [{}])[0].get("usage") or {}


def _num(v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(x) else x


def _usd(values: Sequence[float | None]) -> float | None:
    """A sum only when every value is known: an unreported cost is n/a, never 0."""
    return None if not values or any(v is None for v in values) else float(sum(v for v in values if v is not None))


def cost_table(cases: Sequence[MemoryCase]) -> Table:
    t = Table(
        "Ingest apart from answer",
        "Per question (mean). Ingest: the provider's reported usage plus any harness model calls while "
        "ingesting. $ with the run's price table: a provider's own `cost_usd` as reported, else the LLM tokens of a "
        "provider whose calls go through the run's model (mem0's extraction) at that model's price; n/a for a "
        "service that reports no cost, and for any unpriced case (never a partial sum). Per 1M ingested tokens: "
        "the ingest figures over the tokens of the sessions given to ingest (o200k). Retrieve: the provider's "
        "retrieval usage and query vectors. Answer: the reader's calls.",
        [
            "provider (variant)",
            "cases",
            "ingested tokens",
            "ingest LLM tokens (in/out)",
            "ingest embedding tokens",
            "unusable replies",
            "ingest $",
            "ingest LLM tokens / 1M ingested",
            "ingest $ / 1M ingested",
            "answer tokens (in/out)",
            "retrieval embedding tokens",
            "retrieve $",
            "answer $",
        ],
    )
    for group, cs in _groups(cases).items():
        n = len(cs)
        ingested = sum(int((c.ingest.get("trace") or [{}])[0].get("ingested_tokens") or 0) for c in cs)
        llm_in = sum(
            int(_provider_usage(c).get("input_tokens") or 0) + int(c.ingest.get("prompt_tokens") or 0) for c in cs
        )
        llm_out = sum(
            int(_provider_usage(c).get("output_tokens") or 0) + int(c.ingest.get("completion_tokens") or 0) for c in cs
        )
        emb = sum(
            int(_provider_usage(c).get("embedding_tokens") or 0) + int(c.ingest.get("embedding_tokens") or 0)
            for c in cs
        )
        unusable = sum(int(_provider_usage(c).get("unusable_replies") or 0) for c in cs)
        usd = _usd([c.cost_ingest for c in cs])
        r_usd = _usd([c.cost_retrieve for c in cs])
        r_emb = sum(int((c.retrieval.get("usage") or {}).get("embedding_tokens") or 0) for c in cs)
        a_usd = _usd([c.cost_answer for c in cs])
        per_m = 1e6 / ingested if ingested else math.nan
        t.rows.append(
            [
                group,
                n,
                f"{ingested / n:,.0f}",
                f"{llm_in / n:,.0f} / {llm_out / n:,.0f}",
                f"{emb / n:,.0f}",
                unusable,
                None if usd is None else f"{usd / n:.6f}",
                f"{(llm_in + llm_out) * per_m:,.0f}" if ingested else None,
                None if usd is None or not ingested else f"{usd * per_m:.4f}",
                f"{sum(int(c.usage.get('prompt_tokens_total') or 0) for c in cs) / n:,.0f} / "
                f"{sum(int(c.usage.get('completion_tokens_total') or 0) for c in cs) / n:,.0f}",
                f"{r_emb / n:,.0f}",
                None if r_usd is None else f"{r_usd / n:.6f}",
                None if a_usd is None else f"{a_usd / n:.6f}",
            ]
        )
    return t


def _phases(c: MemoryCase) -> dict[str, float | None]:
    ing = (c.ingest.get("trace") or [{}])[0]
    ingest = None if ing.get("ingest_ms") is None else float(ing["ingest_ms"]) + float(ing.get("ready_wait_ms") or 0)
    return {"ingest": ingest, "retrieve": c.retrieval.get("retrieve_ms"), "answer": c.answer_ms}


def latency_table(cases: Sequence[MemoryCase]) -> Table:
    t = Table(
        "Latency per phase (ms)",
        "ingest: the provider's ingest call and the wait until it is ready; retrieve: the retrieve call; answer: "
        "the reader's model time as measured (kept when replayed from the cache), or the provider's own answer "
        "call. Percentiles with linear interpolation.",
        ["provider (variant)", "phase", "n", *[f"p{p}" for p in PERCENTILES]],
    )
    for group, cs in _groups(cases).items():
        for phase in ("ingest", "retrieve", "answer"):
            xs = [v for c in cs if (v := _phases(c)[phase]) is not None]
            if xs:
                t.rows.append([group, phase, len(xs), *[float(np.percentile(xs, p)) for p in PERCENTILES]])
    return t


def memory_tables(
    records: Iterable[Mapping[str, Any]],
    lead: str | None,
    costs: Mapping[tuple[str, str], Mapping[str, float | None]],
) -> list[Table]:
    """The section's tables; none when the run has no memory contestant."""
    return tables_of(memory_cases(records, lead, costs))


COST_PHASES = ("cost_answer", "cost_ingest", "cost_retrieve")


def costs_of(df: Any) -> dict[tuple[str, str], dict[str, float | None]]:
    """(question_id, mode) -> the priced costs by phase of a records frame (None: unpriced, or not priced)."""
    cols = [c for c in COST_PHASES if c in df.columns]
    return {
        (str(q), str(m)): {c: None if v is None or v != v else float(v) for c, v in zip(cols, vals)}
        for q, m, *vals in zip(df["question_id"], df["mode"], *(df[c] for c in cols))
    }


def compare_tables(runs: Sequence[Any], names: Mapping[tuple[int, str], str]) -> list[Table]:
    """The tables over several runs side by side (`lme-harness compare`), each row named by its contestant
    (`names`: (run index, mode) -> name, reports/standings.py) and variant; none when no run has a memory
    contestant. `runs`: reports.compare.Run (frame, records)."""
    from reports.aggregate import headline_metric

    cases: list[MemoryCase] = []
    for i, r in enumerate(runs):
        for c in memory_cases(r.records, headline_metric(r.frame), costs_of(r.df)):
            variant = ((c.ingest.get("trace") or [{}])[0]).get("variant", "?")
            cases.append(replace(c, group=f"{names.get((i, c.mode), c.mode)} ({variant})"))
    return tables_of(cases)


# The memory measurements the gate can check (docs/ci-gate.md), per memory contestant (mode). Directions:
# reports/metrics.py AGGREGATES.
PROVIDER_FAILURE = "memory provider '"  # how ProviderError names itself in a failed record's error


def _provider_failed(rec: Mapping[str, Any]) -> bool:
    return rec.get("status") not in ("ok", "scoring_failed") and PROVIDER_FAILURE in str(rec.get("error") or "")


def memory_scoreboard(records: Sequence[Mapping[str, Any]], lead: str | None) -> dict[tuple[str, str], float]:
    """`{(mode, metric): value}` of every memory contestant: `memory_turn_recall` / `memory_session_recall` (mean
    recall_any at the largest k recorded, abstention left out), `memory_leaked_items` (items dated after the
    question, summed), `memory_cross_unit_items` (items from another case's history, summed), `memory_provider_failures` (cases the provider failed or timed out on), `memory_ingest_tokens`
    (mean ingest LLM tokens per answered case), `memory_ingest_usd` (mean, only when every case reports it), and
    `<lead>@with_provider_failures` (the headline metric with those cases counted as wrong). Empty without memory
    contestants."""
    cases = memory_cases(records, lead, {})
    modes = {str(r.get("mode")) for r in records if _trace(r) or _provider_failed(r)}
    out: dict[tuple[str, str], float] = {}
    for mode in sorted(modes):
        cs = [c for c in cases if c.mode == mode]
        failed = sum(_provider_failed(r) for r in records if r.get("mode") == mode)
        out[(mode, "memory_provider_failures")] = float(failed)
        measured = [c for c in cs if c.gold and not c.abstention]
        for level in ("turn", "session"):
            ks = _ks(measured, level)
            if ks:
                out[(mode, f"memory_{level}_recall")] = float(
                    np.mean([float(c.gold.get(ks[-1]) or 0) for c in measured if c.gold])
                )
        rs = [c.retrieval for c in cs if c.retrieval.get("name") == "memory_retrieve"]
        if rs:
            out[(mode, "memory_leaked_items")] = float(sum(int(r.get("after_as_of") or 0) for r in rs))
        if cs:
            out[(mode, "memory_cross_unit_items")] = float(sum(int(c.retrieval.get("other_cases") or 0) for c in cs))
        if cs:
            out[(mode, "memory_ingest_tokens")] = float(
                np.mean(
                    [
                        sum(_num(_provider_usage(c).get(k)) for k in ("input_tokens", "output_tokens"))
                        + sum(_num(c.ingest.get(k)) for k in ("prompt_tokens", "completion_tokens"))
                        for c in cs
                    ]
                )
            )
            if (usd := _usd([_provider_usage(c).get("cost_usd") for c in cs])) is not None:
                out[(mode, "memory_ingest_usd")] = usd / len(cs)
        scored = [c for c in cs if c.correct is not None]
        if lead and (scored or failed):
            out[(mode, f"{lead}@with_provider_failures")] = sum(bool(c.correct) for c in scored) / (
                len(scored) + failed
            )
    return out


def tables_of(cases: Sequence[MemoryCase]) -> list[Table]:
    if not cases:
        return []
    return [
        recall_table(cases),
        failure_table(cases),
        leakage_table(cases),
        cost_table(cases),
        latency_table(cases),
    ]


def cell_text(v: Any) -> str:
    """A table value as shown: n/a for None/NaN, a small float to 3 places, a large one with separators."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) <= 1 else f"{v:,.1f}"
    return str(v)


def section(tables: Sequence[Table], figure_after_first: Figure | None = None) -> Section | None:
    """The "Memory systems" section: each table under its title with its intro (None without memory contestants);
    `figure_after_first` (the frontier plot) follows the first table."""
    if not tables:
        return None
    blocks: list[Block] = []
    for i, t in enumerate(tables):
        cells = [[text(cell_text(v)) for v in r] for r in t.rows]
        blocks += [Sub(t.title), Note(t.intro), Grid(t.headers, cells, _slug(t.title))]
        if i == 0 and figure_after_first is not None:
            blocks.append(Figures([figure_after_first]))
    return Section("memory", "Memory systems", blocks, html_id="memory")


def markdown(tables: Sequence[Table]) -> str:
    """The section as Markdown to append to a document (`lme-harness compare`): "" without memory contestants."""
    found = section(tables)
    return "" if found is None else "\n" + sections.markdown([found])


def _slug(title: str) -> str:
    return "memory-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def html(tables: Sequence[Table]) -> list[str]:
    """The section as HTML fragments (`lme-harness compare`): none without memory contestants."""
    found = section(tables)
    return [] if found is None else sections.section_html(found)


__all__ = [
    "MemoryCase",
    "Table",
    "compare_tables",
    "costs_of",
    "html",
    "ids_note",
    "integrity_flags",
    "markdown",
    "memory_cases",
    "memory_tables",
    "section",
]
