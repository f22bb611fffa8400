"""The last wire differences from the reference (issue 24, part 2), each against a fixture transcribed from it.

tests/fixtures/go/semantics.json was printed by tests/fixtures/go/semantics.go (Go's standard library);
tests/fixtures/trpc/session_filtering.json is transcribed from the framework's session filtering.
"""

from __future__ import annotations

import json
import re

import pytest

from harness.golang import GO_SPACE, go_fold, go_json, go_trim_space, json_loads_deep
from harness.llm.types import Usage
from harness.scoring.base import ScoreInput
from harness.scoring.judges import LongMemEvalJudge, TrpcJudge, parse_trpc_judge_reply
from harness.session.detailed_prompt import strip_detailed_summary_output
from harness.session.events import Event, Session
from harness.session.summary import Summarizer, SummaryPrompt
from harness.testing.faults import FakeModel
from tests.support.paths import FIXTURES

FIX = FIXTURES
GO = json.loads((FIX / "go" / "semantics.json").read_text())
FILTERING = json.loads((FIX / "trpc" / "session_filtering.json").read_text())


def _pairs(name: str) -> list[tuple[str, str]]:
    return [(p["in"], p["out"]) for p in GO[name]]


# --- Go's text semantics ------------------------------------------------------------------------------
def test_go_space_is_exactly_unicode_is_space():
    assert sorted(map(ord, GO_SPACE)) == GO["is_space"]
    assert not any(chr(c) in GO_SPACE for c in range(0x1C, 0x20))  # what Python's strip() removes besides


@pytest.mark.parametrize("text, want", _pairs("trim_space"))
def test_trim_space_is_gos(text, want):
    assert go_trim_space(text) == want


@pytest.mark.parametrize("text, want", _pairs("json_no_html_escape"))
def test_tool_result_json_escapes_line_separators_as_go(text, want):
    assert go_json(text) == want


@pytest.mark.parametrize("text, want", _pairs("strip_detailed"))
def test_detailed_prompt_post_processing_folds_and_spaces_as_go(text, want):
    assert strip_detailed_summary_output(text) == want


def test_go_fold_is_simple_case_folding_only():
    assert GO["fold_kelvin"] is True
    assert re.fullmatch(go_fold("k"), "\u212a") and re.fullmatch(go_fold("s"), "\u017f")
    assert not re.fullmatch(go_fold("i"), "\u0130") and not re.fullmatch(go_fold("i"), "\u0131")


# --- deeply nested judge replies ------------------------------------------------------------------------
def _deep_reply(depth: int, where: str) -> str:
    if where == "x":
        a = depth - 1
        return '{"correct":true,"confidence":0.75,"x":' + "[" * a + "]" * a + "}"
    return '{"x":' + '{"y":' * (depth - 2) + "{}" + "}" * (depth - 2) + ',"correct":true,"confidence":0.5}'


@pytest.mark.parametrize("case", GO["deep_judge_reply"], ids=lambda c: f"{c['where']}-{c['depth']}")
def test_deeply_nested_judge_reply_decodes_as_go_up_to_its_depth_limit(case):
    verdict = parse_trpc_judge_reply(_deep_reply(case["depth"], case["where"]))
    if case["ok"]:
        assert verdict.parse_mode == "json"
        assert (verdict.correct, verdict.confidence) == (case["correct"], case["confidence"])
    else:  # Go: "exceeded max depth", so the reference's lenient fallback
        assert verdict.parse_mode == "fallback" and "exceeded max depth" in (verdict.error or "")
        assert verdict.confidence == 0.5


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, -0, 2.5e3, "x\\u00e9\\n", true, false, null, {}, []], "b": {"c": [[{"d": "\\ud83d\\ude00"}]]}}',
        " [ ] ",
        '"s"',
        "-12",
        '{"a":1,"a":2}',
    ],
)
def test_iterative_json_decoder_equals_json_loads(text):
    assert json_loads_deep(text) == json.loads(text, parse_int=float, object_pairs_hook=list)


@pytest.mark.parametrize(
    "text", ['{"a":1,}', "[1 2]", "[1] x", "NaN", '{"a":Infinity}', "[01]", '{"a" 1}', "[", '"\x01"', "", "tru"]
)
def test_iterative_json_decoder_rejects_what_json_loads_rejects(text):
    with pytest.raises(ValueError):
        json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    with pytest.raises(ValueError):
        json_loads_deep(text)


# --- the summary input starts at the first user turn ----------------------------------------------------
def _session(roles: list[str], contents: dict[int, str] | None = None) -> Session:
    s = Session("s1", "u1")
    for i, role in enumerate(roles):
        text = (contents or {}).get(i, f"{role} turn {i}")
        s.append(Event(id=f"e{i}", index=i, role=role, content=text, timestamp=1000.0 + i))
    return s


