"""Summary triggers: when a (non-forced) summary is worth generating.

A trigger is any callable `TriggerContext -> bool`. The built-ins mirror the reference
framework's checkers; `any_of` / `all_of` compose them. A forced summary skips triggers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.session.events import Event
from harness.session.tokens import TokenCounter

Trigger = Callable[["TriggerContext"], bool]

# Reference defaults (CheckContextThreshold): fallback window and minimum token threshold.
FALLBACK_CONTEXT_WINDOW = 8192
MIN_CONTEXT_THRESHOLD_TOKENS = 2000


@dataclass
class TriggerContext:
    """What a trigger sees: the delta (events after the boundary, SkipRecent applied) and its text."""

    delta: Sequence[Event]
    conversation_text: str
    token_counter: TokenCounter
    context_window: int | None = None
    now: float = field(default_factory=time.time)
    _tokens: int | None = field(default=None, repr=False)

    @property
    def delta_tokens(self) -> int:
        if self._tokens is None:
            self._tokens = self.token_counter.count(self.conversation_text)
        return self._tokens


@dataclass(frozen=True)
class EventCount:
    """More than `n` events since the boundary."""

    n: int

    def __call__(self, ctx: TriggerContext) -> bool:
        return len(ctx.delta) > self.n


@dataclass(frozen=True)
class TokenCount:
    """More than `n` tokens of delta conversation text."""

    n: int

    def __call__(self, ctx: TriggerContext) -> bool:
        return bool(ctx.delta) and ctx.delta_tokens > self.n


@dataclass(frozen=True)
class TimeSinceLastEvent:
    """The newest delta event is older than `seconds` (the conversation went idle)."""

    seconds: float

    def __call__(self, ctx: TriggerContext) -> bool:
        return bool(ctx.delta) and ctx.now - ctx.delta[-1].timestamp > self.seconds


@dataclass(frozen=True)
class ContextRatio:
    """Delta tokens exceed `ratio` of the model's context window (at least `min_tokens`).

    `context_window` here overrides the one the summarizer passes in the context.
    """

    ratio: float = 0.5
    context_window: int | None = None
    min_tokens: int = MIN_CONTEXT_THRESHOLD_TOKENS

    def __post_init__(self) -> None:
        if not 0 < self.ratio <= 1:
            raise ValueError(f"ContextRatio.ratio must be in (0, 1], got {self.ratio}")

    def threshold(self, ctx: TriggerContext) -> int:
        window = self.context_window or ctx.context_window or FALLBACK_CONTEXT_WINDOW
        return max(int(window * self.ratio), self.min_tokens)

    def __call__(self, ctx: TriggerContext) -> bool:
        return bool(ctx.delta) and ctx.delta_tokens > self.threshold(ctx)


@dataclass(frozen=True)
class AnyOf:
    triggers: tuple[Trigger, ...]

    def __call__(self, ctx: TriggerContext) -> bool:
        return any(t(ctx) for t in self.triggers)


@dataclass(frozen=True)
class AllOf:
    triggers: tuple[Trigger, ...]

    def __call__(self, ctx: TriggerContext) -> bool:
        return all(t(ctx) for t in self.triggers)


def any_of(*triggers: Trigger) -> AnyOf:
    return AnyOf(tuple(triggers))


def all_of(*triggers: Trigger) -> AllOf:
    return AllOf(tuple(triggers))


_LEAVES: dict[str, Callable[[float], Trigger]] = {
    "events": lambda v: EventCount(int(v)),
    "tokens": lambda v: TokenCount(int(v)),
    "idle": lambda v: TimeSinceLastEvent(v),
    "ratio": lambda v: ContextRatio(v),
}


def parse_triggers(spec: str) -> Trigger:
    """Parse a command-line trigger spec, e.g. ``any(events>40,all(tokens>8000,idle>300))``.

    Leaves: ``events>N`` (event count), ``tokens>N`` (token count), ``idle>SECONDS`` (time since
    the last event), ``ratio>R`` (share of the context window); ``any(...)`` / ``all(...)`` nest.
    """
    text = spec.replace(" ", "")
    node, pos = _parse(text, 0, spec)
    if pos != len(text):
        raise ValueError(f"trigger spec {spec!r}: unexpected {text[pos:]!r}")
    return node


def _parse(text: str, pos: int, spec: str) -> tuple[Trigger, int]:
    for op, make in (("any(", any_of), ("all(", all_of)):
        if text.startswith(op, pos):
            pos += len(op)
            children: list[Trigger] = []
            while True:
                child, pos = _parse(text, pos, spec)
                children.append(child)
                if text.startswith(",", pos):
                    pos += 1
                elif text.startswith(")", pos):
                    return make(*children), pos + 1
                else:
                    raise ValueError(f"trigger spec {spec!r}: expected ',' or ')' at {text[pos:]!r}")
    m = re.match(r"([a-z]+)>([0-9.]+)", text[pos:])
    if m is None or m.group(1) not in _LEAVES:
        raise ValueError(f"trigger spec {spec!r}: expected one of {sorted(_LEAVES)} as NAME>VALUE at {text[pos:]!r}")
    return _LEAVES[m.group(1)](float(m.group(2))), pos + m.end()


def as_trigger(spec: Trigger | Sequence[Trigger] | str | None) -> Trigger | None:
    """A string is parsed with `parse_triggers`; a sequence means all of them (the reference's
    With*Threshold options stack with AND)."""
    if spec is None or spec == "":
        return None
    if isinstance(spec, str):
        return parse_triggers(spec)
    if callable(spec):
        return spec
    return all_of(*spec)
