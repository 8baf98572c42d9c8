"""Headless tests of BoundsApp (notebook 01): set controls from code, check the figure data."""
import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from accesslib.apps.base import make_figure  # noqa: E402
from accesslib.apps.nb01_bounds import BoundsApp  # noqa: E402
from accesslib.results import reference  # noqa: E402
from accesslib.theory import bounds  # noqa: E402

PYTHIA = "EleutherAI/pythia-160m"


@pytest.fixture(scope="module")
def app():
    return BoundsApp(canvas="agg")


def _line_b(app):
    return app.art_b["line"].get_xdata().copy(), app.art_b["line"].get_ydata().copy()


def test_default_is_pythia_paper_setting(app):
    app.set(preset=PYTHIA, m=1)
    assert app.last_error is None
    v = app.values
    assert (v["d"], v["vocab_size"], v["r"]) == (768, 50304, 22.45)
    assert v["eps"] == pytest.approx(22.45 * 2**-11)
    assert v["C"] == pytest.approx(590.09, abs=0.01)
    assert "log10 N = 2,774.4" in app.readout.value
    assert app.art_a["value_txt"].get_text().startswith("N ≤ $10^{2774}$")
    # panel (c): the predicted line has slope C, the published PG19/Random points are markers
    x, y = app.art_c["line"].get_data()
    assert y[1] / x[1] == pytest.approx(v["C"])
    pts = app.art_c["points"]
    assert list(pts["PG19"].lines[0].get_ydata()) == [90, 183, 278, 367, 450]
    assert list(pts["Random"].lines[0].get_ydata()) == [53, 102, 150, 195, 228]
    assert pts["PG19"].lines[0].get_linestyle() == "None"      # markers, not a line
    assert "C / a(PG19) = 6.5×" in app.ratio_text
    assert "C / a(Random) = 13.4×" in app.ratio_text


def test_slider_change_moves_plotted_data(app):
    app.set(preset=PYTHIA, m=1)
    x0, y0 = _line_b(app)
    bar0 = app.art_a["bar"].get_width()
    readout0 = app.readout.value
    app.m.value = 3                     # as if the user dragged the slider
    x1, y1 = _line_b(app)
    assert app.values["n_star"] == pytest.approx(3 * 590.0911, abs=1e-3)
    assert app.art_a["bar"].get_width() == pytest.approx(3 * bar0)
    assert app.art_b["vline"].get_xdata()[0] == pytest.approx(app.values["n_star"])
    assert app.readout.value != readout0
    assert x1.max() > x0.max() and y1.min() < y0.min()
    # flat at 0 up to n*, then slope -log10|V|
    ns = app.values["n_star"]
    assert np.all(y1[x1 <= ns] == 0)
    beyond = x1 > ns + 1
    assert np.allclose(y1[beyond], -(x1[beyond] - ns) * math.log10(50304))
    # the current-m marker sits on the line at m = 3
    assert app.art_c["here"].get_data()[0][0] == 3

    app.d.value = 1536
    assert app.values["C"] == pytest.approx(2 * 590.0911, abs=1e-3)
    assert app.art_a["bar"].get_width() == pytest.approx(6 * bar0)


def test_vocab_is_integer_and_changes_slope(app):
    app.set(preset=PYTHIA, m=1)
    app.vocab.value = 1000.4
    assert app.values["vocab_size"] == 1000
    assert app.values["C"] == pytest.approx(768 * math.log(4097) / math.log(1000))


def test_dtype_presets_set_eps_and_follow_r(app):
    app.set(preset=PYTHIA, m=1)
    app.dtype.value = "bfloat16"
    assert app.eps.value == pytest.approx(22.45 * 2**-8)
    assert app.values["C"] == pytest.approx(768 * math.log(513) / math.log(50304))
    app.r.value = 10.0                   # eps follows r while a dtype is chosen
    assert app.eps.value == pytest.approx(10.0 * 2**-8)
    app.dtype.value = "float32"
    assert app.values["eps"] == pytest.approx(10.0 * 2**-24)
    # moving eps by hand switches to custom
    app.eps.value = 1e-3
    assert app.dtype.value == "custom"
    assert app.values["eps"] == pytest.approx(1e-3)
    assert app.values["C"] == pytest.approx(768 * math.log1p(2 * 10.0 / 1e-3) / math.log(50304))


@pytest.mark.parametrize("row", [r for r in reference.models() if r["r_inf"]], ids=lambda r: r["name"])
def test_model_preset_sets_d_vocab_r_eps(app, row):
    app.set(preset="custom", d=5, r=1.0, dtype="custom", eps=0.5)
    assert app.values["d"] == 5
    app.preset.value = row["name"]
    assert app.last_error is None
    assert app.d.value == row["d"]
    assert int(round(app.vocab.value)) == row["vocab_size"]
    assert app.r.value == pytest.approx(row["r_inf"])
    assert app.dtype.value == "paper"
    assert app.values["eps"] == pytest.approx(row["r_inf"] * 2**-11)
    expected = bounds.slope(row["d"], row["vocab_size"], row["r_inf"] * 2**-11, row["r_inf"])
    assert app.values["C"] == pytest.approx(expected)
    assert f"C / a(PG19) = {expected / row['slope_pg19']:.1f}×" in app.ratio_text
    assert f"C / a(Random) = <b>{expected / row['slope_random']:.1f}×</b>" in app.readout.value
    assert row["name"] in app.status.value