@pytest.mark.parametrize("case", FILTERING["cases"], ids=lambda c: "-".join(r[0] for r in c["appended"]))
def test_summary_input_is_the_references_filtered_session(case):
    model = FakeModel(then=lambda n: f"summary {n}", usage=Usage(10, 2))
    out = Summarizer(model, SummaryPrompt.trpc_default()).summarize(_session(case["appended"]), force=True)
    if not case["kept"]:
        assert out.summary is None and not model.calls
        return
    (call,) = model.calls
    text = call["messages"][-1]["content"]
    shown = [i for i, role in enumerate(case["appended"]) if f"{role} turn {i}" in text]
    assert shown == case["kept"] and out.input_events == len(case["kept"])
    assert out.summary is not None and out.summary.boundary.last_event_id == f"e{len(case['appended']) - 1}"


def test_summary_and_answers_trim_as_go():
    model = FakeModel(script=["\x1c summary \x1f\n"], usage=Usage(10, 2))
    s = _session(["user"], {0: "\x1e hello \x1d"})
    out = Summarizer(model, SummaryPrompt.trpc_default()).summarize(s, force=True)
    assert out.summary is not None and out.summary.text == "\x1c summary \x1f"
    assert "user: \x1e hello \x1d" in model.calls[0]["messages"][-1]["content"]


# --- judge samples per mode ------------------------------------------------------------------------------
@pytest.mark.parametrize("judge_cls", [TrpcJudge, LongMemEvalJudge])
def test_judge_samples_once_per_mode_only_when_set(judge_cls):
    item = ScoreInput("q1", "single-session-user", "Where?", "Kyoto", "Osaka", mode="summary")
    for per_mode, salt in ((False, None), (True, "judge-mode:summary")):
        model = FakeModel(then=lambda n: '{"correct": false, "confidence": 0.9, "reason": "r"}', usage=Usage(10, 2))
        judge_cls(model, sample_per_mode=per_mode).score(item)
        (call,) = model.calls
        assert call["params"].get("cache_salt") == salt


def test_judge_sample_per_mode_defaults_to_false_and_is_typed():
    assert TrpcJudge(FakeModel()).sample_per_mode is False
    assert LongMemEvalJudge(FakeModel()).sample_per_mode is False
    with pytest.raises(ValueError, match="judge.sample_per_mode"):
        TrpcJudge(FakeModel(), sample_per_mode="yes")  # type: ignore[arg-type]


def test_answers_are_trimmed_as_go():
    from runners.modes import LongContextMode
    from tests.runners.test_modes import _ctx
    from tests.support.contestant_kit import answer

    model = FakeModel(script=["\x1c Paris \x1f \n"], usage=Usage(10, 2))
    assert answer(LongContextMode(), _ctx(model, n_turns=2)).prediction == "\x1c Paris \x1f"


# --- tool results ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["trpc_parity", "default"])
def test_tool_results_escape_line_separators_as_gos_encoder(preset):
    from harness.retrieval.retriever import Retriever
    from harness.retrieval.tools import preset as search_preset
    from harness.session.boundary import SummaryBoundary

    s = _session(["user", "assistant"], {0: "my cat\u2028is named\u2029Miso"})
    b = SummaryBoundary(1, "", s.events[-1].timestamp, s.events[-1].id)
    tools = Retriever(search_preset(preset)).tools(s, boundary=b)
    for name, args in (("session_search", {"query": "cat named Miso"}), ("session_load", {"event_id": "e0"})):
        out = tools.call(name, json.dumps(args))
        assert out.ok, out.error
        assert "\u2028" not in out.content and "\u2029" not in out.content
        assert "my cat\\u2028is named\\u2029Miso" in out.content
        assert "my cat\u2028is named\u2029Miso" in json.dumps(json.loads(out.content), ensure_ascii=False)


# --- token counting: the published rule -----------------------------------------------------------------
def test_api_prompt_tokens_adds_roles_and_priming():
    from harness.session.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, api_prompt_tokens, o200k_counter

    c = o200k_counter()
    msgs = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Where did I go in May?"},
        {"role": "assistant", "content": "Paris.", "name": "bot"},
    ]
    # OpenAI's counting guide: 3 per message, every value's tokens (role, content, name + 1), 3 to prime the reply;
    # "system", "user", "assistant" and "bot" are one o200k token each.
    assert [c.count(r) for r in ("system", "user", "assistant", "bot")] == [1, 1, 1, 1]
    contents = sum(c.count(m["content"]) for m in msgs)
    assert api_prompt_tokens(c, msgs) == 3 * MESSAGE_OVERHEAD + 3 + contents + (1 + 1) + REPLY_PRIMING
    assert c.count_messages(msgs) == 3 * MESSAGE_OVERHEAD + contents  # the harness's own rule: no roles, no priming
