"""summary and summary_ondemand: a compact summary replaces the history it covers (reference §4.3, §4.4).

Their ingest is the summary, through the run's summary engine (`Toolkit.summaries`): one generation per case
serves both contestants by default (the reference's reuse; `run.share_summary`), attributed to the one that
generated it. summary_ondemand's ingest also builds the `session_search`/`session_load` index over the events
the summary hides (`Toolkit.retrieval`).
"""

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
    query_latency,
    question_message,
)
from harness.golang import go_trim_space  # answers are trimmed as the reference's Go code trims them
from harness.llm.types import ChatResult, Message
from harness.prompts import ondemand as ondemand_prompts
from harness.prompts.answer import LME_INSTRUCTION, LME_ONDEMAND_INSTRUCTION
from harness.session.assembly import Injection
from harness.session.events import Session
from harness.settings import yaml_field


@dataclass(frozen=True)
class SummaryMemory:
    """What the summary contestants keep of a case: its events, their summary, and (on demand) the tools."""

    session: Session
    summary: Any  # harness.session.summary.Summary (its boundary says which events it covers)
    tools: Any = None  # SessionTools over the events the summary hides (summary_ondemand)


@dataclass
class SummaryMode(ContestantBase):
    """System = instruction + summary block; the events after the summary's boundary follow, then the question."""

    name: str = "summary"
    instruction: str = LME_INSTRUCTION
    injection: Injection = yaml_field("mode", "summary", "injection")  # system | user

    def _summarize(self, history: CaseHistory, kit: Toolkit) -> tuple[Any, dict[str, Any], list[ChatResult]]:
        got = kit.summaries.get(history.unit_id, history.session, self.name)
        calls = [] if got.reused else list(got.outcome.calls)  # a reused summary cost this contestant nothing
        return got.summary, got.record(), calls

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        summary, info, calls = self._summarize(history, kit)
        return Ingested(
            memory=SummaryMemory(history.session, summary),
            calls=calls,
            summary=info,
        )

    def build(self, memory: SummaryMemory, question: Question, system: str) -> list[Message]:
        from harness.session.assembly import assemble

        # assemble() keeps only the events after the summary's boundary (summary.events_after).
        return assemble(
            system, memory.summary, memory.session.events, question_message(question), injection=self.injection
        )

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        messages = self.build(memory, question, self.instruction)
        sw = Stopwatch()
        r = sw.model(lambda: kit.model.chat(messages, **kit.generation))
        return Answer(
            prediction=go_trim_space(r.content),
            calls=[r],
            query_latency_s=query_latency([r], sw.harness_s()),
            final_messages=len(messages),
        )


@dataclass
class SummaryOnDemandMode(SummaryMode):
    """Summary + `session_search`/`session_load` over the hidden original events (reference §4.4)."""

    name: str = "summary_ondemand"
    injection: Injection = yaml_field("mode", "summary_ondemand", "injection")
    ondemand_instruction: str = LME_ONDEMAND_INSTRUCTION
    max_tool_iterations: int = yaml_field("mode", "summary_ondemand", "max_tool_iterations")
    use_overview: bool = True
    use_post_tool_prompt: bool = True
    # None = "auto" as the reference. "required" forces a tool call in the first round: small local models
    # otherwise rarely search, and the mode would measure their reluctance rather than the design.
    first_tool_choice: str | None = None

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        summary, info, calls = self._summarize(history, kit)
        tools = kit.retrieval.tools(history.session, boundary=summary.boundary)  # the index over the hidden events
        return Ingested(
            memory=SummaryMemory(history.session, summary, tools),
            calls=calls,
            summary=info,
        )

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        system = self.instruction + "\n\n" + self.ondemand_instruction
        messages = self.build(memory, question, system)
        if self.use_overview:  # assemble() always starts with the system message
            messages[0] = {
                **messages[0],
                "content": messages[0]["content"] + "\n\n" + ondemand_prompts.ONDEMAND_SESSION_OVERVIEW,
            }
        base_system = messages[0]["content"]
        tools = memory.tools
        specs = tools.specs()
        sw = Stopwatch()
        calls: list[ChatResult] = []
        trace: list[dict[str, Any]] = []
        tool_results: list[tuple[str, str]] = []
        rounds = 0
        prediction, error = "", None
        while True:
            pending_tool = ondemand_prompts.has_pending_tool_result(messages)
            messages[0] = {
                **messages[0],
                "content": base_system
                + (
                    "\n\n" + ondemand_prompts.DEFAULT_POST_TOOL_PROMPT
                    if pending_tool and self.use_post_tool_prompt
                    else ""
                ),
            }
            req = [dict(m) for m in messages]
            extra = {"tool_choice": self.first_tool_choice} if self.first_tool_choice and rounds == 0 else {}
            r = sw.model(lambda: kit.model.chat(req, tools=specs, **kit.generation, **extra))  # noqa: B023 (called now)
            calls.append(r)
            if not r.tool_calls:
                prediction = go_trim_space(r.content)
                break
            if rounds >= self.max_tool_iterations:
                error = f"max tool iterations ({self.max_tool_iterations}) exceeded"
                break
            rounds += 1
            messages.append(r.to_message())
            for tc in r.tool_calls:
                fn = tc.get("function", {})
                out = tools.call(fn.get("name", ""), fn.get("arguments", ""))
                trace.append(
                    {
                        "round": rounds,
                        "id": tc.get("id"),
                        "name": fn.get("name"),
                        "arguments": fn.get("arguments"),
                        "ok": out.ok,
                        "error": out.error,
                        "trace": out.trace,
                        "response_chars": len(out.content),
                    }
                )
                messages.append({"role": "tool", "tool_call_id": tc.get("id") or "", "content": out.content})
                tool_results.append((fn.get("name", ""), out.content))
        return Answer(
            prediction=prediction,
            calls=calls,
            query_latency_s=query_latency(calls, sw.harness_s()),
            tool_trace=trace,
            error=error,
            final_messages=len(messages),
            tool_results=tool_results,
        )
