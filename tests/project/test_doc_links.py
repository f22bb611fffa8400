"""Every relative link in README.md and docs/**/*.md resolves: the file exists, and a `#anchor` names a heading of
the page it points to (GitHub's slugs). A section moved or renamed without its links fails here."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, markup and punctuation dropped, lower case, spaces as '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    out: set[str] = set()
    seen: dict[str, int] = {}
    for m in HEADING.finditer(FENCE.sub("", text)):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out | set(HTML_ANCHOR.findall(text))


def broken_links(doc: Path, root: Path) -> list[str]:
    """'doc: target (why)' for every relative link or anchor of `doc` that does not resolve."""
    text = doc.read_text()
    prose = re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))
    out = []
    for target in LINK.findall(prose):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (doc.parent / path_part).resolve() if path_part else doc
        where = f"{doc.relative_to(root)}: {target}"
        if not dest.exists():
            out.append(f"{where} (no such file)")
        elif root.resolve() not in [dest, *dest.parents]:
            out.append(f"{where} (outside the repository)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{where} (no heading with that anchor in {dest.relative_to(root.resolve())})")
    return out


def docs(root: Path) -> list[Path]:
    """The written docs: README.md and docs/**/*.md, less the outputs a measurement record keeps as data (a study's
    log or a report as the command wrote it, whose links point into the run directory it was written in)."""
    kept = set()
    for record in (root / "docs" / "measurements").glob("*.measurement.json"):
        kept |= {record.parent / f for f in json.loads(record.read_text()).get("files", [])}
    return [p for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))] if p not in kept]


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    checked = docs(REPO)
    assert {REPO / "README.md", REPO / "docs" / "guide.md", REPO / "docs" / "measurements" / "README.md"} <= set(
        checked
    )
    problems = [p for doc in checked for p in broken_links(doc, REPO)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The response budget (`budget_tokens`)", "the-response-budget-budget_tokens"),
        ("Why the 1.5B", "why-the-15b"),
        (
            "Tokens: this harness's defaults vs the reference protocol",
            "tokens-this-harnesss-defaults-vs-the-reference-protocol",
        ),
        ("(a) Benchmark your own OpenAI-compatible endpoint", "a-benchmark-your-own-openai-compatible-endpoint"),
        ("Layout: packages in [layers](x.md)", "layout-packages-in-layers"),
        ("Issue 4 targets", "issue-4-targets"),
    ],
)
def test_anchors_are_githubs(heading, anchor):
    assert anchor in anchors(f"# {heading}\n")


def test_a_repeated_heading_gets_a_numbered_anchor():
    assert anchors("## Runs\n\n## Runs\n\n## Runs\n") == {"runs", "runs-1", "runs-2"}


def test_a_heading_inside_a_code_block_is_no_anchor():
    assert anchors("```bash\n# not a heading\n```\n## Real\n") == {"real"}


def test_generated_docs_resolve_and_each_broken_link_is_named(tmp_path):
    """Seeded pages linking to each other's headings: every link resolves; then each way of breaking one (a missing
    file, a renamed heading, a link out of the repository) is reported naming the page and the target."""
    rng = random.Random(7)
    words = ["budget", "retrieval", "Why", "the", "1.5B", "(`top_k`)", "run's", "cost:", "ÄÖ", "CPU"]
    (tmp_path / "docs" / "design").mkdir(parents=True)
    pages = [tmp_path / "README.md", tmp_path / "docs" / "a.md", tmp_path / "docs" / "design" / "b.md"]
    headings = {p: [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(5)] for p in pages}
    for page in pages:
        body = [f"## {h}\n\ntext\n" for h in headings[page]]
        for other in pages:
            h = rng.choice(headings[other])
            rel = Path(*([".."] * (len(page.parent.relative_to(tmp_path).parts)))) / other.relative_to(tmp_path)
            body.append(f"See [{h}]({rel.as_posix()}#{slug(h)}).\n")
        body.append("```\n[not a link](nowhere.md)\n```\n`[nor this](nowhere.md)`\n[web](https://example.com/x#y)\n")
        page.write_text("\n".join(body))
    assert [p for page in pages for p in broken_links(page, tmp_path)] == []

    a = pages[1]
    a.write_text(a.read_text() + "\n[gone](missing.md) [moved](design/b.md#no-such-section) [out](../../etc.md)\n")
    (tmp_path.parent / "etc.md").write_text("# x\n")
    found = broken_links(a, tmp_path)
    assert any("docs/a.md: missing.md (no such file)" in p for p in found)
    assert any("design/b.md#no-such-section (no heading with that anchor" in p for p in found)
    assert any("../../etc.md (outside the repository)" in p for p in found)
    assert len(found) == 3
