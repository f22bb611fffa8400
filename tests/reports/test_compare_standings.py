"""Issue 37 item 9: `compare` over contestants gives one table ranked by the headline metric, with USD and tokens per
question including ingest, ingest and answer latency, a frontier mark and a `variant` mark; rows and legends are
named by the contestant, and every legend of frontier.png is readable (reports/standings.py, reports/plots.py)."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from commands.compare_runs import compare_main
from harness.run_meta import RunMeta
from reports import plots
from tests.reports.test_cost_views import MEM0_INGEST, memory_rec
from tests.support.report_fixtures import meta, rec, write_run

if TYPE_CHECKING:
    from reports.standings import Contestant

PHASES = ("answer", "ingest", "retrieve")


def _c(name: str, quality: float | None, tokens: float, *, run: int = 0, mode: str = "m", **kw: Any) -> Contestant:
    from reports.standings import (
        Contestant,
    )  # the new module: imported in the tests, so the end-to-end ones run on main

    return Contestant(
        name=name,
        base=name,
        run=run,
        mode=mode,
        variant=kw.pop("variant", ""),
        n=4,
        quality=quality,
        lo=quality,
        hi=quality,
        tokens={"answer": tokens, "ingest": 0.0, "retrieve": 0.0},
        usd={p: 0.0 for p in PHASES},
        ingest_ms=1.0,
        answer_ms=1.0,
        latency_ms=2.0,
        **kw,
    )


# --- the frontier and the ranking against brute force ------------------------------------------------------------


def _brute_frontier(cs: list[Contestant], hib: bool) -> set[str]:
    """The Pareto definition, written out: off the frontier when another is at least as good on quality and on
    cost and strictly better on one; cost unknown (a service that reported nothing) is worse than any known."""

    def cost(c: Contestant) -> float:
        return c.total_tokens if c.spend_reported else math.inf

    def q(c: Contestant) -> float:
        assert c.quality is not None
        return c.quality if hib else -c.quality

    scored = [c for c in cs if c.quality is not None]
    return {
        c.name
        for c in scored
        if not any(
            q(o) >= q(c) and cost(o) <= cost(c) and (q(o) > q(c) or cost(o) < cost(c)) for o in scored if o is not c
        )
    }


def _random_set(rng: random.Random) -> list[Contestant]:
    n = rng.randint(1, 9)
    out = []
    for i in range(n):
        quality = None if rng.random() < 0.1 else rng.choice([0.0, 0.25, 0.5, 0.5, 0.75, 1.0])  # ties on purpose
        tokens = float(rng.choice([100, 500, 500, 2000, 15000]))  # and on cost
        out.append(_c(f"c{i}", quality, tokens, spend_reported=rng.random() > 0.15))
    return out


@pytest.mark.parametrize("hib", [True, False])
def test_the_frontier_is_the_pareto_set_on_seeded_contestant_sets(hib):
    from reports.standings import frontier

    rng = random.Random(9 if hib else 10)
    for _ in range(400):
        cs = _random_set(rng)
        assert frontier(cs, higher_is_better=hib) == _brute_frontier(cs, hib)


def test_the_frontier_on_the_issues_example_and_its_edge_cases():
    from reports.standings import frontier

    bm25, mem0 = _c("bm25", 0.333, 3190), _c("mem0", 0.333, 17598)
    assert frontier([bm25, mem0]) == {"bm25"}  # as good and five times the tokens: dominated
    twins = [_c("a", 0.5, 100), _c("b", 0.5, 100)]
    assert frontier(twins) == {"a", "b"}  # identical points: neither is better
    silent = _c("silent", 0.5, 10, spend_reported=False)  # claims to be cheapest but reported nothing
    assert frontier([silent, _c("honest", 0.5, 1000)]) == {"honest"}
    assert frontier([silent, _c("honest", 0.25, 1000)]) == {"silent", "honest"}  # the best quality stays on it
    assert frontier([_c("none", None, 1)]) == set()


def test_the_ranking_is_by_quality_with_shared_ranks_and_cheaper_first_among_equals():
    from reports.standings import ranked

    rng = random.Random(37)
    for _ in range(300):
        cs = _random_set(rng)
        for hib in (True, False):
            rows = ranked(cs, higher_is_better=hib)
            assert sorted(c.name for _, c in rows) == sorted(c.name for c in cs)
            for rank, c in rows:
                if c.quality is None:
                    assert rank is None
                    continue
                better = [
                    o for o in cs if o.quality is not None and (o.quality > c.quality if hib else o.quality < c.quality)
                ]
                assert rank == 1 + len(better)  # competition ranking: 1, 2, 2, 4
            scored = [c for _, c in rows if c.quality is not None]
            assert [c for _, c in rows][: len(scored)] == scored  # the unscored last
            for a, b in itertools.pairwise(scored):
                if a.quality == b.quality:  # among equals, the fewest tokens first
                    assert a.total_tokens <= b.total_tokens


# --- names -------------------------------------------------------------------------------------------------------


def _meta(**config: Any) -> RunMeta:
    return RunMeta.of({"config": config})


def test_names_are_the_contestants_own_and_only_names_that_collide_are_qualified_minimally():
    from reports.standings import name_contestants

    found = [
        _c("bm25", 0.5, 1, run=0),
        _c("mem0", 0.5, 1, run=1),
        _c("mem0", 0.5, 1, run=2),
        _c("my-service", 0.5, 1, run=3),
    ]
    long_value = {"generation": {"temperature": 0, "max_tokens": 1024}, "turns_per_add": 12, "threshold": 0.1}
    metas = [
        _meta(
            memory={"name": "bm25", "_target_": "harness.memory.builtin.IndexProvider"}, mode={"memory": {"top_k": 10}}
        ),
        _meta(
            memory={"_target_": "harness.memory.mem0_provider.Mem0Provider", **long_value},
            mode={"memory": {"top_k": 10}},
        ),
        _meta(
            memory={"_target_": "harness.memory.mem0_provider.Mem0Provider", **long_value},
            mode={"memory": {"top_k": 20}},
        ),
        _meta(
            memory={"url": "http://127.0.0.1:8765/v1", "_target_": "harness.memory.http.HttpProvider"},
            mode={"memory": {"top_k": 10}},
        ),
    ]
    paths = [Path(f"runs/x/multirun/{i}") for i in range(4)]
    names = [c.name for c in name_contestants(found, metas, paths)]
    assert names == ["bm25", "mem0 (memory.top_k=10)", "mem0 (memory.top_k=20)", "my-service"]
    assert names == [c.name for c in name_contestants(found, metas, paths)]  # deterministic
    # identical configs in two runs: told apart by their directories, else by their places on the command line
    same = [_c("bm25", 0.5, 1, run=0), _c("bm25", 0.5, 1, run=1)]
    assert [c.name for c in name_contestants(same, [metas[0]] * 2, [Path("a/r1"), Path("a/r2")])] == [
        "bm25 (r1)",
        "bm25 (r2)",
    ]
    assert [c.name for c in name_contestants(same, [metas[0]] * 2, [Path("a/r"), Path("b/r")])] == [
        "bm25 (run 1)",
        "bm25 (run 2)",
    ]
    # a service that calls itself bm25 cannot pass for the built-in: both are qualified, by what they are (the
    # shipped provider config each was selected by, configs/memory/bm25.yaml and http.yaml, not its class's path)
    twin = [_c("bm25", 0.5, 1, run=0), _c("bm25", 0.5, 1, run=1)]
    assert [c.name for c in name_contestants(twin, [metas[0], metas[3]], paths[:2])] == [
        "bm25 (memory=bm25)",
        "bm25 (memory=http)",
    ]
    # two contestants of one run with the same provider (two memory modes): their mode keys
    one_run = [_c("bm25", 0.5, 1, mode="memory"), _c("bm25", 0.5, 1, mode="memory_k20")]
    assert [c.name for c in name_contestants(one_run)] == ["bm25 (memory)", "bm25 (memory_k20)"]


def test_generated_contestant_sets_always_get_distinct_short_names():
    from reports.standings import name_contestants

    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 7)
        found = [_c(rng.choice(["bm25", "mem0", "rag"]), 0.5, 1, run=i) for i in range(n)]
        metas = [_meta(mode={"memory": {"top_k": rng.choice([5, 10, 20])}}, seed=rng.randint(0, 2)) for _ in range(n)]
        names = [c.name for c in name_contestants(found, metas, [Path(f"d{i}") for i in range(n)])]
        assert len(set(names)) == n and all(len(x) <= 60 for x in names)
        for c, x in zip(found, names):
            assert x == c.base or sum(o.base == c.base for o in found) > 1  # a unique base is never qualified


# --- compare end to end ------------------------------------------------------------------------------------------


def _config(provider: str, top_k: int = 10, **memory: Any) -> dict[str, Any]:
    return {
        "model": {"model": "gpt-4o-mini", "kind": "remote"},
        "judge": {"_target_": "harness.scoring.judges.LongMemEvalJudge"},
        "mode": {"memory": {"_target_": "harness.memory.contestant.ProviderContestant", "top_k": top_k}},
        "memory": {"_target_": f"harness.memory.{provider}", **memory},
    }


def memory_run(run_dir: Path, provider: str, right: list[float], *, config: dict[str, Any], **kw: Any) -> Path:
    recs = [memory_rec(f"q{i}", "memory", provider, lme=v, **kw) for i, v in enumerate(right)]
    m = meta()
    m["config"] = config
    return write_run(run_dir, recs, m)


def contest(tmp_path: Path) -> list[Path]:
    """Five memory contestants and the built-in modes, as a reader would compare them."""
    root = tmp_path / "runs"
    return [
        memory_run(
            root / "a", "bm25", [1, 1, 0, 0], config=_config("builtin.IndexProvider", name="bm25"), answer_prompt=3000
        ),
        memory_run(
            root / "b",
            "mem0",
            [1, 1, 0, 0],
            config=_config("mem0_provider.Mem0Provider", turns_per_add=12, generation={"max_tokens": 1024}),
            answer_prompt=800,
            ingest_usage=MEM0_INGEST,
            spend={"llm": "answer_model"},
            ingest_ms=60_000.0,
        ),
        memory_run(
            root / "c",
            "mem0",
            [1, 1, 1, 0],
            config=_config("mem0_provider.Mem0Provider", 20, turns_per_add=12, generation={"max_tokens": 1024}),
            answer_prompt=900,
            ingest_usage=MEM0_INGEST,
            spend={"llm": "answer_model"},
            variant="settings",
            top_k=20,
            ingest_ms=60_000.0,
        ),
        memory_run(
            root / "d",
            "my-service",
            [1, 0, 0, 0],
            config=_config("http.HttpProvider", url="http://127.0.0.1:8765/v1"),
            answer_prompt=2000,
            spend={"remote": True},
            ingest_usage={"cost_usd": 0.01},
            retrieve_usage={"cost_usd": 0.001},
        ),
        _with_failure(
            memory_run(
                root / "e",
                "full_context",
                [1, 1, 1, 0],
                config=_config("builtin.FullContextProvider"),
                answer_prompt=4000,
            )
        ),
    ]


def _with_failure(run_dir: Path) -> Path:
    """One more case, which the provider failed: recorded, not scored."""
    failed = rec("q9", "memory", status="failed", error="memory provider 'full_context': retrieve failed")
    with open(run_dir / "records.jsonl", "a") as f:
        f.write(json.dumps({"schema": 1, **failed}) + "\n")
    return run_dir


def _rows(md: str) -> list[list[str]]:
    section = md[md.index("## Contestants: quality, cost and latency") :].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| rank")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_compare_ranks_every_contestant_in_one_table_named_by_the_contestant(tmp_path):
    runs = contest(tmp_path)
    assert compare_main([str(p) for p in runs], out=str(tmp_path / "cmp")) == 0
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert md.index("## Contestants") < md.index("Paired by question_id")  # the table a reader sees first
    rows = {r[1]: r for r in _rows(md)}
    # both mem0 runs add 12 turns at a time, not their file's 2 (configs/memory/mem0.yaml): said once, before what
    # tells the two apart
    assert [r[1] for r in _rows(md)] == [
        "full_context",
        "mem0 (turns_per_add=12, memory.top_k=20)",
        "bm25",
        "mem0 (turns_per_add=12, memory.top_k=10)",
        "my-service",
    ]
    assert [r[0] for r in _rows(md)] == ["1", "1", "3", "3", "5"]
    assert rows["bm25"][3] == "4" and rows["full_context"][3] == "4 (1 failed)"  # a failure is shown, not hidden
    k10, k20 = rows["mem0 (turns_per_add=12, memory.top_k=10)"], rows["mem0 (turns_per_add=12, memory.top_k=20)"]
    assert k20[2] == "settings (top_k=20)" and rows["bm25"][2] == ""
    # tokens per question include ingest: mem0's 15,600 extraction tokens a question
    assert k10[7] == "16,410" and k10[8] == "810 / 15,600 / 0"
    assert rows["bm25"][7] == "3,010"
    mem0_usd = ((15000 + 800) * 0.15 + (600 + 10) * 0.60) * 1e-6
    assert float(k10[5]) == pytest.approx(mem0_usd, abs=1e-6)
    service_usd = (2000 * 0.15 + 10 * 0.60) * 1e-6 + 0.01 + 0.001  # its own cost_usd kept, ingest and retrieve
    assert float(rows["my-service"][5]) == pytest.approx(service_usd, abs=1e-6)
    assert k10[9] == "60,000" and rows["bm25"][9] == "100"  # ingest latency apart
    frontier_names = {name for name, r in rows.items() if r[-1] == "yes"}
    # mem0 as good as bm25 at 5x the tokens: dominated; my-service is the cheapest (its own cost reported)
    assert frontier_names == {"my-service", "bm25", "full_context"}
    assert not any(len(name) > 40 for name in rows)
    # the runs are named by their contestants in the paired sections too, not by a config diff
    assert (
        "## B = `mem0 (turns_per_add=12, memory.top_k=10)` vs A = `bm25`" in md
        and "memory._target_" not in md.split("## B =")[1].split("\n")[0]
    )
    side = md[md.index("## Memory systems") :]  # the memory tables name their rows the same way
    assert "| mem0 (turns_per_add=12, memory.top_k=20) (settings) |" in side
    assert "| bm25 (fair) |" in side and "| my-service (fair) |" in side


def _drawn_tick_labels(fig: Any) -> list[Any]:
    """The tick labels matplotlib draws: those whose tick lies within its axis' view (the others are not drawn)."""
    out = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            out += [
                t.label1
                for t in axis.get_major_ticks()
                if lo <= t.get_loc() <= hi and t.label1.get_visible() and t.label1.get_text()
            ]
    return out


