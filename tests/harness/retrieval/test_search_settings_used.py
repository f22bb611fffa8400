"""Every `session_search` setting (harness/retrieval/config.py `SearchConfig`) is one a shipped retrieval preset or
config sets, or one kept at its default everywhere for a stated reason (below). The settings measured and not
adopted by any preset were removed, with the code only they reached (issue 39; research/README.md "Retired
studies"): naming one is one error that names it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, InstantiationException
from hydra.utils import instantiate

from harness.config_files import CONFIG_DIR
from harness.retrieval.config import SearchConfig, preset

ROOT = Path(__file__).resolve().parents[3]

# At their default in every shipped preset and config, and kept: why.
KEPT_AT_DEFAULT = {
    "alpha": "the score fusion's dense weight, read by every `fusion: score` preset (default, speaker_neutral)",
    "candidate_ratio": "the reference's RRF candidates, read by the `fusion: rrf` presets (hybrid, trpc_parity*)",
    "rrf_k": "the reference's RRF constant, read by the `fusion: rrf` presets",
    "visible_events": "the reference's tail filter, read by trpc_parity*",
    "lexical_fallback": "on in every preset: the reference's substring scan when a search finds nothing",
    "window": "the reference response's windows (bm25, hybrid, trpc_parity*)",
    "snippet_chars": "the reference's snippet cap",
    "budget_chars": "the compact presets' response budget",
    "hit_chars": "the compact presets' per-hit cap",
    "budget_tokens": "the response budget (issue 40)",
    "budget_fill": "the response budget (issue 40)",
}
# Measured, adopted by no preset, removed (research/README.md "Retired studies": the studies that measured them run at
# the commit named there).
REMOVED = {
    # run at commit f86b023 (studies/)
    "context_chars": 100,
    "recall_trigger": "learned",
    "recall_trigger_file": "/tmp/trigger.json",
    "recall_user_weight": 1.0,
    "session_rescore": 1,
    "session_rescore_queries": "all",
    "session_rescore_by": "fused",
    "query_term_weight": 2.0,
    "session_boost": 2.0,
    "session_boost_top": 3,
    "bm25_fusion": 1.0,
    "recall_top_hits": 3,
    # run at commit e9dfdf3 (research/): the fold fit's turn-pair credit and recency weight, the held-out candidate
    "propagate_back": 0.5,
    "recency": 0.1,
    "recall_ranking": "keyword",
    "recall_window": 1,
}


def _set_by_a_shipped_config() -> set[str]:
    """The settings some shipped preset (configs/retrieval/) or config (`retrieval.config` anywhere in configs/) sets
    to other than its default."""
    default = SearchConfig().__dict__
    out = set()
    for p in (ROOT / "configs" / "retrieval").glob("*.yaml"):
        cfg = preset(p.stem)
        out |= {k for k, v in default.items() if getattr(cfg, k) != v}
    for p in (ROOT / "configs").rglob("*.yaml"):
        node = yaml.safe_load(p.read_text())
        retrieval = node.get("retrieval") if isinstance(node, dict) else None
        if isinstance(retrieval, dict) and isinstance(retrieval.get("config"), dict):
            out |= set(retrieval["config"]) & set(default)
    return out


def test_every_setting_is_used_by_a_shipped_config_or_kept_for_a_reason():
    fields = set(SearchConfig().__dict__)
    unused = fields - _set_by_a_shipped_config()
    assert unused - set(KEPT_AT_DEFAULT) == set(), "settings no shipped config uses: adopt in a preset or remove"
    assert set(KEPT_AT_DEFAULT) <= fields  # a kept one removed: drop it here too


def test_the_removed_settings_are_gone_from_the_config_and_its_defaults_file():
    fields = set(SearchConfig().__dict__)
    defaults = yaml.safe_load((ROOT / "configs" / "search" / "default.yaml").read_text())
    assert not set(REMOVED) & fields and not set(REMOVED) & set(defaults)


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_a_removed_setting_is_one_error_naming_it(name):
    with pytest.raises(TypeError, match=name):
        preset("default", **{name: REMOVED[name]})
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        with pytest.raises(ConfigCompositionException, match=f"retrieval.config.{name}"):
            compose(config_name="config", overrides=[f"retrieval.config.{name}={REMOVED[name]}"])
        cfg = compose(config_name="config", overrides=[f"+retrieval.config.{name}={REMOVED[name]}"])
    with pytest.raises(InstantiationException, match=name):
        instantiate(cfg.retrieval.config)
