"""`+experiment=trpc_repro`: the reference's wire (ids, session id, times, request keys) and its detailed prompt.

Fixtures in tests/fixtures/trpc/ are transcribed from the reference sources named in them.
"""

import json
import re

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from commands.cli import main
from harness.data.longmemeval import BASE_TIMESTAMP, Case, Turn
from harness.records import load_records
from harness.session.detailed_prompt import strip_detailed_summary_output
from harness.session.summary import keep_summary_tag
from harness.testing.fake_openai import FakeOpenAIServer, completion
from runners.wire import WireShape
from tests.integration.test_run_e2e import responder
from tests.support.paths import FIXTURES, REPO

ROOT = REPO
FIX = FIXTURES / "trpc"
WIRE = json.loads((FIX / "reference_wire.json").read_text())


def _case(n: int = 6) -> Case:
    turns = tuple(Turn("user" if i % 2 == 0 else "assistant", f"turn {i}", False) for i in range(n))
    return Case(
        "q1", "single-session-user", "question?", "answer", "2023/05/20", (turns,), ("s1",), ("2023/05/20",), ()
    )


# --- wire shapes ---------------------------------------------------------------------------------
def test_default_events_are_unchanged_sequential_ids_on_whole_milliseconds():
    ev = _case().events()
    assert [e.id for e in ev] == [f"e{i:04d}" for i in range(6)]
    assert [e.timestamp for e in ev] == [BASE_TIMESTAMP + 0.001 * (i + 1) for i in range(6)]


def test_uuid_ids_are_deterministic_unique_and_reference_shaped():
    a, b = _case().events(ids="uuid"), _case().events(ids="uuid")
    assert [e.id for e in a] == [e.id for e in b]  # the response cache keeps working
    assert len({e.id for e in a}) == len(a)
    assert all(re.match(WIRE["event_id_pattern"], e.id) for e in a)


def test_microsecond_timestamps_render_like_the_references_created():
    from harness.retrieval.render import rfc3339

    us = _case().events(timestamps="us")
    ms = _case().events(timestamps="ms")
    assert all(re.match(WIRE["created_pattern"], rfc3339(e.timestamp)) for e in us)
    assert not any(re.match(WIRE["created_pattern"], rfc3339(e.timestamp)) for e in ms)
    assert [round((b.timestamp - a.timestamp) * 1000, 3) for a, b in zip(us, us[1:])] == [1.0] * 5  # 1 ms apart


@pytest.mark.parametrize(
    "kw, culprit",
    [
        ({"event_ids": "uuid4"}, "wire.event_ids"),
        ({"timestamps": "ns"}, "wire.timestamps"),
        ({"session_id": "{mode}"}, "wire.session_id"),
        ({"session_id": "{case}-{question_id}"}, "wire.session_id"),
        ({"sesion_id": "x"}, "sesion_id"),
    ],
)
def test_bad_wire_config_names_the_key(kw, culprit):
    with pytest.raises(ValueError, match=culprit):
        WireShape.from_config(kw)


def test_experiment_sets_every_reference_switch_and_defaults_stay():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        base = compose("config")
        exp = compose("config", overrides=["+experiment=trpc_repro"])
    assert (base.wire.event_ids, base.wire.session_id, base.wire.timestamps) == (
        "sequential",
        "lme-{question_id}",
        "ms",
    )
    assert base.generation.seed == 0 and base.judge.params.max_tokens == 256
    assert (exp.wire.event_ids, exp.wire.session_id, exp.wire.timestamps) == ("uuid", WIRE["session_id_format"], "us")
    assert exp.generation.seed is None and exp.judge.params is None
    assert exp.judge.sample_per_mode is True and base.judge.sample_per_mode is None  # null: shared (= false)
    assert exp.retrieval.config.name == "trpc_parity_openai" and exp.dataset.name == "longmemeval_s_ssu"
    assert exp.model.model == "gpt-4o-mini" and exp.client.max_tokens_param == "max_completion_tokens"
    assert exp.run.reference_latency is True and base.run.reference_latency == "auto"
    assert exp.run.share_summary is False and exp.summarizer.max_tokens is None and exp.summarizer.temperature is None


SUMMARY = "Café notes: the user waited ☕ two years."


