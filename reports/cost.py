"""Cost of a run from its records and a dated price table (USD per 1M tokens).

Every model call a record holds is priced, by the phase it served (reports/phases.py): answer calls; ingest (summary
generation, charged to each mode that uses the summary, even when it was generated once and shared; the embedding
calls of an index over the history; a memory provider's ingest, `provider_cost`); retrieve (query vectors, a memory
provider's retrieve); and, apart, the judge's calls. A call of a local model costs 0; a call whose model has no price
is *unpriced* and its cost is None (n/a), never 0. Calls replayed from the response cache are priced as if live: the
figure is the cost of the configuration.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.config_files import CONFIG_DIR
from harness.run_meta import ModelRef, RunMeta
from harness.settings import judge_model
from reports.phases import (
    ByKey,
    RecordLike,
    embedding_calls,
    judge_calls,
    provider_ingest,
    provider_query,
    split_embedding_calls,
    summary_calls,
    typed_record,
)

DEFAULT_PRICING = CONFIG_DIR / "pricing" / "default.yaml"
PHASES = ("answer", "ingest", "retrieve")  # what a contestant spends on a question (reports/phases.py)
COST_PARTS = (*PHASES, "judge")  # cost_total: the judge is the measurement's, shown apart


class PricingError(ValueError):
    pass


@dataclass(frozen=True)
class Price:
    input: float
    output: float = 0.0
    cached_input: float | None = None  # None: cached input tokens cost the input price


@dataclass(frozen=True)
class PriceTable:
    date: str
    currency: str
    source: str
    models: dict[str, Price] = field(default_factory=dict)
    path: str | None = None

    def lookup(self, model_id: str | None) -> Price | None:
        """Exact id, else the longest listed prefix (dated snapshots share their family's price)."""
        if not model_id:
            return None
        if model_id in self.models:
            return self.models[model_id]
        best = max((k for k in self.models if model_id.startswith(k)), key=len, default=None)
        return self.models[best] if best else None


def _price(value: object) -> float:
    """A price per million tokens: a finite number >= 0 (a negative or NaN price would make any cost total wrong)."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not a number")
    x = float(value)  # type: ignore[arg-type]
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{value!r} is not a finite number >= 0")
    return x


def load_price_table(path: str | Path | None = None) -> PriceTable:
    p = Path(path) if path else DEFAULT_PRICING
    if not p.exists():
        raise FileNotFoundError(f"{p}: price table not found")
    try:
        raw = yaml.safe_load(p.read_text()) or {}
    except (yaml.YAMLError, ValueError, UnicodeDecodeError) as e:
        raise PricingError(f"{p}: not a readable price table ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(raw, dict):
        raise PricingError(f"{p}: a price table is a mapping with 'date' and 'models'")
    for key in ("date", "models"):
        if key not in raw:
            raise PricingError(f"{p}: price table needs a '{key}' entry")
    if not isinstance(raw["models"] or {}, dict):
        raise PricingError(f"{p}: 'models' must be a mapping of model id to prices")
    models: dict[str, Price] = {}
    for name, v in (raw["models"] or {}).items():
        try:
            models[str(name)] = Price(
                _price(v["input"]),
                _price(v.get("output", 0.0)),
                None if v.get("cached_input") is None else _price(v["cached_input"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise PricingError(
                f"{p}: model {name!r}: needs input/output/cached_input as numbers >= 0 ({type(e).__name__}: {e})"
            ) from None
    return PriceTable(str(raw["date"]), str(raw.get("currency", "USD")), str(raw.get("source", "")), models, str(p))


@dataclass(frozen=True)
class Endpoints:
    """Which calls went to a local (free) server, and the configured model ids to price by when the
    response names a model the table does not know."""

    answer_local: bool = False
    judge_local: bool = False
    answer_model: str | None = None
    judge_model: str | None = None

    @classmethod
    def from_run_meta(cls, meta: RunMeta | Mapping[str, Any] | None) -> Endpoints:
        run = RunMeta.of(meta)
        model = run.model or ModelRef()
        own = run.judge_model if run.judge_model is not None and not run.judge_model.empty else None
        # the one rule (judge endpoint, else the answer model), over run.json's model references
        judge, _ = judge_model({"model": model, "judge": {"endpoint": own}})
        return cls(
            answer_local=model.kind == "local",
            judge_local=judge.kind == "local",
            answer_model=model.model,
            judge_model=judge.model or model.model,
        )


def call_cost(
    call: Mapping[str, Any], table: PriceTable, *, local: bool, fallback_model: str | None = None
) -> tuple[float | None, str | None]:
    """(USD, unpriced model id or None) of one ChatResult record."""
    if local or call.get("local"):  # e.g. an embedding call that a local embedder recorded as such
        return 0.0, None
    usage = call.get("usage") or {}
    model = call.get("model")
    price = table.lookup(model) or table.lookup(fallback_model)
    if price is None:
        return None, str(model or fallback_model)
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = int(usage.get("cached_tokens") or 0)
    out = int(usage.get("completion_tokens") or 0)
    cached_price = price.input if price.cached_input is None else price.cached_input
    return ((prompt - cached) * price.input + cached * cached_price + out * price.output) / 1e6, None


def provider_cost(
    entry: Mapping[str, Any] | None, table: PriceTable, endpoints: Endpoints
) -> tuple[float | None, str | None]:
    """(USD, what is unpriced or None) of a memory provider's call as its trace records it (reports/phases.py
    `provider_ingest` / `provider_query`). The `cost_usd` a provider reports is kept as it is. Without one, LLM tokens
    of a provider whose calls went through the run's answer model (`llm: answer_model`: mem0's extraction, the summary
    engine) are priced as that model's; a remote service (`remote: true`) that reports no `cost_usd` has an unknown
    cost (n/a, never 0: a service that spends nothing says `cost_usd: 0`); tokens of any other model are unpriced."""
    if entry is None:
        return 0.0, None
    usage = entry.get("usage") or {}
    if usage.get("cost_usd") is not None:
        return float(usage["cost_usd"]), None
    who = f"memory provider {entry.get('provider')!r}"
    if int(usage.get("embedding_tokens") or 0):  # the provider's embedder is not named: no price to look up
        return None, f"{who} (embedding tokens without cost_usd)"
    tokens = {"prompt_tokens": usage.get("input_tokens") or 0, "completion_tokens": usage.get("output_tokens") or 0}
    if entry.get("llm") == "answer_model" and any(tokens.values()):
        return call_cost({"usage": tokens}, table, local=endpoints.answer_local, fallback_model=endpoints.answer_model)
    if entry.get("remote"):
        return None, f"{who} (no cost_usd reported)"
    if any(tokens.values()):
        return None, f"{who} (LLM tokens without cost_usd)"
    return 0.0, None


def _sum(values: Iterable[float | None]) -> float | None:
    """A sum only when every value is known: an unknown part makes the whole unknown, never smaller."""
    vals = list(values)
    return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))


def record_costs(
    rec: RecordLike, by_key: ByKey, table: PriceTable, endpoints: Endpoints
) -> tuple[dict[str, float | None], set[str]]:
    """Per-part cost of one record and the unpriced model ids met. By phase (reports/phases.py): `cost_answer`,
    `cost_ingest`, `cost_retrieve`, their sum `cost_contestant`; `cost_judge` apart; `cost_total` all four. By
    source, for the detail: `cost_summary` (in ingest) and `cost_embedding` (ingest's and query-time calls)."""
    rec = typed_record(rec)
    unpriced: set[str] = set()

    def priced(calls: Iterable[Mapping[str, Any]], *, local: bool, fallback: str | None) -> float | None:
        total: float | None = 0.0
        for c in calls:
            usd, missing = call_cost(c, table, local=local, fallback_model=fallback)
            if usd is None:
                unpriced.add(missing or "?")
                total = None
            elif total is not None:
                total += usd
        return total

    def provider(entry: Mapping[str, Any] | None) -> float | None:
        usd, missing = provider_cost(entry, table, endpoints)
        if missing:
            unpriced.add(missing)
        return usd

    def by_answer_model(calls: Iterable[Mapping[str, Any]]) -> float | None:  # the run's answer client's calls
        return priced(calls, local=endpoints.answer_local, fallback=endpoints.answer_model)

    ingest_embeddings, query_embeddings = split_embedding_calls(rec)
    ingest = rec.ingest or {}
    if rec.summary:
        own_ingest = by_answer_model(summary_calls(rec, by_key))
    else:  # the contestant's own model calls while ingesting: the run's answer client, recorded as counts
        counts = {"prompt_tokens": ingest.get("prompt_tokens"), "completion_tokens": ingest.get("completion_tokens")}
        own_ingest = by_answer_model([{"usage": counts}] if any(counts.values()) else [])
    costs: dict[str, float | None] = {
        "cost_answer": by_answer_model(rec.calls or []),
        "cost_summary": by_answer_model(summary_calls(rec, by_key)),
        "cost_judge": priced(judge_calls(rec), local=endpoints.judge_local, fallback=endpoints.judge_model),
        "cost_embedding": priced(embedding_calls(rec), local=False, fallback=None),
        "cost_ingest": _sum(
            [own_ingest, provider(provider_ingest(rec)), priced(ingest_embeddings, local=False, fallback=None)]
        ),
        "cost_retrieve": _sum([provider(provider_query(rec)), priced(query_embeddings, local=False, fallback=None)]),
    }
    costs["cost_contestant"] = _sum(costs[f"cost_{p}"] for p in PHASES)
    costs["cost_total"] = _sum(costs[f"cost_{p}"] for p in COST_PARTS)
    return costs, unpriced
