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


def test_saved_figure_and_csv_are_what_the_page_shows():
    import csv
    import io

    from accesslib.apps.nb08_meanfield import MeanFieldApp

    app = MeanFieldApp(canvas="agg")
    app.positions.value = True
    assert app.figure_bytes("pdf").startswith(b"%PDF-") and app.figure_bytes("png").startswith(b"\x89PNG")
    rows = list(csv.DictReader(io.StringIO(app.data_csv())))
    assert list(rows[0]) == ["panel", "coordinate", "original", "changed", "difference", "N", "N_changed",
                             "positions", "causal", "distance_mean", "distance_sd", "tv_mean"]
    outs = [r for r in rows if r["panel"] == "(a) outputs"]
    assert [float(r["original"]) for r in outs] == list(app.base_line.get_ydata())
    assert [float(r["changed"]) for r in outs] == list(app.new_pts.get_ydata())
    assert max(abs(float(r["difference"])) for r in outs) == app.max_diff
    assert {r["positions"] for r in outs} == {"True"} and int(outs[0]["N_changed"]) == 2 * int(outs[0]["N"])
    conv = [r for r in rows if r["panel"] == "(b) convergence"]
    x, y = app.art_conv["distance"].lines[0].get_data()
    assert [int(r["N"]) for r in conv] == list(x) and [float(r["distance_mean"]) for r in conv] == list(y)
    assert [float(r["tv_mean"]) for r in conv] == list(app.art_conv["tv"].get_ydata())
