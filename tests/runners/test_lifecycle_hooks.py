"""The optional lifecycle hooks of contestants and memory providers are declared in their interfaces, each with a
default (harness/contestants/base.py `Contestant`/`ContestantBase`, harness/memory/provider.py
`MemoryProvider`/`ProviderBase`), and the pipeline calls them directly: no `getattr(x, "hook", default)` is left to
find them. A class written without the base (the interfaces are structural) still works: it gets the default of each
hook it leaves out where it enters the pipeline (harness/hook_defaults.py)."""

from __future__ import annotations

import ast
import inspect
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.contestants.base import (
    CONTESTANT_HOOKS,
    Answer,
    CaseHistory,
    Contestant,
    ContestantBase,
    Ingested,
    Question,
    Toolkit,
    with_hook_defaults,
)
from harness.data.longmemeval import parse_cases
from harness.hook_defaults import WithDefaults, unwrapped
from harness.llm.types import ChatResult, Usage
from harness.memory.contestant import ProviderContestant
from harness.memory.http import HttpProvider, Routes
from harness.memory.provider import (
    PROVIDER_OPTIONAL,
    Capabilities,
    Ingest,
    MemoryItem,
    MemoryProvider,
    ProviderBase,
    Retrieval,
    with_provider_defaults,
)
from harness.session.events import Session
from harness.session.tokens import o200k_counter
from runners.modes import contestants_from_config
from tests.support.dataset_rows import make_row

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_REQUIRED = {"capabilities", "setup", "ingest", "retrieve", "teardown"}


def _members(protocol: type) -> set[str]:
    """A Protocol's declared members: its annotated attributes, methods and properties (not dunders)."""
    names = set(protocol.__dict__.get("__annotations__", {}))
    names |= {
        n for n, v in protocol.__dict__.items() if not n.startswith("_") and callable(v) or isinstance(v, property)
    }
    return {n for n in names if not n.startswith("_")}


def test_the_interfaces_declare_every_hook_with_its_default():
    assert _members(Contestant) == {"name", "ingest", "answer", *CONTESTANT_HOOKS}
    assert _members(MemoryProvider) == PROVIDER_REQUIRED | set(PROVIDER_OPTIONAL)
    for protocol, hooks, base in (
        (Contestant, CONTESTANT_HOOKS, ContestantBase),
        (MemoryProvider, PROVIDER_OPTIONAL, ProviderBase),
    ):
        for hook in hooks:
            declared = protocol.__dict__[hook]
            doc = inspect.getdoc(declared.fget if isinstance(declared, property) else declared) or ""
            assert "Default" in doc, f"{protocol.__name__}.{hook}: its docstring names no default"
            assert hasattr(base, hook), f"{base.__name__} holds no default for {hook}"


HOOK_NAMES = set(CONTESTANT_HOOKS) | set(PROVIDER_OPTIONAL)


def _hook_lookups(root: Path) -> list[str]:
    """`getattr(x, "<hook>", ...)` / `hasattr(x, "<hook>")` in the product packages: a hook found by name instead of
    declared (harness/hook_defaults.py, which gives the defaults, is the one place that looks)."""
    out = []
    for top in ("harness", "runners", "commands", "reports"):
        for p in (root / top).rglob("*.py"):
            if p.relative_to(root).as_posix() in ("harness/hook_defaults.py",) or "testing" in p.parts:
                continue
            for n in ast.walk(ast.parse(p.read_text())):
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name)
                    and n.func.id in ("getattr", "hasattr")
                    and len(n.args) >= 2
                    and isinstance(n.args[1], ast.Constant)
                    and n.args[1].value in HOOK_NAMES
                ):
                    out.append(f"{p.relative_to(root).as_posix()}:{n.lineno} {n.args[1].value}")
    return sorted(out)


def test_no_hook_is_found_by_getattr():
    assert _hook_lookups(ROOT) == []


