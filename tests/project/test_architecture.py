"""Module structure: a declared layer order over every package, no import cycle, no private name imported across
modules, no production module depending on the test kit.

Imports inside functions count: a lazy import hides a cycle from the interpreter, not from the reader. The tests'
own imports of production code are not part of the house and are not checked."""

from __future__ import annotations

import ast
import importlib
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO
# Lowest first. A module may import modules of its own layer and of the layers below, never of one above.
# A module belongs to the layer of its longest matching prefix (harness.testing is not harness).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness",),  # the library: dataset, sessions, retrieval, LLM client, records, scorers, settings
    ("reports",),  # records → aggregates → report files
    ("runners",),  # the run pipeline: config → components → (case, contestant) pairs → records → scores
    ("commands",),  # the `lme-harness` commands (commands/cli.py), each driving the pipeline or the reports
    ("harness.testing",),  # test doubles built on the production code (the tests' and the studies' fakes)
    ("scripts", "research"),  # tooling and measurement studies (research/README.md), on top of everything
)
# What the wheel ships and every other layer may import: the product. research/ and scripts/ sit beside it.
PRODUCT = ("harness", "reports", "runners", "commands")
PACKAGES = tuple(sorted({p.split(".")[0] for layer in LAYERS for p in layer}))
# Private names imported across modules; the set may shrink, never grow.
KNOWN_PRIVATE: set[tuple[str, str, str]] = set()


def _modules(root: Path = ROOT) -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for p in (root / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(root).with_suffix("").parts)
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


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    if rank < 0:
        raise AssertionError(f"{module}: in no declared layer (add its package to LAYERS)")
    return rank


def _upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module sits in a higher layer."""
    return sorted((m, d) for m, deps in edges.items() for d in deps if _layer(d) > _layer(m))


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
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


def test_every_package_is_checked():
    # configs/ is data (its __init__.py only makes it the lme_configs package); tests/ may import any layer
    on_disk = {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))} - {"tests", "configs"}
    assert on_disk <= set(PACKAGES), f"packages in no layer: {sorted(on_disk - set(PACKAGES))}"
    mods = _modules()
    assert {"harness.records", "reports.render", "commands.cli", "harness.testing.faults"} <= mods.keys()
    assert any(m.startswith("research.") for m in mods) and any(m.startswith("scripts.") for m in mods)


def test_no_import_cycles():
    edges, _ = _imports(_modules())
    assert not _cycles(edges), f"import cycle(s): {[sorted(c) for c in _cycles(edges)]}"


def test_no_upward_imports():
    edges, _ = _imports(_modules())
    assert not _upward(edges), f"imports of a higher layer (LAYERS): {_upward(edges)}"


def test_no_private_names_imported_across_modules():
    _, private = _imports(_modules())
    assert private <= KNOWN_PRIVATE, f"private cross-module imports: {sorted(private - KNOWN_PRIVATE)}"


KIT = "harness.testing"


def _kit_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(production module, test-kit module) pairs: production is every layer below the kit's."""
    return sorted(
        (m, d)
        for m, deps in edges.items()
        if _layer(m) < _layer(KIT)
        for d in deps
        if d == KIT or d.startswith(KIT + ".")
    )


def test_production_code_never_imports_the_test_kit():
    """harness/testing/ holds test doubles built on production code (the loopback server is production:
    harness/llm/loopback.py, used by the replay gate); no production module may depend on them."""
    edges, _ = _imports(_modules())
    assert not _kit_imports(edges), f"production modules import the test kit: {_kit_imports(edges)}"


def _product_uses_of_research(edges: dict[str, set[str]], mods: dict[str, Path]) -> list[tuple[str, str]]:
    """(product module, module or dotted name it reaches beside the product): imports of `research`/`scripts`
    modules, and `importlib.import_module("research...")` / `__import__` calls that would hide one."""
    beside = tuple(p for p in PACKAGES if p not in PRODUCT and not p.startswith("harness"))
    out = {(m, d) for m, deps in edges.items() if m.split(".")[0] in PRODUCT for d in deps if d.split(".")[0] in beside}
    for m, p in mods.items():
        if m.split(".")[0] not in PRODUCT:
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Call) and ast.unparse(n.func) in (
                "importlib.import_module",
                "import_module",
                "__import__",
            ):
                arg = n.args[0] if n.args else None
                if isinstance(arg, ast.Constant) and str(arg.value).split(".")[0] in beside:
                    out.add((m, str(arg.value)))
    return sorted(out)


