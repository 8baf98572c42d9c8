"""Every "Things to try" answer of notebooks 01, 03, 04 and 08 that states a number or a behaviour,
checked by driving the app as the exercise says.

Each test names its exercise; the numbers asserted are the ones the answer prints, computed here
by the app from the shipped bundles and the published table.
"""
import html
import json
import math
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from accesslib.apps.nb01_bounds import BoundsApp  # noqa: E402
from accesslib.theory import bounds  # noqa: E402

PYTHIA = "EleutherAI/pythia-160m"
ROOT = Path(__file__).resolve().parents[2]


def answers(notebook: str) -> str:
    """The markdown of a notebook as one text, line breaks and indentation as single spaces."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"))


def says(text: str, *phrases):
    for p in phrases:
        assert p in text, f"the notebook no longer says {p!r}"


# ---------------------------------------------------------------------------------------------
# 01 · the counting bound
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app01():
    return BoundsApp(canvas="agg")


def _published_shown(app):
    return bool(app.art_c["points"]) and "C / a(PG19)" in app.ratio_text


def test_01_q1_dtype_changes_C_and_puts_the_comparison_away(app01):
    app01.set(preset=PYTHIA, m=1)
    C16 = app01.values["C"]
    app01.dtype.value = "bfloat16"
    assert round(app01.values["C"] / C16, 2) == 0.75                 # "≈ 0.75 ..., 25% lower"
    assert app01.preset.value == "custom" and not _published_shown(app01)
    app01.dtype.value = "float32"
    assert round(app01.values["C"] / C16, 1) == 2.1                  # "about 2.1 times higher"
    assert app01.preset.value == "custom" and not _published_shown(app01)
    app01.dtype.value = "paper"                                      # "shown again only at fp16"
    assert app01.preset.value == PYTHIA and _published_shown(app01)
    assert app01.values["C"] == pytest.approx(C16)


def test_01_q2_r_does_not_move_C_with_a_dtype(app01):
    app01.set(preset=PYTHIA, m=1)
    C, ns = app01.values["C"], app01.values["n_star"]
    xb, yb = (a.copy() for a in app01.art_b["line"].get_data())
    app01.r.value = 60.0
    assert app01.values["C"] == pytest.approx(C) and app01.values["n_star"] == pytest.approx(ns)
    assert np.allclose(app01.art_b["line"].get_xdata(), xb) and np.allclose(app01.art_b["line"].get_ydata(), yb)
    assert app01.preset.value == "custom" and not app01.art_c["points"]   # "the published dots leave (c)"
    app01.r.value = 22.45                                            # "until r is back at r∞"
    assert app01.preset.value == PYTHIA and app01.art_c["points"]
    app01.dtype.value = "custom"                                     # "choose custom ε and move r"
    c0 = app01.values["C"]
    app01.r.value = 60.0
    assert app01.values["C"] > c0 * 1.05


def test_01_q3_doubling_d_or_m_doubles_n_star(app01):
    app01.set(preset=PYTHIA, m=1)
    n0 = app01.values["n_star"]
    app01.d.value = 2 * 768
    assert app01.values["n_star"] == pytest.approx(2 * n0)
    app01.set(preset=PYTHIA, m=2)
    assert app01.values["n_star"] == pytest.approx(2 * n0)


def test_01_q4_gemma_against_pythia(app01):
    app01.set(preset=PYTHIA, m=1)
    assert round(app01.values["C"]) == 590
    app01.preset.value = "google/gemma-3-270m"
    assert (app01.values["d"], app01.values["vocab_size"]) == (640, 262144)
    assert round(app01.values["C"]) == 427                           # "≈ 427, against 590"


def test_01_q5_llama_ratios(app01):
    app01.set(preset="meta-llama/Llama-3.2-1B", m=1)
    C = app01.values["C"]
    assert round(C) == 1448                                          # "C ≈ 1448 tokens per vector"
    ratios = dict(zip(("PG19", "Random"), (C / 137.77, C / 71.30)))
    assert 10 <= ratios["PG19"] < 11 and round(ratios["Random"]) == 20   # "about 10 and 20"
    assert f"C / a(PG19) = {ratios['PG19']:.1f}×" in app01.ratio_text
    assert f"C / a(Random) = {ratios['Random']:.1f}×" in app01.ratio_text


def test_01_q6_ten_tokens_past_the_threshold(app01):
    app01.set(preset=PYTHIA, m=1)
    ns = app01.values["n_star"]
    x, y = app01.art_b["line"].get_data()
    assert float(np.interp(ns + 10, x, y)) == pytest.approx(-10 * math.log10(50304))
    assert round(float(np.interp(ns + 10, x, y))) == -47              # "about 10⁻⁴⁷"


def test_01_q7_r_zero(app01):
    app01.set(preset=PYTHIA, m=1)
    good = dict(app01.values)
    app01.r.value = 0.0
    assert "r must be > 0" in app01.last_error and "custom ε" in app01.last_error
    assert app01.values == good                                      # "keeps the last valid figure"
    app01.dtype.value = "custom"
    assert app01.last_error is None
    assert app01.values["log10_accessible"] == 0.0 and app01.values["n_star"] == 0.0   # N = 1, n* = 0


def test_01_q8_loosest_and_tightest_bound_against_random_words(app01):
    from accesslib.results import reference

    got = {}
    for row in reference.models():
        app01.set(preset=row["name"], m=1)
        C = app01.values["C"]
        got[row["name"]] = (C, C / row["slope_random"], row["r_inf"] is not None)
        assert f"C / a(Random) = {C / row['slope_random']:.1f}×" in app01.ratio_text
    with_r = {k: v for k, v in got.items() if v[2]}
    assert len(with_r) == 7 and "google/gemma-3-1b-pt" not in with_r                     # "the seven models"
    loosest, tightest = max(with_r, key=lambda k: with_r[k][1]), min(with_r, key=lambda k: with_r[k][1])
    assert (loosest, tightest) == ("Qwen/Qwen2.5-1.5B", "EleutherAI/pythia-410m")
    assert round(with_r[loosest][0]) == 1071 and round(with_r[tightest][0]) == 787   # "C ≈ 1071", "≈ 787"
    assert (round(with_r[loosest][1]), round(with_r[tightest][1])) == (29, 11)          # "about 29", "11"
    assert (round(min(v[1] for v in with_r.values()), 1), round(max(v[1] for v in with_r.values()), 1)) == \
        (11.4, 29.4)
    pg19 = [v[0] / r["slope_pg19"] for r in reference.models() for k, v in with_r.items() if k == r["name"]]
    assert (round(min(pg19), 1), round(max(pg19), 1)) == (6.0, 13.5)                     # "6.0 to 13.5"
    C, ratio, _ = got["google/gemma-3-1b-pt"]
    assert round(C) == 768 and round(ratio) == 109                        # "C (768)", "about 109"
    assert reference.model("gemma-3-1b-pt")["slope_random"] == 7.02                      # "only 7.0"


def test_01_custom_settings_never_use_a_preset_slope(app01):
    """Item 2: d, |V|, r or ε away from the preset -> "custom", no C/a, no published points."""
    for move in (dict(d=1536), dict(vocab_size=32000), dict(r=30.0), dict(dtype="custom", eps=0.01)):
        app01.set(preset=PYTHIA, m=1)
        assert _published_shown(app01)
        app01.set(**move)
        assert app01.preset.value == "custom", move
        assert not _published_shown(app01) and "C / a" not in app01.readout.value, move
        assert "no published" in app01.readout.value and "moved away from pythia-160m" in app01.status.value
    # choosing "custom" by hand keeps the menu on custom even on a preset's values
    app01.set(preset=PYTHIA)
    app01.preset.value = "custom"
    app01.m.value = 3
    assert app01.preset.value == "custom" and not _published_shown(app01)


@pytest.mark.parametrize("typed", [50304, 128256, 262144, 257])
def test_01_vocab_lands_exactly_on_a_typed_value(app01, typed):
    """Item 2: the |V| box holds the typed integer; the log slider's snapped echo changes nothing."""
    app01.set(preset="custom", dtype="paper")
    app01.vocab_box.value = typed
    assert app01.values["vocab_size"] == typed and f"|V| = {typed:,}" in app01.status.value
    s = app01.vocab
    snapped = 10 ** (s.min + round((math.log10(typed) - s.min) / s.step) * s.step)   # the browser's grid
    assert round(snapped) != typed or typed == 257
    s.value = snapped
    assert app01.values["vocab_size"] == typed and app01.vocab_box.value == typed


