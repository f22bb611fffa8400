"""docs/reference/ is generated from the code and the configs (scripts/reference.py): a page out of date fails here,
so a new setting, config option, sub-command or exit status cannot go undocumented."""

from __future__ import annotations

from dataclasses import replace

import commands.cli as cli
import runners.setting_rules as rules
from scripts import reference


def test_the_committed_reference_is_what_the_code_generates():
    problems = reference.stale()
    assert not problems, "\n".join(f"{name}:\n{diff}" for name, diff in problems) + (
        "\nregenerate: python -m scripts.reference write"
    )


def test_a_new_setting_shows_in_the_settings_page(monkeypatch):
    before = reference.settings_md()
    template = rules.declaration("dataset.limit")
    monkeypatch.setattr(rules, "SETTINGS", (*rules.SETTINGS, replace(template, key="dataset.brand_new", minimum=7)))
    after = reference.settings_md()
    assert before != after and "`dataset.brand_new` | an integer >= 7" in after


def test_every_sub_command_and_exit_status_is_in_the_cli_page():
    page = reference.cli_md()
    for name in cli.build_parser()._subparsers._group_actions[0].choices:  # type: ignore[union-attr]
        assert f"## `{name}`" in page
    for code, _ in cli.EXIT_STATUSES:
        assert f"| {code} |" in page
    assert {code for code, _ in cli.EXIT_STATUSES} >= {
        0,
        2,
        cli.EXIT_FAILED_CASES,
        cli.EXIT_STOPPED,
        cli.EXIT_INTERRUPTED,
    }


def test_every_config_option_is_in_the_configs_page():
    from harness.config_files import CONFIG_DIR

    page = reference.configs_md()
    for f in CONFIG_DIR.rglob("*.yaml"):
        if f.parent == CONFIG_DIR:
            continue
        group = f.relative_to(CONFIG_DIR).parts[0]
        option = f.relative_to(CONFIG_DIR / group).with_suffix("").as_posix()
        assert f"| `{option}` |" in page and f"## `{group}`" in page, f
