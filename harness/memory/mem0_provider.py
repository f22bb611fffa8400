"""mem0's open-source `Memory` (PyPI `mem0ai`) as a memory provider, fully offline (docs/memory-systems.md).

What runs is mem0's own pipeline (its fact-extraction prompt, dedup, scoring, its Qdrant vector store), with
three parts supplied by this project:

- its LLM is the run's `ChatModel` (the project's one client layer: retries, cache, token accounting), so every
  call mem0 makes is counted into the unit's `Usage`;
- its embedder is any project `Embedder` (the static model2vec one by default, the hashing one in tests);
- its vector store is Qdrant in-process and its history database SQLite: no server. Both live in memory, or, in a
  run directory (`keep_units_in`, called by the contestant before the first unit), on disk there: the units then
  outlive the process, and a resumed run attaches to an ingested unit instead of extracting its memories again.

Telemetry: mem0 reads `MEM0_TELEMETRY` once, at import; this module sets it to false before importing mem0 and
refuses to run if mem0 was already imported with it on. `MEM0_DIR` (mem0 writes a config file there) defaults to a
private temporary folder, never `~/.mem0`.

Isolation: one mem0 `user_id` per unit; `setup` also draws a fresh `run_id`, so mem0's per-scope "last messages"
(kept in its history database) of an earlier setup of the same unit never reach the extraction prompt.
As of: each memory carries its session's date (`session_ts`, epoch seconds) and retrieval filters on it inside
mem0's vector-store query (`lte` the question date), so nothing dated after the question is returned.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.llm.client import embedding_call_log
from harness.llm.types import ChatModel, ChatResult
from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    Provenance,
    ProviderBase,
    ProviderError,
    Retrieval,
    Usage,
    parse_iso,
)
from harness.retrieval.embedders import Embedder

NAME = "mem0"
UNITS_FILE = "units.json"  # in a kept store: unit -> the run_id of its setup (what `attach` restores)
INGEST_PURPOSE = "memory_ingest"  # the CallStats purpose of mem0's LLM calls (apart from answer/judge)

# The calls mem0 makes through its LLM in the current thread (ingest or retrieve of one unit).
_CALLS: contextvars.ContextVar[list[ChatResult] | None] = contextvars.ContextVar("mem0_calls", default=None)
# Extraction replies mem0 could not parse in the current thread's ingest: mem0 logs them and stores nothing.
_UNUSABLE: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("mem0_unusable", default=None)
# The start of mem0's (2.2.1) own log message for an extraction reply it could not parse (mem0/memory/main.py).
UNPARSED_EXTRACTION = "Error parsing extraction response"
# The date of the session being ingested in the current thread (YYYY-MM-DD), for mem0's extraction prompt.
_SESSION_DAY: contextvars.ContextVar[str | None] = contextvars.ContextVar("mem0_session_day", default=None)


def _date_the_prompt(mem0_main: Any) -> None:
    """mem0 2.2.1 writes today's date as the extraction prompt's "Observation Date" and "Current Date", and its OSS
    `add()` refuses a timestamp. Wrapped so that, inside this adapter's ingest, both are the session's date: the
    prompt says when the conversation happened, and equal inputs make equal requests (cache, replay) on any day."""
    original = mem0_main.generate_additive_extraction_prompt
    if getattr(original, "_lme_dated", False):
        return

    def dated(*args: Any, **kwargs: Any) -> Any:
        day = _SESSION_DAY.get()
        if day is not None:
            kwargs.setdefault("current_date", day)
            kwargs.setdefault("timestamp", day)
        return original(*args, **kwargs)

    dated._lme_dated = True  # type: ignore[attr-defined]
    mem0_main.generate_additive_extraction_prompt = dated


class _UnusableReplies(logging.Handler):
    """Counts, into the current ingest's `_UNUSABLE`, mem0's log records of an extraction reply it could not parse.
    mem0 catches that error, logs it and stores nothing: without this, a model that never answers in mem0's JSON
    looks exactly like a conversation with nothing to remember (usage `unusable_replies`)."""

    def emit(self, record: logging.LogRecord) -> None:
        seen = _UNUSABLE.get()
        if seen is not None and record.getMessage().startswith(UNPARSED_EXTRACTION):
            seen.append(record.getMessage()[:200])


def _count_unusable_replies(mem0_main: Any) -> None:
    logger = mem0_main.logger
    if not any(isinstance(h, _UnusableReplies) for h in logger.handlers):
        logger.addHandler(_UnusableReplies(level=logging.ERROR))
    if logger.getEffectiveLevel() > logging.ERROR:  # a record dropped before the handlers would go uncounted
        logger.setLevel(logging.ERROR)


def mem0_quietly(provider: str) -> None:
    """Prepare and check mem0's import for `provider` (this adapter and the platform's): telemetry off (mem0 reads
    MEM0_TELEMETRY once, at import; checked, not assumed) and MEM0_DIR private (mem0 writes a config.json there at
    import: never into ~/.mem0). One ProviderError when mem0 is missing or was imported with telemetry on."""
    os.environ.setdefault("MEM0_TELEMETRY", "false")
    if not os.environ.get("MEM0_DIR"):
        os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="lme-mem0-")
    try:
        import mem0.memory.telemetry as telemetry
    except ImportError as e:
        raise ProviderError(
            provider, "setup", None, f"mem0 is not installed ({e}); install the extra: pip install -e '.[memory]'"
        ) from e
    if telemetry.MEM0_TELEMETRY:
        raise ProviderError(
            provider,
            "setup",
            None,
            "mem0 telemetry is on (MEM0_TELEMETRY was true when mem0 was imported); set MEM0_TELEMETRY=false",
        )


def _import_mem0() -> Any:
    """mem0's `Memory` and `MemoryConfig`, imported with telemetry off (`mem0_quietly`)."""
    mem0_quietly(NAME)
    from mem0 import Memory
    from mem0.configs.base import MemoryConfig
    from mem0.embeddings.base import EmbeddingBase
    from mem0.llms.base import LLMBase
    from mem0.memory import main as mem0_main

    _date_the_prompt(mem0_main)
    _count_unusable_replies(mem0_main)
    return Memory, MemoryConfig, EmbeddingBase, LLMBase