def test_01_fp16_is_the_papers_choice_one_button(app01):
    """Item 2: no separate "float16" and "paper (fp16)": one button, and fp16 names map to it."""
    labels = [label for label, _ in app01.dtype.options]
    values = [v for _, v in app01.dtype.options]
    assert "float16" not in values and bounds.PAPER_DTYPE in values
    assert any("fp16" in lab and "[A]" in lab for lab in labels)
    assert max(len(lab) for lab in labels) <= 10                     # nothing cut at 84 px per button
    app01.set(preset=PYTHIA, dtype="float16")
    assert app01.dtype.value == bounds.PAPER_DTYPE and app01.preset.value == PYTHIA


# ---------------------------------------------------------------------------------------------
# 03 · predicted vs measured
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app03():
    pytest.importorskip("torch")
    from accesslib.apps.nb03_predicted import PredictedApp

    return PredictedApp(canvas="agg")


def test_03_q1_default_ratio(app03):
    v = app03.values
    assert app03.bundle["model"] == "tiny-d32-v257"
    a, C = v["measured_slope"], v["slopes"]["ball"]
    assert round(C, 1) == 48.0 and round(a, 1) == 2.2 and round(C / a) == 22   # "about 22×"
    assert C / a > 13.5                                              # looser than [A]'s 5.5-13.5
    assert round(v["fit"]["r2"], 2) == 0.99
    assert f"{C / a:.1f}×" in app03.readout.value
    # "the label reads converged": three times the steps moved n50 by less than its standard error
    assert v["caveats"]["budget"] == "converged" and "step budget ×3: <b>converged</b>" in app03.readout.value
    assert all(r["moved"] is False for r in app03.bundle["budget_check"]["ms"].values())
    assert app03.bundle["budget_check"]["factor"] == 3
    says(answers("03-predicted-vs-measured.ipynb"), "the label reads *converged* (three times the steps moved n50 by "
         "less than its standard error)")


def test_03_q2_precision_moves_every_bound_not_the_points(app03):
    y_meas = app03.art["measured"].lines[0].get_ydata().copy()
    before = {k: line.get_ydata().copy() for k, line in app03.art["bounds"].items()}
    dotted = "box+cells, measured ε"                                  # "except the dotted one"
    assert dotted in before and set(app03.values["slopes"]) == set(before) - {dotted}
    pub_before = {k: line.get_ydata().copy() for k, line in app03.art_pub["bounds"].items()}
    try:
        for rel in (2.0**-8, 2.0**-24):
            app03.eps_rel.value = rel
            assert all(not np.allclose(app03.art["bounds"][k].get_ydata(), y) for k, y in before.items() if k != dotted)
            assert np.array_equal(app03.art["bounds"][dotted].get_ydata(), before[dotted])
            assert all(not np.allclose(app03.art_pub["bounds"][k].get_ydata(), y) for k, y in pub_before.items())
            assert np.array_equal(app03.art["measured"].lines[0].get_ydata(), y_meas)
    finally:
        app03.eps_rel.value = 2.0**-11
    says(answers("03-predicted-vs-measured.ipynb"), "(they all count ε-cells), except the dotted one, whose ε is measured")


def test_03_q3_r_moves_only_box_and_ellipsoid(app03):
    r0 = app03.r.value
    s0 = dict(app03.values["slopes"])
    app03.r.value = 2 * r0
    s1 = app03.values["slopes"]
    for k in ("ball", "cone", "cells"):
        assert s1[k] == pytest.approx(s0[k], rel=1e-12), k
    for k in ("box", "ellipsoid"):
        assert s1[k] < s0[k] * 0.97, k                               # "a lower line"
    assert app03.values["measured_eps"]["C"] == pytest.approx(app03.art["bounds"]["box+cells, measured ε"].get_ydata()[-1] / 5)
    app03.r.value = r0


def test_03_q4_tiny_model_and_pythia_each_below_its_own_bound(app03):
    from accesslib.results import reference

    pythia = reference.model(PYTHIA)
    pts = dict(zip(*[next(p for p in reference.n50_points() if p["model"] == PYTHIA and p["dataset"] == "PG19")[k]
                     for k in ("m", "n50")]))
    assert round(pythia["slope_pg19"]) == 90 and pts[5] == 450       # "about 90 ... n50 ≈ 450 at m = 5"
    C_pythia = app03.values["published_slopes"]["pythia-160m"]
    assert round(C_pythia) == 590 and round(app03.values["slopes"]["ball"]) == 48
    a = app03.values["measured_slope"]
    assert round(a) == 2
    assert C_pythia / pythia["slope_pg19"] > 5 and app03.values["slopes"]["ball"] / a > 5


