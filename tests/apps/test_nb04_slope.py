"""Notebook 04's slope app, headless: the family table and its panels."""
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accesslib.apps.nb04_slope import SlopeApp  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.bundles import family_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


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


def _check(moved):
    """A budget check at m = 1 (n50 5.0 -> 5.1, or -> 7.0 when ``moved``), as bundling.budget_check writes it."""
    r = dict(n50=5.0, stderr=0.2, n50_3x=7.0 if moved else 5.1, stderr_3x=0.2, moved=moved, shift=None)
    return dict(factor=3, ms={"1": r}, budget_limited=moved, settings=dict(max_steps=[1000, 3000], patience=[200, 600]))


def test_slope_app_shows_each_models_budget_check(tmp_path, monkeypatch):
    """Beside each slope the label of bundles.budget_status (converged, budget-limited, not
    checked), its words folded below, a warning naming the budget-limited model."""
    import html

    out = tmp_path / "b"
    base = dict(kind="cram", version=1, source="natural", samples=1, search="grid", seed=0, protocol="fast",
                settings={}, curves=[], examples=[], created="x", hardware={}, wall_time=1.0, command="")
    checks = {"fam-a": _check(False), "fam-b": _check(True), "fam-c": None}
    for (name, chk), d in zip(checks.items(), (32, 64, 128)):
        b = dict(base, model=name, facts=dict(d=d, vocab_size=1024, dtype="float32", family="gpt_neox", max_context=128),
                 slope=dict(slope=d / 8, intercept=0.0, r2=0.99, slope_stderr=0.1, n_points=4), geometry=dict(r_inf=3.0))
        if chk:
            b["budget_check"] = chk
        bundles.save(b, out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)
    monkeypatch.setattr(embedded, "names", lambda: list(checks))
    app = SlopeApp(canvas="agg")
    assert app.last_error is None, app.last_error
    got = {r["model"]: (r["budget"], r["budget_text"]) for r in app.values["rows"]}
    assert got == {n: bundles.budget_status(bundles.load("cram", n)) for n in checks}
    assert [got[n][0] for n in checks] == ["converged", "budget-limited", "not checked"]
    txt = app.readout.value
    for name, (label, words) in got.items():
        assert f"title='{html.escape(words, quote=True)}'>{label}</td>" in txt, name
        assert f"<b>{name}</b>: {html.escape(words)}" in txt, name
    assert "<b>budget-limited</b>: fam-b: their n50 and slopes" in txt
    assert "m = 1: 5.0 with 1000 steps, 7.0 with 3000" in txt
    assert [t.get_text() for t in app._ratio["labels"]] == ["fam-a", "fam-b (budget-limited)", "fam-c"]
    assert [r["budget"] for r in app.data_rows()] == ["converged", "budget-limited", "not checked"]


def test_slope_app_labels_the_shipped_family():
    """The shipped family: the models with a budget check in their bundle read its label, the others "not checked"."""
    app = SlopeApp(canvas="agg")
    for r in app.values["rows"]:
        b = bundles.load("cram", r["model"])
        assert r["budget"] == bundles.budget_status(b)[0]
        assert (r["budget"] == "not checked") == (not b.get("budget_check") and not b.get("budget_checks"))
        assert f">{r['budget']}</td></tr>" in app.readout.value


def test_slope_app_states_each_models_step_budget():
    """Each row names the step budget and patience its slope was measured with: the family is not
    measured with one budget (tiny-d128-v257 needed 3000 steps to converge)."""
    app = SlopeApp(canvas="agg")
    rows = {r["model"]: r for r in app.values["rows"] + app.values["others"]}
    for name, r in rows.items():
        st = bundles.load("cram", name)["settings"]
        assert (r["max_steps"], r["patience"]) == (st["max_steps"], st["patience"])
        assert f"<td style='padding:0 8px;line-height:1.3'>{st['max_steps']:,} / {st['patience']:,}</td>" in \
            app.readout.value
    assert (rows["tiny-d128-v257"]["max_steps"], rows["tiny-d32-v257"]["max_steps"]) == (3000, 1000)
    assert "<th>steps / patience</th>" in app.readout.value


def test_slope_app_shows_the_mamba_twin_outside_the_family():
    """The Mamba twin's bundle opens in 04: a row of its own (slope, C/a from its bundle), kept out
    of the transformers' panels and their mean C/a."""
    app = SlopeApp(canvas="agg")
    assert app.last_error is None, app.last_error
    fam = [r["model"] for r in app.values["rows"]]
    assert "tiny-mamba-d64-v257" not in fam
    (row,) = [r for r in app.values["others"] if r["model"] == "tiny-mamba-d64-v257"]
    b = bundles.load("cram", "tiny-mamba-d64-v257")
    assert row["slope"] == pytest.approx(b["slope"]["slope"])
    assert row["ratio"] == pytest.approx(row["C"] / b["slope"]["slope"])
    assert "tiny-mamba-d64-v257 (mamba, not in the family)" in app.readout.value
    good = [r["ratio"] for r in app.values["rows"] if r["ratio"] and math.isfinite(r["ratio"])]
    assert app.values["ratio_mean"] == pytest.approx(sum(good) / len(good))
    flags = {r["model"]: r["in_family"] for r in app.data_rows()}
    assert flags["tiny-mamba-d64-v257"] is False and all(flags[m] for m in fam)
    assert len(app._ratio["labels"]) == len(fam)
