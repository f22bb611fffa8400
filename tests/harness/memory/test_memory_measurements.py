"""Measurements of memory providers (issue 23 item 5): gold-label retrieval recall for black-box providers by
provenance or by the stated text-overlap rule (harness/memory/gold.py), recorded per retrieval by the contestant."""

from __future__ import annotations

import json

import pytest

from harness.contestants.base import CaseHistory, Question
from harness.data.longmemeval import parse_cases
from harness.memory.contestant import ProviderContestant
from harness.memory.gold import Gold, overlaps, words
from harness.memory.provider import Capabilities, Ingest, MemoryItem, Provenance, ProviderBase, Retrieval
from harness.session.events import Session
from tests.harness.memory.test_memory_contestant import Reader, _kit
from tests.support.dataset_rows import make_row
from tests.support.fake_run import endpoint_args

EVIDENCE = "I adopted a grey cat called Biscuit from the Oslo shelter in March."
FILLER = "Can you suggest a recipe for lentil soup with cumin and carrots?"


def _gold() -> Gold:
    return Gold([("s1", [(FILLER, False), ("Sure, here is one.", False)]), ("s2", [(EVIDENCE, True)])])


def test_the_overlap_rule_matches_containment_either_way_and_never_on_function_words() -> None:
    turn = words(EVIDENCE)
    assert overlaps(words(f"[2023-03-01] user: {EVIDENCE} Also some other chat."), turn)  # the item holds the turn
    assert overlaps(words("User adopted a cat called Biscuit"), turn)  # the turn holds the (extracted) item
    assert not overlaps(words("the user is a person who was in the house"), turn)  # function words only
    assert not overlaps(words("Biscuit"), turn)  # fewer than MIN_SHARED shared words
    # half of a long item's words is not enough when those are under half of the turn's words too
    assert not overlaps(words("grey cat " + " ".join(f"w{i}" for i in range(20))), turn)


def test_labels_use_provenance_first_then_overlap_within_the_named_session_then_everywhere() -> None:
    g = _gold()
    by_turn = g.label("unrelated text", Provenance("s2", 0, None))
    assert by_turn.by == "provenance" and g.hits_turn(by_turn)  # the provenance is believed as given
    in_session = g.label("unrelated text", Provenance("s2", None, None))
    assert g.hits_session(in_session) and not g.hits_turn(in_session)  # session known, no turn matches
    wrong_session = g.label(EVIDENCE, Provenance("s1", None, None))
    assert not g.hits_turn(wrong_session)  # overlap is looked for only in the named session
    free = g.label("the user adopted cat Biscuit from a shelter", None)
    assert free.by == "overlap" and g.hits_turn(free) and g.hits_session(free)
    assert g.label("lentil soup cumin carrots recipe", None).sessions == {"s1"}
    assert g.label("nothing alike", Provenance("unknown", 3, None)).by == "none"
    r = g.recall([g.label(FILLER), free], [1, 2])
    assert r == {
        "turn_recall_any@1": 0.0,
        "session_recall_any@1": 0.0,
        "turn_recall_any@2": 1.0,
        "session_recall_any@2": 1.0,
    }
    assert Gold([("s1", [(FILLER, False)])]).recall([g.label(FILLER)], [1])["turn_recall_any@1"] is None


class BlackBox(ProviderBase):
    """Returns a filler item first and the evidence second, as text only (no provenance): a black box."""

    def __init__(self, evidence_first: bool = False) -> None:
        self.evidence_first = evidence_first

    def capabilities(self) -> Capabilities:
        return Capabilities("blackbox", "0")

    def setup(self, unit: str) -> None:
        pass

    def ingest(self, unit: str, sessions) -> Ingest:
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        items = [MemoryItem("user asked for a lentil soup recipe with cumin " * 20), MemoryItem(EVIDENCE)]
        return Retrieval(tuple(reversed(items)) if self.evidence_first else tuple(items))

    def teardown(self, unit: str) -> None:
        pass


def _run(provider, **kw):
    row = make_row(
        sessions=[[{"role": "user", "content": FILLER}], [{"role": "user", "content": EVIDENCE, "has_answer": True}]]
    )
    case = parse_cases(json.dumps([row]).encode(), "x")[0]
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    c = ProviderContestant(provider, **kw)
    ingested = c.ingest(CaseHistory.of(case, s), _kit(Reader()))
    return ingested, c.answer(ingested.memory, Question.of(case, case.question), _kit(Reader())), c


