"""The "Things to try" of notebooks 02, 05, 06 and 07 as tests.

Each test drives an app as its exercise says and asserts what the answer in the notebook states;
where an answer quotes a number, the test computes it and finds the same words in the answer, so
neither the app nor the notebook can drift alone. Also: the first view of each page (02's shipped
curve, 05's stored measurement), 06's two marker kinds, and labels that stay inside the figures.
"""
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import texts_inside

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def answers(notebook: str) -> str:
    """The markdown of a notebook as one text, line breaks and indentation as single spaces."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return re.sub(r"\s+", " ", text)


def says(text: str, *phrases):
    for p in phrases:
        assert p in text, f"the notebook no longer says {p!r}"




# =============================================================================================
# 02 · cramming live
# =============================================================================================


@pytest.fixture
def store(tmp_path):
    from accesslib.results.store import ResultsStore
    return ResultsStore(tmp_path / "r.sqlite")


def _shipped_default():
    from accesslib.models import embedded
    from accesslib.results import bundles
    return bundles.load("cram", embedded.DEFAULT)


def test_02_opens_with_the_shipped_curve_labelled_until_run(store):
    """Item 4: a fresh page draws the default model's shipped curve, titled as shipped with its
    conditions; the loss label is not cut; Run replaces the curve by the reader's strings."""
    from accesslib.apps.base import human_date
    from accesslib.apps.nb02_cramming import CrammingApp
    app = CrammingApp(store=store, canvas="agg", fast=True)
    b = _shipped_default()
    assert app.origin == "shipped" and app.last_error is None
    assert sorted(app.curves) == [c["m"] for c in b["curves"]]
    for c in b["curves"]:   # the drawn markers are the stored counts; the fits are recomputed from them
        line = app.art_curve["series"][c["m"]]["eb"].lines[0]
        assert list(line.get_xdata()) == c["lengths"]
        assert list(line.get_ydata()) == pytest.approx([s / t for s, t in zip(c["successes"], c["totals"])])
        assert app.curves[c["m"]]["n50"] == pytest.approx(c["n50"], rel=1e-3)
    title = app.art_curve["ax"].get_title()
    totals = [t for c in b["curves"] for t in c["totals"]]
    for part in ("shipped curve, not your run", b["model"], "natural text", "fast protocol",
                 f"at most {b['settings']['max_steps']:,} steps", f"{min(totals)}-{max(totals)} strings per length",
                 f"made {human_date(b['created'])}"):
        assert part in title, part
    assert "2 December 2026" == human_date("2026-12-02T15:58:51+00:00")
    assert app.readout.value.startswith("<b>shipped</b> (not your run)")
    assert "Showing the curve shipped with the model" in app.status.value
    rows = app.data_rows()
    assert {r["origin"] for r in rows if r["panel"] == "accessibility"} == {"shipped bundle"}
    # every label of the figure is inside it (the loss axis label was cut before)
    assert app.art_loss["ax"].get_ylabel() == "loss (nats/token)" and texts_inside(app.fig) == 2
    # shipped curves are natural text: other targets show no stand-in
    app.source.value = "tokens"
    assert app.origin == "store" and app.curves == {} and app.art_curve["series"] == {}
    # Run: the shipped curve goes; the panel shows this run's strings
    app.lengths.value, app.samples.value, app.max_steps.value = "2", 1, 5
    app.start()
    assert app.wait(timeout=300) and app.last_error is None
    app.source.value = "natural"   # back to the shipped settings: the page now shows only measured strings
    assert app.origin == "store" and "shipped" not in app.art_curve["ax"].get_title()


def test_02_q1_the_defaults_give_a_cliff_near_five_tokens(store):
    """Q1: 'n50 ≈ 5 tokens for m = 1 (shipped: 5.4 ± 0.2, measured with the page's default
    settings); every 3-token string crammed, 1 in 8 at 7 tokens, none at 10'."""
    from accesslib.apps.nb02_cramming import CrammingApp
    app = CrammingApp(store=store, canvas="agg", fast=False)
    b = _shipped_default()
    # the shipped curve was measured with the page's default settings
    assert (app.source.value, app.protocol.value, app.max_steps.value) == (
        b["source"], b["protocol"], b["settings"]["max_steps"])
    c = app.curves[1]
    frac = {n: s / t for n, s, t in zip(c["lengths"], c["successes"], c["totals"])}
    assert frac[3] == 1.0 and frac[7] == 1 / 8 and frac[10] == 0.0
    assert f"m=1: n50 = {c['n50']:.1f} ± {c['n50_stderr']:.1f}" in app.readout.value
    says(answers("02-cramming-live.ipynb"),
         f"shipped: {c['n50']:.1f} ± {c['n50_stderr']:.1f}", "every string of 3 tokens is crammed",
         "1 in 8 at 7 tokens", "none at 10")


