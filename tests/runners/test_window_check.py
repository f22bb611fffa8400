"""Issue 39 item 3(a): an endpoint run warns before its first call when the model's window cuts the prompts the
selected contestants send, naming the setting to change (and the endpoint's own window where it states one)."""

from __future__ import annotations

import json
import logging
import random

import pytest

from commands.cli import main
from harness.contestants.base import CaseHistory, Question, Toolkit
from harness.data.longmemeval import parse_case
from harness.records import load_records
from harness.session.tokens import o200k_counter
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from runners.console import MAX_LINE
from runners.modes import LongContextMode
from runners.official_mode import LongMemEvalOfficialMode
from runners.window_check import SETTING, window_shortfalls, window_warnings
from runners.wire import WireShape
from tests.support.dataset_rows import make_row
from tests.support.fake_run import endpoint_args

WORDS = "apple river stone cloud lamp violin garden copper window meadow".split()
MAX_TOKENS, RESERVE = 384, 64  # configs/config.yaml generation.max_tokens; the contestants' reserve_tokens


def turns(rng: random.Random, n_words: int) -> list[dict]:
    text = " ".join(rng.choice(WORDS) for _ in range(n_words))
    return [{"role": "user", "content": text, "has_answer": True}, {"role": "assistant", "content": "Noted."}]


def rows(rng: random.Random, sizes: list[int]) -> list[dict]:
    """One case per size: that many words of history, in sessions of at most 400 words."""
    out = []
    for i, size in enumerate(sizes):
        sessions = [turns(rng, min(400, size - k)) for k in range(0, size, 400)]
        row = make_row(qid=f"q{i}", sessions=sessions)
        row["haystack_dates"] = [f"2023/05/{d + 1:02d}" for d in range(len(sessions))]
        out.append(row)
    return out


class WarningLog(logging.Handler):
    """The run's window warnings as they are logged (the pipeline's logger keeps its handlers under Hydra)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if SETTING in record.getMessage():
            self.lines.append(record.getMessage())


@pytest.fixture
def warnings():
    handler = WarningLog()
    logger = logging.getLogger("runners.replay")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def served(listing: dict | None = None, props: dict | None = None):
    """A GET handler: the model listing (with `listing`'s fields on the model's entry) and llama.cpp's /props."""

    def on_get(path: str) -> Reply:
        if path.endswith("/models"):
            return Reply(body={"object": "list", "data": [{"id": "fake-model", "object": "model", **(listing or {})}]})
        if path == "/props" and props is not None:
            return Reply(body=props)
        return Reply(status=404, body={"error": {"message": "not found"}})

    return on_get


def run(tmp_path, data, srv, *overrides: str, command: str = "run") -> int:
    return main(
        [
            command,
            f"hydra.run.dir={tmp_path / 'run'}",
            *endpoint_args(srv.base_url, tmp_path),
            f"dataset.path={data}",
            "dataset.sha256=null",
            "mode=[long_context,lme_official]",
            "retrieval=bm25",
            "judge=none",
            *overrides,
        ]
    )


class FirstCall:
    """The fake model, noting how many window warnings were logged when the first model call arrived."""

    def __init__(self, warnings: WarningLog) -> None:
        self.model, self.warnings, self.seen = FakeModel(), warnings, None

    def __call__(self, req):
        if self.seen is None:
            self.seen = len(self.warnings.lines)
        return self.model(req)


def needs_from_records(run_dir, mode: str) -> list[int]:
    """The window each recorded prompt of `mode` needed uncut: its full prompt tokens, the reply and the reserve."""
    return [
        r["truncation"]["estimated_full_prompt_tokens"] + MAX_TOKENS + RESERVE
        for r in load_records(run_dir / "records.jsonl")
        if r["mode"] == mode
    ]


@pytest.mark.e2e
def test_an_endpoint_run_warns_before_its_first_call_and_names_the_setting(tmp_path, write_dataset, warnings):
    data = write_dataset(rows(random.Random(1), [2400, 1800, 60]))
    fake = FirstCall(warnings)
    with FakeOpenAIServer(fake) as srv:  # its listing states no window
        code = run(tmp_path, data, srv, "model.context_window=2048")
    assert code == 0
    assert fake.seen == 1, "the warning must be logged before the first model call"
    (line,) = warnings.lines  # one line, the setting first
    assert line.startswith(f"{SETTING}=2048 is smaller than the prompts")
    assert f"set {SETTING} to the model's real window" in line
    largest = 0
    for mode in ("long_context", "lme_official"):
        needs = needs_from_records(tmp_path / "run", mode)
        cut = [n for n in needs if n > 2048]
        assert len(cut) == 2  # the two long histories; the short one fits
        assert f"{mode} (2/3 cases)" in line
        recorded = [r for r in load_records(tmp_path / "run" / "records.jsonl") if r["mode"] == mode]
        assert sum(r["truncation"]["truncated"] for r in recorded) == 2
        largest = max(largest, *cut)
    assert f"a window of up to {largest:,} tokens" in line  # as the run itself counted the prompts
    prefix = "[2026-12-04 15:39:00,323][runners.replay][WARNING] - "  # Hydra's console format
    assert len(prefix + line) <= MAX_LINE  # the console cuts a log line there


