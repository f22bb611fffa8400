"""supermemory's adapter (harness/memory/supermemory.py) through its real SDK against replayed responses."""

from __future__ import annotations

import hydra.utils
import pytest
from omegaconf import OmegaConf

from harness.memory.provider import MemorySession, MemoryTurn, ProviderError
from tests.support.hosted_replay import Replay, require_sdk
from tests.support.paths import REPO

require_sdk("supermemory")

from harness.memory.supermemory import SupermemoryProvider  # noqa: E402

pytestmark = pytest.mark.hosted

KEY = "sm-test-key-0123456789"
SESSIONS = (  # given out of date order: ingest sends them oldest first
    MemorySession("sess_b", "2023-06-01T10:00:00Z", (MemoryTurn("user", "I'm thinking about a second cat."),)),
    MemorySession(
        "sess_a",
        "2023-05-20T02:21:00Z",
        (MemoryTurn("user", "I adopted a cat named Luna."), MemoryTurn("assistant", "Congratulations on Luna!")),
    ),
)


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Replay:
    monkeypatch.setenv("SUPERMEMORY_API_KEY", KEY)
    return Replay.load("supermemory")


def provider(replay: Replay, **kw: object) -> SupermemoryProvider:
    return SupermemoryProvider(http_client=replay.client("https://api.supermemory.ai"), **kw)  # type: ignore[arg-type]


def test_a_unit_is_one_namespace_with_one_dated_document_per_session(replay: Replay) -> None:
    p = provider(replay)
    p.setup("u1")
    ingest = p.ingest("u1", SESSIONS)
    assert ingest.ready is False  # processed asynchronously: the harness polls `ready`
    docs = replay.sent("POST", "/ns/[^/]+/document")
    assert [d.path for d in docs] == ["/ns/lme-u1/document"] * 2
    assert [d.body["id"] for d in docs] == ["sess_a", "sess_b"]  # oldest first
    first = docs[0].body
    assert first["date"] == "2023-05-20T02:21:00Z"
    assert first["metadata"] == {
        "session_id": "sess_a",
        "session_date": "2023-05-20T02:21:00Z",
        "session_ts": 1684549260,
    }
    assert first["content"].splitlines() == [
        "Conversation on 2023-05-20T02:21:00Z (session sess_a):",
        "user: I adopted a cat named Luna.",
        "assistant: Congratulations on Luna!",
    ]
    assert all(d.headers["authorization"] == f"Bearer {KEY}" for d in replay.requests)
    assert not replay.unmatched


def test_ready_waits_for_processing_and_memory_generation(replay: Replay) -> None:
    p = provider(replay)
    p.setup("u1")
    p.ingest("u1", SESSIONS)
    assert p.ready("u1") is False  # sess_a still embedding / dreaming
    assert p.ready("u1") is True
    assert [r.path for r in replay.sent("GET", ".*")] == [
        "/ns/lme-u1/document/sess_a",
        "/ns/lme-u1/document/sess_a",
        "/ns/lme-u1/document/sess_b",
    ]


def test_a_failed_document_fails_the_unit(replay: Replay) -> None:
    replay.routes.insert(
        0,
        {
            "method": "GET",
            "path": "/ns/[^/]+/document/sess_a",
            "body": {
                "id": "sess_a",
                "type": "text",
                "metadata": {},
                "system": {
                    "status": "failed",
                    "dreamingStatus": "done",
                    "createdAt": "2026-12-02T06:00:00Z",
                    "updatedAt": "2026-12-02T06:00:00Z",
                },
            },
        },
    )
    p = provider(replay)
    p.setup("u1")
    p.ingest("u1", SESSIONS)
    with pytest.raises(ProviderError, match=r"supermemory.*ready for unit 'u1'.*sess_a.*failed"):
        p.ready("u1")


def test_retrieve_filters_as_of_in_the_service_and_keeps_provenance(replay: Replay) -> None:
    p = provider(replay, search_mode="memories")
    out = p.retrieve("u7", "what is my cat called?", 3, "2023-05-25T00:00:00Z")
    (sent,) = replay.sent("POST", "/ns/[^/]+/search")
    assert sent.path == "/ns/lme-u7/search"
    assert sent.body["query"] == "what is my cat called?"
    assert sent.body["limit"] == 3 and sent.body["searchMode"] == "memories"
    assert sent.body["filter"] == {"field": "session_ts", "operator": "lte", "value": 1684972800}
    assert [i.text for i in out.items] == [
        "The user adopted a cat named Luna in May 2023.",
        "user: I'm thinking about a second cat.",
    ]
    assert [i.score for i in out.items] == [0.87, 0.52]
    assert [(i.provenance.session_id, i.provenance.date) for i in out.items if i.provenance] == [
        ("sess_a", "2023-05-20T02:21:00Z"),
        ("sess_b", "2023-06-01T10:00:00Z"),  # dated after as_of, yet returned: kept for the leakage audit
    ]


def test_teardown_deletes_the_units_namespace_only(replay: Replay) -> None:
    p = provider(replay)
    p.setup("u1")
    p.teardown("u1")
    assert [r.path for r in replay.sent("DELETE", ".*")] == ["/ns/lme-u1"]