def _figure_of_compare(tmp_path: Path, runs: list[Path], monkeypatch) -> Any:
    saved: list[Any] = []
    real = plots.save

    def keep(fig, out_base, **kw):
        if Path(out_base).name == "frontier":
            saved.append(fig)
        return real(fig, out_base, **kw)

    monkeypatch.setattr(plots, "save", keep)
    assert compare_main([str(p) for p in runs], out=str(tmp_path / "cmp")) == 0
    (fig,) = saved
    return fig


@pytest.mark.figures
def test_every_legend_of_frontier_png_is_distinct_whole_and_clear_of_the_others(tmp_path, monkeypatch):
    """Twelve contestants, some with long names (a vendor names its service): the figure is rendered, and every
    legend text is one contestant's whole name, inside the saved image, overlapping no other text."""
    import matplotlib.image as mpimg

    runs = contest(tmp_path)
    for i, name in enumerate(
        [
            "acme-enterprise-memory-graph-service-with-a-very-long-product-name",
            "x",
            "zep",
            "letta",
            "supermemory",
            "rag",
            "y",
        ]
    ):
        runs.append(
            memory_run(
                tmp_path / "more" / f"r{i}",
                name,
                [float(j <= i % 4) for j in range(4)],
                config=_config("http.HttpProvider", url=f"http://127.0.0.1:{9000 + i}/v1"),
                answer_prompt=1000 + 97 * i,
                spend={"remote": True},
                ingest_usage={"cost_usd": 0.001 * i},
            )
        )
    fig = _figure_of_compare(tmp_path, runs, monkeypatch)
    md = (tmp_path / "cmp" / "compare.md").read_text()
    names = [r[1] for r in _rows(md)]
    assert len(names) == 12
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # the saved figure, closed by save: drawn again as it was laid out
    fig.draw(renderer)
    (legend,) = fig.legends
    texts = legend.get_texts()
    shown = ["".join(t.get_text().split()) for t in texts]
    expected = {"".join((n + (" [settings (top_k=20)]" if "top_k=20" in n else "")).split()) for n in names}
    assert len(shown) == len(set(shown)) == 12 and set(shown) == expected  # distinct, whole (wrapped, never cut)
    width, height = fig.bbox.width, fig.bbox.height
    boxes = [t.get_window_extent(renderer) for t in texts]
    for t, b in zip(texts, boxes):
        assert 0 <= b.x0 and b.x1 <= width and 0 <= b.y0 and b.y1 <= height, t.get_text()  # inside the image
    for (ta, a), (tb, b) in itertools.combinations(zip(texts, boxes), 2):
        assert not a.overlaps(b), (ta.get_text(), tb.get_text())
    others = [fig._suptitle] + [a.xaxis.label for a in fig.axes] + [a.yaxis.label for a in fig.axes]
    others += [t for a in fig.axes for t in a.get_xticklabels() if t.get_text()]
    for t, b in zip(texts, boxes):
        for o in others:
            assert o is None or not b.overlaps(o.get_window_extent(renderer)), (t.get_text(), o.get_text())
    tick_boxes = [(t, t.get_window_extent(renderer)) for t in _drawn_tick_labels(fig)]
    assert len(tick_boxes) >= 8
    for (ta, a), (tb, b) in itertools.combinations(tick_boxes, 2):  # axis labels never run together either
        assert not a.overlaps(b), (ta.get_text(), tb.get_text())
    png = mpimg.imread(tmp_path / "cmp" / "frontier.png")
    assert png.shape[:2] == (round(height), round(width))  # the image is the whole figure: nothing cropped


