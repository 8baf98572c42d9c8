"""Notebook 03's apps, headless: predicted lines against the measured n50, the Dask sweep, every shipped bundle."""
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accesslib.apps.nb03_predicted import PredictedApp  # noqa: E402
from accesslib.apps.policy import public_policy  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_predicted_app_moves_line_with_eps(fast_bundle, tmp_path, monkeypatch):
    out = tmp_path / "b"
    bundles.save(fast_bundle, out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)
    app = PredictedApp(canvas="agg")
    assert app.last_error is None, app.last_error
    y0 = app.art["bounds"]["ball"].get_ydata().copy()
    C0 = app.values["slopes"]["ball"]
    app.eps_rel.value = 2.0**-8
    C1 = app.values["slopes"]["ball"]
    assert C1 == pytest.approx(C0 * math.log(513) / math.log(4097), rel=1e-6)
    assert not (app.art["bounds"]["ball"].get_ydata() == y0).all()
    # measured markers are the bundle's n50
    n50 = [c["n50"] for c in fast_bundle["curves"] if c["n50"] is not None]
    assert list(app.art["measured"].lines[0].get_ydata()) == pytest.approx(n50)


def test_sweep_app_runs_in_process_and_fills_the_curve(tmp_path, monkeypatch):
    from accesslib.apps.nb03_predicted import SweepApp, default_sweep

    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path / "home"))   # default_sweep names the default store

    spec = dict(default_sweep(fast=True), store=str(tmp_path / "s.sqlite"), source="tokens")
    app = SweepApp(spec=spec, scheduler="inprocess", canvas="agg")
    assert app.curves == {} and app.last_error is None
    app.run_button.click()
    assert app.wait(timeout=300)
    assert app.last_error is None, app.last_error
    assert set(app.curves) == {1, 2}
    assert all(c["lengths"] == [2, 4] and sum(c["totals"]) == 4 for c in app.curves.values())
    assert app.progress.value == app.progress.max == 4
    assert "finished: 4/4 jobs" in app.status.value
    public = SweepApp(spec=spec, scheduler="inprocess", canvas="agg", policy=public_policy([embedded.DEFAULT]))
    public.run_button.click()
    assert "switched off on this public server" in public.last_error


@pytest.mark.parametrize("name", bundles.available("cram"))
def test_every_shipped_bundle_draws_in_the_apps(name):
    """Each shipped bundle (embedded family and SmolLM2-135M): the predicted-vs-measured app
    shows its n50 markers and, at its own r and eps, the refined slopes stored with its
    geometry; the geometry app's stored view shows the same slopes."""
    from accesslib.apps.nb05_geometry import ModelGeometryApp

    b = bundles.load("cram", name)
    app = PredictedApp(canvas="agg", model=name, published=False)
    assert app.last_error is None, app.last_error
    n50 = [c["n50"] for c in b["curves"] if c["n50"] is not None]
    assert list(app.art["measured"].lines[0].get_ydata()) == pytest.approx(n50)
    geo = b["geometry"]
    assert app.r.value == pytest.approx(geo["r_inf"], rel=1e-2)   # slider steps in log10 0.01
    app.r.value, app.eps_rel.value = geo["r_inf"], geo["eps"] / geo["r_inf"]
    shown = app.values["slopes"]
    assert {"ball", "box", "cone", "ellipsoid", "cells"} <= set(shown) & set(geo["slopes"])
    for k in set(shown) & set(geo["slopes"]):
        assert shown[k] == pytest.approx(geo["slopes"][k], rel=1e-2), k
    g = ModelGeometryApp(canvas="agg")
    assert name in g.model.options   # offered even when the real model is not installed
    g.model.value = name
    assert not g.shipped_btn.disabled
    g.shipped_btn.click()
    assert g.last_error is None and g.view["slopes"] == geo["slopes"]
