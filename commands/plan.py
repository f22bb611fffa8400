"""`lme-harness plan`: what a run would spend (calls, tokens, USD) and what the response cache already holds,
without a single model call.

The plan drives the *real* modes, summarizer, judge and retriever over every (case, mode) with a stand-in
model (PlanModel): each request is assembled by the same code a run uses, its cache key is computed exactly
as `LLMClient.chat` computes it, and the response cache is consulted. A hit is replayed (so the rest of the
chain is the run's own); a miss is answered by a stand-in whose text is a marked placeholder of the estimated
length. A request that contains a placeholder (or follows one) is not known in advance: its prompt tokens
are estimated and its cache status is "unknown". Nothing is written to the response cache; the index store is
read (at most a case's keyword tokens are stored, as a run would; placeholder vectors never).

Estimates (stated in plan.json `estimates`):
- completion tokens of a call: its max_tokens cap (generation.max_tokens, summarizer.max_tokens,
  judge.params.max_tokens), an upper bound; DEFAULT_COMPLETION where no cap is set;
- summary_ondemand: one `session_search` round (what its instruction requires) with the question as the query,
  run on the case's real index (so the tool response is real text of the case), then the answer;
- a memory provider that extracts memories with the run's model (mem0): its ingest runs for real against the
  stand-in, so its extraction calls are planned as the run would send them ("memory_ingest"; completion at its
  max_tokens cap); what it would store is not known in advance, so the reader is planned at the context cap;
- judge: called for every answer whose text is not known in advance (the trpc judge skips containment matches,
  which cannot be known before the answer exists); an answer replayed from the cache is judged as the run would;
- prompt tokens not replayed from the cache: o200k count of the messages (+3 a message) plus the JSON of the
  tool specs; embedding inputs: cl100k (text-embedding-3-*).
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from harness.contestants.base import CaseHistory, Question, Toolkit
from harness.llm.client import LLMClient, Observer
from harness.llm.endpoint import Endpoint
from harness.llm.types import ChatResult, Message, Usage
from harness.records import RECORDS_FILE, read_records
from harness.scoring.base import ScoreInput
from harness.session.events import Session
from reports.cost import PriceTable, call_cost, load_price_table
from runners.run_config import CacheSettings, RunConfig
from runners.window_check import window_check

PLAN_FILE = "plan.json"
MARKER = "\u27e8plan-estimate\u27e9"  # placeholder text: a request containing it is not known in advance
# The parts a call is planned under (its ChatResult purpose); "memory_ingest": a memory provider's own LLM calls while
# ingesting (mem0's fact extraction), apart from the reader's.
PARTS = ("answer", "summary", "judge", "memory_ingest", "embedding")
DEFAULT_COMPLETION = {"answer": 384, "summary": 1024, "judge": 256, "memory_ingest": 1024}  # no max_tokens cap set
HIT, MISS, UNKNOWN = "hit", "miss", "unknown"


def _filler(tokens: int) -> str:
    return MARKER + " x" * max(0, tokens - 1)  # " x" is one o200k token


@dataclass
class PlannedCall:
    mode: str
    part: str
    prompt_tokens: int
    completion_tokens: int
    exact_prompt: bool  # the request is fully determined in advance (tokens counted, not estimated)
    cache: str  # hit | miss | unknown
    model: str | None
    tool_response_tokens: int = 0
    local: bool = False


class PlanLog:
    """Every planned call, attributed to the (case, mode) being planned (one case at a time, one thread)."""

    def __init__(self) -> None:
        self.calls: list[PlannedCall] = []
        self.mode = ""
        self.estimated_chain = False  # a stand-in answered earlier in this (case, mode)
        self._lock = threading.Lock()

    def start(self, mode: str) -> None:
        self.mode, self.estimated_chain = mode, False

    def add(self, call: PlannedCall) -> None:
        with self._lock:
            self.calls.append(call)

    def observer(self, model: str, counter: Any, local: bool) -> Observer:
        """The per-call log of one planning client (`LLMClient(observer=...)`): every chat result, replayed from
        the cache or answered by the stand-in, as a PlannedCall of the (case, mode) being planned."""

        def observe(msgs: list[Message], tools: Sequence[dict[str, Any]] | None, r: ChatResult) -> None:
            # After a stand-in's reply, a tool round's prompt and a memory provider's later extraction prompt (mem0
            # puts the unit's stored memories in it, which the stand-in's replies did not create) are not known.
            exact = MARKER not in json.dumps(msgs, ensure_ascii=False) and not (
                self.estimated_chain and (r.purpose == "memory_ingest" or any(m.get("role") == "tool" for m in msgs))
            )
            tool_tokens = sum(counter.count(m.get("content") or "") for m in msgs if m.get("role") == "tool")
            if r.cached:
                prompt, cache = r.usage.prompt_tokens, HIT
            else:
                prompt = counter.count_messages(msgs) + (counter.count(json.dumps(list(tools))) if tools else 0)
                cache = MISS if exact else UNKNOWN
                self.estimated_chain = True
            self.add(
                PlannedCall(
                    self.mode, r.purpose, prompt, r.usage.completion_tokens, exact, cache, model, tool_tokens, local
                )
            )

        return observe


class StandIn:
    """The plan's stand-in for an endpoint (an `LLMClient` responder: it answers what the response cache does not
    hold). Never calls: a marked placeholder of the estimated length, or the one search round the on-demand
    instruction asks for."""

    def __init__(self, model: str, counter: Any, caps: dict[str, int]) -> None:
        self.model, self.counter, self.caps = model, counter, caps

    def __call__(
        self, msgs: list[Message], tools: Sequence[dict[str, Any]] | None, params: dict[str, Any], purpose: str
    ) -> ChatResult:
        cap = int(params.get("max_tokens") or self.caps.get(purpose) or DEFAULT_COMPLETION.get(purpose, 384))
        if tools and not any(m.get("role") == "tool" for m in msgs):  # the one search round the instruction asks for
            question = next((m.get("content") for m in reversed(msgs) if m.get("role") == "user"), "") or ""
            args = json.dumps({"query": question, "scope": "current_hidden"})
            call = {"id": "call_plan", "type": "function", "function": {"name": "session_search", "arguments": args}}
            out = self.counter.count("session_search") + self.counter.count(args)
            return ChatResult("", (call,), Usage(0, out), 0.0, self.model, finish_reason="tool_calls", purpose=purpose)
        if purpose == "judge":  # a parsable verdict: the judge's own parsing runs as in a run
            text = json.dumps({"correct": False, "confidence": 0.0, "reason": _filler(max(1, cap - 16))})
        else:
            text = _filler(cap)
        return ChatResult(text, (), Usage(0, cap), 0.0, self.model, finish_reason="stop", purpose=purpose)


class PlanEmbedClient:
    """Stands in for an OpenAIEmbedder's LLMClient: counts inputs, looks them up, returns placeholder vectors."""

    def __init__(self, inner: LLMClient, log: PlanLog, dim: int | None) -> None:
        self.inner, self.log = inner, log
        self.dim = dim or 1536  # text-embedding-3-small's native size; a cached vector's size wins
        self.building_index = False  # document inputs are known in advance, whatever the chain before

    @property
    def model(self) -> str:
        return self.inner.model

    def embed(self, texts: Sequence[str], **params: Any) -> Any:
        from harness.llm.types import EmbeddingResult
        from harness.retrieval.embedders import cl100k_count

        inputs = [str(t) for t in texts]
        hit = self.inner.embedding_hit(inputs, **params)
        if hit is not None:
            vectors = tuple(tuple(v) for v in hit["vectors"])
            self.dim = len(vectors[0]) if vectors else self.dim
            tokens, status = int(hit["usage"].get("prompt_tokens", 0)), HIT
        else:
            vectors = tuple(tuple(float(i % self.dim == j) for j in range(self.dim)) for i in range(len(inputs)))
            self.log.estimated_chain = True  # searches rank with placeholder vectors: what follows is estimated
            tokens = sum(cl100k_count(t) for t in inputs)
            status = UNKNOWN if self.log.estimated_chain and not self.building_index else MISS
        self.log.add(PlannedCall(self.log.mode, "embedding", tokens, 0, status != UNKNOWN, status, self.model))
        return EmbeddingResult(
            vectors, Usage(tokens, 0, None), 0.0, self.model, len(inputs), hit is not None, "embedding"
        )