@pytest.mark.e2e
def test_the_endpoints_stated_window_is_the_value_to_set(tmp_path, write_dataset, warnings):
    data = write_dataset(rows(random.Random(2), [2400, 60]))
    with FakeOpenAIServer(FakeModel(), on_get=served({"max_model_len": 131072})) as srv:  # vLLM's field
        assert run(tmp_path, data, srv, "model.context_window=2048", "mode=[long_context]") == 0
    (line,) = warnings.lines
    assert "long_context (1/2 cases)" in line and line.endswith(f"set {SETTING}=131072, the window the endpoint serves")


@pytest.mark.e2e
def test_a_window_larger_than_the_endpoint_serves_is_named(tmp_path, write_dataset, warnings):
    data = write_dataset(rows(random.Random(3), [60]))
    with FakeOpenAIServer(FakeModel(), on_get=served({"max_model_len": 1024})) as srv:
        assert run(tmp_path, data, srv, "model.context_window=2048", "mode=[long_context]") == 0
    (line,) = warnings.lines
    assert f"{SETTING}=2048 is larger than the endpoint serves (1,024 tokens)" in line
    assert line.endswith(f"set {SETTING}=1024")


@pytest.mark.e2e
def test_llama_cpp_states_its_window_in_props(tmp_path, write_dataset, warnings):
    data = write_dataset(rows(random.Random(4), [2400]))
    listing = {"owned_by": "llamacpp", "meta": {"n_ctx_train": 32768}}  # the training context: not what it serves
    props = {"default_generation_settings": {"n_ctx": 8192}}
    with FakeOpenAIServer(FakeModel(), on_get=served(listing, props)) as srv:
        assert run(tmp_path, data, srv, "model.context_window=2048", "mode=[long_context]") == 0
    (line,) = warnings.lines
    assert line.endswith(f"set {SETTING}=8192, the window the endpoint serves")


@pytest.mark.e2e
def test_no_warning_when_the_window_holds_every_prompt(tmp_path, write_dataset, warnings):
    data = write_dataset(rows(random.Random(5), [2400, 60]))
    with FakeOpenAIServer(FakeModel(), on_get=served({"max_model_len": 32768})) as srv:
        assert run(tmp_path, data, srv, "model.context_window=32768") == 0
    assert warnings.lines == []
    recorded = load_records(tmp_path / "run" / "records.jsonl")
    assert not any(r["truncation"]["truncated"] for r in recorded)


@pytest.mark.e2e
def test_the_plan_shows_the_same_warning(tmp_path, write_dataset, capsys):
    data = write_dataset(rows(random.Random(1), [2400, 1800, 60]))
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(tmp_path, data, srv, "model.context_window=2048", f"--out={tmp_path / 'plan.json'}", command="plan")
        assert not srv.requests  # a plan sends nothing
    assert code == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    lines = plan["window_warnings"]
    assert len(lines) == 1 and "long_context (2/3 cases) and lme_official (2/3 cases)" in lines[0]
    out = capsys.readouterr().out
    assert all(f"warning: {w}" in out for w in lines)


@pytest.mark.parametrize("seed", range(12))
def test_the_warning_counts_exactly_the_prompts_the_contestants_cut(seed):
    """Generated histories and windows: the cases the check flags are those whose answer prompt is cut, and the
    largest need it names is the largest uncut prompt (+ reply and reserve) among them, for both contestants."""
    rng = random.Random(seed)
    window = rng.randrange(600, 6000)
    max_tokens = rng.choice([0, 64, 384])
    cases = [
        parse_case(r, "generated") for r in rows(rng, [rng.randrange(5, 3000) for _ in range(rng.randrange(1, 7))])
    ]
    kit = Toolkit(
        model=FakeModel(then=lambda _n: "ok"),
        generation={"max_tokens": max_tokens} if max_tokens else {},
        context_window=window,
        token_counter=o200k_counter(),
        token_ratio=rng.choice([1.0, 1.0, 1.3]),
    )
    modes = [LongContextMode(max_events=rng.choice([0, 1000])), LongMemEvalOfficialMode()]
    wire = WireShape()
    flagged = {s.mode: s for s in window_shortfalls([(c, modes) for c in cases], wire, kit)}
    for mode in modes:
        cut_needs = []
        for case in cases:
            session = wire.case_session(case)
            question = Question.of(case, wire.question(case.question, case.question_date))
            history = CaseHistory.of(case, wire.session_for(session, mode.name))
            info = mode.answer(mode.ingest(history, kit).memory, question, kit).truncation
            if info["estimated_full_prompt_tokens"] > info["budget_tokens"]:
                cut_needs.append(info["estimated_full_prompt_tokens"] + max_tokens + mode.reserve_tokens)
        if not cut_needs:
            assert mode.name not in flagged
            continue
        s = flagged[mode.name]
        assert (s.cut, s.checked, s.largest) == (len(cut_needs), len(cases), max(cut_needs))
    lines = window_warnings(list(flagged.values()), window, None)
    assert len(lines) == (1 if flagged else 0) and all("\n" not in line for line in lines)
