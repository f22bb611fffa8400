"""The run directory's name: Hydra's override_dirname made safe to be a path and to be seen.

configs/config.yaml names a run `runs/${lme.run_name:${run.name}}/${lme.run_dirname:}`. Hydra's own
override_dirname is the raw override text, re-resolved as an interpolation (so `model.api_key=${oc.env:K}`
put the key itself in the name) and split into directories by any `/` in a value. This resolver rebuilds the
same name from the same overrides (identical for ordinary ones, so existing runs still resume in their
directory) but leaves out secret-named keys and endpoint URLs, masks secrets in any other value, never
re-resolves an interpolation, and escapes path separators.
"""

from __future__ import annotations

import re
from typing import Any

from omegaconf import OmegaConf

from harness import secrets


class RunNameError(ValueError):
    pass


_SEPARATORS = {"/": "%2F", "\\": "%5C"}
_INTERPOLATION = re.compile(r"\$\{([^{}]*)\}")


def check_run_name(name: Any) -> str:
    """`run.name` is one directory under runs/: no path separators, no `..`, not empty."""
    text = str(name)
    if not text.strip() or any(s in text for s in _SEPARATORS) or text.strip() in (".", ".."):
        raise RunNameError(
            f"run.name={text!r}: must be a plain directory name (no '/', '\\' or '..'); it names runs/<run.name>/"
        )
    return text


def _is_excluded(key: str, exclude: list[str]) -> bool:
    return key in exclude or secrets.is_secret_name(key) or key.rsplit(".", 1)[-1].endswith("base_url")


def sanitize_value(line: str) -> str:
    """One override's text, safe as part of one path component and free of secrets."""
    text = secrets.redact(line)
    # Hydra resolves the run directory's name again (runtime.output_dir): an interpolation left in it would
    # read the env var (a key) into the path, so `${oc.env:K}` is written `$(oc.env:K)`.
    while _INTERPOLATION.search(text):
        text = _INTERPOLATION.sub(r"$(\1)", text)
    text = text.replace("${", "$(")
    for sep, esc in _SEPARATORS.items():
        text = text.replace(sep, esc)
    return text


def overrides_dirname(task: list[str], exclude: list[str], item_sep: str = ",", kv_sep: str = "=") -> str:
    """Hydra's get_overrides_dirname over `task` (the raw override lines), made safe (see the module doc)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(task)
    lines = sorted(o.input_line for o in parsed if not _is_excluded(o.key_or_group, exclude))
    return re.sub("[=]", kv_sep, item_sep.join(sanitize_value(line) for line in lines))


def _run_dirname(*, _root_: Any) -> str:
    hydra = _root_.hydra
    conf = hydra.job.config.override_dirname
    task = OmegaConf.to_container(hydra.overrides.task, resolve=False)
    exclude = OmegaConf.to_container(conf.exclude_keys, resolve=False)
    return overrides_dirname(list(task), list(exclude), str(conf.item_sep), str(conf.kv_sep))


def register_resolvers() -> None:
    """Idempotent: called by the CLI before Hydra composes the config."""
    if not OmegaConf.has_resolver("lme.run_dirname"):
        OmegaConf.register_new_resolver("lme.run_dirname", _run_dirname)
    if not OmegaConf.has_resolver("lme.run_name"):
        OmegaConf.register_new_resolver("lme.run_name", check_run_name)
