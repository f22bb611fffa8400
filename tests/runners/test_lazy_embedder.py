"""A run whose contestants never search with the run's retriever does not build its embedder (runners/components.py):
on a fresh cache the default static model would be distilled first (about 95 s on 2 cores) for nothing. A
contestant that may search (any without `uses_retrieval: False`) still has it built before the first case."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.memory.builtin import FullContextProvider, IndexProvider
from harness.memory.contestant import ProviderContestant
from harness.memory.summary_provider import SummaryProvider
from harness.retrieval.embedders import HashingEmbedder, LazyEmbedder
from tests.support.fake_run import run_fake


def _refuse_distillation(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LME_HARNESS_CACHE_DIR", str(tmp_path / "fresh-cache"))  # no static model there yet

    def refuse(*args, **kwargs):
        raise AssertionError("the static embedder was distilled")

    monkeypatch.setattr("harness.retrieval.distill.distill_static", refuse)


@pytest.mark.e2e
@pytest.mark.parametrize("provider", ["bm25", "full_context"])
def test_a_memory_run_whose_provider_never_searches_the_runs_retriever_distils_nothing(
    tmp_path, monkeypatch, provider
) -> None:
    _refuse_distillation(monkeypatch, tmp_path)
    rc, _ = run_fake(tmp_path, ["mode=memory", f"memory={provider}", "run.concurrency=2"])  # retrieval=default
    assert rc == 0
    assert not (tmp_path / "fresh-cache" / "models").exists()
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["retrieval"]["embedder"] is None  # no embedder ranked anything in this run, and none is named


def test_who_searches_with_the_runs_retriever() -> None:
    assert not ProviderContestant(IndexProvider()).uses_retrieval
    assert not ProviderContestant(FullContextProvider()).uses_retrieval
    assert ProviderContestant(SummaryProvider(name="summary_tools", search=True)).uses_retrieval  # borrows the kit


def test_a_lazy_embedder_is_built_once_on_first_use_and_is_then_the_embedder() -> None:
    built: list[int] = []

    def build() -> HashingEmbedder:
        built.append(1)
        return HashingEmbedder(16)

    lazy = LazyEmbedder(build)
    assert not lazy.built and not built
    vecs = lazy.embed(["a cat named Miso", "the cello"])
    assert lazy.built and built == [1]
    assert np.array_equal(vecs, HashingEmbedder(16).embed(["a cat named Miso", "the cello"]))
    assert lazy.identity == HashingEmbedder(16).identity and lazy.dim == 16 and built == [1]
