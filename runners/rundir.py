"""The run directory's name, built from an allowlist, and the secrets check that runs before Hydra writes.

configs/config.yaml names a run `runs/${lme.run_name:${run.name}}/${lme.run_dirname:}`. Hydra's own
override_dirname is the raw override text (so any value, a key included, became a path). This resolver names
a run by the overrides of declared result-bearing settings only (`NAMED_ROOTS`, minus the declared exclusions
of runners/setting_rules.py `dirname_exclusions`, secret and `*_env` fields and URLs; a key the configs do not
declare, added with `+`, is not a setting), with plain values (no interpolation, no URL); every other override is
represented by a hash of its *key* alone (`other=<hash>`), never its value. For ordinary overrides the name is the one Hydra
wrote, so existing runs resume in their directory. A name over `MAX_NAME_BYTES` is cut and ends with a hash of
the whole, so it is always one valid path component.

`SecretsCheck` (a Hydra callback) and the resolver both run `harness.secrets.check_config` on the composed
config before Hydra creates the run directory or its `.hydra/` snapshot: a refused config writes nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sys
from collections.abc import Iterable
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from harness import secrets
from runners.setting_rules import dirname_exclusions


class RunNameError(ValueError):
    pass


_SEPARATORS = {"/": "%2F", "\\": "%5C"}
_INTERPOLATION = re.compile(r"\$\{([^{}]*)\}")


# Config roots whose overrides may name a run directory: the sections of configs/config.yaml and its groups.
NAMED_ROOTS = frozenset(
    "dataset model mode memory prompt summarizer retrieval scorers judge store experiment run wire generation client cache".split()
)
MAX_NAME_BYTES = 255  # one path component (the common filesystem limit); names that fit are kept as they were
_HASH_CHARS = 16


def check_run_name(name: Any) -> str:
    """`run.name` is one directory under runs/: no path separators, no `..`, not empty, not over the cap."""
    text = str(name)
    if not text.strip() or any(s in text for s in _SEPARATORS) or text.strip() in (".", ".."):
        raise RunNameError(
            f"run.name={text!r}: must be a plain directory name (no '/', '\\' or '..'); it names runs/<run.name>/"
        )
    if len(text.encode()) > MAX_NAME_BYTES:
        raise RunNameError(
            f"run.name: {len(text.encode())} bytes, over {MAX_NAME_BYTES} (one directory name); choose a shorter name"
        )
    return text


def _plain(value: Any) -> bool:
    """A value that may appear in a directory name: no interpolation, no URL, no secret or `*_env` key."""
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and not secrets.is_secret_name(k) and not secrets.names_secret_env(k) and _plain(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, str):
        return "${" not in value and "://" not in value
    return value is None or isinstance(value, (bool, int, float))


def _is_excluded(key: str, exclude: list[str]) -> bool:
    """Not result-bearing, or where a secret or an endpoint lives: never in the name, not even as a key."""
    last = key.rsplit(".", 1)[-1]
    return (
        key in exclude
        or secrets.is_secret_name(last)
        or secrets.names_secret_env(last)
        or last.endswith("base_url")
        or last.lower().endswith("dsn")
    )


def _named(key: str) -> bool:
    return key.split("/", 1)[0].split(".", 1)[0].split("@", 1)[0] in NAMED_ROOTS


def _adds_a_key(o: Any) -> bool:
    """`+key=value` / `++key=value` on a config key (`+model.organization=...`: a dotted path, where a group is
    `experiment`, `model@judge.endpoint` or `a/b`): a key the configs do not declare, so not a setting of the
    harness's, and its value may be anything. A group added with `+experiment=...` is a choice and names the run."""
    return bool(o.is_add() or o.is_force_add()) and "." in str(o.key_or_group)


def sanitize_value(line: str) -> str:
    """One override's text, safe as part of one path component (its value is already known to be plain)."""
    text = secrets.redact(line)  # defence in depth: registered secrets masked
    while _INTERPOLATION.search(text):
        text = _INTERPOLATION.sub(r"$(\1)", text)
    text = text.replace("${", "$(")
    for sep, esc in _SEPARATORS.items():
        text = text.replace(sep, esc)
    return text


