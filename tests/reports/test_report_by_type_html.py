"""report.html carries the per question type section of report.md, only for a run holding several types."""

import re

from reports.render import build_report
from tests.support.report_fixtures import meta, rec, standard_run, write_run

EVIL = '<img src=x onerror="alert(1)">'


def _multi_type_run(tmp_path):
    recs = []
    for i, (qtype, ok) in enumerate([("multi-session", 1), ("multi-session", 0), ("temporal-reasoning", 1), (EVIL, 0)]):
        for mode in ("long_context", "summary"):
            recs.append(rec(f"q{i}" + ("_abs" if i == 3 else ""), mode, em=float(ok), lme=float(ok), qtype=qtype))
    return write_run(tmp_path / "multi", recs, meta())


def test_report_html_has_the_per_type_tables_and_plot(tmp_path):
    out = build_report(_multi_type_run(tmp_path))
    page = out["html"].read_text()
    assert "<h2>Per question type</h2>" in page
    section = page[page.index("<h2>Per question type</h2>") :]
    table = section[section.index('<table class="sortable" id="by-type-lme_acc">') :]
    table = table[: table.index("</table>")]
    # One row per type (sorted), then abstention, overall and task_avg; a column per mode.
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert heads == ["question type", "long_context", "summary"]
    rows = re.findall(r"<tr><td>(.*?)</td>", table)
    assert rows[-3:] == ["abstention", "overall", "task_avg"] and "multi-session" in rows
    ms = re.search(r"<tr><td>multi-session</td>(.*?)</tr>", table).group(1)
    assert 'data-v="0.5"' in ms and "(2)" in ms
    task_avg = re.search(r"<tr><td>task_avg</td>(.*?)</tr>", table).group(1)
    assert "0.500 (3)" in task_avg and "nan" not in task_avg  # mean of the 3 type means, no CI
    assert '<img class="plot" alt="per question type"' in section
    # Type names come from the dataset: escaped like every other dataset text.
    assert EVIL not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in section


def test_single_type_report_html_has_no_per_type_section(tmp_path):
    out = build_report(standard_run(tmp_path / "r"))
    page = out["html"].read_text()
    assert "Per question type" not in page and "by-type" not in page
