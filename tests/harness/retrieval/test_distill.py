"""The embedder build leaves no half-written model where a reader (StaticEmbedder) would load it."""

import sys
import types

import pytest

from harness.retrieval import distill as distill_mod
from harness.retrieval.embedders import StaticEmbedder

FILES = {"config.json": b"{}", "tokenizer.json": b"{}", "model.safetensors": b"weights"}


def _fake_distill(monkeypatch, save):
    model = types.SimpleNamespace(save_pretrained=save)
    fake = types.ModuleType("model2vec.distill")
    fake.distill = lambda **_: model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "model2vec.distill", fake)
    monkeypatch.setattr(distill_mod, "resolve_model_dir", lambda teacher: teacher)


def test_a_build_killed_mid_write_leaves_no_weights_file(tmp_path, monkeypatch):
    def save(path):
        (tmp_path / "seen").write_text(path)
        with open(f"{path}/model.safetensors", "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt  # the process stopped mid-write

    _fake_distill(monkeypatch, save)
    out = tmp_path / "models" / "m2v"
    with pytest.raises(KeyboardInterrupt):
        distill_mod.distill_static("teacher", out)
    assert (tmp_path / "seen").read_text() != str(out)  # written elsewhere first
    assert not (out / "model.safetensors").exists()
    assert not [p for p in out.parent.iterdir() if p != out]  # and nothing of the attempt left beside it
    with pytest.raises(FileNotFoundError, match="static embedding model not found"):
        StaticEmbedder(out)  # the next run builds it again (here: says how) instead of loading half a model


def test_a_finished_build_moves_every_file_in_with_the_weights_last(tmp_path, monkeypatch):
    out = tmp_path / "m2v"
    moved: list[str] = []
    real_replace = distill_mod.os.replace

    def replace(src, dst):
        moved.append(str(dst).rsplit("/", 1)[-1])
        real_replace(src, dst)

    def save(path):
        for name, data in FILES.items():
            with open(f"{path}/{name}", "wb") as f:
                f.write(data)

    _fake_distill(monkeypatch, save)
    monkeypatch.setattr(distill_mod.os, "replace", replace)
    digest = distill_mod.distill_static("teacher", out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == FILES
    assert sorted(moved) == sorted(FILES) and moved[-1] == "model.safetensors"
    assert digest == distill_mod.file_sha256(out / "model.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == ["m2v"]


def _build_in_process(target: str, log: str, results: str) -> None:
    """One of two processes that need the same model at once (a test worker, a first run)."""
    import time
    from pathlib import Path

    from harness.retrieval.embedders import build_once

    def build() -> None:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(0.5)  # long enough for the other process to arrive while this one builds
        Path(target).write_bytes(b"weights")

    built = build_once(Path(target), build)
    with open(results, "a") as f:
        f.write(f"{built}\n")


@pytest.mark.process
def test_two_processes_needing_the_model_at_once_build_it_once(tmp_path):
    import multiprocessing

    target = tmp_path / "models" / "m2v" / "model.safetensors"
    target.parent.mkdir(parents=True)
    log, results = tmp_path / "log", tmp_path / "results"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_build_in_process, args=(str(target), str(log), str(results))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert log.read_text() == "built\n"  # one build; the other process waited for it
    assert sorted(results.read_text().split()) == ["False", "True"]
    assert target.read_bytes() == b"weights"


def test_a_build_that_dies_leaves_the_next_process_to_build(tmp_path):
    from harness.retrieval.embedders import build_once

    target = tmp_path / "models" / "m2v" / "model.safetensors"

    def dies() -> None:
        raise KeyboardInterrupt  # killed mid-build: no weights written

    with pytest.raises(KeyboardInterrupt):
        build_once(target, dies)

    def builds() -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"w")

    assert build_once(target, builds)  # the lock died with the build: this one builds
    assert target.read_bytes() == b"w" and not build_once(target, dies)  # built: nothing runs again