def test_02_q2_n50_grows_about_linearly_with_m(store):
    """Q2: the shipped n50 for m = 1..4 grow at every step, on a line (R² > 0.95)."""
    from accesslib.apps.nb02_cramming import CrammingApp
    from accesslib.theory.stats import fit_slope
    app = CrammingApp(store=store, canvas="agg", fast=False)
    ms = sorted(app.curves)
    n50 = [app.curves[m]["n50"] for m in ms]
    assert ms == [1, 2, 3, 4] and all(b > a for a, b in zip(n50, n50[1:]))
    fit = fit_slope(ms, n50)
    assert fit.r2 > 0.95 and 1.5 < fit.slope < 3
    says(answers("02-cramming-live.ipynb"), ", ".join(f"{v:.1f}" for v in n50) + " for m = 1..4",
         f"a slope of {fit.slope:.1f} tokens per vector", f"R² = {fit.r2:.2f}")


def test_02_q3_random_tokens_fit_fewer_tokens_than_natural_text(store):
    """Q3: with random tokens the default model crams fewer tokens: at the length where half the
    natural-text strings fit (shipped), fewer than half of the random-token strings do."""
    from accesslib.apps.nb02_cramming import CrammingApp
    app = CrammingApp(store=store, canvas="agg", fast=False)
    natural = app.curves[1]
    nat = {n: s / t for n, s, t in zip(natural["lengths"], natural["successes"], natural["totals"])}
    assert nat[5] == 0.5
    app.source.value, app.ms.value, app.lengths.value, app.samples.value = "tokens", "1", "5", 8
    app.start()
    assert app.wait(timeout=900) and app.last_error is None, app.last_error
    tok = app.curves[1]
    assert tok["lengths"] == [5] and tok["totals"] == [8]
    assert tok["successes"][0] / 8 < 0.5
    says(answers("02-cramming-live.ipynb"), "half the natural-text strings of 5 tokens",
         "fewer than half of the random-token strings")


def test_02_q4_stop_then_run_loses_nothing_and_counts_nothing_twice(store):
    """Q4: Stop keeps every finished string in the store; Run again crams only the rest."""

    from accesslib.apps.nb02_cramming import CrammingApp
    app = CrammingApp(store=store, canvas="agg", fast=True)
    # 2 natural-text tokens are crammed in a few steps, 12 take far longer (or the whole budget);
    # Stop is pressed as the first string lands (as a user pressing it then would), so the first
    # run ends with some strings done and some not, under any load (polling the rows from here
    # could miss that moment on a busy machine)
    app.source.value, app.lengths.value, app.samples.value, app.max_steps.value = "natural", "2, 3, 12", 2, 300
    on_string = app._on_string

    def then_stop(row):
        on_string(row)
        app.stop()
    app._on_string = then_stop
    app.start()
    assert app.wait(timeout=300) and "stopped" in app.status.value
    app._on_string = on_string
    first = store.count()
    assert 1 <= first < 6 and first == len(app.rows)
    kept = store.inflight()                         # the unfinished ones, at the step they reached
    assert len(kept) == 6 - first and all(k["steps"] >= 1 for k in kept)
    app.start()
    assert app.wait(timeout=300) and app.last_error is None
    assert store.count() == 6                       # 3 lengths x 2 strings, none twice
    assert len(app.rows) == 6 - first               # the second run crammed only what was missing
    assert sum(app.curves[1]["totals"]) == 6
    assert store.inflight() == []                   # they went on from there and finished
    says(answers("02-cramming-live.ipynb"), "the second run skips them and continues")
    says(answers("02-cramming-live.ipynb"), "kept in the store at the step they had reached")