@pytest.mark.process
def test_html_view_of_compare_in_chromium(tmp_path):
    """compare.html laid out by headless Chromium at a laptop's window: the ranked table's rows are the contestants
    in rank order, the frontier image is loaded, shown at a readable width, and within the window."""
    from tests.system.test_html_chromium import Dom, dump_dom

    runs = contest(tmp_path)
    assert compare_main([str(p) for p in runs], out=str(tmp_path / "cmp")) == 0
    page = tmp_path / "cmp" / "compare.html"
    measure = """<script>
    var t=document.getElementById('contestants');var img=document.getElementById('frontier-plot');
    var r=img.getBoundingClientRect();
    document.body.setAttribute('data-test',JSON.stringify({w:window.innerWidth,
      names:Array.prototype.map.call(t.tBodies[0].rows,function(x){return x.cells[1].textContent;}),
      ranks:Array.prototype.map.call(t.tBodies[0].rows,function(x){return x.cells[0].textContent;}),
      loaded:img.complete&&img.naturalWidth>0,natural:img.naturalWidth,shown:r.width,left:r.left,right:r.right,
      tableTop:t.getBoundingClientRect().top,imgTop:r.top}));
    </script></body>"""
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace("</body>", measure, 1))
    dom = Dom()
    dom.feed(dump_dom(measured, tmp_path, (1366, 768)))
    got = json.loads(dom.tags("body")[0]["data-test"])
    assert got["names"] == [
        "full_context",
        "mem0 (turns_per_add=12, memory.top_k=20)",
        "bm25",
        "mem0 (turns_per_add=12, memory.top_k=10)",
        "my-service",
    ]
    assert got["ranks"] == ["1", "1", "3", "3", "5"]
    assert got["loaded"] and got["natural"] > 0
    assert got["shown"] >= min(got["natural"], 0.9 * got["w"]) * 0.8  # not shrunk to an unreadable size
    assert 0 <= got["left"] and got["right"] <= got["w"]  # within the window: the legend is not cut off
    assert got["tableTop"] < got["imgTop"]


