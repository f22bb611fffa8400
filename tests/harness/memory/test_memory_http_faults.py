"""The memory-service client (harness/memory/http.py) against services that misbehave on the wire, on loopback:

- a service that trickles its reply (one byte at a time, headers or body) fails each call within `memory.timeout_s`
  (a whole-call deadline, harness/llm/deadline.py), in a direct call, in `provider-check` and in a run;
- a reply cut short and every generated malformed body (seeded) is one ProviderError naming the provider, the call
  and the field, never a raw Python exception;
- where the service is served (`memory.url`, any URL-valued setting) is not the run's identity: a service restarted
  on another port resumes the same run directory and attaches to the unit a killed run left there.
"""

from __future__ import annotations

import copy
import json
import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.llm.loopback import LoopbackServer, Reply
from harness.memory.check import check_url
from harness.memory.http import HttpProvider, MemoryServer
from harness.memory.provider import MemorySession, MemoryTurn, ProviderError
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from runners.fingerprint import fingerprint
from runners.rundir import overrides_dirname
from runners.setting_rules import dirname_exclusions
from tests.harness.memory.test_memory_ingest_checkpoint import KEY, KEY_ENV, Recording
from tests.harness.memory.test_memory_ingest_checkpoint import _args as checkpoint_run_args
from tests.support.fake_run import killed_at_first_reader, run_fake
from tests.support.raw_http import RawServer, trickle

SESSIONS = (MemorySession("s1", "2023-05-01T10:00:00Z", (MemoryTurn("user", "I adopted a cat named Miso"),)),)
AS_OF = "2023-07-01T00:00:00Z"


