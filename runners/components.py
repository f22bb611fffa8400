"""Wiring a run's components from its config: the answer and judge clients, the summarizer, retrieval, the
scorers, the wire shape and bounds. `Components` names every part a case needs (no string-keyed dict)."""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.utils import get_class, instantiate

from harness.bounds import RecordBounds
from harness.contestants.base import Contestant, Toolkit
from harness.llm.cache import ResponseCache
from harness.llm.client import LLMClient
from harness.llm.endpoint import Endpoint
from harness.llm.types import ChatModel
from harness.retrieval.embedders import EMBED_EXTRA, LazyEmbedder, packages_missing
from harness.scoring.base import ScoreInput, Scorer
from harness.scoring.votes import VotesConfigError, voted_config
from harness.settings import ClientSettings
from harness.storage import StorageError
from runners.modes import contestants_from_config
from runners.reference_latency import reference_latency_setting
from runners.run_config import RunConfig
from runners.setting_rules import RunConfigError
from runners.store_backend import open_pg_cache, retrieval_overrides, session_store
from runners.summaries import SummaryProvider
from runners.wire import WireShape


@dataclass
class Components:
    """Everything a (case, contestant) run uses, built once per run (`build_components`)."""

    kit: Toolkit  # what every contestant may use: the answer model, window, counter, summary engine, retrieval
    scorers: Sequence[Scorer]
    wire: WireShape = field(default_factory=WireShape)
    reference_latency: str = "auto"  # "auto" | "true" | "false" (runners/reference_latency.py)
    bounds: RecordBounds = field(default_factory=RecordBounds)


def open_cache(config: RunConfig, stack: contextlib.ExitStack) -> ResponseCache | None:
    """The response cache of the run's `cache:` (closed with `stack`), or None when disabled."""
    if config.store.kind == "postgres":  # the shared database, checked here: one error before any case
        return open_pg_cache(config.store, config.cache)
    if not config.cache.enabled:
        return None
    cache = ResponseCache(str(config.cache.path))
    stack.callback(cache.close)
    return cache


def preflight(settings: ClientSettings, *clients) -> dict[Any, int | None]:
    """One clear error before anything runs, instead of N failed records (`client.preflight=false` skips it).
    Returns each client's context window as its endpoint states it (None: not stated; empty when skipped)."""
    if not settings.preflight:
        return {}
    return {c: c.preflight() for c in dict.fromkeys(clients)}  # bounded by the client's own settings (`client:`)


def check_packages(config: RunConfig, contestants: Sequence[Contestant]) -> None:
    """RunConfigError naming what to install, before any work, when the retriever's embedder cannot be built in this
    environment (the default retriever's static embedder is distilled once, with torch: `make bench` has none) and
    a contestant may search with it (`uses_retrieval`; otherwise it is never built)."""
    node = (config.retrieval or {}).get("embedder")
    if node is None or not any(c.uses_retrieval for c in contestants):
        return
    missing = packages_missing(node)
    if missing:
        raise RunConfigError(
            f"retrieval.embedder: the static embedder at {node.get('path')} is not built yet and building it (once) "
            f"needs {', '.join(missing)}, not installed here: {EMBED_EXTRA}; or run with keyword search only: "
            "retrieval=bm25"
        )


def build_modes(config: RunConfig) -> list[Contestant]:
    """The run's contestants (the `mode:` group)."""
    if not config.modes:
        raise RunConfigError("no mode selected (mode=[long_context,summary,summary_ondemand])")
    return contestants_from_config(config.modes)


