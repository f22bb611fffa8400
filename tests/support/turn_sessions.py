"""Retrieval tests' sessions: (conversation, role, text) turns as one session whose turns are all hidden behind the
summary boundary (what `session_search` searches), and generated turn sets for the seeded probes."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.retrieval.config import SearchConfig
from harness.retrieval.retriever import Retriever
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session

Turns = list[tuple[str, str, str]]


def turn_tools(cfg: SearchConfig, turns: Turns, *, embedder: Any = None) -> Any:
    """The session tools over `turns` (event ids e0000, e0001, ...; one second apart), each event in its turn's
    conversation."""
    events = [
        Event(
            id=f"e{i:04d}",
            index=i,
            role=role,
            content=text,
            timestamp=1_700_000_000.0 + i,
            source_session=conv,
        )
        for i, (conv, role, text) in enumerate(turns)
    ]
    s = Session(id="s", user_id="u")
    s.extend(events)
    b = SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)
    return Retriever(cfg, embedder=embedder).tools(s, boundary=b)


def generated_turns(
    rng: np.random.Generator, *, words: int, conversations: int, n: int = 40, lengths: tuple[int, int] = (3, 12)
) -> tuple[Turns, str]:
    """`n` alternating user/assistant turns of `lengths` words (from, below; 3-11 by default) drawn from `words`
    tokens, each in one of `conversations` conversations, and a 4-word query from the same tokens."""
    vocab = [f"w{i}" for i in range(words)]
    turns = [
        (
            f"c{rng.integers(0, conversations)}",
            ["user", "assistant"][i % 2],
            " ".join(rng.choice(vocab, rng.integers(*lengths))),
        )
        for i in range(n)
    ]
    return turns, " ".join(rng.choice(vocab, 4))
