"""Notebook 05's geometry apps, headless: the 2-D toy, a model's census, the stored measurement."""
import math

import numpy as np
import pytest

from accesslib.theory.stats import (
    describe_convergence,
)


def test_geometry_app_updates_in_place():
    from accesslib.apps.nb05_geometry import GeometryApp
    app = GeometryApp(canvas="agg", res=101)
    img = app.art["argmax"]["img"]
    before = img.get_array().copy()
    assert app.values["disagree"] > 0.05            # unequal norms: the two rules differ
    app.token.value = 1
    share1, vor1 = app.shares["argmax"][1], app.shares["voronoi"][1]
    app.b.value = 0.8                                # a bias enlarges token 1's argmax cell only
    assert app.art["argmax"]["img"] is img and not np.array_equal(img.get_array(), before)
    assert app.shares["argmax"][1] > share1 + 0.1 and app.shares["voronoi"][1] == vor1
    app.equalise()                                   # equal norms, no bias: identical cells
    assert app.values["disagree"] < 0.01 and app.last_error is None
    app.set_row(0, 0.0, 0.0)                         # zero norm: equalise must refuse, no traceback
    app.guard(app.equalise)
    assert "norm 0" in app.last_error


def test_model_geometry_app_runs_on_tiny_model():
    from accesslib.apps.nb05_geometry import TINY_RANDOM, ModelGeometryApp
    app = ModelGeometryApp(canvas="agg", model=TINY_RANDOM)
    assert app.report is None                        # nothing runs on construction
    app.per_length.value, app.n_cells.value = 4, 2000
    app.start(wait=True)
    assert app.last_error is None and app.report is not None
    heights = {k: b.get_height() for k, b in zip(app.bars["kinds"], app.bars["bars"])}
    assert heights["ball"] == pytest.approx(app.report.slopes["ball"].C)
    assert heights["box"] <= heights["ball"] and "ellipsoid" not in app.report.slopes  # N <= d
    # the readout gives both s_conv rules, the never-hit count and the measured effective eps
    rep, txt = app.report, app.readout.value
    assert f"<b>{rep.sconv.s_conv:.2f}</b>" in txt and f"{rep.sconv_drop.s_conv:.2f}" in txt
    assert rep.sconv.zero_hit == "bound" and rep.sconv_drop.zero_hit == "drop"
    assert f"{rep.cells.zero_hit:,} of 512 tokens never hit in N = 2,000" in txt
    assert app.eff is not None and len(app.eff.rel) == 8
    assert f"median <b>{app.eff.describe(app.eff.quantiles()[1])}</b>" in txt
    # 2,000 samples over 512 tokens: not sample-limited unless most tokens are missed
    assert ("never hit: the cell bound is set by N" in txt) == rep.sconv.sample_limited
    assert "each about twice the last" not in txt   # 2,000 samples: one chunk, no convergence check
    assert list(app.conv["bound"].get_xdata()) == [2000]
    assert "raise N" in app.conv["text"].get_text()
    # the last bar: box + cells at the measured ε (around a random memory vector in a live run)
    from accesslib.theory import refined
    q50 = float(app.eff.quantiles()[1])
    me = app.view["measured"]
    if math.isfinite(q50):
        C = refined.measured_eps_slopes(rep.d, rep.vocab_size, q50, rep.stats.r_inf, widths=rep.stats.widths,
                                        s_conv=rep.sconv.s_conv)["box+cells"].C
        assert me["ok"] and heights.get("measured ε") is not None
        assert app.bars["bars"][app.bars["kinds"].index("measured ε")].get_height() == pytest.approx(C)
        assert "around a random memory vector" in txt and me["ratio"] is None   # no bundle: no measured a
    else:
        assert not me["ok"] and "did not change for most directions" in txt


def test_model_geometry_app_shows_the_stored_measurement():
    """The default model's bundle carries its geometry: the app draws it without computing,
    and the histogram and bars are the stored counts and slopes."""
    from accesslib.apps.nb05_geometry import TINY_RANDOM, ModelGeometryApp, shipped_geometry
    from accesslib.models import embedded
    from accesslib.results import bundles
    rec = shipped_geometry(embedded.DEFAULT)
    assert rec is not None and shipped_geometry(TINY_RANDOM) is None
    app = ModelGeometryApp(canvas="agg", model=TINY_RANDOM)
    assert app.shipped_btn.disabled                  # no bundle for the random model
    app.model.value = embedded.DEFAULT
    assert not app.shipped_btn.disabled
    app.shipped_btn.click()
    assert app.last_error is None and app.report is None and app.view is not None
    heights = {k: b.get_height() for k, b in zip(app.bars["kinds"], app.bars["bars"])}
    for k, C in rec["slopes"].items():
        assert heights[k] == pytest.approx(C)
    V = bundles.load("cram", embedded.DEFAULT)["facts"]["vocab_size"]
    hit = len(rec["cell_hits"]["tokens"])
    assert sum(b.get_height() for b in app.hist["bars"]) == hit
    assert app.view["shares"].sum() == pytest.approx(1.0)
    txt = app.readout.value
    assert f"{V - hit:,} of {V:,} tokens never hit in N = {rec['cells_n_samples']:,}" in txt
    assert f"<b>{rec['s_conv']:.2f}</b>" in txt and f"{rec['s_conv_drop']:.2f}" in txt
    assert f"r<sub>∞</sub> = {rec['r_inf']:.3g}" in txt and "(stored)" in txt
    assert "effective ε" in txt and rec["effective_eps"]["around"] in txt
    # and how s_conv moved on the first n of those N samples (stored with the record)
    conv = rec["s_conv_convergence"]
    assert conv[-1]["n"] == rec["cells_n_samples"] and conv[-1]["s_conv"] == pytest.approx(rec["s_conv"])
    assert " → ".join(f"{r['s_conv']:.2f}" for r in conv) in txt
    assert describe_convergence(conv) in txt
    # ... and drawn: both rules against n, with -ln|V| for reference
    assert list(app.conv["bound"].get_xdata()) == [r["n"] for r in conv]
    assert list(app.conv["bound"].get_ydata()) == pytest.approx([r["s_conv"] for r in conv])
    assert list(app.conv["drop"].get_ydata()) == pytest.approx([r["s_conv_drop"] for r in conv])
    assert app.conv["lnv"].get_ydata()[0] == pytest.approx(-math.log(V))
    assert app.conv["text"].get_text() == ""