def _caps(config: RunConfig) -> dict[str, int]:
    caps = {}
    for part, v in (
        ("answer", config.generation.params.get("max_tokens")),
        ("summary", (config.summarizer or {}).get("max_tokens")),
        ("judge", ((config.judge or {}).get("params") or {}).get("max_tokens")),
    ):
        caps[part] = int(v) if v is not None else DEFAULT_COMPLETION[part]
    return caps


def _retriever(retrieval: DictConfig, log: PlanLog) -> tuple[Any, Any, PlanEmbedClient | None]:
    """(planning retriever without a store, the run's index store, the embedder's stand-in client)."""
    rcfg = copy.deepcopy(retrieval)
    emb = rcfg.get("embedder")
    if emb is not None and str(emb.get("_target_", "")).endswith("OpenAIEmbedder") and not emb.get("api_key"):
        with open_dict(rcfg):  # the planner sends nothing: a missing key must not stop it
            rcfg.embedder.api_key = "plan-sends-no-request"
    retriever = instantiate(rcfg)
    store, retriever.store = retriever.store, None  # a plan never writes placeholder vectors into the store
    stand_in = None
    inner = getattr(retriever.embedder, "client", None)
    if isinstance(inner, LLMClient):
        stand_in = PlanEmbedClient(inner, log, getattr(retriever.embedder, "dimensions", None))
        retriever.embedder.client = stand_in
    return retriever, store, stand_in


