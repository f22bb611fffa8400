"""The HTML report rendered by headless Chromium (Debian `chromium`; `.ci/run` installs it): the DOM after scripts.

Skipped when no chromium binary is found, unless LME_REQUIRE_CHROMIUM=1 (set by .ci/run), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.render import build_report
from tests.support.report_fixtures import standard_run

pytestmark = pytest.mark.process  # tests/README.md: every test here starts a process

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
HOSTILE = "I don't know <script>alert(1)</script>"  # the summary-mode prediction of standard_run


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("LME_REQUIRE_CHROMIUM") == "1":
        pytest.fail("chromium not found but LME_REQUIRE_CHROMIUM=1 (apt-get install -y chromium)")
    pytest.skip("chromium not installed (apt-get install -y chromium)")


def dump_dom(html_file: Path, tmp_path: Path, window: tuple[int, int] | None = None) -> str:
    """The page's DOM after its scripts, laid out at `window` (width, height) when given."""
    at = [f"--window-size={window[0]},{window[1]}", "--hide-scrollbars"] if window else []
    proc = subprocess.run(
        [
            _chromium(),
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            *at,
            "--virtual-time-budget=2000",
            "--dump-dom",
            html_file.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip(), f"empty DOM; stderr: {proc.stderr[-2000:]}"
    return proc.stdout


class Dom(HTMLParser):
    """Just enough of the DOM: elements with their attributes, and the text under each element id."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str | None] = []
        self.text: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag not in ("img", "input", "meta", "br", "link"):
            self.stack.append(a.get("id"))

    def handle_endtag(self, tag):
        if tag not in ("img", "input", "meta", "br", "link") and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for i in self.stack:
            if i:
                self.text.setdefault(i, []).append(data)

    def tags(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == tag]

    def text_of(self, element_id: str) -> str:
        return "".join(self.text.get(element_id, []))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run = standard_run(tmp_path_factory.mktemp("html") / "run")
    return build_report(run)["html"]


@pytest.mark.figures
def test_dom_after_scripts_has_tables_plots_and_drilldown(report, tmp_path):
    dom_text = dump_dom(report, tmp_path)
    dom = Dom()
    dom.feed(dom_text)
    html_el = dom.tags("html")[0]
    assert html_el.get("data-ready") == "1"  # the inline script ran under the page's CSP (hash matches)
    ids = {a.get("id") for _, a in dom.elements}
    for table_id in ("reference", "metrics-ci", "judges", "savings", "tools", "cost", "modes-paired", "cases"):
        assert table_id in ids, table_id
    # sortable headers got keyboard focus from the script
    assert all(th.get("tabindex") == "0" for th in dom.tags("th")[:5])
    imgs = [a for a in dom.tags("img") if a.get("class") == "plot"]
    assert len(imgs) == 4 and all(a["src"].startswith("data:image/png;base64,") for a in imgs)
    # per-case drill-down: question, reference, prediction, summary and tool trace
    case = dom.text_of("case-q1")
    for text in (
        "Where did I go?",
        "Paris",
        "You went to Paris.",
        "User went to Paris.",
        "session_search",
        "tool trace (1 calls)",
        HOSTILE,
    ):
        assert text in case, text
    # model text stays text: no element came out of the hostile prediction
    assert len(dom.tags("script")) == 1
    assert "alert(1)" not in "".join(str(a) for _, a in dom.elements)


def test_sorting_and_filter_work_in_the_browser(report, tmp_path):
    """A copy of the page with a driver script (CSP removed so it may run) clicks a header and types a filter."""
    html = report.read_text()
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    driver = """<script>
    var t=document.getElementById('cases');var th=t.tHead.rows[0].cells;
    var col=Array.prototype.findIndex.call(th,function(h){return h.textContent==='prompt tokens';});
    th[col].click();th[col].click();
    var vals=Array.prototype.map.call(t.tBodies[0].rows,function(r){return r.cells[col].getAttribute('data-v');});
    var f=document.getElementById('case-filter');f.value='q3_abs';f.dispatchEvent(new Event('input'));
    var shown=Array.prototype.filter.call(t.tBodies[0].rows,function(r){return r.style.display!=='none';}).length;
    document.body.setAttribute('data-test',JSON.stringify({sort:th[col].getAttribute('aria-sort'),vals:vals,shown:shown}));
    </script></body>"""
    page = tmp_path / "driven.html"
    page.write_text(html.replace("</body>", driver, 1))
    dom = Dom()
    dom.feed(dump_dom(page, tmp_path))
    import json

    result = json.loads(dom.tags("body")[0]["data-test"])
    assert result["sort"] == "descending"
    vals = [float(v) for v in result["vals"]]
    assert vals == sorted(vals, reverse=True) and vals[0] == 8000
    assert result["shown"] == 3  # q3_abs × 3 modes


# A laptop's window; a real browser's tabs and address bar take about this much of its height.
LAPTOP_WINDOWS = ((1366, 768), (1280, 800))
BROWSER_BARS_PX = 120
MEASURE = """<script>
function box(el){var r=el.getBoundingClientRect();return {top:r.top,bottom:r.bottom,width:r.width};}
var wide=Array.prototype.filter.call(document.querySelectorAll('table'),function(t){
  return t.id!=='headline-table'&&t.tHead&&t.tHead.rows[0].cells.length>=6;});
var plot=document.getElementById('headline-plot');
document.body.setAttribute('data-test',JSON.stringify({w:window.innerWidth,h:window.innerHeight,
  verdict:box(document.getElementById('verdict')),table:box(document.getElementById('headline-table')),
  plot:box(plot),plotLoaded:plot.complete&&plot.naturalWidth>0,
  firstWide:Math.min.apply(null,wide.map(function(t){return box(t).top;})),nWide:wide.length,
  rows:Array.prototype.map.call(document.getElementById('headline-table').tBodies[0].rows,
    function(r){return r.cells[0].textContent;})}));
</script></body>"""


@pytest.mark.figures
@pytest.mark.parametrize("window", LAPTOP_WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_the_first_screen_at_a_laptop_window_says_which_mode_wins_with_the_plot(report, tmp_path, window):
    """Laid out by Chromium at a laptop's window size: the verdict, the headline table (a row per mode) and the
    quality-vs-cost plot lie within the first screen, less the browser's bars, above every wide table."""
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", report.read_text())
    page = tmp_path / "measured.html"
    page.write_text(html.replace("</body>", MEASURE, 1))
    dom = Dom()
    dom.feed(dump_dom(page, tmp_path, window))
    import json

    got = json.loads(dom.tags("body")[0]["data-test"])
    assert got["w"] == window[0] and got["h"] <= window[1]  # laid out at the laptop's width
    # headless Chromium takes its own bars off the window's height (657 px of 800 here); never count on more
    # than the window less a browser's usual bars
    screen = min(got["h"], window[1] - BROWSER_BARS_PX)
    for part in ("verdict", "table", "plot"):
        assert 0 <= got[part]["top"] and got[part]["bottom"] <= screen, (part, got)
    assert got["plotLoaded"] and got["plot"]["width"] >= 400  # the embedded PNG shows, at a readable size
    assert got["rows"] == ["long_context", "summary", "summary_ondemand"]
    assert got["nWide"] >= 5 and got["firstWide"] > max(got[p]["bottom"] for p in ("verdict", "table", "plot"))
