"""A memory-system comparison that cannot be gamed (issue 37, Integrity), on seeded generated cases and the real data:

1. no dataset id reaches a provider: units and sessions have opaque ids, keyed per run (harness/memory/ids.py), so a
   provider that ranks sessions by their id (`answer*`, or holding the question id) gains nothing;
2. an item that echoes the question is never evidence (harness/memory/gold.py `echoes`), and is counted;
3. an item from another case's history, by its provenance or by its text (harness/memory/isolation.py), is a
   cross-unit leak: counted, dropped before the reader, never credited, and flagged in the report's headline.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.contestants.base import CaseHistory, Question
from harness.data.longmemeval import Case, parse_cases
from harness.memory.builtin import IndexProvider
from harness.memory.contestant import ProviderContestant
from harness.memory.gold import ECHO_SHARE, Gold, echoes, words
from harness.memory.ids import KEY_FILE, IdKeyError
from harness.memory.isolation import RunCases, content_words
from harness.memory.provider import (
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    Provenance,
    ProviderBase,
    Retrieval,
)
from harness.records import load_records
from harness.session.events import Session
from tests.harness.memory.test_memory_contestant import Reader, _kit
from tests.support.fake_run import conf_dir, run_fake
from tests.support.paths import REPO

SEEDS = range(8)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 9)))


def _history(case: Case) -> CaseHistory:
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    return CaseHistory.of(case, s)


def _answer(c: ProviderContestant, case: Case, memory: str, reader: Reader | None = None):
    return c.answer(memory, Question.of(case, case.question), _kit(reader or Reader()))


def _cases(rows: list[dict]) -> list[Case]:
    return parse_cases(json.dumps(rows).encode(), "generated")


# --- 1. opaque ids ---------------------------------------------------------------------------------------------------


def _lme_like_cases(rng: random.Random, n: int) -> list[Case]:
    """Cases named as LongMemEval names them: evidence sessions `answer_<question id>_<k>`, never the first, among
    filler sessions named `sharegpt_…`/`ultrachat_…`/hex; each case with its own words."""
    rows = []
    for _ in range(n):
        qid = f"{rng.getrandbits(32):08x}"
        vocab = [_word(rng) for _ in range(60)]
        n_sessions = rng.randint(3, 7)
        evidence = set(rng.sample(range(1, n_sessions), rng.randint(1, min(2, n_sessions - 1))))
        ids, sessions = [], []
        for k in range(n_sessions):
            turns = [
                {"role": ("user", "assistant")[j % 2], "content": " ".join(rng.choices(vocab, k=rng.randint(12, 30)))}
                for j in range(rng.randint(2, 4))
            ]
            if k in evidence:
                turns[0]["has_answer"] = True
                ids.append(f"answer_{qid}_{k}")
            else:
                ids.append(rng.choice(("sharegpt_", "ultrachat_", "")) + f"{rng.getrandbits(40):010x}")
            sessions.append(turns)
        rows.append(
            {
                "question_id": qid,
                "question_type": "multi-session",
                "question": " ".join(rng.choices(vocab, k=6)) + "?",
                "answer": "x",
                "question_date": "2023/06/30",
                "haystack_session_ids": ids,
                "haystack_dates": [f"2023/05/{k + 1:02d}" for k in range(n_sessions)],
                "haystack_sessions": sessions,
                "answer_session_ids": [i for i in ids if i.startswith("answer")],
            }
        )
    return _cases(rows)


class SessionLister(ProviderBase):
    """Returns a unit's whole sessions as items with their provenance. `sniff`: ranks the sessions by their id
    first, as a service gaming the benchmark would (ids starting `answer`, ids holding the unit's question id);
    else in the order ingested. Records every id it is told."""

    def __init__(self, sniff: bool) -> None:
        self.sniff = sniff
        self.units: dict[str, list[MemorySession]] = {}
        self.ids_seen: list[str] = []

    def capabilities(self) -> Capabilities:
        return Capabilities("lister", "1")

    def setup(self, unit: str) -> None:
        self.units[unit] = []
        self.ids_seen.append(unit)

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self.units[unit] = list(sessions)
        self.ids_seen += [s.session_id for s in sessions]
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        sessions = self.units[unit]
        if self.sniff:
            question = unit.split(".")[0]  # what a unit named after its question gives away
            sessions = sorted(
                sessions, key=lambda s: (not s.session_id.startswith("answer"), question not in s.session_id)
            )
        return Retrieval(
            tuple(
                MemoryItem(
                    "\n".join(f"{t.role}: {t.content}" for t in s.turns), None, Provenance(s.session_id, None, s.date)
                )
                for s in sessions[:top_k]
            )
        )

    def teardown(self, unit: str) -> None:
        self.units.pop(unit, None)


def _gold_of(provider: SessionLister, cases: list[Case], run_dir: Path) -> list[dict]:
    c = ProviderContestant(provider, ready_poll_s=0)
    c.bind_run_dir(run_dir)
    return [_answer(c, case, c.ingest(_history(case), _kit(Reader())).memory).tool_trace[0]["gold"] for case in cases]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_provider_ranking_sessions_by_their_ids_gains_nothing(tmp_path, seed) -> None:
    cases = _lme_like_cases(random.Random(seed), 5)
    sniffer, blind = SessionLister(sniff=True), SessionLister(sniff=False)
    sniffed, ignored = _gold_of(sniffer, cases, tmp_path / "a"), _gold_of(blind, cases, tmp_path / "b")
    assert sniffed == ignored  # the same recall at every k, case by case
    # and there was something to gain: the evidence is never the first session, so ids that told it would pay
    assert all(g["session_recall_any@1"] == 0.0 for g in ignored)
    assert all(g["session_recall_any@10"] == 1.0 for g in ignored)
    # no id the provider was told is the dataset's, names the question, or says `answer`
    raw = {i for case in cases for i in (case.question_id, *case.session_ids)}
    for seen in sniffer.ids_seen:
        assert seen not in raw and "answer" not in seen
        assert not any(case.question_id in seen for case in cases)


def test_ids_are_per_run_and_a_resumed_run_keeps_its_session_ids(tmp_path) -> None:
    (case,) = _lme_like_cases(random.Random(1), 1)

    def told(run_dir: Path) -> tuple[str, list[str]]:
        p = SessionLister(sniff=False)
        c = ProviderContestant(p, ready_poll_s=0)
        c.bind_run_dir(run_dir)
        c.ingest(_history(case), _kit(Reader()))
        return p.ids_seen[0], p.ids_seen[1:]

    unit, sessions = told(tmp_path / "run")
    unit_again, sessions_again = told(tmp_path / "run")  # the same run directory: a resumed run
    other_unit, other_sessions = told(tmp_path / "other")  # another run
    assert sessions_again == sessions and unit_again != unit  # provenance still maps back; a re-ingest is fresh
    assert not set(other_sessions) & set(sessions) and other_unit not in (unit, unit_again)
    key = tmp_path / "run" / KEY_FILE
    assert key.stat().st_mode & 0o077 == 0  # the key is its owner's only

    key.write_text("not a key\n")
    with pytest.raises(IdKeyError, match=KEY_FILE):  # one error naming the file, before any case
        ProviderContestant(SessionLister(sniff=False)).bind_run_dir(tmp_path / "run")


class IdRecordingBM25(IndexProvider):
    """The built-in BM25 provider, recording the ids it is told (a class attribute: the run builds its own)."""

    seen: list[str] = []

    def setup(self, unit: str) -> None:
        IdRecordingBM25.seen.append(unit)
        super().setup(unit)

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        IdRecordingBM25.seen.extend(s.session_id for s in sessions)
        return super().ingest(unit, sessions)


@pytest.mark.e2e
def test_a_run_on_the_real_data_tells_the_provider_no_dataset_id_and_records_the_datasets(tmp_path) -> None:
    conf = conf_dir(tmp_path, "memory", {"idbm25.yaml": f"_target_: {__name__}.IdRecordingBM25\nname: bm25\n"})
    IdRecordingBM25.seen = []
    rc, _ = run_fake(tmp_path, ["mode=memory", "memory=idbm25"], conf=conf)
    assert rc == 0
    recs = load_records(tmp_path / "run" / "records.jsonl")
    raw = {r["question_id"] for r in recs}
    assert len(IdRecordingBM25.seen) > len(recs)
    for seen in IdRecordingBM25.seen:
        assert "answer" not in seen and not any(q in seen for q in raw)
    for r in recs:
        trace = r["ingest"]["trace"][0]
        assert trace["ids"] == "opaque" and trace["unit"] in IdRecordingBM25.seen
        rt = r["tool_calls"][0]
        # the record names the dataset's sessions (mapped back), and BM25 still finds the oracle evidence first
        assert all(i["session_id"].startswith("answer_") for i in rt["items"])
        assert rt["gold"]["turn_recall_any@1"] == 1.0 and rt["other_cases"] == 0 and rt["echoes"] == 0
    from reports.render import build_report

    md = build_report(tmp_path / "run")["markdown"].read_text()
    assert "every unit and session id the providers saw was opaque" in md
    assert "memory isolation broken" not in md


# --- 2. echoes of the question ----------------------------------------------------------------------------------------

EVIDENCE = "I adopted a grey cat called Biscuit from the Oslo shelter in March."
QUESTION = "What is the name of the grey cat I adopted from the shelter?"


def _question(rng: random.Random) -> list[str]:
    return [_word(rng) for _ in range(rng.randint(5, 9))]


@pytest.mark.parametrize("seed", SEEDS)
def test_echoes_of_the_question_are_never_credited_whatever_their_disguise(seed) -> None:
    rng = random.Random(seed)
    q = _question(rng)
    query = "What about " + " ".join(q) + "?"
    answer = [_word(rng) for _ in range(4)]
    turn = " ".join(q[:4] + answer + q[4:])  # the evidence: the question's words and the answer's
    gold = Gold([("s1", [(turn, True)]), ("s2", [(" ".join(_word(rng) for _ in range(12)), False)])])
    noise = [_word(rng) for _ in range(40)]
    start = rng.randint(0, len(q) - 3)
    changed = list(q)
    changed[rng.randrange(len(q))] = _word(rng)
    disguised = {
        "equal": query,
        "case and punctuation": query.upper().replace("?", "!!"),
        "a part of it": " ".join(q[start : start + 3]),
        "shuffled": " ".join(rng.sample(q, len(q))),
        "a word changed": " ".join(changed),
        "a word added": " ".join(q + [_word(rng)]),
    }
    for name, text in disguised.items():
        assert echoes(text, query), name
        for prov in (None, Provenance("s1", 0, None), Provenance("s1", None, None)):
            label = gold.label(text, prov, query)
            assert label.by == "echo" and not gold.hits_turn(label) and not gold.hits_session(label), name
    # padded with noise: an echo while the question's words are most of it; never credited at any padding
    for n in range(len(noise) + 1):
        padded = " ".join(q + noise[:n])
        assert echoes(padded, query) == (len(q) >= ECHO_SHARE * (len(q) + n)), n
        assert not gold.hits_turn(gold.label(padded, None, query)), n
    # a real evidence item sharing the question's words is credited, and is no echo
    real = gold.label(" ".join(q[:3] + answer), None, query)
    assert real.by == "overlap" and gold.hits_turn(real) and not echoes(" ".join(q[:3] + answer), query)
    assert gold.hits_turn(gold.label(turn, None, query)) and gold.hits_turn(gold.label("x", Provenance("s1", 0), query))


def test_the_stated_examples() -> None:
    gold = Gold([("s1", [(EVIDENCE, True)])])
    assert gold.label(QUESTION, None, QUESTION).by == "echo"
    assert gold.label("User adopted a grey cat named Biscuit", None, QUESTION).by == "overlap"  # the answer's words
    assert gold.hits_turn(gold.label("The grey cat's name is Biscuit, from the Oslo shelter", None, QUESTION))
    # restating the question's own words is no evidence: the match rests on them alone
    assert not gold.hits_turn(gold.label("the user adopted a grey cat from a shelter", None, QUESTION))
    assert gold.hits_turn(gold.label("the user adopted a grey cat from a shelter", None, None))  # not a retrieval
    assert words(QUESTION) == {"name", "grey", "cat", "adopted", "shelter"}


class Echo(ProviderBase):
    """Returns the question, then `then` (texts, no provenance)."""

    then: tuple[str, ...] = ()

    def capabilities(self) -> Capabilities:
        return Capabilities("echo", "1")

    def setup(self, unit: str) -> None:
        pass

    def ingest(self, unit: str, sessions) -> Ingest:
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        padded = query + " " + " ".join(f"zq{i}x" for i in range(30))
        return Retrieval(tuple(MemoryItem(t) for t in (query, query.lower(), padded, *self.then)))

    def teardown(self, unit: str) -> None:
        pass


def test_a_provider_echoing_the_question_gets_no_recall_and_its_echoes_are_counted() -> None:
    (case,) = _cases(
        [
            {
                "question_id": "q1",
                "question_type": "single-session-user",
                "question": QUESTION,
                "answer": "Biscuit",
                "question_date": "2023/05/30",
                "haystack_session_ids": ["answer_1"],
                "haystack_dates": ["2023/05/01"],
                "haystack_sessions": [[{"role": "user", "content": EVIDENCE, "has_answer": True}]],
                "answer_session_ids": ["answer_1"],
            }
        ]
    )
    for then, recall in (((), 0.0), (("User adopted a grey cat named Biscuit at the Oslo shelter",), 1.0)):
        p = Echo()
        p.then = then
        c = ProviderContestant(p)
        out = _answer(c, case, c.ingest(_history(case), _kit(Reader())).memory)
        rt = out.tool_trace[0]
        assert rt["gold"]["turn_recall_any@3"] == 0.0  # the echoes hold no evidence
        assert rt["gold"]["turn_recall_any@10"] == recall  # a real evidence item after them still counts
        # the question and its lower-case copy are echoes; padded with 30 other words it is not one, yet no evidence
        assert rt["echoes"] == 2 and [i["gold"]["by"] for i in rt["items"][:3]] == ["echo", "echo", "none"]


# --- 3. cross-unit leaks ---------------------------------------------------------------------------------------------

TEMPLATE = (
    "adopted grey kitten called {} yesterday afternoon from the riverside animal {} shelter near the old harbour "
    "bridge where volunteers {} described her playful temperament gentle purring habits and her fondness for {} "
    "sunny windowsills during quiet mornings"
)


def _similar_cases(rng: random.Random, n: int) -> list[Case]:
    """Cases whose evidence turns share most of their words (a template with four words of each case's own), so
    that another case's evidence overlaps this case's by the gold rule; each with filler turns of its own words."""
    rows = []
    for k in range(n):
        mine = [_word(rng) for _ in range(4)]
        filler = [" ".join(_word(rng) for _ in range(rng.randint(15, 30))) for _ in range(rng.randint(1, 3))]
        turns = [{"role": "user", "content": TEMPLATE.format(*mine), "has_answer": True}] + [
            {"role": "assistant", "content": f} for f in filler
        ]
        rows.append(
            {
                "question_id": f"c{k}",
                "question_type": "single-session-user",
                "question": "Where did I adopt my grey kitten?",
                "answer": mine[1],
                "question_date": "2023/05/30",
                "haystack_session_ids": [f"answer_c{k}"],
                "haystack_dates": ["2023/05/01"],
                "haystack_sessions": [turns],
                "answer_session_ids": [f"answer_c{k}"],
            }
        )
    return _cases(rows)


class NeverForgets(ProviderBase):
    """A service that keeps every unit (teardown forgets nothing) and searches all of them: every turn it holds,
    ranked by the words it shares with the query, the oldest unit first among equals (a naive global index).
    `provenance`: it names each item's session and turn, as it was told them; else it returns text only.
    `oldest_first`: it reads its log from the start instead (no ranking at all)."""

    def __init__(self, provenance: bool = True, oldest_first: bool = False) -> None:
        self.provenance, self.oldest_first = provenance, oldest_first
        self.turns: list[tuple[str, MemorySession, int]] = []  # (unit, session, turn index)

    def capabilities(self) -> Capabilities:
        return Capabilities("never-forgets", "1")

    def setup(self, unit: str) -> None:
        pass

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self.turns += [(unit, s, i) for s in sessions for i in range(len(s.turns))]
        return Ingest()

    def ranked(self, query: str, only: str | None = None) -> list[tuple[str, MemorySession, int]]:
        q = words(query)
        pool = [t for t in self.turns if only is None or t[0] == only]
        return pool if self.oldest_first else sorted(pool, key=lambda t: -len(q & words(t[1].turns[t[2]].content)))

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        return Retrieval(
            tuple(
                MemoryItem(
                    f"[{s.date}] {s.turns[i].role}: {s.turns[i].content}",
                    None,
                    Provenance(s.session_id, i, s.date) if self.provenance else None,
                )
                for _, s, i in self.ranked(query)[:top_k]
            )
        )

    def teardown(self, unit: str) -> None:
        pass  # never forgets


@pytest.mark.parametrize("provenance", [True, False], ids=["by provenance", "by text"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_provider_searching_every_unit_has_each_foreign_item_counted_dropped_and_never_credited(
    seed, provenance
) -> None:
    rng = random.Random(seed)
    cases = _similar_cases(rng, rng.randint(4, 7))
    p = NeverForgets(provenance)
    c = ProviderContestant(p, top_k=3, ready_poll_s=0)
    units = [c.ingest(_history(case), _kit(Reader())).memory for case in cases]  # every unit first, then answers
    leaks = 0
    for case, unit in zip(cases, units):
        reader = Reader()
        out = _answer(c, case, unit, reader)
        rt = out.tool_trace[0]
        returned = p.ranked(case.question)[:3]
        foreign = [u != unit for u, _, _ in returned]
        leaks += sum(foreign)
        # never credited: recall is what the case's own items hold, however much the foreign ones overlap its evidence
        own_evidence = any(not f and i == 0 for f, (_, _, i) in zip(foreign, returned))
        assert rt["gold"]["turn_recall_any@3"] == float(own_evidence)
        assert rt["gold"]["session_recall_any@3"] == float(not all(foreign))
        # dropped before the reader, as an item dated after the question is
        (sent,) = reader.sent
        for (_, s, i), f in zip(returned, foreign):
            assert (s.turns[i].content in sent) != f
        # and counted, each item named as another case's
        assert rt["other_cases"] == sum(foreign)
        assert [i["gold"]["by"] == "other_case" for i in rt["items"]] == foreign
        assert {i["gold"].get("other_case") for i, f in zip(rt["items"], foreign) if f} <= {
            x.question_id for x in cases
        }
    assert leaks >= len(cases)  # the generated cases did tempt: most answers were handed other cases' evidence


def test_leaks_from_cases_an_earlier_process_ingested_are_caught_once_the_runs_cases_are_bound() -> None:
    """A resumed run answers a case whose service still holds units of cases done before the kill (never ingested by
    this process): the pipeline hands every case of the run over first (`bind_cases`), so their text is known."""
    cases = _similar_cases(random.Random(11), 4)
    earlier = NeverForgets(provenance=False)
    first = ProviderContestant(earlier, top_k=3, ready_poll_s=0)
    for case in cases[:3]:
        first.ingest(_history(case), _kit(Reader()))
    resumed = ProviderContestant(earlier, top_k=3, ready_poll_s=0)  # the same service, a new process
    resumed.bind_cases(cases)
    last = cases[3]
    rt = _answer(resumed, last, resumed.ingest(_history(last), _kit(Reader())).memory).tool_trace[0]
    assert rt["gold"]["turn_recall_any@3"] == 0.0 and rt["other_cases"] == 3


def test_the_same_provider_isolated_is_not_flagged_and_keeps_its_recall() -> None:
    rng = random.Random(3)
    cases = _similar_cases(rng, 5)

    class Isolated(NeverForgets):
        def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
            keep, self.turns = self.turns, [t for t in self.turns if t[0] == unit]
            try:
                return super().retrieve(unit, query, top_k, as_of)
            finally:
                self.turns = keep

    for provenance in (True, False):
        c = ProviderContestant(Isolated(provenance), top_k=3, ready_poll_s=0)
        units = [c.ingest(_history(case), _kit(Reader())).memory for case in cases]
        for case, unit in zip(cases, units):
            rt = _answer(c, case, unit).tool_trace[0]
            assert rt["other_cases"] == 0 and rt["gold"]["turn_recall_any@1"] == 1.0


def _oracle(n: int) -> list[Case]:
    from harness.data.longmemeval import read_json_bytes

    path = REPO.parent / "shared" / "data" / "longmemeval" / "longmemeval_oracle.json.gz"
    if not path.exists():
        pytest.skip(f"{path}: the oracle file is not here")
    return parse_cases(read_json_bytes(path), str(path))[:n]


@pytest.mark.real_data
def test_on_the_real_data_copied_text_is_told_from_the_cases_own_and_never_wrongly() -> None:
    """Every turn of 120 oracle cases checked as an item of its own case: never flagged. Each turn of 20 content words
    or more checked as an item of a case far from it in the file (LongMemEval's neighbours can be variants of one
    haystack) that does not hold it: flagged, and nearly always as copied from a case that holds it."""
    from harness.memory.ids import RunIds

    cases = _oracle(120)
    run = RunCases(RunIds(b"k" * 32, "memory"))
    run.add_cases(cases)
    holders: dict[str, set[str]] = {}
    for case in cases:
        for turns in case.sessions:
            for t in turns:
                holders.setdefault(t.content, set()).add(case.question_id)
    checked = flagged = named = 0
    for n, case in enumerate(cases):
        stranger = cases[(n + len(cases) // 2) % len(cases)].question_id
        for turns in case.sessions:
            for t in turns:
                assert run.copied_from(t.content, case.question_id) is None  # its own: never a leak
                if len(content_words(t.content)) >= 20 and stranger not in holders[t.content]:
                    checked += 1
                    got = run.copied_from(t.content, stranger)
                    flagged += got is not None
                    named += got in holders[t.content]
    assert checked > 1000 and flagged >= 0.99 * checked and named >= 0.98 * checked


# --- the run report ----------------------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_run_with_a_provider_that_never_forgets_is_flagged_in_the_headline(tmp_path) -> None:
    from reports.memory_systems import memory_scoreboard
    from reports.render import build_report

    conf = conf_dir(tmp_path, "memory", {"leaky.yaml": f"_target_: {__name__}.NeverForgets\noldest_first: true\n"})
    rc, _ = run_fake(tmp_path, ["mode=memory", "memory=leaky", "run.concurrency=1"], conf=conf)
    assert rc == 0
    recs = load_records(tmp_path / "run" / "records.jsonl")
    leaks = sum(r["tool_calls"][0]["other_cases"] for r in recs)
    assert leaks >= 1  # the second case finds the first one's turns
    for r in recs:
        for item in r["tool_calls"][0]["items"]:
            if item["gold"]["by"] == "other_case":
                assert not item["gold"]["evidence_turn"] and not item["gold"]["evidence_session"]
                assert item["gold"]["other_case"] != r["question_id"] and item["session_id"].startswith("answer_")
    out = build_report(tmp_path / "run")
    md, page = out["markdown"].read_text(), out["html"].read_text()
    headline = md[md.index("## Headline") : md.index("## Reference table")]
    assert f"memory isolation broken: memory: never-forgets (fair) returned {leaks} item(s)" in headline
    assert "memory isolation broken" in page[: page.index('id="run"')]  # on the first screen
    leakage = md[md.index("### Leakage audits") :].split("###")[1]
    row = next(line for line in leakage.splitlines() if line.startswith("| memory: never-forgets"))
    cells = [x.strip() for x in row.strip("|").split("|")]
    assert cells[6] == str(leaks)  # the "from another case" column
    assert memory_scoreboard(recs, "lme_acc")[("memory", "memory_cross_unit_items")] == leaks


def test_records_from_before_opaque_ids_are_named_as_such_and_a_providers_name_stays_text() -> None:
    from reports.memory_systems import integrity_flags, leakage_table, markdown, memory_cases
    from tests.harness.memory.test_memory_measurements import _g, _rec

    old = _rec("q1", correct=1.0, gold=_g(True))  # an ingest trace without `ids`: written before ids were opaque
    old["ingest"]["trace"][0]["provider"] = "<b>x</b> [a](http://evil)"
    new = _rec("q2", correct=1.0, gold=_g(True))
    new["ingest"]["trace"][0]["ids"] = "opaque"
    (flag,) = integrity_flags([old, new])
    assert flag.startswith("Ids: `memory: <b>x</b>") and "saw the dataset's own unit and session ids" in flag
    text = markdown([leakage_table(memory_cases([old], None, {}))])
    assert "`memory: <b>x</b> [a](http://evil) (fair)` saw the dataset's own" in text  # a code span: never rendered
    assert integrity_flags([new]) == [] and "every unit and session id the providers saw was opaque" in markdown(
        [leakage_table(memory_cases([new], None, {}))]
    )


@pytest.mark.e2e
def test_a_damaged_id_key_stops_the_run_before_any_case_with_one_error(tmp_path, capsys) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / KEY_FILE).write_text("garbage\n")
    rc, requests = run_fake(tmp_path, ["mode=memory", "memory=bm25"])
    assert rc == 2 and requests == [] and not (tmp_path / "run" / "records.jsonl").exists()
    assert f"{tmp_path / 'run' / KEY_FILE}: not this harness's id key" in capsys.readouterr().err
