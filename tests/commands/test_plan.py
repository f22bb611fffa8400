"""`lme-harness plan`: no model call, and totals within ±15 % of what the run then records (fake endpoint,
o200k usage, the reference protocol's overrides); the response cache's share is read from the real cache keys."""

import json

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from reports.cost import Endpoints, embedding_calls, judge_calls, load_price_table, record_costs, summary_calls

pytestmark = pytest.mark.e2e

TOLERANCE = 0.15
PRICES = """date: "2026-06-20"
currency: USD
source: gpt-4o-mini and text-embedding-3-small prices, under the fake endpoint's model ids
models:
  fake-model: {input: 0.15, cached_input: 0.075, output: 0.60}
  fake-embedding: {input: 0.02}
  text-embedding-3-small: {input: 0.02}
"""


@pytest.fixture(scope="module")
def fake():
    from harness.retrieval.embedders import cl100k_count
    from harness.session.tokens import o200k_counter

    model = FakeModel(count_tokens=o200k_counter().count, count_embedding_tokens=cl100k_count)
    with FakeOpenAIServer(model) as srv:
        yield srv


def overrides(tmp_path, srv, run_dir, limit=3):
    return [
        f"hydra.run.dir={run_dir}",
        "dataset=s",
        f"dataset.limit={limit}",
        "model=endpoint",
        f"model.base_url={srv.base_url}",
        "model.model=fake-model",
        "model.context_window=128000",
        "run.share_summary=false",
        "retrieval=trpc_parity_openai",
        f"retrieval.embedder.base_url={srv.base_url}",
        "run.progress=false",
        f"cache.path={tmp_path / 'responses.sqlite'}",
    ]


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("LME_HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-the-loopback-fake")
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    return prices


def recorded_totals(run_dir, prices) -> tuple[int, float]:
    """(tokens, USD) of every call the run's records hold: answers, summaries, judge, embeddings."""
    recs = load_records(run_dir / "records.jsonl")
    by_key = {(r["question_id"], r["mode"]): r for r in recs}
    table = load_price_table(prices)
    tokens, usd = 0, 0.0
    for r in recs:
        for c in [*r["calls"], *summary_calls(r, by_key), *judge_calls(r), *embedding_calls(r)]:
            tokens += c["usage"]["prompt_tokens"] + c["usage"].get("completion_tokens", 0)
        costs, unpriced = record_costs(r, by_key, table, Endpoints(answer_model="fake-model", judge_model="fake-model"))
        assert not unpriced
        usd += costs["cost_total"]
    return tokens, usd


def test_plan_makes_no_call_and_lands_within_15_percent_of_the_run(tmp_path, env, fake, capsys):
    n0 = len(fake.requests)
    plan_file = tmp_path / "plan.json"
    args = overrides(tmp_path, fake, tmp_path / "run")
    assert main(["plan", *args, "--out", str(plan_file), "--pricing", str(env)]) == 0
    assert len(fake.requests) == n0  # not one request: no chat, no embedding, no /models preflight
    out = capsys.readouterr().out
    assert "long_context" in out and "total" in out and str(plan_file) in out
    plan = json.loads(plan_file.read_text())
    total = plan["total"]
    # the reference protocol: a summary per summary mode, the judge on each answer, documents embedded once
    assert total["calls"]["summary"] == 2 * 3 and total["calls"]["answer"] == 3 + 3 + 2 * 3
    assert total["calls"]["judge"] == 9 and total["calls"]["embedding"] > 3
    assert total["cache"]["hit"] == 0 and not plan["pricing"]["unpriced_models"]
    lc = plan["per_mode"]["long_context"]
    assert lc["prompt_tokens_exact"] > 3 * 50_000  # the full _s history, counted, not estimated

    assert main(["run", *args]) in (0, 3)
    tokens, usd = recorded_totals(tmp_path / "run", env)
    assert abs(total["tokens_total"] - tokens) <= TOLERANCE * tokens, (total["tokens_total"], tokens)
    assert abs(total["cost_usd"] - usd) <= TOLERANCE * usd, (total["cost_usd"], usd)


