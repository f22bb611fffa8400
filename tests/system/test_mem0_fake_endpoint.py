"""mem0 offline stores memories from the command line (issue 37 item 12): the fake endpoint the project serves
(`python -m harness.testing.faults`, its `FakeModel`) answers mem0's extraction prompt in mem0's own format, so
`lme-harness run mode=memory memory=mem0` against it stores memories and records no unusable reply."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.records import load_records
from tests.support.fake_run import endpoint_args
from tests.support.paths import REPO

if importlib.util.find_spec("mem0") is None:
    if os.environ.get("LME_REQUIRE_MEM0") == "1":  # CI: a missing extra fails, never a silent skip
        raise ImportError("LME_REQUIRE_MEM0=1 but mem0ai is not installed (pip install -e '.[memory]')")
    pytest.skip("mem0ai not installed (pip install -e '.[memory]')", allow_module_level=True)

pytestmark = [pytest.mark.process, pytest.mark.mem0]
ROOT = REPO


def _serve_fake(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """The fake endpoint as a user starts it: `python -m harness.testing.faults --port-file F`."""
    port_file = tmp_path / "port"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.testing.faults", "--port-file", str(port_file)], cwd=ROOT, env=env
    )
    for _ in range(600):
        if port_file.exists():
            return proc, f"http://127.0.0.1:{port_file.read_text().strip()}/v1"
        if proc.poll() is not None:
            raise AssertionError(f"the fake endpoint exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the fake endpoint never wrote its port")


def test_mem0_on_the_cli_s_fake_endpoint_stores_memories_with_no_unusable_reply(tmp_path: Path) -> None:
    from commands.cli import main

    proc, base_url = _serve_fake(tmp_path)
    try:
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "mode=memory",
                "memory=mem0",
                "memory.embedder={_target_:harness.retrieval.embedders.HashingEmbedder,dim:64}",
                "dataset=oracle",
                "dataset.limit=1",
                *endpoint_args(base_url, tmp_path),
            ]
        )
    finally:
        proc.terminate()
        proc.wait(10)
    assert rc == 0
    (rec,) = load_records(tmp_path / "run" / "records.jsonl")
    assert rec["status"] == "ok", rec.get("error")
    trace = rec["ingest"]["trace"][0]
    assert trace["usage"]["llm_calls"] >= 1 and trace["usage"]["unusable_replies"] == 0, json.dumps(trace)
    assert trace["stored"]["items"] > 0, json.dumps(trace)