def test_the_retrieval_trace_holds_gold_recall_and_whether_evidence_reached_the_reader() -> None:
    ingested, out, c = _run(BlackBox())
    assert ingested.trace[0]["ingested_tokens"] > 10
    (rt,) = out.tool_trace
    assert [i["gold"]["evidence_turn"] for i in rt["items"]] == [False, True]
    assert [i["gold"]["by"] for i in rt["items"]] == ["overlap", "overlap"]
    g = rt["gold"]
    assert g["evidence_turns"] == 1 and g["evidence_sessions"] == 1
    assert g["turn_recall_any@1"] == 0.0 and g["turn_recall_any@3"] == 1.0 and g["turn_recall_any@10"] == 1.0
    assert g["shown_evidence_turn"] is True
    assert not c._gold  # forgotten with the unit

    # a cap that the first (filler) item fills: the evidence was retrieved but never reached the reader
    _, cut, _ = _run(BlackBox(), context_tokens=40)
    g = cut.tool_trace[0]["gold"]
    assert g["turn_recall_any@3"] == 1.0 and g["shown_evidence_turn"] is False
    assert cut.truncation is not None and cut.truncation["truncated"]

    # evidence first and whole under the cap: shown
    _, first, _ = _run(BlackBox(evidence_first=True), context_tokens=40)
    assert first.tool_trace[0]["gold"]["turn_recall_any@1"] == 1.0
    assert first.tool_trace[0]["gold"]["shown_evidence_turn"] is True


class Storing(BlackBox):
    """A system that stores derived memories and lists them (as mem0's `get_all`): `keeps` says what it kept."""

    def __init__(self, keeps: tuple[str, ...]) -> None:
        super().__init__()
        self.keeps = keeps

    def stored(self, unit: str) -> tuple[MemoryItem, ...]:
        return tuple(MemoryItem(t) for t in self.keeps)


def test_what_a_storing_provider_kept_is_checked_against_the_evidence_after_ingest() -> None:
    from reports.memory_systems import _cause, memory_cases

    forgot, _, _ = _run(Storing(("User wants a lentil soup recipe with cumin and carrots.",)))
    assert forgot.trace[0]["stored"] == {"items": 1, "evidence_turn": False, "evidence_session": False}
    kept, _, _ = _run(Storing(("User adopted a grey cat called Biscuit from the Oslo shelter.",)))
    assert kept.trace[0]["stored"] == {"items": 1, "evidence_turn": True, "evidence_session": True}
    plain, _, _ = _run(BlackBox())
    assert "stored" not in plain.trace[0]  # a provider that cannot list what it stored: not measured

    # a wrong answer with no evidence retrieved: "not stored" when the evidence was never kept, else "not retrieved"
    def case(stored):
        rec = _rec("q1", correct=0.0, gold=_g(False))
        if stored is not None:
            rec["ingest"]["trace"][0]["stored"] = stored
        (c,) = memory_cases([rec], "lme_acc", {})
        return _cause(c)

    assert case(forgot.trace[0]["stored"]) == "not stored"
    assert case(kept.trace[0]["stored"]) == "not retrieved"
    assert case(None) == "not retrieved"


def test_a_native_answer_is_measured_on_the_items_it_says_it_used_and_not_at_all_when_it_says_none() -> None:
    from harness.memory.provider import REQUIRED_CALLS, ProviderAnswer

    class Answers(BlackBox):
        def __init__(self, items) -> None:
            super().__init__()
            self.items = items

        def capabilities(self) -> Capabilities:
            return Capabilities("answers", "1", REQUIRED_CALLS | {"answer"})

        def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
            return ProviderAnswer("Biscuit", items=self.items)

    _, out, _ = _run(Answers((MemoryItem(EVIDENCE, None, Provenance("s1", 0, None)),)), native_answer=True)
    g = out.tool_trace[0]["gold"]
    assert g["turn_recall_any@1"] == 1.0 and g["shown_evidence_turn"] is True
    _, silent, _ = _run(Answers(()), native_answer=True)
    assert silent.tool_trace[0]["gold"] is None  # not told: never a recall of 0


