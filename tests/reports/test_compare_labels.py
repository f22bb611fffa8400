"""`lme-harness compare` names each run by the fewest config entries that tell the runs apart (reports/compare.py)."""

from pathlib import Path

from harness.run_meta import RunMeta
from reports.compare import _labels


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
