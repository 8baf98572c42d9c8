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


def test_a_ladder_panel_draws_each_budget_and_its_open_strings():
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    from accesslib.plots.cramming import plot_ladder
    from accesslib.plots.style import BUDGET_COLORS, budget_color

    assert [budget_color(i, 3) for i in range(3)] == BUDGET_COLORS[-3:]          # the largest: darkest
    assert budget_color(0, 1) == BUDGET_COLORS[-1] and budget_color(6, 7) == BUDGET_COLORS[-1]
    rungs = [dict(max_steps=1000, patience=500, lengths=[10, 20], successes=[6, 1], totals=[6, 6], open=[0, 0],
                  n50=15.0, stderr=1.5, own=False),
             dict(max_steps=9000, patience=1500, lengths=[10, 20], successes=[6, 3], totals=[6, 6], open=[0, 2],
                  n50=None, stderr=None, own=True, if_all_fail=dict(n50=19.5, stderr=2.0))]
    curve = dict(model="m-x", m=1, source="glove100k", finished=10, kept=2, rungs=rungs)
    ax = Figure().add_subplot()
    plot_ladder(ax, curve)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["1,000 steps, patience 500", "9,000 steps, patience 1,500 (the run)",
                      "strings still being crammed: where they would put each length if all of them crammed"]
    ax2 = Figure().add_subplot()
    plot_ladder(ax2, curve, ["a", "b"])
    assert [t.get_text() for t in ax2.get_legend().get_texts()][:2] == ["a", "b"]
    assert ax.get_title() == "m-x, m = 1, glove100k (10 strings finished; 2 still being crammed)"
    fracs = sorted(tuple(np.round(line.get_ydata(), 3)) for line in ax.lines if len(line.get_ydata()) == 2
                   and line.get_marker() == "o" and line.get_markerfacecolor() != "white")
    assert fracs == [(1.0, 0.167), (1.0, 0.5)]
    # the two open strings at n = 20: a dashed bar from 3/6 to 5/6, a hollow marker at its top
    bars = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_linestyle()[0][1] is not None]
    (seg,) = bars[0].get_segments()
    assert seg[0][1] == pytest.approx(0.5) and seg[1][1] == pytest.approx(5 / 6)
    hollow = [line for line in ax.lines if line.get_markerfacecolor() == "white" and len(line.get_ydata())]
    assert len(hollow) == 1 and list(hollow[0].get_ydata()) == pytest.approx([5 / 6])
    # the decided n50 only: a dotted line at 15
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == ":" and
            line.get_xdata()[0] == line.get_xdata()[1]] == [15.0]


def test_a_budget_map_draws_lines_bounds_table_and_ring():
    """draw_budget_map: one line per patience with a point per readable cell; an open cell a hollow
    marker at its least n50 with an arrow above; every cell its text in the table, the undecided
    ones hatched, "k cut" under cells whose cap stopped strings; [A]'s budget ringed on both; drawn
    again on the same axes without piling up."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from accesslib.plots.cramming import draw_budget_map

    def cell(n50=None, se=0.5, low=None, cut=0):
        c = dict(successes=[3, 1], open=[0, 1] if low is not None else [0, 0], n50=n50, stderr=se if n50 else None,
                 cut=cut, cut_unknown=0)
        if low is not None:
            c["range"] = dict(low=low, high=None, above=1, below=0)
        return c

    mp = dict(steps=[100, 300, 900], patiences=[50, 150], lengths=[4, 8],
              cells=[[cell(5.0, cut=2), cell(5.5)], [cell(6.0), cell(6.5, cut=1)], [cell(6.0), cell(low=7.0)]])
    texts = [["5.0", "5.5"], ["6.0", "6.5"], ["6.0", "≥ 7.0"]]
    fig, (a, b) = plt.subplots(1, 2)
    for _ in range(2):
        draw_budget_map(a, b, mp, texts, mark=(300, 150))
    lines = {ln.get_label(): ln for ln in a.get_lines()}
    assert [round(x) for x in lines["patience 50"].get_xdata()] == [98, 295, 885]    # nudged apart
    assert list(lines["patience 50"].get_ydata()) == [5.0, 6.0, 6.0]
    assert list(lines["patience 150"].get_ydata()) == [5.5, 6.5, 7.0]
    assert "300 / 150 ([A]'s)" in lines and list(lines["300 / 150 ([A]'s)"].get_ydata()) == [6.5]
    assert "strings still open: n50 at least" in [t.get_text() for t in a.get_legend().get_texts()]
    assert a.get_ylim()[1] > 7.5                                              # room for the arrow
    shown = [t.get_text() for t in b.texts]
    assert [t for t in shown if "cut" not in t] == [t for row in texts for t in row]
    assert sorted(t for t in shown if "cut" in t) == ["1 cut", "2 cut"]
    hatched = [p for p in b.patches if isinstance(p, Rectangle) and p.get_hatch()]
    assert len(hatched) == 1 and hatched[0].get_xy() == (0.5, 1.5)           # the open cell
    ring = [p for p in b.patches if isinstance(p, Rectangle) and not p.get_hatch()]
    assert len(ring) == 1 and ring[0].get_xy() == (0.5, 0.5)                 # 300 steps, patience 150
    assert [t.get_text() for t in b.get_yticklabels()] == ["100", "300", "900"]
    plt.close(fig)
