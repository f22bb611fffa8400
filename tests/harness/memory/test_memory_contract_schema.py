"""The HTTP contract's machine-readable form and what issue 37 item 10 adds to it: the OpenAPI document shipped in
the package and served by the reference server (`{base}/openapi.json`), checked against the reference server's actual
responses and the client's actual requests; the optional `stored` route, so an HTTP service's misses can be classed
"not stored"; asynchronous ingest (`ready: false`) for a haystack that takes longer than the per-call timeout."""

from __future__ import annotations

import json
import random
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from commands.cli import main
from harness.llm.loopback import LoopbackServer, Reply
from harness.memory.builtin import FullContextProvider, IndexProvider
from harness.memory.check import check_provider
from harness.memory.http import HttpProvider, MemoryServer
from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    ProviderAnswer,
    ProviderError,
    Retrieval,
)
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.fake_run import fake_endpoint_args

try:  # in the `test` extra (pyproject.toml); without it the schema checks skip, the route checks still run
    import jsonschema
    import referencing
    import referencing.jsonschema
except ImportError:
    jsonschema = referencing = None

needs_jsonschema = pytest.mark.skipif(jsonschema is None, reason="jsonschema not installed (pip install -e '.[test]')")

SCHEMA_URI = "urn:lme-harness:memory-contract"


class Recorded(MemoryServer):
    """The reference server, keeping every exchange as it went over the wire: (method, route, request body, status,
    response body)."""

    def __init__(self, provider: Any, **kw: Any) -> None:
        super().__init__(provider, **kw)
        self.exchanges: list[tuple[str, str, Any, int, Any]] = []
        post, get = self.responder, self.on_get
        assert get is not None

        def on_post(req: dict[str, Any]):
            reply = post(req)
            body = {k: v for k, v in req.items() if not k.startswith("_")}
            self.exchanges.append(("post", _route(req["_path"]), body, reply.status, _wire(reply.body)))
            return reply

        def on_get(path: str):
            reply = get(path)
            self.exchanges.append(("get", _route(path), None, reply.status, _wire(reply.body)))
            return reply

        self.responder, self.on_get = on_post, on_get


def _route(path: str) -> str:
    return "/" + path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _wire(body: Any) -> Any:
    return json.loads(json.dumps(body))  # what the client reads