def test_02_q5_failed_rows_start_right_then_drift():
    """Q5: in the failed examples shipped with the default model greedy decoding gets the first
    1-4 tokens right, then drifts: most differ in several characters."""
    b = _shipped_default()
    failed = [e for e in b["examples"] if not e["success"]]
    assert len(failed) >= 3
    first_wrong = [next(i for i, (x, y) in enumerate(zip(e["target"], e["greedy"])) if x != y) for e in failed]
    wrong = [sum(x != y for x, y in zip(e["target"], e["greedy"])) for e in failed]
    assert 1 <= min(first_wrong) and max(first_wrong) <= 4
    assert sum(w > 1 for w in wrong) > len(wrong) / 2
    ex = next(e for e in failed if e["target"] == "But Jero")
    says(answers("02-cramming-live.ipynb"), "the first 1-4 tokens are right",
         f"'{ex['target']}' became '{ex['greedy']}'")


# =============================================================================================
# 05 · geometry: the 2-D toy
# =============================================================================================
def _toy():
    from accesslib.apps.nb05_geometry import GeometryApp
    return GeometryApp(canvas="agg")


def _hull_entry_norm(rows, t, angle_deg):
    """The norm at which row t, pointing at ``angle_deg``, enters the convex hull of the others."""
    from scipy.spatial import ConvexHull
    hull = ConvexHull(np.delete(rows, t, axis=0))
    u = np.array([math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))])
    a, off = hull.equations[:, :2] @ u, hull.equations[:, 2]
    return float(np.min(-off[a > 0] / a[a > 0]))


def test_05_toy_q1_a_short_row_inside_the_hull_owns_no_argmax_cell():
    app = _toy()
    app.token.value = 2
    full = (float(np.hypot(*app.rows[2])), app.shares["argmax"][2], app.shares["voronoi"][2])
    assert full[0] == pytest.approx(0.86, abs=0.005) and 0.2 < full[1] < 0.3 and 0.15 < full[2] < 0.3
    entry = _hull_entry_norm(app.rows, 2, app.angle.value)
    assert entry == pytest.approx(0.175, abs=0.0005)
    app.norm.value = 0.18                         # tip just outside the hull: a sliver is left
    assert 0 < app.shares["argmax"][2] < 0.01
    app.norm.value = 0.17                         # inside: nothing on the left, ~23% on the right
    assert app.shares["argmax"][2] == 0 and app.shares["voronoi"][2] == pytest.approx(0.23, abs=0.005)
    assert math.isinf(app.values["cost_argmax"]) and math.isfinite(app.values["cost_voronoi"])
    assert "∞ (token 2 owns no cell: it can never be produced)" in app.readout.value
    says(answers("05-geometry.ipynb"), "(|w| = 0.86)", "vanishes at |w| ≈ 0.175 (at 0.17 it reads 0%)",
         "The mean cost then reads ∞", "keeps about 23% of the box")


def test_05_toy_q2_equal_norms_make_the_panels_identical():
    app = _toy()
    app.equal.click()
    assert app.last_error is None
    assert np.array_equal(app.art["argmax"]["img"].get_array(), app.art["voronoi"]["img"].get_array())
    assert f"<b>{100 * app.values['disagree']:.1f}%</b>" == "<b>0.0%</b>" and "<b>0.0%</b>" in app.readout.value
    says(answers("05-geometry.ipynb"), "reads 0.0%")


def test_05_toy_q3_a_bias_moves_only_the_argmax_panel():
    app = _toy()
    left, right = (app.art[a]["img"].get_array().copy() for a in ("argmax", "voronoi"))
    app.token.value = 1
    app.b.value = 0.5
    assert not np.array_equal(app.art["argmax"]["img"].get_array(), left)
    assert np.array_equal(app.art["voronoi"]["img"].get_array(), right)
    says(answers("05-geometry.ipynb"), "Only the left one")


def test_05_toy_q4_unequal_cells_cost_more_than_ln_v():
    app = _toy()
    v = app.values
    assert v["cost_argmax"] > v["ln_V"] and v["cost_voronoi"] > v["ln_V"]
    says(answers("05-geometry.ipynb"), f"argmax reads {v['cost_argmax']:.3f} and Voronoi {v['cost_voronoi']:.3f} nats "
         f"against ln 5 = {v['ln_V']:.3f}")
    assert f"<b>{v['cost_argmax']:.3f} nats</b>" in app.readout.value
    app.equal.click()       # equal norms: cells still unequal (the rows' angles are), still >= ln|V|
    assert app.values["cost_argmax"] >= app.values["ln_V"]


