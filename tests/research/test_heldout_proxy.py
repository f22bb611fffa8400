"""The held-out proxy of research/retrieval_heldout_proxy.py (issue 24): which questions it takes, and haystacks made
of their own evidence sessions among filler that is no question's evidence, the same for the same seed."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from commands.cli import CONFIG_DIR
from harness.data.longmemeval import DataError, LongMemEvalSource, find_local, parse_cases
from research import retrieval_heldout_proxy
from research.retrieval_heldout_proxy import build_proxy
from tests.support.paths import REPO


def _session(tag: str, answer: bool = False) -> list[dict]:
    return [
        {"role": "user", "content": f"{tag} question", **({"has_answer": True} if answer else {})},
        {"role": "assistant", "content": f"{tag} reply"},
    ]


def _row(qid: str, qtype: str, sessions: list[tuple[str, bool]], answer_ids: list[str]) -> dict:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"{qid}?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": [sid for sid, _ in sessions],
        "haystack_dates": [f"2023/05/{i + 1:02d} (Mon) 10:00" for i in range(len(sessions))],
        "haystack_sessions": [_session(sid, ans) for sid, ans in sessions],
        "answer_session_ids": answer_ids,
    }


DEV = [  # development haystacks: their filler is the pool; ev_d1 is evidence, so never filler
    _row("d1", "multi-session", [("ev_d1", True), ("f0", True)] + [(f"f{i}", False) for i in range(1, 5)], ["ev_d1"]),
    _row("d2", "multi-session", [(f"f{i}", False) for i in range(3, 9)] + [("ev_h2", False)], ["ev_d2x"]),
]
ORACLE = [
    _row("d1", "multi-session", [("ev_d1", True)], ["ev_d1"]),  # in the development half: not held out
    _row("h1", "multi-session", [("ev_h1a", True), ("ev_h1b", True)], ["ev_h1a", "ev_h1b"]),
    _row("h2", "multi-session", [("ev_h2", True)], ["ev_h2"]),
    _row("u1", "single-session-user", [("ev_u1", True)], ["ev_u1"]),  # the 70 have real haystacks here
]


def test_the_proxy_takes_the_held_out_questions_and_keeps_their_evidence_whole():
    rows = build_proxy(ORACLE, DEV, seed=0)
    assert [r["question_id"] for r in rows] == ["h1", "h2"]
    for r in rows:
        own = next(o for o in ORACLE if o["question_id"] == r["question_id"])
        assert len(r["haystack_sessions"]) == 7  # as many as a development haystack of the type (both have 7)
        kept = [
            (sid, d, s) for sid, d, s in zip(r["haystack_session_ids"], r["haystack_dates"], r["haystack_sessions"])
        ]
        evidence = [k for k in kept if k[0] in own["answer_session_ids"]]
        assert evidence == list(zip(own["haystack_session_ids"], own["haystack_dates"], own["haystack_sessions"]))
        filler = [k for k in kept if k[0] not in own["answer_session_ids"]]
        assert all(sid.startswith("f") for sid, _, _ in filler)  # never ev_d1, ev_h2: some question's evidence
        assert not any(t.get("has_answer") for _, _, s in filler for t in s)
        assert len({sid for sid, _, _ in kept}) == len(kept)
    cases = parse_cases(json.dumps(rows).encode(), "proxy")  # a valid LongMemEval file
    assert all(c.has_evidence_label for c in cases)


def test_the_proxy_is_the_same_for_a_seed_and_another_for_another_seed():
    assert build_proxy(ORACLE, DEV, seed=0) == build_proxy(ORACLE, DEV, seed=0)
    orders = {tuple(build_proxy(ORACLE, DEV, seed=s)[0]["haystack_session_ids"]) for s in range(6)}
    assert len(orders) > 1


def test_the_control_takes_the_development_questions_instead():
    assert [r["question_id"] for r in build_proxy(ORACLE, DEV, seed=0, questions="dev")] == ["d1"]


@pytest.mark.real_data
def test_the_written_proxy_is_the_file_docs_retrieval_md_measures(tmp_path, monkeypatch):
    """`--write-dataset`: the proxy (seed 0) as a LongMemEval file, byte for byte the one whose sha256 the docs give,
    and loaded by the harness's own dataset source as retrieval-eval loads it."""
    if find_local("longmemeval_oracle.json.gz") is None or find_local("longmemeval_s_dev.json.gz") is None:
        pytest.skip("needs the shared LongMemEval files (LME_DATA_DIR)")
    path = tmp_path / "proxy.json.gz"
    monkeypatch.setattr(sys, "argv", ["retrieval_heldout_proxy", "--write-dataset", str(path)])
    retrieval_heldout_proxy.main()
    assert hashlib.sha256(path.read_bytes()).hexdigest().startswith("5a8f391e")
    cases, _ = LongMemEvalSource(path=str(path), question_types=None).load()
    assert len(cases) == 215 and sum(not c.is_abstention and c.has_evidence_label for c in cases) == 203
    # the dataset overrides docs/retrieval.md gives for the held-out half take a file other than the pinned one
    held = _documented_heldout_overrides(path)
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=held)
        pinned = compose(config_name="config", overrides=["dataset=s", f"dataset.path={path}"])
    cases, _ = instantiate(cfg.dataset).load()
    assert len(cases) == 215 and {c.question_type for c in cases} >= {"single-session-assistant", "multi-session"}
    with pytest.raises(DataError, match="sha256 mismatch"):  # why the docs do not say dataset=s
        instantiate(pinned.dataset).load()


def _documented_heldout_overrides(path: Path) -> list[str]:
    text = (REPO / "docs" / "retrieval.md").read_text()
    (line,) = [x for x in text.splitlines() if x.startswith("held=(")]
    return shlex.split(line[len("held=(") : line.rindex(")")].replace("<held-out file>", shlex.quote(str(path))))
