"""Module structure: no import cycles between the harness's modules, no private names imported across modules.

Imports inside functions count: a lazy import hides a cycle from the interpreter, not from the reader."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "runners", "reports")
# Cycles that predate this test, each through a lazy import; the set may shrink, never grow.
KNOWN_CYCLES = {
    frozenset({"harness.storage", "harness.records"}),
    frozenset({"runners.gate_replay", "runners.cli"}),
}
# Private names imported across modules; the set may shrink, never grow.
KNOWN_PRIVATE: set[tuple[str, str, str]] = set()


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = p
    return mods


def _imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], set[tuple[str, str, str]]]:
    edges: dict[str, set[str]] = {}
    private: set[tuple[str, str, str]] = set()
    for m, p in mods.items():
        deps: set[str] = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.module in mods:
                deps.add(n.module)
                for a in n.names:
                    deps |= {f"{n.module}.{a.name}"} & mods.keys()
                    if a.name.startswith("_"):
                        private.add((m, n.module, a.name))
            elif isinstance(n, ast.Import):
                deps |= {a.name for a in n.names} & mods.keys()
        edges[m] = deps - {m}
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_new_import_cycles():
    edges, _ = _imports(_modules())
    cycles = set(_cycles(edges))
    assert not any({"harness.retrieval.distill", "harness.retrieval.embedders"} <= c for c in cycles)
    assert not any({"runners.provenance", "runners.replay"} <= c for c in cycles)
    assert cycles <= KNOWN_CYCLES, f"new import cycle(s): {[sorted(c) for c in cycles - KNOWN_CYCLES]}"


def test_no_private_names_imported_across_modules():
    _, private = _imports(_modules())
    assert private <= KNOWN_PRIVATE, f"private cross-module imports: {sorted(private - KNOWN_PRIVATE)}"


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [frozenset({"a", "b"})]


def test_production_code_never_imports_the_test_kit():
    """harness/testing/ holds test doubles built on production code (the loopback server is production:
    harness/llm/loopback.py, used by the replay gate); no production module may depend on them."""
    edges, _ = _imports(_modules())
    kit = "harness.testing"
    bad = sorted(
        (m, d)
        for m, deps in edges.items()
        if not (m == kit or m.startswith(kit + "."))
        for d in deps
        if d == kit or d.startswith(kit + ".")
    )
    assert not bad, f"production modules import the test kit: {bad}"
