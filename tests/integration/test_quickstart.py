"""The main job (`make bench` = `+experiment=quickstart`): sized by prompt tokens, and the published protocol untouched."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from commands.cli import CONFIG_DIR
from harness.data.longmemeval import history_chars
from tests.support.paths import REPO


def _cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _target(name: str) -> str:
    return REPO.joinpath("Makefile").read_text().split(f"\n{name}:", 1)[1].split("\n\n", 1)[0]


def test_make_bench_runs_the_quickstart_experiment_after_a_setup_without_compile_or_torch():
    bench = _target("bench")
    assert bench.startswith(" $(BENCH_STAMP)") and "lme-harness run +experiment=quickstart $(ARGS)" in bench
    setup = _target("$(BENCH_STAMP)")
    assert "'.[xllama]'" in setup  # the prebuilt runtime's extra, nothing else
    assert "llama_runtime.py build" not in setup and "torch" not in setup and "embed" not in setup


def test_quickstart_takes_the_shortest_histories(oracle_path):
    cfg = _cfg("+experiment=quickstart", f"dataset.path={oracle_path}")
    assert cfg.model.name == "qwen25_coder_15b" and cfg.run.name == "quickstart"
    assert list(cfg.mode) == ["long_context", "summary", "summary_ondemand"]
    assert instantiate(cfg.mode.summary_ondemand).first_tool_choice == "required"  # the search is shown at work
    assert cfg.judge._target_.endswith("TrpcJudge")
    assert cfg.model.runtime == "xllamacpp"  # no compile at setup
    assert cfg.retrieval.embedder is None and cfg.retrieval.config.default_mode == "keyword"  # no torch
    source = instantiate(cfg.dataset)
    picked, _ = source.load()
    assert len(picked) == 1
    source.limit = None
    everything, _ = source.load()
    others = [c for c in everything if c.question_id not in {p.question_id for p in picked}]
    assert max(map(history_chars, picked)) <= min(map(history_chars, others))
    assert [c.question_id for c in picked] != sorted(c.question_id for c in everything)[:1]  # not the first by id


def test_the_published_protocol_and_the_default_run_keep_their_selection():
    for overrides in (["+experiment=trpc_repro"], []):
        cfg = _cfg(*overrides)
        assert cfg.dataset.shortest is None and cfg.dataset.sample_seed is None
    default = _cfg()
    assert default.model.name == "qwen25_coder_15b"  # the default config (baselines, docs' larger runs) is unchanged
    assert default.retrieval.embedder
    assert default.model.runtime == "xllamacpp"  # issue 21: every embedded model defaults to the prebuilt runtime
