"""The three context-management strategies, as interchangeable modes (Hydra `mode=` group).

A mode turns (case, session) into one answer: it assembles the request, runs the model (and tools),
and reports what it sent and spent. It never scores: scoring happens downstream on the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.data.longmemeval import Case
from harness.golang import go_trim_space  # answers are trimmed as the reference's Go code trims them
from harness.llm.types import ChatModel, ChatResult, Message
from harness.prompts import ondemand as ondemand_prompts
from harness.prompts.answer import LME_INSTRUCTION, LME_ONDEMAND_INSTRUCTION
from harness.session.events import Session
from harness.settings import yaml_field


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...
    def count_messages(self, messages: Sequence[Message]) -> int: ...


@dataclass
class CaseContext:
    """Everything a mode may use for one case; built by the replay runner."""

    case: Case
    session: Session
    model: ChatModel
    generation: dict[str, Any]
    context_window: int
    token_counter: TokenCounter
    token_ratio: float = 1.0  # model tokens per o200k token (safety factor for fitting a local model's window)
    summaries: Any = None  # SummaryProvider (summary modes)
    tools_factory: Callable[..., Any] | None = None  # (session, boundary) -> SessionTools (ondemand)
    question_text: str | None = None  # the question message as sent (wire.question_template); None: case.question


@dataclass
class ModeOutput:
    prediction: str
    calls: list[ChatResult]
    query_latency_s: float
    tool_trace: list[dict[str, Any]] = field(default_factory=list)
    truncation: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None
    final_messages: int = 0
    tool_results: list[tuple[str, str]] = field(default_factory=list)  # (tool name, content) as sent back


class Mode(Protocol):
    name: str

    def run(self, ctx: CaseContext) -> ModeOutput: ...


def modes_from_config(mode_cfg: Mapping[str, Any]) -> list[Mode]:
    """The modes of the `mode:` group, each named by its config key (`mode.summary_short: {...}` is the mode
    `summary_short`), so two variants of one strategy never share a name (records, summaries, report rows)."""
    from hydra.utils import instantiate

    from runners.settings import RunConfigError

    modes = []
    for key, node in mode_cfg.items():
        given = node.get("name") if hasattr(node, "get") else None
        if given is not None and given != key:
            raise RunConfigError(
                f"mode.{key}.name={given!r}: a mode's name is its config key ({key!r}); drop `name` or rename the key"
            )
        modes.append(instantiate(node, name=str(key)))
    return modes


def _question_message(ctx: CaseContext) -> Message:
    return {"role": "user", "content": ctx.case.question if ctx.question_text is None else ctx.question_text}


def query_latency(calls: Sequence[ChatResult], harness_s: float) -> float:
    """Query-stage latency: model time (as originally measured, also when replayed from cache) plus harness time."""
    return sum(c.latency_s for c in calls) + harness_s


class Stopwatch:
    """Separates the harness's own time from time spent waiting on the model."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.model_wall = 0.0

    def model(self, fn: Callable[[], ChatResult]) -> ChatResult:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.model_wall += time.perf_counter() - t0

    def harness_s(self) -> float:
        return max(0.0, time.perf_counter() - self.start - self.model_wall)