def test_a_compare_of_runs_without_memory_contestants_ranks_the_modes(tmp_path):
    recs = [
        rec(q, m, lme=float(m != "summary"), tokens=t)
        for q in ("q1", "q2")
        for m, t in (("long_context", 4000), ("summary", 300))
    ]
    a = write_run(tmp_path / "a", recs)
    b = write_run(tmp_path / "b", recs, meta(model="gpt-4o"))
    assert compare_main([str(a), str(b)], out=str(tmp_path / "cmp")) == 0
    names = [r[1] for r in _rows((tmp_path / "cmp" / "compare.md").read_text())]
    assert sorted(names) == sorted(
        [
            "long_context (model.model=gpt-4o-mini)",
            "long_context (model.model=gpt-4o)",
            "summary (model.model=gpt-4o-mini)",
            "summary (model.model=gpt-4o)",
        ]
    )


@pytest.mark.figures
@pytest.mark.parametrize("spread", [1.05, 1.3, 1.8, 2.0, 2.6, 3.2, 4.0, 8.0, 30.0, 3000.0])
def test_frontier_tick_labels_never_run_together_whatever_the_range(tmp_path, monkeypatch, spread):
    """Four contestants within a narrow range of tokens and latency (s20: 47,000-63,000 ms on the six-type subset
    drew labels such as "58,00060,000"), and wider ones: the drawn tick labels of both plots never overlap."""
    from types import SimpleNamespace

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    saved: list[Any] = []
    monkeypatch.setattr(plots, "save", lambda fig, out_base, **kw: saved.append(fig) or [])
    points = [
        SimpleNamespace(
            name=f"c{i}",
            legend=f"c{i}",
            quality=0.2 * i,
            variant=False,
            total_tokens=1950 * spread ** (i / 3),
            latency_ms=47000 * spread ** (i / 3),
            frontier_cost=float(i),
        )
        for i in range(4)
    ]
    plots.frontier(points, tmp_path / "frontier", quality_label="acc")
    (fig,) = saved
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ticks = [(t.get_text(), t.get_window_extent(renderer)) for t in _drawn_tick_labels(fig)]
    assert sum(1 for ax in fig.axes[:2] for t in ax.get_xticklabels() if t.get_text()) >= 2
    for (ta, a), (tb, b) in itertools.combinations(ticks, 2):
        assert not a.overlaps(b), (ta, tb)
