"""Notebook 03's apps, headless: predicted lines against the measured n50, the Dask sweep, every shipped bundle."""
import html
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


# ---------------------------------------------------------------------------------------------
# the step-budget label and the bound at the measured effective ε
# ---------------------------------------------------------------------------------------------

def _hand_measured_eps(b):
    """The counting bound at the measured ε, by hand from the bundle's numbers: eps_rel = the
    median threshold (inverted-CDF quantile, never-changed directions as inf), eps = eps_rel * r_inf,
    C_box = sum ln(1 + w_i/eps) / ln|V|, C_box+cells = C_box ln|V| / |s_conv|."""
    geo, f = b["geometry"], b["facts"]
    rel = np.array([np.inf if x is None else x for x in geo["effective_eps"]["rel"]])
    eps_rel = float(np.sort(rel)[math.ceil(0.5 * rel.size) - 1])
    eps = eps_rel * geo["r_inf"]
    lnV = math.log(f["vocab_size"])
    ball = f["d"] * math.log(1 + 2 / eps_rel) / lnV
    box = sum(math.log(1 + w / eps) for w in geo["widths"]) / lnV
    return dict(eps_rel=eps_rel, eps=eps, ball=ball, box=box, cells=ball * lnV / abs(geo["s_conv"]),
                box_cells=box * lnV / abs(geo["s_conv"]))


def _shipped(tmp_path, monkeypatch, *edited):
    """The shipped bundles copied to a folder of their own, ``edited`` (modified copies) in place
    of theirs; bundles.bundle_dir points there."""
    out = tmp_path / "bundles"
    for name in bundles.available("cram"):
        bundles.save(bundles.load("cram", name), out)
    for b in edited:
        bundles.save(b, out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)


def test_measured_eps_line_is_the_counting_bound_at_the_measured_eps():
    """One more line: box + cells at eps = median effective eps * r_inf, the bundle's own numbers;
    labelled with its C, its C/a in the readout, fixed when the sliders move."""
    name = embedded.DEFAULT
    b = bundles.load("cram", name)
    hand = _hand_measured_eps(b)
    assert hand["eps_rel"] == pytest.approx(b["geometry"]["effective_eps"]["median"])   # the stored median
    app = PredictedApp(canvas="agg", model=name, published=False)
    me = app.values["measured_eps"]
    assert me["ok"] and me["line"] == "box+cells" and me["eps_rel"] == pytest.approx(hand["eps_rel"])
    assert me["eps"] == pytest.approx(hand["eps"])
    for k, key in (("ball", "ball"), ("box", "box"), ("cells", "cells"), ("box+cells", "box_cells")):
        assert me["slopes"][k] == pytest.approx(hand[key], rel=1e-12), k
    a = b["slope"]["slope"]
    assert me["ratio"] == pytest.approx(hand["box_cells"] / a)
    line = app.art["bounds"]["box+cells, measured ε"]
    assert list(line.get_ydata()) == pytest.approx([hand["box_cells"] * x for x in line.get_xdata()])
    assert app.art["labels"]["box+cells, measured ε"].get_text() == f"box+cells, measured ε  C = {hand['box_cells']:,.1f}"
    txt = app.readout.value
    assert f"box+cells C = <b>{hand['box_cells']:,.1f}</b>, <b>C/a = {hand['box_cells'] / a:.1f}×</b>" in txt
    assert f"ball {hand['ball']:,.1f} ({hand['ball'] / a:.1f}×)" in txt and "does not follow the sliders" in txt
    rows = [r for r in app.data_rows() if r["panel"] == "predicted slope at the measured ε"]
    assert {r["bound"]: r["C"] for r in rows}["box+cells"] == pytest.approx(hand["box_cells"])
    assert [r["bound"] for r in rows if r["drawn"]] == ["box+cells"]
    # the sliders move the dtype's lines, not this one
    y = line.get_ydata().copy()
    app.eps_rel.value, app.r.value = 2.0**-8, 2 * app.r.value
    assert np.array_equal(app.art["bounds"]["box+cells, measured ε"].get_ydata(), y)


def test_a_bundle_without_a_measured_eps_says_so_and_draws_no_line(tmp_path, monkeypatch):
    name = embedded.DEFAULT
    b = bundles.load("cram", name)
    del b["geometry"]["effective_eps"]
    _shipped(tmp_path, monkeypatch, b)
    app = PredictedApp(canvas="agg", model="tiny-d64-v257", published=False)
    assert "box+cells, measured ε" in app.art["bounds"]      # a model with one: drawn
    app.model.value = name                                    # one without: the line goes, the page says why
    assert app.last_error is None, app.last_error
    assert not any(k.endswith("measured ε") for k in app.art["bounds"]) and not app.values["measured_eps"]["ok"]
    assert "no bound at a measured ε" in app.readout.value and "holds no measured effective ε" in app.readout.value
    assert not [r for r in app.data_rows() if r["panel"] == "predicted slope at the measured ε"]


def _moved(b):
    """A modified copy of a bundle whose budget check moved at m = 4 (n50 -> 14.5)."""
    import copy

    b = copy.deepcopy(b)
    r = b["budget_check"]["ms"]["4"]
    r.update(n50_3x=14.5, moved=True)
    return b


def _unchecked(b):
    """A modified copy of a bundle without any budget check."""
    import copy

    return {k: copy.deepcopy(v) for k, v in b.items() if k not in ("budget_check", "budget_checks", "budget_ladder")}


def test_the_budget_label_with_and_without_a_check(tmp_path, monkeypatch):
    """converged (the default model's check), not checked (no check), budget-limited (a check
    that moved: called so even where the protocol raised no suspicion), each with its words."""
    name = embedded.DEFAULT
    b = bundles.load("cram", name)
    assert b.get("budget_check")
    app = PredictedApp(canvas="agg", model=name, published=False)
    label, text = bundles.budget_status(b)
    cav = app.values["caveats"]
    assert (label, cav["budget"], cav["budget_text"]) == ("converged", "converged", text)
    assert not cav["budget_limited"] and not cav["budget_suspect"]
    txt = app.readout.value
    assert "step budget ×3: <b>converged</b>" in txt and html.escape(text) in txt and "budget-limited" not in txt
    assert [r["budget"] for r in app.data_rows() if r["panel"] == "measured slope"] == ["converged"]
    # the same bundle without its check, and with a check that moved
    _shipped(tmp_path, monkeypatch, _unchecked(b))
    app = PredictedApp(canvas="agg", model=name, published=False)
    assert app.values["caveats"]["budget"] == "not checked" and not app.values["caveats"]["budget_limited"]
    assert "step budget ×3: <b>not checked</b>" in app.readout.value and "--add-budget-check" in app.readout.value
    _shipped(tmp_path, monkeypatch, _moved(b))
    app = PredictedApp(canvas="agg", model=name, published=False)
    cav = app.values["caveats"]
    assert cav["budget"] == "budget-limited" and cav["budget_limited"] and not cav["budget_suspect"]
    txt = app.readout.value
    n50 = b["budget_check"]["ms"]["4"]["n50"]
    assert "step budget ×3: <b>budget-limited</b>" in txt and f"{n50:.1f} with 1000 steps, 14.5 with 3000" in txt
    assert "<b>budget-limited</b>: its n50, a and C/a depend on the step budget" in txt


