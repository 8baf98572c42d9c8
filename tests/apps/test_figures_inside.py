"""Every app's figure keeps its texts inside it, for every choice its dropdowns offer.

A tick label as wide as a large model's numbers ("60000" tokens of Gemma's vocabulary in 05's
histogram, "2000" tokens on 03's linear axis) pushed the axis label out of the figure, where the
page cut it. Checked with :func:`conftest.texts_inside` for each app's own figure, after each
option of each dropdown (and both axes of 03)."""
import importlib

import pytest
from conftest import texts_inside

pytest.importorskip("torch")

APPS = [("nb01_bounds", "BoundsApp"), ("nb02_cramming", "CrammingApp"), ("nb03_predicted", "PredictedApp"),
        ("nb03_predicted", "SweepApp"), ("nb04_slope", "SlopeApp"), ("nb05_geometry", "GeometryApp"),
        ("nb05_geometry", "ModelGeometryApp"), ("nb06_copy", "CopyApp"), ("nb07_packing", "PackingApp"),
        ("nb07_packing", "PrecisionApp"), ("nb08_meanfield", "MeanFieldApp"), ("nb09_beyond", "BeyondApp")]


def dropdowns(app):
    import ipywidgets as W
    return [(name, w) for name, w in vars(app).items() if isinstance(w, W.Dropdown) and not w.disabled]


@pytest.mark.parametrize("module,name", APPS, ids=[n for _, n in APPS])
def test_every_choice_keeps_the_figure_texts_inside(module, name):
    app = getattr(importlib.import_module(f"accesslib.apps.{module}"), name)(canvas="agg")
    checked = texts_inside(app.fig)
    for _name, w in dropdowns(app):
        first = w.value
        for option in w.options:
            w.value = option[1] if isinstance(option, tuple) else option
            checked += texts_inside(app.fig)
            if hasattr(app, "log_y"):                      # 03: linear and log y axes
                app.log_y.value = not app.log_y.value
                checked += texts_inside(app.fig)
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