def _judging_responder(req):
    if "expert evaluator" in json.dumps(req["messages"]):
        return completion('{"correct": false, "confidence": 0.9, "reason": "different"}')
    if "Analyze the following" in json.dumps(req["messages"]):
        return completion(SUMMARY)
    return responder(req)


@pytest.mark.e2e
def test_experiment_sends_the_references_request_bodies_and_tool_message(tmp_path):
    with FakeOpenAIServer(_judging_responder) as srv:
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "+experiment=trpc_repro",
                "dataset=oracle",
                "dataset.limit=1",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                f"cache.path={tmp_path / 'c.sqlite'}",
                "run.progress=false",
                "run.concurrency=1",
                "retrieval=trpc_parity",
                "retrieval.store=null",
                "~retrieval.embedder",
                "+retrieval.embedder={_target_: harness.retrieval.embedders.HashingEmbedder}",
            ]
        )
        assert rc == 0
        reqs = list(srv.requests)
    keys = WIRE["request_keys"]
    seen = set()
    for q in reqs:
        body = sorted(k for k in q if not k.startswith("_"))
        text = json.dumps(q["messages"])
        kind = (
            "judge"
            if "expert evaluator" in text
            else "summary"
            if "Analyze the following" in text
            else "answer_with_tools"
            if "tools" in q
            else "answer"
        )
        assert body == keys[kind], kind
        seen.add(kind)
    assert seen == set(keys)
    ref = json.loads(WIRE["session_search_tool_message"])
    tool_msgs = [m for q in reqs for m in q["messages"] if m["role"] == "tool"]
    ours = json.loads(tool_msgs[0]["content"])
    qid = load_records(tmp_path / "run" / "records.jsonl")[0]["question_id"]
    for got, want in (
        (ours, ref),
        (ours["results"][0], ref["results"][0]),
        (ours["results"][0]["context"][0], ref["results"][0]["context"][0]),
    ):
        assert list(got) == list(want)  # same fields in the same order
    hit = ours["results"][0]
    assert hit["session_id"] == WIRE["session_id_format"].format(mode="summary_ondemand", question_id=qid)
    assert re.match(WIRE["event_id_pattern"], hit["event_id"]) and re.match(WIRE["created_pattern"], hit["created"])
    assert all(re.match(WIRE["event_id_pattern"], c["event_id"]) for c in hit["context"])
    # latency both ways, summary size both ways
    recs = {r["mode"]: r for r in load_records(tmp_path / "run" / "records.jsonl")}
    lc, su, od = recs["long_context"]["latency"], recs["summary"]["latency"], recs["summary_ondemand"]["latency"]
    assert lc["query_ms_reference"] == lc["query_ms"] and lc["append_embedded_events"] == 0
    assert su["append_embedded_events"] == 2 and od["append_embedded_events"] == 3  # question, (tool result,) answer
    for lat in (su, od):
        assert lat["append_embed_ms"] > 0
        assert lat["query_ms_reference"] == pytest.approx(lat["query_ms"] + lat["append_embed_ms"], abs=0.11)
    summ = recs["summary"]["summary"]
    assert summ["chars"] == len(SUMMARY) and summ["bytes"] == len(SUMMARY.encode()) > summ["chars"]


# --- latency both ways ----------------------------------------------------------------------------
def test_appended_event_texts_follow_the_references_session_services():
    from runners.reference_latency import appended_event_texts

    assert appended_event_texts("long_context", "q?", [], "a") == []  # in-memory service: nothing embedded
    assert appended_event_texts("summary", "q?", [], "a") == ["q?", "a"]
    assert appended_event_texts("summary_ondemand", "q?", [("session_search", "{}")], "") == [
        "q?",
        "session_search: {}",
    ]


