"""Every command block of README.md runs, in order, in one shell (so a variable one recipe sets serves the next), as a
newcomer would paste them: against the loopback fake endpoint where a model is needed, one case per run, and only
composed where the run would be too long (`make bench`): tests/support/readme_shim.py. A recipe that goes stale (a renamed
setting, a removed option, a path that no longer exists) fails here."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.paths import REPO

README = REPO / "README.md"
ENDPOINT_IN_README = "https://llm.example.com/v1"
PORT_IN_README = "8765"

# `python` is this interpreter through PATH (not a function: a server started with `&` must be the job itself, so
# that the trap ends it and the test is not left waiting on its output).
PREAMBLE = """set -euo pipefail
lme-harness() { "$LME_README_PY" -m tests.support.readme_shim lme-harness "$@"; }
make() { "$LME_README_PY" -m tests.support.readme_shim make "$@"; }
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
"""


def blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_readme_has_the_two_commands_and_four_recipes():
    text = README.read_text()
    first = blocks(text)[0]
    assert re.search(r"^make bench\b", first, re.M) and re.search(r"^make test\b", first, re.M)
    for recipe in ("(a)", "(b)", "(c)", "(d)"):
        assert re.search(rf"^### {re.escape(recipe)} ", text, re.M), recipe
    assert len(text.split()) <= 1200, "the README is the short path in; detail belongs in docs/"


@pytest.mark.process
def test_every_readme_command_block_runs(tmp_path):
    port = _free_port()
    with FakeOpenAIServer(FakeModel()) as srv:
        script = PREAMBLE
        for block in blocks(README.read_text()):
            block = block.replace(ENDPOINT_IN_README, srv.base_url).replace(PORT_IN_README, str(port))
            if re.search(r"--port \d+ &", block):  # a server the next lines use: wait until it listens
                block = re.sub(
                    r"(--port \d+ &)\n",
                    rf"\1\nfor i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.2; done\n",
                    block,
                )
            script += f"\necho '### block'\n{block}"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # exec: the job is python
        (bin_dir / "python").chmod(0o755)
        (tmp_path / "readme.sh").write_text(script)
        env = {
            **os.environ,
            "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
            "LME_README_PY": sys.executable,
            "LME_README_FAKE_URL": srv.base_url,
            "LME_README_CACHE": str(tmp_path / "cache.sqlite"),
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        r = subprocess.run(
            ["bash", str(tmp_path / "readme.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200
        )
    assert r.returncode == 0, f"README command failed (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    # each recipe left what it promises
    assert list(tmp_path.glob("runs/mine/*/report.md"))
    assert (tmp_path / "runs/prompts/multirun/compare/compare.md").exists()
    assert (tmp_path / "my_gate.yaml").exists()
    assert "PASS isolation" in r.stdout and "FAIL" not in r.stdout  # the reference service keeps the contract
    assert list(tmp_path.glob("runs/memsys/**/compare.md"))
