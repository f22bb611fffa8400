"""A memory contestant's provider configuration against the shipped file it was selected by (configs/memory/).

`mode=memory memory=mem0` composes configs/memory/mem0.yaml under `memory:` and, resolved, under the contestant's
`mode.memory.provider`; run.json keeps the composed config, resolved (harness/run_meta.py), not Hydra's choices.
The file a provider node was selected by (its `option`) is the `memory` choice of the run's snapshot
(.hydra/hydra.yaml `hydra.runtime.choices.memory`, written by runners/snapshot.py when a Hydra job wrote the run)
when that names a shipped file with the node's `_target_`; else the one shipped file with the node's `_target_`,
and where several share it (bm25 and rag are both IndexProvider) the one with the node's `name`; else unknown.

`changed` is what the reports add to the contestant's name (reports/standings.py): each setting of the node that
differs from its file (a key the file does not set: from the component's default) and that results depend on by
its declaration (harness/memory/settings.py; timeouts, retries, concurrency and the scope prefix are declared not
to). Never a key that declares no setting (where a service is served, its key variable, an id, a path), one the file
sets by interpolation (mem0's `embedder: ${retrieval.embedder}`: another setting of the run, named as such) or
requires (`url: ???`), nor a secret's name, a masked value or a URL whatever the declaration says.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import secrets
from harness.memory.settings import PREFIX, provider_setting
from harness.settings import group_file, group_options
from reports.config_keys import flatten

GROUP = PREFIX  # the config group of the providers: configs/memory/
# The Hydra job's own configuration in a run's snapshot (runners/snapshot.py SNAPSHOT_DIR; reports sit below runners).
HYDRA_FILE = Path(".hydra") / "hydra.yaml"


@dataclass(frozen=True)
class ProviderConfig:
    """A contestant's provider node as its run composed it, against its shipped file."""

    option: str | None  # configs/memory/<option>.yaml it was selected by; None: not known
    changed: tuple[tuple[str, Any], ...] = ()  # (key within the node, value), sorted by key: see the module


def hydra_choice(run_dir: Path | None, group: str = GROUP) -> str | None:
    """The option of `group` Hydra composed for the run in `run_dir` (None: no snapshot of a Hydra job, or none
    chosen). A damaged file says nothing: the caller falls back on the config itself."""
    if run_dir is None or not (path := Path(run_dir) / HYDRA_FILE).is_file():
        return None
    try:
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    node: Any = doc
    for key in ("hydra", "runtime", "choices", group):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, str) else None


def _target(node: Mapping[str, Any]) -> Any:
    return node.get("_target_")


@functools.cache
def _shipped() -> dict[str, tuple[Any, Any]]:
    """Each shipped provider file's (`_target_`, `name`), read once: the files ship with the package."""
    return {o: (_target(f), f.get("name")) for o in group_options(GROUP) for f in [group_file(GROUP, o)]}


def option_of(node: Mapping[str, Any], choice: str | None = None) -> str | None:
    """The shipped file `node` was selected by: `choice` (the run's Hydra choice) when it ships one with the node's
    `_target_`, else the one file with that `_target_` (and that `name`, where several share it), else None."""
    shipped = _shipped()
    if choice in shipped and shipped[choice][0] == _target(node):
        return choice
    if _target(node) is None:
        return None
    same = [o for o, (target, _) in shipped.items() if target == _target(node)]
    if len(same) > 1:
        same = [o for o in same if shipped[o][1] == node.get("name")]
    return same[0] if len(same) == 1 else None


def _same(a: Any, b: Any) -> bool:
    """Equal as a setting holds it: 1 and 1.0 are one number; true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _hidden(key: str, value: Any) -> bool:
    """A secret or an endpoint by its name or its value (harness/secrets.py), whatever its declaration."""
    return (
        secrets.is_secret_name(key)
        or secrets.names_secret_env(key)
        or value == secrets.MASK
        or secrets.is_endpoint(value)
    )


def _setting_key(key: str) -> str | None:
    """A config key's key within a provider node (`memory.turns_per_add`, `mode.memory.provider.turns_per_add`:
    `turns_per_add`); None for a key of no provider node."""
    parts = key.split(".")
    if len(parts) > 1 and parts[0] == GROUP:
        return ".".join(parts[1:])
    if len(parts) > 3 and parts[0] == "mode" and parts[2] == "provider":
        return ".".join(parts[3:])
    return None


def unnamed(key: str, values: Sequence[Any]) -> bool:
    """Whether a config entry that tells runs apart may not name them (reports/standings.py): a secret or an
    endpoint, by its name or one of its `values`, or a provider's setting declared not to change results (a timeout,
    retries, concurrency, a scope prefix). Any other entry may, as before."""
    if any(_hidden(key, v) for v in values):
        return True
    rel = _setting_key(key)
    declared = provider_setting(rel) if rel is not None else None
    return declared is not None and not declared.results


def changed_settings(node: Mapping[str, Any], option: str) -> tuple[tuple[str, Any], ...]:
    """The result-bearing settings of `node` that differ from configs/memory/<option>.yaml (see the module)."""
    shipped = flatten(group_file(GROUP, option))
    derived = [k for k, v in shipped.items() if isinstance(v, str) and ("${" in v or v.strip() == "???")]
    out = []
    for key, value in sorted(flatten(node).items()):
        if any(key == d or key.startswith(d + ".") for d in derived):
            continue
        declared = provider_setting(key)
        if declared is None or not declared.results or _hidden(key, value):
            continue
        if (key in shipped and _same(shipped[key], value)) or (key not in shipped and value is None):
            continue
        out.append((key, value))
    return tuple(out)


def provider_node(config: Mapping[str, Any] | None, mode: str) -> tuple[Mapping[str, Any], bool] | None:
    """The provider node of the contestant `mode` (`mode.<mode>.provider`; for `mode=memory` as a run.json written
    without it holds it, the `memory` group's node) and whether it is the `memory` group's; None: none."""
    config = config or {}
    group = config.get(GROUP)
    own = config.get("mode", {}).get(mode) if isinstance(config.get("mode"), Mapping) else None
    node = own.get("provider") if isinstance(own, Mapping) else None
    if isinstance(node, Mapping):
        return node, node == group
    if mode == GROUP and isinstance(group, Mapping):
        return group, True
    return None


def provider_config(config: Mapping[str, Any] | None, mode: str, run_dir: Path | None) -> ProviderConfig | None:
    """The provider configuration of the contestant `mode` of a run (its config as run.json holds it, its directory
    for the Hydra choice); None when the config holds no provider node for it."""
    found = provider_node(config, mode)
    if found is None:
        return None
    node, of_group = found
    option = option_of(node, hydra_choice(run_dir) if of_group else None)
    return ProviderConfig(option, changed_settings(node, option) if option is not None else ())


def target_option(config: Mapping[str, Any] | None, prefix: str, run_dir: Path | None) -> str | None:
    """The shipped file the provider node at `prefix` (`memory`, `mode.<m>.provider`) of `config` was selected by,
    when that file has the node's own `_target_` (what a `<prefix>._target_` qualifier says more readably); None for a
    node that is no provider's, or whose file is not known."""
    parts = prefix.split(".")
    if not (parts == [GROUP] or (len(parts) == 3 and parts[0] == "mode" and parts[2] == "provider")):
        return None
    node: Any = config or {}
    for p in parts:
        node = node.get(p) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        return None
    group = (config or {}).get(GROUP)
    return option_of(node, hydra_choice(run_dir) if node == group else None)
