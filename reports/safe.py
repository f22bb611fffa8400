"""Text from datasets, endpoints and configs is data: it must not become markup in report.md or a formula in a CSV."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

# Cells a spreadsheet would evaluate (OWASP CSV injection): prefixed with a quote so they read as text.
_FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")


# Markdown's own syntax in data: `[text](url)` and `![alt](url)` would become a live link, or an image a viewer
# fetches. A backslash before the `(` of `](` and the `[` of `![` keeps them text (each escape follows a fixed
# character, so a backslash in the data cannot cancel it); other brackets ("81.2 [77.0, 85.0]") stay as they are.
# `<http://…>` autolinks and raw HTML are escaped by html.escape.


def md_cell(value: Any) -> str:
    """One Markdown table cell (or inline text): HTML escaped (shown as text, never rendered), Markdown links and
    images kept as text, one line, no column break."""
    text = html.escape(" ".join(str(value).split()), quote=False)
    return text.replace("](", "]\\(").replace("![", "!\\[").replace("|", "\\|")


def md_code(value: Any) -> str:
    """A Markdown code span: nothing inside one is rendered (HTML, links), so only a backtick could end it early."""
    return "`" + " ".join(str(value).replace("`", "'").split()) + "`"


def csv_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_LEAD):
        return "'" + value
    return value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` whose text cells (index and column names too) cannot start a spreadsheet formula."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    out.index = out.index.map(csv_cell)
    out.columns = out.columns.map(csv_cell)
    return out


def write_csv(df: pd.DataFrame, path: str | Path, **kwargs: Any) -> None:
    """`df.to_csv(path)`, formula-safe: every CSV the harness writes goes through here."""
    csv_safe(df).to_csv(path, **kwargs)