def test_the_shipped_smollm2_bundle_shows_its_budget_ladder():
    """SmolLM2-135M's n50 at m = 1 by step budget (its budget ladder) is printed with its caveats,
    each budget's n50 as the bundle records it."""
    b = bundles.load("cram", "smollm2-135m")
    lad = b["budget_ladder"]
    assert [r["max_steps"] for r in lad["rungs"]][:3] == [300, 500, 1500] and lad["rungs"][0]["shipped"]
    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    txt = app.readout.value
    assert html.escape(bundles.ladder_text(b)) in txt
    for r in lad["rungs"]:
        assert f"{bundles.rung_budget(r, lad['rungs'])} {r['n50']:.1f} ± {r['stderr']:.1f}" in txt
    # and drawn: the other budgets' n50 as hollow markers right of m = 1, each named, in the legend
    others = [r for r in lad["rungs"] if not r["shipped"]]
    xs, ys = app.art["ladder"].lines[0].get_data()
    assert list(ys) == pytest.approx([r["n50"] for r in others]) and all(1 < x < 1.5 for x in xs)
    assert list(xs) == sorted(xs)
    assert [t.get_text() for t in app.art["ladder_texts"]] == [bundles.rung_budget(r, lad["rungs"]) for r in others]
    assert app.art["ladder_texts"][0].get_text() == "500 steps, patience 100"   # patience not scaled with steps
    legend = [t.get_text() for t in app.art["ax"].get_legend().get_texts()]
    assert "n50 at other step budgets" in legend
    rows = [r for r in app.data_rows() if r["panel"] == "n50 by step budget"]
    assert [(r["max_steps"], r["shipped"]) for r in rows] == [(r["max_steps"], bool(r["shipped"])) for r in lad["rungs"]]
    assert rows[1]["n50"] == pytest.approx(others[0]["n50"]) and rows[0]["moved"] is lad["rungs"][0]["moved"]
    app.model.value = embedded.DEFAULT     # no ladder: nothing drawn, no legend entry
    assert len(app.art["ladder"].lines[0].get_xdata()) == 0 and app.art["ladder_texts"] == []
    assert "n50 at other step budgets" not in [t.get_text() for t in app.art["ax"].get_legend().get_texts()]
    assert not [r for r in app.data_rows() if r["panel"] == "n50 by step budget"]


def test_the_shipped_smollm2_bundle_shows_its_remeasurement_under_the_published_protocol():
    """SmolLM2-135M's shipped bundle keeps its re-measurement under [A]'s protocol with [A]'s
    words (the committed run bundle, nothing typed): the page says it with its budget label and
    draws its n50 at every rung of its ladder as orange squares left of m = 1, each named."""
    import json

    from accesslib.apps.nb03_predicted import remeasured_points

    b = bundles.load("cram", "smollm2-135m")
    rec = next(r for r in b["remeasured"] if r["origin"].endswith("/smol-glove-9k"))
    for other in b["remeasured"]:       # each record is its committed run bundle, nothing typed
        run = json.loads((ROOT / other["origin"] / "cram-smollm2-135m.json").read_text())
        run["slope"] = bundles.with_propagated_stderr(run.get("slope"), run["curves"])   # (what the record keeps)
        assert {k: other[k] for k in bundles.REMEASURE_KEYS if k in run} == {
            k: run[k] for k in bundles.REMEASURE_KEYS if k in run}
    run = json.loads((ROOT / rec["origin"] / "cram-smollm2-135m.json").read_text())
    run["slope"] = bundles.with_propagated_stderr(run.get("slope"), run["curves"])
    assert {k: rec[k] for k in bundles.REMEASURE_KEYS if k in run} == {k: run[k] for k in bundles.REMEASURE_KEYS
                                                                        if k in run}
    assert (rec["source"], rec["protocol"], rec["settings"]["max_steps"]) == ("glove100k", "paper", 9000)
    rungs = sorted(rec["budget_ladder"]["rungs"], key=lambda r: r["max_steps"])
    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    txt = app.readout.value
    assert "<b>Re-measured</b> under [A]&#x27;s protocol with random-word targets from [A]&#x27;s own list" in txt
    assert html.escape(bundles.ladder_text(rec, own="the run's")) in txt
    assert f"Step budget: <b>{bundles.budget_status(rec)[0]}</b>" in txt and "(the run&#x27;s)" in txt
    xs, ys = app.art["remeasured"].lines[0].get_data()
    at_1 = [i for i, x in enumerate(xs) if 0.5 <= x < 1]             # m = 1's squares, left of m = 1
    texts = [app.art["remeasured_texts"][i].get_text() for i in at_1]
    ys = [ys[i] for i in at_1]
    assert ys[:3] == pytest.approx([r["n50"] for r in rungs])
    assert texts[:3] == [
        f"[A]'s words, {r['max_steps']:,} / {r['patience']:,}" for r in rungs]
    # and random tokens under [A]'s protocol, two runs taken together: with patience 500, 9000 steps
    # crammed nothing 3000 had not; with patience 1500 they did. The rungs both runs read (1000 / 500,
    # 3000 / 500) are drawn once.
    tok = sorted((r for r in b["remeasured"] if r["source"] == "tokens" and not r.get("read_from")),
                 key=lambda r: r["settings"]["patience"])
    assert [(r["protocol"], r["settings"]["max_steps"], r["settings"]["patience"]) for r in tok] == [
        ("paper", 9000, 500), ("paper", 9000, 1500)]
    assert [(round(y, 1), t) for y, t in zip(ys[3:], texts[3:])] == [
        (10.5, "random tokens, 1,000 / 500"), (12.8, "random tokens, 3,000 / 500 = 9,000 / 500"),
        (15.6, "random tokens, 9,000 / 1,500")]
    assert txt.count("uniform random token ids") >= 2 and "Step budget: <b>inconclusive</b>" in txt
    assert "Step budget: <b>budget-limited</b>" in txt
    assert "uniform random token ids" in txt and "Step budget: <b>inconclusive</b>" in txt
    assert app.remeasured_points == remeasured_points(b)
    assert "n50 re-measured by another run" in [t.get_text() for t in
                                                               app.art["ax"].get_legend().get_texts()]
    rows = [r for r in app.data_rows() if r["panel"] == "n50 re-measured"]
    assert [(r["m"], r["label"]) for r in rows] == [(p[0], p[3]) for p in app.remeasured_points]
    assert [r["label"] for r in rows] == [t.get_text() for t in app.art["remeasured_texts"]]
    app.model.value = embedded.DEFAULT     # none: nothing drawn, no legend entry, no line
    assert len(app.art["remeasured"].lines[0].get_xdata()) == 0 and app.art["remeasured_texts"] == []
    assert "Re-measured" not in app.readout.value



