"""Notebook 08's mean-field app, headless."""
import numpy as np


def test_meanfield_app_headless():
    from accesslib.apps.nb08_meanfield import MeanFieldApp

    app = MeanFieldApp(canvas="agg")
    assert app.max_diff < 1e-9 and "the same" in app.readout.value
    before = app.new_pts.get_ydata().copy()
    app.positions.value = True
    assert app.max_diff > 1e-3 and "no longer" in app.readout.value
    assert not np.allclose(app.new_pts.get_ydata(), before)
    app.positions.value = False
    app.k.value = 3
    assert app.max_diff < 1e-9
    app.N.value = 2
    assert app.last_error is None
    d = app.convergence["out_dist"].mean(1)
    assert d[-1] < d[0]
