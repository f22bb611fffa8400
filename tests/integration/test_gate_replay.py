"""The replay gate: the benchmark against recorded responses passes unchanged and fails on harness regressions.

Offline and fast: the fixture is recorded here from a scripted loopback "model" through the same recording proxy
`make gate-baseline` puts in front of the embedded model; then every run replays it.
"""

from __future__ import annotations

import json

import pytest
import yaml

from commands.cli import main
from commands.replay_gate import replay_main
from harness.llm.fixture import FixtureError, ResponseFixture, request_key
from harness.testing.fake_openai import FakeOpenAIServer, completion
from tests.support.paths import REPO

ROOT = REPO
ARGS = ["+experiment=ci_gate"]  # the gate's run as `make gate` runs it (configs/experiment/ci_gate.yaml)


def model(req):
    """A cooperative scripted model: summaries, a search on the first turn, answers echoing the question."""
    msgs = req["messages"]
    text = json.dumps(msgs)
    last = msgs[-1].get("content") or ""
    if "Answer yes or no only" in text:
        return completion("yes" if "Paris" in text else "no", prompt_tokens=len(text) // 4, completion_tokens=1)
    if req.get("tools") and not any(m["role"] == "tool" for m in msgs):
        return completion(
            None,
            [{"id": "call_1", "name": "session_search", "arguments": {"query": last[:80], "scope": "current_hidden"}}],
            prompt_tokens=len(text) // 4,
            completion_tokens=12,
        )
    if req.get("tools"):
        return completion(f"The answer: {last[:60]}", prompt_tokens=len(text) // 4, completion_tokens=15)
    return completion(f"Summary of the talk: {last[-200:]}", prompt_tokens=len(text) // 4, completion_tokens=40)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(fixture path, exact baseline path) recorded and baselined once for the module."""
    d = tmp_path_factory.mktemp("replay")
    fx = d / "fixture.jsonl"
    with FakeOpenAIServer(model) as upstream:
        assert (
            replay_main(
                fx,
                [f"hydra.run.dir={d / 'rec'}", *ARGS, "model.kind=remote", f"++model.base_url={upstream.base_url}"],
                run=main,
                record=True,
            )
            == 0
        )
    assert replay_main(fx, [f"hydra.run.dir={d / 'base'}", *ARGS], run=main) == 0
    base = d / "replay.yaml"
    assert main(["gate", str(d / "base"), "--baseline", str(base), "--write-baseline", "--policy", "exact"]) == 0
    return fx, base


def gate(recorded, tmp_path, *, expect_run: int = 0) -> int:
    fx, base = recorded
    assert replay_main(fx, [f"hydra.run.dir={tmp_path / 'run'}", *ARGS], run=main) == expect_run
    return main(["gate", str(tmp_path / "run"), "--baseline", str(base)])


@pytest.mark.e2e
def test_the_unchanged_harness_passes_and_the_fixture_is_canonical(recorded, tmp_path, capsys):
    fx, base = recorded
    assert gate(recorded, tmp_path) == 0
    assert "gate PASSED" in capsys.readouterr().out
    lines = fx.read_text().splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) > 6
    doc = yaml.safe_load(base.read_text())
    assert doc["policy"] == "exact"
    checked = {(c["mode"], c["metric"]) for c in doc["checks"] if c.get("exact")}
    assert {("summary_ondemand", "n_search_total"), ("summary", "summary_tokens"), ("long_context", "f1")} <= checked


@pytest.mark.e2e
def test_a_changed_prompt_text_fails(recorded, tmp_path, monkeypatch, capsys):
    from harness.prompts import ondemand as ondemand_texts

    monkeypatch.setattr(
        ondemand_texts, "ONDEMAND_SESSION_OVERVIEW", ondemand_texts.ONDEMAND_SESSION_OVERVIEW + " Be brief."
    )
    assert gate(recorded, tmp_path, expect_run=3) == 1  # exit 3: the unrecorded requests failed their cases
    out = capsys.readouterr().out
    assert "replay: " in out and "not in" in out
    assert any(l.startswith("✗ FAIL") and "summary_ondemand" in l and "failed" in l for l in out.splitlines())


@pytest.mark.e2e
def test_a_dropped_tool_fails(recorded, tmp_path, monkeypatch):
    from harness.retrieval.tools import SessionTools

    specs = SessionTools.specs
    monkeypatch.setattr(SessionTools, "specs", lambda self: specs(self)[1:])  # session_load gone
    assert gate(recorded, tmp_path, expect_run=3) == 1


@pytest.mark.e2e
def test_doubled_summary_tokens_fail(recorded, tmp_path, monkeypatch, capsys):
    from runners.summaries import ProvidedSummary

    record = ProvidedSummary.record
    monkeypatch.setattr(ProvidedSummary, "record", lambda self: {**record(self), "calls": record(self)["calls"] * 2})
    assert gate(recorded, tmp_path) == 1
    fails = [l for l in capsys.readouterr().out.splitlines() if l.startswith("✗ FAIL")]
    assert fails and all("summary_tokens" in l for l in fails)


@pytest.mark.e2e
def test_a_scorer_change_fails(recorded, tmp_path, monkeypatch, capsys):
    from harness.scoring import lexical

    # a tokenizer that lost its splitting: every text is one token (the scripted answers overlap no reference,
    # so any change that moves a lexical score shows here as a rise from 0: the exact checks fail both ways)
    monkeypatch.setattr(lexical, "tokenize", lambda text: ["x"])
    assert gate(recorded, tmp_path) == 1
    fails = [l for l in capsys.readouterr().out.splitlines() if l.startswith("✗ FAIL")]
    assert fails and all(any(m in l for m in ("f1", "rouge", "bleu1", "em")) for l in fails), fails


def test_an_unrecorded_request_is_an_error_naming_it(tmp_path):
    fx = ResponseFixture()
    fx.add(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        {"choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}], "usage": {}, "model": "m"},
    )
    path = fx.save(tmp_path / "f.jsonl")
    back = ResponseFixture.load(path)
    assert back.lookup({"model": "m", "messages": [{"role": "user", "content": "hi"}]})["content"] == "hello"
    assert back.lookup({"model": "m", "messages": [{"role": "user", "content": "hi!"}]}) is None
    line = json.loads(path.read_text())
    line["request"]["messages"][0]["content"] = "edited by hand"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(FixtureError, match=r"f\.jsonl:1: key .* does not match"):
        ResponseFixture.load(path)
    assert request_key({"a": 1, "_path": "/v1/x"}) == request_key({"a": 1})


COMMITTED = (ROOT / "baselines" / "ci_replay.jsonl", ROOT / "baselines" / "ci_replay.yaml")


@pytest.mark.e2e
def test_the_committed_replay_gate_passes_offline_and_catches_a_scorer_change(tmp_path, monkeypatch, capsys):
    """`make gate`'s first stage exactly: the fixture recorded from the embedded model, no model needed."""
    assert COMMITTED[0].stat().st_size < 400_000  # small enough to review
    assert gate(COMMITTED, tmp_path / "a") == 0
    assert "gate PASSED" in capsys.readouterr().out
    from harness.scoring import lexical

    tokenize = lexical.tokenize
    monkeypatch.setattr(lexical, "tokenize", lambda text: tokenize(text)[1:])  # an off-by-one in the tokenizer
    assert gate(COMMITTED, tmp_path / "b") == 1
