"""Generated keys against careless hosted services: every adapter (harness/memory/hosted.py subclasses), every call,
services that echo the key in their error bodies. The key must reach the service only in a request header, and no
`ProviderError` (what a record and the console get) nor the provider's repr may carry it in any encoding."""

from __future__ import annotations

import base64
import html
import json
import random
import string
from urllib.parse import quote, quote_plus

import pytest

from harness.memory.provider import MemorySession, MemoryTurn, ProviderError
from tests.support.hosted_replay import Replay, require_sdk

for _module in ("mem0", "zep_cloud", "supermemory", "letta_client"):
    require_sdk(_module)

from harness.memory.letta import LettaProvider  # noqa: E402
from harness.memory.mem0_platform import Mem0PlatformProvider  # noqa: E402
from harness.memory.supermemory import SupermemoryProvider  # noqa: E402
from harness.memory.zep import ZepProvider  # noqa: E402

pytestmark = pytest.mark.hosted

ADAPTERS = {"mem0_platform": Mem0PlatformProvider, "zep": ZepProvider, "supermemory": SupermemoryProvider,
            "letta": LettaProvider}  # fmt: skip
SESSIONS = (MemorySession("s1", "2023-05-20T02:21:00Z", (MemoryTurn("user", "I adopted a cat."),)),)


def _key(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + "-_.~+/="
    return rng.choice(["sk-", "m0-", "z_", ""]) + "".join(rng.choice(alphabet) for _ in range(rng.randint(16, 48)))


def _forms(s: str) -> set[str]:
    return {
        s,
        quote(s, safe=""),
        quote_plus(s),
        base64.b64encode(s.encode()).decode().rstrip("="),
        json.dumps(s)[1:-1],
        html.escape(s),
    }


def _echoing(rng: random.Random, key: str) -> list[dict]:
    """Routes: every request refused with a 4xx whose body echoes the key (raw, nested, in a header-like text)."""
    body = rng.choice(
        [
            {"error": f"invalid api key {key}"},
            {"detail": [{"msg": "unauthorized", "input": {"authorization": f"Bearer {key}"}}]},
            {"message": "denied", "meta": {"token": key, "hint": f"key={key}"}},
            {"error": {"code": 401, "message": f"Token {key} expired", "key": key}},
        ]
    )
    return [{"method": m, "path": ".*", "status": rng.choice([400, 401, 403, 404, 422]), "body": body}
            for m in ("GET", "POST", "PUT", "PATCH", "DELETE")]  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_a_generated_key_echoed_by_the_service_is_in_no_error_and_goes_out_only_in_a_header(
    name: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(f"{name}-{seed}")
    key = _key(rng)
    var = "LME_PROBE_" + "".join(rng.choice(string.ascii_uppercase) for _ in range(6))
    monkeypatch.setenv(var, key)
    replay = Replay(_echoing(rng, key))
    provider = ADAPTERS[name](api_key_env=var, http_client=replay.client(), timeout_s=5)
    errors: list[ProviderError] = []
    calls = [
        lambda: provider.setup("u1"),
        lambda: provider.ingest("u1", SESSIONS),
        lambda: provider.retrieve("u1", "what pet?", 5, "2023-06-01T00:00:00Z"),
        lambda: provider.teardown("u1"),
    ]
    for call in calls:
        try:
            call()
        except ProviderError as e:
            errors.append(e)
    assert errors, "a service refusing every request must surface as ProviderError"
    assert replay.requests and not replay.unmatched
    forms = _forms(key)
    for e in errors:
        text = f"{e} {e.detail!r} {e!r}"
        assert not [f for f in forms if f in text], f"{name}: the key reached an error: {text[:300]}"
        assert e.provider == name
    for r in replay.requests:  # never in the URL or the body: only in a header
        where = f"{r.path} {json.dumps(r.query)} {json.dumps(r.body)}"
        assert not [f for f in forms if f in where], f"{name}: the key in a request's URL or body: {where[:300]}"
        assert any(key in v for v in r.headers.values())
    assert not [f for f in forms if f in repr(provider) or f in repr(vars(provider))]