@pytest.mark.parametrize("status", [401, 429, 500])
def test_a_service_error_is_one_provider_error_without_the_key(replay: Replay, status: int) -> None:
    replay.routes.insert(
        0, {"method": "POST", "path": "/ns/[^/]+/search", "status": status, "body": {"error": f"bad key {KEY}"}}
    )
    p = provider(replay)
    with pytest.raises(ProviderError) as e:
        p.retrieve("u1", "q", 5, "2023-05-25T00:00:00Z")
    assert (e.value.provider, e.value.call, e.value.unit) == ("supermemory", "retrieve", "u1")
    assert str(status) in str(e.value)
    assert KEY not in str(e.value) and KEY not in repr(p) and KEY not in repr(vars(p))


def test_a_missing_key_is_named_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPERMEMORY_API_KEY", raising=False)
    replay = Replay.load("supermemory")
    with pytest.raises(ProviderError, match="environment variable SUPERMEMORY_API_KEY is not set"):
        provider(replay).setup("u1")
    assert replay.requests == []


def test_the_hydra_config_builds_it(replay: Replay) -> None:

    cfg = OmegaConf.load(REPO / "configs" / "memory" / "supermemory.yaml")
    p = hydra.utils.instantiate(cfg)
    assert isinstance(p, SupermemoryProvider)
    assert (p.api_key_env, p.search_mode, p.scope("u")) == ("SUPERMEMORY_API_KEY", "hybrid", "lme-u")
    caps = p.capabilities()
    assert caps.name == "supermemory" and caps.version.startswith("supermemory 5.")
    assert caps.supports("ready")
    with pytest.raises(ValueError, match="search_mode"):
        SupermemoryProvider(search_mode="graph")


class _FakeSupermemory:
    """A stateful stand-in for the service on loopback (for the run through Hydra): documents per namespace, done at
    once; search ranks the namespace's documents by words shared with the query, honouring the session_ts filter."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.docs: dict[str, dict[str, dict]] = {}
        self.ingested: list[str] = []  # every document's content, kept past teardown
        self.deleted: list[str] = []
        self.auth: set[str] = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, body: object) -> None:
                import json as _json

                data = _json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict:
                import json as _json

                n = int(self.headers.get("Content-Length") or 0)
                return _json.loads(self.rfile.read(n) or b"{}")

            def do_POST(self) -> None:
                fake.auth.add(self.headers.get("Authorization", ""))
                parts = self.path.strip("/").split("/")
                ns, body = parts[1], self._body()
                if parts[2] == "document":
                    fake.docs.setdefault(ns, {})[body["id"]] = body
                    fake.ingested.append(body["content"])
                    return self._reply({"id": body["id"], "status": "queued"})
                words = set(body["query"].lower().split())
                cut = body["filter"]["value"]
                found = [d for d in fake.docs.get(ns, {}).values() if d["metadata"]["session_ts"] <= cut]
                found.sort(key=lambda d: -len(words & set(d["content"].lower().split())))
                results = [
                    {
                        "id": d["id"],
                        "chunk": d["content"],
                        "metadata": d["metadata"],
                        "similarity": 0.5,
                        "isLatest": True,
                        "isInference": False,
                        "system": {"updatedAt": "2026-12-02T00:00:00Z"},
                    }
                    for d in found[: body["limit"]]
                ]
                self._reply({"searchTime": 1.0, "results": results})

            def do_GET(self) -> None:
                doc_id = self.path.strip("/").split("/")[3]
                system = {
                    "status": "done",
                    "dreamingStatus": "done",
                    "createdAt": "2026-12-02T00:00:00Z",
                    "updatedAt": "2026-12-02T00:00:00Z",
                }
                self._reply({"id": doc_id, "type": "text", "metadata": {}, "system": system})

            def do_DELETE(self) -> None:
                ns = self.path.strip("/").split("/")[1].split("?")[0]
                fake.deleted.append(ns)
                fake.docs.pop(ns, None)
                self._reply(
                    {"status": "deleted", "namespace": ns, "deletedDocumentsCount": 1, "deletedMemoriesCount": 0}
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.e2e
def test_mode_memory_runs_supermemory_end_to_end_through_hydra(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from harness.records import load_records
    from tests.support.fake_run import run_fake

    monkeypatch.setenv("SUPERMEMORY_API_KEY", KEY)
    fake = _FakeSupermemory()
    try:
        rc, requests = run_fake(tmp_path, ["mode=memory", "memory=supermemory", f"memory.base_url={fake.url}"])
    finally:
        fake.server.shutdown()
    assert rc == 0
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    for r in recs:
        (trace,) = r["ingest"]["trace"]
        assert trace["provider"] == "supermemory" and trace["variant"] == "fair"
        (rt,) = r["tool_calls"]
        assert rt["name"] == "memory_retrieve" and rt["returned"] >= 1 and rt["after_as_of"] == 0
        assert fake.ingested and not any(r["question"] in text for text in fake.ingested)  # never the question
    assert len(fake.deleted) == 2 and len(set(fake.deleted)) == 2  # one namespace per unit, each torn down
    assert fake.auth == {f"Bearer {KEY}"}
    run_json = (tmp_path / "run" / "run.json").read_text()
    assert KEY not in run_json and KEY not in json.dumps(recs)
    assert len([q for q in requests if "History Chats" in json.dumps(q.get("messages"))]) == 2