# =============================================================================================
# 05 · geometry: the chosen model
# =============================================================================================
def test_05_model_opens_with_the_default_models_stored_measurement():
    """Item 5: no placeholder ("10 tokens hit, 0 never hit", s_conv = 0): the default model's
    stored geometry is drawn on load; the readout is one line, the rest folded in <details>."""
    from accesslib.apps.nb05_geometry import TINY_RANDOM, ModelGeometryApp, shipped_geometry
    from accesslib.models import embedded
    app = ModelGeometryApp(canvas="agg")
    rec = shipped_geometry(embedded.DEFAULT)
    assert app.model.value == embedded.DEFAULT and app.view is not None and app.report is None
    assert f"<b>{rec['s_conv']:.2f}</b>" in app.readout.value and "(stored)" in app.readout.value
    short, folded = app.readout.value.split("<details>")
    assert len(re.sub("<[^>]+>", "", short)) < 160 and "</summary>" in folded and "effective ε" in folded
    assert "10 tokens hit" not in app.hist["text"].get_text() and "made 2 December 2026" in app.status.value
    texts_inside(app.fig)
    # a model without a stored measurement: empty panels that say so, no made-up numbers
    app.model.value = TINY_RANDOM
    assert app.view is None and app.readout.value == "" and "press Run" in app.hist["text"].get_text()
    assert all(b.get_height() == 0 for b in app.bars["bars"]) and app.data_rows() == []


def test_05_model_q1_the_rule_moves_s_conv_a_little():
    """Q1: on the default model (decoder-row norms about 0.9 to 4.5) switching argmax -> Voronoi
    moves s_conv, by less than 0.2 nats."""
    from accesslib.apps.nb05_geometry import ModelGeometryApp
    from accesslib.models.loading import load_model
    app = ModelGeometryApp(canvas="agg")
    app.per_length.value, app.n_cells.value = 8, 16384
    s = {}
    for rule in ("argmax", "voronoi"):
        app.assign.value = rule
        app.start(wait=True)
        assert app.last_error is None, app.last_error
        s[rule] = app.report.sconv.s_conv
    assert 0 < abs(s["argmax"] - s["voronoi"]) < 0.2
    lm = load_model(app.model.value)
    norms = lm.model.get_output_embeddings().weight.detach().norm(dim=1)
    assert float(norms.min()) == pytest.approx(0.9, abs=0.05) and float(norms.max()) == pytest.approx(4.5, abs=0.05)
    says(answers("05-geometry.ipynb"), "(about 0.9 to 4.5)", "by less than 0.2 nats")


def test_05_model_q2_few_samples_drop_rule_falls_below_ln_v():
    """Q2: the tiny random model with N = 1,000: most of its 512 tokens never hit; [A]'s rule
    gives about 6.0 < ln 512; the bound rule is within about half a nat of ln(N/3)."""
    from accesslib.apps.nb05_geometry import TINY_RANDOM, ModelGeometryApp
    app = ModelGeometryApp(canvas="agg", model=TINY_RANDOM)
    app.per_length.value, app.n_cells.value = 4, 1000
    app.start(wait=True)
    assert app.last_error is None, app.last_error
    v = app.view
    assert v["vocab_size"] == 512 and v["zero_hit"] > 256 and v["sample_limited"]
    assert round(abs(v["s_conv_drop"]), 1) == 6.0 and abs(v["s_conv_drop"]) < math.log(512)
    assert abs(abs(v["s_conv"]) - math.log(1000 / 3)) <= 0.5
    assert "never hit: the cell bound is set by N" in app.readout.value
    says(answers("05-geometry.ipynb"), "N = 1,000: most of its 512 tokens are never hit",
         "about 6.0 < ln 512 = 6.24", "within about half a nat of ln(N/3)")


