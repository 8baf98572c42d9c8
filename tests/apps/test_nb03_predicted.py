"""Notebook 03's apps, headless: predicted lines against the measured n50, the Dask sweep, every shipped bundle."""
import math
from pathlib import Path

import numpy as np
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
    assert not np.allclose(app.art["bounds"]["ball"].get_ydata(), y0)
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


def test_sweep_stop_returns_the_page_to_idle(tmp_path, monkeypatch):
    """Item 6: Stop during a sweep ends it after the running job: Launch enabled, Stop disabled,
    the status "stopped", never "running", and the jobs after the stop not run."""
    from accesslib.apps.nb03_predicted import SweepApp, default_sweep

    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path / "home"))
    spec = dict(default_sweep(fast=True), store=str(tmp_path / "s.sqlite"), source="tokens")
    app = SweepApp(spec=spec, scheduler="inprocess", canvas="agg")
    update = app.update

    def update_then_stop():   # Stop pressed as the first job's curve is drawn
        update()
        if app.run is not None and app.run.done >= 1:
            app.stop()

    app.update = update_then_stop
    app.run_button.click()
    assert app.wait(timeout=300)
    assert app.runner.outcome == "stopped" and app.last_error is None, app.last_error
    assert not app.run_button.disabled and app.stop_button.disabled
    assert app.status.value.count("stopped: 1/4 jobs") == 1 and "running" not in app.status.value
    assert app.progress.value == 1 and not app.closing


class _HangingRun:
    """A sweep whose cluster does not close: ``running`` until ``release`` is set."""

    def __init__(self):
        import threading

        self.release, self.stopped = threading.Event(), threading.Event()
        self.dashboard_link, self.done, self.total = None, 3, 14

    @property
    def running(self):
        return not self.release.is_set()

    @property
    def progress(self):
        return self.done, self.total

    def stop(self):
        self.stopped.set()

    def wait(self, timeout=None):
        self.release.wait(timeout)

    def curves(self):
        return {}


def test_sweep_stop_does_not_wait_for_a_slow_cluster(tmp_path, monkeypatch):
    """After Stop the page turns idle within STOP_GRACE_S even when the sweep's cluster has not
    closed; a job update that lands after Stop does not bring back "running"."""
    import accesslib.experiments.sweep as sweep
    from accesslib.apps.nb03_predicted import SweepApp, default_sweep

    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path / "home"))
    fake = _HangingRun()
    monkeypatch.setattr(sweep, "start_sweep", lambda spec, **kw: fake)
    app = SweepApp(spec=dict(default_sweep(fast=True), store=str(tmp_path / "s.sqlite")),
                   scheduler="inprocess", canvas="agg")
    app.STOP_GRACE_S = 0.2
    app.run_button.click()
    while app.run is not fake:
        fake.release.wait(0.01)
    app.update()
    assert "running: 3/14 jobs" in app.status.value and app.run_button.disabled
    assert app.stop()
    assert fake.stopped.is_set() and "stopping" in app.status.value
    app.update()                                     # a job that ends after Stop
    assert "stopping" in app.status.value and "running:" not in app.status.value
    assert app.wait(timeout=60)
    assert fake.running                              # the sweep itself has not ended
    assert app.closing and app.runner.outcome == "stopped"
    assert not app.run_button.disabled and app.stop_button.disabled
    assert "stopped: 3/14 jobs" in app.status.value and "still closing" in app.status.value
    app.update()
    assert "running:" not in app.status.value
    fake.release.set()


def test_spread_positions_keeps_order_and_gap():
    """The end labels of notebook 03: moved apart as little as needed, order kept, inside [0, 1]."""
    from accesslib.plots.style import spread_positions

    out = spread_positions([0.95, 0.5, 0.97, float("nan"), 0.2], 0.1, low=0.0, high=1.0)
    assert np.isnan(out[3]) and out[4] == 0.2 and out[1] == 0.5       # far from the others: unmoved
    assert out[2] == 1.0 and out[0] == pytest.approx(0.9)             # pushed down from the top, order kept
    assert list(spread_positions([0.5, 0.52], 0.1, high=0.9)) == pytest.approx([0.5, 0.6])
