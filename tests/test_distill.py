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
