"""Prompt assembly: summary + events after its boundary + current message, and two lighter layers
(tool-result compaction, token tailoring) that shrink a request without touching the session.

Layers apply in this order: assemble -> compact_tool_results -> tailor (last).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.llm.types import Message
from harness.session.boundary import Summary
from harness.session.events import Event
from harness.session.summary import drop_leading_non_user, events_after
from harness.session.tokens import TokenCounter, o200k_counter

Injection = Literal["system", "user"]
INJECTIONS: tuple[str, ...] = ("system", "user")
SEPARATOR = "\n\n"  # between merged blocks, as the reference content processor


# Exact wrapper texts of the reference content processor (formatSummary and formatSummaryForUser),
# trpc-group/trpc-agent-go @ 9b4e406ae2873b0f641425aae0d54d0211a60e04, internal/flow/processor/content.go.
def format_summary_block(text: str) -> str:
    """The summary as merged into the system message (reference default)."""
    return (
        "Here is a brief summary of your previous interactions:\n\n"
        f"<summary_of_previous_interactions>\n{text}\n</summary_of_previous_interactions>\n\n"
        "Note: this information is from previous interactions and may be outdated. "
        "You should ALWAYS prefer information from this conversation over the past summary.\n"
    )


def format_summary_block_user(text: str) -> str:
    """The summary as merged into a user message (reference user-injection default)."""
    return (
        "Context from previous interactions:\n\n"
        f"<summary_of_previous_interactions>\n{text}\n</summary_of_previous_interactions>\n\n"
        "Treat this as background context. If it conflicts with this conversation, prefer this conversation.\n"
    )


def _as_message(current: dict[str, Any] | str) -> Message:
    return {"role": "user", "content": current} if isinstance(current, str) else dict(current)


def history_events(events: Sequence[Event], summary: Summary | None, history_cap: int | None = None) -> list[Event]:
    """The raw events a request shows: all events after the summary's boundary.

    `history_cap` (the newest N events, like a session service's event limit) only trims events
    the summary already covers; it never drops an event after the boundary.
    """
    if summary is not None:
        return list(events_after(events, summary.boundary))
    shown = list(events[-history_cap:]) if history_cap else list(events)
    return drop_leading_non_user(shown) if history_cap and len(events) > history_cap else shown


def assemble(
    system_prompt: str,
    summary: Summary | None,
    events: Sequence[Event],
    current: dict[str, Any] | str,
    *,
    injection: Injection = "system",
    history_cap: int | None = None,
) -> list[Message]:
    """The request messages: [system] + events after the boundary + current message.

    - `system`: the summary block is appended to the system message after a blank line.
    - `user`: the summary block leads the first user message (history or current); with none,
      it is inserted as its own user message before the history. Never two adjacent user messages.
    """
    if injection not in INJECTIONS:
        raise ValueError(f"injection must be one of {INJECTIONS}, got {injection!r}")
    body = [e.to_message() for e in history_events(events, summary, history_cap)] + [_as_message(current)]
    text = summary.text.strip() if summary is not None else ""
    system = system_prompt
    if text and injection == "system":
        block = format_summary_block(text)
        system = system + SEPARATOR + block if system else block
    head: list[Message] = [{"role": "system", "content": system}] if system else []
    if text and injection == "user":
        body = _merge_user_block(body, format_summary_block_user(text))
    return head + body


def _merge_user_block(messages: list[Message], block: str) -> list[Message]:
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str) or content is None:
                messages[i] = {**m, "content": block + SEPARATOR + content if content else block}
                return messages
            # Content parts (multimodal): prepend the block as a text part.
            messages[i] = {**m, "content": [{"type": "text", "text": block}, *content]}
            return messages
    # No user message at all: insert one; the body then starts with it, so no two user messages touch.
    return [{"role": "user", "content": block}] + messages


# --- Tool-result compaction ----------------------------------------------------------------------
COMPACTED_PLACEHOLDER = "[Earlier tool result omitted to save context. Call the tool again if you need it.]"


@dataclass
class CompactionResult:
    messages: list[Message]
    replaced: int  # older tool results replaced by the placeholder
    truncated: int  # oversized tool results cut to head and tail

    @property
    def changed(self) -> bool:
        return bool(self.replaced or self.truncated)


def head_tail(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """`text` cut to about `max_tokens`: its head and tail around an omission marker."""
    total = counter.count(text)
    if total <= max_tokens:
        return text
    chars_per_token = len(text) / max(total, 1)
    keep = max(1, int(max_tokens * chars_per_token / 2))
    omitted = counter.count(text[keep:-keep])
    return f"{text[:keep]}\n[... {omitted} tokens omitted ...]\n{text[-keep:]}"


def compact_tool_results(
    messages: Sequence[Message],
    *,
    keep_recent: int = 1,
    max_result_tokens: int | None = None,
    placeholder: str = COMPACTED_PLACEHOLDER,
    token_counter: TokenCounter | None = None,
) -> CompactionResult:
    """Replace all but the `keep_recent` newest tool results by `placeholder`, and cut any kept
    result over `max_result_tokens` to head and tail. Tool calls and ids stay, so pairs stay valid."""
    out = copy.deepcopy(list(messages))
    tool_idx = [i for i, m in enumerate(out) if m.get("role") == "tool"]
    older = tool_idx[: max(0, len(tool_idx) - keep_recent)]
    for i in older:
        out[i]["content"] = placeholder
    truncated = 0
    if max_result_tokens is not None:
        counter = token_counter or o200k_counter()
        for i in tool_idx[len(older) :]:
            content = out[i].get("content") or ""
            cut = head_tail(content, max_result_tokens, counter)
            if cut != content:
                out[i]["content"] = cut
                truncated += 1
    return CompactionResult(out, len(older), truncated)


# --- Token tailoring ----------------------------------------------------------------------------
@dataclass
class TailorResult:
    messages: list[Message]
    dropped: int  # messages removed
    tokens_before: int
    tokens_after: int
    fits: bool

    @property
    def changed(self) -> bool:
        return self.dropped > 0


def _rounds(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into rounds: each starts at a user message (leading others form one group)."""
    groups: list[list[Message]] = []
    for m in messages:
        if m.get("role") == "user" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    return groups


def tailor(messages: Sequence[Message], budget: int, token_counter: TokenCounter | None = None) -> TailorResult:
    """Fit `budget` tokens by dropping the oldest rounds.

    Kept always: the leading system message(s) and the current turn (the last user message and
    everything after it, e.g. its tool calls and results). Rounds go whole, so a tool call is
    never separated from its result. `fits` is False when even the kept part is over budget.
    """
    counter = token_counter or o200k_counter()
    msgs = list(messages)
    n_sys = 0
    while n_sys < len(msgs) and msgs[n_sys].get("role") == "system":
        n_sys += 1
    last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user" and i >= n_sys), default=len(msgs))
    head, middle, current = msgs[:n_sys], msgs[n_sys:last_user], msgs[last_user:]
    before = counter.count_messages(msgs)
    rounds = _rounds(middle)
    costs = [counter.count_messages(r) for r in rounds]
    total = before
    dropped = 0
    while rounds and total > budget:
        dropped += len(rounds.pop(0))
        total -= costs.pop(0)
    kept = head + [m for r in rounds for m in r] + current
    after = counter.count_messages(kept) if dropped else before
    return TailorResult(kept, dropped, before, after, after <= budget)
