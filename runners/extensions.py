"""A user's own configs and memory providers, from outside the installed package (docs/extending.md).

- **A config directory of the user's own**, given as `--config-dir DIR` (Hydra's option) or
  `hydra.searchpath=[file://DIR]`: its groups (`prompt/`, `model/`, `experiment/`, `memory/`, `mode/`, `judge/`,
  ...) add options to the installed ones. Hydra reads the installed configs/ first, so a file there with the name of
  an installed config would never be read: `config_dir_problems` names each such file (and a directory that does
  not exist), and the command refuses it before anything runs.
- **Memory providers an installed package registers** under the entry-point group `lme_harness.memory_providers`
  (`NAME = "package.module:Attr"`, Attr a provider class or a config mapping with a `_target_`):
  `register_memory_providers` puts each in Hydra's config store as the option `memory=NAME`, so
  `lme-harness run mode=memory memory=NAME` selects it with no file of the package's in configs/ (a launcher that
  runs jobs in other processes, joblib's or Ray's, takes the config store along).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.config_files import CONFIG_DIR

ENTRY_POINT_GROUP = "lme_harness.memory_providers"
MEMORY_GROUP = "memory"
_CONFIG_DIR_OPTIONS = ("--config-dir", "-cd")
_PLAIN = (str, int, float, bool, type(None))


def config_dir_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(`args` less Hydra's `--config-dir DIR` options, those options as `--config-dir ABSOLUTE_DIR` pairs): the
    commands take them anywhere among their arguments (`rescore --config-dir DIR SRC` too) and hand them to Hydra."""
    rest: list[str] = []
    options: list[str] = []
    it = iter(args)
    for arg in it:
        name, eq, value = arg.partition("=")
        if name in _CONFIG_DIR_OPTIONS:
            value = value if eq else next(it, "")
            options += ["--config-dir", str(Path(value).expanduser().absolute()) if value else ""]
        else:
            rest.append(arg)
    return rest, options


def user_config_dirs(argv: Sequence[str]) -> list[str]:
    """The config directories `argv` (Hydra's arguments) adds to the installed configs: `--config-dir DIR` and the
    file entries of `hydra.searchpath=[...]`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    dirs: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg in _CONFIG_DIR_OPTIONS:
            dirs.append(next(it, ""))
            continue
        key, eq, _ = arg.partition("=")
        if eq and key.lstrip("+") == "hydra.searchpath":
            try:
                value = OverridesParser.create().parse_overrides([arg])[0].value()
            except Exception:  # a malformed override: Hydra names it
                continue
            for entry in value if isinstance(value, list) else [value]:
                scheme, sep, path = str(entry).partition("://")
                if not sep:  # no scheme: Hydra reads a file path
                    scheme, path = "file", str(entry)
                if scheme == "file":
                    dirs.append(path)
    return dirs


def config_dir_problems(dirs: Sequence[str], installed: Path = CONFIG_DIR) -> list[str]:
    """What is wrong with the user's config directories: one not given or that does not exist, and each file that
    has the name of an installed config (Hydra reads the installed one first: the user's would never be used)."""
    problems = []
    for given in dirs:
        d = Path(given).expanduser()
        if not given:
            problems.append("--config-dir needs a directory")
            continue
        if not d.is_dir():
            problems.append(f"config directory {d} does not exist")
            continue
        for f in sorted(d.rglob("*.yaml")):
            rel = f.relative_to(d)
            if (installed / rel).is_file():
                problems.append(
                    f"{f} has the name of an installed config ({rel.as_posix()}), which Hydra reads first: yours "
                    f"would never be used; rename it (and select it by the new name)"
                )
    return problems


def provider_config(obj: Any, where: str) -> dict[str, Any]:
    """The config node of an entry point's object: a provider class (its `_target_`, and every constructor argument
    with a plain default, so `memory.ARG=` overrides it; `???` for one without a default, which Hydra then asks
    for), or a config mapping with its own `_target_`. ValueError naming `where` otherwise."""
    if isinstance(obj, Mapping):
        given = {str(k): v for k, v in obj.items()}
        if not isinstance(given.get("_target_"), str):
            raise ValueError(f"{where}: a provider config needs a `_target_` (the provider class's import path)")
        return given
    if not inspect.isclass(obj):
        raise ValueError(f"{where}: expected a provider class or a config mapping, got {type(obj).__name__}")
    node: dict[str, Any] = {"_target_": f"{obj.__module__}.{obj.__qualname__}"}
    for p in inspect.signature(obj).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name.startswith("_"):
            continue
        if p.default is p.empty:
            node[p.name] = "???"
        elif isinstance(p.default, _PLAIN):  # not a list, nor a dataclass field's default factory
            node[p.name] = p.default
    return node


def register_memory_providers(installed: Path = CONFIG_DIR) -> list[str]:
    """Each provider of the entry-point group as the option `memory=NAME` in Hydra's config store; the warnings
    (one line each) for an entry point that cannot be used: it fails to load, it is neither a provider class nor a
    config, or it has the name of an installed provider (which Hydra would pick instead)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    warnings = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = ep.dist.name if ep.dist is not None else "an installed package"
        where = f"memory provider {ep.name!r} of {package} (entry point {ep.value})"
        if (installed / MEMORY_GROUP / f"{ep.name}.yaml").is_file():
            warnings.append(f"{where} is not used: an installed provider has that name; the package must rename it")
            continue
        try:
            node = provider_config(ep.load(), where)
        except Exception as e:  # a package that does not import is named, and the run goes on without it
            warnings.append(f"{where} is not used: {type(e).__name__}: {e}")
            continue
        store.store(group=MEMORY_GROUP, name=ep.name, node=node, provider=package)
    return warnings
