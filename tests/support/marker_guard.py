"""The costly markers, enforced at run time: a test that starts an OS process, runs a whole lme-harness command in
its own process, or reads a large real LongMemEval file says so, and `make test-fast` leaves it out.

What needs which marker (any one of those listed satisfies the check; the first is the one to add):

- starting an OS process: `process` (or `slow`, `postgres`, `ray`, which start one by their declared meaning).
  Anything that makes a new OS process counts: `subprocess` (the CLI as a subprocess, a model server, Chromium,
  PostgreSQL, Ray, pip, gcc), `os.fork` / `os.forkpty` / `os.posix_spawn` / `os.system`, a `multiprocessing`
  worker or a process pool. Threads and loopback servers inside the test's own process
  (harness/testing/fake_openai.py, tests/support/raw_http.py) are not processes and need no marker. One program
  is exempt: `git`, which runners/provenance.py asks for the code's commit in every run (two short read-only
  queries); marking every in-process run for them would leave the marker meaningless. So is `uname`, which
  Python's `platform` module runs once per process (then cached) for the platform a run records: whichever test
  came first would otherwise be refused, an order-dependent failure.
- running a Hydra command of the CLI in the test's process (run, plan, rescore, replay, retrieval-eval: the
  config composed, the pipeline run, the report written; about a second each, most of the suite's time): `e2e`
  (or a process marker). Checked at `commands.cli._hydra_main`, which every one of those commands goes through.
- reading a real LongMemEval file larger than REAL_DATA_BYTES from the data directories
  (`harness.data.longmemeval.default_data_dirs`: seconds to parse each): `real_data` (or `e2e`, or a process
  marker). Checked on every file open (an audit hook), so a read through any helper counts.

The checks cannot be talked round by indirection: they sit where every such start, command or read passes, so one
made three calls deep in harness code is caught like one the test makes itself. An unmarked test's attempt is
refused before it happens (`MarkerRequired`), and the test fails even when the code under test catches that error
(a refusal is recorded and reported with the test's outcome). Outside tests (collection, session start and end)
nothing is checked.
"""

from __future__ import annotations

import inspect
import multiprocessing.process
import multiprocessing.util
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any

import pytest

PROCESS_MARKERS = ("process", "slow", "postgres", "ray")
E2E_MARKERS = ("e2e", *PROCESS_MARKERS)
REAL_DATA_MARKERS = ("real_data", "e2e", *PROCESS_MARKERS)
EXEMPT_PROGRAMS = frozenset({"git", "uname"})
REAL_DATA_BYTES = 1_000_000  # the oracle file (3.8 MB) and every `_s` file are over it; the 0.3 MB subsets are not


class MarkerRequired(RuntimeError):
    """An unmarked test tried something costly that needs a marker."""


def _program(args: Any, executable: Any, shell: bool) -> str:
    """The name of the program a `Popen` would run (its first word under `shell=True`)."""
    if executable is not None and not shell:
        return PurePath(os.fsdecode(executable)).name
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        first = (shlex.split(text) or [""])[0] if shell else text
    else:
        first = os.fsdecode(list(args)[0]) if args else ""
    return PurePath(first).name


def _data_dirs() -> tuple[str, ...]:
    from harness.data.longmemeval import default_data_dirs

    return tuple(os.path.realpath(d) + os.sep for d in default_data_dirs() if os.path.isdir(d))


