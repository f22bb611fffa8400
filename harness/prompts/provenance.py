"""Where each prompt text of harness/prompts/ comes from: copied verbatim from a reference, or our own.

A verbatim-reference text must not be edited (parity with a published run depends on it; tests compare the
ones whose source is vendored under tests/fixtures/ byte for byte); an own text may be improved freely.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Origin = tuple[str, str | None]  # (repository, commit; None: the commit was not recorded when copied)

TRPC_AGENT_GO: Origin = ("trpc-group/trpc-agent-go", "9b4e406ae2873b0f641425aae0d54d0211a60e04")
TRPC_BENCHMARK: Origin = ("trpc-group/trpc-agent-go-benchmark", "1edee87bc8b4efa539329e6766fd0fcd4b03fd7b")
LONGMEMEVAL: Origin = ("xiaowu0162/LongMemEval", "b11ff723381cf41e744c5524be0c52b3a408516c")
LONGMEMEVAL_UNPINNED: Origin = ("xiaowu0162/LongMemEval", None)


@dataclass(frozen=True)
class Source:
    kind: Literal["verbatim-reference", "own"]
    repo: str | None = None
    commit: str | None = None
    file: str | None = None
    symbol: str | None = None  # the constant or function holding the text there
    note: str = ""


def verbatim(origin: Origin, file: str, symbol: str, note: str = "") -> Source:
    return Source("verbatim-reference", origin[0], origin[1], file, symbol, note)


def own(note: str) -> Source:
    return Source("own", note=note)
