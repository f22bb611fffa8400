"""Cost of a run from its records and a dated price table (USD per 1M tokens).

Every model call a record holds is priced: answer calls, summary generation (charged to each mode that uses
the summary, even when it was generated once and shared), judge calls and embedding calls. A call of a local
model costs 0; a call whose model has no price is *unpriced* and its cost is None (n/a), never 0.
Calls replayed from the response cache are priced as if live: the figure is the cost of the configuration.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.config_files import CONFIG_DIR
from harness.records import Record
from harness.run_meta import ModelRef, RunMeta
from harness.settings import judge_model

DEFAULT_PRICING = CONFIG_DIR / "pricing" / "default.yaml"
COST_PARTS = ("answer", "summary", "judge", "embedding")


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


RecordLike = Record | Mapping[str, Any]  # a typed record, or its JSON object
ByKey = Mapping[tuple[str, str], RecordLike]


def _typed(rec: RecordLike) -> Record:
    return rec if isinstance(rec, Record) else Record.from_json(rec)


def judge_calls(rec: RecordLike) -> list[dict[str, Any]]:
    """The judge calls of a record: every scorer detail that carries a ChatResult record as `usage`; a voted
    judge's (harness/scoring/votes.py) are its `votes`, every one a call (its top-level usage is one of them)."""
    out = []
    for det in (_typed(rec).metric_details or {}).values():
        if not isinstance(det, Mapping):
            continue
        votes = det.get("votes")
        for call in votes if isinstance(votes, list) else [det]:
            u = call.get("usage") if isinstance(call, Mapping) else None
            if isinstance(u, Mapping) and "usage" in u:
                out.append(dict(u))
    return out


def summary_calls(rec: RecordLike, by_key: ByKey) -> list[dict[str, Any]]:
    """Calls that produced the summary this record used; a shared summary is looked up in the mode it was made for."""
    r = _typed(rec)
    summ = r.summary or {}
    if not summ:
        return []
    made_for = summ.get("generated_for")
    if summ.get("reused") and made_for and made_for != r.mode:
        src = by_key.get((r.question_id, made_for))
        return list(((_typed(src).summary or {}).get("calls") if src is not None else None) or [])
    return list(summ.get("calls") or [])


def embedding_calls(rec: RecordLike) -> list[dict[str, Any]]:
    """Embedding requests, when the retrieval layer records them (`embedding_calls`: [{model, usage}])."""
    return [dict(c) for c in (_typed(rec).embedding_calls or [])]


def record_costs(
    rec: RecordLike, by_key: ByKey, table: PriceTable, endpoints: Endpoints
) -> tuple[dict[str, float | None], set[str]]:
    """Per-part cost of one record (`cost_answer`, ..., `cost_total`) and the unpriced model ids met."""
    rec = _typed(rec)
    parts: dict[str, Iterable[Mapping[str, Any]]] = {
        "answer": rec.calls or [],
        "summary": summary_calls(rec, by_key),
        "judge": judge_calls(rec),
        "embedding": embedding_calls(rec),
    }
    costs: dict[str, float | None] = {}
    unpriced: set[str] = set()
    for part, calls in parts.items():
        local = endpoints.judge_local if part == "judge" else (endpoints.answer_local if part != "embedding" else False)
        fallback = (
            endpoints.judge_model if part == "judge" else (endpoints.answer_model if part != "embedding" else None)
        )
        total: float | None = 0.0
        for c in calls:
            usd, missing = call_cost(c, table, local=local, fallback_model=fallback)
            if usd is None:
                unpriced.add(missing or "?")
                total = None
            elif total is not None:
                total += usd
        costs[f"cost_{part}"] = total
    vals = [costs[f"cost_{p}"] for p in COST_PARTS]
    costs["cost_total"] = None if any(v is None for v in vals) else sum(vals)  # type: ignore[arg-type]
    return costs, unpriced