def plan_run(cfg: DictConfig, run_dir: Path, *, pricing: str | Path | None = None) -> dict[str, Any]:
    """The plan of `cfg` as a dict (also what plan.json holds). Makes no model call and writes nothing."""
    from harness.retrieval.index import build_docs
    from harness.session.store import SQLiteStore
    from harness.session.tokens import o200k_counter
    from runners.components import build_modes, build_scorers, check_packages
    from runners.pair_scoring import score_all
    from runners.skeleton import run_skeleton
    from runners.summaries import SummaryProvider

    config = RunConfig.build(cfg)  # the one place the composed config becomes the plan's settings
    modes = build_modes(config)
    check_packages(config, modes)  # the plan builds the run's retriever: what to install, before any work
    table = load_price_table(pricing)
    cases, _ = instantiate(config.dataset, _convert_="all").load()
    for m in modes:  # a memory contestant tells another case's memory from its own, as in a run
        m.bind_cases(cases)
    planned_providers = _plan_remote_providers(modes)
    derived = _plan_derived_memories(modes)
    done = (
        {r.key for r in read_records(run_dir / RECORDS_FILE) if r.answered}
        if (run_dir / RECORDS_FILE).exists()
        else set()
    )
    log = PlanLog()
    counter = o200k_counter()
    caps = _caps(config)

    def stand_in(ep: Endpoint) -> tuple[StandIn, Observer]:
        return StandIn(ep.spec.model, counter, caps), log.observer(ep.spec.model, counter, ep.spec.is_local)

    # the run's skeleton, writing nothing: no lock, no failure note, no writer; its clients answer through the
    # stand-in, read the response cache and never write it
    with run_skeleton(run_dir, config=config, lock=False, note=False) as skeleton:
        stack = skeleton.stack
        skeleton.open_cache()
        clients = skeleton.open_clients(stand_in=stand_in)
        model, judge, ep, jep = clients.answer, clients.judge, clients.answer_endpoint, clients.judge_endpoint
        assert model is not None and judge is not None and ep is not None and jep is not None
        window = ep.spec.window
        summarizer = instantiate(config.summarizer, _partial_=True)(
            model=model, prompt=instantiate(config.prompt), context_window=window, token_counter=counter
        )
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lme-plan-")))
        summaries = SummaryProvider(
            summarizer, SQLiteStore(tmp / "session_store.sqlite"), share_across_modes=config.run.share_summary
        )
        retriever, store, embed_client = _retriever(config.retrieval, log)
        scorers = build_scorers(config, judge)
        generation = config.generation.as_params()
        token_ratio = float(ep.spec.extra.get("token_ratio", 1.0))

        class PlanRetrieval:
            """The retrieval contestants use in a plan: index builds are planned as the run would make them."""

            def tools(self, session: Session, boundary: Any) -> Any:
                if embed_client is None:
                    return retriever.tools(session, boundary=boundary)
                n_docs = len(build_docs(session.events, retriever._exclude()))
                # The run loads the vectors the index store holds (no embedding call): so does the plan (read, and
                # at most the keyword tokens the run would store); otherwise it plans the document batches.
                held = store is not None and store.has_vectors(
                    retriever.vector_key(session.events), n_docs, retriever.embedder
                )
                retriever.store = store if held else None
                embed_client.building_index = True
                try:
                    return retriever.tools(session, boundary=boundary)
                finally:
                    retriever.store, embed_client.building_index = None, False

        kit = Toolkit(
            model=model,
            generation=generation,
            context_window=window,
            token_counter=counter,
            token_ratio=token_ratio,
            summaries=summaries,
            retrieval=PlanRetrieval(),
        )

        n_done = 0
        wire = config.wire  # the run's identifier shapes: the same requests, keys, tokens
        # what a run warns of before its first call: a window that cuts the whole-history prompts (the plan sends
        # nothing, so the endpoint's own window is not asked)
        todo = [(c, [m for m in modes if (c.question_id, m.name) not in done]) for c in cases]
        window_lines = window_check(todo, wire, kit, local=ep.spec.is_local, served=None)
        for case in cases:
            session = wire.case_session(case)
            question = Question.of(case, wire.question(case.question, case.question_date))
            for mode in modes:
                if (case.question_id, mode.name) in done:
                    n_done += 1
                    continue
                log.start(mode.name)
                ingested = mode.ingest(CaseHistory.of(case, wire.session_for(session, mode.name)), kit)
                out = mode.answer(ingested.memory, question, kit)
                score_all(
                    scorers,
                    ScoreInput(
                        case.question_id, case.question_type, case.question, case.answer, out.prediction, mode.name
                    ),
                )
            kit.forget(case.question_id)
    plan = _summarize(config.cache, log.calls, table, len(cases), [m.name for m in modes], n_done, caps, ep, jep)
    if window_lines:  # only then, so a plan with nothing to warn of is the plan it was
        plan["window_warnings"] = window_lines
    if planned_providers:
        plan["estimates"]["memory"] = (
            f"memory provider(s) {', '.join(planned_providers)} reach a service outside this process: the plan sent "
            "them nothing; the reader's input is planned as the full-context baseline's (the newest sessions, cut to "
            "the context cap: an upper bound) and the service's own spend (its LLM and embedding calls) is not planned"
        )
    if derived:
        plan["estimates"]["memory_ingest"] = (
            f"memory provider(s) {', '.join(derived)} extract memories with the run's model: their ingest ran against "
            "the stand-in, so its calls are planned as a run sends them (completion at the max_tokens cap); a unit's "
            "first extraction prompt is exact, later ones lack the memories it would have stored (mem0 shows up to "
            "10: a lower bound, cache unknown); the reader's input is planned at the context cap (an upper bound)"
        )
    return plan