def cap(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """`name` if it fits `limit` bytes, else its head and `~` and a hash of the whole (distinct names stay distinct)."""
    raw = name.encode()
    if len(raw) <= limit:
        return name
    head = raw[: limit - _HASH_CHARS - 1].decode(errors="ignore")
    return f"{head}~{hashlib.sha256(raw).hexdigest()[:_HASH_CHARS]}"


def overrides_dirname(task: list[str], exclude: list[str], item_sep: str = ",", kv_sep: str = "=") -> str:
    """The run directory's name from `task` (the override lines): see the module doc."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    named, other = [], []
    for o in OverridesParser.create().parse_overrides(task):
        key = o.key_or_group
        if _is_excluded(key, exclude):
            continue
        try:
            value = o.value()
        except Exception:  # a sweep (not in a job's own overrides) or an unusual form: its key only
            value = "${"
        line = o.input_line or ""  # set for every parsed override; typed optional by Hydra
        if _named(key) and not o.is_delete() and not _adds_a_key(o) and _plain(value):
            named.append(line)
        else:
            other.append(line.split("=", 1)[0])
    items = [sanitize_value(line) for line in sorted(named)]
    name = re.sub("[=]", kv_sep, item_sep.join(items))
    if other:  # keys only: a value here could be anything, a secret included
        digest = hashlib.sha256("\n".join(sorted(set(other))).encode()).hexdigest()[:8]
        name = item_sep.join(filter(None, [name, f"other{kv_sep}{digest}"]))
    return cap(name)


def refuse_secrets(cfg: Any, variables: Iterable[str] = ()) -> None:
    """One clear error and exit 2 when the composed config carries a secret other than through the env
    (`variables`: more env variables a secret field reads, those of a sweep's other jobs)."""
    try:
        secrets.check_config(cfg, variables)
    except secrets.SecretConfigError as e:
        print(f"lme-harness: error: {e}; nothing was written", file=sys.stderr)
        raise SystemExit(2) from None


def sweep_jobs(config: DictConfig) -> list[DictConfig]:
    """Every job's composed config of the sweep `config` (the basic sweeper's: the cartesian product of the
    sweep overrides), composed as the sweeper composes them. A job that does not compose is left out: Hydra
    reports it when it composes it."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not GlobalHydra.instance().is_initialized():
        return []
    loader = GlobalHydra.instance().config_loader()
    try:
        task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)  # the lines as given
        assert isinstance(task, list)
        parsed = OverridesParser.create(config_loader=loader).parse_overrides([str(t) for t in task])
        choices = [
            [f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
            if o.is_sweep_override()
            else [f"{o.get_key_element()}={o.get_value_element_as_str()}"]
            for o in parsed
        ]
    except Exception:  # a sweep the basic sweeper cannot expand: Hydra reports it
        return []
    jobs = []
    for job in itertools.product(*choices):
        try:
            jobs.append(loader.load_sweep_config(config, list(job)))
        except Exception:
            continue
    return jobs


class SecretsCheck(Callback):
    """Hydra callback: the config check, before a run or a sweep writes anything. A sweep's every job is
    composed and checked before Hydra writes multirun.yaml or any job's directory, against the env variables
    every job's secret fields read (a job's `hydra.job.env_set` may not define another job's key either)."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        refuse_secrets(config)

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        configs = [config, *sweep_jobs(config)]
        variables = set().union(*(secrets.secret_variables(secrets.raw_leaves(c)) for c in configs))
        for c in configs:
            refuse_secrets(c, variables)


def _run_dirname(*, _root_: Any) -> str:
    refuse_secrets(_root_)  # a sweep's job config is composed only here, just before its directory is made
    hydra = _root_.hydra
    conf = hydra.job.config.override_dirname
    task = OmegaConf.to_container(hydra.overrides.task, resolve=False)
    # The declarations' exclusions (runners/setting_rules.py); configs/config.yaml's exclude_keys states the same list
    # for Hydra's own override_dirname (tests/runners/test_settings_declared.py keeps the two equal).
    assert isinstance(task, list)  # a Hydra list of strings
    return overrides_dirname(list(task), list(dirname_exclusions()), str(conf.item_sep), str(conf.kv_sep))


def register_resolvers() -> None:
    """Idempotent: called by the CLI before Hydra composes the config."""
    if not OmegaConf.has_resolver("lme.run_dirname"):
        OmegaConf.register_new_resolver("lme.run_dirname", _run_dirname)
    if not OmegaConf.has_resolver("lme.run_name"):
        OmegaConf.register_new_resolver("lme.run_name", check_run_name)