def _shims(embedding_base: type, llm_base: type) -> tuple[type, type]:
    """mem0's LLM and embedder interfaces over the project's `ChatModel` and `Embedder`."""

    class HarnessLLM(llm_base):  # type: ignore[valid-type,misc]
        def __init__(self, model: ChatModel, generation: dict[str, Any], json_mode: bool) -> None:
            self.model, self.generation, self.json_mode = model, generation, json_mode

        def generate_response(
            self,
            messages: list[dict[str, str]],
            response_format: Any = None,
            tools: Any = None,
            tool_choice: str = "auto",
            **_: Any,
        ) -> str:
            if tools:  # only mem0's graph memory asks for tools, and it is not enabled here
                raise NotImplementedError("lme-harness mem0 adapter: tool calls are not supported")
            params = dict(self.generation)
            if response_format is not None and self.json_mode:
                params["response_format"] = response_format
            result = self.model.chat(messages, purpose=INGEST_PURPOSE, **params)
            calls = _CALLS.get()
            if calls is not None:
                calls.append(result)
            return result.content

    class HarnessEmbedder(embedding_base):  # type: ignore[valid-type,misc]
        def __init__(self, embedder: Embedder) -> None:
            self.embedder = embedder

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return [float(x) for x in self.embedder.embed([text])[0]]

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return [[float(x) for x in row] for row in self.embedder.embed(list(texts))]

    return HarnessLLM, HarnessEmbedder


def _usage(calls: Sequence[ChatResult], embeddings: Sequence[dict[str, Any]], unusable: int = 0) -> Usage:
    return Usage(
        input_tokens=sum(c.usage.prompt_tokens for c in calls),
        output_tokens=sum(c.usage.completion_tokens for c in calls),
        embedding_tokens=sum(int((e.get("usage") or {}).get("prompt_tokens") or 0) for e in embeddings),
        llm_calls=len(calls),
        cached_llm_calls=sum(c.cached for c in calls),
        unusable_replies=unusable,
    )