class _CappedRetrieval:
    """A provider whose memories are derived by the run's model (mem0), in a plan: setup, ingest and teardown are
    its own (its extraction calls are planned exactly), retrieve hands back placeholder text of the context cap,
    since what the stand-in's replies let it store is not what a run would store."""

    def __init__(self, provider: Any, cap_tokens: int) -> None:
        self._provider, self._cap = provider, cap_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Any:
        from harness.memory.provider import MemoryItem, Retrieval

        return Retrieval((MemoryItem(_filler(self._cap)),))


def _plan_derived_memories(modes: list[Any]) -> list[str]:
    """Wrap each in-process memory provider that ingests with the run's model (`bind_model`: mem0) so its reader
    is planned at the context cap; the names of those wrapped."""
    from harness.memory.contestant import ProviderContestant

    names = []
    for mode in modes:
        if isinstance(mode, ProviderContestant) and mode.provider.bind_model is not None:
            names.append(mode.provider.capabilities().name)
            mode.provider = _CappedRetrieval(mode.provider, mode.context_tokens)
    return names


def _plan_remote_providers(modes: list[Any]) -> list[str]:
    """Replace each remote memory provider (a hosted service, one over HTTP) with a stand-in that sends nothing
    (harness/memory/planned.py); the names of those replaced."""
    from harness.memory.contestant import ProviderContestant
    from harness.memory.planned import PlannedProvider

    names = []
    for mode in modes:
        if isinstance(mode, ProviderContestant) and mode.provider.remote:
            name = str(getattr(mode.provider, "NAME", type(mode.provider).__name__))
            mode.provider = PlannedProvider(name)
            names.append(name)
    return names


