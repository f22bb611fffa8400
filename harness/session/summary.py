"""The session summarizer: prompt templates, conversation formatting, delta and incremental summaries.

A summary is a *view* over a session's events. Each new summary covers the events after the
previous summary's boundary, with the previous summary prepended as a synthetic `system` line,
so the same mechanism serves updates and histories too long for one summary request (the
history is cut into chunks and folded in one after another).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.golang import go_trim_space
from harness.llm.types import ChatModel, ChatResult, Message
from harness.prompts.summary import trpc_default_template
from harness.session.boundary import Summary, SummaryBoundary, covers
from harness.session.events import Event, Session, ToolCall
from harness.session.skip_recent import SkipRecent, safe_skip
from harness.session.tokens import TokenCounter, o200k_counter
from harness.session.triggers import Trigger, TriggerContext, as_trigger

log = logging.getLogger(__name__)

DEFAULT_AGENT_NAME = "lme-eval-agent"
BOUNDARY_VERSION = 1  # format version of SummaryBoundary, as in the reference (always 1)
CONVERSATION_TEXT = "conversation_text"
MAX_SUMMARY_WORDS = "max_summary_words"
_KNOWN_VARS = frozenset({CONVERSATION_TEXT, MAX_SUMMARY_WORDS})
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PromptError(ValueError):
    """A summary prompt template that cannot be rendered."""


class SummaryError(RuntimeError):
    """Summary generation failed (empty output, window too small, hook failure)."""


PreHook = Callable[[str, Sequence[Event]], "str | None"]  # (conversation text, events) -> new text
PostHook = Callable[[str], "str | None"]  # summary text -> new text; None/"" keeps the original


# --- Prompt ----------------------------------------------------------------------------------------
def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def render_template(template: str, values: Mapping[str, str]) -> str:
    """Substitute `{name}` placeholders in one pass (substituted text is never re-scanned, so
    braces inside the conversation are safe). Other braces, e.g. JSON examples, stay literal."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


@dataclass(frozen=True)
class SummaryPrompt:
    """Templates of one summary request.

    `{conversation_text}` is required in the user template and refused in the system template;
    `{max_summary_words}` is guidance only (0 renders as "" and nothing is ever truncated).
    `post_hook` belongs to the prompt when its output format needs unwrapping (e.g. `<summary>`).
    """

    user_template: str
    system_template: str | None = None
    max_summary_words: int = 0
    name: str = ""
    post_hook: PostHook | None = None

    def __post_init__(self) -> None:
        label = f"summary prompt {self.name!r}" if self.name else "summary prompt"
        if not isinstance(self.user_template, str) or not self.user_template.strip():
            raise PromptError(f"{label}: user_template is empty")
        user_vars = placeholders(self.user_template)
        if CONVERSATION_TEXT not in user_vars:
            raise PromptError(f"{label}: user_template must contain {{{CONVERSATION_TEXT}}}")
        system_vars = placeholders(self.system_template or "")
        if CONVERSATION_TEXT in system_vars:
            raise PromptError(f"{label}: system_template must not contain {{{CONVERSATION_TEXT}}}")
        unknown = (user_vars | system_vars) - _KNOWN_VARS
        if unknown:
            raise PromptError(f"{label}: unknown placeholder(s) {sorted(unknown)}; allowed: {sorted(_KNOWN_VARS)}")
        if self.max_summary_words < 0:
            raise PromptError(f"{label}: max_summary_words must be >= 0, got {self.max_summary_words}")
        if self.max_summary_words > 0 and MAX_SUMMARY_WORDS not in user_vars | system_vars:
            log.warning(
                "%s: max_summary_words=%d but no {max_summary_words} placeholder", label, self.max_summary_words
            )

    @classmethod
    def trpc_default(cls, max_summary_words: int = 0) -> SummaryPrompt:
        return cls(trpc_default_template(max_summary_words), None, max_summary_words, name="trpc_default")

    def _words(self) -> str:
        return str(self.max_summary_words) if self.max_summary_words > 0 else ""

    def render_system(self) -> str | None:
        if not self.system_template or not go_trim_space(self.system_template):
            return None
        return render_template(self.system_template, {MAX_SUMMARY_WORDS: self._words()})

    def render_user(self, conversation_text: str) -> str:
        return render_template(
            self.user_template, {CONVERSATION_TEXT: conversation_text, MAX_SUMMARY_WORDS: self._words()}
        )

    def render(self, conversation_text: str) -> list[Message]:
        """The summary request: [system?] + user."""
        system = self.render_system()
        head: list[Message] = [{"role": "system", "content": system}] if system else []
        return head + [{"role": "user", "content": self.render_user(conversation_text)}]

    def fingerprint(self) -> str:
        """Identifies everything in the prompt that changes the output (for the summary cache)."""
        hook = self.post_hook
        hook_name = f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', repr(hook))}" if hook else ""
        parts = [self.user_template, self.system_template or "", str(self.max_summary_words), hook_name]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def keep_summary_tag(text: str) -> str | None:
    """Post-hook for prompts that answer `<analysis>…</analysis><summary>…</summary>`: keep the
    inner summary text. Without a closed `<summary>` block, returns None (the text is kept)."""
    m = re.search(r"<summary>(.*?)</summary>", text, flags=re.DOTALL | re.IGNORECASE)
    if m is None:
        m = re.search(r"<summary>(.*)\Z", text, flags=re.DOTALL | re.IGNORECASE)  # cut off by max_tokens
    inner = m.group(1).strip() if m else ""
    return inner or None