def test_appended_events_are_embedded_one_request_each_and_replay_their_measured_latency(tmp_path):
    from harness.retrieval.embedders import OpenAIEmbedder
    from harness.testing.fake_openai import embeddings
    from runners.reference_latency import embed_appended, latency_fields

    with FakeOpenAIServer(lambda req: embeddings(len(req["input"]), prompt_tokens=3)) as srv:
        emb = OpenAIEmbedder(model="fake-embedding", base_url=srv.base_url, cache_path=str(tmp_path / "e.sqlite"))
        ms, calls = embed_appended(emb, ["q?", "session_search: {}", "a"])
        assert len(srv.requests) == 3 and all(len(r["input"]) == 1 for r in srv.requests)
        assert ms == pytest.approx(sum(c["latency_s"] for c in calls) * 1000, abs=0.05)
        again, _ = embed_appended(emb, ["q?", "session_search: {}", "a"])
        assert len(srv.requests) == 3 and again == ms  # from the cache: as originally measured
    assert embed_appended(None, ["q?"]) == (None, [])
    assert latency_fields(100.0, "summary", None, 2)["query_ms_reference"] is None  # not measurable: said so
    assert latency_fields(100.0, "summary", 5.0, 2)["query_ms_reference"] == 105.0


# --- the detailed prompt ----------------------------------------------------------------------------
def test_detailed_prompt_config_is_the_reference_text_with_its_post_hook():
    prompt = instantiate(OmegaConf.load(ROOT / "configs" / "prompt" / "trpc_detailed.yaml"))
    assert prompt.user_template == (FIX / "detailed_continuity_prompt.txt").read_text()
    assert prompt.system_template is None and prompt.max_summary_words == 0
    assert prompt.post_hook is strip_detailed_summary_output
    assert prompt.render("user: hi")[0] == {
        "role": "user",
        "content": prompt.user_template.replace("{conversation_text}", "user: hi"),
    }


@pytest.mark.parametrize(
    "text, want",
    [
        # the reference's own test cases (detailed_summary_test.go)
        ("<analysis>scratch</analysis>\n<summary>kept</summary>", "kept"),
        ("**<analysis>**\n\nscratch\n\n**<summary>**\n\n1. kept", "1. kept"),
        ("<analysis>scratch</analysis>\nplain", "plain"),
        ("  plain  ", "plain"),
        # tagged / bold / spaced / cased variants
        ("<analysis>a</analysis>\n**<summary>**\n1. Intent\n**</summary>**\ntrailing", "1. Intent"),
        ("< Summary >\n1. Intent\n< / SUMMARY >", "1. Intent"),
        ("<ANALYSIS>\nlong\nthinking\n</Analysis>\n\n1. Intent", "1. Intent"),
        ("<analysis>never closed\n1. Intent", "never closed\n1. Intent"),
        ("<summary>first</summary> <summary>second</summary>", "first"),
        ("<summary></summary>", ""),
    ],
)
def test_strip_detailed_summary_output_matches_the_reference(text, want):
    assert strip_detailed_summary_output(text) == want


def test_keep_summary_tag_differs_on_bold_and_spaced_tags():
    # why trpc_detailed needs its own post-processor: our generic hook leaves these wrapped
    assert keep_summary_tag("**<summary>**\n1. Intent\n**</summary>**") == "**\n1. Intent\n**"
    assert keep_summary_tag("< summary >1. Intent</ summary >") is None
    assert strip_detailed_summary_output("< summary >1. Intent</ summary >") == "1. Intent"


def test_reference_latency_setting_never_adds_requests_by_default():
    from harness.retrieval.embedders import HashingEmbedder
    from runners.reference_latency import reference_latency_setting, should_measure

    remote = type("Remote", (), {"client": object()})()
    assert should_measure("auto", HashingEmbedder()) and not should_measure("auto", remote)
    assert should_measure("true", remote) and not should_measure("false", HashingEmbedder())
    assert reference_latency_setting(True) == "true"
    with pytest.raises(ValueError, match="run.reference_latency"):
        reference_latency_setting("sometimes")


