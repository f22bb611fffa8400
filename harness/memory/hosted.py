"""Hosted memory services (mem0 platform, Zep, supermemory, Letta) as providers, each through its own SDK.

Each adapter is thin: it maps the contract's calls (harness/memory/provider.py) onto the SDK's and the SDK's
results back onto `MemoryItem`s with provenance. What they share lives here:

- **The key comes from the environment only**: the config names the variable (`api_key_env`, a declared secret
  field, harness/secrets.py), the value is read when the SDK client is first built and never stored in the
  adapter's settings, records or errors (the run's secret registry masks it in every writer as well).
- **Every SDK error is one `ProviderError`** naming the service, the call and the unit, so a failing service is a
  failed case (counted apart), never a wrong answer.
- **One scope per unit**: `scope(unit)` is the service-side id (user, namespace, agent) of the unit, prefixed so a
  benchmark never touches a real user's data; teardown deletes it.
- **Tests run offline**: `http_client` (an `httpx.Client`, e.g. over `httpx.MockTransport`) replaces the network;
  tests/harness/memory/test_hosted_*.py replay each service's responses (tests/fixtures/hosted/).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, ClassVar

from harness import secrets
from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    Ingest,
    MemorySession,
    ProviderBase,
    ProviderError,
    Retrieval,
    parse_iso,
)


def epoch_seconds(iso: str) -> int:
    """The contract's ISO 8601 date as Unix seconds (what services' numeric metadata filters compare)."""
    return int(parse_iso(iso).timestamp())


def iso_of(value: Any) -> str | None:
    """A service's timestamp (ISO text or epoch seconds) as the contract's ISO 8601 UTC, or None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        return parse_iso(str(value)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def transcript(session: MemorySession) -> str:
    """A session as one text document (for services that ingest documents, not messages): its date, then one
    `role: text` line per turn."""
    lines = [f"Conversation on {session.date} (session {session.session_id}):"]
    lines += [f"{t.role}: {t.content}" for t in session.turns]
    return "\n".join(lines)


class HostedProvider(ProviderBase):
    """The shared part of a hosted adapter. Subclasses set NAME and DISTRIBUTION and implement `_client_for(key)`
    and the `_setup/_ingest/_retrieve/_teardown` calls (and `_ready` when ingest is asynchronous)."""

    NAME: ClassVar[str]
    DISTRIBUTION: ClassVar[str]  # the SDK's PyPI name: its version is the provider's version
    ASYNC_INGEST: ClassVar[bool] = False  # True: ingest returns ready=False and `ready` polls the service
    ATTACH: ClassVar[bool] = False  # True: `_attach` asks the service whether a unit's scope still exists
    remote: ClassVar[bool] = True  # a service outside this process: `lme-harness plan` sends it nothing

    def __init__(
        self,
        api_key_env: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        scope_prefix: str = "lme-",
        concurrency: int = 1,
        http_client: Any = None,
    ) -> None:
        if not api_key_env or not isinstance(api_key_env, str):
            raise ValueError(f"{self.NAME}: api_key_env must name an environment variable, got {api_key_env!r}")
        if timeout_s <= 0:
            raise ValueError(f"{self.NAME}: timeout_s must be > 0, got {timeout_s!r}")
        if concurrency < 1:
            raise ValueError(f"{self.NAME}: concurrency must be >= 1, got {concurrency!r}")
        self.api_key_env = api_key_env
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.scope_prefix = scope_prefix
        self.concurrency = concurrency
        self._http_client = http_client
        self._client: Any = None
        self._lock = threading.Lock()

    # --- shared plumbing -------------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        try:
            version = metadata.version(self.DISTRIBUTION)
        except metadata.PackageNotFoundError:
            version = "not installed"
        calls = (
            REQUIRED_CALLS | ({"ready"} if self.ASYNC_INGEST else frozenset()) | ({"attach"} if self.ATTACH else set())
        )
        return Capabilities(self.NAME, f"{self.DISTRIBUTION} {version}", frozenset(calls), self.concurrency)

    def scope(self, unit: str) -> str:
        """The service-side id of `unit` (a user, namespace or agent name)."""
        return f"{self.scope_prefix}{unit}"

    def preflight(self) -> None:
        """What would fail every unit, found before any request (the contestant asks once, before the first case):
        the key's variable unset is one ProviderError naming it."""
        self._key("preflight", None)

    def _key(self, call: str, unit: str | None) -> str:
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ProviderError(self.NAME, call, unit, f"environment variable {self.api_key_env} is not set")
        return key

    def client(self, call: str = "setup", unit: str | None = None) -> Any:
        """The SDK client, built once; its key is read from `api_key_env` here and nowhere else."""
        with self._lock:
            if self._client is None:
                key = self._key(call, unit)
                secrets.register([key])  # masked by every writer, whatever the SDK puts in a message
                with self._errors(call, unit):
                    self._client = self._client_for(key)
            return self._client

    @contextmanager
    def _errors(self, call: str, unit: str | None) -> Iterator[None]:
        """Any SDK or network error as one ProviderError (its text masked of registered secrets)."""
        try:
            yield
        except ProviderError:
            raise
        except Exception as e:  # noqa: BLE001 - an SDK raises its own classes; each is a failed call
            detail = secrets.redact(f"{type(e).__name__}: {e}")
            raise ProviderError(self.NAME, call, unit, detail[:500]) from None

    def _call(self, call: str, unit: str, fn: Callable[[Any], Any]) -> Any:
        sdk = self.client(call, unit)
        with self._errors(call, unit):
            return fn(sdk)

    # --- the contract ------------------------------------------------------------------------------------------

    def setup(self, unit: str) -> None:
        self._call("setup", unit, lambda sdk: self._setup(sdk, unit))

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        ordered = sorted(sessions, key=lambda s: parse_iso(s.date))
        result: Ingest = self._call("ingest", unit, lambda sdk: self._ingest(sdk, unit, ordered))
        return result

    def ready(self, unit: str) -> bool:
        if not self.ASYNC_INGEST:
            return True
        return bool(self._call("ready", unit, lambda sdk: self._ready(sdk, unit)))

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        result: Retrieval = self._call("retrieve", unit, lambda sdk: self._retrieve(sdk, unit, query, top_k, as_of))
        return result

    def attach(self, unit: str) -> bool:
        """Whether the unit's scope, ingested by an earlier process, is still on the service (the harness attaches
        only to units its checkpoint says finished ingesting and were seen ready). Not supported: False."""
        if not self.ATTACH:
            return False
        return bool(self._call("attach", unit, lambda sdk: self._attach(sdk, unit)))

    def teardown(self, unit: str) -> None:
        self._call("teardown", unit, lambda sdk: self._teardown(sdk, unit))

    # --- per service -------------------------------------------------------------------------------------------

    def _client_for(self, key: str) -> Any:
        raise NotImplementedError

    def _setup(self, sdk: Any, unit: str) -> None:
        raise NotImplementedError

    def _ingest(self, sdk: Any, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        raise NotImplementedError

    def _ready(self, sdk: Any, unit: str) -> bool:
        return True

    def _retrieve(self, sdk: Any, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        raise NotImplementedError

    def _attach(self, sdk: Any, unit: str) -> bool:
        raise NotImplementedError

    def _teardown(self, sdk: Any, unit: str) -> None:
        raise NotImplementedError
