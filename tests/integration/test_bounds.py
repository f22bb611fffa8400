"""Bounded work and output: chunking cost is linear in the text; one event, one reply, one record and one
report cell each have a bound, and hitting it is said (a warning and a field), never silent."""

import json
import logging

import pytest

from harness.bounds import RecordBounds, bound_record
from harness.session.events import Session
from harness.session.summary import DEFAULT_MAX_EVENT_CHARS, Summarizer, SummaryPrompt
from harness.session.tokens import ApproxCounter
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from reports import html as H
from tests.harness.session.test_summary_engine import ScriptedModel, ev
from tests.support.bad_start import run


class WorkCounter(ApproxCounter):
    """1 token per character; tallies the calls and the characters it was asked to count (the work)."""

    def __init__(self):
        super().__init__(1.0)
        self.calls = 0
        self.chars = 0

    def count(self, text):
        self.calls += 1
        self.chars += len(text)
        return super().count(text)


def _summarize_one_event(n_words: int, **kw):
    session = Session("s", "u")
    session.append(ev(0, "user", " ".join(f"w{i}" for i in range(n_words))))
    counter = WorkCounter()
    model = ScriptedModel(lambda m: "s")
    out = Summarizer(
        model,
        SummaryPrompt("{conversation_text}"),
        context_window=2000,
        token_counter=counter,
        output_reserve=100,
        **kw,
    ).summarize(session, force=True)
    return out, counter, model, len(session.events[0].content)


def test_chunking_an_oversized_event_costs_work_linear_in_its_size():
    # Before: every chunk re-counted the whole remaining line and binary-searched over all of it (quadratic:
    # 10 M characters counted for 129 k of text, 738 M for 1.17 M).
    small, c_small, _, n_small = _summarize_one_event(20_000, max_event_chars=10**9)
    big, c_big, _, n_big = _summarize_one_event(80_000, max_event_chars=10**9)
    size_ratio = n_big / n_small
    assert big.chunks / small.chunks == pytest.approx(size_ratio, rel=0.1)
    assert c_big.chars / c_small.chars < size_ratio * 1.25
    assert c_big.calls / c_small.calls < size_ratio * 1.25
    assert c_big.chars < 50 * n_big  # a bounded number of passes over the text


def test_every_character_of_a_split_event_is_sent_once_in_order():
    out, _, model, _ = _summarize_one_event(3000, max_event_chars=10**9)
    body = "".join(c["messages"][0]["content"].removeprefix("system: s\n") for c in model.calls)
    assert body.replace(" ", "") == ("user: " + " ".join(f"w{i}" for i in range(3000))).replace(" ", "")
    assert out.truncated_events == 0


def test_an_event_over_max_event_chars_is_cut_with_a_note_and_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        out, counter, model, n = _summarize_one_event(200_000, max_event_chars=5_000)
    sent = "".join(c["messages"][0]["content"] for c in model.calls)
    assert f"{n - 5_000} more characters cut: this message exceeds summarizer.max_event_chars=5000" in sent
    assert out.truncated_events == 1 and "summarizer.max_event_chars=5000" in caplog.text
    assert counter.chars < 50 * 5_000  # the work depends on the bound, not on the event's size


def test_tool_call_arguments_over_max_event_chars_are_cut_with_a_note_and_a_warning(caplog):
    """An assistant event whose content is short but whose tool call carries 300 k characters of arguments."""
    from harness.session.events import ToolCall

    session = Session("s", "u")
    session.append(ev(0, "user", "find it"))
    args = '{"query": "' + " ".join(f"a{i}" for i in range(60_000)) + '"}'
    session.append(ev(1, "assistant", "", tool_calls=(ToolCall("c1", "search", args),)))
    counter = WorkCounter()
    model = ScriptedModel(lambda m: "s")
    with caplog.at_level(logging.WARNING):
        out = Summarizer(
            model,
            SummaryPrompt("{conversation_text}"),
            context_window=2000,
            token_counter=counter,
            output_reserve=100,
            max_event_chars=5_000,
        ).summarize(session, force=True)
    sent = "".join(c["messages"][0]["content"].removeprefix("system: s\n") for c in model.calls)
    flat = sent.replace(" ", "").replace("\n", "")  # a split line may gain or lose a space where it was split
    assert args[:5_000].replace(" ", "") in flat and args[:5_100].replace(" ", "") not in flat
    assert (
        f"{args[4_900:5_000]}\n[... {len(args) - 5_000} more characters cut: these tool-call arguments exceed "
        f"summarizer.max_event_chars=5000"
    ) in sent
    assert out.truncated_events == 1 and "summarizer.max_event_chars=5000" in caplog.text
    assert counter.chars < 50 * 5_000  # the work depends on the bound, not on the arguments' size


def test_the_event_bound_has_a_default():
    assert Summarizer(ScriptedModel(), SummaryPrompt("{conversation_text}")).max_event_chars == DEFAULT_MAX_EVENT_CHARS


def test_a_record_over_its_bounds_is_cut_and_says_so(caplog):
    reply = "a" * 1000
    rec = {
        "question_id": "q1",
        "mode": "m",
        "prediction": reply,
        "calls": [{"content": reply}],
        "final_messages": [{"role": "user", "content": "u" * 500}, {"role": "user", "content": "short"}],
        "summary": {"calls": [{"content": "s" * 300}], "text": "t" * 50},
    }
    with caplog.at_level(logging.WARNING):
        out = bound_record(rec, RecordBounds(max_reply_chars=100, max_field_chars=400))
    assert out["truncated"] is True
    assert out["truncated_fields"] == {
        "prediction": 1000,
        "calls[0].content": 1000,
        "final_messages[0].content": 500,
        "summary.calls[0].content": 300,
    }
    assert out["prediction"].startswith("a" * 100) and "900 more characters cut" in out["prediction"]
    assert "run.max_reply_chars=100" in out["prediction"]
    assert "run.max_record_field_chars=400" in out["final_messages"][0]["content"]
    assert out["final_messages"][1]["content"] == "short" and out["summary"]["text"] == "t" * 50
    assert "q1 / m: record fields over their bound were cut" in caplog.text
    assert "truncated" not in bound_record({"prediction": "ok"}, RecordBounds())


@pytest.mark.e2e
def test_a_huge_model_reply_gives_a_bounded_record(tmp_path):
    huge = "word " * 400_000  # 2 MB
    model = FakeModel(answer=lambda req: huge)
    with FakeOpenAIServer(model) as srv:
        assert (
            run(tmp_path, "dataset.limit=1", "mode=[long_context]", "run.max_reply_chars=1000", base_url=srv.base_url)
            == 0
        )
    records = tmp_path / "run" / "records.jsonl"
    rec = json.loads(records.read_text().splitlines()[0])
    assert rec["truncated"] is True and rec["truncated_fields"]["prediction"] >= len(huge.strip())
    assert len(rec["prediction"]) < 1200
    assert records.stat().st_size < 100_000  # was ~ 9 copies of the reply


def test_report_cells_are_clipped():
    text = "x" * (H.MAX_CELL_CHARS + 500)
    for rendered in (H.pre(text), H.cell(text), H.kv([("prediction", text)])):
        assert len(rendered) < H.MAX_CELL_CHARS + 200 and "500 more characters not shown" in rendered
    assert H.pre("short") == "<pre>short</pre>"
