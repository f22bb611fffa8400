"""Prompt assembly: injection modes and merge rules, history cap, tool-result compaction, tailoring."""

from __future__ import annotations

import pytest

from harness.session.assembly import (
    COMPACTED_PLACEHOLDER,
    assemble,
    compact_tool_results,
    format_summary_block,
    format_summary_block_user,
    history_events,
    tailor,
)
from harness.session.boundary import Summary, SummaryBoundary
from harness.session.events import Event
from harness.session.tokens import ApproxCounter

CHARS = ApproxCounter(1.0)


def ev(i, role, content, **kw):
    return Event(id=f"e{i}", index=i, role=role, content=content, timestamp=1000.0 + i, **kw)


EVENTS = [
    ev(0, "user", "u0"),
    ev(1, "assistant", "a1"),
    ev(2, "user", "u2"),
    ev(3, "assistant", "a3"),
    ev(4, "user", "u4"),
    ev(5, "assistant", "a5"),
]


def summary_at(last_id: str | None, ts: float) -> Summary:
    return Summary("S", SummaryBoundary(1, "", ts, last_id), ts)


def no_adjacent_users(messages) -> bool:
    return all(not (a["role"] == b["role"] == "user") for a, b in zip(messages, messages[1:]))


def test_reference_wrapper_texts():
    assert format_summary_block("X") == (
        "Here is a brief summary of your previous interactions:\n\n<summary_of_previous_interactions>\nX\n"
        "</summary_of_previous_interactions>\n\nNote: this information is from previous interactions and may be "
        "outdated. You should ALWAYS prefer information from this conversation over the past summary.\n"
    )
    assert format_summary_block_user("X").startswith("Context from previous interactions:\n\n")


def test_system_injection_merges_after_blank_line_and_shows_events_after_boundary():
    msgs = assemble("INSTR", summary_at("e3", 1003.0), EVENTS, "question?")
    assert msgs == [
        {"role": "system", "content": "INSTR\n\n" + format_summary_block("S")},
        {"role": "user", "content": "u4"},
        {"role": "assistant", "content": "a5"},
        {"role": "user", "content": "question?"},
    ]
    # The reference run: the summary covers every event, so only system + question remain.
    assert [m["role"] for m in assemble("INSTR", summary_at("e5", 1005.0), EVENTS, "q")] == ["system", "user"]
    # No system prompt: the block becomes the system message.
    assert assemble("", summary_at("e5", 1005.0), EVENTS, "q")[0]["content"] == format_summary_block("S")


def test_user_injection_merges_into_first_user_message():
    block = format_summary_block_user("S")
    msgs = assemble("INSTR", summary_at("e1", 1001.0), EVENTS, "q", injection="user")
    assert msgs[0] == {"role": "system", "content": "INSTR"}
    assert msgs[1] == {"role": "user", "content": block + "\n\nu2"}
    assert [m["content"] for m in msgs[2:]] == ["a3", "u4", "a5", "q"]
    # No history after the boundary: merged into the current message.
    msgs = assemble("INSTR", summary_at("e5", 1005.0), EVENTS, {"role": "user", "content": "q"}, injection="user")
    assert msgs == [{"role": "system", "content": "INSTR"}, {"role": "user", "content": block + "\n\nq"}]
    assert all(
        no_adjacent_users(assemble("I", summary_at(f"e{k}", 1000.0 + k), EVENTS, "q", injection=inj))
        for k in range(6)
        for inj in ("system", "user")
    )


def test_user_injection_inserts_a_user_message_when_there_is_none():
    history = [ev(0, "assistant", "a0")]
    tool_reply = {"role": "tool", "content": "r", "tool_call_id": "c"}
    msgs = assemble("I", summary_at(None, 999.0), history, tool_reply, injection="user")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[1]["content"] == format_summary_block_user("S")
    assert no_adjacent_users(msgs)


def test_no_summary_and_bad_injection():
    msgs = assemble("I", None, EVENTS, "q", injection="user")
    assert [m["content"] for m in msgs] == ["I", "u0", "a1", "u2", "a3", "u4", "a5", "q"]
    with pytest.raises(ValueError, match="injection"):
        assemble("I", None, EVENTS, "q", injection="middle")


def test_history_cap_never_drops_events_after_the_boundary():
    summary = summary_at("e0", 1000.0)
    assert [e.id for e in history_events(EVENTS, summary, history_cap=2)] == ["e1", "e2", "e3", "e4", "e5"]
    # Without a summary the cap keeps the newest events and starts at a user turn.
    assert [e.id for e in history_events(EVENTS, None, history_cap=3)] == ["e4", "e5"]
    assert [e.id for e in history_events(EVENTS, None, history_cap=10)] == [e.id for e in EVENTS]
    assert len(assemble("I", summary, EVENTS, "q", history_cap=1)) == 1 + 5 + 1


def tool_round(i: int, result: str) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": "{}"}}],
        },
        {"role": "tool", "content": result, "tool_call_id": f"c{i}"},
    ]


def test_compaction_replaces_older_results_and_cuts_oversized():
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "q"},
        *tool_round(1, "old result"),
        *tool_round(2, "older? no, newer"),
        *tool_round(3, "H" * 50 + "T" * 50),
    ]
    out = compact_tool_results(msgs, keep_recent=2, max_result_tokens=20, token_counter=CHARS)
    assert out.replaced == 1 and out.truncated == 1 and out.changed
    assert out.messages[3]["content"] == COMPACTED_PLACEHOLDER
    assert out.messages[5]["content"] == "older? no, newer"
    cut = out.messages[7]["content"]
    assert cut.startswith("H" * 10) and cut.endswith("T" * 10) and "80 tokens omitted" in cut
    assert [m.get("tool_call_id") for m in out.messages] == [m.get("tool_call_id") for m in msgs]
    assert msgs[3]["content"] == "old result"  # input untouched
    assert not compact_tool_results(msgs, keep_recent=5).changed


def test_tailoring_drops_oldest_rounds_keeps_system_and_current_turn():
    msgs = [
        {"role": "system", "content": "S" * 10},
        {"role": "user", "content": "u" * 20},
        *tool_round(1, "r" * 20),
        {"role": "assistant", "content": "a" * 20},
        {"role": "user", "content": "v" * 20},
        {"role": "assistant", "content": "b" * 20},
        {"role": "user", "content": "now"},
        *tool_round(2, "x" * 30),
    ]
    full = CHARS.count_messages(msgs)
    assert tailor(msgs, full, CHARS).dropped == 0
    out = tailor(msgs, full - 1, CHARS)
    assert out.dropped == 4 and out.fits and out.tokens_after <= full - 1  # the first round, tool pair included
    assert out.messages[0]["role"] == "system" and out.messages[1]["content"] == "v" * 20
    tight = tailor(msgs, 10, CHARS)
    assert not tight.fits
    assert [m["role"] for m in tight.messages] == ["system", "user", "assistant", "tool"]  # current turn intact
    roles = [m["role"] for m in out.messages]
    for i, r in enumerate(roles):  # every tool result still follows its call
        if r == "tool":
            assert out.messages[i - 1].get("tool_calls")