def _validator(doc: dict[str, Any], ref: dict[str, Any]) -> Any:
    resource = referencing.Resource.from_contents(doc, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource(SCHEMA_URI, resource)
    schema = {"$ref": SCHEMA_URI + ref["$ref"]}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _schemas(doc: dict[str, Any], method: str, route: str, status: int) -> tuple[Any, Any]:
    """The validators of the request body and of the response body at `status`, as the document declares them."""
    op = doc["paths"][route][method]
    req = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    responses = op["responses"]
    resp = responses.get(str(status)) or responses[f"{str(status)[0]}XX"]
    body = resp["content"]["application/json"]["schema"]
    validate_body = _validator(doc, body) if "$ref" in body else jsonschema.Draft202012Validator(body)
    return (_validator(doc, req) if req else None), validate_body


def _run_over_http(
    provider: Any, run_dir: Path, *overrides: str, async_ingest: bool = False
) -> tuple[int, list[tuple[str, str, Any, int, Any]]]:
    """`lme-harness run mode=memory memory=http` (two oracle cases, the fake model) against `provider` served by the
    recorded reference server: the exit code and the exchanges."""
    with Recorded(provider, async_ingest=async_ingest) as mem, FakeOpenAIServer(FakeModel()) as model:
        argv = ["run", f"hydra.run.dir={run_dir}", "mode=memory", "memory=http", f"memory.url={mem.base_url}"]
        rc = main([*argv, *overrides, *fake_endpoint_args(model.base_url, run_dir.parent)])
    return rc, mem.exchanges


def _problems(doc: dict[str, Any], exchanges: list[tuple[str, str, Any, int, Any]]) -> list[str]:
    out = []
    for method, route, req, status, resp in exchanges:
        if route not in doc["paths"]:
            out.append(f"{method.upper()} {route}: not in the document")
            continue
        req_v, resp_v = _schemas(doc, method, route, status)
        if req_v is not None:
            out += [f"request {route}: {e.message}" for e in req_v.iter_errors(req)]
        out += [f"response {route} {status}: {e.message}" for e in resp_v.iter_errors(resp)]
    return out


class Answering(IndexProvider):
    """BM25 with the optional calls a reference server can serve: its own answer and the list of what it stored."""

    def capabilities(self) -> Capabilities:
        c = super().capabilities()
        return Capabilities(c.name, c.version, c.calls | {"answer"}, c.concurrency)

    def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
        got = self.retrieve(unit, query, 3, as_of)
        return ProviderAnswer(got.items[0].text if got.items else "", items=got.items)

    def stored(self, unit: str) -> tuple[MemoryItem, ...]:
        return self.retrieve(unit, "kitten cello flat street", 1000, "2100-01-01T00:00:00Z").items


@needs_jsonschema
def test_every_schema_of_the_document_is_a_valid_json_schema() -> None:
    from harness.memory.http import contract_schema

    doc = contract_schema()
    assert doc["openapi"].startswith("3.1")
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_the_schema_ships_in_the_package_and_the_reference_server_serves_it() -> None:
    from harness.memory.http import POST_ROUTES, contract_schema

    doc = contract_schema()
    assert set(doc["paths"]) == {f"/{r}" for r in POST_ROUTES} | {"/capabilities", "/openapi.json"}
    with MemoryServer(IndexProvider()) as srv:
        with urllib.request.urlopen(f"{srv.base_url}/openapi.json", timeout=10) as resp:
            assert json.loads(resp.read()) == doc
    # shipped as package data: tests/system/test_wheel_install.py finds it in an installed wheel


@pytest.mark.e2e
@needs_jsonschema
def test_the_reference_server_s_responses_and_the_client_s_requests_keep_the_schema(tmp_path: Path) -> None:
    from harness.memory.http import contract_schema

    doc = contract_schema()
    seen: list[tuple[str, str, Any, int, Any]] = []
    for provider, async_ingest in ((IndexProvider(), False), (FullContextProvider(), True), (Answering(), False)):
        with Recorded(provider, async_ingest=async_ingest) as srv:
            rep = check_provider(HttpProvider(srv.base_url), poll_s=0.05)
            assert rep.ok, rep.text()
            with urllib.request.urlopen(f"{srv.base_url}/openapi.json", timeout=10):
                pass
        seen += srv.exchanges
    rc, exchanges = _run_over_http(IndexProvider(), tmp_path / "run")
    assert rc == 0
    seen += exchanges
    assert _problems(doc, seen) == []
    # every documented route was exercised, errors included (an unknown unit's 404)
    assert {route for _, route, *_ in seen} == set(doc["paths"])
    assert {status for *_, status, _ in seen} >= {200, 404}


@needs_jsonschema
def test_the_schema_is_not_vacuous_bodies_that_break_the_contract_are_refused() -> None:
    from harness.memory.http import contract_schema

    doc = contract_schema()
    retrieve = _schemas(doc, "post", "/retrieve", 200)
    ingest = _schemas(doc, "post", "/ingest", 200)
    caps = _schemas(doc, "get", "/capabilities", 200)[1]
    assert retrieve[1].is_valid({"items": [{"text": "x", "score": 1, "provenance": None}]})
    for bad in (
        {},
        {"items": [{"score": 1}]},
        {"items": [{"text": 3}]},
        {"items": [{"text": "x", "score": "high"}]},
        {"items": [{"text": "x", "provenance": {"turn_index": -1}}]},
        {"items": "x"},
    ):
        assert not retrieve[1].is_valid(bad), bad
    assert not retrieve[0].is_valid({"unit": "u", "query": "q", "top_k": 0, "as_of": "2023-05-01T00:00:00Z"})
    assert not retrieve[0].is_valid({"unit": "u", "query": "q", "top_k": 3, "as_of": "2023/05/01 (Mon) 10:00"})
    assert not ingest[1].is_valid({"ready": "yes"})
    assert not caps.is_valid({"name": "x", "version": "1", "calls": ["setup", "ingest"], "concurrency": 1})
    assert not caps.is_valid({"name": "x", "version": "1", "calls": [*REQUIRED_CALLS, "dance"], "concurrency": 1})


def _random_items(rng: random.Random) -> list[dict[str, Any]]:
    def prov() -> Any:
        if rng.random() < 0.3:
            return None
        keys = rng.sample(["session_id", "turn_index", "date"], rng.randint(0, 3))
        return {
            k: {"session_id": "s1", "turn_index": rng.randint(0, 9), "date": "2023-05-01T10:00:00Z"}[k] for k in keys
        }

    out = []
    for _ in range(rng.randint(0, 4)):
        it: dict[str, Any] = {"text": rng.choice(["a", "the cat", ""])}
        if rng.random() < 0.7:
            it["score"] = rng.choice([None, 0.5, 2, -1.25])
        if rng.random() < 0.7:
            it["provenance"] = prov()
        out.append(it)
    return out


def _mutate(rng: random.Random, body: Any) -> Any:
    """`body` with one field dropped or given a value of the wrong JSON type (never one both sides could read)."""
    body = json.loads(json.dumps(body))
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in node:
                paths.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i])

    walk(body)
    if not paths:
        return "not an object"
    node, key = rng.choice(paths)
    if isinstance(node, dict) and rng.random() < 0.4:
        del node[key]
    else:
        old = node[key]
        node[key] = rng.choice([w for w in ("text", 7, True, [1], {"x": 1}) if type(w) is not type(old)])
    return body