def _rec(qid: str, *, correct: float, gold, after: int = 0, dated: bool = True, **kw) -> dict:
    """A record as a memory contestant writes it (the fields reports/memory_systems.py reads)."""
    item = {"chars": 10, "score": 1.0, **({"date": "2023-05-01T00:00:00Z"} if dated else {})}
    return {
        "question_id": qid,
        "mode": "memory",
        "status": "ok",
        "question_type": kw.get("qtype", "single-session-user"),
        "is_abstention": qid.endswith("_abs"),
        "metrics": {"lme_acc": correct},
        "usage": {"prompt_tokens_total": 100, "completion_tokens_total": 5},
        "calls": [{"latency_s": kw.get("answer_s", 0.1)}],
        "ingest": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "embedding_tokens": 0,
            "trace": [
                {
                    "call": "ingest",
                    "provider": "p",
                    "variant": "fair",
                    "ingested_tokens": 1000,
                    "ingest_ms": kw.get("ingest_ms", 10.0),
                    "ready_wait_ms": 0.0,
                    "usage": {
                        "input_tokens": 400,
                        "output_tokens": 100,
                        "embedding_tokens": 50,
                        "cost_usd": 0.002,
                        "unusable_replies": kw.get("unusable", 0),
                    },
                }
            ],
        },
        "tool_calls": [
            {
                "name": "memory_retrieve",
                "after_as_of": after,
                "other_cases": kw.get("other", 0),
                "echoes": kw.get("echoes", 0),
                "items": [item] * 3,
                "retrieve_ms": 2.0,
                "gold": gold,
            }
        ],
    }


def _g(hit: bool, shown: bool | None = None, session: bool | None = None, turns: int = 1) -> dict:
    return {
        "evidence_turns": turns,
        "evidence_sessions": 1,
        "turn_recall_any@1": float(hit),
        "turn_recall_any@10": float(hit),
        "session_recall_any@1": float(hit if session is None else session),
        "session_recall_any@10": float(hit if session is None else session),
        "shown_evidence_turn": hit if shown is None else shown,
    }


def test_the_memory_section_tells_causes_leakage_costs_and_phase_percentiles_apart() -> None:
    from reports.memory_systems import markdown, memory_tables

    records = [
        _rec("q1", correct=1.0, gold=_g(True), ingest_ms=10.0),
        _rec("q2", correct=0.0, gold=_g(False, session=True), after=2, other=3, ingest_ms=20.0),  # not retrieved
        _rec("q3", correct=0.0, gold=_g(True, shown=False), dated=False, echoes=2, ingest_ms=30.0),  # cut by the cap
        _rec("q4", correct=0.0, gold=_g(True), ingest_ms=40.0),  # shown, not used
        _rec("q5_abs", correct=0.0, gold=_g(False), ingest_ms=50.0),
        _rec(
            "q6", correct=0.0, gold=None, ingest_ms=60.0, unusable=2
        ),  # not measured (e.g. a record from before gold labels)
    ]
    # priced by phase (reports/cost.py): the provider's cost_usd kept as ingest's; one answer priced, five not
    costs = {(r["question_id"], "memory"): {"cost_ingest": 0.002, "cost_retrieve": 0.0} for r in records}
    costs[("q1", "memory")]["cost_answer"] = 0.01
    recall, causes, leakage, cost, latency = memory_tables(records, "lme_acc", costs)
    (row_type, row_all) = recall.rows
    assert row_all[:3] == ["memory: p (fair)", "all", 4]  # abstention and unmeasured left out
    assert row_all[recall.headers.index("turn_recall_any@1")] == 0.75
    assert row_all[recall.headers.index("shown (turn)")] == 0.5
    (c,) = causes.rows
    assert dict(zip(causes.headers, c)) == {
        "provider (variant)": "memory: p (fair)",
        "scored": 6,
        "wrong": 5,
        "not stored": 0,
        "not retrieved": 1,
        "retrieved, cut by the cap": 1,
        "shown, not used": 1,
        "abstention": 1,
        "no evidence labels": 0,
        "not measured": 1,
        "of not retrieved: session retrieved": 1,
    }
    (leak,) = leakage.rows
    # retrievals, items, dated after, cases with any, undated, from another case, cases with any, echoes
    assert leak[1:] == [6, 18, 2, 1, 3, 3, 1, 2]
    (money,) = cost.rows
    m = dict(zip(cost.headers, money))
    assert m["ingested tokens"] == "1,000" and m["ingest LLM tokens (in/out)"] == "400 / 100"
    assert m["ingest $"] == "0.002000" and m["ingest $ / 1M ingested"] == "2.0000"
    assert m["ingest LLM tokens / 1M ingested"] == "500,000"
    assert m["unusable replies"] == 2  # summed over the cases: a loss mem0 itself only logs
    assert m["answer $"] is None  # five answers unpriced: n/a, never a partial sum
    assert m["retrieve $"] == "0.000000"
    ingest = next(r for r in latency.rows if r[1] == "ingest")
    assert ingest[2:] == [6, 35.0, 57.5, 59.5]
    assert "## Memory systems" in markdown([recall])
    assert memory_tables([{**records[0], "ingest": {"calls": 0}}], "lme_acc", {}) == [] and markdown([]) == ""