def test_the_lookup_check_finds_a_planted_one(tmp_path):
    (tmp_path / "runners").mkdir()
    (tmp_path / "runners" / "x.py").write_text(
        'def f(m):\n    if callable(b := getattr(m, "bind_cases", None)):\n        b(1)\n    return hasattr(m, "remote")\n'
    )
    assert _hook_lookups(tmp_path) == ["runners/x.py:2 bind_cases", "runners/x.py:4 remote"]


# --- contestants -------------------------------------------------------------------------------------------------


@dataclass
class Plain:
    """A contestant as docs/architecture.md "Adding one" writes it: a name and the two methods, no base class."""

    name: str = "plain"

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        return Ingested(memory=len(history.sessions))

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        return Answer(prediction=f"{memory} sessions", calls=[], query_latency_s=0.0)


def _contestant_defining(hooks: set[str], seen: list) -> Any:
    """A structural contestant that defines exactly `hooks` (each recording its call in `seen`)."""
    body: dict[str, Any] = {}
    if "uses_retrieval" in hooks:
        body["uses_retrieval"] = False
    for hook in ("bind_run_dir", "bind_cases", "preflight"):
        if hook in hooks:
            body[hook] = lambda self, *a, _h=hook: seen.append(_h)
    return type("Some", (Plain,), body)()


def test_a_contestant_without_the_hooks_gets_their_defaults(tmp_path):
    c = with_hook_defaults(Plain())
    assert isinstance(c, WithDefaults) and unwrapped(c).name == "plain" and c.name == "plain"
    assert c.uses_retrieval is True
    assert c.bind_run_dir(tmp_path) is None and c.bind_cases([]) is None and c.preflight() is None
    assert c.ingest(CaseHistory("u", Session(id="s", user_id="u"), ()), None).memory == 0  # its own methods
    c.extra = 1  # written through to the contestant itself
    assert unwrapped(c).extra == 1
    base = type("Based", (ContestantBase, Plain), {})()
    assert with_hook_defaults(base) is base  # a ContestantBase has every hook: used as it is


@pytest.mark.parametrize("seed", range(8))
def test_each_hook_a_contestant_defines_is_its_own_and_the_rest_default(seed, tmp_path):
    rng = random.Random(seed)
    defined = {h for h in CONTESTANT_HOOKS if rng.random() < 0.5}
    seen: list[str] = []
    c = with_hook_defaults(_contestant_defining(defined, seen))
    c.bind_run_dir(tmp_path)
    c.bind_cases([])
    c.preflight()
    assert seen == [h for h in ("bind_run_dir", "bind_cases", "preflight") if h in defined]
    assert c.uses_retrieval is ("uses_retrieval" not in defined)
    assert (c is unwrapped(c)) is (defined == set(CONTESTANT_HOOKS))


def test_the_pipeline_loads_a_contestant_without_hooks_with_their_defaults():
    (plain, based) = contestants_from_config(
        {"mine": {"_target_": f"{__name__}.Plain"}, "long_context": {"_target_": "runners.modes.LongContextMode"}}
    )
    assert plain.name == "mine" and plain.uses_retrieval is True and plain.preflight() is None
    assert based is unwrapped(based) and based.uses_retrieval is True  # a built-in: ContestantBase


# --- memory providers --------------------------------------------------------------------------------------------


class Bare:
    """A provider with the required calls only, no ProviderBase (the contract is structural)."""

    def __init__(self) -> None:
        self.units: dict[str, list[str]] = {}
        self.setting = "x"

    def capabilities(self) -> Capabilities:
        return Capabilities("bare", "0")

    def setup(self, unit: str) -> None:
        self.units[unit] = []

    def ingest(self, unit: str, sessions) -> Ingest:
        self.units[unit] = [t.content for s in sessions for t in s.turns]
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        return Retrieval(tuple(MemoryItem(t) for t in self.units[unit][:top_k]))

    def teardown(self, unit: str) -> None:
        del self.units[unit]


class _Reader:
    model = "reader"

    def chat(self, messages, *, tools=None, purpose: str = "answer", **params: Any) -> ChatResult:
        return ChatResult("Oslo", (), Usage(5, 1), 0.0, self.model, "stop", purpose=purpose)


