"""Secrets (API keys, tokens, passwords) enter a run only through the environment, by construction.

A declared secret field names the env var (`api_key_env: VAR`; `store.password_env`); `check_overrides` (the
command line, sweeps included) and `check_config` (the composed config, run before Hydra writes anything) refuse
every other way in, naming keys and never values: a secret field holding anything but null or `${oc.env:VAR}`,
a URL with userinfo, a query string or a fragment, a DSN with a password (libpq's own parser), a Hydra setting
that defines or reads the variable a secret field reads, whatever its name (`hydra_problems`).
`describe_endpoint` is how an endpoint is written or printed anywhere (scheme, host, port, path).

Defence in depth: one process-wide registry (`register`, `redact`) holds the env values read as keys; every
writer (records, stores, FAILED.txt, logs, stdout/stderr) masks them, so an endpoint echoing a key leaves no trace.
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
ENV_VARS = ("OPENAI_API_KEY", "LME_HARNESS_API_KEY")  # read by the shipped model configs
# Values too short (or placeholders) to mask everywhere without mangling ordinary text.
_MIN_LEN = 6
_PLACEHOLDERS = {"no-key", "EMPTY", "null", "None", "none", "REDACTED", MASK}
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`.,;:!?)]")  # not a sentence's last stop
_RESOLVER = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:")


def is_secret_name(key: Any) -> bool:
    """True for config keys holding a secret (api_key, token, judge.endpoint.password, ...), not for api_key_env."""
    return bool(_SECRET_NAME.search(str(key).rsplit(".", 1)[-1]))


def names_secret_env(key: Any) -> bool:
    """True for keys naming the env var that holds a secret (api_key_env, token_env)."""
    k = str(key).rsplit(".", 1)[-1]
    return k.lower().endswith("_env") and is_secret_name(k[:-4])


def url_secrets(url: str) -> list[str]:
    """The userinfo (user and password) and every query value inside `url` (defence in depth: the
    registry masks them wherever else they appear; `describe_endpoint` leaves them out by construction)."""
    try:
        parts = urlsplit(url)
        found = [v for v in (parts.username, parts.password) if v]
        found += [v for _, v in parse_qsl(parts.query, keep_blank_values=False)]
    except ValueError:
        return []
    return found


def describe_endpoint(url: Any) -> str:
    """An endpoint as it may be persisted or printed: scheme, host, port and path only. Userinfo, query string
    and fragment are left out whatever their names or encoding; this is the one place an endpoint is described
    (provenance, records, reports, run.json, console, Hydra's snapshot)."""
    text = str(url)
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparsable URL>"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{parts.path}"


_ENDPOINT = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://\S+\s*")


def is_endpoint(value: Any) -> bool:
    """A URL-valued setting (`scheme://host...`): where something is served, recognised by its value whatever its
    key (`model.base_url`, `memory.url`, a new adapter's field), so it is never mistaken for what is served."""
    return isinstance(value, str) and _ENDPOINT.fullmatch(value) is not None


def url_credentials(url: str) -> list[str]:
    """What in `url` could carry a credential and is refused in a config: userinfo, a query string, a fragment
    (named, never echoed: the error must not print the value)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return ["an unparsable URL"]
    return [
        what
        for what, present in (
            ("userinfo (user:password@)", bool(parts.netloc.rpartition("@")[1])),
            ("a query string (?...)", bool(parts.query) or url.rstrip().endswith("?")),
            ("a fragment (#...)", bool(parts.fragment)),
        )
        if present
    ]


def redact_url(url: str) -> str:
    """`url` as `describe_endpoint` writes it (kept under this name for callers of the masking API)."""
    return describe_endpoint(url)


def scrub_urls(text: str) -> str:
    """Every URL in free text reduced to scheme, host, port and path (`describe_endpoint`)."""
    return _URL.sub(lambda m: describe_endpoint(m.group(0)), text) if "://" in text else text


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
    """A copy of a JSON-like value with registered secrets masked in every string (keys too). URLs are left as
    they are: a record's answers are data (endpoints never carry credentials: `check_config`)."""
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
        return scrub_urls(v)

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


# The one value a secret field may hold besides null: a reference to an env var, `${oc.env:VAR}` with at most a
# null default (the form the shipped configs used before `*_env` fields; read like `api_key_env: VAR`).
_ENV_REF = re.compile(r"^\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)(?:,\s*(?:null|None|''|\"\")?)?\}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NULLS = (None, "", "null", "None", "~", "???")


class SecretConfigError(ValueError):
    """A configuration that would carry a secret by any way but the environment (the message names keys only)."""


def env_reference(raw: Any) -> str | None:
    """The env var named by a secret field's unresolved value `${oc.env:VAR}` (None if it is not that form)."""
    m = _ENV_REF.match(raw.strip()) if isinstance(raw, str) else None
    return m.group(1) if m else None


def secret_field_problem(key: str, raw: Any) -> str | None:
    """Why the unresolved value `raw` may not stand in the secret field `key` (api_key, token, password...)."""
    if raw in _NULLS or env_reference(raw):
        return None
    name = key.rsplit(".", 1)[-1]
    return (
        f"{key}=***: a secret field takes a key only from the environment: set {key}_env=VAR (or {name}: "
        f"'${{oc.env:VAR}}') and export VAR; a literal, another node, or any other resolver is refused"
    )


def env_field_problem(key: str, raw: Any) -> str | None:
    """Why `raw` may not stand in `key` (api_key_env, password_env): it must be an env var's name, written out."""
    if raw in (None, "") or (isinstance(raw, str) and _ENV_NAME.match(raw)):
        return None
    return (
        f"{key}=***: names the env var holding a secret; give the variable's name (e.g. {key}=MY_API_KEY), written out"
    )


def dsn_problem(key: str, dsn: Any) -> str | None:
    """Why `dsn` may not be used: a password in it (any form libpq accepts), or not a DSN libpq can parse.
    Parsed by the driver's own parser (psycopg's conninfo_to_dict, i.e. libpq's rules)."""
    if dsn in _NULLS:
        return None
    text = str(dsn)
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # store=postgres cannot run without psycopg; refuse anything that may hold a password
        bad = "password" in text.lower() or (
            "://" in text and ":" in urlsplit(text).netloc.rpartition("@")[0] if "://" in text else False
        )
        return f"{key}=***: carries a password; {_DSN_HINT}" if bad else None
    try:
        params = conninfo_to_dict(text)
    except Exception:
        return f"{key}=***: not a PostgreSQL connection string libpq can parse (value not shown: it may hold a secret)"
    if params.get("password") not in (None, ""):
        return f"{key}=***: carries a password; {_DSN_HINT}"
    return None


_DSN_HINT = "remove it and export it in store.password_env's variable (LME_PG_PASSWORD by default)"


def _url_problems(key: str, text: str) -> list[str]:
    if "://" not in text:
        return []
    return [
        f"{key}=***: {what} in a URL; endpoints are scheme://host:port/path, a key comes from the environment "
        "(api_key_env: VAR)"
        for url in _URL.findall(text)
        for what in url_credentials(url)
    ]


def _is_dsn_key(key: str) -> bool:
    return key.rsplit(".", 1)[-1].lower().endswith("dsn")


def value_problems(key: str, raw: Any, resolved: Any = None) -> list[str]:
    """Every reason the setting `key` = `raw` (unresolved; `resolved`: its value, when known) is refused."""
    name = key.rsplit(".", 1)[-1]
    if is_secret_name(name):
        return [p for p in (secret_field_problem(key, raw),) if p]
    if names_secret_env(name):
        return [p for p in (env_field_problem(key, raw),) if p]
    found: list[str] = []
    for v in dict.fromkeys((raw, resolved)):
        if not isinstance(v, str):
            continue
        if _is_dsn_key(key):
            found += [p for p in (dsn_problem(key, v) if "${" not in v else None,) if p]
        else:
            found += _url_problems(key, v)
    return list(dict.fromkeys(found))


# --- Hydra's own settings (hydra.*): what they may not do with a secret's variable
_ENV_READ = re.compile(r"\$\{\s*oc\.env\s*:\s*([A-Za-z_][A-Za-z0-9_]*)")
_ENV_READ_COMPUTED = re.compile(r"\$\{\s*oc\.env\s*:\s*\$\{")
_NODE_REF = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*\}")
_ENV_SET, _ENV_COPY, _LAUNCHER = "hydra.job.env_set", "hydra.job.env_copy", "hydra.launcher"
# What Hydra computes from the command line (the override lines themselves, checked as the settings they set)
_HYDRA_OWN = ("hydra.overrides.", "hydra.job.override_dirname", "hydra.runtime.")


def _reads_by_value(key: str, raw: str) -> bool:
    """A setting whose value the secret check judges (a secret field, a URL, a DSN): a variable it reads must be
    the one the check saw, never one Hydra sets for the job afterwards."""
    name = key.rsplit(".", 1)[-1]
    return is_secret_name(name) or _is_dsn_key(key) or name.lower().endswith("url") or "://" in raw


def secret_variables(settings: Iterable[tuple[str, Any]]) -> set[str]:
    """The env variables a secret field reads, from (dotted key, unresolved value) pairs: the harness's own
    (`ENV_VARS`), every `*_env` field's value (model.api_key_env, judge.endpoint.api_key_env, an embedder's,
    store.password_env, a memory provider's...), and every `${oc.env:VAR}` read by a secret field, a URL or a DSN."""
    found = set(ENV_VARS)
    for key, raw in settings:
        if not isinstance(raw, str) or key.startswith("hydra."):  # Hydra's own settings are no secret fields
            continue
        if names_secret_env(key) and _ENV_NAME.match(raw):
            found.add(raw)
        if _reads_by_value(key, raw):
            found.update(_ENV_READ.findall(raw))
    return found


def _names_secret_variable(name: str, variables: set[str]) -> bool:
    """`name` is a variable a secret field reads (`variables`), or is named like a key (defence in depth)."""
    return name in variables or is_secret_name(name) or name.upper().endswith(("_KEY", "_PASSWORD", "_TOKEN"))


def _assigns(text: str, variables: set[str]) -> list[str]:
    """The secret variables `text` names or assigns (`VAR`, `VAR=...`, `export VAR=...`) as a launcher would pass
    them to a job's environment."""
    return [
        v
        for v in sorted(variables)
        if text.strip() == v or re.search(rf"(?<![A-Za-z0-9_]){re.escape(v)}\s*=", text) is not None
    ]


def hydra_problems(key: str, raw: Any, variables: set[str], follow: Any = None) -> list[str]:
    """Why the Hydra setting `key` = `raw` (a leaf under hydra.*, unresolved) is refused; `variables`: the env
    variables a secret field reads (`secret_variables`), whatever their names. A key enters only from the
    environment the harness starts in, so no Hydra setting may define such a variable for the job
    (hydra.job.env_set's keys, hydra.job.env_copy's names, a launcher's environment: a mapping key, a name or a
    `VAR=` assignment anywhere under hydra.launcher) or read one (`${oc.env:VAR}`, or a secret field `${x.api_key}`)
    into a setting Hydra writes in clear (hydra.run.dir and hydra.sweep.*: directory names, multirun.yaml).
    `follow(ref)`: the unresolved value at a node reference, to follow `${notes.a}` chains (None: not followed).
    Messages name the key, never the value."""
    found: list[str] = []
    parts = key.split(".")
    if key.startswith(_ENV_SET + ".") and _names_secret_variable(parts[3], variables):
        found.append(
            f"{_ENV_SET}.{parts[3]}=***: {parts[3]} holds a key (a secret field reads it); a key is read from the "
            "environment the harness starts in, never set through Hydra"
        )
    if key == _ENV_COPY or key.startswith(_ENV_COPY + "."):
        found += [
            f"{_ENV_COPY}: names {v}, which holds a key (a secret field reads it); export it where the harness runs"
            for v in _assigns(str(raw), variables)
        ]
    if key.startswith(_LAUNCHER + "."):
        named = [p for p in parts[2:] if _names_secret_variable(p, variables)]
        named += _assigns(str(raw), variables) if isinstance(raw, str) else []
        found += [
            f"{key}=***: the launcher would set {v}, which holds a key (a secret field reads it); a key is read "
            "from the environment the harness starts in"
            for v in dict.fromkeys(named)
        ]
    found += _hydra_reads(key, raw, variables, follow, depth=0)
    return list(dict.fromkeys(found))


def _hydra_reads(key: str, raw: Any, variables: set[str], follow: Any, depth: int) -> list[str]:
    if not isinstance(raw, str) or "${" not in raw or depth > 8:
        return []
    why = f"{key}=***: a Hydra setting is written in clear (directory names, .hydra/, multirun.yaml); it may not read"
    if _ENV_READ_COMPUTED.search(raw):
        return [f"{why} an environment variable whose name is computed"]
    found = [f"{why} {v}, which holds a key" for v in _ENV_READ.findall(raw) if _names_secret_variable(v, variables)]
    for ref in _NODE_REF.findall(raw):
        if ref.startswith("hydra.") or ref == "hydra":
            continue
        if is_secret_name(ref.rsplit(".", 1)[-1]):
            found.append(f"{why} the secret field {ref}")
        elif follow is not None:
            found += _hydra_reads(key, follow(ref), variables, follow, depth + 1)
    return found


def raw_leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, unresolved value) of every leaf of a DictConfig/ListConfig `node` (hydra.* included); nothing
    is resolved, so Hydra's own resolvers never run here."""
    from omegaconf import DictConfig, ListConfig

    out: list[tuple[str, Any]] = []

    def walk(node: Any, path: str) -> None:
        try:
            keys = list(range(len(node))) if isinstance(node, ListConfig) else list(node.keys())
        except Exception:  # an interpolated container: Hydra reports it
            return
        for k in keys:
            sub = f"{path}.{k}" if path else str(k)
            try:
                child = node._get_node(k)
            except Exception:
                continue
            if isinstance(child, (DictConfig, ListConfig)) and not child._is_interpolation():
                walk(child, sub)
            elif child is not None:
                out.append((sub, child._value()))

    walk(node, prefix)
    return out


