"""Provenance from the first second (issue 21 item 5): run.json exists before the first pair is answered and follows
the records (atomic rewrites), so a run killed with SIGKILL still says what code, data, model, settings and host
produced its records, and `lme-harness report` works on it. The host: CPU model, the flags that matter to the
embedded build, cores, and the embedded model's prefill / generation tokens/s (llama.cpp's own timings)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from commands.cli import main
from harness.llm.local_server import perf_summary
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from reports.render import build_report
from runners.provenance import host_info
from tests.support.paths import REPO
from tests.support.report_fixtures import meta, standard_run
from tests.support.tagged_run import answer
from tests.support.tagged_run import args as endpoint_args
from tests.support.tagged_run import dataset as tagged_dataset

CPUINFO = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 23
model		: 1
model name	: AMD EPYC 7551 32-Core Processor
flags		: fpu sse2 avx avx2 fma f16c bmi2 avx512f avx512_bf16 amx_tile sha_ni

processor	: 1
model name	: AMD EPYC 7551 32-Core Processor
flags		: fpu sse2 avx avx2 fma f16c
"""

LOG = """llama_perf_context_print:        load time =     100.00 ms
llama_perf_context_print: prompt eval time =    1000.00 ms /   100 tokens (   10.00 ms per token,   100.00 tokens per second)
llama_perf_context_print:        eval time =     500.00 ms /    10 runs   (   50.00 ms per token,    20.00 tokens per second)
llama_perf_context_print: prompt eval time =    3000.00 ms /   100 tokens (   30.00 ms per token,    33.33 tokens per second)
llama_perf_context_print:        eval time =     500.00 ms /    20 runs   (   25.00 ms per token,    40.00 tokens per second)
"""


def test_host_info_names_the_cpu_the_flags_of_the_embedded_build_and_the_cores():
    h = host_info(CPUINFO)
    assert h.cpu_model == "AMD EPYC 7551 32-Core Processor" and h.cpu_id == "family 23 model 1"
    assert h.cpu_flags == ["amx_tile", "avx2", "avx512_bf16", "avx512f", "f16c", "fma"]  # not sse2, avx, sha_ni
    assert h.cores == os.cpu_count() and h.cores_usable == len(os.sched_getaffinity(0))


def test_model_speed_sums_llama_cpp_timings_over_the_calls():
    p = perf_summary(LOG)
    assert p["prefill_tokens_per_s"] == 50.0  # 200 tokens in 4 s, not the mean of the two rates
    assert p["generation_tokens_per_s"] == 30.0  # 30 tokens in 1 s
    assert (p["prefill_tokens"], p["generated_tokens"]) == (200, 30)
    assert perf_summary("")["prefill_tokens_per_s"] is None


def test_the_report_header_shows_the_host_the_model_speed_and_an_unfinished_state(tmp_path):
    m = meta()
    m["host"] = {**host_info(CPUINFO).to_json(), "model_speed": {"qwen": perf_summary(LOG)}}
    m["state"], m["updated"] = "interrupted", "2026-12-01T10:00:00+00:00"
    run = standard_run(tmp_path / "run")
    (run / "run.json").write_text(json.dumps(m))
    paths = build_report(run)
    md, html = paths["markdown"].read_text(), paths["html"].read_text()
    for text in (md, html):
        assert "AMD EPYC 7551 32-Core Processor (family 23 model 1)" in text
        assert "avx2 avx512_bf16 avx512f f16c fma" in text
        assert "qwen: prefill 50.0 tokens/s, generation 30.0 tokens/s" in text
        assert "interrupted" in text and "the records are partial" in text


@pytest.mark.process
def test_run_json_exists_before_the_first_answer_and_a_killed_run_still_reports(tmp_path):
    data = tagged_dataset(tmp_path)
    model = FakeModel(answer=answer)
    release = threading.Event()

    def responder(req):
        release.wait(300)  # the first calls wait until the test has read run.json
        r = model(req)
        return Reply(r.status, r.body, r.headers, 0.2)

    run_dir = tmp_path / "run"
    records = run_dir / "records.jsonl"
    with FakeOpenAIServer(responder) as srv:
        args = endpoint_args(tmp_path, srv.base_url, data, "run")
        err = tmp_path / "stderr.txt"
        with open(err, "wb") as f:
            proc = subprocess.Popen(
                [sys.executable, "-m", "commands.cli", *args],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=f,
            )
        try:
            deadline = time.monotonic() + 240
            while not [q for q in srv.requests if q["_path"].endswith("/chat/completions")]:
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
                time.sleep(0.05)
            first = json.loads((run_dir / "run.json").read_text())  # a pair in flight, none answered
            assert not records.exists() or not records.read_bytes()
            release.set()
            while True:  # run.json follows the records
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
                n = records.read_bytes().count(b"\n") if records.exists() else 0
                live = json.loads((run_dir / "run.json").read_text())
                if n >= 2 and live["invocations"][-1]["pairs_run"] >= 2:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
        finally:
            release.set()
            proc.kill()
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    for m in (first, live):
        assert m["state"] == "running" and m["git"]["sha"] and m["dataset"]["sha256"]
        assert m["model"]["name"] == "endpoint" and m["config"]["run"]["concurrency"] == 1
        assert m["host"]["cpu_model"] and m["host"]["cores"] and "metrics" in m
    assert first["invocations"][-1]["pairs_run"] == 0

    assert main(["report", str(run_dir)]) == 0  # the report of a killed run
    md = (run_dir / "report.md").read_text()
    assert "model: endpoint (" in md and f"git: `{live['git']['sha']}`" in md
    assert "- host: " in md and "run state: running" in md
