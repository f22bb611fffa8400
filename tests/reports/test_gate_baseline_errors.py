"""Malformed gate baselines (issue #11): one clear error naming the file, exit 2 from `lme-harness gate` (never a pass)."""

from __future__ import annotations

import pytest
import yaml

from commands.cli import main
from reports.gate import GateError, load_baseline
from tests.support.report_fixtures import standard_run

GOOD = {"mode": "summary", "metric": "em", "baseline": 0.0, "abs": 0.0}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return standard_run(tmp_path_factory.mktemp("gate") / "run")


@pytest.mark.parametrize(
    "content, msg",
    [
        (yaml.safe_dump([GOOD]), "must be a mapping with a 'checks' list, not a list"),
        (b"checks:\n  - {mode: summary, metric: em, baseline: 0.0, abs: 0.0}  # caf\xe9\n", "not UTF-8 text"),
        (yaml.safe_dump({"checks": [{**GOOD, "baseline": float("nan")}]}), r"baseline: nan is not a finite number"),
        (
            "checks:\n  - {mode: summary, metric: em, baseline: .inf, abs: 0.0}\n",
            "baseline: inf is not a finite number",
        ),
        ("checks:\n  - {mode: summary, metric: em, baseline: 0.5, abs: .nan}\n", "abs: nan is not a finite number"),
        (
            yaml.safe_dump({"checks": [{**GOOD, "higher_is_better": "false"}]}),
            "higher_is_better: must be true or false",
        ),
        (yaml.safe_dump({"checks": [{**GOOD, "baseline": True}]}), "baseline: True is not a number"),
        (yaml.safe_dump({"checks": [GOOD], "chekcs": []}), r"unknown top-level keys \['chekcs'\]"),
        (yaml.safe_dump({"checks": [{**GOOD, "metric": "emm"}]}), r"check summary/emm: unknown metric"),
        (yaml.safe_dump({"checks": [{**GOOD, "mode": 3}]}), "'mode' and 'metric' must be non-empty strings"),
        (yaml.safe_dump({"checks": [{"metric": "em", "baseline": 1}]}), "needs 'mode' and 'metric'"),
        (
            yaml.safe_dump({"checks": [{"mode": "summary", "metric": "em", "exact": True, "max": 1}]}),
            "'exact' needs a 'baseline'",
        ),
        (yaml.safe_dump({"checks": [GOOD, GOOD]}), "a second check of the same metric"),
        (
            yaml.safe_dump({"checks": [{"mode": "summary", "metric": "failed", "min": 2, "max": 0}]}),
            "min 2.0 > max 0.0",
        ),
        (yaml.safe_dump({"policy": "lenient", "checks": [GOOD]}), "policy 'lenient' is not one of"),
        ("", "must be a mapping"),
    ],
)
def test_malformed_baseline_is_one_error_naming_the_file(tmp_path, run, capsys, content, msg):
    base = tmp_path / "bad.yaml"
    (base.write_bytes if isinstance(content, bytes) else base.write_text)(content)
    with pytest.raises(GateError, match=msg) as e:
        load_baseline(base)
    assert str(base) in str(e.value)
    capsys.readouterr()
    assert main(["gate", str(run), "--baseline", str(base)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lme-harness: error: ") and str(base) in err[0]


def test_exact_checks_fail_on_any_change_in_either_direction():
    from reports.gate import Check, evaluate

    c = Check("long_context", "final_prompt_tokens", baseline=3323.5, exact=True)
    assert evaluate(c, 3323.5).status == "pass"
    assert evaluate(c, 3323.0).status == "FAIL" and evaluate(c, 3324.0).status == "FAIL"  # fewer tokens too
    assert "changed from 3323.5" in evaluate(c, 3000).reason