def _memory_run(run_dir, memory: str, base_url: str, tmp_path) -> None:
    from commands.cli import main

    args = [f"hydra.run.dir={run_dir}", "mode=memory", f"memory={memory}", *endpoint_args(base_url, tmp_path)]
    assert main(["run", *args, "dataset.limit=2"]) == 0


@pytest.mark.e2e
def test_memory_run_reports_and_compare_hold_the_memory_section(tmp_path) -> None:
    from commands.compare_runs import compare_main
    from harness.testing.fake_openai import FakeOpenAIServer
    from harness.testing.faults import FakeModel
    from reports.render import build_report

    with FakeOpenAIServer(FakeModel()) as srv:
        for memory in ("bm25", "full_context"):
            _memory_run(tmp_path / memory, memory, srv.base_url, tmp_path)
    out = build_report(tmp_path / "bm25")
    md, page = out["markdown"].read_text(), out["html"].read_text()
    section = md[md.index("## Memory systems") :]
    assert "| memory: bm25 (fair) | all | 2 | 1.000 |" in section  # BM25 finds the oracle evidence turn first
    for title in ("Wrong answers by cause", "Leakage audits", "Ingest apart from answer", "Latency per phase"):
        assert f"### {title}" in section and title in page
    assert 'id="memory"' in page
    assert out["plot_frontier"].exists() and out["plot_frontier_svg"].exists()
    assert "### Contestants: quality, cost and latency" in section and "![frontier](frontier.png)" in section
    assert "| 1 | bm25 |  | 2 |" in section and 'alt="frontier"' in page  # named by the provider

    assert compare_main([str(tmp_path / "bm25"), str(tmp_path / "full_context")], out=str(tmp_path / "cmp")) == 0
    cmp = (tmp_path / "cmp" / "compare.md").read_text()
    side = cmp[cmp.index("## Memory systems") :]
    assert "| bm25 (fair) | all | 2 |" in side and "| full_context (fair) | all | 2 |" in side
    assert "Memory systems" in (tmp_path / "cmp" / "compare.html").read_text()
    # one ranked table and one frontier over both runs' contestants, each named by its provider
    assert (tmp_path / "cmp" / "frontier.png").exists() and "![frontier](frontier.png)" in cmp
    front = cmp[cmp.index("## Contestants: quality, cost and latency") :].split("\n## ")[0]
    assert front.count(" | bm25 |  | 2 |") == 1 and front.count(" | full_context |  | 2 |") == 1


def test_the_frontier_counts_ingest_in_cost_and_time_for_modes_and_providers() -> None:
    from reports.aggregate import records_frame
    from reports.standings import contestants_of, frontier, name_contestants, table
    from tests.support.report_fixtures import call, summary_block
    from tests.support.report_fixtures import rec as mode_rec

    mem = _rec("q1", correct=1.0, gold=_g(True), ingest_ms=1000.0)  # provider ingest: 400 + 100 tokens, 1 s
    mem["calls"] = [call(100, 5)]
    mem["latency"] = {"query_ms": 200.0}
    summ = mode_rec("q1", "summary", lme=1.0, calls=[call(50, 5)], query_ms=100.0)
    summ["summary"] = {**summary_block(prompt=1800, completion=200), "generation_ms": 3000.0}
    cheap = mode_rec("q1", "long_context", lme=0.0, calls=[call(10, 5)], query_ms=50.0)
    failed = mode_rec("q2", "long_context", status="failed")
    frame = records_frame([mem, summ, cheap, failed])
    points = {c.name: c for c in name_contestants(contestants_of(frame, [mem, summ, cheap, failed], "lme_acc"))}
    assert set(points) == {"p", "summary", "long_context"}  # a provider by its own name
    m, s, lc = points["p"], points["summary"], points["long_context"]
    assert (m.total_tokens, m.tokens["ingest"], m.latency_ms) == (605.0, 500.0, 1200.0)
    assert (s.total_tokens, s.tokens["ingest"], s.latency_ms) == (2055.0, 2000.0, 3100.0)
    assert (lc.n, lc.quality, lc.total_tokens, lc.latency_ms) == (1, 0.0, 15.0, 50.0)  # the failed case left out
    # summary is as good as the provider but dearer: not on the frontier
    assert frontier(list(points.values())) == {"long_context", "p"}
    rows = {r[1]: r for r in table(list(points.values()), "lme_acc", frame.metrics).rows}
    assert rows["summary"][-1] == "" and rows["p"][-1] == "yes"


