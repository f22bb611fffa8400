"""The built-in contestants under the names the `mode:` configs target (`runners.modes.LongContextMode`, ...):
the run fingerprint hashes `_target_`, so these names stay and every earlier run directory still resumes.
The contestants live in harness/contestants/; this module also builds them from the `mode:` group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.contestants.base import Contestant, with_hook_defaults
from harness.contestants.long_context import LongContextMode
from harness.contestants.summary import SummaryMode, SummaryOnDemandMode

__all__ = ["LongContextMode", "SummaryMode", "SummaryOnDemandMode", "contestants_from_config", "modes_from_config"]


def contestants_from_config(mode_cfg: Mapping[str, Any]) -> list[Contestant]:
    """The contestants of the `mode:` group, each named by its config key (`mode.summary_short: {...}` is the
    contestant `summary_short`), so two variants of one strategy never share a name (records, summaries, report
    rows). Any class with `name`, `ingest` and `answer` (harness/contestants/base.py) can be a `_target_`: the
    lifecycle hooks it leaves out get their declared defaults here (`with_hook_defaults`)."""
    from hydra.utils import instantiate

    from runners.setting_rules import RunConfigError

    out = []
    for key, node in mode_cfg.items():
        given = node.get("name") if hasattr(node, "get") else None
        if given is not None and given != key:
            raise RunConfigError(
                f"mode.{key}.name={given!r}: a mode's name is its config key ({key!r}); drop `name` or rename the key"
            )
        c = instantiate(node, name=str(key))
        missing = [m for m in ("ingest", "answer") if not callable(getattr(c, m, None))]
        if missing:
            raise RunConfigError(
                f"mode.{key}: {type(c).__qualname__} has no {' or '.join(missing)} method; a contestant provides "
                "ingest(history, kit) and answer(memory, question, kit) (harness/contestants/base.py)"
            )
        out.append(with_hook_defaults(c))
    return out


modes_from_config = contestants_from_config  # the earlier name
