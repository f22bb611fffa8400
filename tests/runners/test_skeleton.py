"""One run skeleton (runners/skeleton.py): `run`, `rescore` and `plan` assemble their run in one place, and the
plan's stand-in model is an `LLMClient` like the run's (docs/architecture.md, "One run skeleton")."""

import ast
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config_files import CONFIG_DIR
from harness.llm.cache import ResponseCache
from harness.llm.client import LLMClient
from harness.llm.types import ChatResult, SaltedModel, Usage
from runners.run_config import RunConfig
from runners.skeleton import Clients, run_skeleton
from tests.support.paths import REPO

ROOT = REPO
COMMANDS = ("runners/replay.py", "commands/rescore.py", "commands/plan.py")
# what only the skeleton assembles: lock, failure note, cache, endpoints and clients, preflight, writer, watch,
# progress ticker, stop signals
SKELETON_PARTS = {
    "run_dir_lock",
    "write_failure",
    "clear_failure",
    "open_cache",
    "open_endpoint",
    "make_client",
    "preflight",
    "RecordWriter",
    "write_fingerprint",
    "ServerWatch",
    "Ticker",
    "STOP",
}
MSGS = [{"role": "user", "content": "hi"}]


def _assembled(path: Path) -> set[str]:
    """The skeleton's parts `path` calls (or, for STOP, names) itself; `skeleton.open_cache()` asks the skeleton."""
    tree = ast.parse(path.read_text())
    called = {
        f.id if isinstance(f, ast.Name) else f.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(f := n.func, (ast.Name, ast.Attribute))
        and not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("skeleton", "self"))
    }
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "STOP"}
    return (called | named) & SKELETON_PARTS


def test_the_commands_assemble_no_part_of_the_skeleton_themselves():
    for rel in COMMANDS:
        used = _assembled(ROOT / rel)
        assert not used, f"{rel} assembles {sorted(used)} itself: take it from runners/skeleton.py"
    assert _assembled(ROOT / "runners/skeleton.py") == SKELETON_PARTS  # the one place (the check sees them)


def _cfg(tmp_path, **judge):
    """The run's settings: the default composed config with a remote answer model and the judge group `judge`."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["run.progress=false", f"cache.path={tmp_path}/responses.sqlite"])
    model = {"name": "answer", "kind": "remote", "model": "m-answer", "base_url": "http://127.0.0.1:9/v1"}
    OmegaConf.update(cfg, "model", model, merge=False)
    OmegaConf.update(cfg, "judge", judge, merge=False)
    return RunConfig.build(cfg)


class Recorder:
    """A stand-in responder and observer pair that remembers what it saw."""

    def __init__(self) -> None:
        self.answered: list[str] = []
        self.observed: list[tuple[str, bool]] = []

    def factory(self, ep):
        def respond(msgs, tools, params, purpose):
            self.answered.append(purpose)
            return ChatResult("stand-in", (), Usage(0, 5), 0.0, ep.spec.model, finish_reason="stop", purpose=purpose)

        def observe(msgs, tools, r):
            self.observed.append((r.model if not r.cached else "cached", r.cached))

        return respond, observe


def test_the_plan_model_is_a_client_whose_stand_in_answers_misses_and_never_writes_the_cache(tmp_path):
    seen = Recorder()
    config = _cfg(tmp_path)
    # a reply the cache holds, stored by a run's client for the same endpoint and request
    run_client = LLMClient(
        base_url="http://127.0.0.1:9/v1", model="m-answer", cache=ResponseCache(str(config.cache.path))
    )
    run_client.cache.put(run_client.chat_key(MSGS, max_tokens=7), {"content": "cached reply", "model": "m-answer"})
    held = len(run_client.cache)
    with run_skeleton(tmp_path / "run", config=config, lock=False, note=False) as sk:
        sk.open_cache()
        clients = sk.open_clients(stand_in=seen.factory)
        assert isinstance(clients.answer, LLMClient) and clients.judge is clients.answer
        hit = clients.answer.chat(MSGS, max_tokens=7)
        miss = clients.answer.chat(MSGS, max_tokens=8, purpose="judge")
    assert hit.cached and hit.content == "cached reply"
    assert not miss.cached and miss.content == "stand-in" and miss.purpose == "judge"
    assert seen.answered == ["judge"]  # only the miss reached the stand-in
    assert seen.observed == [("cached", True), ("m-answer", False)]  # every call observed
    assert len(ResponseCache(str(config.cache.path))) == held  # the plan wrote nothing
    assert not (tmp_path / "run").exists()


def test_a_judge_endpoint_of_its_own_is_a_second_client(tmp_path):
    seen = Recorder()
    config = _cfg(tmp_path, endpoint={"name": "judge", "kind": "remote", "model": "m-judge", "base_url": "http://j/v1"})
    with run_skeleton(tmp_path / "run", config=config, lock=False, note=False) as sk:
        clients = sk.open_clients(stand_in=seen.factory)
        assert clients.judge is not clients.answer and clients.judge is not None
        assert [e.spec.model for e in clients.endpoints] == ["m-answer", "m-judge"]
        judge_only = sk.open_clients(answer=False, stand_in=seen.factory)
    assert judge_only.answer is None and judge_only.judge is not None and judge_only.judge.model == "m-judge"
    assert Clients().stats() == {}


def test_a_failure_before_start_leaves_only_the_note_and_after_start_says_stopped(tmp_path):
    config = _cfg(tmp_path)
    for started, what in ((False, "could not start"), (True, "stopped")):
        run_dir = tmp_path / f"run-{started}"
        try:
            with run_skeleton(run_dir, config=config) as sk:
                if started:
                    sk.start("fp")
                raise ValueError("boom")
        except ValueError:
            pass
        note = (run_dir / "FAILED.txt").read_text()
        assert what in note and "ValueError: boom" in note
        assert (run_dir / "fingerprint.json").exists() == started


class _Echo:
    model = "echo"

    def __init__(self) -> None:
        self.salts: list[str | None] = []

    def chat(self, messages, *, tools=None, purpose="answer", cache_salt=None, **params):
        self.salts.append(cache_salt)
        return ChatResult("", (), Usage(), 0.0, self.model)


def test_one_salted_model_keeps_the_callers_salt_in_front():
    inner = _Echo()
    m = SaltedModel(inner, "judge-vote-1")
    m.chat(MSGS)
    m.chat(MSGS, cache_salt="judge-mode:summary")
    assert inner.salts == ["judge-vote-1", "judge-mode:summary|judge-vote-1"] and m.model == "echo"
