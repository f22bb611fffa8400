"""Secrets (API keys, tokens, passwords) may enter a run through any config key, interpolation, URL or env var;
this module finds them and masks them at every exit (files, directory names, console, logs).

One process-wide registry (`register`, `redact`) holds the secret values seen so far: the CLI registers a
run's secrets as soon as its config is composed, and every writer (records, FAILED.txt, logs, stdout/stderr)
masks through it. The API-key env vars the harness reads are always registered.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MASK = "***"
# Config keys whose value is a secret. `*_env` keys (api_key_env) name an env var and are not secrets themselves.
_SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:api[_-]?key|apikey|token|secret|password|passwd|pwd|authorization|auth|credentials?|bearer"
    r"|(?:secret|private|access|session|client)[_-]?key|x[_-]api[_-]key)$",
    re.I,
)
# Query parameters that carry keys in URLs (?key=, ?sig=) beyond the secret names above.
_SECRET_QUERY = {"key", "sig", "signature", "code", "access_token", "auth_token", "id_token", "refresh_token"}
ENV_VARS = ("OPENAI_API_KEY", "LME_HARNESS_API_KEY")  # read by the shipped model configs
# Values too short (or placeholders) to mask everywhere without mangling ordinary text.
_MIN_LEN = 6
_PLACEHOLDERS = {"no-key", "EMPTY", "null", "None", "none", "REDACTED", MASK}
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`.,;:!?)]")  # not a sentence's last stop
# A literal allowed as a secret-key override: nothing, or a key read from the environment / another node.
_SAFE_SECRET_VALUE = re.compile(
    r"^(|null|None|~|\$\{oc\.env:[A-Za-z_][A-Za-z0-9_]*(,\s*(null|None|''|\"\")?)?\}|\$\{[A-Za-z_][\w.]*\})$"
)
_RESOLVER = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:")


def is_secret_name(key: Any) -> bool:
    """True for config keys holding a secret (api_key, token, judge.endpoint.password, ...), not for api_key_env."""
    return bool(_SECRET_NAME.search(str(key).rsplit(".", 1)[-1]))


def names_secret_env(key: Any) -> bool:
    """True for keys naming the env var that holds a secret (api_key_env, token_env)."""
    k = str(key).rsplit(".", 1)[-1]
    return k.lower().endswith("_env") and is_secret_name(k[:-4])


def url_secrets(url: str) -> list[str]:
    """The userinfo (user and password) and secret-looking query values inside `url`."""
    try:
        parts = urlsplit(url)
        found = [v for v in (parts.username, parts.password) if v]
        found += [
            v
            for k, v in parse_qsl(parts.query, keep_blank_values=False)
            if is_secret_name(k) or k.lower() in _SECRET_QUERY
        ]
    except ValueError:
        return []
    return found


def redact_url(url: str) -> str:
    """`url` with its userinfo and secret query values masked (http://***@host/v1?api_key=***)."""

    def query(m: re.Match[str]) -> str:
        name = m.group(2)
        return m.group(1) + (MASK if is_secret_name(name) or name.lower() in _SECRET_QUERY else m.group(3))

    url = re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@", rf"\1{MASK}@", url)
    return re.sub(r"([?&;]([^=&;#]+)=)([^&;#]*)", query, url)


def scrub_urls(text: str) -> str:
    """Every URL in free text with its secrets masked."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


class Registry:
    """The secret values known to this process (longest first, so a key containing another is masked whole)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()

    def add(self, values: Iterable[Any]) -> None:
        new = {str(v) for v in values if v is not None and len(str(v)) >= _MIN_LEN and str(v) not in _PLACEHOLDERS}
        if new <= set(self._values):  # the common case (called on every write): nothing to re-sort
            return
        with self._lock:
            self._values = tuple(sorted(set(self._values) | new, key=len, reverse=True))

    @property
    def values(self) -> tuple[str, ...]:
        return self._values

    def redact(self, text: str, mask: str = MASK) -> str:
        for v in self._values:
            if v in text:
                text = text.replace(v, mask)
        return text


REGISTRY = Registry()


def register(values: Iterable[Any]) -> None:
    REGISTRY.add(values)


def register_env(names: Iterable[str] = ENV_VARS) -> None:
    REGISTRY.add(os.environ.get(n) for n in names)


def redact(text: Any) -> str:
    """`text` with every registered secret and every URL secret masked."""
    register_env()  # cheap; a key exported after import is still caught
    return scrub_urls(REGISTRY.redact(str(text)))


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with registered secrets masked in every string (keys too)."""
    if not REGISTRY.values:
        return obj
    if isinstance(obj, str):
        return REGISTRY.redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


def redact_stored(obj: Any) -> Any:
    """`obj` (a JSON-like value) as a store or cache may keep it: registered secrets masked in every string.
    Stores outlive the run directory (the response cache is shared by runs): an endpoint that echoes a key in a
    successful reply must not leave it there. A masked reply is also what a later cache hit returns."""
    register_env()
    return redact_obj(obj)


def _resolved_leaves(cfg: Any) -> Iterable[tuple[str, Any]]:
    """(dotted key, resolved value) of every leaf; a leaf whose interpolation fails is skipped, not fatal."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    def walk(node: Any, prefix: str) -> Iterable[tuple[str, Any]]:
        keys = range(len(node)) if isinstance(node, ListConfig) else list(node.keys())
        for k in keys:
            path = f"{prefix}.{k}" if prefix else str(k)
            try:
                child = node._get_node(k)
                if isinstance(child, (DictConfig, ListConfig)):
                    yield from walk(child, path)
                    continue
                yield path, node[k]
            except Exception:  # missing (???) or an interpolation that cannot resolve here
                continue

    if isinstance(cfg, (DictConfig, ListConfig)):
        yield from walk(cfg, "")
    else:
        yield from walk(OmegaConf.create(cfg), "")


def config_secrets(cfg: Any) -> list[str]:
    """Every secret value in `cfg`, resolved through any interpolation: secret-named keys, URL userinfo and
    secret query values in any string, and the env vars named by `*_env` keys and read by the harness."""
    found: list[Any] = [os.environ.get(n) for n in ENV_VARS]
    for path, value in _resolved_leaves(cfg):
        if value is None:
            continue
        if is_secret_name(path):
            found.append(value)
        elif names_secret_env(path):
            found.append(os.environ.get(str(value)))
        if isinstance(value, str) and "://" in value:
            found += url_secrets(value)
    return sorted(
        {str(v) for v in found if v is not None and len(str(v)) >= _MIN_LEN and str(v) not in _PLACEHOLDERS},
        key=len,
        reverse=True,
    )


def mask_config(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """Mask in place a resolved config container: secret-named keys, URL secrets, and `secrets` anywhere."""
    values = sorted(set(secrets), key=len, reverse=True)

    def text(v: str) -> str:
        for s in values:
            v = v.replace(s, MASK)
        return redact_url(v) if "://" in v else v

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in list(items):
            if isinstance(node, dict) and is_secret_name(k) and v not in (None, ""):
                node[k] = MASK
            elif isinstance(v, str):
                node[k] = text(v)
            else:
                walk(v)

    walk(obj)
    return obj


def check_overrides(argv: Iterable[str]) -> list[str]:
    """Overrides that would put a literal secret on the command line (and so into the run directory's name and
    Hydra's snapshot): a secret-named key set to anything but an `${oc.env:VAR}` / `${other.node}` interpolation,
    or a non-env resolver (`${oc.decode:...}`) on a secret key or inside a URL. Returned masked, for the error."""
    bad = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        key = key.lstrip("+~")
        if not eq or key.startswith("hydra."):
            continue
        value = value.strip()
        unquoted = value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value
        resolvers = {r for r in _RESOLVER.findall(value) if r != "oc.env"}
        if is_secret_name(key) and not _SAFE_SECRET_VALUE.match(unquoted):
            bad.append(f"{key}={MASK}")
        elif resolvers and ("://" in value or "url" in key.lower() or is_secret_name(key)):
            bad.append(f"{key}={MASK} (resolver {', '.join(sorted(resolvers))})")
    return bad


class SecretFilter(logging.Filter):
    """Masks secrets in a record's message, arguments and traceback before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string: leave it to the handler's own error path
            return True
        record.msg, record.args = redact(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = SecretFilter()


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Add the filter to every handler of `logger` (root by default): handler filters see propagated records."""
    for h in (logger or logging.getLogger()).handlers:
        if _FILTER not in h.filters:
            h.addFilter(_FILTER)


class RedactingStream:
    """A text stream that masks secrets in what is written to the stream it wraps (stdout, stderr). Not an
    io.IOBase: its finaliser would flush (and fail on) a wrapped stream closed long before."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, s: str) -> int:
        self.inner.write(redact(s))
        return len(s)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        """Never closes the wrapped stream (it is not ours): a logging handler that closes its stream at shutdown
        (absl's does, for streams other than sys.stdout/stderr) must not close the real stdout or stderr."""

    @property
    def closed(self) -> bool:
        return bool(getattr(self.inner, "closed", False))

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def scrub_file(path: Any, mask: str = MASK) -> bool:
    """Mask registered and URL secrets in a text file written elsewhere (Hydra's snapshot, the embedded
    server's log); `mask` replaces registered values (YAML needs a token that does not read as an alias)."""
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text(errors="surrogateescape")
    except OSError:
        return False
    masked = scrub_urls(REGISTRY.redact(text, mask))
    if masked == text:
        return False
    p.write_text(masked, errors="surrogateescape")
    return True