def test_model_geometry_app_run_on_a_real_model_that_is_not_installed(tmp_path, monkeypatch):
    """A real model is offered for its stored measurement even when not installed; Run then
    says how to install it, and loads nothing."""
    from accesslib.apps.nb05_geometry import ModelGeometryApp
    from accesslib.models import gguf as realmodels
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))           # no cache
    monkeypatch.setattr(realmodels, "_installed", lambda dist: False)   # no packages
    assert realmodels.available() == []
    app = ModelGeometryApp(canvas="agg")
    assert "smollm2-135m" in app.model.options
    app.model.value = "smollm2-135m"
    app.start(wait=True)
    assert "smollm2-135m is not installed here" in app.last_error and "make real" in app.last_error
    assert app.report is None and not app.run_btn.disabled and app.stop_btn.disabled
    app.shipped_btn.click()
    assert app.last_error is None and app.view["name"] == "smollm2-135m"


def test_the_last_bar_is_the_bound_at_the_measured_eps(tmp_path, monkeypatch):
    """Stored view: the "measured ε" bar is box + cells at eps = median effective eps * r_inf
    (the bundle's numbers, by hand), its C/a in the folded readout; a bundle without an
    effective eps shows an empty bar and says why."""
    import copy

    from accesslib.apps.nb05_geometry import MEASURED_EPS, ModelGeometryApp
    from accesslib.models import embedded
    from accesslib.results import bundles
    b = bundles.load("cram", embedded.DEFAULT)
    geo = b["geometry"]
    rel = sorted(np.inf if x is None else x for x in geo["effective_eps"]["rel"])
    eps_rel = rel[math.ceil(len(rel) / 2) - 1]                       # the median threshold (inverted CDF)
    eps = eps_rel * geo["r_inf"]
    C = sum(math.log1p(w / eps) for w in geo["widths"]) / abs(geo["s_conv"])   # box count over |s_conv|
    app = ModelGeometryApp(canvas="agg")
    heights = {k: bar.get_height() for k, bar in zip(app.bars["kinds"], app.bars["bars"])}
    assert heights[MEASURED_EPS] == pytest.approx(C, rel=1e-12)
    assert heights[MEASURED_EPS] < heights["box+cells"]
    a = b["slope"]["slope"]
    folded = app.readout.value.split("<details>")[1]
    assert f"box+cells C = <b>{C:,.1f}</b>, <b>C/a = {C / a:.1f}×</b>" in folded
    assert f"ε = {eps_rel:.3g}·r<sub>∞</sub>" in folded and geo["effective_eps"]["around"] in folded
    rows = [r for r in app.data_rows() if r["panel"] == "slope at the measured ε"]
    assert rows[0]["bound"] == "box+cells" and rows[0]["drawn"] and rows[0]["C"] == pytest.approx(C)
    # without an effective eps: no bar, the reason in the readout
    out = tmp_path / "b"
    nob = copy.deepcopy(b)
    del nob["geometry"]["effective_eps"]
    bundles.save(nob, out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)
    app.show_shipped()
    heights = {k: bar.get_height() for k, bar in zip(app.bars["kinds"], app.bars["bars"])}
    assert heights[MEASURED_EPS] == 0 and heights["box+cells"] == pytest.approx(geo["slopes"]["box+cells"])
    assert "no bound at a measured ε" in app.readout.value and "holds no measured effective ε" in app.readout.value


def test_a_median_that_never_changed_the_output_gives_no_bound():
    from accesslib.apps.nb05_geometry import measured_eps_bound
    me = measured_eps_bound(32, 257, 7.0, [0.1, None, None], widths=[1.0] * 32, s_conv=-9.0)
    assert not me["ok"] and "did not change for most directions up to a relative move of 1" in me["reason"]
    me = measured_eps_bound(32, 257, 7.0, [0.1, 0.2, None], widths=[1.0] * 32, s_conv=-9.0, slope=2.0)
    assert me["ok"] and me["eps_rel"] == 0.2 and me["C_range"][0] is None      # the 90% threshold: inf
    assert me["C_range"][1] == pytest.approx(32 * math.log1p(1 / 0.7) / 9.0)     # box+cells at eps_rel 0.1
    assert me["ratio"] == pytest.approx(me["C"] / 2.0)
