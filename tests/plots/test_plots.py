"""Plots (accesslib.plots): exact cell areas on a grid, artists moved in place, one place for colours."""
import re
from pathlib import Path

import numpy as np
import pytest

PKG = Path(__file__).resolve().parents[2] / "accesslib"


def test_cells_on_grid_exact_areas():
    from accesslib.plots.geometry import cells_on_grid
    _, sh = cells_on_grid([[1, 0], [-2, 0]], assign="voronoi", res=401)
    assert sh == pytest.approx([0.75, 0.25], abs=0.005)
    _, sh = cells_on_grid([[1, 0], [0, 1], [0, 0]], assign="argmax", res=401)
    assert sh == pytest.approx([0.375, 0.375, 0.25], abs=0.005)
    with pytest.raises(ValueError, match="W"):
        cells_on_grid(np.ones((3, 3)))


def test_set_errorbar_moves_markers_bars_and_caps():
    from matplotlib.figure import Figure

    from accesslib.plots.style import STYLE, set_errorbar

    ax = Figure().add_subplot()
    eb = ax.errorbar([0, 0], [0, 0], yerr=[0, 0], **STYLE["marker"])
    set_errorbar(eb, [1, 2], [10, 20], [1, 3])
    assert list(eb.lines[0].get_ydata()) == [10, 20]
    segs = eb.lines[2][0].get_segments()
    assert [s[:, 1].tolist() for s in segs] == [[9, 11], [17, 23]]
    assert list(eb.lines[1][1].get_ydata()) == [11, 23]


def test_copy_accuracy_shade_follows_the_training_range():
    from matplotlib.figure import Figure

    from accesslib.plots import copying

    art = copying.plot_copy_accuracy(Figure().add_subplot())
    copying.update_copy_accuracy(art, [3, 7], [1.0, None], [1.0, 0.5], 4, (5, 6))
    x0, x1 = art["shade"].get_x(), art["shade"].get_x() + art["shade"].get_width()
    assert (x0, x1) == (5, 6)
    assert np.isnan(art["greedy"].get_ydata()[1]) and len(art["err"].get_segments()) == 1


def test_every_colour_is_defined_in_plots_style():
    """One place for colours: no hex colour literal in apps/ or plots/ outside plots/style.py."""
    hexcolour = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")
    found = []
    for path in sorted((PKG / "apps").glob("*.py")) + sorted((PKG / "plots").glob("*.py")):
        if path.name == "style.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if hexcolour.search(line):
                found.append(f"{path.relative_to(PKG.parent)}:{i}: {line.strip()}")
    assert not found, "colours outside accesslib/plots/style.py:\n" + "\n".join(found)
