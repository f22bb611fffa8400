"""Modes against a scripted in-process model: what each sends, and how long_context fits the window."""

import json

from harness.contestants.base import Toolkit
from harness.data.longmemeval import parse_cases
from harness.llm.types import Usage
from harness.prompts.answer import LME_INSTRUCTION
from harness.session.events import Session
from harness.session.tokens import o200k_counter
from harness.testing.faults import FakeModel, ToolStep
from runners.modes import LongContextMode
from tests.support.contestant_kit import Pair, answer, ingest_answer
from tests.support.dataset_rows import make_row


def Scripted(replies: list) -> FakeModel:
    """Answers `replies` in order, then "done"."""
    return FakeModel(
        script=replies, then=lambda n: "done", usage=Usage(100, 5), latency_s=0.5, model="scripted", finish_reason=None
    )


def _ctx(model, n_turns=40, window=100_000):
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 50} for i in range(n_turns)
    ]
    case = parse_cases(json.dumps([make_row(sessions=[turns])]).encode(), "x")[0]
    s = Session(id="s", user_id="u")
    s.extend(case.events())
    kit = Toolkit(
        model=model,
        generation={"temperature": 0, "max_tokens": 64},
        context_window=window,
        token_counter=o200k_counter(),
    )
    return Pair(case=case, session=s, kit=kit)


def test_long_context_sends_instruction_every_turn_then_question():
    m = Scripted([" Paris \n"])
    ctx = _ctx(m, n_turns=6)
    out = answer(LongContextMode(), ctx)
    msgs = m.calls[0]["messages"]
    assert msgs[0] == {"role": "system", "content": LME_INSTRUCTION}
    assert [x["content"] for x in msgs[1:-1]] == [e.content for e in ctx.session.events]
    assert msgs[-1] == {"role": "user", "content": ctx.case.question}
    assert m.calls[0]["params"] == {"temperature": 0, "max_tokens": 64}
    assert out.prediction == "Paris" and out.truncation["truncated"] is False
    assert out.query_latency_s >= 0.5  # the model's measured latency is part of the query latency


def test_long_context_drops_oldest_turns_to_fit_and_says_so():
    m = Scripted(["x"])
    ctx = _ctx(m, n_turns=40, window=1200)
    out = answer(LongContextMode(), ctx)
    t = out.truncation
    assert t["truncated"] and t["dropped_events"] > 0
    assert t["kept_events"] + t["dropped_events"] == 40
    sent = m.calls[0]["messages"]
    assert sent[1]["role"] == "user"  # history starts at a user turn
    assert sent[-2]["content"] == ctx.session.events[-1].content  # the newest turns are kept
    assert o200k_counter().count_messages(sent) <= 1200 - 64


def test_long_context_never_crashes_when_nothing_fits():
    m = Scripted(["x"])
    out = answer(LongContextMode(), _ctx(m, n_turns=4, window=10))
    assert out.truncation["kept_events"] == 0 and len(m.calls[0]["messages"]) == 2


# --- summary_ondemand: the tool loop -------------------------------------------------------------
from harness.prompts.ondemand import DEFAULT_POST_TOOL_PROMPT  # noqa: E402
from harness.retrieval.retriever import Retriever  # noqa: E402
from harness.session.store import InMemoryStore  # noqa: E402
from harness.session.summary import Summarizer, SummaryPrompt  # noqa: E402
from runners.modes import SummaryOnDemandMode  # noqa: E402
from runners.summaries import SummaryProvider  # noqa: E402


def ToolScripted(plan: list) -> FakeModel:
    """Summaries get a fixed text; answers follow `plan`: "search" → a session_search call, else the text."""
    steps = [ToolStep("session_search", '{"query": "turn 3"}') if p == "search" else f" {p} " for p in plan]
    return FakeModel(
        script=steps,
        then=lambda n: " final ",
        fixed={"summary": "summary text"},
        usage=Usage(100, 5),
        latency_s=0.2,
        model="scripted",
        finish_reason=None,
    )


def answer_calls(m: FakeModel) -> list[dict]:
    return [c for c in m.calls if c["purpose"] != "summary"]


def _ondemand_ctx(model):
    ctx = _ctx(model, n_turns=8)
    ctx.kit.summaries = SummaryProvider(Summarizer(model, SummaryPrompt.trpc_default()), InMemoryStore())
    ctx.kit.retrieval = Retriever()
    return ctx


def test_ondemand_searches_then_answers_with_the_post_tool_prompt_and_trace():
    m = ToolScripted(["search", "the answer"])
    ingested, out = ingest_answer(SummaryOnDemandMode(first_tool_choice="required"), _ondemand_ctx(m))
    assert out.prediction == "the answer" and out.error is None
    first, second = answer_calls(m)
    assert first["params"]["tool_choice"] == "required" and "tool_choice" not in second["params"]
    assert DEFAULT_POST_TOOL_PROMPT not in first["messages"][0]["content"]
    assert second["messages"][0]["content"].endswith(DEFAULT_POST_TOOL_PROMPT)
    assert [m_["role"] for m_ in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert out.tool_trace[0]["name"] == "session_search" and out.tool_trace[0]["ok"]
    assert len(out.calls) == 2 and ingested.summary["text"] == "summary text"


def test_ondemand_stops_after_the_tool_iteration_limit_like_the_reference():
    m = ToolScripted(["search"] * 10)
    out = answer(SummaryOnDemandMode(max_tool_iterations=2), _ondemand_ctx(m))
    assert out.error == "max tool iterations (2) exceeded" and out.prediction == ""
    assert len(out.calls) == 3 and len(out.tool_trace) == 2