def test_03_q5_smollm2_carries_its_caveats():
    pytest.importorskip("torch")
    from accesslib.apps.nb03_predicted import PredictedApp

    app = PredictedApp(canvas="agg", model="smollm2-135m")
    v = app.values
    assert round(v["slopes"]["ball"] / v["measured_slope"]) == 62    # "about 62×"
    cav = v["caveats"]
    assert cav["source"] == "tokens" and cav["max_steps"] == 300
    assert (cav["strings_min"], cav["strings_max"]) == (6, 6) and cav["slowest"] == 289
    assert cav["budget_limited"] and cav["budget"] == "budget-limited" and cav["budget_factor"] == 5
    chk = app.bundle["budget_check"]
    r = chk["ms"]["1"]
    assert chk["settings"]["max_steps"] == [300, 1500] and r["moved"] is True
    assert (round(r["n50"], 1), round(r["n50_3x"], 1)) == (10.6, 16.8)      # "moves from 10.6 to 16.8"
    assert r["shift"] > 3               # "far beyond the standard errors": 3.2 combined stderr
    text = app.readout.value
    for words in ("random token ids", "at most 300 optimisation steps", "6 strings per length",
                  "step budget ×5: <b>budget-limited</b>", "m = 1: 10.6 with 300 steps, 16.8 with 1500",
                  "do not set C/a against [A]'s 5-20×"):
        assert words in html.unescape(text), words
    says(answers("03-predicted-vs-measured.ipynb"), "five times the steps (1500)",
         "from 10.6 to 16.8", "the label reads *budget-limited*", "the hollow markers right of m = 1",
         "tick **log y axis** to see them apart")
    # the hollow markers: 1,500 steps' 16.8 right of m = 1, apart from 500 steps' 10.9 on a log axis
    xs, ys = app.art["ladder"].lines[0].get_data()
    assert round(ys[-1], 1) == 16.8 and 1 < xs[-1] < 1.5

    def gap_px():
        app.fig.canvas.draw()
        pix = app.art["ax"].transData.transform(np.column_stack([xs, ys]))
        return abs(pix[-1, 1] - pix[0, 1])
    linear = gap_px()
    app.log_y.value = True
    assert gap_px() > 3 * linear and gap_px() > 10
    app.log_y.value = False
    # the caveat is the bundle's, not a blanket one: the default tiny model is not budget-limited
    app.model.value = "tiny-d32-v257"
    assert not app.values["caveats"]["budget_limited"] and "budget-limited" not in app.readout.value
    assert "limited by the step budget" not in app.readout.value
    assert "natural-text targets" in app.readout.value and "4-96 strings per length" in app.readout.value


def test_03_q6_the_measured_eps_takes_the_bound_most_of_the_way(app03):
    """Q6: the dotted line of tiny-d32-v257, box + cells at the measured effective ε."""
    assert app03.bundle["model"] == "tiny-d32-v257"
    me, a = app03.values["measured_eps"], app03.values["measured_slope"]
    geo = app03.bundle["geometry"]
    assert me["ok"] and me["line"] == "box+cells" and "a memory crammed with" in me["around"]
    assert round(100 * me["eps_rel"]) == 18 and f"{me['eps_rel']:.3g}" == "0.185"        # "about 18%"
    assert round(geo["eps"] / geo["r_inf"], 4) == 0.0005                                   # "2⁻¹¹ ≈ 0.0005"
    assert (round(geo["slopes"]["box+cells"], 1), round(me["C"], 1)) == (26.6, 6.9)       # "from 26.6 to 6.9"
    assert (round(me["ratio"], 1), round(geo["slopes"]["box+cells"] / a, 1)) == (3.2, 12.1) and round(a, 1) == 2.2
    assert round((geo["slopes"]["box+cells"] - me["C"]) / (geo["slopes"]["box+cells"] - a), 1) == 0.8   # "four fifths"
    assert f"{me['eps_rel_q10']:.3g}" == "0.0235" and round(me["C_range"][1], 1) == 13.5
    assert "box+cells, measured ε" in app03.art["labels"]
    assert f"at most {me['C_range'][1]:,.1f} at the 10% threshold (0.0235)" in app03.readout.value
    says(answers("03-predicted-vs-measured.ipynb"), "About four fifths of the way", "moves by about 18% (median "
         "ε_rel = 0.185, where fp16 gives 2⁻¹¹ ≈ 0.0005)",
         "falls from 26.6 to 6.9 tokens per vector, against a = 2.2: C/a = 3.2× instead of 12.1×",
         "(at the 10% threshold, 0.0235, C is at most 13.5)")


def test_03_figure_reads_at_a_glance(app03):
    """Item 3: the model's bounds and points on their own axes, [A]'s models apart, each bound
    line labelled where it ends (in its colour, labels apart), linear axes by default."""
    ax, ax_pub = app03.art["ax"], app03.art_pub["ax"]
    assert ax is not ax_pub and ax.get_yscale() == "linear" and ax_pub.get_yscale() == "linear"
    # the published points are on the right panel only, under the published models' own bounds
    assert all(line.axes is ax_pub for line in app03.art_pub["points"].values())
    assert not any("[A]" in (line.get_label() or "") for line in ax.get_lines())
    top_pub = max(line.get_ydata()[-1] for line in app03.art_pub["bounds"].values())
    assert all(max(line.get_ydata()) < top_pub for line in app03.art_pub["points"].values())
    # one label per line, at its end, in its colour, far enough apart to read
    labels = app03.art["labels"]
    assert set(app03.values["slopes"]) <= set(labels)
    for name, line in app03.art["bounds"].items():
        t = labels[name]
        assert t.get_text().startswith(name) and t.get_color() == line.get_color()
        assert t.get_position()[0] >= line.get_xdata()[-1]
    ys = sorted(t.get_position()[1] for t in labels.values())
    assert min(np.diff(ys)) >= 0.06
    # "log y axis" is a choice; the toggle hides [A]'s panel and widens the model's
    app03.log_y.value = True
    assert ax.get_yscale() == "log" and ax_pub.get_yscale() == "log"
    app03.log_y.value = False
    w = ax.get_position().width
    app03.show_published.value = False
    assert not ax_pub.get_visible() and ax.get_position().width > 1.5 * w
    app03.show_published.value = True
    assert ax_pub.get_visible()


# ---------------------------------------------------------------------------------------------
# 04 · what sets the slope
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app04():
    pytest.importorskip("torch")
    from accesslib.apps.nb04_slope import SlopeApp

    return SlopeApp(canvas="agg")


def test_04_q1_a_grows_slower_than_d(app04):
    by_d, _ = app04._groups(app04.values["rows"])
    assert [r["d"] for r in by_d] == [32, 64, 128]
    a = [r["slope"] for r in by_d]
    assert [round(x, 1) for x in a] == [2.2, 4.0, 5.9]
    assert [round(a[1] / a[0], 1), round(a[2] / a[1], 1)] == [1.8, 1.5]
    assert [round(r["ratio"]) for r in by_d] == [22, 24, 33]


def test_04_q2_box_does_not_make_the_ratio_more_constant(app04):
    app04.bound.value = "ball"
    ball = {r["model"]: r["C"] for r in app04.values["rows"]}
    spread_ball = app04.values["ratio_spread"]
    app04.bound.value = "box"
    spread_box = app04.values["ratio_spread"]
    assert (round(spread_ball, 2), round(spread_box, 2)) == (3.45, 3.47)
    assert f"factor {spread_box:.2f}" in app04.readout.value
    for r in app04.values["rows"]:
        assert 0.05 <= 1 - r["C"] / ball[r["model"]] <= 0.09, r["model"]   # "5-9% below C_ball"
    app04.bound.value = "ball"


def test_04_q3_float32_scales_every_C_alike(app04):
    app04.bound.value, app04.dtype.value = "ball", "paper"
    rows16, spread16 = app04.values["rows"], app04.values["ratio_spread"]
    app04.dtype.value = "float32"
    factor = math.log1p(2 * 2.0**24) / math.log(4097)
    assert round(factor, 1) == 2.1
    for r16, r32 in zip(rows16, app04.values["rows"]):
        assert r32["C"] == pytest.approx(factor * r16["C"])
    assert app04.values["ratio_spread"] == pytest.approx(spread16)
    app04.dtype.value = "paper"