# --- Conversation formatting --------------------------------------------------------------------
ToolCallFormatter = Callable[[ToolCall], str]
ToolResultFormatter = Callable[[Event], str]


def format_tool_call(tc: ToolCall) -> str:
    if not tc.name:
        return ""
    args = tc.arguments or ""
    if args in ("", "{}"):
        return f"[Called tool: {tc.name}]"
    return f"[Called tool: {tc.name} with args: {args}]"


def format_tool_result(event: Event) -> str:
    content = go_trim_space(event.content)
    if not content:
        return ""
    return f"[{event.tool_name or 'tool'} returned: {content}]"


def event_author(event: Event, agent_name: str = DEFAULT_AGENT_NAME) -> str:
    """The author label: the event's own author, else by role (assistant and tool turns are the agent's)."""
    if event.author:
        return event.author
    return {"user": "user", "assistant": agent_name, "tool": agent_name, "system": "system"}.get(event.role, "unknown")


def event_lines(
    event: Event,
    agent_name: str = DEFAULT_AGENT_NAME,
    tool_call_formatter: ToolCallFormatter = format_tool_call,
    tool_result_formatter: ToolResultFormatter = format_tool_result,
) -> list[str]:
    """`"<author>: <text>"` lines of one event: its tool calls, then its result or trimmed content."""
    author = event_author(event, agent_name)
    lines = [f"{author}: {t}" for t in map(tool_call_formatter, event.tool_calls) if t]
    if event.role == "tool" or event.tool_call_id:
        result = tool_result_formatter(event)
        return lines + ([f"{author}: {result}"] if result else [])
    text = go_trim_space(event.content)
    return lines + ([f"{author}: {text}"] if text else [])


def format_conversation(
    events: Sequence[Event],
    agent_name: str = DEFAULT_AGENT_NAME,
    tool_call_formatter: ToolCallFormatter = format_tool_call,
    tool_result_formatter: ToolResultFormatter = format_tool_result,
) -> str:
    return "\n".join(
        line for e in events for line in event_lines(e, agent_name, tool_call_formatter, tool_result_formatter)
    )


def previous_summary_line(text: str) -> str:
    """The previous summary enters the delta as a synthetic system turn, as in the reference."""
    return f"system: {go_trim_space(text)}"


# --- Delta -----------------------------------------------------------------------------------------
def drop_leading_non_user(events: Sequence[Event]) -> list[Event]:
    """The events from the first user turn on (none without one). The reference's session keeps only these
    (session.ApplyEventFiltering on every AppendEvent), so its history and its summaries start at a user turn."""
    for i, e in enumerate(events):
        if e.role == "user":
            return list(events[i:])
    return []


def events_after(events: Sequence[Event], boundary: SummaryBoundary | None) -> list[Event]:
    """Events after a boundary: by `last_event_id` when present in `events`, else by timestamp."""
    if boundary is None:
        return list(events)
    if boundary.last_event_id is not None:
        for i, e in enumerate(events):
            if e.id == boundary.last_event_id:
                return list(events[i + 1 :])
    return [e for e in events if e.timestamp > boundary.cutoff_at]


