import gzip
import json
import os
import random
import struct
import sys
import zlib
from pathlib import Path

import pytest

from harness.data.longmemeval import find_local

DATA_ORACLE = "longmemeval_oracle_single_session_user.json.gz"
DATA_S = "longmemeval_s_single_session_user.json.gz"


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


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# What `reports.plots.save` writes in tests not marked `figures`: a valid 1x1 grey PNG and an empty SVG, the same
# bytes every time, so report links, file listings, the HTML's embedded image and byte comparisons of two runs work.
PLACEHOLDER_PNG = (
    b"\x89PNG\r\n\x1a\n"
    + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))  # 1x1, 8-bit greyscale
    + _png_chunk(b"IDAT", zlib.compress(b"\x00\x80", 9))  # one scanline: filter 0, one grey pixel
    + _png_chunk(b"IEND", b"")
)
PLACEHOLDER_SVG = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1">'
    b"<!-- not drawn: a test placeholder (tests/conftest.py) --></svg>\n"
)


def save_without_drawing(fig, out_base, *, rect=None) -> list[Path]:
    """`reports.plots.save` less the drawing (most of a report's time in the suite, docs/reliability.md issue
    21): the figure was built by the plotting code as in a real run; the same two paths come back, each holding
    a placeholder, and the figure is closed so none accumulates (`rect`, the layout's area, is not laid out)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):  # what savefig would have refused
        raise TypeError(f"plots.save needs a matplotlib Figure, got {type(fig).__name__}")
    out_base = Path(out_base)
    png, svg = out_base.with_suffix(".png"), out_base.with_suffix(".svg")
    png.write_bytes(PLACEHOLDER_PNG)
    svg.write_bytes(PLACEHOLDER_SVG)
    plt.close(fig)
    return [png, svg]


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


def make_row(qid="q1", answer="Paris", question="Where did I go?", sessions=None, qtype="single-session-user"):
    sessions = sessions or [
        [
            {"role": "user", "content": "I went to Paris last May.", "has_answer": True},
            {"role": "assistant", "content": "Nice trip!"},
        ]
    ]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "answer": answer,
        "question_date": "2023/05/30",
        "haystack_session_ids": [f"s{i}" for i in range(len(sessions))],
        "haystack_dates": ["2023/05/01"] * len(sessions),
        "haystack_sessions": sessions,
        "answer_session_ids": ["s0"],
    }


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


# Record fields that legitimately differ when the same inputs run again: wall times and cache flags.
# A cached re-run replays model latencies (latency_s, generation_ms), so those stay comparable there.
CACHED_RERUN_VOLATILE = (
    "cached",
    "cache_hits",
    "wall_ms",
    "build_ms",
    "query_ms",
    "latency_ms",
    "query_ms_reference",
    "append_embed_ms",
)  # local embedders: wall time
RERUN_VOLATILE = CACHED_RERUN_VOLATILE + ("latency_s", "generation_ms", "model_ms")


def without_keys(obj, keys):
    """`obj` (records, nested) with every dict entry named in `keys` removed."""
    if isinstance(obj, dict):
        return {k: without_keys(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [without_keys(v, keys) for v in obj]
    return obj


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
