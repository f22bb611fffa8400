"""A memory contestant run at a result-bearing setting of its own other than its shipped config file's is named with
it, in a run's report and in `compare` (`mem0 (turns_per_add=12)`), said once; at its file's settings its name is
unchanged; a provider's `_target_` is named by the file it was selected by or by its class, never by a dotted path;
and a key, an endpoint, an id, a path, a timeout or a concurrency never appears (reports/provider_config.py,
reports/standings.py)."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from commands.compare_runs import compare_main
from harness.memory.settings import PROVIDER_SETTINGS, provider_setting
from harness.settings import group_file, group_options
from reports.config_keys import flatten
from reports.provider_config import ProviderConfig, changed_settings, option_of, provider_config
from reports.render import build_report
from runners.setting_rules import ENDPOINT_KEYS, SECRET_KEYS
from tests.reports.test_cost_views import MEM0_INGEST, memory_rec
from tests.support.report_fixtures import meta, set_dotted, write_run

EMBEDDER = {"_target_": "harness.retrieval.embedders.StaticEmbedder", "name": "potion-base-8M"}


def _node(option: str, **changes: Any) -> dict[str, Any]:
    """configs/memory/<option>.yaml as a run composes it: its interpolations resolved, `changes` set (dotted keys)."""
    node = group_file("memory", option)
    for key, value in node.items():
        if isinstance(value, str) and "${" in value:
            node[key] = copy.deepcopy(EMBEDDER) if key == "embedder" else {"name": "default"}
    for key, value in changes.items():
        set_dotted(node, key, value)
    return node


def _config(option: str, *, top_k: int = 10, **changes: Any) -> dict[str, Any]:
    """A composed config as run.json holds it: the provider's node under `memory` and, resolved, under the
    contestant (`mode.memory.provider`)."""
    node = _node(option, **changes)
    return {
        "model": {"model": "gpt-4o-mini", "kind": "remote"},
        "judge": {"_target_": "harness.scoring.judges.LongMemEvalJudge"},
        "retrieval": {"embedder": copy.deepcopy(EMBEDDER)},
        "mode": {
            "memory": {
                "_target_": "harness.memory.contestant.ProviderContestant",
                "provider": copy.deepcopy(node),
                "top_k": top_k,
                "context_tokens": 4000,
                "native_answer": False,
            }
        },
        "memory": node,
    }


def _run(run_dir: Path, provider: str, config: dict[str, Any], right=(1, 0, 1, 0), **kw: Any) -> Path:
    recs = [memory_rec(f"q{i}", "memory", provider, lme=float(v), **kw) for i, v in enumerate(right)]
    m = meta()
    m["config"] = config
    return write_run(run_dir, recs, m)


def _mem0(run_dir: Path, **changes: Any) -> Path:
    return _run(
        run_dir,
        "mem0",
        _config("mem0", **changes),
        ingest_usage=MEM0_INGEST,
        spend={"llm": "answer_model"},
    )


def _table_names(md: str) -> list[str]:
    """The contestant column of the ranked table in a report.md or compare.md."""
    section = md[md.index("Contestants: quality, cost and latency") :].split("\n## ")[0].split("\n### ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| rank")]
    return [line.strip("|").split("|")[1].strip() for line in rows]


def _compare(tmp_path: Path, runs: list[Path]) -> tuple[list[str], str]:
    out = tmp_path / "cmp"
    assert compare_main([str(p) for p in runs], out=str(out)) == 0
    md = (out / "compare.md").read_text()
    return _table_names(md), md


# --- a run's report -----------------------------------------------------------------------------------------------


def test_a_report_names_mem0_with_its_batching_when_it_is_not_its_files(tmp_path):
    md = build_report(_mem0(tmp_path / "r", turns_per_add=12))["markdown"].read_text()
    assert _table_names(md) == ["mem0 (turns_per_add=12)"]


def test_a_report_names_mem0_as_before_at_its_files_settings(tmp_path):
    md = build_report(_mem0(tmp_path / "r"))["markdown"].read_text()
    assert _table_names(md) == ["mem0"]


def test_every_changed_result_bearing_setting_is_named_once_and_sorted(tmp_path):
    run = _mem0(tmp_path / "r", turns_per_add=12, threshold=0.3, **{"generation.max_tokens": 512})
    md = build_report(run)["markdown"].read_text()
    assert _table_names(md) == ["mem0 (generation.max_tokens=512, threshold=0.3, turns_per_add=12)"]


# --- compare --------------------------------------------------------------------------------------------------------


def test_compare_names_mem0_with_its_setting_beside_mem0_at_its_files(tmp_path):
    runs = [
        _mem0(tmp_path / "runs" / "a"),
        _mem0(tmp_path / "runs" / "b", turns_per_add=12),
        _run(tmp_path / "runs" / "c", "bm25", _config("bm25")),
    ]
    names, md = _compare(tmp_path, runs)
    assert sorted(names) == ["bm25", "mem0", "mem0 (turns_per_add=12)"]
    assert "memory.turns_per_add" not in "\n".join(names)  # told apart by the setting itself, not a config diff
    # the paired sections name the runs the same way
    assert "## B = `mem0 (turns_per_add=12)` vs A = `mem0`" in md and "## B = `bm25` vs A = `mem0`" in md


def test_two_runs_differing_only_in_a_provider_setting_are_told_apart_once(tmp_path):
    runs = [_mem0(tmp_path / "runs" / "a", turns_per_add=4), _mem0(tmp_path / "runs" / "b", turns_per_add=12)]
    names, _ = _compare(tmp_path, runs)
    assert sorted(names) == ["mem0 (turns_per_add=12)", "mem0 (turns_per_add=4)"]
    assert all(n.count("turns_per_add") == 1 for n in names)


def test_a_shared_setting_is_said_once_before_what_tells_the_runs_apart(tmp_path):
    runs = [
        _mem0(tmp_path / "runs" / "a", turns_per_add=12),
        _run(
            tmp_path / "runs" / "b",
            "mem0",
            _config("mem0", top_k=20, turns_per_add=12),
            variant="settings",
            top_k=20,
        ),
    ]
    names, _ = _compare(tmp_path, runs)
    assert sorted(names) == ["mem0 (turns_per_add=12, memory.top_k=10)", "mem0 (turns_per_add=12, memory.top_k=20)"]
    assert all(n.count("turns_per_add") == 1 for n in names)


def test_two_full_contexts_are_told_apart_by_the_provider_config_each_was_selected_by(tmp_path):
    """The built-in full_context and the reference HTTP service serving it, both `full_context` by their own account
    (docs/measurements/memory_compare_six_types.md): named by `memory=<file>`, never by a dotted class path."""
    runs = [
        _run(tmp_path / "runs" / "a", "full_context", _config("full_context")),
        _run(
            tmp_path / "runs" / "b",
            "full_context",
            _config("http", url="http://127.0.0.1:8765/v1"),
            spend={"remote": True},
        ),
    ]
    names, _ = _compare(tmp_path, runs)
    assert sorted(names) == ["full_context (memory=full_context)", "full_context (memory=http)"]


def test_a_target_no_shipped_file_has_is_named_by_its_class_alone(tmp_path):
    mine = {"_target_": "my_company.memory.providers.GraphProvider", "depth": 3}
    config = _config("full_context")
    config["memory"] = config["mode"]["memory"]["provider"] = mine
    runs = [
        _run(tmp_path / "runs" / "a", "full_context", _config("full_context")),
        _run(tmp_path / "runs" / "b", "full_context", config),
    ]
    names, _ = _compare(tmp_path, runs)
    assert sorted(names) == ["full_context (memory._target_=GraphProvider)", "full_context (memory=full_context)"]
    assert not any("my_company" in n or "harness." in n for n in names)


def test_the_runs_hydra_choice_names_the_file_where_the_config_alone_cannot(tmp_path):
    """`memory=summary memory.name=mine memory.search=true`: two shipped files have the SummaryProvider target and
    neither is named `mine`; the run's snapshot (.hydra/hydra.yaml) says which file it was."""
    config = _config("summary", name="mine", search=True)
    run = _run(tmp_path / "r", "mine", config)
    assert provider_config(config, "memory", run) is not None
    assert provider_config(config, "memory", run).option is None  # no snapshot: not known, nothing claimed
    assert _table_names(build_report(run)["markdown"].read_text()) == ["mine"]
    (run / ".hydra").mkdir()
    (run / ".hydra" / "hydra.yaml").write_text(
        "hydra:\n  runtime:\n    choices:\n      memory: summary\n      mode: memory\n"
    )
    assert provider_config(config, "memory", run).option == "summary"
    assert _table_names(build_report(run)["markdown"].read_text()) == ["mine (search=true)"]
    # a choice whose file has another target is not believed: the config's own target decides
    (run / ".hydra" / "hydra.yaml").write_text("hydra:\n  runtime:\n    choices:\n      memory: mem0\n")
    assert provider_config(config, "memory", run).option is None