class MarkerGuard:
    """The pytest plugin (registered by tests/conftest.py). `item` is the test being run, None outside tests."""

    def __init__(self) -> None:
        self.item: Any = None
        self.refused: dict[str, list[str]] = {}
        self._undo: list[Callable[[], None]] = []
        self._data_dirs: tuple[str, ...] = ()
        self._active = False

    # -- the check ------------------------------------------------------------------------------------------------

    def check(self, what: str, markers: tuple[str, ...]) -> None:
        """Refuse `what` unless the current test carries one of `markers`."""
        item = self.item
        if item is None or any(item.get_closest_marker(m) for m in markers):
            return
        message = (
            f"{item.nodeid}: {what}, but it carries none of the markers {', '.join(markers)}: "
            f"mark it `@pytest.mark.{markers[0]}` (or its module: pytestmark); tests/README.md says which marker fits"
        )
        self.refused.setdefault(item.nodeid, []).append(message)
        raise MarkerRequired(message)

    @contextmanager
    def checking(self, item: Any) -> Iterator[list[str]]:
        """Check on behalf of `item` (anything with `nodeid` and `get_closest_marker`) inside the block; yields the
        list the block's refusals land in. For the guard's own tests."""
        saved = self.item
        self.item = item
        refused = self.refused.setdefault(item.nodeid, [])
        try:
            yield refused
        finally:
            self.item = saved
            self.refused.pop(item.nodeid, None)

    # -- where the costly things happen ---------------------------------------------------------------------------

    def install(self) -> None:
        import commands.cli

        self._patch(
            commands.cli,
            "_hydra_main",
            self._refusing(commands.cli._hydra_main, "it ran an lme-harness Hydra command in process", E2E_MARKERS),
        )
        popen_start = subprocess.Popen._execute_child  # type: ignore[attr-defined]
        signature = inspect.signature(popen_start)
        guard = self

        def _execute_child(popen, args, executable, *rest, **kw):  # type: ignore[no-untyped-def]
            shell = bool(signature.bind(popen, args, executable, *rest, **kw).arguments.get("shell"))
            program = _program(args, executable, shell)
            if program not in EXEMPT_PROGRAMS:
                guard.check(f"it started a process ({program})", PROCESS_MARKERS)
            return popen_start(popen, args, executable, *rest, **kw)

        self._patch(subprocess.Popen, "_execute_child", _execute_child)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                self._patch(os, name, self._refusing(getattr(os, name), f"it started a process (os.{name})"))
        process_start = multiprocessing.process.BaseProcess.start
        self._patch(
            multiprocessing.process.BaseProcess,
            "start",
            self._refusing(process_start, "it started a process (multiprocessing)"),
        )
        spawn = multiprocessing.util.spawnv_passfds
        self._patch(
            multiprocessing.util, "spawnv_passfds", self._refusing(spawn, "it started a process (multiprocessing)")
        )
        self._data_dirs = _data_dirs()
        if self._data_dirs:
            sys.addaudithook(self._on_audit)  # an audit hook cannot be removed: `_active` turns it off
        self._active = True

    def uninstall(self) -> None:
        self._active = False
        while self._undo:
            self._undo.pop()()

    def _on_audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not self._active or self.item is None:
            return
        path = args[0]
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor
        path = os.fsdecode(path)
        if ".json" not in path:  # what the dataset files are named (.json, .json.gz); keeps every other open cheap
            return
        real = os.path.realpath(path)
        if real.startswith(self._data_dirs) and os.path.isfile(real) and os.path.getsize(real) > REAL_DATA_BYTES:
            self.check(f"it read the real data file {PurePath(real).name}", REAL_DATA_MARKERS)

    def _refusing(
        self, original: Callable[..., Any], what: str, markers: tuple[str, ...] = PROCESS_MARKERS
    ) -> Callable[..., Any]:
        def guarded(*args: Any, **kw: Any) -> Any:
            self.check(what, markers)
            return original(*args, **kw)

        return guarded

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, replacement)
        self._undo.append(lambda: setattr(owner, name, original))

    # -- pytest hooks ---------------------------------------------------------------------------------------------

    def pytest_configure(self, config: pytest.Config) -> None:
        self.install()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.uninstall()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        self.item = item
        try:
            yield
        finally:
            self.item = None
            self.refused.pop(item.nodeid, None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report = outcome.get_result()
        refused = self.refused.pop(item.nodeid, [])
        if not refused:
            return
        if report.passed:  # the refusal was caught and swallowed by the code under test: still a failure
            report.outcome = "failed"
            report.longrepr = "\n".join(refused)
        else:
            report.sections.append(("marker guard", "\n".join(refused)))
