"""One case for one contestant as the pipeline hands it over (runners/replay.py `_run_case`), for tests that
drive a contestant directly: ingest the history, then answer from what ingest built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.contestants.base import Answer, CaseHistory, Ingested, Question, Toolkit
from harness.data.longmemeval import Case
from harness.session.events import Session


@dataclass
class Pair:
    case: Case
    session: Session
    kit: Toolkit
    question_text: str | None = None  # the question message as sent; None: the dataset's question

    @property
    def history(self) -> CaseHistory:
        return CaseHistory.of(self.case, self.session)

    @property
    def question(self) -> Question:
        return Question.of(self.case, self.case.question if self.question_text is None else self.question_text)


def ingest_answer(contestant: Any, pair: Pair) -> tuple[Ingested, Answer]:
    ingested = contestant.ingest(pair.history, pair.kit)
    return ingested, contestant.answer(ingested.memory, pair.question, pair.kit)


def answer(contestant: Any, pair: Pair) -> Answer:
    return ingest_answer(contestant, pair)[1]
