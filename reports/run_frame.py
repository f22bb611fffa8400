"""The typed input of every summary: a records frame and what was learnt while building it.

Its own module so that `reports/aggregate.py` and `reports/by_type.py` (which aggregate imports) can both name it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reports.metrics import MetricCatalog


@dataclass(frozen=True)
class RunFrame:
    """A records frame (`reports.aggregate.records_frame`) with its metric catalog: the report, compare, gate and
    export take this, typed, instead of reading anything off the frame itself."""

    df: pd.DataFrame  # one row per record
    metrics: MetricCatalog  # its columns' catalog: the run's scorer specs (run.json `metrics`), else BUILTIN
    unpriced_models: tuple[str, ...] = ()  # models met without a price: their cost is n/a, never 0 (sorted)