def test_the_remeasured_choice_draws_one_targets_runs_alone():
    """The "re-measured" menu: all of SmolLM2's re-measurements, one targets' runs alone (their squares,
    labels and dashed slopes, nothing of the others'), or none; hidden for a model without any, and a
    choice that is not one of the bundle's is refused by name."""
    from accesslib.apps.nb03_predicted import (
        SHORT_TARGETS,
        remeasured_choices,
        remeasured_fits,
        remeasured_only,
    )

    b = bundles.load("cram", "smollm2-135m")
    sources = list(dict.fromkeys(r["source"] for r in b["remeasured"]))
    assert sources == ["glove100k", "tokens"]
    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    assert app.remeasured_shown.options == (("all", "all"), ("[A]'s words only", "glove100k"),
                                            ("random tokens only", "tokens"), ("none", "none"))
    assert app.remeasured_shown.layout.display is None and app.remeasured_shown.value == "all"
    every = list(app.remeasured_points)
    for source in sources:
        app.remeasured_shown.value = source
        short = SHORT_TARGETS[source]
        mine = [p for p in every if p[3].startswith(short + ",")]
        assert mine and app.remeasured_points == mine                      # the same points, the others gone
        assert [t.get_text() for t in app.art["remeasured_texts"]] == [p[3] for p in mine]
        assert len(app.art["remeasured"].lines[0].get_xdata()) == len(mine)
        fits = [f for f in remeasured_fits(b) if f[4] == source]
        assert fits and app.remeasured_fits == fits and len(app.art["remeasured_fits"]) == len(fits)
        rows = [r for r in app.data_rows() if r["panel"] == "n50 re-measured"]
        assert [r["label"] for r in rows] == [p[3] for p in mine]         # the data download follows
    assert len(every) == sum(len([p for p in every if p[3].startswith(SHORT_TARGETS[s] + ",")]) for s in sources)
    app.remeasured_shown.value = "none"
    assert app.remeasured_points == [] and app.art["remeasured_texts"] == [] and app.art["remeasured_fits"] == []
    assert "Re-measured" in app.readout.value                             # the page still says them all
    app.remeasured_shown.value = "all"
    assert app.remeasured_points == every and len(app.remeasured_fits) == len(remeasured_fits(b))
    app.model.value = embedded.DEFAULT
    assert app.remeasured_shown.options == (("all", "all"), ("none", "none"))
    assert app.remeasured_shown.layout.display == "none"
    assert remeasured_choices(bundles.load("cram", embedded.DEFAULT)) == [("all", "all"), ("none", "none")]
    assert remeasured_only(b, "all") is b and remeasured_only(b, "none")["remeasured"] == [] and b["remeasured"]
    with pytest.raises(ValueError, match="which must be one of 'all', 'glove100k', 'tokens', 'none'; got 'words'"):
        remeasured_only(b, "words")
    import traitlets
    with pytest.raises(traitlets.TraitError):                              # the widget refuses it too
        app.remeasured_shown.value = "tokens"

def test_remeasured_points_and_records():
    """A re-measurement's n50 by m at its budget, its ladder's rungs at the ladder's m; the record
    of the same source and settings is replaced, another model's refused."""
    from accesslib.apps.nb03_predicted import remeasured_html, remeasured_points
    from accesslib.results.bundles import remeasure_record

    run = dict(kind="cram", model="x", source="tokens", protocol="paper", settings=dict(max_steps=900, patience=150),
               curves=[dict(m=1, n50=10.0, n50_stderr=1.0), dict(m=2, n50=None, n50_above=30),
                       dict(m=3, n50=31.0, n50_stderr=2.0)],
               budget_ladder=dict(m=1, rungs=[dict(max_steps=900, patience=150, n50=10.0, stderr=1.0, shipped=True),
                                             dict(max_steps=300, patience=50, n50=8.0, stderr=0.5)]),
               examples=[1, 2], geometry=dict(r_inf=3.0))
    b = dict(model="x")
    rec = bundles.add_remeasure(b, run, "runs/x")
    assert "examples" not in rec and "geometry" not in rec and rec["origin"] == "runs/x"
    assert remeasured_points(b) == [(1, 8.0, 0.5, "random tokens, 300 / 50"), (1, 10.0, 1.0, "random tokens, 900 / 150"),
                                    (2, 30.0, 0.0, "random tokens, 900 / 150: > 30"),
                                    (3, 31.0, 2.0, "random tokens, 900 / 150")]
    bundles.add_remeasure(b, dict(run, curves=run["curves"][:1]), "runs/x")       # the same run, gone on
    assert len(b["remeasured"]) == 1 and len(b["remeasured"][0]["curves"]) == 1
    bundles.add_remeasure(b, dict(run, source="glove100k"), "runs/y")
    assert [r["source"] for r in b["remeasured"]] == ["tokens", "glove100k"]
    bundles.add_remeasure(b, run, "runs/x")                                          # gone on again: keeps its place
    assert [r["source"] for r in b["remeasured"]] == ["tokens", "glove100k"] and len(b["remeasured"][0]["curves"]) == 3
    with pytest.raises(ValueError, match="re-measurement is of model 'y', the bundle of 'x'"):
        bundles.add_remeasure(b, dict(run, model="y"), "runs/z")
    with pytest.raises(ValueError, match="must be a cramming bundle with curves"):
        bundles.add_remeasure(b, dict(run, curves=[]), "runs/z")
    assert remeasured_points({}) == []
    # a larger budget that gave the same n50 (nothing more crammed) shares the marker of the smaller
    same = dict(run, budget_ladder=dict(m=1, rungs=[dict(max_steps=900, patience=50, n50=8.0, stderr=0.5, shipped=True),
                                                    dict(max_steps=300, patience=50, n50=8.0, stderr=0.5),
                                                    dict(max_steps=100, patience=50, n50=7.0, stderr=0.5)]))
    assert remeasured_points(dict(remeasured=[remeasure_record(same, "o")]))[:2] == [
        (1, 7.0, 0.5, "random tokens, 100 / 50"), (1, 8.0, 0.5, "random tokens, 300 / 50 = 900 / 50")]
    # two runs of the same strings with other budgets: one marker per budget, shared rungs drawn once,
    # in budget order whichever run came first; another seed keeps its own markers
    runs = [dict(run, settings=dict(max_steps=900, patience=p), curves=[dict(m=1, n50=n, n50_stderr=0.5)],
                 budget_ladder=dict(m=1, rungs=[dict(max_steps=300, patience=50, n50=8.0, stderr=0.5),
                                                dict(max_steps=900, patience=p, n50=n, stderr=0.5, shipped=True)]))
            for p, n in ((150, 11.0), (50, 8.0))]
    two = dict(remeasured=[remeasure_record(r, "o") for r in runs])
    assert remeasured_points(two) == [(1, 8.0, 0.5, "random tokens, 300 / 50 = 900 / 50"),
                                      (1, 11.0, 0.5, "random tokens, 900 / 150")]
    two["remeasured"][1]["seed"] = 1
    assert [p[3] for p in remeasured_points(two)] == ["random tokens, 300 / 50", "random tokens, 900 / 150",
                                                      "random tokens, 300 / 50 = 900 / 50"]
    # a record without a patience, a ladder without rungs, or one at an m with no curve
    bare = dict(curves=[dict(m=2, n50=12.0, n50_stderr=1.0)], settings=dict(max_steps=500), source="tokens",
                budget_ladder=dict(m=1, rungs=[dict(max_steps=500, patience=None, n50=6.0, stderr=0.5)]))
    assert remeasured_points(dict(remeasured=[bare])) == [(1, 6.0, 0.5, "random tokens, 500 steps"),
                                                          (2, 12.0, 1.0, "random tokens, 500 steps")]
    bare["budget_ladder"] = dict(m=2)
    assert remeasured_points(dict(remeasured=[bare])) == [(2, 12.0, 1.0, "random tokens, 500 steps")]
    assert "m = 2: 12.0 ± 1.0" in remeasured_html(dict(remeasured=[bare]))
    # a replicate with another seed is kept beside the first, not in its place
    bundles.add_remeasure(b, dict(run, source="glove100k", seed=1), "runs/w")
    assert [(r["source"], r.get("seed")) for r in b["remeasured"]] == [("tokens", None), ("glove100k", None),
                                                                       ("glove100k", 1)]