def test_the_product_never_imports_research():
    """research/ (and scripts/) sit beside the product: no product module imports them, not even lazily or through
    importlib, so nothing the wheel ships can need a file the wheel leaves out."""
    mods = _modules()
    edges, _ = _imports(mods)
    assert not _product_uses_of_research(edges, mods), _product_uses_of_research(edges, mods)


def test_the_research_check_finds_a_planted_import(tmp_path):
    files = {
        "harness/a.py": "def f():\n    from research.study import X\n",
        "runners/b.py": "import importlib\nimportlib.import_module('research.study')\n",
        "commands/c.py": "import scripts.tool\n",
        "reports/d.py": "from harness import a\n",  # the product among itself: fine
        "research/study.py": "from harness.a import f\n",  # research on the product: fine
        "scripts/tool.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    mods = _modules(tmp_path)
    edges, _ = _imports(mods)
    assert _product_uses_of_research(edges, mods) == [
        ("commands.c", "scripts.tool"),
        ("harness.a", "research.study"),
        ("runners.b", "research.study"),
    ]


def _wheel_packages(monkeypatch) -> list[str]:
    """The packages setup.py gives setuptools (what the wheel holds), read by running setup.py with `setup`
    replaced: no build, no subprocess, nothing written."""
    import runpy

    import setuptools

    seen: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    return list(seen["packages"])


def test_the_wheel_ships_the_product_and_not_research(monkeypatch):
    tops = {p.split(".")[0] for p in _wheel_packages(monkeypatch)}
    assert tops == {*PRODUCT, "lme_configs"}, f"the wheel's top-level packages: {sorted(tops)}"
    packages = set(_wheel_packages(monkeypatch))
    # every product package on disk is shipped (a subpackage left out would fail only once installed)
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for top in PRODUCT for p in (ROOT / top).rglob("__init__.py")}
    assert on_disk <= packages, f"product packages the wheel leaves out: {sorted(on_disk - packages)}"


def test_every_study_has_a_row_in_the_research_readme():
    readme = (ROOT / "research" / "README.md").read_text()
    missing = [name for name in STUDIES if f"`{name}`" not in readme]
    assert not missing, f"research/README.md names no row for: {missing}"


def test_every_package_is_type_checked():
    """mypy's `files` (pyproject.toml) name every package of LAYERS that exists: no package escapes the types."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        files = set(tomllib.load(f)["tool"]["mypy"]["files"])
    assert {p for p in PACKAGES if (ROOT / p).is_dir()} <= files


def test_the_checks_find_a_planted_upward_import_and_cycle(tmp_path):
    # module names that tests/relayout never renames, so a re-applied layout leaves this fixture as it is
    files = {
        "harness/__init__.py": "",
        "harness/low.py": "def f():\n    from runners.replay import run  # upward, and lazy\n",
        "harness/a.py": "from harness import b\n",
        "harness/b.py": "import harness.a\n",
        "harness/testing/__init__.py": "",
        "harness/testing/fake.py": "from harness.b import f\n",
        "reports/__init__.py": "",
        "reports/render.py": "from harness.testing.fake import f\n",
        "runners/__init__.py": "",
        "runners/replay.py": "from reports.render import f\nfrom harness.a import _private\n",
        "runners/components.py": "from commands.cli import main  # the pipeline never drives a command\n",
        "commands/__init__.py": "",
        "commands/cli.py": "from runners.replay import f\nfrom harness.testing import fake\n",
        "scripts/tool.py": "from commands.cli import main\n",
        "research/study.py": "from harness.testing import fake\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    edges, private = _imports(_modules(tmp_path))
    assert _upward(edges) == [
        ("commands.cli", "harness.testing"),
        ("commands.cli", "harness.testing.fake"),
        ("harness.low", "runners.replay"),
        ("reports.render", "harness.testing.fake"),
        ("runners.components", "commands.cli"),
    ]
    assert _cycles(edges) == [frozenset({"harness.a", "harness.b"})]
    assert private == {("runners.replay", "harness.a", "_private")}
    assert _kit_imports(edges) == [  # the studies may use it
        ("commands.cli", "harness.testing"),
        ("commands.cli", "harness.testing.fake"),
        ("reports.render", "harness.testing.fake"),
    ]


def _path_hacks(mods: dict[str, Path]) -> list[str]:
    """Modules that change sys.path, or import a sibling file by its bare name (which only a sys.path change or
    the script's own directory makes work): every module is imported by its package path, `python -m pkg.mod`."""
    tops = {m.split(".")[1] for m in mods if m.count(".") == 1 and m.split(".")[0] in ("scripts", "research")}
    stems = tops - set(sys.stdlib_module_names)
    out = []
    for m, p in mods.items():
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Attribute) and n.attr == "path" and ast.unparse(n.value) == "sys":
                out.append(f"{m}: sys.path")
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else []
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                names = [n.module]
            out += [f"{m}: import {x}" for x in names if x.split(".")[0] in stems]
    return sorted(set(out))


