"""The HTTP/JSON form of the memory-provider contract (harness/memory/provider.py; docs/memory-systems.md).

One route per call under a base URL (e.g. http://127.0.0.1:8765/v1), JSON in and out, the unit in the body:

    GET  {base}/capabilities                                  -> {name, version, calls, concurrency, contract}
    POST {base}/setup     {unit}                              -> {}
    POST {base}/ingest    {unit, sessions: [{session_id, date, turns: [{role, content}]}]}
                                                              -> {ready, usage}
    POST {base}/ready     {unit}                              -> {ready}
    POST {base}/retrieve  {unit, query, top_k, as_of}         -> {items: [{text, score, provenance}], usage}
    POST {base}/answer    {unit, query, as_of}                -> {answer, usage, items}
    POST {base}/attach    {unit}                              -> {attached}       (optional, see below)
    POST {base}/stored    {unit}                              -> {items}          (optional, see below)
    POST {base}/teardown  {unit}                              -> {}
    GET  {base}/openapi.json                                  -> the contract as OpenAPI 3.1 (reference server)

`usage` is {input_tokens, output_tokens, embedding_tokens, llm_calls, cost_usd, cached_llm_calls,
unusable_replies} (any may be left out),
`provenance` {session_id, turn_index, date} or null. A failed call answers a non-2xx status with
{"error": "<message>"}; an unknown unit is 404. `HttpProvider` is the client (a provider like any other);
`MemoryServer` serves any Python provider over these routes on loopback (the reference server).

`attach` is optional, like `ready` and `answer`: a service lists it in `calls` when it can say whether a unit an
earlier process set up and ingested is still there, complete and ready (`attached: true`), so that a resumed run
answers against it without sending the sessions again. A service that does not list it is never asked (its units
are torn down and ingested again on resume), so services written before the route keep working unchanged.
`stored` is optional the same way: a service that lists it answers every memory it stored for the unit, so a
wrong answer whose evidence was never stored is classed "not stored" rather than "not retrieved".

The schema (`contract.openapi.json`, shipped beside this module, `contract_schema()`) is the machine-readable form of
these routes; the reference server serves it at `{base}/openapi.json`. Asynchronous ingest: a service whose ingest
takes longer than the client's per-call timeout answers ingest at once with `ready: false` and keeps working; the
harness polls `ready` until true (`mode.memory.ready_timeout_s`). `MemoryServer(provider, async_ingest=True)` (and
`python -m harness.memory.http --async-ingest`) serves a Python provider that way.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.llm.deadline import call_deadline, deadline_client, httpx
from harness.llm.loopback import LoopbackServer, Reply
from harness.memory.provider import (
    CONTRACT_VERSION,
    Capabilities,
    Ingest,
    MemoryItem,
    MemoryProvider,
    MemorySession,
    MemoryTurn,
    Provenance,
    ProviderAnswer,
    ProviderBase,
    ProviderError,
    Retrieval,
    Usage,
    with_provider_defaults,
)

POST_ROUTES = ("setup", "ingest", "ready", "retrieve", "answer", "attach", "stored", "teardown")
SCHEMA_FILE = "contract.openapi.json"  # package data of harness.memory (setup.py)
SCHEMA_ROUTE = "openapi.json"


def contract_schema() -> dict[str, Any]:
    """The HTTP contract as an OpenAPI 3.1 document (its schemas are JSON Schema 2020-12)."""
    from importlib.resources import files

    loaded: dict[str, Any] = json.loads(files("harness.memory").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return loaded


class ShapeError(ValueError):
    """A JSON body that does not have the contract's shape; the message names the field."""


# --- JSON codec: the contract's types as plain JSON and back (every field checked, named when wrong) ----------


