"""Prompt texts live in harness/prompts/, each marked verbatim-reference (with repo, file, symbol) or own."""

import importlib

import pytest

from harness.prompts import MODULES
from harness.prompts.provenance import Source


def _texts(module) -> dict[str, object]:
    return {
        k: v
        for k, v in vars(module).items()
        if k.isupper() and not k.startswith("_") and k != "SOURCES" and isinstance(v, (str, dict))
    }


@pytest.mark.parametrize("name", MODULES)
def test_every_prompt_text_has_its_source(name):
    module = importlib.import_module(f"harness.prompts.{name}")
    texts = _texts(module)
    assert texts, name
    assert set(module.SOURCES) == set(texts), name  # no text without a mark, no mark without a text
    for key, src in module.SOURCES.items():
        assert isinstance(src, Source)
        if src.kind == "verbatim-reference":
            assert src.repo and src.file and src.symbol, key
        else:
            assert src.kind == "own" and src.note, key


def test_the_modes_and_judges_send_the_package_texts():
    from harness.prompts import answer, judges
    from harness.scoring import judges as scoring
    from runners.modes import LongContextMode, SummaryOnDemandMode

    assert LongContextMode().instruction is answer.LME_INSTRUCTION
    assert SummaryOnDemandMode().ondemand_instruction is answer.LME_ONDEMAND_INSTRUCTION
    assert scoring.render_trpc_judge_prompt("q", "r", "p") == judges.TRPC_JUDGE_PROMPT % ("q", "r", "p")