def test_05_model_q3_smollm2_has_not_converged():
    """Q3: SmolLM2-135M's stored s_conv still moves by about -0.5 per doubling, within one nat
    of the resolution line."""
    from accesslib.apps.nb05_geometry import ModelGeometryApp
    from accesslib.theory.stats import zero_hit_share
    app = ModelGeometryApp(canvas="agg", model="smollm2-135m")
    assert app.view is not None and app.view["name"] == "smollm2-135m"
    conv = app.view["convergence"]
    moves = [b["s_conv"] - a["s_conv"] for a, b in zip(conv, conv[1:])]
    assert all(-0.65 < d < -0.45 for d in moves)
    assert all(abs(r["s_conv"] - math.log(zero_hit_share(r["n"]))) < 1 for r in conv)
    assert "not yet converged" in app.readout.value
    says(answers("05-geometry.ipynb"), f"by about -0.5 ({min(moves):.2f} to {max(moves):.2f})",
         "within one nat of the dotted resolution line")


def test_05_model_q4_effective_eps_is_far_above_the_dtype_eps():
    from accesslib.apps.nb05_geometry import ModelGeometryApp, shipped_geometry
    ratio = {}
    for name in ("tiny-d32-v257", "smollm2-135m"):
        rec = shipped_geometry(name)
        ratio[name] = rec["effective_eps"]["median"] / (rec["eps"] / rec["r_inf"])
    assert abs(ratio["tiny-d32-v257"] - 380) < 10 and abs(ratio["smollm2-135m"] - 55) < 3
    app = ModelGeometryApp(canvas="agg")
    assert "effective ε" in app.readout.value.split("<details>")[1]
    says(answers("05-geometry.ipynb"), "about 380 times ε/r", "for SmolLM2-135M about 55 times")
    # "... lowers the default model's box+cells bound from 27 to 7 tokens per vector (the hatched
    # bar), 3.2 times its measured slope"
    bars = dict(zip(app.bars["kinds"], app.bars["bars"]))
    texts = dict(zip(app.bars["kinds"], app.bars["texts"]))
    assert (texts["box+cells"].get_text(), texts["measured ε"].get_text()) == ("27", "7")
    assert bars["measured ε"].get_hatch() == "///" and not bars["box+cells"].get_hatch()
    me = app.view["measured"]
    assert me["line"] == "box+cells" and round(me["ratio"], 1) == 3.2
    says(answers("05-geometry.ipynb"), "lowers the default model's box+cells bound from 27 to 7 tokens per vector "
         "(the hatched bar), 3.2 times its measured slope")


def test_05_the_dotted_line_comes_closer_but_reaches_no_model():
    """Cell "Each refinement against the measured points": for every shipped model the bound at
    the measured ε is closer to the points than every refinement at the dtype's ε, and above them."""
    from accesslib.apps.nb03_predicted import PredictedApp
    from accesslib.results import bundles
    from accesslib.results.bundles import single_point
    ratios, one_m = [], {}
    for name in bundles.available("cram"):
        app = PredictedApp(canvas="agg", model=name, published=False)
        me = app.values["measured_eps"]
        assert me["ok"] and me["C"] < min(app.bundle["geometry"]["slopes"].values()), name
        if me["ratio"] is not None:
            ratios.append(me["ratio"])
        else:   # measured at one m: n* = C·m against that n50
            m, n50, _ = single_point(app.bundle)
            one_m[name] = me["C"] * m / n50
    assert min(ratios) > 1 and set(one_m) == {"gemma-3-270m"} and one_m["gemma-3-270m"] > 1
    says(answers("05-geometry.ipynb"), f"(C/a from {min(ratios):.1f} to {max(ratios):.1f}; Gemma-3-270M, "
         f"measured at m = 1 only, n*/n50 = {one_m['gemma-3-270m']:.1f})")


# =============================================================================================
# 06 · the copy task
# =============================================================================================
def _copy_bundle():
    from accesslib.apps.nb06_copy import load_bundle
    b = load_bundle()
    assert b is not None
    return b


