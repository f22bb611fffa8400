"""The figure stand-in of tests/conftest.py: unmarked tests get placeholder files from `reports.plots.save`,
tests marked `figures` (and, in their module, module fixtures) draw for real. Checked both ways, so the switch
can neither silently do nothing (no time saved) nor everything (the figure tests would look at placeholders)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pytest

from reports import plots
from tests.support.figures import PLACEHOLDER_PNG, PLACEHOLDER_SVG, save_without_drawing


def _figure():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    ax.plot([0, 1, 2], [1, 0, 1], label="a line")
    ax.legend()
    return fig


@pytest.fixture(scope="module")
def module_figure(tmp_path_factory):
    """A figure saved while module fixtures are set up: this module has a marked test, so it is drawn."""
    return plots.save(_figure(), tmp_path_factory.mktemp("module") / "fig")


def _assert_real(png, svg):
    assert png.read_bytes() != PLACEHOLDER_PNG and svg.read_bytes() != PLACEHOLDER_SVG
    assert mpimg.imread(png).shape[:2] == (150, 200)  # 3 x 4 inches at 50 dpi
    assert "a line" in svg.read_text()  # the legend's text, drawn as SVG text


def test_an_unmarked_test_gets_valid_placeholders_and_the_figure_closed(tmp_path, module_figure, request):
    assert plots.save is save_without_drawing
    fig = _figure()
    png, svg = plots.save(fig, str(tmp_path / "pair1.deltas"))  # the paths the real save returns
    assert (png, svg) == (tmp_path / "pair1.png", tmp_path / "pair1.svg")
    png, svg = plots.save(_figure(), tmp_path / "fig")
    assert png.read_bytes() == PLACEHOLDER_PNG and svg.read_bytes() == PLACEHOLDER_SVG
    assert mpimg.imread(png).shape[:2] == (1, 1)  # a PNG that decodes
    assert ET.fromstring(svg.read_bytes()).tag == "{http://www.w3.org/2000/svg}svg"
    assert not plt.fignum_exists(fig.number)
    with pytest.raises(TypeError, match="Figure"):
        plots.save("not a figure", tmp_path / "x")
    # a module fixture where a test is marked: drawn whatever the order; where the marked test is not selected
    # (`make test-fast`: -m "not figures"), a placeholder like any unmarked test's
    mine = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    if any(item.get_closest_marker("figures") for item in mine):
        _assert_real(*module_figure)
    else:
        assert [p.read_bytes() for p in module_figure] == [PLACEHOLDER_PNG, PLACEHOLDER_SVG]


@pytest.mark.figures
def test_a_marked_test_draws_for_real(tmp_path, module_figure):
    assert plots.save is not save_without_drawing
    fig = _figure()
    png, svg = plots.save(fig, tmp_path / "fig")
    _assert_real(png, svg)
    assert not plt.fignum_exists(fig.number)
    _assert_real(*module_figure)
