import gzip
import json
import os
import random
import sys
from pathlib import Path

import pytest

from harness.data.longmemeval import find_local
from tests.support.dataset_rows import make_row
from tests.support.figures import save_without_drawing
from tests.support.marker_guard import MarkerGuard

pytest_plugins = ("pytester",)  # tests/suite runs small pytest sessions of its own

DATA_ORACLE = "longmemeval_oracle_single_session_user.json.gz"
DATA_S = "longmemeval_s_single_session_user.json.gz"


def pytest_configure(config):
    # A test that starts an OS process, runs a whole lme-harness command in process or reads a large real data file
    # carries the marker saying so (process, e2e, real_data); an unmarked one that tries fails
    # (tests/support/marker_guard.py, tests/README.md).
    config.pluginmanager.register(MarkerGuard(), "marker_guard")


def pytest_addoption(parser):
    parser.addoption(
        "--test-order",
        default="file",
        help="file (as collected), reverse, or shuffle:SEED (modules in a random order, each module's tests too): "
        "finds tests whose outcome depends on what ran before them (docs/reliability.md, the flip check)",
    )


def pytest_collection_modifyitems(config, items):
    order = config.getoption("--test-order")
    if order == "file":
        return
    if order == "reverse":
        items.reverse()
        return
    kind, _, seed = order.partition(":")
    if kind != "shuffle" or not seed.isdigit():
        raise pytest.UsageError(f"--test-order={order!r}: expected file, reverse or shuffle:SEED (SEED an integer)")
    rng = random.Random(int(seed))
    modules: dict[str, list] = {}
    for item in items:  # shuffled within a module, so a module-scoped fixture is still set up once
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    groups = list(modules.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    items[:] = [item for group in groups for item in group]


@pytest.fixture(autouse=True)
def _absl_handler_off_captured_streams():
    """absl's log handler (imported by rouge-score when a run scores) keeps the stderr of the test that first
    used it: pytest's capture file. Each later in-process run lets Hydra reconfigure logging, which closes every
    handler, and absl then closes that capture file unless it is the current sys.stderr, so the next test that
    captures output crashed pytest ("I/O operation on closed file"), depending on test order."""
    yield
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        absl_logging.get_absl_handler().python_handler.stream = sys.__stderr__  # absl never closes this one


@pytest.fixture(autouse=True)
def _figures_not_drawn(request, monkeypatch):
    """Tests not marked `figures` get `save_without_drawing` in place of `reports.plots.save` (the one function
    every report figure goes through); the marked ones, which look at a figure's file, draw it for real."""
    if request.node.get_closest_marker("figures") is None:
        import reports.plots

        monkeypatch.setattr(reports.plots, "save", save_without_drawing)


@pytest.fixture(scope="module", autouse=True)
def _figures_not_drawn_in_module_fixtures(request):
    """The same for module-scoped fixtures (a shared benchmark run builds its report before any test's own
    fixtures), in a module where no test is marked `figures`: where one is, its module fixtures draw for real, so
    a marked test never sees a placeholder whatever the order the tests ran in."""
    mine = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    if any(item.get_closest_marker("figures") for item in mine):
        yield
        return
    import reports.plots

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reports.plots, "save", save_without_drawing)
        yield


@pytest.fixture(scope="session")
def oracle_path() -> Path:
    p = find_local(DATA_ORACLE)
    if p is None:
        pytest.fail(f"{DATA_ORACLE} not found: set LME_DATA_DIR or place ../shared/data/longmemeval next to the repo")
    return p


@pytest.fixture(scope="session")
def s_path() -> Path:
    p = find_local(DATA_S)
    if p is None:
        pytest.fail(f"{DATA_S} not found: set LME_DATA_DIR or place ../shared/data/longmemeval next to the repo")
    return p


@pytest.fixture
def write_dataset(tmp_path):
    def _write(rows, name="data.json.gz", raw: bytes | None = None) -> Path:
        p = tmp_path / name
        if raw is not None:  # written as given
            p.write_bytes(raw)
        else:
            data = json.dumps(rows).encode()
            p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        return p

    return _write


@pytest.fixture
def paris_dataset(write_dataset) -> dict:
    """A one-question dataset node (multi-session, its one evidence turn labelled) for retrieval-eval tests."""
    sessions = [[{"role": "user", "content": "I went to Paris last May.", "has_answer": True}]]
    rows = [make_row(qid="q1", question="When did I go to Paris?", sessions=sessions, qtype="multi-session")]
    return {
        "_target_": "harness.data.longmemeval.LongMemEvalSource",
        "path": str(write_dataset(rows)),
        "question_types": None,
    }


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL + pgvector on 127.0.0.1 for the session (tests marked `postgres`). Skipped with the
    reason when no server binaries are installed, except in CI (CI=true, or LME_REQUIRE_POSTGRES=1 as .ci/run
    sets), where that is a failure."""
    from harness.testing.pg_server import LocalPostgres, PgUnavailable

    try:
        server = LocalPostgres()
    except PgUnavailable as e:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("LME_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"CI needs PostgreSQL with pgvector: {e}")
        pytest.skip(str(e))
    with server:
        yield server