def test_06_both_marker_kinds_stay_visible():
    """Item 5: where the series coincide the hollow teacher-forced square is larger than, and
    drawn under, the filled greedy dot."""
    from accesslib.apps.nb06_copy import CopyApp
    app = CopyApp(fast=False, canvas="agg")
    g, tf = app.greedy_pts, app.tf_pts
    assert list(g.get_ydata()) == list(tf.get_ydata())          # the shipped run: identical values
    assert tf.get_markersize() >= 1.8 * g.get_markersize()
    assert tf.get_markerfacecolor() == "none" and g.get_zorder() > tf.get_zorder()
    labels = [t.get_text() for t in app.ax_acc.get_legend().get_texts()]
    assert labels[:2] == ["greedy generation", "teacher-forced (all argmax)"]
    texts_inside(app.fig)


def test_06_q1_the_cliff_of_the_shipped_run():
    from accesslib.apps.nb06_copy import CopyApp, first_below
    b = _copy_bundle()
    acc = dict(zip(b["accuracy"]["lengths"], b["accuracy"]["greedy"]))
    top = b["train_range"][1]
    below = first_below(b["accuracy"]["lengths"], b["accuracy"]["greedy"], top)
    assert below == b["first_length_below_10pct"]["greedy"] == 60
    app = CopyApp(fast=False, canvas="agg")
    assert f"greedy accuracy < 10% from length {below} ({below / top:.1f}x the longest training length, {top})" \
        in app.title.get_text()
    assert all(acc[L] == 0 for L in acc if L >= below)
    says(answers("06-copy-task.ipynb"), f"At length {below}, {below / top:.1f}x the longest training length ({top})",
         f"copies {acc[50]:.0%} of the 50-letter strings, {acc[55]:.0%} at 55 and none from {below} on")


@pytest.mark.slow
def test_06_q2_training_up_to_20_moves_the_cliff():
    """Q2 (minutes on a CPU): train up to 20 with the page's other defaults; the cliff moves
    below the shipped run's 60."""
    from accesslib.apps.nb06_copy import CopyApp, first_below
    app = CopyApp(fast=False, canvas="agg")
    app.max_len.value = 20
    assert app.start("train", wait=True) and app.last_error is None, app.last_error
    rows = app.acc_rows
    lengths, greedy = [r.length for r in rows], [r.greedy for r in rows]
    below = first_below(lengths, greedy, 20)
    assert below is not None and below < 60
    assert all(g >= 0.9 for L, g in zip(lengths, greedy) if L <= 20)
    says(answers("06-copy-task.ipynb"), "It moves with the training range")


def test_06_q3_greedy_and_teacher_forced_are_the_same_event():
    b = _copy_bundle()
    assert b["accuracy"]["greedy"] == b["accuracy"]["teacher_forced"]
    # a fresh model, live: per string, greedy exact success <=> teacher-forced all-argmax success
    from accesslib.engine import copying as cp
    model = cp.build_model(cp.CopyConfig(d=16, layers=1, heads=2, intermediate=64, max_len=8, min_len=5))
    model.eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for L in (1, 2, 3, 6):
            letters = cp.random_strings(64, L, g)
            assert torch.equal(cp.greedy_correct(model, letters), cp.teacher_forced_correct(model, letters))
    says(answers("06-copy-task.ipynb"), "For a whole string they measure the same event")


def test_06_q4_loss_plunges_suddenly_and_runs_restart_from_scratch():
    import time

    from accesslib.apps.nb06_copy import CopyApp
    b = _copy_bundle()
    steps, loss = b["loss"]["step"], b["loss"]["loss"]
    early = [v for s, v in zip(steps, loss) if s <= 500]
    assert 1.4 <= min(early) and max(early) <= 3.41
    hi = max(s for s, v in zip(steps, loss) if v > 1.9)
    lo = min(s for s, v in zip(steps, loss) if v < 0.05)
    assert (hi, lo) == (525, 651) and lo - hi <= 130
    says(answers("06-copy-task.ipynb"), "between 1.4 and 3.4 nats", "within about 130 steps (steps 525 to 651)")
    # Stop in the middle, Run again with a larger rate: training starts from scratch
    app = CopyApp(fast=True, canvas="agg")
    app.steps.value = 100_000
    app.start("train")
    while not app.steps_seen and app.is_running:
        time.sleep(0.05)
    app.stop()
    assert app.wait(60) and app.result.interrupted
    first_model = app.model
    app.steps.value, app.lr.value = 12, 1e-2
    app.lengths.value, app.n_eval.value = "3", 2
    assert app.start("train", wait=True) and app.last_error is None
    assert app.steps_seen == list(range(1, 13)) and app.model is not first_model
    says(answers("06-copy-task.ipynb"), "the loss curve starts again at step 1")


