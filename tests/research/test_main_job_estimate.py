"""research/main_job_estimate.py counts each model call once and takes KV-cache reuse from the server log."""

from __future__ import annotations

import json

from research.main_job_estimate import main, tally


def _call(purpose: str, prompt: int, completion: int, latency: float, cached: bool = False) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": None}
    return {"purpose": purpose, "usage": usage, "latency_s": latency, "cached": cached, "content": "x"}


def _write_run(tmp_path):
    summary_call = _call("summary", 1000, 200, 9.0)
    records = [
        {"mode": "summary", "status": "ok", "calls": [_call("answer", 300, 20, 2.0)],
         "summary": {"reused": False, "calls": [summary_call]},
         "metric_details": {"TrpcJudge": {"usage": _call("judge", 250, 30, 1.5)}}},
        {"mode": "summary_ondemand", "status": "ok",
         "calls": [_call("answer", 700, 25, 4.0), _call("answer", 1100, 15, 3.0), _call("answer", 50, 5, 0.0, True)],
         "summary": {"reused": True, "calls": [summary_call]},
         "metric_details": {"TrpcJudge": {"usage": None}}},
        {"mode": "long_context", "status": "failed", "calls": [_call("answer", 5000, 1, 1.0)]},
    ]  # fmt: skip
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "llama-server-m.log").write_text(
        "Llama.generate: 690 prefix-match hit, remaining 410 prompt tokens to eval\nother line\n"
    )


def test_tally_counts_every_call_once_and_subtracts_the_reused_prefix(tmp_path):
    _write_run(tmp_path)
    t = tally(tmp_path)
    assert t["calls"] == 5  # 3 answers, 1 summary (not its reused copy), 1 judge; no cache hit, no failed record
    assert t["by_purpose"]["summary"]["calls"] == 1 and t["by_purpose"]["judge"]["prompt"] == 250
    assert t["prompt_tokens"] == 300 + 1000 + 250 + 700 + 1100
    assert t["prompt_tokens_from_kv_cache"] == 690
    assert t["prompt_tokens_evaluated"] == 3350 - 690
    assert t["completion_tokens"] == 20 + 200 + 30 + 25 + 15


def test_estimate_scales_the_reference_speeds_by_the_ratio(tmp_path, capsys):
    _write_run(tmp_path)
    main([str(tmp_path), "--pp", "10", "--tg", "5", "--pp-ratio", "2", "--tg-ratio", "2"])
    est = json.loads(capsys.readouterr().out)["estimate"]
    assert est["prefill_s"] == round(2660 / 20, 1) and est["generation_s"] == round(290 / 10, 1)
    assert est["without_kv_reuse_s"] == round(3350 / 20 + 290 / 10, 1)