def _history() -> tuple[CaseHistory, Question]:
    row = make_row(question="where do I live?")
    row["question_date"] = "2023/05/30 (Tue) 10:00"
    row["haystack_dates"] = ["2023/05/01 (Mon) 10:00"]
    case = parse_cases(json.dumps([row]).encode(), "x")[0]
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    return CaseHistory.of(case, s), Question.of(case, case.question)


def _kit() -> Toolkit:
    return Toolkit(model=_Reader(), generation={}, context_window=100_000, token_counter=o200k_counter())


def test_a_provider_without_the_optional_members_runs_on_their_defaults(tmp_path):
    bare = Bare()
    c = ProviderContestant(bare, ready_poll_s=0)
    p = c.provider
    assert unwrapped(p) is bare and p.remote is False and p.stored is None and p.keep_units_in is None
    assert p.bind_model is None and p.bind_toolkit is None and p.scope("u") is None and p.ready("u") is True
    assert p.attach("u") is False
    assert c.uses_retrieval is False and c._spend() == {}
    c.preflight()
    c.bind_run_dir(tmp_path)  # no keep_units_in: its units stay in memory, so no ingest checkpoint either
    assert not c._units_outlive_process() and not (tmp_path / "memory-store.memory").exists()
    history, question = _history()
    ingested = c.ingest(history, _kit())
    assert "stored" not in ingested.trace[0]  # no listing: nothing to measure
    out = c.answer(ingested.memory, question, _kit())
    assert out.prediction == "Oslo" and not bare.units  # answered, then torn down
    caps = Routes(Bare()).capabilities()
    assert "stored" not in caps.calls  # the reference server offers no route the provider lacks


@pytest.mark.parametrize("seed", range(8))
def test_each_member_a_provider_defines_is_its_own_and_the_rest_default(seed, tmp_path):
    rng = random.Random(seed)
    defined = {
        m for m in ("remote", "stored", "preflight", "keep_units_in", "scope", "bind_model") if rng.random() < 0.5
    }
    seen: list[str] = []
    body: dict[str, Any] = {}
    if "remote" in defined:
        body["remote"] = True
    if "stored" in defined:
        body["stored"] = lambda self, unit: seen.append("stored") or ()
    if "preflight" in defined:
        body["preflight"] = lambda self: seen.append("preflight")
    if "keep_units_in" in defined:
        body["keep_units_in"] = lambda self, d: seen.append("keep_units_in")
    if "scope" in defined:
        body["scope"] = lambda self, unit: f"scope-{unit}"
    if "bind_model" in defined:
        body["bind_model"] = lambda self, model: seen.append("bind_model")
    provider = type("Some", (Bare,), body)()
    p = with_provider_defaults(provider)
    assert p.remote is ("remote" in defined)
    assert (p.stored is None) is ("stored" not in defined)
    assert p.scope("u") == ("scope-u" if "scope" in defined else None)
    c = ProviderContestant(provider, ready_poll_s=0)
    c.preflight()
    c.bind_run_dir(tmp_path)
    c.ingest(_history()[0], _kit())
    expected = [m for m in ("preflight", "keep_units_in", "bind_model", "stored") if m in defined]
    assert seen == expected
    assert c._spend() == {
        **({"llm": "answer_model"} if "bind_model" in defined else {}),
        **({"remote": True} if "remote" in defined else {}),
    }


def test_every_builtin_provider_has_every_member_itself():
    """The shipped providers subclass ProviderBase, so none is wrapped (their settings hash, which a resumed run's
    ingest checkpoint compares, is their own class's)."""
    from harness.memory.builtin import FullContextProvider, IndexProvider
    from harness.memory.summary_provider import SummaryProvider

    for p in (IndexProvider(), FullContextProvider(), SummaryProvider(), HttpProvider("http://127.0.0.1:9/v1")):
        assert with_provider_defaults(p) is p, type(p).__name__