# =============================================================================================
# 07 · packing and precision
# =============================================================================================
def test_07_q1_counts_at_r_equal_eps():
    from accesslib.apps.nb07_packing import PackingApp
    app = PackingApp(r=1.0, eps=1.0, canvas="agg")
    got = {}
    for d in (2, 3):
        for method in ("grid", "lattice"):
            app.d.value, app.method.value = d, method
            got[d, method] = (len(app.shown["points"]), app.shown["bound"])
    assert got == {(2, "grid"): (5, 9), (2, "lattice"): (7, 9), (3, "grid"): (7, 27), (3, "lattice"): (13, 27)}
    says(answers("07-packing-and-precision.ipynb"), "Grid: 5 points in 2-D", "7 in 3-D", "Lattice: 7", "and 13",
         "Bound: 9 and 27")


def test_07_q2_r_over_eps_10_is_reachable():
    """Q2: the sliders' ends r = 10, ε = 1 (as the browser sends ε: 10**(±1e-16)) draw r/ε = 10."""
    from accesslib.apps.nb07_packing import PackingApp
    app = PackingApp(r=9.7, eps=1.0, canvas="agg")
    app.eps.value = 10 ** (-0.5 + 25 * 0.02 - 1e-16)      # 0.9999999999999998
    app.r.value = app.r.max
    assert app.last_error is None and app.shown["r"] == 10
    ratio = {}
    for d in (2, 3):
        app.d.value = d
        n, bound = len(app.shown["points"]), app.shown["bound"]
        ratio[d] = n / bound
        assert f"(count / bound = {ratio[d]:.2f})" in app.readout.value
        says(answers("07-packing-and-precision.ipynb"), f"{ratio[d]:.2f} ({n:,} of {round(bound):,})")
    assert round(ratio[2], 2) == 0.83 and round(ratio[3], 2) == 0.65
    assert ratio[2] < math.pi / (2 * math.sqrt(3)) and ratio[3] < math.pi * math.sqrt(2) / 6
    app.eps.value = 10 ** -0.5                                  # r/ε = 31.6: refused, in words
    assert "r/ε must be at most 10" in app.last_error and "lower r or raise ε" in app.last_error
    texts_inside(app.fig)


@pytest.fixture(scope="module")
def precision_runs():
    """The precision app with the page's settings on the default model, at region widths 2 and 0.2."""
    from accesslib.apps.nb07_packing import PrecisionApp
    out = {}
    for width in (2.0, 0.2):
        app = PrecisionApp(fast=False, canvas="agg")
        app.width.value = width
        assert app.start(wait=True) and app.last_error is None, app.last_error
        out[width] = app
    return out


def test_07_precision_q1_same_input_below_eps_same_output_far_beyond(precision_runs):
    app = precision_runs[2.0]
    a = app.results["perturbation"]
    x = a["radii"] / a["eps"]
    same_in, same_out = np.asarray(a["same_input"]), np.asarray(a["same_output"])
    assert np.all(same_in[x <= 0.1] == 1) and 0 < same_in[np.isclose(x, 10 ** -0.5)][0] < 0.5
    assert np.all(same_in[x >= 1] == 0)
    assert np.all(same_out[x <= 1e6] == 1) and same_out[-1] == 0
    assert "Output unchanged in every direction up to 1e+06 ε" in app.readout.value
    says(answers("07-packing-and-precision.ipynb"), "every direction up to 0.1 ε, a few at 0.3 ε, none from ε on",
         "up to about a million ε")


def test_07_precision_q2_a_smaller_region_saturates_lower(precision_runs):
    wide, small = (precision_runs[w].results["saturation"] for w in (2.0, 0.2))
    assert list(wide["prompts"]) == list(small["prompts"]) and int(wide["prompts"][-1]) == 4096
    assert int(wide["distinct"][-1]) == 10 and int(small["distinct"][-1]) == 2
    assert wide["distinct"][-1] == wide["distinct"][-3]          # saturated: no growth over the last two grids
    says(answers("07-packing-and-precision.ipynb"), "10 distinct outputs from 4,096 prompts at width 2, only 2 at width 0.2")
