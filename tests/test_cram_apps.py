"""Headless tests of the cramming apps (notebooks 02-04) and the results bundles."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accesslib._checks import parse_int_list  # noqa: E402
from accesslib.apps.nb02_cramming import CrammingApp  # noqa: E402
from accesslib.apps.nb03_predicted import PredictedApp  # noqa: E402
from accesslib.apps.nb04_slope import SlopeApp  # noqa: E402
from accesslib.apps.policy import public_policy  # noqa: E402
from accesslib.experiments import bundling  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.bundles import family_table, predicted_slopes  # noqa: E402
from accesslib.results.store import ResultsStore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_parse_int_list():
    """The apps' typed lists (m values, lengths) go through the one parser of accesslib._checks."""
    assert parse_int_list("4, 1;2 2", "m values") == [1, 2, 4]
    with pytest.raises(ValueError, match=re.escape(
            "m values must be whole numbers >= 1 separated by commas, e.g. '1, 2, 4'; got '1, two'")):
        parse_int_list("1, two", "m values")
    with pytest.raises(ValueError, match=re.escape(
            "lengths must be whole numbers >= 1 separated by commas, e.g. '1, 2, 4'; got '0, 3'")):
        parse_int_list("0, 3", "lengths")
    with pytest.raises(ValueError, match=re.escape(
            "m values must be whole numbers >= 1 separated by commas, e.g. '1, 2, 4'; got ' '")):
        parse_int_list(" ", "m values")


@pytest.fixture
def store(tmp_path):
    return ResultsStore(tmp_path / "r.sqlite")


def _app(store, **kw):
    app = CrammingApp(store=store, canvas="agg", fast=True, **kw)
    app.source.value = "tokens"   # random tokens: no two strings alike (each string is one store row)
    app.lengths.value = "2, 3"
    app.samples.value = 2
    app.max_steps.value = 40
    return app


def test_cramming_app_run_fills_store_table_and_curve(store):
    app = _app(store)
    assert app.curves == {}
    app.start()
    assert app.wait(timeout=300)
    assert app.last_error is None, app.last_error
    assert len(app.rows) == 4                        # 2 lengths x 2 strings
    assert store.count(model=embedded.DEFAULT) == 4
    assert set(app.curves) == {1} and app.curves[1]["lengths"] == [2, 3]
    assert sum(app.curves[1]["totals"]) == 4
    assert "greedy output" in app.table.value and app.table.value.count("<tr>") == 5
    assert app.loss_steps and all(v > 0 for v in app.loss_mean)
    # the plotted curve is the stored one
    line = app.art_curve["series"][1]["eb"].lines[0]
    assert list(line.get_xdata()) == [2, 3]
    # reopening (a new app on the same store) shows the earlier run without running anything
    again = _app(store)
    assert again.curves[1]["totals"] == app.curves[1]["totals"]
    assert "4 strings of these settings" in again.status.value
    # a Stop that reaches the kernel after the run ended (the button's state is synced late)
    # changes nothing: the summary stays, and the next run is not told to stop
    summary = app.status.value
    app.stop()
    assert app.status.value == summary and "finished" in summary
    assert not app.stop_requested


def test_cramming_app_stop_keeps_finished(store):
    app = _app(store)
    app.lengths.value = "2, 3, 4, 5, 6, 7"
    app.samples.value = 3
    app.start()
    app.stop()
    assert app.wait(timeout=300)
    assert "stopped" in app.status.value
    assert store.count(model=embedded.DEFAULT) == len(app.rows) < 18


def test_public_mode_refuses_and_runs_nothing(store):
    pol = public_policy([embedded.DEFAULT])
    app = _app(store, policy=pol)
    app.model.value = embedded.DEFAULT
    app.samples.value = 17
    app.run_button.click()
    assert "samples = 17 is over this server's cap of 16" in app.last_error
    assert app.runner.thread is None and store.count() == 0
    app.samples.value = 2
    app.lengths.value = "2, 100"
    app.run_button.click()
    assert "length = 100 is over" in app.last_error and store.count() == 0
    # the model list offers only allow-listed models
    assert list(app.model.options) == [embedded.DEFAULT]
    with pytest.raises(ValueError, match="not available on this public server"):
        pol.check_model("EleutherAI/pythia-160m")


def test_bad_m_shows_message(store):
    app = _app(store)
    app.ms.value = "1, x"
    app.run_button.click()
    assert app.last_error == ("m values must be whole numbers >= 1 separated by commas, "
                              "e.g. '1, 2, 4'; got '1, x'")
    assert app.runner.thread is None


