"""`lme-harness compare` names each run by the fewest config entries that tell the runs apart (reports/compare.py)."""

import random
from pathlib import Path

import pytest

from harness.run_meta import RunMeta
from reports.compare import _labels
from tests.support.report_fixtures import set_dotted


def _meta(config: dict) -> RunMeta:
    return RunMeta.of({"config": config})


def test_a_name_repeated_under_the_contestant_is_left_out_of_the_label() -> None:
    names = ["bm25", "rag", None]
    metas = [_meta({"memory": {"name": n}, "mode": {"memory": {"provider": {"name": n}}}}) for n in names]
    labels = _labels([Path(f"runs/r{i}") for i in range(3)], metas)
    assert labels == ["memory.name=bm25", "memory.name=rag", "memory.name=null"]


def test_two_names_are_kept_when_each_is_needed() -> None:
    pairs = [("a", "x"), ("a", "y"), ("b", "x")]
    metas = [_meta({"prompt": {"name": p}, "judge": {"name": j}}) for p, j in pairs]
    assert _labels([Path(f"r{i}") for i in range(3)], metas) == [
        "judge.name=x,prompt.name=a",
        "judge.name=y,prompt.name=a",
        "judge.name=x,prompt.name=b",
    ]


def test_one_differing_name_is_the_whole_label() -> None:
    metas = [_meta({"prompt": {"name": n}, "run": {"name": "same"}}) for n in ("default", "state_recovery")]
    assert _labels([Path("a"), Path("b")], metas) == ["prompt.name=default", "prompt.name=state_recovery"]


def test_a_provider_config_without_a_name_is_labelled_by_its_target_class() -> None:
    configs = [
        {"memory": {"_target_": "harness.memory.builtin.IndexProvider", "name": "bm25"}},
        {"memory": {"_target_": "harness.memory.builtin.FullContextProvider"}},
        {"memory": {"name": None}},  # no target to fall back on: the null stays visible
    ]
    labels = _labels([Path(f"r{i}") for i in range(3)], [_meta(c) for c in configs])
    assert labels == ["memory.name=bm25", "memory._target_=FullContextProvider", "memory.name=null"]


def test_an_endpoint_a_key_variable_or_a_timeout_never_names_a_run() -> None:
    """Runs told apart only by where the model is served, its key variable or a provider's timeout are named by
    their directories; a result-bearing entry beside them still names them alone."""
    configs = [
        {"model": {"base_url": "https://llm-a.example.com/v1", "api_key_env": "KEY_A"}, "memory": {"timeout_s": 5}},
        {"model": {"base_url": "https://llm-b.example.com/v1", "api_key_env": "KEY_B"}, "memory": {"timeout_s": 9}},
    ]
    paths = [Path("runs/x/a"), Path("runs/x/b")]
    assert _labels(paths, [_meta(c) for c in configs]) == ["a", "b"]
    with_prompt = [{**c, "prompt": {"name": n}} for c, n in zip(configs, ("default", "terse"))]
    assert _labels(paths, [_meta(c) for c in with_prompt]) == ["prompt.name=default", "prompt.name=terse"]


# --- generated configs -------------------------------------------------------------------------------------------

# (key, values it may take): result-bearing entries, and entries that must never name a run.
NAMING = {
    "prompt.name": ["default", "terse", "fact_keeper"],
    "judge.name": ["llm", "none"],
    "retrieval.config.top_hits": [3, 5],
    "memory.turns_per_add": [2, 12],
}
NEVER = {
    "model.base_url": ["https://a.example.com/v1", "https://b.example.org/v1", "http://10.0.0.7:8000/v1"],
    "judge.endpoint.api_key_env": ["KEY_A", "KEY_B"],
    "memory.url": ["https://mem.example.com/v1", "https://mem2.example.com/v1"],
    "memory.timeout_s": [5, 30],
    "memory.concurrency": [1, 4],
}


def _nested(flat: dict[str, object]) -> dict:
    out: dict = {}
    for key, value in flat.items():
        set_dotted(out, key, value)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_generated_runs_are_labelled_apart_and_never_by_an_endpoint_a_key_variable_or_a_timeout(seed) -> None:
    rng = random.Random(seed)
    pool = {**NAMING, **NEVER}
    keys = rng.sample(sorted(pool), rng.randint(1, len(pool)))
    flats = []
    for _ in range(rng.randint(2, 5)):
        flats.append({k: rng.choice(pool[k]) for k in keys})
    paths = [Path(f"runs/sweep/job{i}") for i in range(len(flats))]
    labels = _labels(paths, [_meta(_nested(f)) for f in flats])
    assert len(set(labels)) == len(labels), labels  # every run told apart (by directory where nothing else may)
    for label in labels:
        assert not any(v in label for k in NEVER for v in NEVER[k] if isinstance(v, str)), label
        assert not any(f"{k}=" in label for k in NEVER), label
    # where result-bearing entries alone tell the runs apart, the label is made of them, not the directory
    told_apart = {tuple(f.get(k) for k in NAMING if k in keys) for f in flats}
    if len(told_apart) == len(flats):
        assert all("=" in label for label in labels), labels