def test_the_readout_leads_with_the_remeasured_slopes_and_folds_the_rest():
    """The re-measurements in the readout: one line with each slope (targets, budget, m, C/a at the
    sliders' ε and r, budget label), every record's own line folded under it."""
    from accesslib.apps.nb03_predicted import PredictedApp, remeasured_html

    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    ball = app.values["slopes"]["ball"]
    recs = app.bundle["remeasured"]
    words, tokens = (next(r for r in recs if r.get("read_from") and r["source"] == s) for s in ("glove100k", "tokens"))
    tokens9, words9 = (next(r for r in recs if not r.get("read_from") and r["source"] == s
                            and r["settings"]["max_steps"] == 9000 and r["settings"]["patience"] == 1500)
                       for s in ("tokens", "glove100k"))
    assert recs.index(tokens9) < recs.index(words)    # the bundle's order; the readout's is by budget
    text = remeasured_html(app.bundle, ball)
    head, folded = text.split("<details><summary>each re-measurement</summary>")
    assert head == (
        f"<b>Re-measured</b> {len(recs)} times under other protocols, targets or step budgets (the orange squares, "
        "their slopes the dashed lines): "
        f"<b>a = {words['slope']['slope']:.2f} ± {words['slope']['slope_stderr']:.2f}</b> on [A]&#x27;s words at "
        f"3,000 / 500, m = 1..3 (C/a {ball / words['slope']['slope']:.1f}×, budget-limited) · "
        f"<b>a = {tokens['slope']['slope']:.2f} ± {tokens['slope']['slope_stderr']:.2f}</b> on random tokens at "
        f"3,000 / 500, m = 1..3 (C/a {ball / tokens['slope']['slope']:.1f}×, budget-limited) · "
        f"<b>a = {words9['slope']['slope']:.2f} ± {words9['slope']['slope_stderr']:.2f}</b> on [A]&#x27;s words at "
        f"9,000 / 1,500, m = 1..3 (C/a {ball / words9['slope']['slope']:.1f}×, budget-limited) · "
        f"<b>a = {tokens9['slope']['slope']:.2f} ± {tokens9['slope']['slope_stderr']:.2f}</b> on random tokens at "
        f"9,000 / 1,500, m = 1..3 (C/a {ball / tokens9['slope']['slope']:.1f}×, budget-limited)")
    assert folded.endswith("</details>") and folded.count("<b>Re-measured</b> under") == len(recs)
    assert text in app.readout.value
    # without slopes: the count and the squares; without any: nothing
    one = dict(remeasured=[r for r in recs if not r.get("slope")][:1])
    assert remeasured_html(one).startswith("<b>Re-measured</b> 1 time under other protocols, targets or step "
                                           "budgets (the orange squares).<details>")
    assert remeasured_html({}) == ""