def check_config(cfg: Any, variables: Iterable[str] = ()) -> None:
    """Refuse (one SecretConfigError naming every culprit key, no value) a composed config that carries a secret
    other than through the environment: a secret field (api_key, token, password... at any depth, nested dicts
    included) holding anything but null or `${oc.env:VAR}`, a `*_env` field holding anything but a name, a URL
    with userinfo, query or fragment (raw or resolved through any interpolation chain), a DSN with a password,
    or a Hydra setting that defines or reads a variable a secret field reads (`hydra_problems`; `variables`: more
    such variables, e.g. those of a sweep's other jobs). Run before Hydra writes anything (runners/rundir.py)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    problems: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        try:
            keys = list(range(len(node))) if isinstance(node, ListConfig) else list(node.keys())
        except Exception:  # an interpolated container that cannot resolve here: Hydra reports it
            return
        for k in keys:
            path = f"{prefix}.{k}" if prefix else str(k)
            if path == "hydra":
                continue
            try:
                child = node._get_node(k)
            except Exception:
                continue
            if isinstance(child, (DictConfig, ListConfig)):
                if isinstance(k, str) and is_secret_name(k) and not child._is_none():
                    problems.append(secret_field_problem(path, "<a container>") or "")
                    continue
                walk(child, path)
                continue
            raw = child._value() if child is not None else None
            try:
                resolved = node[k]
            except Exception:
                resolved = None
            if isinstance(k, int) and is_secret_name(prefix.rsplit(".", 1)[-1]):  # a list under a secret name
                problems.append(secret_field_problem(prefix, "<a list>") or "")
                continue
            problems.extend(value_problems(path, raw, resolved))

    cfg = cfg if isinstance(cfg, (DictConfig, ListConfig)) else OmegaConf.create(cfg)
    walk(cfg, "")
    leaves = dict(raw_leaves(cfg))
    found = set(variables) | secret_variables(leaves.items())
    for path, raw in leaves.items():
        if path.startswith("hydra.") and not path.startswith(_HYDRA_OWN):
            problems += hydra_problems(path, raw, found, leaves.get)
    problems = list(dict.fromkeys(p for p in problems if p))
    if problems:
        raise SecretConfigError("; ".join(problems))


def _override_leaves(key: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, _Sweep):
        for v in value:
            yield from _override_leaves(key, v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _override_leaves(f"{key}.{k}", v)
    elif isinstance(value, list) and not is_secret_name(key.rsplit(".", 1)[-1]):
        for i, v in enumerate(value):
            yield from _override_leaves(f"{key}.{i}" if isinstance(v, (dict, list)) else key, v)
    else:
        yield key, value


def check_overrides(argv: Iterable[str]) -> list[str]:
    """Overrides refused before Hydra sees them (Hydra prints and snapshots override text, and a sweep's job lines
    and multirun.yaml are written before any job's config exists): every problem `value_problems` finds in every
    value of every override (sweeps, lists and dicts included), a resolver other than `oc.env` on a secret or URL
    setting, and `hydra_problems` of every hydra.* value against the variables the command line's secret fields
    read (a config file's are seen by `check_config`). Messages name keys, never values."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    bad: list[str] = []
    hydra: list[tuple[str, Any]] = []
    given: list[tuple[str, Any]] = []  # every (key, value) the command line sets, sweeps' values included
    for arg in argv:
        key, eq, text = arg.partition("=")
        key = key.lstrip("+~")
        if not eq:
            continue
        if key.startswith("hydra.") or key == "hydra":
            hydra += list(_override_leaves(key, _override_values(parser, arg, text)))
            continue
        resolvers = {r for r in _RESOLVER.findall(text) if r != "oc.env"}
        if resolvers and ("://" in text or "url" in key.lower() or is_secret_name(key.rsplit(".", 1)[-1])):
            bad.append(f"{key}=***: resolver {', '.join(sorted(resolvers))} on a secret or URL setting")
            continue
        if resolvers and _is_sweep(parser, arg):  # a sweep's job lines are printed before its jobs' configs exist
            bad.append(f"{key}=***: resolver {', '.join(sorted(resolvers))} in a sweep; write the values out")
            continue
        for path, leaf in _override_leaves(key, _override_values(parser, arg, text)):
            given.append((path, leaf))
            bad += value_problems(path, leaf if not isinstance(leaf, list) else str(leaf))
    variables, values = secret_variables(given), dict(given)
    for path, leaf in hydra:
        bad += hydra_problems(path, leaf if not isinstance(leaf, list) else str(leaf), variables, values.get)
    return list(dict.fromkeys(bad))


def _is_sweep(parser: Any, arg: str) -> bool:
    try:
        return bool(parser.parse_overrides([arg])[0].is_sweep_override())
    except Exception:
        return False


class _Sweep(list):  # type: ignore[type-arg]
    """The values of a sweep override (each one judged; `_override_leaves` walks them all under the one key)."""


def _override_values(parser: Any, arg: str, text: str) -> Any:
    """The value(s) an override sets, parsed as Hydra parses them: a sweep's every value (`_Sweep`), a list or a
    dict as such; the text as written when Hydra cannot parse it (it reports the syntax error)."""
    try:
        override = parser.parse_overrides([arg])[0]
        if not override.is_sweep_override():
            return override.value()
        try:
            return _Sweep(override.sweep_iterator())
        except Exception:
            return text
    except Exception:
        unquoted = text.strip()
        if len(unquoted) >= 2 and unquoted[0] == unquoted[-1] and unquoted[0] in "'\"":
            unquoted = unquoted[1:-1]
        return unquoted


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


def mask_text(text: str, mask: str = MASK) -> str:
    """`text` with registered secrets replaced by `mask` and every URL reduced to scheme, host, port and path."""
    return scrub_urls(REGISTRY.redact(text, mask))


def scrub_file(path: Any, mask: str = MASK) -> bool:
    """Mask registered and URL secrets in a text file written elsewhere (Hydra's snapshot, the embedded
    server's log); `mask` replaces registered values (YAML needs a token that does not read as an alias)."""
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text(errors="surrogateescape")
    except OSError:
        return False
    masked = mask_text(text, mask)
    if masked == text:
        return False
    p.write_text(masked, errors="surrogateescape")
    return True