def _cost(c: PlannedCall, table: PriceTable, fallback: str | None) -> float | None:
    usd, _ = call_cost(
        {"model": c.model, "usage": {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens}},
        table,
        local=c.local,
        fallback_model=fallback,
    )
    return usd


def _summarize(
    cache: CacheSettings,
    calls: list[PlannedCall],
    table: PriceTable,
    n_cases: int,
    modes: list[str],
    n_done: int,
    caps: dict[str, int],
    ep: Endpoint,
    jep: Endpoint,
) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    unpriced: set[str] = set()

    def empty() -> dict[str, Any]:
        return {
            "calls": {p: 0 for p in PARTS},
            "prompt_tokens": 0,
            "prompt_tokens_exact": 0,
            "completion_tokens_est": 0,
            "tool_response_tokens_est": 0,
            "embedding_tokens": 0,
            "cost_usd": 0.0,
            "cost_cached_usd": 0.0,
            "cost_unknown_cache_usd": 0.0,
            "cache": {HIT: 0, MISS: 0, UNKNOWN: 0},
        }

    for name in [*modes, "total"]:
        rows[name] = empty()
    for c in calls:
        fallback = jep.spec.model if c.part == "judge" else (ep.spec.model if c.part != "embedding" else None)
        usd = _cost(c, table, fallback)
        if usd is None:
            unpriced.add(str(c.model))
        for row in (rows[c.mode], rows["total"]):
            row["calls"][c.part] = row["calls"].get(c.part, 0) + 1  # a purpose not in PARTS is counted too
            row["cache"][c.cache] += 1
            if c.part == "embedding":
                row["embedding_tokens"] += c.prompt_tokens
            else:
                row["prompt_tokens"] += c.prompt_tokens
                row["prompt_tokens_exact"] += c.prompt_tokens if c.exact_prompt else 0
                row["completion_tokens_est"] += c.completion_tokens
                row["tool_response_tokens_est"] += c.tool_response_tokens
            if row["cost_usd"] is not None:
                row["cost_usd"] = None if usd is None else row["cost_usd"] + usd
            if usd is not None and c.cache == HIT:
                row["cost_cached_usd"] += usd
            if usd is not None and c.cache == UNKNOWN:
                row["cost_unknown_cache_usd"] += usd
    for row in rows.values():
        row["tokens_total"] = row["prompt_tokens"] + row["completion_tokens_est"] + row["embedding_tokens"]
        for k in ("cost_usd", "cost_cached_usd", "cost_unknown_cache_usd"):
            row[k] = None if row[k] is None else round(row[k], 6)
        row["cost_to_spend_usd"] = (
            None if row["cost_usd"] is None else round(row["cost_usd"] - row["cost_cached_usd"], 6)
        )
    return {
        "cases": n_cases,
        "modes": modes,
        "pairs_already_recorded": n_done,
        "model": ep.spec.model,
        "judge_model": jep.spec.model,
        "local": ep.spec.is_local,
        "pricing": {
            "path": table.path,
            "date": table.date,
            "currency": table.currency,
            "unpriced_models": sorted(unpriced),
        },
        "cache_enabled": cache.enabled,
        "estimates": {
            "completion_tokens": f"max_tokens caps {caps} (upper bounds)",
            "summary_ondemand": "one session_search round with the question as the query, on the case's real index",
            "judge": "called for every answer not replayed from the cache (containment matches are unknown in advance)",
            "prompt_tokens": "exact (o200k, +3 a message, tool specs as JSON) where the request is determined in "
            "advance; cache hits carry the tokens the endpoint reported",
            "tool_response_tokens": "o200k tokens of the tool results in the requests (part of prompt_tokens)",
            "cache": "hit: the response cache holds the request; miss: it does not; unknown: the request depends "
            "on a response not yet known",
        },
        "per_mode": {m: rows[m] for m in modes},
        "total": rows["total"],
    }