def cut_short(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"items": [{"te')
    conn.shutdown(socket.SHUT_WR)  # a clean close, 185 bytes short of the promised body


CALLS: dict[str, Callable[[HttpProvider], object]] = {
    "capabilities": lambda p: p.capabilities(),
    "setup": lambda p: p.setup("u1"),
    "ingest": lambda p: p.ingest("u1", SESSIONS),
    "ready": lambda p: p.ready("u1"),
    "retrieve": lambda p: p.retrieve("u1", "what is my cat called", 5, AS_OF),
    "answer": lambda p: p.answer("u1", "what is my cat called", AS_OF),
    "attach": lambda p: p.attach("u1"),
    "teardown": lambda p: p.teardown("u1"),
}


# --- a trickling service: the whole call is bounded ---------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers"])
def test_a_trickling_service_fails_every_call_within_timeout_s(headers) -> None:
    with RawServer(trickle(0.2, headers=headers)) as srv:
        p = HttpProvider(srv.base_url, timeout_s=1.0)
        for call in ("capabilities", "ingest", "retrieve"):
            t0 = time.monotonic()
            with pytest.raises(ProviderError) as e:
                CALLS[call](p)
            elapsed = time.monotonic() - t0
            # Each read gets a byte in time (every 0.2 s), so without a whole-call deadline the call never ends:
            # ending at all, with the deadline's message, is the proof; the bound only says "not unbounded".
            assert e.value.call == call and "no complete response within timeout_s=1 s" in str(e.value)
            assert 0.95 <= elapsed < 10, (call, elapsed)
        deadline = time.monotonic() + 20  # the connections were dropped, not left to trickle
        while len(srv.abandoned_at) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(srv.abandoned_at) == 3


@pytest.mark.timeout(120)
def test_provider_check_of_a_trickling_service_ends_with_the_call_named() -> None:
    with RawServer(trickle(0.2)) as srv:
        t0 = time.monotonic()
        rep = check_url(srv.base_url, timeout_s=1.0)
        assert time.monotonic() - t0 < 10
    assert not rep.ok
    ((name, why),) = rep.failed
    assert name == "capabilities" and "no complete response within timeout_s=1 s" in why


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_run_against_a_trickling_service_ends_with_its_cases_failed_not_hung(tmp_path) -> None:
    from commands.cli import EXIT_FAILED_CASES

    with RawServer(trickle(0.2)) as mem:
        rc, _ = run_fake(tmp_path, ["mode=memory", "memory=http", f"memory.url={mem.base_url}", "memory.timeout_s=1"])
    assert rc == EXIT_FAILED_CASES
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert len(recs) == 2 and all(r["status"] == "failed" for r in recs)
    assert all("no complete response within timeout_s=1 s" in r["error"] for r in recs)


# --- a body cut short, malformed bodies: one ProviderError naming provider, call and field --------------------------


def test_a_body_cut_short_is_one_error_naming_the_call() -> None:
    with RawServer(cut_short) as srv:
        url = srv.base_url
        with pytest.raises(ProviderError) as e:
            HttpProvider(url, timeout_s=5).retrieve("u1", "cat", 5, AS_OF)
    assert e.value.provider == url.rstrip("/") and e.value.call == "retrieve" and e.value.unit == "u1"
    assert "response cut short" in e.value.detail and "expected 200" in e.value.detail  # httpx's count


ITEM = {"text": "User adopted a cat named Miso", "score": 0.8, "provenance": {"session_id": "s1", "turn_index": 0}}
VALID: dict[str, dict] = {
    "capabilities": {
        "name": "fuzzed",
        "version": "1",
        "calls": ["setup", "ingest", "retrieve", "teardown", "ready", "answer", "attach"],
        "concurrency": 2,
        "contract": "1",
    },
    "ingest": {"ready": True, "usage": {"input_tokens": 12, "llm_calls": 1, "cost_usd": 0.001}},
    "ready": {"ready": True},
    "retrieve": {"items": [ITEM, {**ITEM, "provenance": None, "score": None}], "usage": {"embedding_tokens": 3}},
    "answer": {"answer": "Miso", "usage": {"output_tokens": 2}, "items": [ITEM]},
    "attach": {"attached": True},
}
WRONG = [None, True, 0, -3, 1.5, "x", "", [], {}, [1, "a"], {"k": 1}, 10**400, float("nan"), float("-inf")]


def _paths(node, prefix=()):
    """Every (path, value) inside a JSON value: dict keys and list positions."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _mutated(body: dict, rng: random.Random) -> bytes:
    """`body` damaged one way, chosen by `rng`: a field replaced by a value of another kind, a key dropped, the
    items not objects, the whole body not an object, or text that is not JSON."""
    kind = rng.choice(["replace", "replace", "replace", "drop", "items", "top", "text"])
    doc = copy.deepcopy(body)
    if kind == "top":
        return json.dumps(rng.choice([[], [doc], "ok", 1, None, True])).encode()
    if kind == "text":
        raw = json.dumps(doc).encode()
        return rng.choice([raw[: rng.randrange(1, len(raw))], b"\xff\xfe garbage", b"[" * 100_000, b"<html>502</html>"])
    if kind == "items" and isinstance(doc.get("items"), list):
        doc["items"] = [rng.choice([1, "text", None, ["text"], True]) for _ in range(rng.randint(1, 3))]
        return json.dumps(doc).encode()
    paths = [p for p, _ in _paths(doc) if p]
    path = rng.choice(paths)
    *parents, last = path
    node = doc
    for k in parents:
        node = node[k]
    if kind == "drop" and isinstance(node, dict):
        del node[last]
    else:
        node[last] = rng.choice(WRONG)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("seed", range(6))
def test_generated_malformed_bodies_are_one_provider_error_naming_the_call_and_field(seed) -> None:
    rng = random.Random(seed)
    serving: dict[str, bytes] = {}

    def body_for(call: str) -> bytes:
        return serving.get(call) or json.dumps(VALID.get(call, {})).encode()

    srv = LoopbackServer(
        lambda req: Reply(body=body_for(str(req["_path"]).rsplit("/", 1)[-1])),
        on_get=lambda path: Reply(body=body_for("capabilities")),
        record=False,
    )
    tried = failed = 0
    with srv:
        url = srv.base_url.rstrip("/")
        p = HttpProvider(url, timeout_s=10)  # named by its URL until its capabilities name it
        for call, body in VALID.items():
            for _ in range(12):
                serving[call] = raw = _mutated(body, rng)
                tried += 1
                try:
                    CALLS[call](p)
                except ProviderError as e:  # anything else fails the test: a raw Python exception
                    failed += 1
                    # named: by its own name, or before any capabilities reply named it, by its URL
                    assert e.provider == (p._name if call == "capabilities" else "fuzzed"), raw
                    assert e.call == call, raw
                    assert e.detail.startswith(("bad response body: ", "not JSON: ")), (e.detail, raw)
                    if e.detail.startswith("bad response body: "):  # the field, as a path into the body
                        field = e.detail.removeprefix("bad response body: ").split(":", 1)[0]
                        assert field.split(".", 1)[0].split("[", 1)[0] in (call, "items", "usage", "capabilities")
            serving.clear()
            p.capabilities()  # the provider has its own name for the other calls
    assert failed >= tried // 2, (failed, tried)  # most damage is caught (a dropped optional field is not damage)


def test_the_issues_examples_items_that_are_not_objects_and_a_non_finite_score() -> None:
    bodies = {
        "retrieve": [
            (b'{"items": ["Miso", 3]}', r"items\[0\]: expected an object, got str"),
            (b'{"items": [{"text": "a", "provenance": "s1"}]}', r"items\[0\]\.provenance: expected an object"),
            (b'{"items": [{"text": "a", "score": NaN}]}', r"items\[0\]\.score: expected a finite number"),
            (b'{"items": [{"text": "a", "provenance": {"turn_index": -1}}]}', r"turn_index: expected a turn's"),
        ],
        "ingest": [(b"[]", r"ingest: expected an object, got list")],
        "answer": [(b'{"answer": "a", "items": [[]]}', r"items\[0\]: expected an object, got list")],
    }
    served: dict[str, bytes] = {}
    srv = LoopbackServer(lambda req: Reply(body=served[str(req["_path"]).rsplit("/", 1)[-1]]), record=False)
    with srv:
        p = HttpProvider(srv.base_url, timeout_s=10)
        for call, cases in bodies.items():
            for raw, want in cases:
                served[call] = raw
                with pytest.raises(ProviderError, match=rf"{call} for unit 'u1' failed: bad response body: .*{want}"):
                    CALLS[call](p)


# --- where the service is served is not the run's identity -------------------------------------------------------


def test_a_url_valued_setting_is_out_of_the_fingerprint_and_the_directory_name_whatever_its_key() -> None:
    def cfg(port: int):
        return OmegaConf.create(
            {
                "mode": {"memory": {"top_k": 10}},
                "memory": {"_target_": "harness.memory.http.HttpProvider", "url": f"http://127.0.0.1:{port}/v1"},
                "adapter": {"server_endpoint": f"https://memory.example:{port}/api", "timeout_s": 60},
            }
        )

    assert fingerprint(cfg(8765)) == fingerprint(cfg(9911))
    changed = OmegaConf.merge(cfg(8765), {"mode": {"memory": {"top_k": 5}}})
    assert fingerprint(changed) != fingerprint(cfg(8765))  # what is served still counts
    names = [
        overrides_dirname(
            ["mode=memory", "memory=http", f"memory.url=http://127.0.0.1:{port}/v1"], [*dirname_exclusions()]
        )
        for port in (8765, 9911)
    ]
    assert names[0] == names[1] and "8765" not in names[0] and "127.0.0.1" not in names[0]


@pytest.mark.process
@pytest.mark.timeout(600)
def test_a_service_restarted_on_another_port_resumes_the_run_and_attaches(tmp_path, monkeypatch) -> None:
    from commands.cli import main
    from harness.testing.faults import FakeModel

    monkeypatch.setenv(KEY_ENV, KEY)
    service = Recording(attachable=True)  # its units outlive its server: a service restarted with its store
    first = MemoryServer(service)
    with (
        first,
        killed_at_first_reader(
            FakeModel(), lambda url: checkpoint_run_args(tmp_path, url, first.base_url), env={KEY_ENV: KEY}
        ) as model,
    ):
        first_url = first.base_url
    assert [c for c, _ in service.calls] == ["setup", "ingest"]  # killed with its first unit on the service
    stale = service.calls[0][1]
    with FakeOpenAIServer(FakeModel()) as model, MemoryServer(service) as restarted:
        assert restarted.base_url != first_url
        assert main(checkpoint_run_args(tmp_path, model.base_url, restarted.base_url)) == 0
    resumed = service.calls[2:]
    assert ("attach", stale) in resumed and ("ingest", stale) not in resumed and ("setup", stale) not in resumed
    recs = load_records(Path(tmp_path) / "run" / "records.jsonl")
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs)
    (kept,) = [r for r in recs if r["ingest"]["trace"][0]["unit"] == stale]  # units are opaque: traces name them
    assert kept["ingest"]["trace"][0]["resumed"] is True
