"""`lme-harness provider-check URL` (harness/memory/check.py): the reference server conforms; a deliberately
broken server (a test double: one memory for every unit, dates ignored, top_k ignored, unknown units answered,
teardown a no-op) fails with each broken check named."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from commands.cli import main
from harness.llm.loopback import LoopbackServer, Reply
from harness.memory.builtin import FullContextProvider, IndexProvider
from harness.memory.check import check_provider
from harness.memory.http import HttpProvider, MemoryServer
from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    Provenance,
    ProviderBase,
    Retrieval,
)


class Leaky(ProviderBase):
    """Everything a careless memory service gets wrong at once."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, str]] = []  # one store for all units, never cleared

    def capabilities(self) -> Capabilities:
        return Capabilities("leaky", "0.1", REQUIRED_CALLS)

    def setup(self, unit: str) -> None:
        pass

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self.turns += [(s.date, t.content) for s in sessions for t in s.turns]
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        return Retrieval(tuple(MemoryItem(text, 1.0, Provenance(date=date)) for date, text in self.turns))

    def teardown(self, unit: str) -> None:
        pass


@pytest.mark.parametrize("make", [IndexProvider, FullContextProvider], ids=lambda c: c.__name__)
def test_the_reference_server_passes_provider_check(make, capsys) -> None:
    with MemoryServer(make()) as srv:
        assert main(["provider-check", srv.base_url]) == 0
    out = capsys.readouterr().out
    assert "conforms" in out and "FAIL" not in out
    for name in ("capabilities", "isolation", "as_of", "top_k", "unknown_unit", "teardown", "attach"):
        assert f"PASS {name}" in out


def test_a_broken_server_fails_with_each_broken_check_named(capsys) -> None:
    with MemoryServer(Leaky()) as srv:
        assert main(["provider-check", srv.base_url]) == 1
    out = capsys.readouterr().out
    failed = {line.split()[1].rstrip(":") for line in out.splitlines() if line.strip().startswith("FAIL")}
    assert failed == {"top_k", "isolation", "as_of", "unknown_unit", "teardown"}, out
    assert "PASS finds_own" in out and "5 check(s) failed" in out
    assert "came back for" in out and "dated after as_of" in out


def test_bad_capabilities_or_an_unreachable_service_stop_the_check_with_the_reason(capsys) -> None:
    srv = LoopbackServer(
        lambda r: Reply(body={}),
        on_get=lambda p: Reply(body={"name": "x", "version": "1", "calls": ["setup"], "concurrency": 1}),
        record=False,
    )
    with srv:
        rep = check_provider(HttpProvider(srv.base_url))
    assert not rep.ok and rep.failed[0][0] == "capabilities" and "'ingest'" in rep.failed[0][1]
    assert main(["provider-check", "http://127.0.0.1:9/v1", "--timeout-s", "3"]) == 1
    assert "FAIL capabilities" in capsys.readouterr().out
