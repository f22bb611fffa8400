"""tests/ laid out so a contributor knows where a test goes (tests/README.md): every test file in a folder the README
names, every folder a package, shared code in tests/support (which holds no test), every marker declared and
explained, and `make test-fast` leaving out every marker the guard requires for a cost."""

from __future__ import annotations

import re
import tomllib

from tests.support.marker_guard import E2E_MARKERS, PROCESS_MARKERS, REAL_DATA_MARKERS
from tests.support.paths import REPO

TESTS = REPO / "tests"
README = (TESTS / "README.md").read_text()


def _folders_in_readme() -> set[str]:
    """The folders of the README's table "Where a new test goes"."""
    table = README[README.index("| folder | tests of |") :].split("\n\n")[0]
    named = {
        name
        for cell in re.findall(r"^\| ([^|]+) \|", table, re.M)
        for name in re.findall(r"`tests/([a-z_]+(?:/[a-z_]+)?)/`", cell)
    }
    harness_subs = re.search(r"`tests/harness/<sub>/` \| `harness/<sub>/`: ([^|]+)\|", table)
    assert harness_subs, "the README's row for harness subpackages"
    named |= {f"harness/{s}" for s in re.findall(r"`([a-z_]+)`", harness_subs.group(1))}
    return named


def _test_files():
    return sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def test_every_test_file_is_in_a_folder_the_readme_names():
    named = _folders_in_readme()
    misplaced = [
        str(p.relative_to(REPO))
        for p in _test_files()
        if p.parent == TESTS or p.parent.relative_to(TESTS).as_posix() not in named
    ]
    assert misplaced == [], f"move each to the folder of the code it tests (tests/README.md): {misplaced}"


def test_every_folder_the_readme_names_exists_and_holds_tests_or_helpers():
    for folder in _folders_in_readme():
        assert list((TESTS / folder).glob("*.py")), f"tests/README.md names tests/{folder}/, which holds no module"


def test_every_test_folder_is_a_package_so_two_folders_may_hold_the_same_file_name():
    folders = {p.parent for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts}
    missing = [str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists()]
    assert missing == [], f"add an __init__.py to {missing} (else pytest puts the folder itself on sys.path)"


def test_support_holds_helpers_only():
    assert not list((TESTS / "support").rglob("test_*.py")), "tests/support is code the tests share, not tests"


def _declared_markers() -> dict[str, str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in config["addopts"], "an undeclared marker must be an error, not a new marker"
    return dict(entry.split(": ", 1) for entry in config["markers"])


def test_every_declared_marker_is_explained_in_the_readme_and_no_other():
    declared = set(_declared_markers())
    table = set(re.findall(r"^\| `([a-z_0-9]+)` \|", README, re.M))
    assert table == declared, f"tests/README.md's marker table vs pyproject.toml: {table ^ declared}"


def test_the_fast_target_leaves_out_every_marker_the_guard_requires():
    makefile = (REPO / "Makefile").read_text()
    fast = re.search(r"^FAST_TESTS = not \(([^)]*)\)$", makefile, re.M)
    assert fast, "the Makefile's FAST_TESTS selection"
    left_out = set(fast.group(1).split(" or "))
    assert set(PROCESS_MARKERS + E2E_MARKERS + REAL_DATA_MARKERS) <= left_out
    assert left_out <= set(_declared_markers())
    assert re.search(r"^test-fast: .*\n\t.*-m \"\$\(FAST_TESTS\)\"", makefile, re.M)
    assert f'`pytest -m "not ({fast.group(1)})"`' in README, "tests/README.md states the fast selection"