def test_the_memory_scoreboard_holds_recall_leaks_provider_failures_and_ingest_cost() -> None:
    from reports.memory_systems import memory_scoreboard

    failed = {"question_id": "q9", "mode": "memory", "status": "failed", "error": "memory provider 'p': ingest failed"}
    other = {"question_id": "q9", "mode": "summary", "status": "failed", "error": "timeout"}  # not a memory mode
    records = [
        _rec("q1", correct=1.0, gold=_g(True)),
        _rec("q2", correct=0.0, gold=_g(False, session=True), after=2, other=1),
        _rec("q3_abs", correct=1.0, gold=_g(False)),  # abstention: left out of recall, scored
        failed,
        other,
    ]
    board = memory_scoreboard(records, "lme_acc")
    assert board == {
        ("memory", "memory_provider_failures"): 1.0,
        ("memory", "memory_turn_recall"): 0.5,
        ("memory", "memory_session_recall"): 1.0,
        ("memory", "memory_leaked_items"): 2.0,
        ("memory", "memory_cross_unit_items"): 1.0,
        ("memory", "memory_ingest_tokens"): 500.0,
        ("memory", "memory_ingest_usd"): 0.002,
        ("memory", "lme_acc@with_provider_failures"): 0.5,  # 2 right of 3 scored + 1 failed
    }
    assert memory_scoreboard([other], "lme_acc") == {}


@pytest.mark.e2e
def test_the_gate_checks_the_memory_measurements_of_a_run(tmp_path) -> None:
    from commands.cli import main
    from harness.testing.fake_openai import FakeOpenAIServer
    from harness.testing.faults import FakeModel
    from reports.gate import baseline_from_run, run_gate, write_baseline
    from tests.harness.memory.test_memory_contestant import FlakyBM25

    conf = tmp_path / "conf" / "memory"
    conf.mkdir(parents=True)
    (conf / "flaky.yaml").write_text("_target_: tests.harness.memory.test_memory_contestant.FlakyBM25\nname: flaky\n")
    FlakyBM25.failures = 0
    args = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "mode=memory", "memory=flaky", "model=endpoint"]
    args += ["model.model=fake-model", f"cache.path={tmp_path / 'c.sqlite'}", "run.progress=false", "dataset.limit=2"]
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(["run", f"hydra.run.dir={tmp_path / 'run'}", f"model.base_url={srv.base_url}", *args]) == 3
    doc = baseline_from_run(tmp_path / "run")
    checks = {c["metric"]: c for c in doc["checks"] if c["mode"] == "memory"}
    assert checks["memory_provider_failures"] == {"mode": "memory", "metric": "memory_provider_failures", "max": 0}
    assert checks["memory_leaked_items"]["max"] == 0
    assert checks["memory_turn_recall"]["baseline"] == 1.0  # BM25 finds the oracle evidence turn
    assert checks["memory_ingest_tokens"]["baseline"] == 0.0  # BM25 spends no LLM tokens ingesting
    doc["checks"].append({"mode": "memory", "metric": "llm_score@with_provider_failures", "min": 0.9})
    result = run_gate(write_baseline(doc, tmp_path / "base.yaml"), tmp_path / "run")
    failed = {o.check.key for o in result.outcomes if o.failed}
    # the provider's failed case fails its own check, and counts as wrong in the accuracy with those cases
    assert failed == {"memory_provider_failures", "failed", "llm_score@with_provider_failures"}
    assert {o.check.key for o in result.outcomes} >= {"memory_turn_recall", "memory_leaked_items"}