def test_no_module_patches_sys_path_or_imports_a_sibling_by_bare_name():
    assert not _path_hacks(_modules()), _path_hacks(_modules())


def test_the_path_check_finds_a_planted_hack(tmp_path):
    (tmp_path / "research").mkdir()
    (tmp_path / "research" / "common.py").write_text("X = 1\n")
    (tmp_path / "research" / "study.py").write_text(
        "import sys\nsys.path.insert(0, '.')\nfrom common import X\nfrom research.common import X as Y\n"
    )
    assert _path_hacks(_modules(tmp_path)) == ["research.study: import common", "research.study: sys.path"]


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [frozenset({"a", "b"})]


def _attrs_uses(mods: dict[str, Path]) -> list[str]:
    """Every `x.attrs` in the packages: pandas' DataFrame.attrs is an untyped side channel that a copy, a concat or
    a CSV round trip may drop; what travels with a records frame is `reports.run_frame.RunFrame`'s typed fields."""
    return sorted(
        f"{m}:{n.lineno}"
        for m, p in mods.items()
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Attribute) and n.attr == "attrs"
    )


def test_nothing_travels_on_dataframe_attrs():
    assert _attrs_uses(_modules()) == [], "use RunFrame's fields (reports/run_frame.py), not DataFrame.attrs"


def test_the_attrs_check_finds_a_planted_use(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "table.py").write_text(
        'def f(df, attrs):\n    df.attrs["metrics"] = 1\n    return attrs, df.attrs.get("metrics")\n'
    )
    assert _attrs_uses(_modules(tmp_path)) == ["reports.table:2", "reports.table:3"]


STUDIES = sorted(p.stem for p in (ROOT / "research").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", STUDIES)
def test_every_study_imports_as_a_module(name):
    """`python -m research.NAME` works from the checkout with no path set up: importing loads no data."""
    try:
        importlib.import_module(f"research.{name}")
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] in PACKAGES:
            raise
        pytest.skip(f"optional dependency {e.name} not installed")


def _homonyms(mods: dict[str, Path]) -> list[tuple[str, tuple[str, ...]]]:
    """Names that two packages both give a module or subpackage directly inside them (`runners/x.py` beside
    `harness/x.py` or `harness/x/`): the reader cannot tell from the name which one a file means."""
    owners: dict[str, set[str]] = {}
    for m in mods:
        top, _, rest = m.partition(".")
        if rest:
            owners.setdefault(rest.split(".")[0], set()).add(top)
    return sorted((name, tuple(sorted(tops))) for name, tops in owners.items() if len(tops) > 1)


def test_no_two_packages_name_a_module_alike():
    assert not _homonyms(_modules()), f"homonym modules across packages (rename one): {_homonyms(_modules())}"


def test_the_homonym_check_finds_a_planted_pair(tmp_path):
    for rel in ("harness/wire.py", "harness/scoring/base.py", "runners/wire.py", "reports/scoring.py", "reports/x.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert _homonyms(_modules(tmp_path)) == [("scoring", ("harness", "reports")), ("wire", ("harness", "runners"))]