def build_components(
    config: RunConfig,
    client: LLMClient,
    judge_client: LLMClient,
    ep: Endpoint,
    run_dir: Path,
    *,
    contestants: Sequence[Contestant] = (),
    stopping: Callable[[], bool] = lambda: False,
) -> Components:
    """The parts every case uses, from the run's settings and its components' nodes. The retriever's embedder is
    built now when a contestant may search with it (`uses_retrieval`), else on first use.
    `stopping`: the run's stop request (the skeleton's), lent to the contestants (`Toolkit.stopping`)."""
    from harness.session.tokens import o200k_counter

    counter = o200k_counter()
    window = ep.spec.window
    # Objects are passed to the partial, not to instantiate(): Hydra would turn dataclasses into configs.
    make_summarizer = instantiate(config.summarizer, _partial_=True)
    summarizer = make_summarizer(
        model=client, prompt=instantiate(config.prompt), context_window=window, token_counter=counter
    )
    embedder = embedder_with_client(config.retrieval, config.client)
    if contestants and not any(c.uses_retrieval for c in contestants):
        embedder = lazy_embedder(config.retrieval, embedder)
    try:
        retrieval = instantiate(config.retrieval, **retrieval_overrides(config.store, config.retrieval), **embedder)
    except Exception as e:  # Hydra wraps a damaged index store: unwrapped, it is one error naming the file
        if isinstance(e.__cause__, StorageError):
            raise e.__cause__ from None
        raise
    if getattr(retrieval, "embedder", None) is not None and config.run.concurrency > 1:
        retrieval.embedder = SerializedEmbedder(retrieval.embedder)
    return Components(
        kit=Toolkit(
            model=client,
            generation=config.generation.as_params(),
            context_window=window,
            token_counter=counter,
            token_ratio=float(ep.spec.extra.get("token_ratio", 1.0)),
            summaries=SummaryProvider(
                summarizer,
                session_store(config.store, run_dir, config.fingerprint),
                share_across_modes=config.run.share_summary,
            ),
            retrieval=retrieval,  # harness.retrieval Retrieval: tools(session, boundary=...), embedder, describe()
            stopping=stopping,
        ),
        scorers=build_scorers(config, judge_client),
        wire=config.wire,
        reference_latency=reference_latency_setting(config.run.reference_latency),
        bounds=config.bounds,
    )


def embedder_with_client(retrieval: Any, client: ClientSettings) -> dict[str, Any]:
    """The `retrieval` node's embedder built with the run's `client:` settings when it calls an endpoint (one that
    takes `client`, e.g. OpenAIEmbedder): passed as an object, so the settings do not enter the composed config."""
    node = retrieval.get("embedder")
    if node is None or "_target_" not in node:
        return {}
    if "client" not in inspect.signature(get_class(str(node._target_))).parameters:
        return {}
    return {"embedder": instantiate(node, _partial_=True)(client=client)}


def lazy_embedder(retrieval: Any, built: dict[str, Any]) -> dict[str, Any]:
    """The `retrieval` node's embedder as a LazyEmbedder: built when first used, never when no contestant searches
    (a fresh cache's distillation is not paid for nothing). `built`: what `embedder_with_client` made (kept)."""
    node = retrieval.get("embedder")
    if node is None or "_target_" not in node or built:  # none, or one that calls an endpoint: nothing to build
        return built
    return {"embedder": LazyEmbedder(lambda: instantiate(node))}


def build_scorers(config: RunConfig, judge_client: ChatModel | None) -> list[Scorer]:
    """The configured scorers, then the judge (if any) bound to `judge_client`."""
    scorers: list[Scorer] = [instantiate(s) for s in config.scorers.values()]
    for s in scorers:  # load lazy dependencies now (rouge-score imports nltk, ~1 s), not under the import lock
        s.score(ScoreInput("warm-up", "", "", "warm up", "warm up"))  # that all concurrent cases would queue on
    if config.judged:
        judge_cfg = {k: v for k, v in config.judge.items() if k != "endpoint"}  # the endpoint is opened by the caller
        try:
            scorers.append(instantiate(voted_config(judge_cfg), model=judge_client))  # +judge.votes on any judge
        except Exception as e:  # Hydra wraps it: a bad judge.votes is one config error, not a traceback
            if isinstance(e.__cause__, VotesConfigError):
                raise RunConfigError(str(e.__cause__)) from None
            raise
    return scorers


class SerializedEmbedder:
    """One embedding call at a time: embedders need not be thread-safe (model2vec's Rust tokenizer raises
    "Already borrowed" when two cases embed at once), while cases run concurrently."""

    def __init__(self, inner: Any):
        self.inner = inner
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return str(self.inner.identity)  # read when needed: a LazyEmbedder is not built for it

    def embed(self, texts):
        with self._lock:
            return self.inner.embed(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
