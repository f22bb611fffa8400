"""What `lme-harness` and `make` mean inside tests/system/test_readme.py's replay of the README's command blocks.

- `lme-harness run|plan|replay|rescore|retrieval-eval ...`: the command as written, with the overrides that make it
  a test: the answer model at the loopback fake endpoint ($LME_README_FAKE_URL) where the command names no endpoint
  of its own (the README's own endpoint URL is already replaced by the test), one case (`dataset.limit=1`), a cache
  of the test's own, no progress line. Hydra takes the last value of a key, so the README's own settings stay.
- any other `lme-harness` sub-command (report, compare, gate, provider-check, ...): as written.
- `make bench`: its run is too long for a test, so its config is composed and built as `make bench` builds it (one
  error naming a bad key); `make test`: `make -n test` in the checkout (the target exists and its recipe expands).
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import REPO

RUNS = ("run", "plan", "replay", "rescore", "retrieval-eval")


def _test_overrides(args: list[str]) -> list[str]:
    extra = [f"cache.path={os.environ['LME_README_CACHE']}", "run.progress=false"]
    if args[0] != "rescore":
        extra.append("dataset.limit=1")
    if args[0] != "rescore" and not any(a == "model=endpoint" or a.startswith("model=endpoint ") for a in args):
        extra += ["model=endpoint", f"model.base_url={os.environ['LME_README_FAKE_URL']}", "model.model=fake-model"]
    return extra


def lme_harness(args: list[str]) -> int:
    from commands.cli import main

    if args and args[0] in RUNS:
        args = [*args, *_test_overrides(args)]
    return main(args)


def make(args: list[str]) -> int:
    if args == ["bench"]:
        from hydra import compose, initialize_config_dir

        from harness.config_files import CONFIG_DIR
        from runners.run_config import RunConfig

        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["+experiment=quickstart"])
        RunConfig.build(cfg)
        print(f"make bench: +experiment=quickstart composes ({cfg.dataset.limit} case, model {cfg.model.name})")
        return 0
    return subprocess.run(["make", "-n", *args], cwd=REPO, stdout=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    tool, *rest = sys.argv[1:]
    sys.exit(lme_harness(rest) if tool == "lme-harness" else make(rest))