# ---------------------------------------------------------------------------------------------
# 08 · unbounded context
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app08():
    from accesslib.apps.nb08_meanfield import MeanFieldApp

    return MeanFieldApp(canvas="agg")


def test_08_q1_duplicating_and_permuting_changes_nothing(app08):
    for k in range(1, 6):
        for permute in (False, True):
            app08.k.value, app08.permute.value = k, permute
            assert app08.max_diff < 1e-13, (k, permute)             # "float round-off (about 1e-15)"
            assert "the same" in app08.readout.value
    assert app08.outputs[3] == 5 * app08.outputs[2]                   # 5 times longer


def test_08_q2_positions_or_a_mask_break_it(app08):
    app08.k.value, app08.permute.value = 2, True
    for switch in (app08.positions, app08.causal):
        switch.value = True
        assert app08.max_diff > 1e-3 and "different" in app08.readout.value
        switch.value = False
    assert app08.max_diff < 1e-13


def test_08_q3_convergence_like_one_over_sqrt_n(app08):
    c = app08.convergence
    logn = np.log(np.asarray(c["lengths"], float))
    for key in ("out_dist", "tv"):
        slope = np.polyfit(logn, np.log(np.asarray(c[key], float).mean(1)), 1)[0]
        assert abs(slope + 0.5) < 0.1, (key, slope)                 # "roughly like 1/sqrt(N)"


def test_03_q7_gemma_against_the_published_slope():
    """Q7: Gemma-3-270M, measured at m = 1 only under [A]'s protocol: n50 against [A]'s slope and
    against its own bounds (n*/n50), and what the budget label covers."""
    pytest.importorskip("torch")
    from accesslib.apps.nb03_predicted import PredictedApp
    from accesslib.results import bundles
    from accesslib.results.bundles import single_point

    app = PredictedApp(canvas="agg", model="gemma-3-270m")
    v, b = app.values, app.bundle
    assert [c["m"] for c in b["curves"]] == [1] and not (b.get("slope") or {}).get("slope")   # "m = 1 only"
    m, n50, se = single_point(b)
    assert (round(n50, 1), round(se, 1)) == (9.5, 1.0)
    assert b["source"] == "glove100k" and b["protocol"] == "paper" and b["settings"]["add_special_tokens"]
    assert b["settings"]["max_steps"] == 3000 and b["settings"]["patience"] == 500
    pm = v["published_match"]
    assert pm["slope"] == 22.97 and n50 < pm["slope"] / 2 and round(n50 / pm["slope"], 2) == 0.42
    ball = v["slopes"]["ball"]
    assert (round(ball, 1), round(ball / n50, 1)) == (426.7, 44.7)
    me = v["measured_eps"]
    assert me["line"] == "box+cells" and f"{me['eps_rel']:.3g}" == "0.0243"
    assert (round(me["C"], 1), round(me["C"] / n50, 1)) == (40.5, 4.2)
    assert "of the bundle's own run" in me["around"]
    assert v["caveats"]["budget"] == "budget-limited"
    assert v["caveats"]["budget_text"].startswith("Steps checked, patience not: with 3x the steps at the same patience")
    lad = {r["max_steps"]: r for r in b["budget_ladder"]["rungs"]}
    assert (round(lad[1000]["n50"], 1), round(lad[1000]["stderr"], 1)) == (9.0, 0.8)
    assert bundles.own_budget_status(b)[0] == "inconclusive"      # its own check: the steps only
    (twin,) = bundles.second_samples(b)                           # the same 36 strings, run again
    assert sum(sum(c["totals"]) for c in twin["curves"]) == 36 and twin["read_from"]["max_steps"] == 9000
    assert twin["settings"]["max_steps"] == 3000 and twin["settings"]["patience"] == 500
    chk = twin["budget_check"]
    assert chk["settings"]["max_steps"] == [3000, 9000] and chk["settings"]["patience"] == [500, 1500]
    r = chk["ms"]["1"]
    assert (round(r["n50"], 1), round(r["stderr"], 1), round(r["n50_3x"], 1), round(r["stderr_3x"], 1),
            r["moved"]) == (11.4, 1.2, 19.1, 1.5, True)
    assert sum(r["open_3x"]) == 0 and (round(r["n50_3x"] / pm["slope"], 2), round(n50 / pm["slope"], 2)) == (0.83, 0.42)
    # the budget map of that run: at 9,000 steps n50 grows with the patience, no string cut by the steps
    (mp,) = b["budget_maps"]
    at = mp["cells"][mp["steps"].index(9000)]
    assert [round(at[mp["patiences"].index(p)]["n50"], 1) for p in (500, 1000, 1500)] == [11.4, 17.3, 19.1]
    assert at[mp["patiences"].index(1500)]["cut_unknown"] == 0
    text = html.unescape(app.readout.value)
    for words in ("ratio n*/n50 = 44.7×", "(n*/n50 at m = 1: 4.2×)", "slope 22.97",
                  "n50 at m = 1 is ×0.42 their slope × m = 23.0"):
        assert words in text.replace("<b>", "").replace("</b>", ""), words
    says(answers("03-predicted-vs-measured.ipynb"), "It was measured at m = 1 only",
         "n50 = 9.5 ± 1.0, less than half of [A]'s slope of 22.97 (×0.42 of their line at m = 1",
         "The ball bound there is 426.7, 44.7 times the n50; at the measured ε (0.0243·r∞) box+cells gives 40.5, 4.2 times.",
         "The label reads *budget-limited*. Its own check is only of the steps (1000 steps give 9.0 ± 0.8, at the "
         "same patience of 500), but a second run of the same 36 strings with three times [A]'s steps and patience "
         "(the orange squares at m = 1) reads [A]'s 3000 / 500 as 11.4 ± 1.2 and 9000 / 1500 as 19.1 ± 1.5",
         "With three times it, n50 is 0.83 of [A]'s slope instead of 0.42, so most of the distance to their figure "
         "is the budget; its budget map (below: pick gemma-3-270m there) shows the patience binding, not the steps.")