def test_a_remeasured_slope_is_drawn_over_its_m_and_named_at_its_last_point():
    """A re-measurement with a slope over two m or more: a dashed line a·m + b over those m, its
    slope in the label of its square at the largest m, a legend entry and a data row; one without a
    slope (or with one m) draws none; another model takes the lines away."""
    import matplotlib.pyplot as plt

    from accesslib.apps.nb03_predicted import remeasured_fits, remeasured_points
    from accesslib.plots import bounds as plotting

    rec = dict(source="tokens", settings=dict(max_steps=300, patience=50), seed=0,
               curves=[dict(m=1, n50=10.0, n50_stderr=1.0), dict(m=2, n50=None), dict(m=3, n50=31.0, n50_stderr=2.0)],
               slope=dict(slope=10.5, intercept=-0.5, slope_stderr=1.12))
    bare = dict(rec, seed=1, slope=None)
    one = dict(rec, seed=2, curves=rec["curves"][:1])
    b = dict(remeasured=[rec, bare, one])
    assert remeasured_fits(b) == [(1, 3, 10.5, -0.5, "tokens", "300 / 50", "a = 10.5 ± 1.1")]
    assert [p[3] for p in remeasured_points(dict(remeasured=[rec]))] == [
        "random tokens, 300 / 50", "random tokens, 300 / 50: a = 10.5 ± 1.1"]
    # a replicate with another seed and no slope of its own keeps its labels bare
    assert [p[3] for p in remeasured_points(dict(remeasured=[rec, bare]))] == [
        "random tokens, 300 / 50", "random tokens, 300 / 50: a = 10.5 ± 1.1",
        "random tokens, 300 / 50", "random tokens, 300 / 50"]
    assert remeasured_fits(dict(remeasured=[dict(rec, slope=dict(slope=4.0, intercept=1.0))])) == [
        (1, 3, 4.0, 1.0, "tokens", "300 / 50", "a = 4.0")]
    fig, ax = plt.subplots()
    art = plotting.plot_model_bounds(ax)
    plotting.update_remeasured_fits(art, [f[:4] for f in remeasured_fits(b)])
    (line,) = art["remeasured_fits"]
    x, y = line.get_data()
    assert (x[0], x[-1], len(x)) == (1, 3, 20) and y == pytest.approx(10.5 * x - 0.5)
    assert "re-measured fit n50 = a·m + b" in [t.get_text() for t in ax.get_legend().get_texts()]
    plotting.update_remeasured_fits(art, [])
    assert art["remeasured_fits"] == [] and line not in ax.lines
    assert "re-measured fit n50 = a·m + b" not in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)
    # the shipped SmolLM2 bundle: [A]'s 3000 / 500 on words and on random tokens, both over m = 1..3, then
    # the runs' own 9000 / 1500 (the smaller budget first, whatever the bundle's order)
    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    assert [(f[0], f[1], f[4], f[5]) for f in app.remeasured_fits] == [(1, 3, "glove100k", "3,000 / 500"),
                                                                       (1, 3, "tokens", "3,000 / 500"),
                                                                       (1, 3, "glove100k", "9,000 / 1,500"),
                                                                       (1, 3, "tokens", "9,000 / 1,500")]
    assert len(app.art["remeasured_fits"]) == 4
    rows = [r for r in app.data_rows() if r["panel"] == "re-measured slope"]
    assert [(r["m_from"], r["m_to"], r["slope"], r["label"]) for r in rows] == [
        (f[0], f[1], f[2], f[6]) for f in app.remeasured_fits]
    app.model.value = embedded.DEFAULT
    assert app.art["remeasured_fits"] == [] and app.remeasured_fits == []


def test_remeasured_points_sit_beside_their_own_m():
    """Points of a re-measurement at two m: each m's points left of it, numbered at that m."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from accesslib import plots

    fig, ax = plt.subplots()
    art = plots.bounds.plot_model_bounds(ax)
    pts = [(1, 8.0, 0.5, "a"), (1, 10.0, 1.0, "b"), (1, 12.0, 1.0, "c"), (2, 20.0, 1.0, "d")]
    plots.bounds.update_ladder(art, [(1, 9.0, 0.5, "ladder")])
    plots.bounds.update_ladder(art, pts, "remeasured")
    xs = art["remeasured"].lines[0].get_xdata()
    step = plots.bounds.LADDER_STEP
    assert list(xs) == pytest.approx([1 - step, 1 - 2 * step, 1 - 3 * step, 2 - step])

    # labels as long as the real ones, which reach across markers at the same m
    long = [(m, y, e, f"random tokens, {label} {y:,.0f} / 500") for m, y, e, label in pts]

    def labels():   # (n50, marker's height, label's bottom edge; points above the axes' bottom), drawn extents
        height = ax.bbox.height * 72 / fig.dpi
        fig.canvas.draw()
        texts = art["ladder_texts"] + art["remeasured_texts"]
        rows = []
        for t, p in zip(texts, art["ladder_points"] + art["remeasured_points"]):
            at = ax.transAxes.inverted().transform(ax.transData.transform(t.xy))[1] * height
            rows.append((p[1], at, at + t.xyann[1]))
        return rows, [Text.get_window_extent(t) for t in texts]   # the labels' own boxes

    for log in (False, True):   # a linear axis up to the ball bound puts n50 8 to 12 at one height
        plots.bounds.update_model_bounds(art, {"ball": 40.0}, [1, 2], [9.0, 20.0], [0.5, 1.0], log=log)
        plots.bounds.update_ladder(art, [(1, 9.0, 0.5, "1,500 steps, patience 300")])
        plots.bounds.update_ladder(art, long, "remeasured")
        rows, boxes = labels()
        assert not [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])], log
        assert all(b >= at + 4 - 1e-6 for _, at, b in rows)        # none below its marker's lift
        at_one = sorted(r for r in rows[:4])                        # at m = 1: in the order of their n50
        assert [b for _, _, b in at_one] == sorted(b for _, _, b in at_one)
    # short labels that do not reach one another stay just above their markers
    plots.bounds.update_ladder(art, [(1, 9.0, 0.5, "x")])
    plots.bounds.update_ladder(art, pts, "remeasured")
    rows, _ = labels()
    assert all(b == pytest.approx(at + 4) for _, at, b in rows)
    # many at one m: drawn closer, all within LADDER_SPAN of m
    many = [(1, 5.0 + k, 0.1, str(k)) for k in range(6)]
    plots.bounds.update_ladder(art, many, "remeasured")
    xs = art["remeasured"].lines[0].get_xdata()
    assert min(xs) == pytest.approx(1 - plots.bounds.LADDER_SPAN) and len(set(xs)) == 6
    plt.close(fig)


def test_marker_labels_never_overlap_across_neighbouring_m():
    """A label is wider than the gap between two m: labels at m = 1 and m = 2 whose spans meet are
    placed together, so no two drawn labels overlap (on a linear axis up to the ball bound, where
    n50 near one another sit at one height, and on a log axis)."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from accesslib import plots

    fig, ax = plt.subplots(figsize=(6.4, 4.3))
    art = plots.bounds.plot_model_bounds(ax)
    for log in (False, True):
        plots.bounds.update_model_bounds(art, {"ball": 480.0}, [1, 2], [40.0, 60.0], [1.0, 1.0], log=log)
        plots.bounds.update_ladder(art, [(1, 40.0, 1.0, "500 steps, patience 100"),
                                         (1, 45.0, 1.0, "1,500 steps, patience 300")])
        plots.bounds.update_ladder(art, [(2, 41.0, 1.0, "random tokens, 3,000 / 500"),
                                         (2, 60.0, 1.0, "[A]'s words, 9,000 / 1,500")], "remeasured")
        fig.canvas.draw()
        # the labels' own boxes (an annotation's extent takes in its leader line too)
        boxes = [Text.get_window_extent(t) for t in art["ladder_texts"] + art["remeasured_texts"]]
        assert not [(i, j) for i in range(4) for j in range(i) if boxes[i].overlaps(boxes[j])], log
        # a label pushed off its marker has a leader line back to it; one just above its marker has none
        texts = art["ladder_texts"] + art["remeasured_texts"]
        pushed = [abs(t.xyann[1] - plots.bounds.LABEL_LIFT_PT) > plots.bounds.LABEL_GAP_PT for t in texts]
        assert [t.arrow_patch.get_visible() for t in texts] == pushed and any(pushed) and not all(pushed), log
    plt.close(fig)


