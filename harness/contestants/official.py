"""The official LongMemEval answer prompt (a fourth contestant, `mode=lme_official`): not one of the tRPC strategies.

Upstream (xiaowu0162/LongMemEval src/generation/run_generation.py, `prepare_prompt`, retriever "orig-session"
/ "oracle-session", history_format json, no CoT) sends ONE user message: an instruction, every session sorted by
its date string as `### Session i` with its date and its turns as JSON (without `has_answer`), then the question's
date and the question. Upstream truncates the history string to a token budget keeping its start; here the
oldest sessions are dropped until the prompt fits the model's window (recorded in `truncation`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.contestants.base import (
    Answer,
    CaseHistory,
    ContestantBase,
    DatedSession,
    Ingested,
    Question,
    Stopwatch,
    Toolkit,
    answer_budget,
    query_latency,
    reply_room,
    window_counter,
)
from harness.prompts.answer import LME_OFFICIAL_TEMPLATE, SESSION_BLOCK


def session_blocks(sessions: Sequence[DatedSession]) -> list[str]:
    """Each session as upstream renders it, in upstream's order (sorted by the date string)."""
    dated = sorted(sessions, key=lambda s: s.date)
    return [
        SESSION_BLOCK.format(
            i + 1, s.date, "\n" + json.dumps([{"role": t.role, "content": t.content} for t in s.turns])
        )
        for i, s in enumerate(dated)
    ]


def first_kept(
    blocks: Sequence[str], prompt: Callable[[list[str]], str], count: Callable[[str], int], budget: int
) -> int:
    """Index of the oldest session kept: the first i such that `prompt(blocks[i:])` fits `budget` tokens (the
    newest session always stays). Each block is counted once to estimate i (the prompt's count is about the
    sum of its parts), then whole prompts are counted near it to settle it exactly: a handful of counts instead
    of one whole-prompt count per dropped session (~50 of ~115K tokens on an `_s` haystack)."""
    n = len(blocks)
    if n <= 1:
        return 0
    sizes = [count(b) for b in blocks]
    estimate, i = count(prompt([])) + sum(sizes), 0
    while i < n - 1 and estimate > budget:
        estimate -= sizes[i]
        i += 1

    def fits(j: int) -> bool:
        return count(prompt(list(blocks[j:]))) <= budget

    if fits(i):
        while i > 0 and fits(i - 1):
            i -= 1
    else:
        while i < n - 1 and not fits(i):
            i += 1
    return i


@dataclass
class LongMemEvalOfficialMode(ContestantBase):
    """Ingest renders the sessions as upstream's blocks; answer fits them and the question into one message."""

    name: str = "lme_official"
    reserve_tokens: int = 64

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        return Ingested(memory=session_blocks(history.sessions))

    def window_needed(self, history: CaseHistory, question: Question, kit: Toolkit) -> int:
        """The window this case's prompt needs uncut (`WholeHistory`): every session block and the question."""
        text = self._prompt(question)(session_blocks(history.sessions))
        return window_counter(kit).count(text) + reply_room(kit, self.reserve_tokens)

    @staticmethod
    def _prompt(question: Question) -> Callable[[list[str]], str]:
        """The one message, of the session blocks kept."""

        def prompt(kept: list[str]) -> str:
            return LME_OFFICIAL_TEMPLATE.format("".join(kept), question.date, question.text)

        return prompt

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        sw = Stopwatch()
        blocks: list[str] = memory
        counter = window_counter(kit)
        budget = answer_budget(kit, self.reserve_tokens)
        prompt = self._prompt(question)
        full = counter.count(prompt(blocks))
        kept = blocks if full <= budget else blocks[first_kept(blocks, prompt, counter.count, budget) :]
        text = prompt(kept)
        tokens = full if len(kept) == len(blocks) else counter.count(text)
        info = {
            "truncated": len(kept) < len(blocks),
            "dropped_sessions": len(blocks) - len(kept),
            "kept_sessions": len(kept),
            "estimated_prompt_tokens": tokens,
            "estimated_full_prompt_tokens": full,
            "budget_tokens": budget,
            "fits": tokens <= budget,
        }
        messages = [{"role": "user", "content": text}]
        r = sw.model(lambda: kit.model.chat(messages, **kit.generation))
        return Answer(
            prediction=r.content.strip(),
            calls=[r],
            query_latency_s=query_latency([r], sw.harness_s()),
            truncation=info,
            final_messages=1,
        )
