"""`lme-harness compare` (paired statistics between runs, sweeps included) and `lme-harness gate` (baseline checks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, completion
from reports.compare import compare_runs, expand_run_dirs, load_runs
from reports.gate import Check, GateError, evaluate, load_baseline
from tests.support.fake_run import fake_endpoint_args
from tests.support.paths import REPO
from tests.support.report_fixtures import meta, standard_run, write_run

# --- compare ---------------------------------------------------------------------------------------------------


def two_prompt_runs(tmp_path: Path) -> tuple[Path, Path]:
    a = standard_run(tmp_path / "sweep" / "prompt=trpc_default", ondemand_em=(0, 0, 0, 1), prompt="trpc_default")
    b = standard_run(
        tmp_path / "sweep" / "prompt=state_recovery",
        ondemand_em=(1, 1, 1, 1),
        summary_tokens=300,
        prompt="state_recovery",
    )
    return a, b


def test_compare_prints_the_paired_table(tmp_path, capsys):
    a, b = two_prompt_runs(tmp_path)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "B = `prompt.name=state_recovery` vs A = `prompt.name=trpc_default`" in out
    assert '`prompt.name`: "trpc_default" → "state_recovery"' in out
    line = next(l for l in out.splitlines() if l.startswith("| summary_ondemand | EM ↑"))
    # 3 cases flip from wrong to right: delta +0.75, 3 wins / 1 tie, McNemar b=0 c=3, p = 2/8
    assert "| 4 | 0.2500 | 1.0000 | +0.7500 [" in line and "| 3/1/0 | 0/3, p=0.25; agree 25%, κ=0.00 |" in line
    tokens = next(l for l in out.splitlines() if l.startswith("| summary | prompt tokens ↓"))
    assert "-100 [-100, -100] ▲" in tokens and "| 4/0/0 |" in tokens  # fewer tokens: a win, CI excludes 0
    for name in (
        "compare.md",
        "compare.html",
        "compare.json",
        "pair1_deltas.png",
        "pair1_deltas.svg",
        "pair1_win_loss_tie.png",
        "pair1_win_loss_tie.svg",
    ):
        assert (tmp_path / "cmp" / name).exists(), name
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())[0]["rows"]
    em = next(r for r in rows if r["group"] == "summary_ondemand" and r["metric"] == "em")
    assert (em["mcnemar_b"], em["mcnemar_c"], em["p_value"]) == (0, 3, 0.25)


def test_compare_accepts_a_sweep_directory_and_shell_globs(tmp_path, capsys):
    a, b = two_prompt_runs(tmp_path)
    sweep = a.parent
    (sweep / "multirun.yaml").write_text("hydra: {}\n")  # what Hydra leaves next to the runs
    paths, notes = expand_run_dirs([sweep])
    assert [p.name for p in paths] == ["prompt=state_recovery", "prompt=trpc_default"]
    paths, notes = expand_run_dirs(sorted(sweep.iterdir()))  # `compare runs/x/multirun/*`
    assert len(paths) == 2 and any("multirun.yaml" in n for n in notes)
    assert main(["compare", str(sweep)]) == 0
    assert (sweep / "compare" / "compare.md").exists()
    assert "B = `prompt.name=trpc_default` vs A = `prompt.name=state_recovery`" in capsys.readouterr().out


def test_compare_three_runs_uses_the_first_as_baseline(tmp_path):
    a, b = two_prompt_runs(tmp_path)
    c = standard_run(tmp_path / "sweep" / "prompt=fact_keeper", prompt="fact_keeper")
    pairs = compare_runs(load_runs([a, b, c]))
    assert [(p.a.label, p.b.label) for p in pairs] == [
        ("prompt.name=trpc_default", "prompt.name=state_recovery"),
        ("prompt.name=trpc_default", "prompt.name=fact_keeper"),
    ]


def test_compare_pairs_only_cases_scored_in_both_and_warns(tmp_path):
    a, b = two_prompt_runs(tmp_path)
    lines = (b / "records.jsonl").read_text().splitlines()
    (b / "records.jsonl").write_text("\n".join(lines[:-3]) + "\n")  # B lacks q4
    (b / "run.json").write_text(json.dumps(meta(dataset_sha="e" * 64, prompt="state_recovery")))
    (p,) = compare_runs(load_runs([a, b]))
    assert set(p.stats["n"]) == {3}
    assert any("only in A" in w for w in p.warnings) and any("different datasets" in w for w in p.warnings)


def test_compare_input_errors(tmp_path, capsys):
    a, _ = two_prompt_runs(tmp_path)
    assert main(["compare", str(a)]) == 2
    assert "at least two runs" in capsys.readouterr().err
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2
    other = write_run(tmp_path / "other", [])
    (other / "records.jsonl").write_text("")
    assert main(["compare", str(a), str(other)]) == 2


# --- gate ------------------------------------------------------------------------------------------------------


def write_baseline(tmp_path: Path, run: Path) -> Path:
    path = tmp_path / "baseline.yaml"
    assert main(["gate", str(run), "--baseline", str(path), "--write-baseline"]) == 0
    return path


def edit(path: Path, mode: str, metric: str, **changes) -> None:
    doc = yaml.safe_load(path.read_text())
    hit = [c for c in doc["checks"] if c["mode"] == mode and c["metric"] == metric]
    assert hit, (mode, metric)
    hit[0].update(changes)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_gate_passes_on_its_own_baseline_and_writes_a_diff(tmp_path, capsys):
    run = standard_run(tmp_path / "run")
    base = write_baseline(tmp_path, run)
    doc = yaml.safe_load(base.read_text())
    metrics = {(c["mode"], c["metric"]) for c in doc["checks"]}
    assert {
        ("summary", "em"),
        ("summary", "final_prompt_tokens"),
        ("summary", "cost_total"),
        ("summary", "failed"),
        ("summary", "lme_acc"),
    } <= metrics
    assert doc["source"]["dataset_sha256"] == "d" * 64
    capsys.readouterr()
    assert main(["gate", str(run), "--baseline", str(base)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gate PASSED") and "✗" not in out
    assert (run / "gate.md").read_text().startswith("# Gate passed")


@pytest.mark.parametrize(
    "metric, stricter, looser",
    [
        ("em", {"baseline": 0.9, "abs": 0.0}, {"baseline": 0.5, "abs": 0.0}),  # higher is better
        ("final_prompt_tokens", {"baseline": 1000, "rel": 0.05}, {"baseline": 1100, "rel": 0.0}),  # lower is better
        ("cost_total", {"baseline": 1e-6, "rel": 0.0}, {"baseline": 1.0, "rel": 0.0}),  # lower is better
    ],
)
def test_gate_fails_when_the_baseline_is_stricter_and_passes_when_looser(tmp_path, capsys, metric, stricter, looser):
    run = standard_run(tmp_path / "run")  # summary_ondemand: em 0.75, final prompt tokens 1000
    mode = "summary_ondemand" if metric != "final_prompt_tokens" else "summary"  # summary: 400 tokens
    if metric == "final_prompt_tokens":
        stricter, looser = {"baseline": 300, "rel": 0.05}, {"baseline": 450, "rel": 0.0}
    base = write_baseline(tmp_path, run)
    edit(base, mode, metric, **stricter)
    capsys.readouterr()
    assert main(["gate", str(run), "--baseline", str(base)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("gate FAILED")
    fail_line = next(l for l in out.splitlines() if l.startswith("✗ FAIL"))
    assert mode in fail_line and metric in fail_line and ("dropped" in fail_line or "rose" in fail_line)
    edit(base, mode, metric, **looser)
    assert main(["gate", str(run), "--baseline", str(base)]) == 0
    assert "✓ better" in capsys.readouterr().out


def test_gate_tolerances_bounds_and_missing_metrics():
    hib, lob = Check("m", "em", baseline=0.8, abs=0.1), Check("m", "final_prompt_tokens", baseline=1000, rel=0.1)
    assert evaluate(hib, 0.7).status == "pass" and evaluate(hib, 0.69).status == "FAIL"
    assert evaluate(lob, 1100).status == "pass" and evaluate(lob, 1101).status == "FAIL"
    assert evaluate(lob, 900).status == "better"
    both = Check("m", "em", baseline=0.5, abs=0.01, rel=0.5)  # the larger allowance wins
    assert evaluate(both, 0.25).status == "pass"
    assert evaluate(Check("m", "failed", max=0), 1).status == "FAIL"
    assert evaluate(Check("m", "failed", max=0), 0).status == "pass"
    assert evaluate(Check("m", "em", min=0.5), 0.4).reason == "below min 0.5"
    assert evaluate(hib, None).reason == "metric missing in the run"
    # direction can be given for a metric the registry does not know
    assert evaluate(Check("m", "custom", baseline=1, higher_is_better=False), 2).status == "FAIL"


def test_gate_missing_metric_fails_and_bad_baselines_are_errors(tmp_path, capsys):
    run = standard_run(tmp_path / "run")
    base = tmp_path / "b.yaml"
    base.write_text(yaml.safe_dump({"checks": [{"mode": "summary", "metric": "llm_score", "baseline": 0.5}]}))
    assert main(["gate", str(run), "--baseline", str(base)]) == 1
    assert "metric missing in the run" in capsys.readouterr().out
    for doc, msg in [
        ({"checks": []}, "non-empty"),
        ({"checks": [{"mode": "x"}]}, "needs 'mode' and 'metric'"),
        ({"checks": [{"mode": "x", "metric": "em"}]}, "needs 'baseline'"),
        ({"checks": [{"mode": "x", "metric": "zzz", "baseline": 1}]}, "unknown metric direction"),
        ({"checks": [{"mode": "x", "metric": "em", "baseline": 1, "tol": 1}]}, "unknown keys"),
        ({"checks": [{"mode": "x", "metric": "em", "baseline": "high"}]}, "not a number"),
    ]:
        base.write_text(yaml.safe_dump(doc))
        with pytest.raises(GateError, match=msg):
            load_baseline(base)
        assert main(["gate", str(run), "--baseline", str(base)]) == 2
    assert main(["gate", str(run), "--baseline", str(tmp_path / "none.yaml")]) == 2


def test_committed_ci_baseline_is_valid():
    base = REPO / "baselines" / "ci_smollm2.yaml"
    raw, checks = load_baseline(base)
    assert raw["command"].startswith("lme-harness run") and "+experiment=ci_gate" in raw["command"]
    gate_run = yaml.safe_load((base.parents[1] / "configs" / "experiment" / "ci_gate.yaml").read_text())
    assert "override /model: smollm2_135m" in [f"{k}: {v}" for d in gate_run["defaults"] for k, v in d.items()]
    assert {c.metric for c in checks} >= {"failed", "em", "final_prompt_tokens"}


# --- end to end: a Hydra sweep over prompt variants on the loopback fake endpoint -------------------------------


def responder(req):
    text = json.dumps(req["messages"])
    if "Answer yes or no only" in text:
        return completion("yes" if "Paris" in text else "no", prompt_tokens=120, completion_tokens=1)
    if "Analyze the following conversation" in text or "hand-over notes" in text:  # the two summary prompts
        return completion("<summary>The user went to Paris.</summary>", prompt_tokens=300, completion_tokens=20)
    return completion("You went to Paris.", prompt_tokens=sum(len(json.dumps(m)) for m in req["messages"]) // 4)


@pytest.mark.e2e
def test_sweep_over_prompt_variants_then_compare_and_gate(tmp_path, capsys, monkeypatch):
    with FakeOpenAIServer(responder) as srv:
        code = main(
            [
                "run",
                "-m",
                "prompt=trpc_default,state_recovery",
                "mode=[summary]",
                "judge=longmemeval",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                "hydra.sweep.subdir=${hydra.job.num}",
                *fake_endpoint_args(srv.base_url, tmp_path),
            ]
        )
    assert code == 0
    sweep = tmp_path / "sweep"
    runs = sorted(
        (d for d in sweep.iterdir() if (d / "records.jsonl").exists()),
        key=lambda d: json.loads((d / "run.json").read_text())["config"]["prompt"]["name"],
    )
    assert len(runs) == 2 and all(len(load_records(d / "records.jsonl")) == 2 for d in runs)
    capsys.readouterr()
    assert main(["compare", str(sweep)]) == 0  # the whole sweep directory: job 0 is A
    out = capsys.readouterr().out
    assert "B = `prompt.name=state_recovery` vs A = `prompt.name=trpc_default`" in out
    assert "| summary | EM ↑ | 2 |" in out and "| summary | LongMemEval acc ↑ | 2 |" in out
    assert "| summary | summary gen tokens ↓ | 2 |" in out
    # gate: a run passes its own baseline, and fails once the baseline asks for fewer prompt tokens
    fake_prices = tmp_path / "prices.yaml"
    fake_prices.write_text(
        'date: "2026-01-01"\nmodels:\n  fake-model: {input: 0.15, cached_input: 0.075, output: 0.6}\n'
    )
    run = runs[1]
    base = tmp_path / "baseline.yaml"
    assert main(["gate", str(run), "--baseline", str(base), "--write-baseline", "--pricing", str(fake_prices)]) == 0
    assert main(["gate", str(run), "--baseline", str(base), "--pricing", str(fake_prices)]) == 0
    tokens = yaml.safe_load(base.read_text())
    chk = next(c for c in tokens["checks"] if c["metric"] == "final_prompt_tokens")
    chk["baseline"] = chk["baseline"] * 0.5
    base.write_text(yaml.safe_dump(tokens))
    assert main(["gate", str(run), "--baseline", str(base), "--pricing", str(fake_prices)]) == 1