def test_03_q8_smollm2_remeasured_under_the_published_protocol():
    """Q8: the orange squares on smollm2-135m are its re-measurements under [A]'s protocol: with [A]'s
    words, 9000 / 1500 with 3000 / 500 and 1000 / 500 read from the same strings (budget-limited);
    with random tokens at [A]'s patience, 9000 steps cramming nothing more than 3000 (inconclusive),
    and 9000 / 1500 moving n50 again (budget-limited); [A]'s 3000 / 500 over m = 1..3 on both
    sources, each slope a dashed line."""
    pytest.importorskip("torch")
    from accesslib.apps.nb03_predicted import PredictedApp
    from accesslib.results.bundles import budget_status

    app = PredictedApp(canvas="agg", model="smollm2-135m")
    rec, tok = (next(r for r in app.bundle["remeasured"] if r["source"] == s) for s in ("glove100k", "tokens"))
    assert rec["protocol"] == "paper" and rec["source"] == "glove100k"                  # [A]'s protocol, [A]'s list
    assert (rec["settings"]["max_steps"], rec["settings"]["patience"]) == (9000, 1500)   # three times [A]'s
    assert rec["settings"]["first_token_as_input"] and rec["settings"]["patience_on"] == "accuracy"   # [A]'s layout
    rungs = {(r["max_steps"], r["patience"]): r for r in rec["budget_ladder"]["rungs"]}
    assert sorted(rungs) == [(1000, 500), (3000, 500), (9000, 1500)]
    assert [rungs[b].get("derived_from") for b in sorted(rungs)] == [9000, 9000, None]   # read from the run's strings
    assert [round(rungs[b]["n50"], 1) for b in sorted(rungs)] == [18.7, 20.1, 30.7]
    a, b = rungs[(3000, 500)], rungs[(9000, 1500)]
    assert (b["n50"] - a["n50"]) / math.hypot(a["stderr"], b["stderr"]) > 3     # "far beyond the standard errors"
    assert budget_status(rec)[0] == "budget-limited"
    shipped = next(c for c in app.bundle["curves"] if c["m"] == 1)["n50"]
    n50s = [rungs[b]["n50"] for b in sorted(rungs)]
    assert round(shipped, 1) == 10.6 and (round(min(n50s) / shipped, 1), round(max(n50s) / shipped, 1)) == (1.8, 2.9)
    assert rec["source"] != app.bundle["source"] and rec["settings"]["max_steps"] > app.bundle["settings"]["max_steps"]
    # drawn left of m = 1, apart on a log axis
    xs, ys = app.art["remeasured"].lines[0].get_data()
    assert sorted(round(y, 1) for x, y in zip(xs, ys) if 0 < x < 1) == [10.5, 12.8, 15.6, 18.7, 20.1, 30.7]
    # the three lowest: random tokens under [A]'s protocol, the same strings in two runs of 9000 steps,
    # with [A]'s patience of 500 and with 1500
    toks = sorted((r for r in app.bundle["remeasured"] if r["source"] == "tokens" and not r.get("read_from")),
                  key=lambda r: r["settings"]["patience"])
    assert [(t["protocol"], t["settings"]["max_steps"], t["settings"]["patience"], t.get("seed")) for t in toks] == [
        ("paper", 9000, 500, tok.get("seed")), ("paper", 9000, 1500, tok.get("seed"))]
    assert toks[0] is tok
    trungs = {r["max_steps"]: r for r in tok["budget_ladder"]["rungs"]}
    assert {r["patience"] for r in trungs.values()} == {500}
    assert [round(trungs[k]["n50"], 1) for k in (1000, 3000, 9000)] == [10.5, 12.8, 12.8]
    assert trungs[3000]["successes"] == trungs[9000]["successes"]                    # nothing more crammed
    long = {(r["max_steps"], r["patience"]): r for r in toks[1]["budget_ladder"]["rungs"]}
    assert [round(long[k]["n50"], 1) for k in ((1000, 500), (3000, 500), (9000, 1500))] == [10.5, 12.8, 15.6]
    assert long[(3000, 500)]["successes"] == trungs[3000]["successes"]               # the same strings, read alike
    labels = [t.get_text() for x, t in zip(xs, app.art["remeasured_texts"]) if x < 1]
    assert [lab for lab in labels if lab.startswith("random tokens")] == [
        "random tokens, 1,000 / 500", "random tokens, 3,000 / 500 = 9,000 / 500", "random tokens, 9,000 / 1,500"]
    assert budget_status(tok)[0] == "inconclusive" and "patience was not tripled" in budget_status(tok)[1]
    assert budget_status(toks[1])[0] == "budget-limited"
    # the square left of m = 2: [A]'s 3000 / 500 at m = 1 and 2, read from the same run, and its slope
    read, tread = (next(r for r in app.bundle["remeasured"] if r.get("read_from") and r["source"] == s)
                   for s in ("glove100k", "tokens"))
    assert (read["source"], read["settings"]["max_steps"], read["settings"]["patience"]) == ("glove100k", 3000, 500)
    assert (read["read_from"]["max_steps"], read["read_from"]["patience"], read["read_from"]["undecided_ms"]) == (
        9000, 1500, [])                                     # 9000 / 1500 told at every m
    c1, c2, c3 = sorted(read["curves"], key=lambda c: c["m"])
    assert (c1["successes"], c1["n50"]) == (rungs[(3000, 500)]["successes"], pytest.approx(rungs[(3000, 500)]["n50"]))
    assert round(c2["n50"], 1) == 42.9 and c2["lengths"] == [24, 34, 46, 62, 82]
    assert round(c3["n50"], 1) == 62.5 and c3["lengths"] == [34, 46, 62, 82, 108]
    assert c3["successes"] == [6, 6, 3, 0, 0] and c3["totals"] == [6] * 5
    sl = read["slope"]
    assert sl["slope"] == pytest.approx(np.polyfit([1, 2, 3], [c1["n50"], c2["n50"], c3["n50"]], 1)[0])
    assert (round(sl["slope"], 1), round(sl["slope_stderr"], 1), round(sl["r2"], 2), sl["n_points"]) == (21.2, 2.3, 1.0, 3)
    assert round(app.values["slopes"]["ball"] / sl["slope"]) == 21 and round(app.values["slopes"]["ball"], 1) == 443.5
    assert (f"Slope a = {sl['slope']:.2f} ± {sl['slope_stderr']:.2f}, ball bound C/a = "
            f"<b>{app.values['slopes']['ball'] / sl['slope']:.1f}×</b>") in app.readout.value
    chk = read["budget_check"]["ms"]
    assert chk["2"]["moved"] is True and (round(chk["2"]["n50_3x"], 1), round(chk["2"]["stderr_3x"], 1)) == (57.1, 3.9)
    assert round(chk["2"]["shift"], 1) == 2.5 and chk["2"]["successes_3x"] == [6, 6, 5, 2, 0]
    assert chk["3"]["moved"] is True and (round(chk["3"]["n50_3x"], 1), round(chk["3"]["stderr_3x"], 1)) == (86.2, 8.2)
    assert round(chk["3"]["shift"], 1) == 2.6 and chk["3"]["successes_3x"] == [6, 6, 5, 2, 2]
    # the words run's own bundle at 9000 / 1500 (it has finished): its slope over m = 1..3
    words9 = next(r for r in app.bundle["remeasured"] if r["origin"].endswith("/smol-glove-9k"))
    assert [round(c["n50"], 1) for c in sorted(words9["curves"], key=lambda c: c["m"])] == [30.7, 57.1, 86.2]
    w9 = words9["slope"]
    assert (round(w9["slope"], 1), round(w9["slope_stderr"], 1)) == (27.8, 4.3)
    assert round(app.values["slopes"]["ball"] / w9["slope"]) == 16
    assert round(2 * chk["2"]["n50_3x"] - 30.7, 1) == 83.5 < chk["3"]["n50_3x"]   # above the line, as tokens
    assert round(chk["1"]["shift"], 1) == 3.7                       # "20.1 to 30.7 on words, 3.7 combined ..."
    assert budget_status(read)[0] == "budget-limited"
    # m = 3 lies below the line through m = 1 and 2
    assert c3["n50"] < 2 * c2["n50"] - c1["n50"] and round(2 * c2["n50"] - c1["n50"], 1) == 65.7
    at_2 = [(round(y, 1), t.get_text()) for x, y, t in zip(xs, ys, app.art["remeasured_texts"]) if 1 < x < 2]
    assert sorted(at_2) == [(27.0, "random tokens, 3,000 / 500"), (32.2, "random tokens, 9,000 / 1,500"),
                            (42.9, "[A]'s words, 3,000 / 500"), (57.1, "[A]'s words, 9,000 / 1,500")]
    # the lower square left of m = 2 and the one left of m = 3: random tokens, [A]'s 3000 / 500 read from
    # the tokens run at m = 1, 2 and 3
    assert (tread["settings"]["max_steps"], tread["settings"]["patience"], tread.get("seed")) == (3000, 500, tok.get("seed"))
    assert (tread["read_from"]["max_steps"], tread["read_from"]["patience"], tread["read_from"]["undecided_ms"]) == (
        9000, 1500, [])
    t1, t2, t3 = sorted(tread["curves"], key=lambda c: c["m"])
    assert (t1["successes"], t1["n50"]) == (long[(3000, 500)]["successes"], pytest.approx(long[(3000, 500)]["n50"]))
    assert round(t2["n50"], 1) == 27.0 and t2["lengths"] == [12, 17, 24, 32, 42, 54]
    assert round(t3["n50"], 1) == 35.5 and t3["lengths"] == [17, 24, 32, 42, 54, 70]
    assert t3["successes"] == [6, 6, 4, 1, 0, 0] and t3["totals"] == [6] * 6
    tsl = tread["slope"]
    fit = np.polyfit([1, 2, 3], [t1["n50"], t2["n50"], t3["n50"]], 1)
    assert tsl["slope"] == pytest.approx(fit[0]) and tsl["n_points"] == 3
    assert (round(tsl["slope"], 1), round(tsl["slope_stderr"], 1), round(tsl["r2"], 2)) == (11.4, 1.4, 0.98)
    # its stderr is the one the n50 stderrs give (as `store ladder` says it); the residual one is kept
    assert tsl["stderr_from"] == "n50 stderrs" and tsl["slope_stderr"] == pytest.approx(
        math.hypot(t1["n50_stderr"], t3["n50_stderr"]) / 2)
    assert round(tsl["slope_stderr_residual"], 2) == 1.63
    assert round(app.values["slopes"]["ball"] / tsl["slope"]) == 39
    # m = 3 lies below the line through m = 1 and 2
    assert t3["n50"] < 2 * t2["n50"] - t1["n50"] and round(2 * t2["n50"] - t1["n50"], 1) == 41.1
    assert round(tread["budget_check"]["ms"]["1"]["shift"], 1) == 1.4        # "12.8 to 15.6 on tokens, 1.4"
    tchk = tread["budget_check"]["ms"]["2"]
    assert tchk["moved"] is True and round(tchk["n50_3x"], 1) == 32.2 and round(tchk["shift"], 1) == 1.7
    tchk3 = tread["budget_check"]["ms"]["3"]
    assert tchk3["moved"] is True and round(tchk3["n50_3x"], 1) == 56.4 and round(tchk3["shift"], 1) == 3.9
    assert "m = 3: 35.5 with 3000 steps, 56.4 with 9000" in budget_status(tread)[1]
    at_3 = [(round(y, 1), t.get_text()) for x, y, t in zip(xs, ys, app.art["remeasured_texts"]) if 2 < x < 3]
    assert sorted(at_3) == [(35.5, "random tokens, 3,000 / 500: a = 11.4 ± 1.4"),
                            (56.4, "random tokens, 9,000 / 1,500: a = 20.4 ± 2.5"),
                            (62.5, "[A]'s words, 3,000 / 500: a = 21.2 ± 2.3"),
                            (86.2, "[A]'s words, 9,000 / 1,500: a = 27.8 ± 4.3")]
    # the tokens run's own 9000 / 1500 over m = 1..3 (it has finished): the same strings as tread's
    (t9,) = [t for t in toks if t["settings"]["patience"] == 1500]
    u1, u2, u3 = sorted(t9["curves"], key=lambda c: c["m"])
    assert [round(c["n50"], 1) for c in (u1, u2, u3)] == [15.6, 32.2, 56.4]
    assert [c["lengths"] for c in (u1, u2, u3)] == [t["lengths"] for t in (t1, t2, t3)]
    assert u2["n50"] == pytest.approx(tchk["n50_3x"]) and u3["n50"] == pytest.approx(tchk3["n50_3x"])
    usl = t9["slope"]
    assert (round(usl["slope"], 1), round(usl["slope_stderr"], 1), usl["stderr_from"]) == (20.4, 2.5, "n50 stderrs")
    assert round(app.values["slopes"]["ball"] / usl["slope"]) == 22
    up = (usl["slope"] - tsl["slope"]) / math.hypot(usl["slope_stderr"], tsl["slope_stderr"])
    assert round(up, 1) == 3.2 and round(2 * u2["n50"] - u1["n50"], 1) == 48.9 < u3["n50"]   # above the line
    assert abs(usl["slope"] - sl["slope"]) < math.hypot(usl["slope_stderr"], sl["slope_stderr"])  # "about what words reach"
    # each slope drawn as a dashed line over the m it was fitted on, the smaller budget first
    words_line, tokens_line, words9_line, tokens9_line = app.art["remeasured_fits"]
    for line, rec, (lo, hi) in ((words_line, read, (1, 3)), (tokens_line, tread, (1, 3)), (words9_line, words9, (1, 3)),
                                (tokens9_line, t9, (1, 3))):
        lx, ly = line.get_data()
        assert (lx[0], lx[-1]) == (lo, hi)
        assert ly == pytest.approx(rec["slope"]["slope"] * lx + rec["slope"]["intercept"])
    # words the upper dashed line, tokens the lower
    both = np.linspace(1, 3, 21)
    assert np.all(sl["slope"] * both + sl["intercept"] > tsl["slope"] * both + tsl["intercept"])
    assert budget_status(tread)[0] == "budget-limited"
    # words against tokens, both over m = 1..3: "nearly twice", 3.7 combined standard errors apart
    apart = (sl["slope"] - tsl["slope"]) / math.hypot(sl["slope_stderr"], tsl["slope_stderr"])
    assert 1.8 < sl["slope"] / tsl["slope"] < 2 and round(apart, 1) == 3.7
    labels_of = {r["source"]: budget_status(r)[0] for r in app.bundle["remeasured"] if r is not tok}
    assert set(labels_of.values()) == {"budget-limited"}                 # "every other label"
    says(answers("03-predicted-vs-measured.ipynb"), "orange squares left of m = 1, 2 and 3",
         "those n50 are the **orange squares** left of each m, and the slope of each re-measurement over "
         "several m a **dashed orange line**; the readout leads with those slopes",
         "Each run had 9000 steps and patience 1500 (three times [A]'s), and [A]'s 3000 / 500 and 1000 / 500 "
         "are read from the same strings",
         "n50 at m = 1 is 18.7 with 1000 / 500, 20.1 with [A]'s 3000 / 500 and 30.7 with 9000 / 1500: "
         "1.8 to 2.9 times the shipped 10.6",
         "the upper squares left of m = 2 and 3 read 42.9 and 62.5, so over m = 1, 2, 3 this model packs "
         "a = 21.2 ± 2.3 tokens per vector (R² = 1.00; the upper dashed line), C_ball / a about 21, just outside "
         "[A]'s 5-20×",
         "(the three lowest squares left of m = 1): 10.5 with 1000 / 500 and 12.8 with 3000 / 500",
         "9000 steps at [A]'s patience of 500 cram nothing more",
         "*inconclusive*, the steps are checked, the patience is not), but 9000 / 1500 gives 15.6",
         "the lower squares left of m = 2 and 3 read 27.0 and 35.5: a = 11.4 ± 1.4 random tokens per vector "
         "(R² = 0.98; the lower dashed line), C_ball / a about 39",
         "Every other label reads *budget-limited*",
         "moves n50 at m = 1 by more than its standard error (20.1 to 30.7 on words, 3.7 combined standard "
         "errors; 12.8 to 15.6 on tokens, 1.4). On words it puts m = 2 at 57.1 ± 3.9 and m = 3 at 86.2 ± 8.2, a "
         "slope of 27.8 ± 4.3 against 21.2 ± 2.3 (C_ball / a about 16)",
         "read 15.6, 32.2 and 56.4 at m = 1, 2, 3, a = 20.4 ± 2.5 tokens per vector (its dashed line), "
         "C_ball / a about 22",
         "On tokens it nearly doubles the slope, 11.4 ± 1.4 to 20.4 ± 2.5 (3.2 combined standard errors), most "
         "of it at m = 3 (35.5 to 56.4)",
         "m = 3 lies below the line through m = 1 and 2 on both sources (65.7 and 41.1)",
         "the squares named \"[A]'s words, 9,000 / 1,500\" read 30.7, 57.1 and 86.2 at m = 1, 2, 3, a = 27.8 ± "
         "4.3 tokens per vector (its dashed line), C_ball / a about 16",
         "at 9000 / 1500 m = 3 lies above it on both (83.5 on words, 48.9 on tokens)",
         "a vector holds nearly twice as many tokens of words as of random ids (21.2 ± 2.3 against 11.4 ± 1.4, "
         "3.7 combined standard errors apart)",
         "with three times its budget, random ids reach about what words reach under [A]'s")