# --- what is never named --------------------------------------------------------------------------------------------


# What a provider's own qualifier never shows: where a service is served, its key variable, a timeout, retries,
# concurrency, a scope prefix (by their declarations or values), a masked secret, and keys that declare no setting
# (an id, where a store lives).
SECRET_LIKE = {
    "http": {"url": "http://10.1.2.3:9000/v1", "timeout_s": 77, "api_key_env": "ACME_TOKEN"},
    "mem0_platform": {
        "api_key_env": "OTHER_MEM0_KEY",
        "base_url": "https://eu.mem0.example",
        "timeout_s": 88,
        "scope_prefix": "bench-",
        "concurrency": 13,
    },
    "letta": {"base_url": "http://localhost:8283", "max_retries": 6, "concurrency": 14, "timeout_s": 99},
    "mem0": {"api_key": "***", "access_token": "***", "url": "https://mem0.example/v1"},
}
ID_LIKE = {"user_id": "alice", "store_path": "/srv/mem0/qdrant", "project_id": "p-xyz"}


@pytest.mark.parametrize("option", sorted(SECRET_LIKE))
def test_keys_endpoints_ids_paths_timeouts_and_concurrency_never_name_a_contestant(tmp_path, option):
    provider = option.split("_")[0]
    run = _run(tmp_path / "runs" / "a", provider, _config(option, **SECRET_LIKE[option], **ID_LIKE))
    assert _table_names(build_report(run)["markdown"].read_text()) == [provider]
    # beside the same provider at its file's settings, the runs are told apart by what else differs (the ids, as
    # any config entry that declares no setting), never by a secret, an endpoint, a timeout or a concurrency
    at_file = _run(tmp_path / "runs" / "b", provider, _config(option))
    names, _ = _compare(tmp_path, [run, at_file])
    assert len(set(names)) == 2
    for name in names:
        assert not any(str(v) in name for v in SECRET_LIKE[option].values()), name
    # with nothing else to tell them apart: by their directories
    alone = _run(tmp_path / "runs" / "c", provider, _config(option, **SECRET_LIKE[option]))
    names, _ = _compare(tmp_path, [alone, at_file])
    assert sorted(names) == [f"{provider} (b)", f"{provider} (c)"]


