"""Self-contained HTML: plots embedded as data URIs, sortable tables, per-case drill-down.

Every piece of dataset or model text goes through `esc` (html.escape, quotes included). As a second line of
defence the page's Content-Security-Policy allows no network access and only the one inline script whose
sha256 it names, so even a missed escape could not run injected script or load anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1280px;padding:0 1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}h3{font-size:1rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}table.sortable th{cursor:pointer;user-select:none}table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;border:1px solid #eee;padding:.5rem;max-height:28rem;overflow:auto}
img.plot{max-width:100%;border:1px solid #eee;margin:.5rem 0}.muted{color:#666}.bad{color:#b00020}.good{color:#1b7f3b}
details{border:1px solid #e3e3e3;margin:.35rem 0;padding:.3rem .6rem}summary{cursor:pointer}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem}.kv>div:nth-child(odd){color:#555}
input#case-filter{padding:.3rem;width:22rem;margin:.4rem 0}
#headline{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,520px);gap:0 1.2rem;align-items:start}
#headline p.verdict{font-size:15px;margin:.2rem 0 .6rem}#headline img.plot{width:100%;margin:0}
@media (max-width:1000px){#headline{grid-template-columns:1fr}}
"""

# Sorting: numbers by `data-v`, text otherwise; a filter box hides case rows and drill-downs that do not match.
SCRIPT = """
(function(){
  function val(td){var v=td.getAttribute('data-v');if(v===null)v=td.textContent;var n=parseFloat(v);
    return (v!==''&&!isNaN(n)&&isFinite(v))?{n:n}:{s:v.toLowerCase()};}
  function cmp(a,b){if('n' in a&&'n' in b)return a.n-b.n;if('n' in a)return -1;if('n' in b)return 1;
    return a.s<b.s?-1:a.s>b.s?1:0;}
  document.querySelectorAll('table.sortable').forEach(function(t){
    t.querySelectorAll('thead th').forEach(function(th,i){
      th.tabIndex=0;
      function sort(){var asc=th.getAttribute('aria-sort')!=='ascending';
        t.querySelectorAll('thead th').forEach(function(h){h.removeAttribute('aria-sort');});
        th.setAttribute('aria-sort',asc?'ascending':'descending');
        var tb=t.tBodies[0];var rows=Array.prototype.slice.call(tb.rows);
        rows.sort(function(r1,r2){var c=cmp(val(r1.cells[i]),val(r2.cells[i]));return asc?c:-c;});
        rows.forEach(function(r){tb.appendChild(r);});}
      th.addEventListener('click',sort);
      th.addEventListener('keydown',function(e){if(e.key==='Enter')sort();});
    });
  });
  var f=document.getElementById('case-filter');
  if(f){f.addEventListener('input',function(){var q=f.value.toLowerCase();
    document.querySelectorAll('[data-case]').forEach(function(el){
      el.style.display=(!q||el.getAttribute('data-search').indexOf(q)>=0)?'':'none';});});}
  document.documentElement.setAttribute('data-ready','1');
})();
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# One per-case cell of the report shows at most this much: a 5 MB reply would make a 26 MB page.
MAX_CELL_CHARS = 20_000


def clip(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """`text`, cut to `limit` characters with a visible note (the record keeps what it holds)."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown; see records.jsonl]"


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def cell(value: Any, fmt: str | None = None, *, raw: Any = None) -> str:
    """A <td>: numbers right-aligned and sortable by their raw value; NaN/None shown as n/a."""
    sort_v = value if raw is None else raw
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '<td class="num" data-v="">n/a</td>'
    if _is_num(value):
        text = fmt.format(value) if fmt else (f"{value:.4f}" if isinstance(value, float) else str(value))
        return f'<td class="num" data-v="{esc(sort_v)}">{esc(text)}</td>'
    return f"<td>{esc(clip(str(value)))}</td>"


def num_cell(text: str, raw: Any) -> str:
    """A right-aligned <td> showing `text` (e.g. a value with its CI) and sorted by the number `raw`."""
    sort_v = "" if raw is None or (isinstance(raw, float) and math.isnan(raw)) else raw
    return f'<td class="num" data-v="{esc(sort_v)}">{esc(text)}</td>'


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    sortable: bool = True,
    table_id: str | None = None,
    row_attrs: Sequence[str] | None = None,
) -> str:
    """`rows` hold ready <td> strings (use `cell`); headers are escaped here."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, r in enumerate(rows):
        attrs = f" {row_attrs[i]}" if row_attrs else ""
        body.append(f"<tr{attrs}>{''.join(r)}</tr>")
    tid = f' id="{esc(table_id)}"' if table_id else ""
    cls = ' class="sortable"' if sortable else ""
    return f"<table{cls}{tid}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def image(path: Path, alt: str, *, element_id: str | None = None) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    eid = f' id="{esc(element_id)}"' if element_id else ""
    return f'<img class="plot"{eid} alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return f"<pre>{esc(clip(text))}</pre>"


def kv(pairs: Iterable[tuple[str, Any]]) -> str:
    return (
        '<div class="kv">'
        + "".join(f"<div>{esc(k)}</div><div>{esc(clip('' if v is None else str(v)))}</div>" for k, v in pairs)
        + "</div>"
    )


def page(title: str, body: str) -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
        "base-uri 'none'; form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>\n{body}\n"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def frame_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str, str | None]], **kw: Any) -> str:
    """A sortable table from dict rows; `columns` = (key, header, number format or None)."""
    return table([h for _, h, _ in columns], [[cell(r.get(k), f) for k, _, f in columns] for r in rows], **kw)


def fmt_ci(mean: float, lo: float, hi: float, fmt: str) -> str:
    if mean is None or math.isnan(mean):
        return "n/a"
    return f"{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def ci_cell(mean: float, lo: float, hi: float, fmt: str) -> str:
    if mean is None or math.isnan(mean):
        return '<td class="num" data-v="">n/a</td>'
    return f'<td class="num" data-v="{esc(mean)}">{esc(fmt_ci(mean, lo, hi, fmt))}</td>'