def test_preset_without_r_inf_keeps_r_and_says_so(app):
    app.set(preset="custom", r=7.5)
    app.preset.value = "google/gemma-3-1b-pt"
    assert (app.d.value, app.r.value) == (1152, 7.5)
    assert "r_inf not published" in app.status.value
    assert app.last_error is None


def test_bad_combination_shows_message_not_exception(app):
    app.set(preset=PYTHIA)
    good = app.values["C"]
    x_before = app.art_b["line"].get_xdata().copy()
    app.r.value = 0.0                    # with eps = r * 2^-11, eps would be 0: no exception
    assert app.last_error is not None
    assert app.last_error.startswith("r must be > 0")
    assert app.error.layout.display != "none"
    assert "Cannot update" in app.error.value and "Traceback" not in app.error.value
    # the last good figure stays
    assert app.values["C"] == good
    assert np.array_equal(app.art_b["line"].get_xdata(), x_before)
    # a valid value clears the message
    app.r.value = 5.0
    assert app.last_error is None and app.error.layout.display == "none"
    # custom eps with r = 0 is legal: one output, n* = 0
    app.dtype.value = "custom"
    app.r.value = 0.0
    assert app.last_error is None
    assert app.values["log10_accessible"] == 0.0 and app.values["n_star"] == 0.0


def test_unexpected_error_is_a_message(app):
    ok = app.guard(lambda: 1 / 0)
    assert ok is False and "ZeroDivisionError" in app.last_error
    app.refresh()
    assert app.last_error is None


def test_image_fallback_renders_png():
    app = BoundsApp(canvas="image")
    png0 = app.view.value
    assert png0[:8] == b"\x89PNG\r\n\x1a\n"
    app.m.value = 4
    assert app.view.value != png0


def test_ipympl_canvas_is_a_widget():
    pytest.importorskip("ipympl")
    import ipywidgets

    app = BoundsApp(canvas="ipympl")
    assert app.canvas_mode == "ipympl"
    assert isinstance(app.view, ipywidgets.DOMWidget)
    assert app.view in app.widget.children
    app.m.value = 2
    assert app.values["n_star"] == pytest.approx(2 * 590.0911, abs=1e-3)


def test_make_figure_rejects_unknown_canvas():
    with pytest.raises(ValueError, match="canvas"):
        make_figure((3, 3), canvas="svg")


def test_set_rejects_unknown_control(app):
    with pytest.raises(ValueError, match="unknown control"):
        app.set(width=3)


def test_browser_snapping_echo_keeps_exact_values(app):
    """The browser snaps log sliders to 10**(k*step) and sends that back: not a user move."""
    app.set(preset=PYTHIA, m=1)
    app.vocab.value = 10 ** (round(math.log10(50304) / app.vocab.step) * app.vocab.step)
    assert app.values["vocab_size"] == 50304
    eps = 22.45 * 2**-11
    app.eps.value = 10 ** (round(math.log10(eps) / app.eps.step) * app.eps.step)
    assert app.dtype.value == "paper"
    assert app.values["C"] == pytest.approx(590.0911, abs=1e-3)
    # a real move (a whole step or more) is taken as it is
    app.vocab.value = 10 ** 4.5
    assert app.values["vocab_size"] == round(10 ** 4.5)


def test_saved_figure_and_csv_are_what_the_page_shows():
    """The toolbar's files: PNG/SVG/PDF of the figure; the CSV holds panel (b)'s curve as drawn,
    the settings with C and n*, n* = C·m and the preset's published points."""
    import csv
    import io

    app = BoundsApp(canvas="image")
    app.set(preset=PYTHIA, m=3)
    assert app.figure_bytes("png").startswith(b"\x89PNG\r\n\x1a\n")
    assert app.figure_bytes("pdf").startswith(b"%PDF-")
    assert b"<svg" in app.figure_bytes("svg")[:1000]
    assert app.offer_data() == "accesslib-nb01-bounds.csv"
    rows = list(csv.DictReader(io.StringIO(app.data_csv())))
    assert list(rows[0])[:10] == ["panel", "d", "vocab_size", "eps", "r", "m", "C", "n_star", "log10_accessible",
                                  "n50_bound"]
    assert {"n", "log10_fraction", "n50"} <= set(rows[0])
    (settings,) = [r for r in rows if r["panel"] == "settings"]
    v = app.values
    assert (int(settings["d"]), int(settings["vocab_size"]), int(settings["m"])) == (768, 50304, 3)
    for k in ("eps", "r", "C", "n_star", "log10_accessible"):
        assert float(settings[k]) == v[k]                          # full precision
    assert f"n* = C·m = <b>{float(settings['n_star']):,.1f}</b>" in app.readout.value
    curve = [r for r in rows if r["panel"] == "(b) reachable share"]
    x, y = app.art_b["line"].get_data()
    assert [float(r["n"]) for r in curve] == list(x) and [float(r["log10_fraction"]) for r in curve] == list(y)
    line = [r for r in rows if r["panel"] == "(c) n* = C·m"]
    assert [float(r["n_star"]) for r in line[:4]] == [0.0, v["C"], 2 * v["C"], 3 * v["C"]]
    pg19 = [r for r in rows if r["panel"] == "(c) published n50 (PG19)"]
    assert [float(r["n50"]) for r in pg19] == list(app.art_c["points"]["PG19"].lines[0].get_ydata())