def test_only_declared_result_bearing_settings_of_any_shipped_file_are_ever_named():
    """Every leaf of every shipped provider file, changed in turn: named exactly when its declaration says results
    depend on it, and never a setting of the endpoint or secret lists."""
    rng = random.Random(11)
    ever: set[str] = set()
    out_of_results = {k.removeprefix("memory.") for k in ENDPOINT_KEYS + SECRET_KEYS if k.startswith("memory.")}
    for option in group_options("memory"):
        node = _node(option)
        assert option_of(node) == option  # each shipped file is found again from the config it composes
        assert changed_settings(node, option) == ()
        shipped = flatten(group_file("memory", option))
        for key, value in flatten(node).items():
            if key not in shipped or key in ("_target_", "name") or "${" in str(shipped[key]):
                continue
            if isinstance(value, bool):
                other: Any = not value
            elif isinstance(value, (int, float)):
                other = value + 7
            else:
                other = f"{value}-x"
            got = dict(changed_settings(_node(option, **{key: other}), option))
            declared = provider_setting(key)
            named = declared is not None and declared.results and key not in out_of_results
            assert (key in got) == named, (option, key)
            assert set(got) <= {key}
            ever |= set(got)
        extra = rng.choice(["user_id", "db_path", "request_timeout", "org", "token"])
        assert changed_settings(_node(option, **{extra: "x"}), option) == ()  # undeclared: never named
    assert all(s.key.startswith("memory.") for s in PROVIDER_SETTINGS)
    assert {"turns_per_add", "generation.max_tokens", "search", "search_mode", "reranker", "agent_model"} <= ever
    assert not ever & {"timeout_s", "concurrency", "scope_prefix", "max_retries", "base_url", "api_key_env", "url"}


@pytest.mark.e2e
def test_a_real_runs_snapshot_names_the_file_its_config_alone_cannot(tmp_path):
    """`lme-harness run mode=memory memory=bm25 memory.name=kw`: run.json holds the composed config only, and two
    shipped files have its target (bm25, rag), neither named `kw`; the snapshot Hydra's job wrote says bm25."""
    from commands.cli import main
    from harness.run_meta import read_run_meta
    from harness.testing.fake_openai import FakeOpenAIServer
    from harness.testing.faults import FakeModel
    from tests.support.fake_run import endpoint_args

    run_dir = tmp_path / "r"
    with FakeOpenAIServer(FakeModel()) as srv:
        args = ["mode=memory", "memory=bm25", "memory.name=kw", *endpoint_args(srv.base_url, tmp_path)]
        assert main(["run", f"hydra.run.dir={run_dir}", *args, "dataset.limit=1"]) == 0
    config = read_run_meta(run_dir).config
    assert config is not None and config["mode"]["memory"]["provider"] == config["memory"]
    assert option_of(config["memory"]) is None
    assert provider_config(config, "memory", run_dir) == ProviderConfig("bm25", ())
    md = (run_dir / "report.md").read_text()
    assert _table_names(md) == ["kw"]  # an index has no setting of its own to name