STORED_LIMIT = 10_000  # memories listed per unit by `stored` (an oracle unit holds tens)


def _items(found: Any) -> tuple[MemoryItem, ...]:
    """mem0's results as contract items: the memory text, its score, its session, turn and date."""
    items = []
    for r in (found or {}).get("results", []):
        meta = r.get("metadata") or {}
        single = meta.get("turn_start") is not None and meta.get("turn_start") == meta.get("turn_end")
        items.append(
            MemoryItem(
                text=r["memory"],
                score=r.get("score"),
                provenance=Provenance(
                    session_id=meta.get("session_id"),
                    turn_index=meta["turn_start"] if single else None,  # a chunk of turns has no one index
                    date=meta.get("session_date"),
                ),
            )
        )
    return tuple(items)


def _epoch(date: str) -> int:
    return int(parse_iso(date).timestamp())


class Mem0Provider(ProviderBase):
    """mem0 `Memory` behind the provider contract (one instance serves every unit of a run).

    `turns_per_add`: turns handed to one `Memory.add` (one extraction call each); 2 = one user/assistant
    exchange. `generation`: parameters of mem0's LLM calls (temperature, max_tokens, ...). `threshold`: mem0's
    minimum search score (its default 0.1; 0 keeps every hit up to top_k).
    """

    def __init__(
        self,
        embedder: Embedder,
        llm: ChatModel | None = None,
        *,
        turns_per_add: int = 2,
        generation: dict[str, Any] | None = None,
        threshold: float = 0.1,
        date_instructions: bool = True,
        json_mode: bool = True,
    ) -> None:
        """`json_mode: false` drops mem0's `response_format` (JSON mode) from its requests: llama.cpp then samples
        without a JSON grammar (mem0's prompt asks for JSON anyway and parses what comes back).
        `llm`: the model mem0 extracts memories with; None (the Hydra config): the run's answer model, which the
        contestant hands over with `bind_model` before the first unit (so mem0 needs no second model server)."""
        if turns_per_add < 1:
            raise ValueError(f"Mem0Provider.turns_per_add must be >= 1, got {turns_per_add}")
        if threshold < 0:
            raise ValueError(f"Mem0Provider.threshold must be >= 0, got {threshold}")
        self._mem0 = _import_mem0()
        self._llm_class, self._harness_embedder = _shims(self._mem0[2], self._mem0[3])
        self._embedder = embedder
        self._dims = int(embedder.embed(["dimension probe"]).shape[1])
        self.generation, self.json_mode = dict(generation or {}), json_mode
        # The generation settings by hash only: the ingest checkpoint keeps plain settings (harness/memory/checkpoint.py)
        # to tell whether a kept unit was made with these, and a dict is not one.
        self.generation_sha = hashlib.sha256(json.dumps(self.generation, sort_keys=True).encode()).hexdigest()[:16]
        # Private: the run's model is bound late, and the checkpoint's settings hash must not change when it is.
        self._llm: ChatModel | None = None
        self.turns_per_add, self.threshold, self.date_instructions = turns_per_add, threshold, date_instructions
        self.embedder_identity = embedder.identity
        self._runs: dict[str, str] = {}  # unit -> run_id of its current setup
        self._store: Path | None = None  # the kept store's directory (keep_units_in); None: in memory
        self._kept: dict[str, str] = {}  # units an earlier process left in the kept store (unit -> run_id)
        # Qdrant's in-process store and mem0's SQLite connection are not safe to share between threads.
        self._lock = threading.Lock()
        self.memory = self._open(None)
        if llm is not None:
            self.bind_model(llm)

    def _open(self, store: Path | None) -> Any:
        """mem0's Memory over Qdrant and SQLite, in memory (None) or in `store` (persisted write by write)."""
        from qdrant_client import QdrantClient

        Memory, MemoryConfig, _, _ = self._mem0
        config = MemoryConfig(
            vector_store={
                "provider": "qdrant",
                "config": {
                    "collection_name": "lme_harness",
                    "embedding_model_dims": self._dims,
                    "client": QdrantClient(":memory:") if store is None else QdrantClient(path=str(store / "qdrant")),
                },
            },
            # Placeholders: mem0 builds its own clients from these, then they are replaced below (never called).
            llm={"provider": "openai", "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}},
            embedder={
                "provider": "openai",
                "config": {
                    "api_key": "unused",
                    "openai_base_url": "http://127.0.0.1:9/v1",
                    "embedding_dims": self._dims,
                },
            },
            history_db_path=":memory:" if store is None else str(store / "history.db"),
        )
        memory = Memory(config)
        memory.embedding_model = self._harness_embedder(self._embedder)
        if self._llm is not None:
            memory.llm = self._llm_class(self._llm, self.generation, self.json_mode)
        return memory

    def keep_units_in(self, directory: str | Path) -> None:
        """Keep the units on disk in `directory` (the contestant's, in the run directory) instead of in memory, so
        they outlive the process: `attach` is then offered, and the ingest checkpoint (harness/memory/checkpoint.py)
        covers them as it covers a remote service's. Called once, before the first unit."""
        if self._runs:
            raise ProviderError(NAME, "keep_units_in", None, "called after a unit was set up")
        store = Path(directory)
        store.mkdir(parents=True, exist_ok=True)
        kept = _read_units(store / UNITS_FILE)
        with self._lock:
            self.memory = self._open(store)
            self._store, self._kept = store, kept

    def close(self) -> None:
        """Release the kept store (Qdrant's folder lock, the SQLite files): another provider, in this process or the
        next, may then open it. Nothing is deleted; without a kept store it does nothing."""
        if self._store is None:
            return
        with self._lock:
            self.memory.vector_store.client.close()
            self.memory.db.close()

    def _save_units(self) -> None:
        """The kept store's unit table, written whole and renamed into place (under the lock), so a process killed
        mid-write leaves the old table or the new one."""
        assert self._store is not None
        path = self._store / UNITS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self._kept, **self._runs}, sort_keys=True))
        os.replace(tmp, path)

    @property
    def llm(self) -> ChatModel | None:
        """The model mem0 extracts memories with (None until bound)."""
        return self._llm

    def bind_model(self, llm: ChatModel) -> None:
        """The model mem0's LLM calls go to (through the project's client layer: cached, retried, counted)."""
        self._llm = llm
        self.memory.llm = self._llm_class(llm, self.generation, self.json_mode)

    def capabilities(self) -> Capabilities:
        calls = REQUIRED_CALLS | ({"attach"} if self._store is not None else set())
        return Capabilities(name=NAME, version=metadata.version("mem0ai"), calls=frozenset(calls))

    def attach(self, unit: str) -> bool:
        """A unit an earlier process set up in the kept store: its memories are there (the checkpoint says its
        ingest finished), so it is taken over with its run_id. False without a kept store or for an unknown unit."""
        with self._lock:
            run = self._kept.pop(unit, None)
            if run is None:
                return False
            self._runs[unit] = run
            return True

    def _scope(self, call: str, unit: str) -> dict[str, str]:
        run = self._runs.get(unit)
        if run is None:
            raise ProviderError(NAME, call, unit, "unknown unit (call setup first)")
        return {"user_id": unit, "run_id": run}

    @contextmanager
    def _counted(self, call: str, unit: str) -> Iterator[tuple[list[ChatResult], list[dict[str, Any]]]]:
        calls: list[ChatResult] = []
        token = _CALLS.set(calls)
        try:
            with embedding_call_log() as embeddings, self._lock:
                yield calls, embeddings
        except ProviderError:
            raise
        except Exception as e:  # mem0's own errors (LLMError, VectorStoreError, ...) and the client's
            raise ProviderError(NAME, call, unit, f"{type(e).__name__}: {e}") from e
        finally:
            _CALLS.reset(token)

    def setup(self, unit: str) -> None:
        if unit in self._runs or unit in self._kept:
            self.teardown(unit)
        with self._lock:
            self._runs[unit] = uuid.uuid4().hex
            if self._store is not None:
                self._save_units()

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        scope = self._scope("ingest", unit)
        if self._llm is None:
            raise ProviderError(NAME, "ingest", unit, "no model bound (pass llm=, or the contestant calls bind_model)")
        unusable: list[str] = []
        token = _UNUSABLE.set(unusable)
        try:
            with self._counted("ingest", unit) as (calls, embeddings):
                for s in sorted(sessions, key=lambda s: parse_iso(s.date)):
                    # The session's date and time also go in as custom instructions (the prompt's own date fields
                    # carry the day only), so relative dates ("yesterday") resolve against it.
                    prompt = (
                        f"These messages were exchanged on {s.date} (UTC). Resolve relative dates against that date "
                        f"and state absolute dates in the memories."
                        if self.date_instructions
                        else None
                    )
                    turns = s.turns
                    for start in range(0, len(turns), self.turns_per_add):
                        chunk = turns[start : start + self.turns_per_add]
                        meta = {
                            "session_id": s.session_id,
                            "session_date": s.date,
                            "session_ts": _epoch(s.date),
                            "turn_start": start,
                            "turn_end": start + len(chunk) - 1,
                            "created_at": s.date,  # mem0 keeps a given created_at instead of the wall clock
                        }
                        messages = [{"role": t.role, "content": t.content} for t in chunk]
                        day = _SESSION_DAY.set(parse_iso(s.date).date().isoformat())
                        try:
                            self.memory.add(messages, **scope, metadata=meta, prompt=prompt)
                        finally:
                            _SESSION_DAY.reset(day)
        finally:
            _UNUSABLE.reset(token)
        return Ingest(usage=_usage(calls, embeddings, len(unusable)))

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        scope = self._scope("retrieve", unit)
        if top_k < 1:
            raise ProviderError(NAME, "retrieve", unit, f"top_k must be >= 1, got {top_k}")
        filters: dict[str, Any] = {**scope, "session_ts": {"lte": _epoch(as_of)}}
        with self._counted("retrieve", unit) as (calls, embeddings):
            found = self.memory.search(query, top_k=top_k, filters=filters, threshold=self.threshold)
        return Retrieval(_items(found), usage=_usage(calls, embeddings))

    def stored(self, unit: str) -> tuple[MemoryItem, ...]:
        """Every memory mem0 stored for the unit (`get_all`), with provenance: what ingest kept, for the failure
        breakdown's "not stored" (harness/memory/contestant.py). Not a contract call: a Python provider's option."""
        scope = self._scope("stored", unit)
        with self._counted("stored", unit):
            found = self.memory.get_all(filters=dict(scope), top_k=STORED_LIMIT)
        return _items(found)

    def teardown(self, unit: str) -> None:
        """Forget the unit. In a kept store also a unit of an earlier process (its memories are deleted by user id
        whatever this process knows of it); the unit table is rewritten first, so a kill between the two leaves
        memories no unit names (never attached), not a named unit without its memories."""
        with self._lock:
            known = (self._runs.pop(unit, None), self._kept.pop(unit, None)) != (None, None)
            if self._store is not None:
                self._save_units()
        if not known and self._store is None:
            return
        with self._counted("teardown", unit):
            self.memory.delete_all(user_id=unit)


def _read_units(path: Path) -> dict[str, str]:
    """The kept store's unit table; absent: none. A damaged one is one error naming the file (never ignored: a
    unit it names could otherwise be attached without its memories, or its memories never torn down)."""
    if not path.exists():
        return {}
    try:
        units = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ProviderError(NAME, "keep_units_in", None, f"{path}: unreadable unit table ({e})") from e
    if not isinstance(units, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in units.items()):
        raise ProviderError(NAME, "keep_units_in", None, f"{path}: not a {{unit: run_id}} table of strings")
    return units
