"""The figure stand-in in a module with no test marked `figures`: its module fixtures get placeholders too
(tests/conftest.py; the other case is in test_figures_standin.py)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from reports import plots
from tests.support.figures import PLACEHOLDER_PNG, PLACEHOLDER_SVG


@pytest.fixture(scope="module")
def module_figure(tmp_path_factory):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    return fig, plots.save(fig, tmp_path_factory.mktemp("module") / "fig")


def test_a_module_fixture_of_an_unmarked_module_is_not_drawn(module_figure):
    fig, (png, svg) = module_figure
    assert png.read_bytes() == PLACEHOLDER_PNG and svg.read_bytes() == PLACEHOLDER_SVG
    assert not plt.fignum_exists(fig.number)
