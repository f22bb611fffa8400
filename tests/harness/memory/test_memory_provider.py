"""The memory-provider contract's own types (harness/memory/provider.py)."""

from __future__ import annotations

import pytest

from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    ProviderError,
    Usage,
    iso_date,
    parse_iso,
)


def test_dataset_dates_become_iso_utc_that_sort_as_strings() -> None:
    a, b = iso_date("2023/05/20 (Sat) 02:21"), iso_date("2023/05/30 (Tue) 23:40")
    assert a == "2023-05-20T02:21:00Z"
    assert a < b and parse_iso(a) < parse_iso(b)
    assert iso_date("2023/05/30") == "2023-05-30T00:00:00Z"
    with pytest.raises(ValueError, match="20 May 2023"):
        iso_date("20 May 2023")


def test_capabilities_name_each_problem() -> None:
    assert Capabilities("bm25", "1").problems() == []
    bad = Capabilities("", "1", frozenset({"setup", "retrieve", "fly"}), concurrency=0)
    problems = bad.problems()
    assert len(problems) == 4
    assert any("'ingest'" in p and "'teardown'" in p for p in problems)
    assert any("'fly'" in p for p in problems)
    assert Capabilities("x", "1", REQUIRED_CALLS | {"answer"}).supports("answer")


def test_usage_adds_and_keeps_unreported_cost_unknown() -> None:
    total = Usage(10, 2, 5, 1) + Usage(1, 1, 0, 1, cost_usd=0.5)
    assert total == Usage(11, 3, 5, 2, 0.5)
    assert (Usage() + Usage()).cost_usd is None
    assert (Usage(unusable_replies=1) + Usage(llm_calls=2, unusable_replies=2)).unusable_replies == 3


def test_usage_crosses_the_http_contract_whole() -> None:
    """Every Usage field the server writes (asdict) is read back by the client: none is dropped on the wire."""
    from dataclasses import asdict, fields

    from harness.memory.http import usage_of

    full = Usage(**{f.name: i + 1 for i, f in enumerate(fields(Usage)) if f.name != "cost_usd"}, cost_usd=0.25)
    assert usage_of(asdict(full), "ingest") == full
    with pytest.raises(Exception, match="unusable_replies"):
        usage_of({"unusable_replies": "two"}, "ingest")


def test_provider_error_names_provider_call_and_unit() -> None:
    e = ProviderError("mem0", "ingest", "q1", "timeout")
    assert "'mem0'" in str(e) and "ingest" in str(e) and "'q1'" in str(e) and "timeout" in str(e)