def test_plan_reads_the_response_cache_and_skips_recorded_pairs(tmp_path, env, fake):
    args = overrides(tmp_path, fake, tmp_path / "run", limit=1)
    assert main(["run", *args]) in (0, 3)
    n0 = len(fake.requests)

    # a fresh run directory: the determined requests are found in the cache
    fresh = overrides(tmp_path, fake, tmp_path / "fresh", limit=1)
    assert main(["plan", *fresh, "--pricing", str(env)]) == 0
    assert len(fake.requests) == n0
    plan = json.loads((tmp_path / "fresh" / "plan.json").read_text())
    # every request is found: cached responses are replayed, so the whole chain is the run's own (ondemand: the
    # index vectors come from the index store, the query vector from the embedding cache, the search is real)
    assert plan["per_mode"]["long_context"]["cache"] == {"hit": 2, "miss": 0, "unknown": 0}  # answer, judge
    assert plan["per_mode"]["summary"]["cache"] == {"hit": 3, "miss": 0, "unknown": 0}  # summary, answer, judge
    ond = plan["per_mode"]["summary_ondemand"]
    assert ond["calls"] == {"answer": 2, "summary": 1, "judge": 1, "memory_ingest": 0, "embedding": 1}  # docs: store
    assert ond["cache"] == {"hit": 5, "miss": 0, "unknown": 0}
    assert plan["total"]["cost_cached_usd"] == plan["total"]["cost_usd"] > 0
    assert plan["total"]["cost_to_spend_usd"] == 0

    # the run directory itself: every pair is recorded, the run would make no call
    assert main(["run", *args, "--plan", "--pricing", str(env)]) == 0
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["pairs_already_recorded"] == 3 and sum(plan["total"]["calls"].values()) == 0
    assert len(fake.requests) == n0


def test_plan_names_a_missing_price_table_and_a_missing_option_value(tmp_path, env, fake, capsys):
    args = overrides(tmp_path, fake, tmp_path / "run", limit=1)
    assert main(["plan", *args, "--pricing", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err
    assert main(["plan", "--out", *args]) == 2  # `--out` swallowing an override would write plan.json there
    assert "--out needs a value" in capsys.readouterr().err
    assert not (tmp_path / "run" / "plan.json").exists()


@pytest.mark.parametrize("memory", ["http", "supermemory"])
def test_plan_sends_a_remote_memory_provider_nothing_and_plans_the_reader_at_the_cap(
    tmp_path, env, fake, monkeypatch, memory
):
    """A plan must not upload a case's history to a memory service nor spend there: the remote provider is replaced
    by a stand-in (harness/memory/planned.py) and plan.json says what was and was not planned."""
    import importlib.util
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    if memory == "supermemory" and importlib.util.find_spec("supermemory") is None:
        pytest.skip("supermemory not installed (pip install -e '.[memory]')")
    hits: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _any(self) -> None:
            hits.append(f"{self.command} {self.path}")
            self.send_response(500)
            self.end_headers()

        do_GET = do_POST = do_DELETE = _any

    service = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    Thread(target=service.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{service.server_address[1]}"
    monkeypatch.setenv("SUPERMEMORY_API_KEY", "sm-plan-key-never-sent")
    where = f"memory.url={url}/v1" if memory == "http" else f"memory.base_url={url}"
    plan_file = tmp_path / "plan.json"
    n0 = len(fake.requests)
    args = [*overrides(tmp_path, fake, tmp_path / "run", limit=2), "mode=memory", f"memory={memory}", where]
    try:
        assert main(["plan", *args, "--out", str(plan_file), "--pricing", str(env)]) == 0
    finally:
        service.shutdown()
    assert hits == [] and len(fake.requests) == n0  # neither the service nor the model was called
    plan = json.loads(plan_file.read_text())
    row = plan["per_mode"]["memory"]
    assert row["calls"]["answer"] == 2 and row["calls"]["judge"] == 2
    cap = 4000  # configs/mode/memory.yaml context_tokens: the _s histories fill it
    assert row["prompt_tokens"] > 2 * cap * 0.9
    note = plan["estimates"]["memory"]
    assert (memory in note) and "sent them nothing" in note and "not planned" in note
