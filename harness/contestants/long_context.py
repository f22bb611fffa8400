"""long_context: all history as chat messages (reference §4.2), fitted to the model's window when it does not fit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.contestants.base import (
    Answer,
    CaseHistory,
    ContestantBase,
    Ingested,
    Question,
    Stopwatch,
    Toolkit,
    answer_budget,
    query_latency,
    question_message,
    reply_room,
    window_counter,
)
from harness.golang import go_trim_space  # answers are trimmed as the reference's Go code trims them
from harness.llm.types import Message
from harness.prompts.answer import LME_INSTRUCTION
from harness.session.events import Session
from harness.settings import yaml_field


@dataclass
class LongContextMode(ContestantBase):
    """Ingest keeps the events; answer sends them all (the newest `max_events`), then the question."""

    name: str = "long_context"
    instruction: str = LME_INSTRUCTION
    max_events: int = yaml_field("mode", "long_context", "max_events")  # the reference session keeps 1000
    reserve_tokens: int = 64

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        return Ingested(memory=history.session)

    def window_needed(self, history: CaseHistory, question: Question, kit: Toolkit) -> int:
        """The window this case's prompt needs uncut (`WholeHistory`): what `answer` would send before the fit."""
        _, messages = self._prompt(history.session, question)
        return window_counter(kit).count_messages(messages) + reply_room(kit, self.reserve_tokens)

    def _prompt(self, session: Session, question: Question) -> tuple[list[Any], list[Message]]:
        """(the events shown, the messages before the fit): the newest `max_events`, from a user turn on."""
        from harness.session.assembly import drop_leading_non_user

        events = session.events[-self.max_events :] if self.max_events else session.events
        shown = drop_leading_non_user(events)  # like the reference session filter: history starts at a user turn
        messages = [
            {"role": "system", "content": self.instruction},
            *(e.to_message() for e in shown),
            question_message(question),
        ]
        return shown, messages

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        from harness.session.assembly import tailor

        session: Session = memory
        sw = Stopwatch()
        shown, messages = self._prompt(session, question)
        # The last layer: fit the model's window by dropping the oldest rounds (never a tool call from its result).
        budget = answer_budget(kit, self.reserve_tokens)
        fitted = tailor(messages, budget, window_counter(kit))
        dropped = len(session.events) - len(shown) + fitted.dropped
        info = {
            "truncated": dropped > 0,
            "dropped_events": dropped,
            "kept_events": len(session.events) - dropped,
            "total_events": len(session.events),
            "estimated_prompt_tokens": fitted.tokens_after,
            "estimated_full_prompt_tokens": fitted.tokens_before,
            "budget_tokens": budget,
            "fits": fitted.fits,
        }
        r = sw.model(lambda: kit.model.chat(fitted.messages, **kit.generation))
        return Answer(
            prediction=go_trim_space(r.content),
            calls=[r],
            query_latency_s=query_latency([r], sw.harness_s()),
            truncation=info,
            final_messages=len(fitted.messages),
        )