@dataclass
class LongContextMode:
    """All history as chat messages (reference §4.2), tailored to the model's window if it does not fit."""

    name: str = "long_context"
    instruction: str = LME_INSTRUCTION
    max_events: int = yaml_field("mode", "long_context", "max_events")  # the reference session keeps 1000
    reserve_tokens: int = 64

    def run(self, ctx: CaseContext) -> ModeOutput:
        from harness.session.assembly import drop_leading_non_user, tailor
        from harness.session.tokens import ScaledCounter

        sw = Stopwatch()
        events = ctx.session.events[-self.max_events :] if self.max_events else ctx.session.events
        shown = drop_leading_non_user(events)  # like the reference session filter: history starts at a user turn
        messages = [
            {"role": "system", "content": self.instruction},
            *(e.to_message() for e in shown),
            _question_message(ctx),
        ]
        # The last layer: fit the model's window by dropping the oldest rounds (never a tool call from its result).
        budget = ctx.context_window - int(ctx.generation.get("max_tokens") or 0) - self.reserve_tokens
        counter = ctx.token_counter if ctx.token_ratio == 1 else ScaledCounter(ctx.token_counter, ctx.token_ratio)
        fitted = tailor(messages, budget, counter)
        dropped = len(ctx.session.events) - len(shown) + fitted.dropped
        info = {
            "truncated": dropped > 0,
            "dropped_events": dropped,
            "kept_events": len(ctx.session.events) - dropped,
            "total_events": len(ctx.session.events),
            "estimated_prompt_tokens": fitted.tokens_after,
            "estimated_full_prompt_tokens": fitted.tokens_before,
            "budget_tokens": budget,
            "fits": fitted.fits,
        }
        r = sw.model(lambda: ctx.model.chat(fitted.messages, **ctx.generation))
        return ModeOutput(
            prediction=go_trim_space(r.content),
            calls=[r],
            query_latency_s=query_latency([r], sw.harness_s()),
            truncation=info,
            final_messages=len(fitted.messages),
        )


@dataclass
class SummaryMode:
    """A compact summary replaces the history it covers (reference §4.3): system = instruction + summary block."""

    name: str = "summary"
    instruction: str = LME_INSTRUCTION
    injection: Literal["system", "user"] = yaml_field("mode", "summary", "injection")

    def build(self, ctx: CaseContext, system: str) -> tuple[list[Message], dict[str, Any], Any]:
        from harness.session.assembly import assemble

        got = ctx.summaries.get(ctx, self.name)
        summary = got.summary
        # assemble() keeps only the events after the summary's boundary (summary.events_after).
        messages = assemble(system, summary, ctx.session.events, _question_message(ctx), injection=self.injection)
        return messages, got.record(), summary

    def run(self, ctx: CaseContext) -> ModeOutput:
        messages, summary_info, _ = self.build(ctx, self.instruction)
        sw = Stopwatch()
        r = sw.model(lambda: ctx.model.chat(messages, **ctx.generation))
        return ModeOutput(
            prediction=go_trim_space(r.content),
            calls=[r],
            query_latency_s=query_latency([r], sw.harness_s()),
            summary=summary_info,
            final_messages=len(messages),
        )


@dataclass
class SummaryOnDemandMode(SummaryMode):
    """Summary + `session_search`/`session_load` over the hidden original events (reference §4.4)."""

    name: str = "summary_ondemand"
    injection: Literal["system", "user"] = yaml_field("mode", "summary_ondemand", "injection")
    ondemand_instruction: str = LME_ONDEMAND_INSTRUCTION
    max_tool_iterations: int = yaml_field("mode", "summary_ondemand", "max_tool_iterations")
    use_overview: bool = True
    use_post_tool_prompt: bool = True
    # None = "auto" as the reference. "required" forces a tool call in the first round: small local models
    # otherwise rarely search, and the mode would measure their reluctance rather than the design.
    first_tool_choice: str | None = None

    def run(self, ctx: CaseContext) -> ModeOutput:
        system = self.instruction + "\n\n" + self.ondemand_instruction
        messages, summary_info, summary = self.build(ctx, system)
        if self.use_overview:  # assemble() always starts with the system message
            messages[0] = {
                **messages[0],
                "content": messages[0]["content"] + "\n\n" + ondemand_prompts.ONDEMAND_SESSION_OVERVIEW,
            }
        base_system = messages[0]["content"]
        assert ctx.tools_factory is not None, "the pipeline gives summary_ondemand its tools factory"
        tools = ctx.tools_factory(ctx.session, summary.boundary)
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
            r = sw.model(lambda: ctx.model.chat(req, tools=specs, **ctx.generation, **extra))  # noqa: B023 (called now)
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
        return ModeOutput(
            prediction=prediction,
            calls=calls,
            query_latency_s=query_latency(calls, sw.harness_s()),
            tool_trace=trace,
            summary=summary_info,
            error=error,
            final_messages=len(messages),
            tool_results=tool_results,
        )