def pick_summary(summaries: Mapping[str, Summary], filter_key: str) -> Summary | None:
    """The summary for `filter_key`: its own, else the nearest ancestor key's (``""`` covers all)."""
    if filter_key in summaries:
        return summaries[filter_key]
    parents = [k for k in summaries if k != filter_key and covers(k, filter_key)]
    return summaries[max(parents, key=len)] if parents else None


# --- Summarizer ------------------------------------------------------------------------------------
@dataclass
class SummaryOutcome:
    summary: Summary | None
    calls: list[ChatResult]
    duration_s: float
    chunks: int
    skipped_reason: str | None
    input_events: int = 0  # events folded into this summary (after SkipRecent)
    forked: bool = False  # generated with a cache-safe fork of the parent request
    cached: bool = False  # replayed from the summary cache (calls keep the original usage)
    generation_s: float | None = None  # on a cache hit: how long the original generation took
    truncated_events: int = 0  # events cut to `max_event_chars` for the summary request

    @property
    def prompt_tokens(self) -> int:
        return sum(c.usage.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.usage.completion_tokens for c in self.calls)

    @property
    def cached_prompt_tokens(self) -> int | None:
        """Prompt tokens the endpoint served from its prefix cache, when it reports them."""
        reported = [c.usage.cached_tokens for c in self.calls if c.usage.cached_tokens is not None]
        return sum(reported) if reported else None


FORK_CONVERSATION_POINTER = "(the conversation above in this request)"
# ~25k tokens: far above any LongMemEval turn (the longest is ~42k characters), far below what stalls a run.
DEFAULT_MAX_EVENT_CHARS = 200_000
_MIN_CHUNK_TOKENS = 32


# An oversized line is measured and cut through windows of about this many characters per token of room,
# doubled while they still fit: the work per chunk stays proportional to the chunk, not to the whole line.
_WINDOW_CHARS_PER_TOKEN = 8


@dataclass
class _Piece:
    """One conversation line, or what is left of an oversized one (`line[start:]`, the rest already sent)."""

    event: Event
    line: str
    tokens: int  # 0: not counted yet; else the count + 1 (joining newline), or a lower bound when not `exact`
    start: int = 0
    exact: bool = True

    @property
    def text(self) -> str:
        return self.line[self.start :] if self.start else self.line

    @property
    def size(self) -> int:
        return len(self.line) - self.start


