"""Summarizer behaviour against a scripted model: prompts, formatting, boundary and delta,
incremental summaries, hooks, SkipRecent, triggers, cache-safe forking, tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from harness.llm.types import Usage
from harness.prompts.summary import trpc_default_template
from harness.session.boundary import Summary, SummaryBoundary
from harness.session.events import Event, Session, ToolCall
from harness.session.skip_recent import keep_recent_rounds, safe_skip, skip_last_events
from harness.session.summary import (
    PromptError,
    Summarizer,
    SummaryError,
    SummaryPrompt,
    events_after,
    format_conversation,
    keep_summary_tag,
    pick_summary,
)
from harness.session.tokens import MESSAGE_OVERHEAD, ApproxCounter, ScaledCounter, o200k_counter
from harness.session.triggers import (
    AllOf,
    AnyOf,
    ContextRatio,
    EventCount,
    TimeSinceLastEvent,
    TokenCount,
    TriggerContext,
    all_of,
    any_of,
    parse_triggers,
)
from harness.testing.faults import FakeModel

CHARS = ApproxCounter(1.0)  # 1 token per character: exact, easy arithmetic


def ScriptedModel(replies: Sequence[str] | Callable[[list[dict]], str] = (), cached: int | None = None) -> FakeModel:
    """Answers from a script (a list, then "summary N"; or a function of the messages), recording calls."""
    return FakeModel(
        script=replies, then=lambda n: f"summary {n}", usage=Usage(100, 10, cached), latency_s=0.01, model="scripted"
    )


def ev(i: int, role: str, content: str, **kw: Any) -> Event:
    return Event(id=f"e{i}", index=i, role=role, content=content, timestamp=1000.0 + i, **kw)


def chat_session(n: int, text: str = "turn") -> Session:
    s = Session("s1", "u1")
    for i in range(n):
        s.append(ev(i, "user" if i % 2 == 0 else "assistant", f"{text} {i}"))
    return s


def tool_session() -> Session:
    s = Session("s2", "u1")
    s.extend(
        [
            ev(0, "user", "find my order"),
            ev(1, "assistant", "", tool_calls=(ToolCall("c1", "lookup", '{"q": "order"}'),)),
            ev(2, "tool", "order #42 shipped", tool_call_id="c1", tool_name="lookup"),
            ev(3, "assistant", "Your order #42 shipped."),
            ev(4, "user", "thanks"),
            ev(5, "assistant", "", tool_calls=(ToolCall("c2", "noop", "{}"),)),
            ev(6, "tool", "ok", tool_call_id="c2", tool_name="noop"),
            ev(7, "assistant", "Done."),
        ]
    )
    return s


def conversation_of(call: dict) -> str:
    content = call["messages"][-1]["content"]
    return content.split("<conversation>\n", 1)[1].split("\n</conversation>", 1)[0]


# --- prompts -------------------------------------------------------------------------------------
def test_prompt_validation_errors_name_the_problem():
    with pytest.raises(PromptError, match="must contain {conversation_text}"):
        SummaryPrompt("Summarize please.")
    with pytest.raises(PromptError, match="system_template must not contain"):
        SummaryPrompt("{conversation_text}", system_template="Here: {conversation_text}")
    with pytest.raises(PromptError, match=r"unknown placeholder\(s\) \['language'\]"):
        SummaryPrompt("{conversation_text} in {language}")
    with pytest.raises(PromptError, match="unknown placeholder"):
        SummaryPrompt("{conversation_text}", system_template="{tone}")


def test_prompt_renders_words_and_keeps_braces_in_conversation():
    p = SummaryPrompt("At most {max_summary_words} words. {conversation_text}", "Max {max_summary_words}.", 50)
    msgs = p.render('user: my JSON is {"a": {conversation_text}}')
    assert msgs == [
        {"role": "system", "content": "Max 50."},
        {"role": "user", "content": 'At most 50 words. user: my JSON is {"a": {conversation_text}}'},
    ]
    assert SummaryPrompt("{max_summary_words}|{conversation_text}").render("x")[-1]["content"] == "|x"


def test_trpc_default_prompt_is_the_reference_text():
    text = trpc_default_template()
    assert text.startswith("Analyze the following conversation between a user and an assistant, and provide a concise")
    assert text.endswith("Do not make anything up.\n\n<conversation>\n{conversation_text}\n</conversation>\n\nSummary:")
    limited = trpc_default_template(100)
    assert "Do not make anything up. Please keep the summary within {max_summary_words} words.\n\n" in limited
    assert "Please keep the summary within 100 words." in SummaryPrompt.trpc_default(100).render("x")[0]["content"]


# --- formatting ------------------------------------------------------------------------------------
def test_conversation_format_authors_and_tools():
    text = format_conversation(tool_session().events)
    assert text.splitlines() == [
        "user: find my order",
        'lme-eval-agent: [Called tool: lookup with args: {"q": "order"}]',
        "lme-eval-agent: [lookup returned: order #42 shipped]",
        "lme-eval-agent: Your order #42 shipped.",
        "user: thanks",
        "lme-eval-agent: [Called tool: noop]",
        "lme-eval-agent: [noop returned: ok]",
        "lme-eval-agent: Done.",
    ]
    events = [ev(0, "user", "  padded  "), ev(1, "assistant", "   "), ev(2, "assistant", "hi", author="other-agent")]
    assert format_conversation(events, agent_name="bot") == "user: padded\nother-agent: hi"


# --- boundary and delta ----------------------------------------------------------------------------
def test_first_summary_request_shape_and_boundary():
    model = ScriptedModel(["  The user said hello.  "])
    out = Summarizer(model, SummaryPrompt.trpc_default()).summarize(chat_session(4), force=True)
    (call,) = model.calls
    assert call["purpose"] == "summary" and call["params"] == {} and call["tools"] is None
    assert [m["role"] for m in call["messages"]] == ["user"]
    assert conversation_of(call) == "user: turn 0\nlme-eval-agent: turn 1\nuser: turn 2\nlme-eval-agent: turn 3"
    assert out.summary == Summary("The user said hello.", SummaryBoundary(1, "", 1003.0, "e3"), 1003.0)
    assert (out.chunks, out.skipped_reason, out.input_events, len(out.calls)) == (1, None, 4, 1)


def test_delta_prepends_previous_summary_and_advances_boundary():
    session = chat_session(4)
    model = ScriptedModel(["first", "second"])
    summarizer = Summarizer(model, SummaryPrompt.trpc_default())
    first = summarizer.summarize(session, force=True).summary
    session.extend([ev(4, "user", "new question"), ev(5, "assistant", "new answer")])
    out = summarizer.summarize(session, first, force=True)
    assert conversation_of(model.calls[1]) == "system: first\nuser: new question\nlme-eval-agent: new answer"
    assert out.summary.text == "second"
    assert out.summary.boundary.last_event_id == "e5" and out.input_events == 2
    again = summarizer.summarize(session, out.summary, force=True)
    assert again.summary is None and again.skipped_reason == "no events to summarize after the boundary"
    assert len(model.calls) == 2


def test_events_after_falls_back_to_timestamp_when_id_unknown():
    events = chat_session(5).events
    assert [e.id for e in events_after(events, SummaryBoundary(1, "", 1002.0, "e2"))] == ["e3", "e4"]
    assert [e.id for e in events_after(events, SummaryBoundary(1, "", 1002.0, "gone"))] == ["e3", "e4"]
    assert len(events_after(events, None)) == 5


def test_previous_summary_of_another_filter_key_is_refused():
    prev = Summary("x", SummaryBoundary(1, "a", 0.0, None), 0.0)
    with pytest.raises(ValueError, match="filter_key 'a'"):
        Summarizer(ScriptedModel(), SummaryPrompt.trpc_default()).summarize(chat_session(2), prev, filter_key="b")


def test_filter_keys_are_hierarchical():
    summaries = {
        "": Summary("all", SummaryBoundary(1, "", 0, None), 0),
        "app": Summary("app", SummaryBoundary(1, "app", 0, None), 0),
    }
    assert pick_summary(summaries, "app/agent/x").text == "app"
    assert pick_summary(summaries, "other").text == "all"
    assert pick_summary({"app": summaries["app"]}, "other") is None
    s = Session("s", "u")
    s.extend([ev(0, "user", "a1", author="user"), ev(1, "user", "b1"), ev(2, "user", "a2")])
    keys = {"e0": "app/a", "e1": "app/b", "e2": ""}
    model = ScriptedModel()
    Summarizer(model, SummaryPrompt.trpc_default(), event_filter_key=lambda e: keys[e.id]).summarize(
        s, force=True, filter_key="app/a"
    )
    assert conversation_of(model.calls[0]) == "user: a1\nuser: a2"  # unkeyed events belong to every key


# --- incremental -----------------------------------------------------------------------------------
def test_history_larger_than_window_is_folded_in_chunks_that_fit():
    session = chat_session(40, text="x" * 40)
    prompt = SummaryPrompt("S:{conversation_text}")
    model = ScriptedModel(lambda msgs: f"sum{len(model.calls)}")
    window, reserve = 400, 50
    out = Summarizer(model, prompt, context_window=window, token_counter=CHARS, output_reserve=reserve).summarize(
        session, force=True
    )
    assert out.chunks == len(model.calls) > 1
    seen: list[str] = []
    for i, call in enumerate(model.calls):
        assert CHARS.count_messages(call["messages"]) <= window - reserve
        lines = call["messages"][0]["content"][2:].split("\n")
        if i:
            assert lines[0] == f"system: sum{i}"  # the running summary is the previous chunk's output
            lines = lines[1:]
        seen += lines
    assert seen == format_conversation(session.events).split("\n")  # every event, in order, once
    assert out.summary.text == f"sum{out.chunks}" and out.summary.boundary.last_event_id == "e39"


def test_single_event_larger_than_window_is_split_not_dropped():
    session = Session("s", "u")
    words = " ".join(f"w{i}" for i in range(300))
    session.append(ev(0, "user", words))
    model = ScriptedModel(lambda m: "s")
    out = Summarizer(
        model, SummaryPrompt("{conversation_text}"), context_window=400, token_counter=CHARS, output_reserve=100
    ).summarize(session, force=True)
    assert out.chunks > 1
    body = "".join(c["messages"][0]["content"].removeprefix("system: s\n") for c in model.calls)
    assert body.replace(" ", "") == f"user: {words}".replace(" ", "")


def test_window_too_small_for_prompt_is_an_error():
    with pytest.raises(SummaryError, match="does not fit"):
        Summarizer(
            ScriptedModel(), SummaryPrompt.trpc_default(), context_window=100, token_counter=CHARS, output_reserve=10
        ).summarize(chat_session(2), force=True)


def test_empty_summary_is_an_error_naming_it():
    with pytest.raises(SummaryError, match=r"'scripted' returned an empty summary for session 's1'"):
        Summarizer(ScriptedModel(["   "]), SummaryPrompt.trpc_default()).summarize(chat_session(2), force=True)


# --- hooks and params ------------------------------------------------------------------------------
def test_pre_hook_rewrites_input_and_post_hook_rewrites_output():
    model = ScriptedModel(["Alice lives at [REDACTED]", ""])
    seen_events = []

    def redact(text, events):
        seen_events.extend(events)
        return text.replace("221B Baker Street", "[REDACTED]")

    s = Session("s", "u")
    s.append(ev(0, "user", "I live at 221B Baker Street"))
    out = Summarizer(
        model, SummaryPrompt("{conversation_text}"), pre_hook=redact, post_hook=lambda t: t.upper()
    ).summarize(s, force=True)
    assert model.calls[0]["messages"][0]["content"] == "user: I live at [REDACTED]"
    assert [e.id for e in seen_events] == ["e0"]
    assert out.summary.text == "ALICE LIVES AT [REDACTED]"
    keep = Summarizer(ScriptedModel(["kept"]), SummaryPrompt("{conversation_text}"), post_hook=lambda t: "")
    assert keep.summarize(s, force=True).summary.text == "kept"


def test_hook_failure_names_the_hook():
    def broken(text):
        raise KeyError("boom")

    with pytest.raises(SummaryError, match="post-summary hook .*broken"):
        Summarizer(ScriptedModel(["x"]), SummaryPrompt("{conversation_text}"), post_hook=broken).summarize(
            chat_session(2), force=True
        )


def test_keep_summary_tag_post_hook():
    assert keep_summary_tag("<analysis>thinking</analysis>\n<summary>\n1. Intent\n</summary>") == "1. Intent"
    assert keep_summary_tag("<analysis>a</analysis><summary>cut off by max tok") == "cut off by max tok"
    assert keep_summary_tag("no tags") is None
    prompt = SummaryPrompt("{conversation_text}", post_hook=keep_summary_tag)
    out = Summarizer(ScriptedModel(["<analysis>x</analysis><summary>S</summary>"]), prompt).summarize(
        chat_session(2), force=True
    )
    assert out.summary.text == "S"


def test_generation_params_sent_only_when_set():
    model = ScriptedModel()
    Summarizer(model, SummaryPrompt.trpc_default(), max_tokens=256, temperature=0.0).summarize(
        chat_session(2), force=True
    )
    assert model.calls[0]["params"] == {"max_tokens": 256, "temperature": 0.0}


# --- SkipRecent ------------------------------------------------------------------------------------
def test_safe_skip_never_separates_a_tool_call_from_its_result():
    events = tool_session().events
    # A cut landing on the tool result (index 2) is widened to the assistant call (index 1).
    assert safe_skip(events, 6) == 7
    assert safe_skip(events, 2) == 3  # cut at index 6 (tool) -> index 5
    assert safe_skip(events, 100) == 8 and safe_skip(events, -1) == 0
    assert skip_last_events(2)(events) == 3


def test_keep_recent_rounds_under_token_cap():
    events = tool_session().events
    assert keep_recent_rounds(1)(events) == 4  # the round starting at "thanks"
    assert keep_recent_rounds(2)(events) == 8
    last_round = CHARS.count_messages([e.to_message() for e in events[4:]])
    assert keep_recent_rounds(2, max_tokens=last_round, token_counter=CHARS)(events) == 4
    assert keep_recent_rounds(2, max_tokens=last_round - 1, token_counter=CHARS)(events) == 0
    assert keep_recent_rounds(0)(events) == 0


def test_summarizer_leaves_recent_rounds_raw():
    session = tool_session()
    model = ScriptedModel()
    out = Summarizer(model, SummaryPrompt("{conversation_text}"), skip_recent=keep_recent_rounds(1)).summarize(
        session, force=True
    )
    assert out.summary.boundary.last_event_id == "e3" and out.input_events == 4
    assert "thanks" not in model.calls[0]["messages"][0]["content"]
    # A user-supplied SkipRecent that would split a pair is widened too.
    out = Summarizer(ScriptedModel(), SummaryPrompt("{conversation_text}"), skip_recent=lambda ev_: 6).summarize(
        session, force=True
    )
    assert out.summary.boundary.last_event_id == "e0"


def test_skip_recent_leaving_no_user_message_skips_unless_previous_summary():
    session = tool_session()
    # Delta after e0 is e1..e7; skipping 4 keeps e1..e3: a tool round without any user message.
    s = Summarizer(ScriptedModel(), SummaryPrompt("{conversation_text}"), skip_recent=lambda events: 4)
    after_e0 = Summary("prev", SummaryBoundary(1, "", 1000.0, "e0"), 1000.0)
    lone = Session("s2", "u1", events=list(session.events[1:]))
    assert s.summarize(lone, force=True).skipped_reason == "no events to summarize after the boundary"
    out = s.summarize(session, after_e0, force=True)  # the previous summary gives those events context
    assert out.summary is not None and out.summary.boundary.last_event_id == "e3"


# --- triggers --------------------------------------------------------------------------------------
def tctx(n_events: int, text: str = "", window: int | None = None, now: float = 2000.0) -> TriggerContext:
    return TriggerContext(chat_session(n_events).events, text, CHARS, window, now)


def test_each_trigger():
    assert EventCount(3)(tctx(4)) and not EventCount(4)(tctx(4))
    assert TokenCount(9)(tctx(1, "x" * 10)) and not TokenCount(10)(tctx(1, "x" * 10))
    assert not TokenCount(0)(tctx(0, "xx"))  # nothing new, nothing to count
    # last event of chat_session(2) is at 1001.0
    assert TimeSinceLastEvent(60)(tctx(2, now=1062.0)) and not TimeSinceLastEvent(60)(tctx(2, now=1060.0))
    assert ContextRatio(0.5, min_tokens=0)(tctx(1, "x" * 501, window=1000))
    assert not ContextRatio(0.5, min_tokens=0)(tctx(1, "x" * 500, window=1000))
    assert ContextRatio(0.5).threshold(tctx(1, window=1000)) == 2000  # reference minimum
    assert ContextRatio(0.5).threshold(tctx(1)) == 4096  # fallback window 8192
    with pytest.raises(ValueError):
        ContextRatio(1.5)


def test_any_and_all():
    yes, no = EventCount(0), EventCount(100)
    ctx = tctx(2)
    assert any_of(no, yes)(ctx) and not any_of(no, no)(ctx)
    assert all_of(yes, yes)(ctx) and not all_of(yes, no)(ctx)
    assert all_of(any_of(no, yes), yes)(ctx)


def test_triggers_gate_summaries_and_force_bypasses():
    model = ScriptedModel()
    s = Summarizer(model, SummaryPrompt.trpc_default(), triggers=EventCount(40))
    out = s.summarize(chat_session(10))
    assert out.summary is None and out.skipped_reason == "triggers not met" and not model.calls
    assert s.summarize(chat_session(10), force=True).summary is not None
    assert s.summarize(chat_session(41)).summary is not None
    listed = Summarizer(ScriptedModel(), SummaryPrompt.trpc_default(), triggers=[EventCount(1), EventCount(50)])
    assert listed.summarize(chat_session(10)).skipped_reason == "triggers not met"  # a list means all


def test_trigger_spec_strings_for_the_command_line():
    t = parse_triggers("any(events>40, all(tokens>8000,idle>300), ratio>0.5)")
    assert isinstance(t, AnyOf) and t.triggers[0] == EventCount(40) and t.triggers[2] == ContextRatio(0.5)
    assert t.triggers[1] == AllOf((TokenCount(8000), TimeSinceLastEvent(300.0)))
    assert parse_triggers("events>3")(tctx(4))
    for bad in ("any(events>1", "turns>3", "events>3)"):
        with pytest.raises(ValueError, match="trigger spec"):
            parse_triggers(bad)
    gated = Summarizer(ScriptedModel(), SummaryPrompt.trpc_default(), triggers="events>40")
    assert gated.summarize(chat_session(10)).skipped_reason == "triggers not met"


# --- cache-safe forking ----------------------------------------------------------------------------
def test_fork_request_is_parent_plus_one_compaction_message():
    parent = [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "r", "tool_call_id": "c"},
    ]
    tools = [{"type": "function", "function": {"name": "t", "parameters": {}}}]
    model = ScriptedModel(["forked summary"], cached=90)
    prompt = SummaryPrompt("Summarize:\n{conversation_text}", system_template="You summarize.")
    out = Summarizer(model, prompt, cache_safe_fork=True).summarize(
        chat_session(4), force=True, parent_request=parent, parent_tools=tools
    )
    sent = model.calls[0]["messages"]
    assert sent[:-1] == parent and len(sent) == len(parent) + 1
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("You summarize.\n\nSummarize:\n")
    assert model.calls[0]["tools"] == tools
    assert out.forked and out.cached_prompt_tokens == 90 and out.summary.text == "forked summary"
    assert out.summary.boundary.last_event_id == "e3"
    # Without a parent request the summarizer falls back to the ordinary request.
    plain = Summarizer(ScriptedModel(), prompt, cache_safe_fork=True).summarize(chat_session(2), force=True)
    assert not plain.forked and plain.cached_prompt_tokens is None


# --- tokens ----------------------------------------------------------------------------------------
def test_o200k_counter_offline_and_message_overhead():
    c = o200k_counter()
    assert c is o200k_counter()
    assert c.encoding.encode("hello world") == [24912, 2375]
    assert c.count("") == 0 and c.count("<|endoftext|>") > 1  # special text counted as plain text
    msgs = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": None}]
    assert c.count_messages(msgs) == 2 + 2 * MESSAGE_OVERHEAD
    tc = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    assert c.count_messages([tc]) > MESSAGE_OVERHEAD
    assert ApproxCounter(4).count("abcdefghi") == 3
    assert ScaledCounter(ApproxCounter(4), 1.5).count("abcdefghi") == 5
