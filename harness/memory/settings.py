"""The memory providers' own settings (`memory.*`, configs/memory/*.yaml), declared once (harness/settings.py
`Setting`: type, valid values, whether results depend on them).

runners/setting_rules.py validates them with every other setting (and derives the run fingerprint's and the run
directory's exclusions from them); the reports name a memory contestant run at a result-bearing setting other than its
shipped file's by them (reports/provider_config.py). Where a provider is served (`memory.base_url`, `memory.url`) and
how its key is given (`memory.api_key_env`) are no settings of this list: runners/setting_rules.py ENDPOINT_KEYS and
SECRET_KEYS, and harness/secrets.py, which tell a URL or a secret by its value or its name.
"""

from __future__ import annotations

from harness.settings import TEMPERATURE_MAX, Setting

PREFIX = "memory"

PROVIDER_SETTINGS: tuple[Setting, ...] = (
    # configs/memory/http.yaml and the hosted ones. Not results (a call that waits longer answers the same); in the
    # fingerprint and the directory name as the releases before this declaration put it there.
    Setting("memory.timeout_s", float, 0, exclusive_min=True, results=False, fingerprinted=True, named=True),
    Setting("memory.turns_per_add", int, 1),  # configs/memory/mem0.yaml (harness/memory/mem0_provider.py)
    Setting("memory.threshold", float, 0),
    Setting("memory.date_instructions", bool),
    Setting("memory.json_mode", bool),
    Setting("memory.generation.max_tokens", int, 1),
    Setting("memory.generation.temperature", float, minimum=0, maximum=TEMPERATURE_MAX),
    Setting("memory.search", bool),
    # configs/memory/{mem0_platform,zep,supermemory,letta}.yaml (harness/memory/hosted.py)
    Setting("memory.concurrency", int, 1, results=False),
    Setting("memory.max_retries", int, 0, results=False),  # configs/memory/letta.yaml
    Setting("memory.agent_model", str),  # Letta's agent handles (harness/memory/letta.py)
    Setting("memory.agent_embedding", str),
    Setting(
        "memory.reranker", str, choices=("rrf", "episode_mentions", "cross_encoder")
    ),  # configs/memory/zep.yaml (harness/memory/zep.py)
    Setting(
        "memory.scope_prefix", str, results=False
    ),  # configs/memory/summary*.yaml (harness/memory/summary_provider.py)
    # configs/memory/supermemory.yaml; its values are checked by the provider (harness/memory/supermemory.py)
    Setting("memory.search_mode", str),
)


def provider_setting(key: str) -> Setting | None:
    """The declaration of a provider's setting by its key within the provider's node (`turns_per_add`,
    `generation.max_tokens`); None when the key declares no setting."""
    for s in PROVIDER_SETTINGS:
        if s.key == f"{PREFIX}.{key}":
            return s
    return None
