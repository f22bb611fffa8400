"""A report as one ordered list of sections, each built once in a neutral form and rendered as Markdown and as HTML.

A section is a heading and blocks: paragraphs (`Note`), tables (`Table` of `Cell`s), sub-headings (`Sub`), figures
(`Figures`), and, where the two formats show something differently by design (the HTML headline's first-screen
layout, the per-case drill-down that report.md points to), a `Both` block holding the two forms side by side. The
report (reports/render.py), its memory-systems part and `compare`'s memory tables are lists of `Section`s; the same
list renders report.md and report.html, so a section cannot exist in one and not the other.

Escaping is the renderers' job: Markdown cells through `md_cell` (reports/safe.py), every HTML text through `esc`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports import html as H
from reports.safe import md_cell


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, and for a number the value the HTML table sorts it by (right-aligned)."""

    text: str
    sort: Any = None
    numeric: bool = False


def text(value: Any) -> Cell:
    """A text cell (`str(value)`)."""
    return Cell(str(value))


def num(value: Any, fmt: str | None = None) -> Cell:
    """A number formatted with `fmt` (floats to 4 places, ints as they are, without one); n/a when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Cell("n/a", None, True)
    if fmt:
        shown = fmt.format(value)
    else:
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
    return Cell(shown, value, True)


def shown(text_: str, value: Any) -> Cell:
    """A number shown as `text_` (e.g. a mean with its interval) and sorted by `value`."""
    return Cell(text_, value, True)


@dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    table_id: str | None = None
    sortable: bool = True


@dataclass(frozen=True)
class Note:
    """A paragraph. Markdown as written; HTML muted, with code backticks dropped."""

    text: str
    strong: bool = False  # a warning: bold in Markdown, a `deviation` paragraph in HTML


@dataclass(frozen=True)
class Sub:
    """A sub-heading (### / <h3>)."""

    title: str


@dataclass(frozen=True)
class Figure:
    png: Path
    alt: str
    svg: Path | None = None  # linked beside the image in Markdown


@dataclass(frozen=True)
class Figures:
    """Images, one line each in Markdown (image, then its svg link)."""

    items: Sequence[Figure]


@dataclass(frozen=True)
class Both:
    """What the two formats show differently by design, side by side: Markdown lines and HTML fragments."""

    md: Sequence[str]
    html: Sequence[str]


Block = Note | Table | Sub | Figures | Both


@dataclass(frozen=True)
class Section:
    key: str  # names the section (tests; never shown)
    heading: str
    blocks: Sequence[Block] = field(default_factory=tuple)
    html_id: str | None = None
    level: int = 2


# --- Markdown ---------------------------------------------------------------------------------------------------


def md_table(t: Table) -> str:
    lines = ["| " + " | ".join(md_cell(h) for h in t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(md_cell(c.text) for c in r) + " |" for r in t.rows]
    return "\n".join(lines)


def _md_block(b: Block) -> list[str]:
    if isinstance(b, Note):
        return [f"**{md_cell(b.text)}**" if b.strong else b.text, ""]
    if isinstance(b, Table):
        return [md_table(b), ""]
    if isinstance(b, Sub):
        return [f"### {md_cell(b.title)}", ""]
    if isinstance(b, Figures):
        lines = [f"![{f.alt}]({f.png.name})" + (f" ([svg]({f.svg.name}))" if f.svg else "") for f in b.items]
        return [*lines, ""]
    return list(b.md)


def blocks_markdown(blocks: Sequence[Block]) -> list[str]:
    return [line for b in blocks for line in _md_block(b)]


def section_markdown(s: Section) -> list[str]:
    return [f"{'#' * s.level} {md_cell(s.heading)}", "", *blocks_markdown(s.blocks)]


def markdown(sections: Sequence[Section]) -> str:
    """The sections as one Markdown document (ending with a newline)."""
    return "\n".join(line for s in sections for line in section_markdown(s))


# --- HTML -------------------------------------------------------------------------------------------------------


def _html_cell(c: Cell) -> str:
    return H.num_cell(c.text, c.sort) if c.numeric else H.cell(c.text)


def html_table(t: Table) -> str:
    return H.table(t.headers, [[_html_cell(c) for c in r] for r in t.rows], sortable=t.sortable, table_id=t.table_id)


def _html_block(b: Block) -> list[str]:
    if isinstance(b, Note):
        if b.strong:
            return [f'<p class="deviation"><strong>{H.esc(b.text)}</strong></p>']
        return [f'<p class="muted">{H.esc(b.text.replace("`", ""))}</p>']
    if isinstance(b, Table):
        return [html_table(b)]
    if isinstance(b, Sub):
        return [f"<h3>{H.esc(b.title)}</h3>"]
    if isinstance(b, Figures):
        return [H.image(f.png, f.alt) for f in b.items]
    return list(b.html)


def blocks_html(blocks: Sequence[Block]) -> list[str]:
    return [part for b in blocks for part in _html_block(b)]


def section_html(s: Section) -> list[str]:
    hid = f' id="{H.esc(s.html_id)}"' if s.html_id else ""
    return [f"<h{s.level}{hid}>{H.esc(s.heading)}</h{s.level}>", *blocks_html(s.blocks)]


def html_body(sections: Sequence[Section]) -> str:
    return "\n".join(part for s in sections for part in section_html(s))
