"""`rescore` with an embedded judge whose llama.cpp server dies mid-rescore: a stop (exit 4) within seconds, every
record kept, nothing recorded as a scoring failure it did not have, and the same command resumes.

The judge server is the stand-in process of tests/system/test_server_death.py (the same process lifecycle as llama.cpp's).
"""

from __future__ import annotations

import pytest

from commands.cli import EXIT_STOPPED, main
from harness.records import load_records
from tests.support.report_fixtures import rec, write_run
from tests.system.test_server_death import sigsegv_after_records, stand_in, stop_took_s, weights  # noqa: F401 (fixtures)

pytestmark = pytest.mark.process  # tests/README.md: every test here starts a process

N_PAIRS = 12


def test_a_judge_server_killed_mid_rescore_stops_within_seconds_then_the_same_command_resumes(
    tmp_path,
    weights,  # noqa: F811 (the imported fixture)
    stand_in,  # noqa: F811
    capsys,
):
    servers = stand_in("ok")
    src = write_run(
        tmp_path / "src", [rec(f"q{i}", "summary", prediction=f"You went to city {i}.") for i in range(N_PAIRS)]
    )
    out = tmp_path / "rescored"
    args = [
        "rescore",
        str(src),
        f"hydra.run.dir={out}",
        "model=smollm2_135m",
        *[f"model.{k}={v}" for k, v in weights.items()],
        "judge=longmemeval",
        "cache.enabled=false",
        "run.progress=false",
        "run.concurrency=1",
        "client.max_retries=0",
    ]
    records = out / "records.jsonl"
    killer, killed = sigsegv_after_records(records, 2, servers)
    code = main(args)
    killer.join(5)
    assert "at" in killed, "the rescore ended before two records were written"
    err = capsys.readouterr().err
    assert code == EXIT_STOPPED, err[-3000:]
    assert stop_took_s(out, killed) < 5.0  # the stop itself, not the partial report built after it
    assert "SIGSEGV" in err and "run the same command again" in err
    after = records.read_bytes()
    assert after.startswith(killed["before"])  # every record written before the kill is kept
    recs = load_records(records)
    assert all(r["status"] == "ok" for r in recs)  # no pair turned "scoring_failed" by the dead server
    assert 2 <= len(recs) < N_PAIRS
    assert "SIGSEGV" in (out / "FAILED.txt").read_text()

    # The same command with a healthy judge server: scores only what is missing, completes.
    assert main(args) == 0
    final = load_records(records)
    assert sorted(r["question_id"] for r in final) == sorted(f"q{i}" for i in range(N_PAIRS))
    assert records.read_bytes().startswith(after)
    assert all(r["status"] == "ok" and r["rescored_from"] == str(src) for r in final)
    assert not (out / "FAILED.txt").exists()
