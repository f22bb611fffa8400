"""The one in-process fake model (harness/testing/faults.FakeModel.chat) the unit tests share."""

import pytest

from harness.llm.types import LLMError, Usage
from harness.testing.faults import FakeModel, ToolStep


def test_script_steps_in_order_then_the_fallback_and_every_call_recorded():
    m = FakeModel(
        script=["a", ToolStep("session_search", '{"query": "x"}'), LLMError("down")],
        then=lambda n: f"after {n}",
        usage=Usage(7, 3),
        latency_s=0.2,
        model="m",
    )
    first = m.chat([{"role": "user", "content": "q"}], temperature=0)
    assert (first.content, first.usage, first.latency_s, first.model) == ("a", Usage(7, 3), 0.2, "m")
    tool = m.chat([{"role": "user", "content": "q"}], tools=[{"type": "function"}], purpose="answer")
    assert tool.tool_calls[0]["function"] == {"name": "session_search", "arguments": '{"query": "x"}'}
    with pytest.raises(LLMError, match="down"):
        m.chat([{"role": "user", "content": "q"}])
    assert m.chat([], purpose="judge").content == "after 4"
    assert [c["purpose"] for c in m.calls] == ["answer", "answer", "answer", "judge"]
    assert m.calls[0]["params"] == {"temperature": 0} and m.calls[1]["tools"] == [{"type": "function"}]


def test_a_call_past_the_script_without_a_fallback_fails_the_test():
    m = FakeModel(script=["only"])
    m.chat([])
    with pytest.raises(AssertionError, match="past the script"):
        m.chat([])


def test_fixed_replies_per_purpose_and_a_function_script():
    m = FakeModel(script=lambda msgs: f"{len(msgs)} messages", fixed={"summary": "S"})
    assert m.chat([{"role": "user", "content": "x"}] * 2).content == "2 messages"
    assert m.chat([], purpose="summary").content == "S"