class Summarizer:
    """Summarizes a session's events after a boundary with one `ChatModel`.

    - `context_window`: the summary model's window; a larger delta is summarized incrementally
      (chunks, each folded into the running summary). None: one request, no size check.
    - `max_tokens` / `temperature`: sent only when set (the reference sends neither).
    - `output_reserve`: tokens kept free for the answer (default `max_tokens`, else min(4096, window/4)).
    - `skip_recent`: leaves the newest events raw; `triggers`: gate non-forced summaries (a
      Trigger, a list meaning all, or a spec string such as "any(events>40,tokens>8000)").
    - `event_filter_key`: an event's filter key (default: "" for all, so every key sees every event).
    - `cache_safe_fork`: with a `parent_request`, the summary request is that request plus one
      appended compaction message (so a prefix-caching endpoint reuses the parent's prefix).
    - `max_event_chars`: an event's text beyond this is cut (with a visible note) before it is formatted,
      so one pathological event cannot stall the summary step (None: DEFAULT_MAX_EVENT_CHARS).
    """

    def __init__(
        self,
        model: ChatModel,
        prompt: SummaryPrompt,
        *,
        context_window: int | None = None,
        token_counter: TokenCounter | None = None,
        skip_recent: SkipRecent | None = None,
        triggers: Trigger | Sequence[Trigger] | str | None = None,
        pre_hook: PreHook | None = None,
        post_hook: PostHook | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        agent_name: str = DEFAULT_AGENT_NAME,
        tool_call_formatter: ToolCallFormatter = format_tool_call,
        tool_result_formatter: ToolResultFormatter = format_tool_result,
        output_reserve: int | None = None,
        event_filter_key: Callable[[Event], str] | None = None,
        cache_safe_fork: bool = False,
        max_event_chars: int | None = None,
    ) -> None:
        if context_window is not None and context_window <= 0:
            raise ValueError(f"context_window must be > 0, got {context_window}")
        self.model = model
        self.prompt = prompt
        self.context_window = context_window
        self._token_counter = token_counter
        self.skip_recent = skip_recent
        self.trigger = as_trigger(triggers)
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.agent_name = agent_name
        self.tool_call_formatter = tool_call_formatter
        self.tool_result_formatter = tool_result_formatter
        self.output_reserve = output_reserve
        self.event_filter_key = event_filter_key
        self.cache_safe_fork = cache_safe_fork
        self.max_event_chars = max_event_chars or DEFAULT_MAX_EVENT_CHARS
        if self.max_event_chars < 1:
            raise ValueError(f"max_event_chars must be >= 1, got {max_event_chars}")

    # -- helpers ----------------------------------------------------------------------------------
    @property
    def token_counter(self) -> TokenCounter:
        if self._token_counter is None:
            self._token_counter = o200k_counter()
        return self._token_counter

    @property
    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {}
        if self.max_tokens is not None:
            p["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            p["temperature"] = self.temperature
        return p

    def format(self, events: Sequence[Event]) -> str:
        return "\n".join(line for e in events for line in self._lines(e))

    def bounded(self, event: Event) -> Event:
        """The event as the summarizer sees it: its text, and each tool call's arguments, beyond `max_event_chars`
        replaced by a visible note (arguments are raw text to the summarizer: a cut one need not stay JSON)."""
        if not self._event_oversized(event):
            return event
        limit = self.max_event_chars

        def cut(text: str, what: str) -> str:
            if len(text) <= limit:
                return text
            return (
                text[:limit]
                + f"\n[... {len(text) - limit} more characters cut: {what} summarizer.max_event_chars={limit}]"
            )

        calls = tuple(
            dataclasses.replace(tc, arguments=cut(tc.arguments or "", "these tool-call arguments exceed"))
            for tc in event.tool_calls
        )
        return dataclasses.replace(event, content=cut(event.content, "this message exceeds"), tool_calls=calls)

    def _event_oversized(self, event: Event) -> bool:
        return self._event_chars(event) > self.max_event_chars

    def _event_chars(self, event: Event) -> int:
        return max([len(event.content), *(len(tc.arguments or "") for tc in event.tool_calls)])

    def oversized(self, events: Sequence[Event]) -> int:
        """How many of `events` exceed `max_event_chars` (in their text or a tool call's arguments)."""
        return sum(self._event_oversized(e) for e in events)

    def delta(self, session: Session, previous: Summary | None, filter_key: str = "") -> list[Event]:
        """Events of `filter_key` after the previous summary's boundary; never those before the session's first
        user turn, which the reference's session service has already dropped when it summarises."""
        events = events_after(drop_leading_non_user(session.events), previous.boundary if previous else None)
        if self.event_filter_key is None:
            return events
        return [e for e in events if (k := self.event_filter_key(e)) == "" or covers(filter_key, k)]

    def input_events(self, delta: Sequence[Event], has_previous: bool) -> list[Event]:
        """The delta minus the SkipRecent tail. As in the reference, a trimmed set without any user
        message is dropped unless a previous summary gives it context."""
        if self.skip_recent is None:
            return list(delta)
        skip = safe_skip(delta, self.skip_recent(delta))
        kept = list(delta[: len(delta) - skip])
        if skip and not has_previous and not any(e.role == "user" and go_trim_space(e.content) for e in kept):
            return []
        return kept

    def triggered(self, events: Sequence[Event], now: float | None = None) -> bool:
        """Whether the triggers (if any) call for summarizing these input events."""
        if self.trigger is None:
            return True
        ctx = TriggerContext(
            events,
            self.format(events),
            self.token_counter,
            self.context_window,
            now if now is not None else time.time(),
        )
        return bool(self.trigger(ctx))

    def reserve(self) -> int:
        if self.output_reserve is not None:
            return self.output_reserve
        if self.max_tokens is not None:
            return self.max_tokens
        return min(4096, (self.context_window or 0) // 4)

    # -- main entry --------------------------------------------------------------------------------
    def summarize(
        self,
        session: Session,
        previous: Summary | None = None,
        *,
        force: bool = False,
        filter_key: str = "",
        parent_request: Sequence[Message] | None = None,
        parent_tools: Sequence[dict[str, Any]] | None = None,
        now: float | None = None,
    ) -> SummaryOutcome:
        """Summarize the events after `previous`'s boundary (all events when None).

        Returns a skipped outcome (summary None) when there is nothing new or, unless `force`,
        the triggers are not met. Raises SummaryError when the model returns an empty summary.
        """
        start = time.perf_counter()

        def skipped(reason: str) -> SummaryOutcome:
            return SummaryOutcome(None, [], time.perf_counter() - start, 0, reason)

        if previous is not None and previous.boundary.filter_key != filter_key:
            raise ValueError(f"previous summary has filter_key {previous.boundary.filter_key!r}, not {filter_key!r}")
        events = self.input_events(self.delta(session, previous, filter_key), previous is not None)
        if not events:
            return skipped("no events to summarize after the boundary")
        if not force and not self.triggered(events, now):
            return skipped("triggers not met")

        prev_text = previous.text if previous else None
        forked = self.cache_safe_fork and parent_request is not None
        cut = 0  # a fork resends the parent request unchanged: nothing of it is cut
        if forked:
            messages = self.fork_request(parent_request or ())
            text, result = self._call(session, messages, len(messages[-1]["content"]), parent_tools)
            calls, chunks = [result], 1
        else:
            cut = self.oversized(events)
            if cut:
                log.warning(
                    "session %r: %d event(s) longer than summarizer.max_event_chars=%d were cut for the "
                    "summary (longest: %d chars)",
                    session.id,
                    cut,
                    self.max_event_chars,
                    max(map(self._event_chars, events)),
                )
            text, calls, chunks = self._incremental(session, events, prev_text)

        last = events[-1]
        boundary = SummaryBoundary(BOUNDARY_VERSION, filter_key, last.timestamp, last.id)
        summary = Summary(text=text, boundary=boundary, updated_at=last.timestamp)
        return SummaryOutcome(
            summary, calls, time.perf_counter() - start, chunks, None, len(events), forked, truncated_events=cut
        )

    # -- generation ----------------------------------------------------------------------------------
    def _call(
        self, session: Session, messages: list[Message], input_chars: int, tools: Sequence[dict[str, Any]] | None = None
    ) -> tuple[str, ChatResult]:
        kwargs: dict[str, Any] = dict(self.params)
        if tools:
            kwargs["tools"] = list(tools)
        result = self.model.chat(messages, purpose="summary", **kwargs)
        text = go_trim_space(result.content or "")  # Go strings.TrimSpace, as the reference
        if not text:
            raise SummaryError(
                f"summary model {getattr(self.model, 'model', '?')!r} returned an empty summary for session "
                f"{session.id!r} (input_chars={input_chars}, finish_reason={result.finish_reason!r})"
            )
        for hook in (self.prompt.post_hook, self.post_hook):
            if hook is not None:
                try:
                    new = hook(text)
                except Exception as exc:  # name the hook: user code
                    raise SummaryError(f"post-summary hook {hook!r} failed: {exc}") from exc
                if new and go_trim_space(new):
                    text = go_trim_space(new)
        return text, result

    def _apply_pre_hook(self, text: str, events: Sequence[Event]) -> str:
        if self.pre_hook is None:
            return text
        try:
            new = self.pre_hook(text, events)
        except Exception as exc:
            raise SummaryError(f"pre-summary hook {self.pre_hook!r} failed: {exc}") from exc
        return new if new else text

    def _incremental(
        self, session: Session, events: Sequence[Event], prev_text: str | None
    ) -> tuple[str, list[ChatResult], int]:
        """Fold `events` into the running summary, one request per chunk that fits the window."""
        pieces = [_Piece(e, line, 0) for e in events for line in self._lines(e)]
        if not pieces:
            raise SummaryError(f"session {session.id!r}: the {len(events)} events to summarize have no text")
        calls: list[ChatResult] = []
        running = prev_text
        pos = 0
        while pos < len(pieces):
            chunk, pos = self._next_chunk(pieces, pos, running)
            lines = ([previous_summary_line(running)] if running else []) + [p.text for p in chunk]
            text = self._apply_pre_hook("\n".join(lines), [p.event for p in chunk])
            running, result = self._call(session, self.prompt.render(text), len(text))
            calls.append(result)
        assert running is not None
        return running, calls, len(calls)

    def _lines(self, event: Event) -> list[str]:
        return event_lines(self.bounded(event), self.agent_name, self.tool_call_formatter, self.tool_result_formatter)

    def _next_chunk(self, pieces: list[_Piece], pos: int, running: str | None) -> tuple[list[_Piece], int]:
        """Greedily take pieces from `pos` while the rendered request fits; split an oversized line."""
        if self.context_window is None:
            return pieces[pos:], len(pieces)
        counter = self.token_counter
        budget = self.context_window - self.reserve()
        head = previous_summary_line(running) + "\n" if running else ""
        base = counter.count_messages(self.prompt.render(head))
        room = budget - base
        if room < _MIN_CHUNK_TOKENS:
            raise SummaryError(
                f"summary request does not fit: prompt + previous summary take {base} tokens of the "
                f"{budget}-token budget (context_window={self.context_window}, reserve={self.reserve()})"
            )
        taken: list[_Piece] = []
        used = 0
        while pos < len(pieces):
            p = pieces[pos]
            if not p.tokens or (not p.exact and p.tokens <= room):
                p.tokens, p.exact = self._bounded_count(p, room)
            if used + p.tokens > room:
                if taken:
                    break
                end = self._split_end(p, room)  # a single line larger than the room
                first = p.line[p.start : end]
                while end < len(p.line) and p.line[end].isspace():
                    end += 1
                p.start, p.tokens, p.exact = end, 0, True
                return [_Piece(p.event, first, 0)], pos + (end >= len(p.line))
            taken.append(p)
            used += p.tokens
            pos += 1
        # Per-line counts can differ slightly from the joined text's; verify and back off.
        while (
            len(taken) > 1
            and counter.count_messages(self.prompt.render(head + "\n".join(t.text for t in taken))) > budget
        ):
            taken.pop()
            pos -= 1
        return taken, pos

    def _bounded_count(self, p: _Piece, room: int) -> tuple[int, bool]:
        """(tokens + 1, exact) of the piece's text; counted through a growing window, so that a huge line is
        known to exceed `room` after counting about `room` tokens of it rather than all of it."""
        counter = self.token_counter
        width = max(room, 1) * _WINDOW_CHARS_PER_TOKEN
        while width < p.size:
            tokens = counter.count(p.line[p.start : p.start + width]) + 1
            if tokens > room:
                return tokens, False  # a lower bound: the prefix alone does not fit
            width *= 2
        return counter.count(p.text) + 1, True

    def _split_end(self, p: _Piece, room: int) -> int:
        """The end (index into `p.line`) of the longest prefix of the piece within `room` tokens, cut at
        whitespace when possible. The search only looks at a window a few times the fitting prefix."""
        counter = self.token_counter

        def fits(n: int) -> bool:
            return counter.count(p.line[p.start : p.start + n]) + 1 <= room

        lo, hi = 1, min(p.size, max(room, 1) * _WINDOW_CHARS_PER_TOKEN)
        while hi < p.size and fits(hi):  # rarely: more than the window's chars per token
            lo, hi = hi, min(p.size, hi * 2)
        while lo < hi:  # largest prefix length whose count fits
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        cut = p.line.rfind(" ", p.start + lo // 2, p.start + lo)
        return cut if cut > p.start else p.start + lo

    def fork_request(self, parent: Sequence[Message]) -> list[Message]:
        """Cache-safe fork: the parent request unchanged plus one user message asking for the summary.
        The parent already holds the previous summary and the raw events, so the conversation
        placeholder points at them; the system template (if any) leads the appended message because
        the parent's system message must stay byte-identical. The pre-hook does not apply here."""
        system = self.prompt.render_system()
        body = self.prompt.render_user(FORK_CONVERSATION_POINTER)
        return [dict(m) for m in parent] + [{"role": "user", "content": f"{system}\n\n{body}" if system else body}]
