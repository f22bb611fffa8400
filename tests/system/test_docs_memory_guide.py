"""docs/memory-systems.md is what a memory vendor copies first: the Python provider it shows must keep the contract
(`lme-harness provider-check` passes it), and its commands must put that provider into a run, with the setting the
guide overrides. The code and commands are read from the guide itself, so the guide cannot go stale unnoticed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.fake_run import fake_endpoint_args

pytestmark = pytest.mark.process  # runs the guide's commands in bash and the CLI

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "memory-systems.md"
MODULE = "my_memory"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def _guide_commands() -> list[str]:
    """The shell block that follows the guide's Python provider: check it, configure it, run it."""
    (block,) = [b for b in _blocks("bash") if f"provider-check {MODULE}:" in b]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture
def vendor_dir(tmp_path, monkeypatch):
    """A folder holding the guide's provider module, importable and the working directory, as a vendor's would be."""
    (code,) = [b for b in _blocks("python") if "ProviderBase" in b]
    (tmp_path / f"{MODULE}.py").write_text(code)
    sys.modules.pop(MODULE, None)  # another test's module of the same name must not answer for this one
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop(MODULE, None)


def test_the_guides_python_provider_passes_provider_check(vendor_dir, capsys):
    (check,) = [c for c in _guide_commands() if c.startswith("lme-harness provider-check")]
    assert main(shlex.split(check)[1:]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "PASS isolation" in out and "PASS as_of" in out and "conforms" in out


def test_the_guides_commands_run_the_provider_with_the_setting_they_override(vendor_dir, tmp_path):
    commands = _guide_commands()
    (configure,) = [c for c in commands if c.startswith("mkdir")]
    subprocess.run(["bash", "-c", configure], cwd=vendor_dir, check=True)
    (run,) = [c for c in commands if c.startswith("lme-harness run")]
    argv = shlex.split(run)[1:]
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(FakeModel()) as srv:
        extra = [f"hydra.run.dir={run_dir}", *fake_endpoint_args(srv.base_url, tmp_path), "dataset.limit=1"]
        assert main([*argv, *extra, "judge=none"]) == 0
    (record,) = load_records(run_dir / "records.jsonl")
    assert record["status"] == "ok" and record["mode"] == "memory"
    assert record["ingest"]["trace"][0]["provider"] == "keyword-memory"
    overridden = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("memory.")}
    assert overridden, "the guide's run command overrides a setting of the provider"
    config = json.loads((run_dir / "run.json").read_text())["config"]["memory"]
    assert config["_target_"] == f"{MODULE}.KeywordMemory"
    assert all(str(config[k.split(".", 1)[1]]) == v for k, v in overridden.items())
