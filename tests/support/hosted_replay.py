"""Offline replay of a hosted memory service for its SDK: an `httpx.Client` over `httpx.MockTransport`.

A fixture (tests/fixtures/hosted/<service>.json) lists routes: `{"method", "path" (a regex matched against the
whole URL path), "status", "body"}`; the first route that matches a request answers it (a route with `"times": n`
answers n requests, then the next matching one takes over). Every request is kept (`requests`), with its JSON body
and headers, so a test checks what the adapter sent; a request no route matches fails the test loudly (status 599
and `unmatched`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support import paths

FIXTURES = paths.FIXTURES / "hosted"


@dataclass
class Sent:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]


@dataclass
class Replay:
    routes: list[dict[str, Any]]
    requests: list[Sent] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, name: str) -> Replay:
        return cls(json.loads((FIXTURES / f"{name}.json").read_text())["routes"])

    def handle(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        path = request.url.path
        self.requests.append(
            Sent(
                request.method, path, dict(request.url.params), body, {k.lower(): v for k, v in request.headers.items()}
            )
        )
        for route in self.routes:
            if route["method"] != request.method or not re.fullmatch(route["path"], path):
                continue
            if "times" in route:
                if route["times"] <= 0:
                    continue
                route["times"] -= 1
            return httpx.Response(route.get("status", 200), json=route.get("body", {}))
        self.unmatched.append(f"{request.method} {path}")
        return httpx.Response(599, json={"error": f"no replayed route for {request.method} {path}"})

    def client(self, base_url: str = "") -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle), base_url=base_url)

    def sent(self, method: str, pattern: str) -> list[Sent]:
        """The requests sent with `method` to a path matching `pattern`."""
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]


def require_sdk(module: str) -> None:
    """Skip the calling test module when the SDK `module` is not installed, unless LME_REQUIRE_HOSTED=1 (CI), where a
    missing SDK is an error: the `memory` extra installs every hosted SDK."""
    import importlib.util
    import os

    import pytest

    if importlib.util.find_spec(module) is None:
        if os.environ.get("LME_REQUIRE_HOSTED") == "1":
            raise ImportError(f"LME_REQUIRE_HOSTED=1 but {module} is not installed (pip install -e '.[memory]')")
        pytest.skip(f"{module} not installed (pip install -e '.[memory]')", allow_module_level=True)
