"""Resolve a `model=` config into a live OpenAI-compatible endpoint and a client for it.

Local models are pulled (sha256-verified) and served by the embedded llama.cpp server for the
duration of the `with` block; remote models are used as configured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import progress as console_progress
from harness.llm.cache import ReadOnlyCache, ResponseCache
from harness.llm.client import LLMClient, Observer, Responder
from harness.llm.liveness import Liveness
from harness.llm.models import ModelError, ModelSpec, pull
from harness.settings import ClientSettings


@dataclass(frozen=True)
class Endpoint:
    spec: ModelSpec
    base_url: str
    api_key: str | None
    cache_namespace: str  # stable identity of the model behind the URL, for cache keys
    liveness: Liveness | None = None  # how its server process died, None while it runs (local models only)
    halt: Callable[[], None] | None = None  # stops its server at once (a stopping run); local models only
    perf: Callable[[], dict[str, Any]] | None = None  # the model's measured tokens/s so far; local models only


HALT_GRACE_S = 1.0  # a stopping run gives the server this long after SIGTERM, then SIGKILL


@contextlib.contextmanager
def open_endpoint(
    model_cfg: Any, *, log_dir: Path, progress: bool = True, n_threads: int | None = None
) -> Iterator[Endpoint]:
    spec = ModelSpec.from_config(model_cfg)
    if not spec.is_local:
        if spec.api_key in (None, "") and "api.openai.com" in (spec.base_url or ""):
            raise ModelError(
                f"model {spec.name!r}: no API key (export {spec.api_key_env or 'OPENAI_API_KEY'}, or name your variable "
                "with model.api_key_env=VAR)"
            )
        yield Endpoint(spec, spec.base_url or "", spec.api_key, cache_namespace=cache_namespace(spec))
        return
    from harness.llm.local_server import LlamaServer

    pull(spec, progress=progress)  # ends by verifying the file's sha256, so the server need not hash it again
    server = LlamaServer(
        spec, log_path=Path(log_dir) / f"llama-server-{spec.name}.log", n_threads=n_threads, verify_model=False
    )
    ticker = console_progress.Ticker(enabled=progress)
    try:
        with console_progress.step(f"model {spec.name}: starting the llama.cpp server and loading the weights", ticker):
            server.start()
            server.check_compute()  # a model that loads but cannot compute fails here, not on every case
        yield Endpoint(
            spec,
            server.base_url,
            None,
            cache_namespace=cache_namespace(spec),
            liveness=server.died,
            halt=lambda: server.stop(grace_s=HALT_GRACE_S),
            perf=server.perf,
        )
    finally:
        server.stop()


def cache_namespace(spec: ModelSpec) -> str:
    """The endpoint identity in response-cache keys: the model file for a local model (any port), else the URL."""
    if spec.is_local:
        ns = f"llama.cpp:{spec.sha256}:n_ctx={spec.n_ctx}:{spec.chat_format}"
        # The default runtime keeps its old namespace, so earlier responses stay cached.
        return ns if spec.runtime == "llama-cpp-python" else f"{ns}:runtime={spec.runtime}"
    return spec.base_url or ""


def make_client(
    endpoint: Endpoint,
    client_cfg: Any,
    cache: ResponseCache | ReadOnlyCache | None,
    *,
    responder: Responder | None = None,
    observer: Observer | None = None,
) -> LLMClient:
    """An `LLMClient` for `endpoint` with the retry/timeout/concurrency settings of `client_cfg`
    (a `ClientSettings`, or a `client:` config node: a key it lacks takes configs/config.yaml's value).
    `responder`/`observer`: a stand-in for the endpoint and a per-call log (the plan's, commands/plan.py)."""
    settings = client_cfg if isinstance(client_cfg, ClientSettings) else ClientSettings.from_config(client_cfg)
    return LLMClient(
        base_url=endpoint.base_url,
        model=endpoint.spec.model,
        api_key=endpoint.api_key,
        settings=settings,
        cache=cache,
        use_cache=cache is not None,
        cache_namespace=endpoint.cache_namespace,
        liveness=endpoint.liveness,
        responder=responder,
        observer=observer,
    )


def planning_endpoint(model_cfg: Any) -> Endpoint:
    """The endpoint a run would open for `model_cfg`, resolved without starting a server or checking a key (a
    plan sends nothing: its clients answer through a stand-in)."""
    spec = ModelSpec.from_config(model_cfg)
    return Endpoint(spec, spec.base_url or "plan://local", spec.api_key, cache_namespace=cache_namespace(spec))
