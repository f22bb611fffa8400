"""The official LongMemEval answer prompt (`mode=lme_official`): the oldest sessions are dropped until the prompt
fits the model's window; the question, its date and the newest session always stay."""

from __future__ import annotations

import pytest

from harness.contestants.base import CaseHistory, Toolkit
from harness.data.longmemeval import parse_cases, read_json_bytes
from harness.session.events import Session
from harness.session.tokens import ScaledCounter, o200k_counter
from harness.testing.faults import FakeModel
from runners.official_mode import LongMemEvalOfficialMode, first_kept, session_blocks
from tests.support.contestant_kit import Pair, answer

pytestmark = pytest.mark.real_data


@pytest.fixture(scope="module")
def s_cases(s_path):
    return parse_cases(read_json_bytes(s_path), str(s_path))[:3]


def _naive_first_kept(blocks, prompt, count, budget) -> int:
    """The definition: drop the oldest session while the whole prompt is over budget (one count per drop)."""
    i = 0
    while i < len(blocks) - 1 and count(prompt(blocks[i:])) > budget:
        i += 1
    return i


def _ctx(case, *, window: int, counter=None, ratio: float = 1.0, model=None) -> Pair:
    kit = Toolkit(
        token_counter=counter or o200k_counter(),
        token_ratio=ratio,
        context_window=window,
        generation={"max_tokens": 384},
        model=model or FakeModel(script=["an answer"]),
    )
    return Pair(case=case, session=Session(id="s", user_id=case.question_id), kit=kit)


def _blocks(case) -> list[str]:
    return session_blocks(CaseHistory.of(case, Session(id="s", user_id=case.question_id)).sessions)


@pytest.mark.parametrize("budget", [0, 1500, 7744, 30000, 10**7])
@pytest.mark.parametrize("ratio", [1.0, 1.37])
def test_first_kept_is_the_definitions_answer_on_real_haystacks(s_cases, budget, ratio):
    counter = o200k_counter() if ratio == 1.0 else ScaledCounter(o200k_counter(), ratio)
    for case in s_cases:
        blocks = _blocks(case)

        def prompt(kept, case=case):
            return f"head {''.join(kept)} {case.question_date} {case.question}"

        assert first_kept(blocks, prompt, counter.count, budget) == _naive_first_kept(
            blocks, prompt, counter.count, budget
        ), (case.question_id, budget, ratio)


def test_a_long_haystack_is_settled_with_a_few_whole_prompt_counts(s_cases):
    case = s_cases[0]
    blocks = _blocks(case)
    whole = []

    def count(text: str) -> int:
        if text.startswith("head"):
            whole.append(len(text))
        return o200k_counter().count(text)

    def prompt(kept):
        return "head " + "".join(kept)

    i = first_kept(blocks, prompt, count, 7744)
    assert 0 < i < len(blocks) - 1  # an `_s` haystack (~115K tokens) does not fit 8K: most sessions go
    assert len(whole) <= 5, len(whole)  # not one whole-prompt count per dropped session (~45 here)


def test_the_mode_drops_the_oldest_sessions_and_keeps_question_date_and_newest(s_cases):
    case = s_cases[0]
    model = FakeModel(script=["an answer"])
    out = answer(LongMemEvalOfficialMode(), _ctx(case, window=8192, model=model))
    (call,) = model.calls
    text = call["messages"][0]["content"]
    blocks = _blocks(case)
    t = out.truncation
    assert t["truncated"] and t["dropped_sessions"] > 0 and t["fits"]
    assert t["kept_sessions"] + t["dropped_sessions"] == len(blocks)
    assert t["estimated_prompt_tokens"] <= t["budget_tokens"] == 8192 - 384 - 64 < t["estimated_full_prompt_tokens"]
    assert blocks[-1] in text and blocks[0] not in text  # the newest session stays, the oldest goes
    assert text.endswith(f"Current Date: {case.question_date}\nQuestion: {case.question}\nAnswer:")
    assert out.prediction == "an answer" and call["params"] == {"max_tokens": 384}


def test_a_prompt_that_fits_is_sent_whole(s_cases):
    case = s_cases[1]
    model = FakeModel(script=["ok"])
    out = answer(LongMemEvalOfficialMode(), _ctx(case, window=10**6, model=model))
    assert not out.truncation["truncated"] and out.truncation["dropped_sessions"] == 0
    assert all(b in model.calls[0]["messages"][0]["content"] for b in _blocks(case))