def test_make_bundles_adds_a_remeasurement_to_the_shipped_bundle(tmp_path, load_script, capsys):
    mb = load_script("scripts/make_bundles.py")
    out, runs = tmp_path / "out", tmp_path / "run"
    b = bundles.load("cram", embedded.DEFAULT)
    bundles.save(b, out)
    run = dict(b, source="tokens", settings=dict(b["settings"], max_steps=999))
    bundles.save(run, runs)
    mb.main(["--add-remeasure", str(runs), "--out", str(out)])
    assert f"{embedded.DEFAULT}: re-measured under the {b['protocol']} protocol, tokens" in capsys.readouterr().out
    (rec,) = bundles.load("cram", embedded.DEFAULT, out)["remeasured"]
    assert rec["origin"] == str(runs.resolve()) and rec["settings"]["max_steps"] == 999
    table = mb.remeasured_table([embedded.DEFAULT], out)
    assert table[1] == "## Re-measured: other runs of a shipped model"
    label = bundles.budget_status(rec)[0]
    lad = rec.get("budget_ladder") or {}
    per_m = [len(lad["rungs"]) if c["m"] == lad.get("m") else 1 for c in rec["curves"]]   # a ladder: its rungs
    assert len(table) == 8 + sum(per_m) and table[8].startswith(
        f"| {embedded.DEFAULT} | tokens, {b['protocol']}, {b['samples']} strings/length | {rec['curves'][0]['m']} | 999 / ")
    assert table[8].endswith(f" | {label} | {runs.resolve()} |") and mb.remeasured_table([embedded.DEFAULT]) == []
    with pytest.raises(SystemExit, match="must hold one cramming bundle"):
        mb.main(["--add-remeasure", str(tmp_path), "--out", str(out)])


def test_ladder_points_place_one_sided_rungs_at_their_bound():
    from accesslib.apps.nb03_predicted import ladder_points

    rungs = [dict(max_steps=300, shipped=True, n50=10.0, stderr=1.0),
             dict(max_steps=1000, n50=12.5, stderr=0.5, derived_from=3000),
             dict(max_steps=4500, n50=None, n50_above=20),
             dict(max_steps=50, n50=None, n50_below=5),
             dict(max_steps=9000, n50=None)]               # says nothing: not drawn
    pts = ladder_points(dict(budget_ladder=dict(m=2, rungs=rungs)))
    assert pts == [(2, 5.0, 0.0, "50 steps: < 5"), (2, 12.5, 0.5, "1,000 steps"), (2, 20.0, 0.0, "4,500 steps: > 20")]
    assert ladder_points({}) == []


def test_a_converged_check_settles_the_protocols_suspicion(tmp_path, monkeypatch):
    """smollm2-135m without a check (a successful string used 289 of its 300 steps) is "likely
    budget-limited"; the same bundle with a converged check is not, with a check that moved it is."""
    import copy

    b = _unchecked(bundles.load("cram", "smollm2-135m"))
    _shipped(tmp_path, monkeypatch, b)
    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    cav = app.values["caveats"]
    assert cav["budget"] == "not checked" and cav["budget_suspect"] and cav["budget_limited"]
    assert "<b>likely budget-limited</b>" in app.readout.value
    check = copy.deepcopy(bundles.load("cram", embedded.DEFAULT)["budget_check"])   # converged
    assert bundles.budget_status(dict(b, budget_check=check))[0] == "converged"
    conv = dict(copy.deepcopy(b), budget_check=check)
    _shipped(tmp_path, monkeypatch, conv)
    app = PredictedApp(canvas="agg", model="smollm2-135m", published=False)
    cav = app.values["caveats"]
    assert cav["budget"] == "converged" and cav["budget_suspect"] and not cav["budget_limited"]
    assert "likely budget-limited" not in app.readout.value
    _shipped(tmp_path, monkeypatch, _moved(conv))
    app.model.value = embedded.DEFAULT
    app.model.value = "smollm2-135m"
    assert app.values["caveats"]["budget"] == "budget-limited" and app.values["caveats"]["budget_limited"]
    assert "likely" not in app.readout.value and "step budget ×3: <b>budget-limited</b>" in app.readout.value


def _as_published_model(b, name, source, ms=None):
    """A copy of bundle ``b`` under the name of one of [A]'s models (only the curves at ``ms``)."""
    import copy

    b = copy.deepcopy(b)
    b["model"], b["source"] = name, source
    if ms is not None:
        b["curves"] = [c for c in b["curves"] if c["m"] in ms]
        b.pop("slope", None)
    return b


