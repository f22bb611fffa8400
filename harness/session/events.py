"""Events and sessions: the source of truth that summaries and retrieval only ever *view*.

An event is immutable once appended; nothing in the harness rewrites or deletes one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """A tool call requested by the assistant (OpenAI wire shape, arguments kept as raw JSON text)."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Event:
    """One message in a session.

    `index` is the position in the session's stream and, with `timestamp`, orders events.
    `source_session` and `has_answer` carry dataset labels for retrieval evaluation; they are
    never shown to a model.
    """

    id: str
    index: int
    role: str  # "user" | "assistant" | "tool" | "system"
    content: str
    timestamp: float  # seconds since the epoch, monotonic within a session
    author: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    source_session: str | None = None
    has_answer: bool = False

    def to_message(self) -> dict[str, Any]:
        """The OpenAI chat message for this event."""
        msg: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
        if self.role == "tool" and self.tool_call_id:
            msg["tool_call_id"] = self.tool_call_id
        return msg


@dataclass
class Session:
    """An append-only list of events belonging to one (app, user, session id)."""

    id: str
    user_id: str
    app: str = "lme-harness"
    events: list[Event] = field(default_factory=list)

    def append(self, event: Event) -> None:
        if self.events and event.index <= self.events[-1].index:
            raise ValueError(f"event {event.id!r} index {event.index} is not after {self.events[-1].index}")
        self.events.append(event)

    def extend(self, events: Iterable[Event]) -> None:
        for e in events:
            self.append(e)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def by_id(self, event_id: str) -> Event | None:
        for e in self.events:
            if e.id == event_id:
                return e
        return None
