"""The markers' guard (tests/support/marker_guard.py): an unmarked test cannot start a process by any route, run a
Hydra command of the CLI in process or read a large real data file; the marker that names the cost lets it; and a
refusal the code under test swallows still fails the test.

The refusals are checked on behalf of a stand-in test (`guard.checking`), so these tests start nothing themselves:
a refused start never reaches the system call (each route would leave a file behind if it ran)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.data.longmemeval import find_local
from tests.support.marker_guard import (
    E2E_MARKERS,
    PROCESS_MARKERS,
    REAL_DATA_BYTES,
    REAL_DATA_MARKERS,
    MarkerGuard,
    MarkerRequired,
)


@dataclass
class StandIn:
    """What the guard reads of a test: its id and its markers."""

    markers: tuple[str, ...] = ()
    nodeid: str = field(default="tests/suite/stand_in.py::test_x")

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name in self.markers else None


@pytest.fixture
def guard(request) -> MarkerGuard:
    plugin = request.config.pluginmanager.get_plugin("marker_guard")
    assert isinstance(plugin, MarkerGuard), "tests/conftest.py registers the guard for every session"
    return plugin


def _touch(path: str) -> None:
    Path(path).touch()


def _fork(path: Path) -> None:
    pid = os.fork()
    if pid == 0:  # only if the guard let it through: the child must not run the rest of the test session
        Path(path).touch()
        os._exit(0)
    os.waitpid(pid, 0)


def _process_pool(path: Path) -> None:
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(_touch, str(path)).result()


TOUCH = shutil.which("touch") or "/usr/bin/touch"
ROUTES = {
    "subprocess.run": lambda f: subprocess.run([TOUCH, str(f)], check=True),
    "shell=True": lambda f: subprocess.run(f"touch {f}", shell=True, check=True),
    "Popen executable=": lambda f: subprocess.Popen(["x", str(f)], executable=TOUCH).wait(),
    "the interpreter": lambda f: subprocess.check_call([sys.executable, "-c", f"open({str(f)!r}, 'w')"]),
    "os.system": lambda f: os.system(f"touch {f}"),
    "os.posix_spawn": lambda f: os.waitpid(os.posix_spawn(TOUCH, [TOUCH, str(f)], os.environ), 0),
    "os.fork": _fork,
    "multiprocessing (fork)": lambda f: (
        multiprocessing.get_context("fork").Process(target=_touch, args=(str(f),)).start()
    ),
    "multiprocessing (spawn)": lambda f: (
        multiprocessing.get_context("spawn").Process(target=_touch, args=(str(f),)).start()
    ),
    "a process pool": _process_pool,
}


@pytest.mark.parametrize("route", ROUTES)
def test_an_unmarked_test_starts_no_process_by_any_route(guard, tmp_path, route):
    witness = tmp_path / "started"
    with guard.checking(StandIn(markers=("e2e", "real_data", "figures"))) as refused:
        with pytest.raises(MarkerRequired, match=r"started a process .* mark it `@pytest.mark.process`"):
            ROUTES[route](witness)
    assert not witness.exists(), "the process ran"
    assert len(refused) == 1 and "tests/suite/stand_in.py::test_x" in refused[0]


def test_git_is_exempt(guard):
    with guard.checking(StandIn()) as refused:
        assert subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.startswith("git version")
    assert refused == []


@pytest.mark.process
def test_each_process_marker_lets_a_test_start_one(guard, tmp_path):
    for marker in PROCESS_MARKERS:
        with guard.checking(StandIn(markers=(marker,))) as refused:
            guard.check("a start", PROCESS_MARKERS)
        assert refused == []
    with guard.checking(StandIn(markers=("process",))) as refused:
        subprocess.run([TOUCH, str(tmp_path / "started")], check=True)
    assert (tmp_path / "started").exists() and refused == []


def test_a_hydra_command_in_process_needs_e2e(guard, tmp_path):
    from commands.cli import main

    with guard.checking(StandIn(markers=("real_data", "figures"))) as refused:
        with pytest.raises(MarkerRequired, match=r"ran an lme-harness Hydra command .* `@pytest.mark.e2e`"):
            main(["run", f"hydra.run.dir={tmp_path / 'run'}", "dataset.limit=1"])
    assert not (tmp_path / "run").exists() and len(refused) == 1
    for marker in E2E_MARKERS:
        with guard.checking(StandIn(markers=(marker,))) as refused:
            guard.check("a command", E2E_MARKERS)
        assert refused == []


def test_a_large_real_data_file_needs_real_data_however_it_is_opened(guard, tmp_path):
    big = find_local("longmemeval_oracle.json.gz")
    small = find_local("longmemeval_oracle_single_session_user.json.gz")
    if big is None or small is None:
        pytest.skip("the shared LongMemEval files are not here (LME_DATA_DIR)")
    assert big.stat().st_size > REAL_DATA_BYTES > small.stat().st_size
    (tmp_path / "link.json.gz").symlink_to(big)
    with guard.checking(StandIn(markers=("figures",))) as refused:
        for path in (big, str(big), tmp_path / "link.json.gz"):
            with pytest.raises(
                MarkerRequired, match=r"real data file longmemeval_oracle\.json\.gz, .* `@pytest.mark.real_data`"
            ):
                open(path, "rb").close()
        with pytest.raises(MarkerRequired):
            os.close(os.open(big, os.O_RDONLY))
        open(small, "rb").close()  # a small subset is cheap: no marker
    assert len(refused) == 4
    for marker in REAL_DATA_MARKERS:
        with guard.checking(StandIn(markers=(marker,))) as refused:
            open(big, "rb").close()
        assert refused == []


INNER_CONFTEST = """
from tests.support.marker_guard import MarkerGuard


def pytest_configure(config):
    config.pluginmanager.register(MarkerGuard(), "marker_guard")
"""

INNER_TESTS = """
import subprocess


def test_swallows_the_refusal():
    try:
        subprocess.run(["touch", "started"])
    except Exception:
        pass


def test_leaves_it():
    subprocess.run(["touch", "started"])
"""


def test_a_refusal_the_code_under_test_swallows_still_fails_the_test(pytester):
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*test_swallows_the_refusal*started a process (touch)*mark it*"])
    assert not (pytester.path / "started").exists()