@pytest.fixture(scope="module")
def map03():
    pytest.importorskip("torch")
    from accesslib.apps.nb03_predicted import BudgetMapApp

    return BudgetMapApp(canvas="agg")


def _cell(app, steps, patience):
    mp = app.values["map"]
    return mp["cells"][mp["steps"].index(steps)][mp["patiences"].index(patience)]


def _column(app, patience):
    mp = app.values["map"]
    return [(s, row[mp["patiences"].index(patience)]) for s, row in zip(mp["steps"], mp["cells"])]


def test_03_q9_at_the_papers_patience_more_steps_do_not_move_n50_at_m1(map03):
    """Q9: words, m = 1: at patience 500 n50 is 20.1 from 2,000 steps up to 9,000; [A]'s cap stopped
    1 of 30 strings still gaining, which did not cram later; tokens: the cap stopped none of 42 and
    n50 is 12.8 from 2,000 steps on, as the separate 9000 / 500 run measured; n50 by patience at
    9,000 steps."""
    app = map03
    assert app.model.value == "smollm2-135m"
    app.source.value, app.m.value = "glove100k", 1
    mp = app.values["map"]
    assert (mp["source"], mp["m"], tuple(mp["run"]), mp["finished"], mp["kept"]) == ("glove100k", 1, (9000, 1500), 30, 0)
    col = _column(app, 500)
    assert [round(c["n50"], 1) for s, c in col if s >= 2000] == [20.1] * (len(col) - 2)
    assert [s for s, _ in col][:2] == [500, 1000] and round(col[1][1]["n50"], 1) < 20.1
    assert mp["settled"][mp["patiences"].index(500)] == 2000
    ours = _cell(app, 3000, 500)
    assert (ours["cut"], ours["cut_unknown"], sum(mp["totals"])) == (1, 0, 30)
    assert _cell(app, 9000, 500)["successes"] == ours["successes"]        # that string did not cram later
    assert ("[A]'s 3,000 / 500: its 3,000-step cap stopped 1 of the 30 strings while still gaining accuracy "
            "(within their patience of 500); it did not cram with more steps (n50 the same up to 9,000)") in app.values["lines"]
    assert [round(_cell(app, 9000, p)["n50"], 1) for p in (100, 250, 500, 1000, 1500)] == [14.1, 15.1, 20.1, 24.4, 30.7]
    assert "1 of the 30 strings" in app.readout.value
    app.source.value = "tokens"
    assert app.m.value == 1
    tok = app.values["map"]
    assert (tok["finished"], tok["kept"], sum(tok["totals"])) == (42, 0, 42)
    assert (_cell(app, 3000, 500)["cut"], _cell(app, 3000, 500)["cut_unknown"]) == (0, 0)
    assert tok["settled"][tok["patiences"].index(500)] == 2000 and round(_cell(app, 3000, 500)["n50"], 1) == 12.8
    assert [round(_cell(app, 9000, p)["n50"], 1) for p in (250, 500, 1000, 1500)] == [10.1, 12.8, 13.5, 15.6]
    # the separate run of question 8 (9,000 steps, patience 500) measured the same 12.8
    sep = next(r for r in app.bundle["remeasured"] if r["source"] == "tokens" and not r.get("read_from")
               and r["settings"]["patience"] == 500)
    assert sep["settings"]["max_steps"] == 9000
    assert round(next(c for c in sep["curves"] if c["m"] == 1)["n50"], 1) == 12.8
    says(answers("03-predicted-vs-measured.ipynb"), "n50 is 20.1 from there up to 9,000",
         "[A]'s 3,000-step cap stopped 1 of the 30 strings", "the cap stopped none of the 42 strings",
         "n50 stays 12.8 from 2,000 steps on", "measured the same 12.8", "14.1, 15.1, 20.1, 24.4 and 30.7 for patience "
         "100, 250, 500, 1,000 and 1,500 (random tokens: 10.1, 12.8, 13.5 and 15.6 for 250 to 1,500)")


