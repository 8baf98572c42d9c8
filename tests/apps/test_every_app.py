"""Checks run on every app of the notebooks.

- **Texts inside the figure**, for every choice its dropdowns offer. A tick label as wide as a
  large model's numbers ("60000" tokens of Gemma's vocabulary in 05's histogram, "2000" tokens on
  03's linear axis) pushed the axis label out of the figure, where the page cut it. Checked with
  :func:`conftest.texts_inside` after each option of each dropdown (and both axes of 03).
- **No two texts of an axes overlap** in any of those states (marker labels, line names, notes).
- **A slider's echo is no move.** The browser snaps a value set from Python to the slider's step
  grid and sends the snapped value back. That must change nothing the page shows: 05 took the
  echo of a row's norm (0.9055 shown as 0.91) as a move, so selecting a token moved its row and
  the page's mean cost read 1.721 where its answer says 1.720.
"""
import importlib
import math

import pytest
from conftest import texts_inside

pytest.importorskip("torch")

APPS = [("nb01_bounds", "BoundsApp"), ("nb02_cramming", "CrammingApp"), ("nb03_predicted", "PredictedApp"),
        ("nb03_predicted", "SweepApp"), ("nb03_predicted", "BudgetMapApp"), ("nb04_slope", "SlopeApp"), ("nb05_geometry", "GeometryApp"),
        ("nb05_geometry", "ModelGeometryApp"), ("nb06_copy", "CopyApp"), ("nb07_packing", "PackingApp"),
        ("nb07_packing", "PrecisionApp"), ("nb08_meanfield", "MeanFieldApp"), ("nb09_beyond", "BeyondApp")]


def snapped(w):
    """The value the browser sends back for ``w``'s value: the nearest point of its step grid."""
    import ipywidgets as W
    if isinstance(w, W.FloatLogSlider):
        k = round((math.log(w.value, w.base) - w.min) / w.step)
        return w.base ** (w.min + k * w.step)
    return w.min + round((w.value - w.min) / w.step) * w.step


def shown(app):
    """What the page shows of its numbers: the readout and the numbers of the values it computed."""
    values = getattr(app, "values", None) or {}
    return app.readout.value, {k: v for k, v in values.items() if isinstance(v, (int, float))}


def overlapping_texts(fig) -> list[tuple[str, str]]:
    """Pairs of texts drawn on one axes whose own boxes overlap (an annotation's box without its
    leader line)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    pairs = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        drawn = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in ax.texts
                 if t.get_visible() and t.get_text().strip()]
        pairs += [(a, b) for i, (a, ea) in enumerate(drawn) for b, eb in drawn[:i]
                  if min(ea.x1, eb.x1) - max(ea.x0, eb.x0) > 1 and min(ea.y1, eb.y1) - max(ea.y0, eb.y0) > 1]
    return pairs


def check_figure(fig) -> int:
    """Every text inside the figure and no two texts of an axes over one another."""
    assert overlapping_texts(fig) == []
    return texts_inside(fig)


def dropdowns(app):
    import ipywidgets as W
    return [(name, w) for name, w in vars(app).items() if isinstance(w, W.Dropdown) and not w.disabled]


@pytest.mark.parametrize("module,name", APPS, ids=[n for _, n in APPS])
def test_every_choice_keeps_the_figure_texts_inside(module, name):
    app = getattr(importlib.import_module(f"accesslib.apps.{module}"), name)(canvas="agg")
    checked = check_figure(app.fig)
    for _name, w in dropdowns(app):
        first = w.value
        for option in w.options:
            w.value = option[1] if isinstance(option, tuple) else option
            checked += check_figure(app.fig)
            if hasattr(app, "log_y"):                      # 03: linear and log y axes
                app.log_y.value = not app.log_y.value
                checked += check_figure(app.fig)
                app.log_y.value = not app.log_y.value
        w.value = first
    assert checked > 0


def test_the_wide_labels_that_were_cut_are_checked():
    """The two figures that cut their axis label are among those checked, at the choice that cut it."""
    from accesslib.apps.nb03_predicted import PredictedApp
    from accesslib.apps.nb05_geometry import ModelGeometryApp

    geo = ModelGeometryApp(canvas="agg")
    geo.model.value = "gemma-3-270m"
    ax = geo.fig.axes[0]
    geo.fig.canvas.draw()
    assert ax.get_ylabel() == "tokens" and max(float(t.get_text()) for t in ax.get_yticklabels()) >= 10000
    texts_inside(geo.fig)
    pred = PredictedApp(canvas="agg", model="smollm2-135m")
    pred.log_y.value = False
    pred.fig.canvas.draw()
    assert max(len(t.get_text()) for t in pred.art["ax"].get_yticklabels()) == 4     # "2000"
    texts_inside(pred.fig)


@pytest.mark.parametrize("module,name", APPS, ids=[n for _, n in APPS])
def test_the_browsers_snapped_echo_changes_nothing(module, name):
    import ipywidgets as W

    app = getattr(importlib.import_module(f"accesslib.apps.{module}"), name)(canvas="agg")
    sliders = [w for w in vars(app).values() if isinstance(w, (W.FloatLogSlider, W.FloatSlider, W.IntSlider))]
    for w in sliders:
        before = shown(app)
        echo = snapped(w)
        if isinstance(w, W.IntSlider):
            echo = int(echo)
        w.value = echo
        readout, values = shown(app)
        assert readout == before[0] and values == pytest.approx(before[1], rel=1e-12), (
            f"{name}: the browser's echo of {w.description!r} ({echo}) changed the page")


def test_05_selecting_a_token_leaves_its_row_where_it_was():
    """05: the echo of the selected row's norm and angle does not move it; a real move does, and a
    move back within half a step of the first value gives that value back."""
    from accesslib.apps.nb05_geometry import DEFAULT_ROWS, GeometryApp

    app = GeometryApp(canvas="agg")
    cost = app.values["cost_argmax"]
    for t in range(len(DEFAULT_ROWS)):
        app.token.value = t
        app.norm.value, app.angle.value = snapped(app.norm), snapped(app.angle)
    assert app.rows == pytest.approx(DEFAULT_ROWS, abs=1e-12) and app.values["cost_argmax"] == cost
    app.token.value = 0
    app.norm.value = 0.5                                                   # a move
    assert math.hypot(*app.rows[0]) == pytest.approx(0.5)
    assert math.degrees(math.atan2(app.rows[0][1], app.rows[0][0])) == pytest.approx(6.3402, abs=1e-4)
    app.norm.value = 0.91                                                  # back: the exact 0.9055 again
    assert app.rows[0] == pytest.approx(DEFAULT_ROWS[0], abs=1e-12)


def test_the_overlap_check_sees_overlapping_texts_and_not_leaders():
    """The check itself: two texts at one place overlap; an annotation whose leader line crosses
    another text does not count (only the texts' own boxes)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.5, 0.5, "one label")
    ax.text(0.52, 0.5, "another label")
    assert overlapping_texts(fig) == [("another label", "one label")]
    ax.texts[1].remove()
    ax.annotate("far away", xy=(0.5, 0.52), xytext=(0.1, 0.9), arrowprops=dict(arrowstyle="-"))
    assert overlapping_texts(fig) == []
    plt.close(fig)