@needs_jsonschema
@pytest.mark.parametrize("seed", range(30))
def test_generated_bodies_are_read_by_the_client_exactly_when_the_schema_accepts_them(seed: int) -> None:
    """The schema and the client (HttpProvider, over the wire) are two statements of one contract: on generated
    replies and their mutations (a field dropped, a value of another JSON type), the client reads a body exactly
    when the schema accepts it."""
    from harness.memory.http import contract_schema

    doc = contract_schema()
    rng = random.Random(seed)
    bodies = {
        "/retrieve": {"items": _random_items(rng), "usage": rng.choice([None, {}, {"input_tokens": 3, "cost_usd": 0.1}])},
        "/capabilities": {"name": "svc", "version": "1", "calls": sorted(REQUIRED_CALLS | {"ready"}),
                          "concurrency": rng.randint(1, 8)},
    }  # fmt: skip
    current: dict[str, Any] = {}
    srv = LoopbackServer(lambda req: Reply(body=current["body"]), on_get=lambda p: Reply(body=current["body"]))
    with srv:
        client = HttpProvider(srv.base_url, timeout_s=10)
        read = {
            "/retrieve": lambda: client.retrieve("u", "q", 3, "2023-05-01T00:00:00Z"),
            "/capabilities": lambda: client.capabilities().problems() == [] or 1 / 0,
        }
        for route, body in bodies.items():
            v = _schemas(doc, "get" if route == "/capabilities" else "post", route, 200)[1]
            for candidate in (body, _mutate(rng, body), _mutate(rng, body)):
                current["body"] = candidate
                try:
                    read[route]()
                    ok = True
                except (ProviderError, ZeroDivisionError, AttributeError, TypeError):
                    ok = False  # AttributeError/TypeError: the client's own unnamed errors (issue 37 item 7)
                assert v.is_valid(candidate) == ok, (route, candidate)