def test_a_model_that_a_published_is_set_beside_its_published_numbers(tmp_path, monkeypatch):
    """A bundle of one of [A]'s models shows [A]'s slope (and n50 per m where published) beside
    its own, the targets compared and the protocol differences; other models show nothing of it."""
    b = bundles.load("cram", embedded.DEFAULT)
    gemma = _as_published_model(b, "gemma-3-270m", "glove100k", ms=[1])
    pythia = _as_published_model(b, "pythia-160m", "natural")
    _shipped(tmp_path, monkeypatch, gemma, pythia)
    app = PredictedApp(canvas="agg", model="gemma-3-270m", published=False)
    assert app.last_error is None, app.last_error
    c1 = next(c for c in gemma["curves"] if c["m"] == 1)
    txt = app.readout.value
    assert "<b>[A] measured this model</b> (google/gemma-3-270m, Random): slope <b>22.97</b> tokens/vector" in txt
    assert ("slope <b>22.97</b> tokens/vector, n50 per m not published. Here: no slope (one m); n50 at m = 1 is "
            f"×{c1['n50'] / 22.97:.2f} their slope × m = 23.0 (their line taken through 0).<br>") in txt
    assert f"m = 1: {c1['n50']:.1f} ± {c1['n50_stderr']:.1f} here." in txt
    assert "<br>" + html.escape("The same targets: [A]'s own word list") in txt
    steps = gemma["settings"]["max_steps"]
    k = sorted(c1["totals"])
    strings = f"{k[0]}" if k[0] == k[-1] else f"{k[0]}-{k[-1]}"
    assert f"here {gemma['protocol']} protocol, at most {steps:,} steps, {strings} strings per length" in txt
    rows = [r for r in app.data_rows() if r["panel"] == "[A]'s measurement of this model"]
    assert rows == [dict(panel="[A]'s measurement of this model", model="google/gemma-3-270m", dataset="Random",
                         slope=22.97, targets=rows[0]["targets"], source=rows[0]["source"])]
    app.model.value = "pythia-160m"                  # published points: theirs beside ours at every m
    a = b["slope"]["slope"]
    txt = app.readout.value
    assert f"(EleutherAI/pythia-160m, PG19): slope <b>90.37</b> tokens/vector. Here: a = {a:.2f} ± " in txt
    assert f"(×{a / 90.37:.2f} theirs)" in txt
    for c in b["curves"]:
        if c.get("n50") is not None and c["m"] <= 5:
            assert f"m = {c['m']}: {c['n50']:.1f} ± {c['n50_stderr']:.1f} here, " in txt
    assert "m = 5: " in txt and ", 450 [A]" in txt and "not published" not in txt
    pts = [(r["m"], r["n50"]) for r in app.data_rows() if r["panel"] == "[A]'s measurement of this model" and "m" in r]
    assert pts == [(1, 90), (2, 183), (3, 278), (4, 367), (5, 450)]
    app.model.value = embedded.DEFAULT               # not one of [A]'s models
    assert "[A] measured this model" not in app.readout.value
    assert not [r for r in app.data_rows() if r["panel"] == "[A]'s measurement of this model"]


def test_one_m_bundle_sets_the_bound_at_that_m_against_its_n50(tmp_path, monkeypatch):
    """A bundle measured at one m only (Gemma-3-270M at m = 1) has no slope: the readout sets
    n* = C·m against that n50 (n*/n50), for every bound and the measured-ε line, and says so."""
    from accesslib.results.bundles import single_point
    b = bundles.load("cram", embedded.DEFAULT)
    assert single_point(b) is None   # a slope: C/a as before
    one = dict(b, curves=[c for c in b["curves"] if c["m"] == 1], slope=None)
    c1 = one["curves"][0]
    assert single_point(one) == (1, c1["n50"], c1["n50_stderr"])
    out = tmp_path / "b"
    bundles.save(one, out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)
    app = PredictedApp(canvas="agg", model=embedded.DEFAULT, published=False)
    assert app.last_error is None, app.last_error
    ball = app.values["slopes"]["ball"]
    txt = app.readout.value
    assert f"measured n50 = <b>{c1['n50']:.1f} ± {c1['n50_stderr']:.1f}</b> at m = 1" in txt
    assert f"ratio n*/n50 = <b>{ball / c1['n50']:.1f}×</b>" in txt and "C/a" not in txt.split("bound at the measured")[0]
    assert f"ball {ball:,.1f} ({ball / c1['n50']:.1f}×)" in txt
    me = app.values["measured_eps"]
    assert me["ok"] and f"(n*/n50 at m = 1: <b>{me['C'] / c1['n50']:.1f}×</b>)" in txt
    rows = [r for r in app.data_rows() if r["panel"] == "predicted slope"]
    assert {r["bound"]: r["n_star_over_n50"] for r in rows}["ball"] == pytest.approx(ball / c1["n50"])
    assert all(r["C_over_a"] is None for r in rows)


def test_the_budget_map_app_shows_every_map_and_offers_its_cells(tmp_path, monkeypatch, check_texts_inside):
    """Every map of the shipped bundle (each targets x m): the figure's texts inside, its lines and
    table drawn from that map, the readout naming its conditions and what [A]'s cap did, and the
    data rows one per cell; without any map the page says how to make one."""
    from accesslib.apps.nb03_predicted import BudgetMapApp, budget_map_models

    texts_inside = check_texts_inside

    assert budget_map_models() == ["gemma-3-270m", "smollm2-135m", "tiny-d32-v257"]
    app = BudgetMapApp(canvas="agg")
    assert app.model.value == "smollm2-135m"       # the map the notebook's text reads comes first
    assert app.last_error is None, app.last_error
    seen = set()
    for source, _ in [(v, k) for k, v in app.source.options]:
        app.source.value = source
        for _, m in app.m.options:
            app.m.value = m
            mp = app.values["map"]
            assert (mp["source"], mp["m"]) == (source, m) and app.last_error is None
            seen.add((source, m))
            texts_inside(app.fig)
            table = [t.get_text() for t in app.ax_grid.texts if "cut" not in t.get_text()]
            assert table == [t for row in bundles.map_texts(mp) for t in row]
            assert app.ax_lines.get_xscale() == "log" and list(app.ax_lines.get_xticks()) == mp["steps"]
            assert "[A]&#x27;s optimiser (AdamW, lr 0.01" in app.readout.value
            assert "[A]&#x27;s 3,000 / 500: its 3,000-step cap" in app.readout.value
            rows = app.data_rows()
            assert len(rows) == len(mp["steps"]) * len(mp["patiences"])
            r = next(r for r in rows if (r["max_steps"], r["patience"]) == (3000, 500))
            c = mp["cells"][mp["steps"].index(3000)][mp["patiences"].index(500)]
            assert (r["n50"], r["open_strings"]) == (c["n50"], sum(c["open"]))
    assert seen == {(s, m) for s in ("glove100k", "tokens") for m in (1, 2, 3)}
    app.model.value = "tiny-d32-v257"
    assert [v for _, v in app.source.options] == ["natural"] and app.values["map"]["model"] == "tiny-d32-v257"
    texts_inside(app.fig)
    assert "max_steps,patience,n50" in app.data_csv().splitlines()[0].replace("model,m,source,", "")
    app.model.value = "gemma-3-270m"          # gemma-9k's map: [A]'s words, m = 1
    assert [v for _, v in app.source.options] == ["glove100k"] and [m for _, m in app.m.options] == [1]
    assert app.values["map"]["model"] == "gemma-3-270m" and app.last_error is None
    texts_inside(app.fig)
    empty = tmp_path / "b"
    for name in budget_map_models():
        b = bundles.load("cram", name)
        b.pop("budget_maps")
        bundles.save(b, empty)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: empty)
    with pytest.raises(ValueError, match="no shipped cramming bundle keeps a budget map; add one with "
                                         "scripts/make_bundles.py --add-budget-map"):
        BudgetMapApp(canvas="agg")


