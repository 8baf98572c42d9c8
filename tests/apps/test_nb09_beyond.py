"""Notebook 09's app, headless: the twins' curves, n50 against m, C/a and the radius panel."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

from accesslib.apps.nb09_beyond import BeyondApp  # noqa: E402
from accesslib.experiments import beyond  # noqa: E402
from accesslib.results import bundles  # noqa: E402

TWINS = {"transformer": "tw-t", "mamba": "tw-m"}
L = [4, 16, 64, 256, 1024]


def _save_synthetic(out):
    """Bundles made by hand here (for the app's logic only): a transformer with slope 4 and a
    bounded residual, a Mamba with slope 2 whose residual grows like L^0.5."""
    base = dict(kind="cram", version=1, source="natural", samples=4, search="grid", seed=0, protocol="fast",
                settings={}, examples=[], created="x", hardware={}, wall_time=1.0, command="")
    for name, fam, a in [("tw-t", "gpt_neox", 4.0), ("tw-m", "mamba", 2.0)]:
        curves = [dict(m=m, lengths=[int(a * m), int(a * m) + 2], successes=[3, 1], totals=[4, 4],
                       n50=a * m + 1, n50_stderr=0.3, k=-1.0) for m in (1, 2, 3, 4)]
        bundles.save(dict(base, model=name, facts=dict(d=64, vocab_size=257, dtype="float32", family=fam,
                                                       max_context=64 if fam == "gpt_neox" else None),
                          curves=curves, slope=bundles.slope_record(curves), geometry=dict(r_inf=3.0)), out)
        res = [2.0 * x ** (0.5 if fam == "mamba" else 0.0) for x in L]
        fin = [7.0, 7.5, 7.9, 8.0, 8.0]
        mx = dict(final_inf=[v / 3 for v in fin], final_2=fin, residual_inf=[v / 3 for v in res], residual_2=res)
        if fam == "mamba":
            mx["ssm_inf"] = [0.5] * len(L)
        curve = dict(model=name, family=fam, source="tokens", lengths=L, per_length=4, max=mx, mean=mx,
                     cap=dict(r_inf=9.0, r_2=9.0), trained_context=64 if fam == "gpt_neox" else None, seed=0,
                     growth={k: _growth(v) for k, v in mx.items()})
        bundles.save(dict(kind="radius", version=1, model=name, facts=dict(d=64, vocab_size=257, family=fam),
                          trained_context=64, curves=[curve], created="x", hardware={}, wall_time=1.0,
                          command=""), out)


def _growth(v):
    from accesslib.engine.radius import growth_exponent
    return growth_exponent(L, v)


@pytest.fixture
def synthetic(tmp_path, monkeypatch):
    _save_synthetic(tmp_path)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: tmp_path)
    return tmp_path


def test_app_draws_both_twins(synthetic):
    app = BeyondApp(twins=TWINS, canvas="agg")
    assert app.last_error is None, app.last_error
    rows = {r["model"]: r for r in app.values["rows"]}
    assert rows["tw-t"]["slope"] == pytest.approx(4.0) and rows["tw-m"]["slope"] == pytest.approx(2.0)
    C = 64 * math.log(4097) / math.log(257)
    assert rows["tw-m"]["ratio"] == pytest.approx(C / 2.0)
    # the caveat, tested on the (synthetic) measurement
    cav = app.values["caveat"]
    assert cav["tw-t"]["final_bounded"] and cav["tw-m"]["final_bounded"]
    assert cav["tw-m"]["residual_exponent"] == pytest.approx(0.5)
    assert cav["tw-t"]["residual_exponent"] == pytest.approx(0.0, abs=1e-9)
    assert cav["tw-m"]["ssm_exponent"] == pytest.approx(0.0, abs=1e-9) and cav["tw-t"]["ssm_exponent"] is None
    assert "L^+0.50" in app.readout.value and "bounded" in app.readout.value
    # panel (c): final and residual of both twins, the cap drawn for the final states
    kinds = sorted((s["model"], s["kind"]) for s in app.series)
    assert kinds == [("tw-m", "final"), ("tw-m", "residual"), ("tw-t", "final"), ("tw-t", "residual")]
    assert all((s["cap"] == 9.0) == (s["kind"] == "final") for s in app.series)
    app.kinds.value = ("ssm",)
    assert [s["model"] for s in app.series] == ["tw-m"] and app.series[0]["values"] == [0.5] * 5
    app.norm.value = "r_inf"
    app.kinds.value = ("final",)
    assert app.series[0]["values"] == pytest.approx([7.0 / 3, 2.5, 7.9 / 3, 8.0 / 3, 8.0 / 3])


def test_app_data_rows_and_bound(synthetic):
    app = BeyondApp(twins=TWINS, canvas="agg")
    rows = app.data_rows()
    cram = [r for r in rows if r["panel"].startswith("(a")]
    assert len(cram) == 8 and {r["m"] for r in cram} == {1, 2, 3, 4}
    assert [r["n50"] for r in cram if r["model"] == "tw-t"] == [5.0, 9.0, 13.0, 17.0]
    rad = [r for r in rows if r["panel"] == "(c) radius"]
    assert len(rad) == 4 * len(L) and {r["L"] for r in rad} == set(L)
    ball = {r["model"]: r["C"] for r in cram}
    app.bound.value = "box"   # no widths in the synthetic geometry: no box C, no crash
    assert app.last_error is None and all(r["C"] is None for r in app.values["rows"])
    assert ball["tw-t"] == pytest.approx(64 * math.log(4097) / math.log(257))
    assert "accesslib-nb09-beyond" in app.file_name("csv")


def test_app_without_bundles_speaks_plainly(tmp_path, monkeypatch):
    monkeypatch.setattr(bundles, "bundle_dir", lambda: tmp_path)
    app = BeyondApp(twins=TWINS, canvas="agg")
    assert app.last_error is not None
    assert "not shipped yet" in app.error.value and "Traceback" not in app.error.value


def test_app_on_the_shipped_bundles():
    """With the shipped bundles (when they exist): both twins drawn, the verdicts computed."""
    have_cram = [n for n in beyond.TWINS.values() if n in bundles.available("cram")]
    if not have_cram:
        pytest.skip("no shipped cramming bundle of the twins")
    app = BeyondApp(canvas="agg")
    assert app.last_error is None, app.last_error
    assert {r["model"] for r in app.values["rows"]} == set(have_cram)
    for name, v in app.verdicts.items():
        assert v["final_under_cap"], name