@pytest.mark.e2e
def test_both_reference_tables_in_one_sweep_then_side_by_side(tmp_path):
    """`lme-harness run +experiment=trpc_repro -m prompt=trpc_default,trpc_detailed`, then `compare` the sweep."""

    def answer(req):
        text = json.dumps(req["messages"])
        if "CRITICAL: Respond with TEXT ONLY" in text:  # the detailed prompt: analysis, then the summary block
            return completion(
                "**<analysis>**\nscratch\n**<summary>**\n1. Primary Request and Intent: asylum\n**</summary>**"
            )
        return _judging_responder(req)

    with FakeOpenAIServer(answer) as srv:
        rc = main(
            [
                "run",
                "-m",
                "+experiment=trpc_repro",
                "prompt=trpc_default,trpc_detailed",
                "dataset=oracle",
                "dataset.limit=1",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                f"cache.path={tmp_path / 'c.sqlite'}",
                "run.progress=false",
                "run.concurrency=1",
                "retrieval=trpc_parity",
                "retrieval.store=null",
                "~retrieval.embedder",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                "hydra.sweep.subdir=${hydra.job.num}",
            ]
        )
        assert rc == 0
    detailed = {r["mode"]: r for r in load_records(tmp_path / "sweep" / "1" / "records.jsonl")}
    assert (
        detailed["summary"]["summary"]["text"] == "1. Primary Request and Intent: asylum"
    )  # stripped as the reference
    default = {r["mode"]: r for r in load_records(tmp_path / "sweep" / "0" / "records.jsonl")}
    assert default["summary"]["summary"]["text"] == SUMMARY
    assert main(["compare", str(tmp_path / "sweep")]) == 0
    assert "summary_ondemand" in (tmp_path / "sweep" / "compare" / "compare.md").read_text()


@pytest.mark.e2e
def test_a_failing_reference_latency_embedding_keeps_the_answer(tmp_path):
    from harness.testing.fake_openai import Reply

    def answer(req):
        if req["_path"].endswith("/embeddings"):
            return Reply(status=400, body={"error": {"message": "embeddings down"}})
        return _judging_responder(req)

    with FakeOpenAIServer(answer) as srv:
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "dataset=oracle",
                "dataset.limit=1",
                "mode=[summary]",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                "judge=none",
                f"cache.path={tmp_path / 'c.sqlite'}",
                "run.progress=false",
                "run.reference_latency=true",
                "retrieval=bm25",
                "retrieval.embedder={_target_: harness.retrieval.embedders.OpenAIEmbedder, "
                f"base_url: '{srv.base_url}', max_retries: 0}}",
            ]
        )
        assert rc == 0
    (rec,) = load_records(tmp_path / "run" / "records.jsonl")
    assert rec["status"] == "ok" and rec["prediction"]
    assert (
        rec["latency"]["query_ms_reference"] is None and "embeddings down" in rec["latency"]["reference_latency_error"]
    )


# --- issue 24: the summary input and the judge's sampling on the wire --------------------------------------
@pytest.mark.e2e
@pytest.mark.parametrize("per_mode", [True, False])
def test_summary_starts_at_the_first_user_turn_and_the_judge_samples_per_mode(tmp_path, write_dataset, per_mode):
    """A case opening with assistant turns (11 of the 70 `_s` cases do), answered alike by all three modes."""
    from tests.support.dataset_rows import make_row

    opening = [{"role": "assistant", "content": "Earlier assistant reply."}, {"role": "assistant", "content": "More."}]
    rest = [
        {"role": "user", "content": "I went to Paris last May.", "has_answer": True},
        {"role": "assistant", "content": "Nice!"},
    ]
    data = write_dataset([make_row(sessions=[opening + rest])], name="lead.json")
    with FakeOpenAIServer(_judging_responder) as srv:
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "+experiment=trpc_repro",
                f"dataset.path={data}",
                "dataset.sha256=null",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                f"cache.path={tmp_path / 'c.sqlite'}",
                "run.progress=false",
                "run.concurrency=1",
                "retrieval=trpc_parity",
                "retrieval.store=null",
                "~retrieval.embedder",
                "+retrieval.embedder={_target_: harness.retrieval.embedders.HashingEmbedder}",
                *([] if per_mode else ["judge.sample_per_mode=null"]),
            ]
        )
        assert rc == 0
        reqs = list(srv.requests)
    summaries = [q["messages"][-1]["content"] for q in reqs if "Analyze the following" in json.dumps(q["messages"])]
    assert len(summaries) == 2  # one per summary mode (run.share_summary=false)
    for text in summaries:  # the reference's session holds no event before the first user turn
        assert "user: I went to Paris last May." in text and "Earlier assistant reply" not in text
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert {r["prediction"] for r in recs} == {"I am not sure."} and len(recs) == 3
    judged = [q for q in reqs if "expert evaluator" in json.dumps(q["messages"])]
    assert len(judged) == (3 if per_mode else 1)  # the same judge request, sampled per mode or shared
    assert all(r["status"] == "ok" for r in recs)