def render_table(plan: dict[str, Any]) -> str:
    """The plan as a fixed-width table (one row per mode, then the total)."""
    head = (
        "mode",
        "answer",
        "summary",
        "judge",
        "mem ingest",
        "embed",
        "prompt tok",
        "(exact)",
        "compl tok est",
        "tool resp tok",
        "embed tok",
        "USD",
        "cached USD",
        "cache hit/miss/unk",
    )
    lines = []

    def usd(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4f}"

    for name, r in [*plan["per_mode"].items(), ("total", plan["total"])]:
        c = r["calls"]
        lines.append(
            (
                name,
                str(c["answer"]),
                str(c["summary"]),
                str(c["judge"]),
                str(c.get("memory_ingest", 0)),
                str(c["embedding"]),
                f"{r['prompt_tokens']:,}",
                f"{r['prompt_tokens_exact']:,}",
                f"{r['completion_tokens_est']:,}",
                f"{r['tool_response_tokens_est']:,}",
                f"{r['embedding_tokens']:,}",
                usd(r["cost_usd"]),
                usd(r["cost_cached_usd"]),
                "{hit}/{miss}/{unknown}".format(**r["cache"]),
            )
        )
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths)))

    out = [
        f"plan: {plan['cases']} cases x {len(plan['modes'])} modes, model {plan['model']}"
        f" (judge {plan['judge_model']}), prices of {plan['pricing']['date']} ({plan['pricing']['currency']})",
        fmt(head),
        fmt(tuple("-" * w for w in widths)),
        *map(fmt, lines),
    ]
    if plan["pairs_already_recorded"]:
        out.append(
            f"{plan['pairs_already_recorded']} (case, mode) pairs already recorded in the run directory: not planned"
        )
    if plan["pricing"]["unpriced_models"]:
        out.append(f"unpriced (not in the price table): {', '.join(plan['pricing']['unpriced_models'])}")
    out.extend(f"warning: {line}" for line in plan.get("window_warnings", ()))
    out.append(
        "estimates: completion = max_tokens caps; ondemand = one search round; judge on every unknown answer "
        "(see plan.json 'estimates')"
    )
    return "\n".join(out)


def write_plan(plan: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1) + "\n")
    return path
