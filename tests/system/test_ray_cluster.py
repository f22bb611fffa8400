"""Runs on a Ray cluster (hydra/launcher=ray_cluster) with the shared PostgreSQL store: a local Ray head on
127.0.0.1, a 3-job sweep and a 2-shard run against the fake endpoint; their records equal the serial runs'.

Needs the `ray` extra (ray, hydra-ray-launcher) and PostgreSQL with pgvector (the `pg_server` fixture).
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commands.cli import main
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from harness.testing.pg_server import free_port
from runners import store_backend as stores
from tests.support.paths import REPO
from tests.support.tagged_run import MODES, N_CASES, answer, args, dataset, stable_records

pytestmark = [pytest.mark.postgres, pytest.mark.ray]


def _ray_bin() -> str | None:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else shutil.which("ray")


@pytest.fixture(scope="module")
def ray_head():
    """`ray start --head` on 127.0.0.1 (workers import this checkout through PYTHONPATH); stopped at the end."""
    ray = _ray_bin()
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None or ray is None:
        why = "ray / hydra-ray-launcher not installed: pip install -e '.[ray]'"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("LME_REQUIRE_RAY") == "1":
            pytest.fail(f"CI needs them: {why}")
        pytest.skip(why)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    subprocess.run(
        [
            ray,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, timeout=120)


def test_ray_sweep_and_shards_with_the_postgres_store_equal_the_serial_runs(tmp_path, pg_server, ray_head):
    dsn = pg_server.create_database("ray_cluster")
    data = dataset(tmp_path)
    sweep = "generation.max_tokens=100,200,300"
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        # without run / hydra.run.dir; job directories named by job number (the override names are too long here)
        base = args(tmp_path, srv.base_url, data, "unused")[2:] + ["judge=none", "hydra.sweep.subdir=${hydra.job.num}"]
        assert main(["run", "-m", f"hydra.sweep.dir={tmp_path / 'serial'}", *base, sweep]) == 0
        ray = [
            "hydra/launcher=ray_cluster",
            f"hydra.launcher.ray.init.address={ray_head}",
            "store=postgres",
            f"store.dsn={dsn}",
            "cache.enabled=true",
        ]
        assert main(["run", "-m", f"hydra.sweep.dir={tmp_path / 'ray'}", *base, *ray, sweep]) == 0
        assert (
            main(
                [
                    "run",
                    "-m",
                    f"hydra.sweep.dir={tmp_path / 'shards'}",
                    *base,
                    *ray,
                    "generation.max_tokens=100",
                    "dataset.shard=0/2,1/2",
                ]
            )
            == 0
        )
    for job in ("0", "1", "2"):  # generation.max_tokens=100, 200, 300
        serial = stable_records(tmp_path / "serial" / job)
        assert len(serial) == N_CASES * len(MODES)
        assert stable_records(tmp_path / "ray" / job) == serial
    shards = [tmp_path / "shards" / job for job in ("0", "1")]  # dataset.shard=0/2, 1/2
    assert set(stable_records(shards[0])).isdisjoint(stable_records(shards[1]))
    assert main(["merge", str(tmp_path / "merged"), *map(str, shards)]) == 0
    assert stable_records(tmp_path / "merged") == stable_records(tmp_path / "serial" / "0")
    stores.release()