def _obj(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ShapeError(f"{where}: expected an object, got {type(obj).__name__}")
    return obj


def _req(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    obj = _obj(obj, where)
    if key not in obj:
        raise ShapeError(f"{where}.{key}: missing")
    v = obj[key]
    if not isinstance(v, kind) or (isinstance(v, bool) and kind in (int, float, (int, float))):
        raise ShapeError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {v!r}"[:300])
    return v


def _opt(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    return None if _obj(obj, where).get(key) is None else _req(obj, key, kind, where)


def _number(obj: Any, key: str, where: str) -> float | None:
    """An optional finite number (a score, a cost): NaN, infinities and integers past a float's range are refused."""
    v = _opt(obj, key, (int, float), where)
    if v is None:
        return None
    try:
        x = float(v)
    except OverflowError:
        x = float("inf")
    if x != x or x in (float("inf"), float("-inf")):
        raise ShapeError(f"{where}.{key}: expected a finite number, got {str(v)[:40]}")
    return x


def capabilities_json(c: Capabilities) -> dict[str, Any]:
    return {
        "name": c.name,
        "version": c.version,
        "calls": sorted(c.calls),
        "concurrency": c.concurrency,
        "contract": c.contract,
    }


def capabilities_of(d: Any) -> Capabilities:
    w = "capabilities"
    calls = _req(d, "calls", list, w)
    if not all(isinstance(x, str) for x in calls):
        raise ShapeError(f"{w}.calls: expected a list of strings, got {calls!r}")
    return Capabilities(
        _req(d, "name", str, w),
        _req(d, "version", str, w),
        frozenset(calls),
        _req(d, "concurrency", int, w),
        _opt(d, "contract", str, w) or CONTRACT_VERSION,
    )


def sessions_json(sessions: Sequence[MemorySession]) -> list[dict[str, Any]]:
    return [asdict(s) for s in sessions]


def sessions_of(d: Any) -> tuple[MemorySession, ...]:
    if not isinstance(d, list):
        raise ShapeError(f"sessions: expected a list, got {type(d).__name__}")
    out = []
    for i, s in enumerate(d):
        w = f"sessions[{i}]"
        turns = _req(s, "turns", list, w)
        out.append(
            MemorySession(
                _req(s, "session_id", str, w),
                _req(s, "date", str, w),
                tuple(
                    MemoryTurn(_req(t, "role", str, f"{w}.turns[{j}]"), _req(t, "content", str, f"{w}.turns[{j}]"))
                    for j, t in enumerate(turns)
                ),
            )
        )
    return tuple(out)


def usage_of(d: Any, where: str) -> Usage:
    if d is None:
        return Usage()
    _obj(d, where)
    ints = {
        k: _opt(d, k, int, where) or 0
        for k in (
            "input_tokens",
            "output_tokens",
            "embedding_tokens",
            "llm_calls",
            "cached_llm_calls",
            "unusable_replies",
        )
    }
    return Usage(**ints, cost_usd=_number(d, "cost_usd", where))


def items_json(items: Sequence[MemoryItem]) -> list[dict[str, Any]]:
    return [asdict(i) for i in items]


def items_of(d: Any, where: str = "items") -> tuple[MemoryItem, ...]:
    if not isinstance(d, list):
        raise ShapeError(f"{where}: expected a list, got {type(d).__name__}")
    out = []
    for i, it in enumerate(d):
        w = f"{where}[{i}]"
        score = _number(_obj(it, w), "score", w)
        p = it.get("provenance")
        prov = None
        if p is not None:
            pw = f"{w}.provenance"
            if not isinstance(p, dict):
                raise ShapeError(f"{pw}: expected an object or null, got {type(p).__name__}")
            turn = _opt(p, "turn_index", int, pw)
            if turn is not None and turn < 0:
                raise ShapeError(f"{pw}.turn_index: expected a turn's position (>= 0), got {turn}")
            prov = Provenance(_opt(p, "session_id", str, pw), turn, _opt(p, "date", str, pw))
        out.append(MemoryItem(_req(it, "text", str, w), score, prov))
    return tuple(out)


# --- the client -------------------------------------------------------------------------------------------------


class HttpProvider(ProviderBase):
    """A provider served over HTTP at `url` (the base, e.g. http://127.0.0.1:8765/v1). A bearer token, when the
    service wants one, is read from the environment variable named by `api_key_env` (never from config)."""

    NAME = "http"
    remote = True  # a service outside this process: `lme-harness plan` sends it nothing (harness/memory/planned.py)

    def __init__(self, url: str, timeout_s: float = 60.0, api_key_env: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s  # the whole call: connect, send, every byte of the reply (harness/llm/deadline.py)
        self.api_key_env = api_key_env
        self._name = self.url
        self._http: httpx.Client | None = None
        self._http_lock = threading.Lock()

    def _client(self) -> httpx.Client:
        with self._http_lock:
            if self._http is None:
                self._http = deadline_client(self.timeout_s)
            return self._http

    def preflight(self) -> None:
        """Before any request: a token variable named (`api_key_env`) but unset is one ProviderError naming it."""
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ProviderError(self._name, "preflight", None, f"environment variable {self.api_key_env} is not set")

    def _call(self, call: str, unit: str | None, body: dict[str, Any] | None) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ProviderError(self._name, call, unit, f"environment variable {self.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        data = None if body is None else json.dumps(body).encode()
        try:
            with call_deadline(self.timeout_s):  # a service sending a byte at a time still ends here
                resp = self._client().request(
                    "GET" if body is None else "POST", f"{self.url}/{call}", content=data, headers=headers
                )
        except httpx.TimeoutException:
            raise ProviderError(
                self._name, call, unit, f"no complete response within timeout_s={self.timeout_s:g} s (the whole call)"
            ) from None
        except httpx.RemoteProtocolError as e:  # e.g. a body shorter than its Content-Length: httpx says how much
            raise ProviderError(self._name, call, unit, f"response cut short or malformed: {e}") from None
        except (httpx.TransportError, httpx.InvalidURL) as e:
            raise ProviderError(self._name, call, unit, f"unreachable: {type(e).__name__}: {e}") from None
        raw = resp.content
        if not 200 <= resp.status_code < 300:
            raise ProviderError(self._name, call, unit, f"HTTP {resp.status_code}: {_error_text(raw)}")
        try:
            return json.loads(raw or b"{}")
        except (ValueError, RecursionError):
            raise ProviderError(self._name, call, unit, f"not JSON: {raw[:200]!r}") from None

    def _decode(self, call: str, unit: str | None, fn: Any, body: Any) -> Any:
        try:
            return fn(body)
        except ShapeError as e:
            raise ProviderError(self._name, call, unit, f"bad response body: {e}") from None

    def capabilities(self) -> Capabilities:
        caps: Capabilities = self._decode("capabilities", None, capabilities_of, self._call("capabilities", None, None))
        self._name = caps.name or self.url
        self._calls = caps.calls
        return caps

    def setup(self, unit: str) -> None:
        self._call("setup", unit, {"unit": unit})

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        d = self._call("ingest", unit, {"unit": unit, "sessions": sessions_json(sessions)})
        return self._decode(
            "ingest",
            unit,
            lambda d: Ingest(usage_of(_obj(d, "ingest").get("usage"), "usage"), bool(_req(d, "ready", bool, "ingest"))),
            d,
        )

    def ready(self, unit: str) -> bool:
        d = self._call("ready", unit, {"unit": unit})
        return bool(self._decode("ready", unit, lambda d: _req(d, "ready", bool, "ready"), d))

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        d = self._call("retrieve", unit, {"unit": unit, "query": query, "top_k": top_k, "as_of": as_of})
        return self._decode(
            "retrieve",
            unit,
            lambda d: Retrieval(items_of(_req(d, "items", list, "retrieve")), usage_of(d.get("usage"), "usage")),
            d,
        )

    def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
        d = self._call("answer", unit, {"unit": unit, "query": query, "as_of": as_of})
        return self._decode(
            "answer",
            unit,
            lambda d: ProviderAnswer(
                _req(d, "answer", str, "answer"),
                usage_of(d.get("usage"), "usage"),
                items_of([] if d.get("items") is None else d["items"]),
            ),
            d,
        )

    def attach(self, unit: str) -> bool:
        """The optional route (call it only when `capabilities().calls` lists `attach`)."""
        d = self._call("attach", unit, {"unit": unit})
        return bool(self._decode("attach", unit, lambda d: _req(d, "attached", bool, "attach"), d))

    def stored(self, unit: str) -> tuple[MemoryItem, ...] | None:
        """Every memory the service stored for `unit` (the optional `stored` route); None, with no request, when the
        service does not list it (the contestant then keeps "not stored" and "not retrieved" as one class)."""
        calls = getattr(self, "_calls", None)
        if calls is None:
            calls = self.capabilities().calls
        if "stored" not in calls:
            return None
        d = self._call("stored", unit, {"unit": unit})
        return self._decode("stored", unit, lambda d: items_of(_req(d, "items", list, "stored")), d)

    def teardown(self, unit: str) -> None:
        self._call("teardown", unit, {"unit": unit})


def _error_text(raw: bytes) -> str:
    try:
        d = json.loads(raw)
    except (ValueError, RecursionError):
        return raw[:300].decode(errors="replace")
    e = d.get("error") if isinstance(d, dict) else None
    return str(e if e is not None else d)[:300]


# --- the server ---------------------------------------------------------------------------------------------------


@dataclass
class _Ingesting:
    """An ingest running in the background (asynchronous ingest): set once done, with its error if any."""

    done: threading.Event
    error: ProviderError | None = None


class Routes:
    """The contract's routes over a Python provider: request JSON → reply (status, JSON). With `async_ingest`,
    ingest answers `ready: false` at once and runs in a thread; `ready` says false until it is done (its error,
    if any, is the `ready` call's), then asks the provider."""

    def __init__(self, provider: MemoryProvider, *, async_ingest: bool = False) -> None:
        self.provider = with_provider_defaults(provider)
        self.async_ingest = async_ingest
        self._ingesting: dict[str, _Ingesting] = {}
        self._lock = threading.Lock()

    def capabilities(self) -> Capabilities:
        """The provider's, plus what this server adds: `ready` (asynchronous ingest), `stored` (a Python provider
        that has the method)."""
        caps = self.provider.capabilities()
        extra = {"ready"} if self.async_ingest else set()
        if self.provider.stored is not None:
            extra.add("stored")
        return replace(caps, calls=caps.calls | extra)

    def get(self, path: str) -> Reply:
        route = path.split("?", 1)[0].rstrip("/")
        if route.endswith("/capabilities"):
            return Reply(body=capabilities_json(self.capabilities()))
        if route.endswith("/" + SCHEMA_ROUTE):
            return Reply(body=contract_schema())
        return Reply(status=404, body={"error": f"no route GET {path}"})

    def _ingest_in_background(self, unit: str, sessions: Sequence[MemorySession]) -> None:
        job = _Ingesting(threading.Event())

        def work() -> None:
            try:
                self.provider.ingest(unit, sessions)
            except ProviderError as e:
                job.error = e
            except Exception as e:  # reported by `ready`, never lost in a thread
                job.error = ProviderError(self.provider.capabilities().name, "ingest", unit, f"{type(e).__name__}: {e}")
            finally:
                job.done.set()

        with self._lock:
            self._ingesting[unit] = job
        threading.Thread(target=work, daemon=True, name=f"ingest-{unit}").start()

    def _ready(self, unit: str) -> bool:
        with self._lock:
            job = self._ingesting.get(unit)
        if job is not None:
            if not job.done.is_set():
                return False
            with self._lock:
                self._ingesting.pop(unit, None)
            if job.error is not None:
                raise job.error
        return bool(self.provider.ready(unit))

    def _settle(self, unit: str) -> None:
        """A unit's background ingest finished (teardown waits for it: it must not fill a unit torn down)."""
        with self._lock:
            job = self._ingesting.pop(unit, None)
        if job is not None:
            job.done.wait()

    def post(self, req: dict[str, Any]) -> Reply:
        call = str(req.get("_path", "")).rstrip("/").rsplit("/", 1)[-1]
        if call not in POST_ROUTES:
            return Reply(status=404, body={"error": f"no route POST {req.get('_path')}"})
        p = self.provider
        try:
            unit = _req(req, "unit", str, call)
            if call == "setup":
                p.setup(unit)
                return Reply(body={})
            if call == "ingest":
                sessions = sessions_of(req.get("sessions"))
                if self.async_ingest:
                    self._ingest_in_background(unit, sessions)
                    return Reply(body={"ready": False, "usage": asdict(Usage())})
                done = p.ingest(unit, sessions)
                return Reply(body={"ready": done.ready, "usage": asdict(done.usage)})
            if call == "ready":
                return Reply(body={"ready": self._ready(unit)})
            if call == "stored":
                listing = p.stored
                items = None if listing is None else listing(unit)
                if items is None:  # no listing: not a route of this provider (an HTTP client's None is the same)
                    return Reply(status=404, body={"error": f"{p.capabilities().name}: no 'stored' call"})
                return Reply(body={"items": items_json(items)})
            if call == "retrieve":
                got = p.retrieve(
                    unit, _req(req, "query", str, call), _req(req, "top_k", int, call), _req(req, "as_of", str, call)
                )
                return Reply(body={"items": items_json(got.items), "usage": asdict(got.usage)})
            if call == "attach":
                if not p.capabilities().supports("attach"):
                    return Reply(status=404, body={"error": f"{p.capabilities().name}: no 'attach' call"})
                return Reply(body={"attached": bool(p.attach(unit))})
            if call == "answer":
                own = p.answer(unit, _req(req, "query", str, call), _req(req, "as_of", str, call))
                return Reply(body={"answer": own.answer, "usage": asdict(own.usage), "items": items_json(own.items)})
            self._settle(unit)
            p.teardown(unit)
            return Reply(body={})
        except ShapeError as e:
            return Reply(status=400, body={"error": str(e)})
        except ProviderError as e:
            return Reply(status=404 if "unknown unit" in e.detail else 500, body={"error": str(e)})


class MemoryServer(LoopbackServer):
    """The reference server: `with MemoryServer(IndexProvider()) as srv: HttpProvider(srv.base_url)`. Binds
    127.0.0.1 only (a port of 0 picks a free one). `async_ingest`: ingest answers `ready: false` at once and
    runs in the background (Routes)."""

    def __init__(self, provider: MemoryProvider, *, port: int = 0, async_ingest: bool = False) -> None:
        routes = Routes(provider, async_ingest=async_ingest)
        super().__init__(routes.post, on_get=routes.get, record=False, port=port)


BUILT_IN = ("bm25", "full_context")


def serve(name: str, port: int = 0, *, async_ingest: bool = False) -> MemoryServer:
    """A reference server over a built-in provider (not started: use it as a context manager)."""
    from harness.memory.builtin import FullContextProvider, IndexProvider

    if name not in BUILT_IN:
        raise ValueError(f"unknown built-in provider {name!r}; known: {', '.join(BUILT_IN)}")
    provider = IndexProvider() if name == "bm25" else FullContextProvider()
    return MemoryServer(provider, port=port, async_ingest=async_ingest)


def main(argv: Sequence[str] | None = None, *, stop: threading.Event | None = None) -> int:
    """`python -m harness.memory.http [--provider bm25] [--port 8765]`: serve a built-in provider on loopback
    until interrupted (what to point `lme-harness provider-check` or a client in another language at)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.memory.http", description=main.__doc__)
    parser.add_argument("--provider", choices=BUILT_IN, default="bm25")
    parser.add_argument("--port", type=int, default=8765, help="0: any free port")
    parser.add_argument(
        "--async-ingest", action="store_true", help="ingest answers ready: false at once and runs in the background"
    )
    args = parser.parse_args(argv)
    stop = stop or threading.Event()
    with serve(args.provider, args.port, async_ingest=args.async_ingest) as srv:
        print(f"serving {args.provider} at {srv.base_url}", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