def test_03_q10_at_the_papers_patience_its_step_cap_costs_nothing_measurable(map03):
    """Q10: [A]'s cap stopped 9 / 30 and 11 / 30 word strings at m = 2 and 3, 3 / 36 and 12 / 36
    token strings, all still gaining within patience 500; yet 9,000 steps at patience 500 cram none
    of them (each ran out of patience, none cut at 9,000) except one word string at m = 3 (n = 82),
    which moves n50 from 62.5 to 66.0 by +0.6 combined stderr; patience 100 and 250 settle by 2,000
    steps at every m; the slopes at patience 500 at 3,000 and 9,000 steps."""
    app = map03
    want = {("glove100k", 2): (9, 30), ("glove100k", 3): (11, 30), ("tokens", 2): (3, 36), ("tokens", 3): (12, 36)}
    stays = {("glove100k", 2): 42.9, ("tokens", 2): 27.0, ("tokens", 3): 35.5}
    for (source, m), (cut, total) in want.items():
        app.source.value, app.m.value = source, m
        mp = app.values["map"]
        cell, nine = _cell(app, 3000, 500), _cell(app, 9000, 500)
        assert (cell["cut"], cell["cut_unknown"], sum(mp["totals"])) == (cut, 0, total), (source, m)
        assert (nine["cut"], nine["cut_unknown"], sum(nine["open"])) == (0, 0, 0)     # all ran out of patience
        assert f"stopped {cut} of the {total} strings while still gaining accuracy" in app.readout.value
        if (source, m) in stays:
            assert nine["successes"] == cell["successes"]
            assert mp["settled"][mp["patiences"].index(500)] == 3000
            assert round(nine["n50"], 1) == round(cell["n50"], 1) == stays[source, m]
            assert "none of them crammed with more steps (n50 the same up to 9,000)" in app.readout.value
        else:                                               # words, m = 3: one more at n = 82
            gained = [b - a for a, b in zip(cell["successes"], nine["successes"])]
            assert gained == [0, 0, 0, 1, 0] and mp["lengths"][3] == 82
            shift = (nine["n50"] - cell["n50"]) / math.hypot(nine["stderr"], cell["stderr"])
            assert (round(cell["n50"], 1), round(nine["n50"], 1), round(shift, 1)) == (62.5, 66.0, 0.6)
            assert mp["settled"][mp["patiences"].index(500)] == 4500
            assert ("with more steps 1 of them crammed by 4,500 steps: n50 62.5 → 66.0 (+0.6 combined standard "
                    "errors), the same from there up to 9,000") in app.readout.value
    for source in ("glove100k", "tokens"):
        app.source.value = source
        for m in (1, 2, 3):
            app.m.value = m
            mp = app.values["map"]
            assert all(mp["settled"][mp["patiences"].index(p)] <= 2000 for p in (100, 250)), (source, m)
    app.source.value, app.m.value = "glove100k", 2
    assert round(_cell(app, 9000, 1500)["n50"], 1) == 57.1 and _cell(app, 9000, 1500).get("range") is None
    app.m.value = 3
    assert round(_cell(app, 9000, 1500)["n50"], 1) == 86.2 and _cell(app, 9000, 1500).get("range") is None
    app.m.value = 2
    s3, s9 = app.values["slopes"]
    assert s3.startswith("slope a over m = 1, 2, 3 at 3,000 steps, by patience: 11.8 ± 1.9 (100), 15.9 ± 2.3 (250), "
                         "21.2 ± 2.3 (500), ")
    assert s9.startswith("slope a over m = 1, 2, 3 at 9,000 steps, by patience: 11.8 ± 1.9 (100), 15.9 ± 2.3 (250), "
                         "23.0 ± 2.6 (500), 24.7 ± 3.4 (1,000), 27.8 ± 4.3 (1,500)") and "at 9,000 steps" in app.readout.value
    app.source.value = "tokens"
    assert round(_cell(app, 9000, 1500)["n50"], 1) == 32.2
    app.m.value = 3
    assert [round(_cell(app, 9000, p)["n50"], 1) for p in (500, 1000, 1500)] == [35.5, 50.1, 56.4]
    t3, t9 = app.values["slopes"]
    assert "11.4 ± 1.4 (500)" in t3 and t9.endswith("11.4 ± 1.4 (500), 18.3 ± 2.4 (1,000), 20.4 ± 2.5 (1,500)")
    says(answers("03-predicted-vs-measured.ipynb"), "At patience 500 it is 11.4 ± 1.4 on tokens with 3,000 steps "
         "and with 9,000, and 21.2 ± 2.3 against 23.0 ± 2.6 on words", "On words at 3,000 steps it grows with the "
         "patience: 11.8 (100), 15.9 (250), 21.2 (500)", "At 9,000 steps it grows too: on words 23.0 (500), "
         "24.7 (1,000), 27.8 (1,500), on tokens 11.4 (500), 18.3 (1,000), 20.4 (1,500)")
    says(answers("03-predicted-vs-measured.ipynb"), "Nothing measurable, at [A]'s own patience",
         "9 of the 30 word strings at m = 2 and 11 of 30 at m = 3, 3 of 36 and 12 of 36 on random tokens",
         "the run's 9,000 steps cram none of them at patience 500, except one word string at m = 3",
         "n50 stays 42.9 (words, m = 2), 27.0 and 35.5 (tokens, m = 2 and 3) from 3,000 steps up to 9,000",
         "the one more string (at n = 82) takes n50 from 62.5 to 66.0, +0.6 combined standard errors: within the error",
         "Patience 100 and 250 settle by 2,000 steps too, at every m, on both sources",
         "patience 1,500 puts m = 2 and 3 at 57.1 and 86.2 on words, and at 32.2 and 56.4 on tokens")


