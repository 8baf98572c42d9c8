"""Notebook 07's apps, headless: packings against the bound, precision on a tiny model."""
import math

import numpy as np
import pytest


def test_packing_app_sliders_update_points_and_count():
    from accesslib.apps.nb07_packing import PackingApp

    app = PackingApp(r=1.0, eps=1.0, d=2, method="grid", canvas="agg")
    assert len(app.pts.get_offsets()) == 5 and "<b>5</b>" in app.readout.value
    app.method.value = "lattice"
    assert len(app.pts.get_offsets()) == 7
    app.d.value = 3
    assert len(app.pts.get_offsets()) == 13
    assert app.here.get_ydata()[0] == pytest.approx(math.log10(13))
    app.r.value = 9.0
    app.eps.value = 10 ** -0.5            # r/eps = 28 > 10: a readable error, figure kept
    assert "r/ε must be at most 10" in app.last_error
    app.eps.value = 1.0
    assert app.last_error is None


def test_precision_app_runs_on_tiny_model():
    from accesslib.apps.nb07_packing import PrecisionApp

    app = PrecisionApp("tiny", fast=True, canvas="agg")
    app.kmax.value = 8
    app.run_btn.click()
    app.wait(180)
    assert app.last_error is None, app.last_error
    a, b = app.results["perturbation"], app.results["saturation"]
    # far below eps the input is rounded away: bit-identical input, hence identical output
    assert a["same_input"][0] == 1.0 and a["same_output"][0] == 1.0
    assert list(b["prompts"]) == [4, 16, 64]
    assert np.all(np.diff(b["distinct"]) >= 0) and np.all(b["distinct"] <= b["prompts"])
    assert list(app.distinct.get_ydata()) == list(b["distinct"])


def test_packing_app_saves_its_figure_and_counts():
    import csv
    import io

    from accesslib.apps.nb07_packing import PackingApp

    app = PackingApp(r=2.0, eps=1.0, d=3, method="lattice", canvas="agg")
    assert b"<svg" in app.figure_bytes("svg")[:1000] and app.figure_bytes("png").startswith(b"\x89PNG")
    rows = list(csv.DictReader(io.StringIO(app.data_csv())))
    counts = [r for r in rows if r["panel"] == "counts"]
    assert [float(r["r_over_eps"]) for r in counts] == list(app.art_counts["lattice"].get_xdata())
    assert [float(r["log10_lattice"]) for r in counts] == list(app.art_counts["lattice"].get_ydata())
    assert [float(r["log10_bound"]) for r in counts] == list(app.art_counts["bound"].get_ydata())
    (here,) = [r for r in rows if r["panel"] == "this packing"]
    n = len(app.pts.get_offsets())
    assert int(here["points"]) == n and here["method"] == "lattice" and int(here["d"]) == 3
    assert float(here["log10_count"]) == app.here.get_ydata()[0]
    assert f"<b>{n:,}</b>" in app.readout.value and f"<b>{float(here['bound']):,.1f}</b>" in app.readout.value
    pts = [r for r in rows if r["panel"] == "points"]
    assert len(pts) == n and all(r["z"] != "" for r in pts)