# --- the `stored` route ----------------------------------------------------------------------------------------


class Forgetful(FullContextProvider):
    """A service that keeps nothing of what it is told but one filler line, and returns that line."""

    FILLER = "The user said hello."

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        return super().ingest(unit, [])

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        super().retrieve(unit, query, top_k, as_of)  # an unknown unit is still an error
        return Retrieval((MemoryItem(self.FILLER),))


class ForgetfulListing(Forgetful):
    """The same service, listing what it stored (the `stored` route)."""

    def stored(self, unit: str) -> tuple[MemoryItem, ...]:
        return (MemoryItem(self.FILLER),)


def _causes(run: Path) -> list[str]:
    from reports.memory_systems import _cause, memory_cases

    recs = load_records(run / "records.jsonl")
    return [_cause(c) for c in memory_cases(recs, "lme_acc", {})]


@pytest.mark.e2e
def test_an_http_service_that_lists_what_it_stored_gets_its_misses_classed_not_stored(tmp_path: Path) -> None:
    causes = {}
    for provider in (ForgetfulListing(), Forgetful()):
        name = type(provider).__name__
        rc, exchanges = _run_over_http(provider, tmp_path / name)
        assert rc == 0
        traces = [r["ingest"]["trace"][0] for r in load_records(tmp_path / name / "records.jsonl")]
        stored_calls = [e for e in exchanges if e[1] == "/stored"]
        if isinstance(provider, ForgetfulListing):
            assert all(t["stored"] == {"items": 1, "evidence_turn": False, "evidence_session": False} for t in traces)
            assert len(stored_calls) == len(traces) == 2
        else:  # a service that does not list the route is never sent it
            assert all("stored" not in t for t in traces) and stored_calls == []
        causes[name] = _causes(tmp_path / name)
    assert causes == {"ForgetfulListing": ["not stored"] * 2, "Forgetful": ["not retrieved"] * 2}


# --- asynchronous ingest ------------------------------------------------------------------------------------------


class SlowIngest(IndexProvider):
    """BM25 whose ingest takes longer than the client's per-call timeout (a long haystack on a slow service)."""

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        time.sleep(1.5)
        return super().ingest(unit, sessions)


@pytest.mark.e2e
@pytest.mark.parametrize("async_ingest", [False, True], ids=["sync", "async"])
def test_an_ingest_longer_than_the_per_call_timeout_runs_when_the_service_answers_ready_false(
    async_ingest: bool, tmp_path: Path
) -> None:
    rc, exchanges = _run_over_http(SlowIngest(), tmp_path / "run", "memory.timeout_s=0.5", async_ingest=async_ingest)
    recs = load_records(tmp_path / "run" / "records.jsonl")
    if not async_ingest:  # the per-call timeout ends every ingest: failed cases
        assert rc == 3 and [r["status"] for r in recs] == ["failed", "failed"]
        return
    assert rc == 0 and [r["status"] for r in recs] == ["ok", "ok"], [r.get("error") for r in recs]
    for r in recs:
        t = r["ingest"]["trace"][0]
        assert t["ready_polls"] >= 1 and t["ready_wait_ms"] >= 1000  # it waited for the background ingest
        assert r["tool_calls"][0]["returned"] >= 1  # and retrieved from the finished unit
    ingests = [e for e in exchanges if e[1] == "/ingest"]
    assert all(e[4]["ready"] is False for e in ingests)


def test_an_asynchronous_ingest_that_fails_is_the_ready_call_s_error() -> None:
    class Broken(IndexProvider):
        def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
            raise RuntimeError("disk full")

    with MemoryServer(Broken(), async_ingest=True) as srv:
        rep = check_provider(HttpProvider(srv.base_url), poll_s=0.05)
    (name, why) = rep.failed[0]
    assert name == "setup_ingest" and "ready" in why and "disk full" in why