def test_the_readout_points_to_the_budget_map_where_the_model_has_one():
    from accesslib.apps.nb03_predicted import PredictedApp

    app = PredictedApp(canvas="agg", model="smollm2-135m")
    assert ("the <b>budget map</b> below reads [A]&#x27;s words and random tokens at every step budget and patience "
            "of the 9,000 / 1,500 runs.") in app.readout.value
    app.model.value = "tiny-d64-v257"
    assert "budget map" not in app.readout.value
    app.model.value = "tiny-d32-v257"
    assert "reads natural text at every step budget and patience of the 9,000 / 1,500 run." in app.readout.value


def test_notebook_05s_readout_points_to_the_map_in_notebook_03():
    """05 shows the same app without the map under it: its pointer names notebook 03, not "below"."""
    import json

    cells = json.loads((ROOT / "notebooks" / "05-geometry.ipynb").read_text())["cells"]
    (src,) = ["".join(c["source"]) for c in cells if "PredictedApp(" in "".join(c["source"])]
    app = eval(src.splitlines()[-1].replace("PredictedApp(", "PredictedApp(canvas='agg', model='tiny-d32-v257', "))
    assert "the <b>budget map</b> in notebook 03 reads natural text" in app.readout.value
    assert " below " not in app.readout.value


def test_one_rung_read_on_two_machines_is_drawn_once():
    """The same strings' n50 read again on another machine differs in its last digits (SmolLM2's words
    3000 / 500 at m = 1: stderr 1.8112269918492532 from the 9000 / 1500 run's ladder, ...523 from the
    --read-budget bundle): still one square, where a real difference keeps two."""
    from accesslib.apps.nb03_predicted import _same_n50, remeasured_points

    a = dict(n50=20.087372081417204, stderr=1.8112269918492532, n50_above=None, n50_below=None)
    assert _same_n50(a, dict(a, stderr=1.8112269918492523))
    assert not _same_n50(a, dict(a, stderr=1.82)) and not _same_n50(a, dict(a, n50=None, n50_above=20.1))
    b = bundles.load("cram", "smollm2-135m")
    words_1 = [p for p in remeasured_points(b) if p[0] == 1 and p[3].startswith("[A]'s words")]
    assert [p[3] for p in words_1] == ["[A]'s words, 1,000 / 500", "[A]'s words, 3,000 / 500",
                                       "[A]'s words, 9,000 / 1,500"]


def test_marker_labels_end_before_the_lines_end_labels():
    """SmolLM2-135M on linear axes: the labels of its re-measured squares stack up to the lines'
    end labels; each is moved left to end before them (the long ones at m = 3 ran into "box" and
    "ellipsoid"), with a leader line back to its square when moved."""
    from matplotlib.text import Text

    app = PredictedApp(canvas="agg")          # beside [A]'s models' panel, as the page opens
    app.model.value = "smollm2-135m"
    app.fig.canvas.draw()
    ax, renderer = app.art["ax"], app.fig.canvas.get_renderer()
    start = min(t.get_window_extent(renderer).x0 for t in app.art["labels"].values())
    assert start >= ax.transData.transform((app.art["m_max"] * 1.03, 0))[0] - 1
    texts = app.art["remeasured_texts"]
    assert len(texts) >= 12
    for t in texts:
        assert Text.get_window_extent(t, renderer).x1 < start
    moved = [t for t in texts if t.xyann[0] < 0]
    assert moved and all(t.arrow_patch.get_visible() for t in moved if t.xyann[0] < -5)


def test_a_second_run_of_the_shipped_curve_is_named_and_labels_it():
    """A re-measurement of the very strings, protocol and budget of the shipped curve (Gemma's
    gemma-9k read at [A]'s 3000 / 500) is named a second run in the folded lines and the head, and
    its budget check makes the shipped curve's caveat budget-limited; another budget is not one."""
    from accesslib.apps.nb03_predicted import bundle_caveats, remeasured_html

    shipped = bundles.load("cram", "gemma-3-270m")
    # the shipped bundle's own second run: gemma-9k read at 3000 / 500 (docs/gemma.md, section 5)
    (real,) = bundles.second_samples(shipped)
    assert real["origin"] == "benchmarks/runs/bundles/gemma-3k" and real["budget_check"]["ms"]["1"]["moved"] is True
    assert bundle_caveats(shipped)["budget"] == "budget-limited"
    b = dict(shipped, remeasured=[])
    own = bundle_caveats(b)
    twin = {k: b[k] for k in ("source", "protocol", "settings", "seed", "samples", "curves")}
    twin.update(origin="runs/gemma-3k", read_from=dict(max_steps=9000, patience=1500), budget_check=dict(
        factor=3, read_from_run=True, settings=dict(max_steps=[3000, 9000], patience=[500, 1500]),
        ms={"1": dict(n50=11.0, stderr=1.1, n50_3x=None, n50_3x_low=16.2, moved=True)}))
    with_twin = dict(b, remeasured=[twin])
    cav = bundle_caveats(with_twin)
    assert own["budget"] != "budget-limited" and not own["budget_limited"]
    assert cav["budget"] == "budget-limited" and cav["budget_limited"]
    assert cav["budget_text"].startswith(own["budget_text"]) and "(runs/gemma-3k) checked it too" in cav["budget_text"]
    text = html.unescape(remeasured_html(with_twin))
    assert "or again under the same ones (the orange squares)" in text
    assert ("6 strings per length (the same strings, protocol and budget as the shipped curve: a second run of it, "
            "whose budget check counts for the shipped curve too): m = 1:") in text
    from accesslib.apps.nb03_predicted import remeasured_points
    assert [p[3] for p in remeasured_points(with_twin)] == ["[A]'s words, 3,000 / 500 (second run)"]
    # the whole second run kept too (gemma-9k: 1000 / 500 and 3000 / 500 read from it, and its own 9000 / 1500);
    # its 3000 / 500 is the second sample's: one marker, named the second run
    assert [p[3] for p in remeasured_points(shipped)] == [
        "[A]'s words, 1,000 / 500", "[A]'s words, 3,000 / 500 (second run)", "[A]'s words, 9,000 / 1,500"]
    other = dict(twin, settings=dict(twin["settings"], max_steps=1000))
    assert [p[3] for p in remeasured_points(dict(b, remeasured=[other]))] == ["[A]'s words, 1,000 / 500"]
    text = html.unescape(remeasured_html(dict(b, remeasured=[other])))
    assert "again under the same ones" not in text and "second run" not in text
    assert bundle_caveats(dict(b, remeasured=[other]))["budget"] == own["budget"]