# --- bundles: regenerate a small subset in fast mode and compare with the shipped shape --------
@pytest.fixture(scope="module")
def fast_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundles")
    store = out / "store.sqlite"
    cmd = [sys.executable, str(ROOT / "scripts" / "make_bundles.py"), "--fast", "--models", embedded.DEFAULT,
           "--out", str(out), "--store", str(store)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return bundles.load("cram", embedded.DEFAULT, out)


def test_regenerated_bundle_has_recorded_shape(fast_bundle):
    b = fast_bundle
    assert b["model"] == embedded.DEFAULT and b["kind"] == "cram"
    assert [c["m"] for c in b["curves"]] == [1, 2]
    for c in b["curves"]:
        assert len(c["lengths"]) == len(c["successes"]) == len(c["totals"]) >= 1
        assert all(0 <= s <= t for s, t in zip(c["successes"], c["totals"]))
    assert b["settings"]["max_steps"] == 40 and b["samples"] == 2
    assert b["hardware"]["cores"] >= 1 and b["wall_time"] > 0 and b["created"]
    geo = b["geometry"]
    assert len(geo["widths"]) == b["facts"]["d"] and geo["r_inf"] > 0
    shipped = bundles.available("cram")
    if embedded.DEFAULT in shipped:   # the shipped bundle has the same keys
        ref = bundles.load("cram", embedded.DEFAULT)
        assert set(ref) == set(b)
        assert set(ref["curves"][0]) == set(b["curves"][0])
        # "command" is recorded only when the geometry is re-measured on its own (--geometry-only)
        assert set(ref["geometry"]) <= set(b["geometry"]) | {"semi_axes", "command"}
        assert set(b["geometry"]) <= set(ref["geometry"]) | {"semi_axes"}


def test_make_bundles_grid_per_m_geometry_file_and_geometry_only(fast_bundle, tmp_path):
    geo = dict(fast_bundle["geometry"], note="measured before")
    gfile = tmp_path / "g.json"
    gfile.write_text(json.dumps(geo))
    script = str(ROOT / "scripts" / "make_bundles.py")
    cmd = [sys.executable, script, "--models", embedded.DEFAULT, "--m", "1", "2", "--samples", "2",
           "--source", "tokens", "--search", "grid", "--lengths", "1:2,3", "2:4", "--max-steps", "20",
           "--patience", "10", "--bos", "--geometry-file", str(gfile), "--out", str(tmp_path),
           "--store", str(tmp_path / "s.sqlite")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b = bundles.load("cram", embedded.DEFAULT, tmp_path)
    assert [c["lengths"] for c in b["curves"]] == [[2, 3], [4]]          # the grid, per m
    assert [sum(c["totals"]) for c in b["curves"]] == [4, 2]
    assert b["source"] == "tokens" and b["settings"]["patience"] == 10
    from accesslib.engine.cramming import default_prefix
    from accesslib.models.loading import load_model
    assert b["settings"]["prefix_ids"] == (default_prefix(load_model(embedded.DEFAULT)) or None)
    assert b["geometry"] == geo                                          # taken, not measured
    # --geometry-only keeps the curves and replaces the geometry with a fresh measurement
    proc = subprocess.run([sys.executable, script, "--geometry-only", "--models", embedded.DEFAULT,
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b2 = bundles.load("cram", embedded.DEFAULT, tmp_path)
    assert b2["curves"] == b["curves"] and "note" not in b2["geometry"]
    g = b2["geometry"]
    assert g["s_conv_zero_hit"] == "bound" and g["s_conv"] < 0 and "--geometry-only" in g["command"]
    assert sum(g["cell_hits"]["counts"]) == g["cells_n_samples"]
    assert len(g["effective_eps"]["rel"]) == 16
    # a record from a file, with the effective eps re-measured the way the strings were crammed
    proc = subprocess.run([sys.executable, script, "--geometry-only", "--models", embedded.DEFAULT,
                           "--geometry-file", str(gfile), "--effective-eps", "2", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    g3 = bundles.load("cram", embedded.DEFAULT, tmp_path)["geometry"]
    assert {k: v for k, v in g3.items() if k != "effective_eps"} == \
        {k: v for k, v in geo.items() if k != "effective_eps"}
    assert len(g3["effective_eps"]["rel"]) == 2
    assert g3["effective_eps"]["prefix_ids"] == (b["settings"]["prefix_ids"] or [])
    # a record without an effective eps (the CLI with --effective-eps 0) keeps the bundle's
    gfile.write_text(json.dumps({k: v for k, v in geo.items() if k != "effective_eps"}))
    proc = subprocess.run([sys.executable, script, "--geometry-only", "--models", embedded.DEFAULT,
                           "--geometry-file", str(gfile), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    g4 = bundles.load("cram", embedded.DEFAULT, tmp_path)["geometry"]
    assert g4["effective_eps"] == g3["effective_eps"] and g4["s_conv"] == geo["s_conv"]
    bad = subprocess.run([sys.executable, script, "--models", embedded.DEFAULT, "--search", "grid",
                          "--lengths", "1:2", "--m", "1", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "missing m = [2]" in bad.stderr


def test_predicted_slopes_match_bounds(fast_bundle):
    from accesslib.theory import bounds, refined

    b = fast_bundle
    d, V = b["facts"]["d"], b["facts"]["vocab_size"]
    s = predicted_slopes(b, 0.01, 2.0)
    assert s["ball"] == pytest.approx(d * math.log(1 + 400) / math.log(V))
    assert s["box"] == pytest.approx(refined.box_slope(b["geometry"]["widths"], V, 0.01).C)
    # the box lies inside the ball of radius r_inf: never a larger count at r = r_inf
    r = b["geometry"]["r_inf"]
    eps = bounds.eps_for_dtype("paper", r)
    s2 = predicted_slopes(b, eps, r)
    assert s2["box"] <= s2["ball"] + 1e-9
    assert s2["cone"] <= s2["ball"] + 1e-9


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


def test_slope_app_family_table(tmp_path, monkeypatch):
    """Two synthetic bundles (made by hand here, for the maths only): C/a and the groups."""
    out = tmp_path / "b"
    base = dict(kind="cram", version=1, source="natural", samples=1, search="grid", seed=0, protocol="fast",
                settings={}, curves=[], examples=[], created="x", hardware={}, wall_time=1.0, command="")
    for name, d, a in [("fam-a", 32, 4.0), ("fam-b", 64, 10.0)]:
        bundles.save(dict(base, model=name, facts=dict(d=d, vocab_size=1024, dtype="float32", family="gpt_neox",
                                                       max_context=128),
                          slope=dict(slope=a, intercept=0.0, r2=0.99, slope_stderr=0.1, n_points=4),
                          geometry=dict(r_inf=3.0)), out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)
    rows = family_table(["fam-a", "fam-b"])
    C32 = 32 * math.log(4097) / math.log(1024)
    assert rows[0]["C"] == pytest.approx(C32) and rows[0]["ratio"] == pytest.approx(C32 / 4.0)
    assert rows[1]["ratio"] == pytest.approx(2 * C32 / 10.0)
    monkeypatch.setattr(embedded, "names", lambda: ["fam-a", "fam-b"])
    app = SlopeApp(canvas="agg")
    assert app.last_error is None, app.last_error
    assert app.values["ratio_spread"] == pytest.approx((C32 / 4.0) / (2 * C32 / 10.0))
    before = app._art[0]["C"].get_ydata().copy()
    app.dtype.value = "float32"
    assert app._art[0]["C"].get_ydata()[0] == pytest.approx(
        before[0] * math.log1p(2 * 2.0**24) / math.log(4097))


def test_sweep_app_runs_in_process_and_fills_the_curve(tmp_path):
    from accesslib.apps.nb03_predicted import SweepApp, default_sweep

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


def test_effective_eps_around_a_crammed_memory():
    from accesslib.engine.decoding import greedy
    from accesslib.models.loading import load_model
    lm = load_model(embedded.DEFAULT)
    mem, ids = bundling.crammed_memory(lm, 3, source="natural")
    assert mem.shape == (1, lm.facts.d) and len(ids) == 3
    # the memory reproduces its 3-token target greedily, i.e. it is a real crammed memory
    assert greedy(lm, mem[None], 3, cache=False)[0].tolist() == ids
    rec = bundling.measure_geometry(lm, embedded.DEFAULT, progress=False, effective_eps=4, memory_n=3,
                                   memory_source="natural", lengths=[4, 16], per_length=8, n_cells=2000)
    eff = rec["effective_eps"]
    assert eff["n_tokens"] == 3 and len(eff["rel"]) == 4
    assert eff["around"] == "a memory crammed with 3 tokens (natural)"
    rec0 = bundling.measure_geometry(lm, embedded.DEFAULT, progress=False, effective_eps=2,
                                    lengths=[4], per_length=8, n_cells=1000)
    assert rec0["effective_eps"]["around"].startswith("a random memory vector")


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
