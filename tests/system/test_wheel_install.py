"""A non-editable install runs the benchmark: the wheel ships the code and the Hydra configs (`lme_configs`), and
`lme-harness run` works from another directory with nothing of the checkout on the path."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.data.longmemeval import find_local
from harness.testing.fake_openai import FakeOpenAIServer
from tests.integration.test_run_e2e import MODES, responder
from tests.support.paths import REPO

pytestmark = pytest.mark.process  # tests/README.md: every test here starts a process

ROOT = REPO
SOURCES = ("pyproject.toml", "setup.py", "README.md", "harness", "runners", "commands", "reports", "configs")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (the checkout gets no build/), installed into a bare folder."""
    src, wheels, site = (tmp_path_factory.mktemp(n) for n in ("src", "wheels", "site"))
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(p, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", str(src), "-w", str(wheels)], check=True)
    (wheel,) = wheels.glob("lme_harness-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    return site


def _env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LME_DATA_DIR")}
    data = find_local("longmemeval_oracle_single_session_user.json.gz")
    assert data is not None, "the oracle dataset file is needed (tests/conftest.py finds the shared data)"
    return {**env, "PYTHONPATH": str(site), "LME_DATA_DIR": str(data.parent), "PYTHONDONTWRITEBYTECODE": "1"}


def test_the_wheel_holds_every_config_file(installed):
    shipped = {p.relative_to(installed / "lme_configs") for p in (installed / "lme_configs").rglob("*.yaml")}
    assert shipped == {p.relative_to(ROOT / "configs") for p in (ROOT / "configs").rglob("*.yaml")}
    assert (installed / "bin" / "lme-harness").exists()


def test_the_wheel_ships_the_memory_contract_s_openapi_document(installed, tmp_path):
    """Package data beside the code: the reference server serves it from an install as from the checkout."""
    assert (installed / "harness" / "memory" / "contract.openapi.json").is_file()
    code = "from harness.memory.http import contract_schema; print(contract_schema()['info']['title'])"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(installed), capture_output=True, text=True, check=True
    ).stdout
    assert "memory-provider contract" in out


def test_an_installed_harness_runs_from_another_directory(installed, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _env(installed)
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import commands.cli, harness.config_files as c; print(commands.cli.__file__, c.CONFIG_DIR)",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [Path(p).is_relative_to(installed) for p in where] == [True, True], where  # not the checkout's
    with FakeOpenAIServer(responder) as srv:
        proc = subprocess.run(
            [
                sys.executable,
                str(installed / "bin" / "lme-harness"),
                "run",
                "hydra.run.dir=run",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                "cache.path=cache.sqlite",
                "run.progress=false",
                "dataset.limit=1",
            ],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    recs = [json.loads(line) for line in (elsewhere / "run" / "records.jsonl").read_text().splitlines()]
    assert sorted(r["mode"] for r in recs) == sorted(MODES) and all(r["status"] == "ok" for r in recs)
    assert (elsewhere / "run" / "report.md").exists()