def test_03_q11_the_tiny_models_map_is_flat_in_both_directions(map03):
    """Q11: tiny-d32-v257 under [A]'s protocol, 9000 / 1500, 16 natural-text strings per length:
    m = 1: 6.6 at patience 500 from 300 steps, 6.8 at 1500, within one stderr; m = 2: 9.5 at both
    from 1000 steps; no cap stopped a string still gaining; only patience 30 and 100 lower n50."""
    app = map03
    app.model.value = "tiny-d32-v257"
    assert app.source.value == "natural" and [m for _, m in app.m.options] == [1, 2]
    app.m.value = 1
    mp = app.values["map"]
    assert (tuple(mp["run"]), set(mp["totals"]), mp["settings"]["lr"]) == ((9000, 1500), {16}, 0.01)
    p5, p15 = _cell(app, 9000, 500), _cell(app, 9000, 1500)
    assert (round(p5["n50"], 1), round(p15["n50"], 1)) == (6.6, 6.8)
    assert mp["settled"][mp["patiences"].index(500)] == 300
    assert abs(p15["n50"] - p5["n50"]) < min(p5["stderr"], p15["stderr"]) and round(p15["stderr"], 1) == 0.5
    low = [round(_cell(app, 9000, p)["n50"], 1) for p in (30, 100)]
    assert low == [5.4, 6.3] and all(v < p5["n50"] for v in low)
    for m in (1, 2):
        app.m.value = m
        mp = app.values["map"]
        for budget in ((3000, 500), (9000, 1500)):
            c = _cell(app, *budget)
            assert (c["cut"], c["cut_unknown"]) == (0, 0), (m, budget)
    assert [round(_cell(app, 9000, p)["n50"], 1) for p in (500, 1500)] == [9.5, 9.5]
    assert mp["settled"][mp["patiences"].index(500)] == mp["settled"][mp["patiences"].index(1500)] == 1000
    says(answers("03-predicted-vs-measured.ipynb"), "patience 500 gives n50 = 6.6 from 300 steps on, and patience "
         "1500 gives 6.8, within one standard error (± 0.5). At m = 2 both give 9.5 from 1,000 steps on",
         "neither [A]'s 3,000 nor the run's 9,000", "Only the shortest patiences (30 and 100) lower n50")
    app.model.value = "smollm2-135m"
