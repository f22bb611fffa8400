"""Async worker (queue full, coalescing, timeout), persistence, content-keyed cache, prompt configs."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.llm.types import Usage
from harness.prompts.summary import trpc_default_template
from harness.session.boundary import Summary, SummaryBoundary
from harness.session.events import Event, Session, ToolCall
from harness.session.store import CachedSummaries, InMemoryStore, SQLiteStore
from harness.session.summary import Summarizer, SummaryPrompt
from harness.session.worker import SummaryWorker
from harness.testing.faults import FakeModel
from tests.support.paths import REPO

CONFIGS = REPO / "configs" / "prompt"


def ScriptedModel(gate: threading.Event | None = None, delay: float = 0.0) -> FakeModel:
    return FakeModel(
        then=lambda n: f"summary {n}", usage=Usage(120, 30), latency_s=0.5, model="scripted", gate=gate, delay_s=delay
    )


def make_session(sid: str = "s1", prefix: str = "", n: int = 4) -> Session:
    s = Session(sid, "u1", app="test")
    for i in range(n):
        s.append(Event(f"{prefix}e{i}", i, "user" if i % 2 == 0 else "assistant", f"turn {i}", 1000.0 + i))
    return s


def summarizer(model) -> Summarizer:
    return Summarizer(model, SummaryPrompt.trpc_default())


# --- worker ----------------------------------------------------------------------------------------
def test_worker_runs_jobs_and_reports_them():
    done = []
    with SummaryWorker(summarizer(ScriptedModel()), on_done=done.append) as w:
        job = w.enqueue(make_session(), force=True)
        assert job.wait(5) and job.status == "done"
        assert job.outcome.summary.boundary.last_event_id == "e3"
    assert done == [job] and w.stats["done"] == 1


def test_queue_full_drops_without_blocking_and_coalesces_same_session():
    gate = threading.Event()
    w = SummaryWorker(summarizer(ScriptedModel(gate)), queue_size=1, workers=1, job_timeout_s=5)
    try:
        running = w.enqueue(make_session("a"), force=True)
        deadline = time.time() + 5
        while running.status != "running" and time.time() < deadline:  # the worker took it: the slot is free
            time.sleep(0.01)
        waiting = w.enqueue(make_session("b"), force=True)
        # enqueue never blocks: with the one slot taken and the worker held by the closed gate, it returns the job
        # dropped; a blocking enqueue would have waited for the slot (until the gate's 5 s give-up) and queued it.
        # No wall-clock bound: a loaded machine may pause any thread for longer than a tight one.
        got: list = []
        caller = threading.Thread(target=lambda: got.append(w.enqueue(make_session("c"), force=True)), daemon=True)
        caller.start()
        caller.join(30)
        assert got and not gate.is_set(), "enqueue blocked on a full queue"
        dropped = got[0]
        assert dropped.status == "dropped" and dropped.wait(0) and w.stats["dropped"] == 1
        # Same session as the waiting job: merged into it (newer snapshot), no slot needed.
        newer = make_session("b", n=6)
        assert w.enqueue(newer, force=True) is waiting and w.stats["coalesced"] == 1
        gate.set()
        assert waiting.wait(5) and waiting.status == "done"
        assert waiting.outcome.summary.boundary.last_event_id == "e5"
        assert running.wait(5) and running.status == "done"
    finally:
        gate.set()
        w.close()


def test_enqueued_snapshot_is_isolated_from_later_appends():
    gate = threading.Event()
    with SummaryWorker(summarizer(ScriptedModel(gate))) as w:
        s = make_session()
        job = w.enqueue(s, force=True)
        s.append(Event("late", 9, "user", "late", 2000.0))
        gate.set()
        assert job.wait(5) and job.outcome.summary.boundary.last_event_id == "e3"


def test_job_timeout_discards_the_late_result():
    stored = []
    with SummaryWorker(
        summarizer(ScriptedModel(delay=0.5)), job_timeout_s=0.05, on_done=lambda j: stored.append(j.outcome)
    ) as w:
        job = w.enqueue(make_session(), force=True)
        assert job.wait(5) and job.status == "timeout" and job.outcome is None
    assert stored == [None] and w.stats["timeout"] == 1


def test_failed_and_skipped_jobs_keep_the_worker_alive():
    class Broken(FakeModel):
        def chat(self, *a, **k):
            raise RuntimeError("endpoint down")

    with SummaryWorker(summarizer(Broken())) as w:
        job = w.enqueue(make_session(), force=True)
        assert job.wait(5) and job.status == "failed" and "endpoint down" in str(job.error)
    with SummaryWorker(summarizer(ScriptedModel())) as w:
        covered = Summary("x", SummaryBoundary(1, "", 1003.0, "e3"), 1003.0)
        job = w.enqueue(make_session(), covered)
        assert job.wait(5) and job.status == "skipped"


# --- persistence -----------------------------------------------------------------------------------
@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    if request.param == "memory":
        yield InMemoryStore()
    else:
        s = SQLiteStore(tmp_path / "sessions.sqlite")
        yield s
        s.close()


def test_store_round_trips_sessions_and_summaries(store):
    s = make_session()
    s.append(
        Event("t", 10, "assistant", "", 1010.0, author="agent", tool_calls=(ToolCall("c1", "search", '{"q":"x"}'),))
    )
    s.append(Event("r", 11, "tool", "hit", 1011.0, tool_call_id="c1", tool_name="search", has_answer=True))
    store.save_session(s)
    loaded = store.load_session("test", "u1", "s1")
    assert loaded.events == s.events
    assert store.load_session("test", "u1", "nope") is None
    key = ("test", "u1", "s1")
    root = Summary("all", SummaryBoundary(1, "", 1003.0, "e3"), 1003.0, ("pets",))
    child = Summary("child", SummaryBoundary(1, "app/a", 1002.0, "e2"), 1002.0)
    store.put_summary(key, root)
    store.put_summary(key, child)
    assert store.get_summary(key, "") == root and store.get_summary(key, "app/a/x") == child
    assert store.get_summary(key, "other") == root
    store.delete_session(*key)
    assert store.load_session(*key) is None and store.summaries(key) == {}


def test_sqlite_uses_wal(tmp_path):
    SQLiteStore(tmp_path / "x.sqlite").close()
    assert sqlite3.connect(tmp_path / "x.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_resume_does_not_regenerate(tmp_path):
    path = tmp_path / "run.sqlite"
    model = ScriptedModel()
    first, hit = CachedSummaries(summarizer(model), SQLiteStore(path)).summarize(make_session(), mode="summary")
    assert not hit and len(model.calls) == 1
    # A new process: new store object on the same file, new model.
    model2 = ScriptedModel()
    again, hit = CachedSummaries(summarizer(model2), SQLiteStore(path)).summarize(make_session(), mode="summary")
    assert hit and again.cached and not model2.calls
    assert again.summary == first.summary
    assert [c.usage for c in again.calls] == [c.usage for c in first.calls] and all(c.cached for c in again.calls)
    assert again.generation_s == pytest.approx(first.duration_s)
    assert SQLiteStore(path).get_summary(("test", "u1", "s1")) == first.summary


def test_modes_share_one_generation_by_default_and_parity_switch_regenerates(store):
    model = ScriptedModel()
    shared = CachedSummaries(summarizer(model), store)
    a, hit_a = shared.summarize(make_session("summary-q1", prefix="a"), mode="summary")
    b, hit_b = shared.summarize(make_session("ondemand-q1", prefix="b"), mode="summary_ondemand")
    assert (hit_a, hit_b) == (False, True) and len(model.calls) == 1
    assert a.summary.text == b.summary.text
    assert b.summary.boundary.last_event_id == "be3"  # rebuilt on the second session's own event ids
    parity_model = ScriptedModel()
    parity = CachedSummaries(summarizer(parity_model), InMemoryStore(), share_across_modes=False)
    parity.summarize(make_session("summary-q1", prefix="a"), mode="summary")
    parity.summarize(make_session("ondemand-q1", prefix="b"), mode="summary_ondemand")
    assert len(parity_model.calls) == 2


def test_cache_key_changes_with_content_prompt_and_model(store):
    model = ScriptedModel()
    CachedSummaries(summarizer(model), store).summarize(make_session())
    changed = make_session()
    changed.append(Event("e9", 9, "user", "new", 2000.0))
    CachedSummaries(summarizer(model), store).summarize(changed)
    CachedSummaries(Summarizer(model, SummaryPrompt("{conversation_text}")), store).summarize(make_session())
    other = ScriptedModel()
    other.model = "other-model"
    CachedSummaries(summarizer(other), store).summarize(make_session())
    assert len(model.calls) == 3 and len(other.calls) == 1


# --- prompt variants as Hydra configs ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["trpc_default", "state_recovery", "fact_keeper"])
def test_prompt_configs_instantiate(name):
    prompt = instantiate(OmegaConf.load(CONFIGS / f"{name}.yaml"))
    assert isinstance(prompt, SummaryPrompt) and prompt.name == name
    assert "user: hello" in prompt.render("user: hello")[-1]["content"]


def test_trpc_default_config_is_the_reference_text():
    prompt = instantiate(OmegaConf.load(CONFIGS / "trpc_default.yaml"))
    assert prompt.user_template == trpc_default_template(0) and prompt.system_template is None


def test_state_recovery_config_keeps_inner_summary():
    prompt = instantiate(OmegaConf.load(CONFIGS / "state_recovery.yaml"))
    assert prompt.post_hook("<analysis>a</analysis>\n<summary>\n1. Primary request\n</summary>") == "1. Primary request"
    text = prompt.render("x")[-1]["content"]
    assert all(f"\n{i}. " in text for i in range(1, 10))
