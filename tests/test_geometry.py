"""Geometry (accesslib.engine.geometry): known-answer decoder cells, fits, and stats on tiny models."""
import math

import numpy as np
import pytest
import torch

from accesslib.engine.decoding import greedy
from accesslib.engine.geometry import (
    CellShares,
    assign_tokens,
    cell_shares,
    decoder_weights,
    effective_eps,
    final_hidden,
    fit_principal_axes,
    geometry_report,
    min_pairwise_cosine,
    sample_support,
    support_stats,
)
from accesslib.theory import bounds
from accesslib.theory.stats import (
    describe_convergence,
    fit_s_conv,
    log_share_medians,
    sconv_convergence,
    upper_shares,
    zero_hit_share,
)


def _tiny(family="gpt_neox", d=32, V=64, seed=0):
    """A random-weight model from a config (accesslib.models.loading.tiny_model when it exists)."""
    try:
        from accesslib.models.loading import tiny_model
        return tiny_model(family, d=d, vocab_size=V, layers=2, seed=seed).model
    except ImportError:
        pass
    import transformers as tf
    torch.manual_seed(seed)
    if family == "gpt_neox":
        cfg = tf.GPTNeoXConfig(hidden_size=d, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=2 * d, vocab_size=V, max_position_embeddings=256)
        return tf.GPTNeoXForCausalLM(cfg).eval()
    cfg = tf.LlamaConfig(hidden_size=d, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=2 * d, vocab_size=V,
                         max_position_embeddings=256)
    return tf.LlamaForCausalLM(cfg).eval()


# ------------------------------------------------------------------ 2-D decoders with exact areas

def _shares(W, assign, n=200_000, b=None):
    c = cell_shares(torch.tensor(W, dtype=torch.float32), b, n_samples=n, lo=[-1, -1], hi=[1, 1],
                    assign=assign, progress=False, sample_chunk=50_000)
    return c


@pytest.mark.parametrize("assign", ["argmax", "voronoi"])
def test_four_equal_rows_own_a_quarter_each(assign):
    c = _shares([[1, 0], [-1, 0], [0, 1], [0, -1]], assign)
    assert c.counts.sum() == c.n_samples and c.zero_hit == 0
    assert np.all(np.abs(c.shares - 0.25) < 4 * c.stderr)


def test_checkpoints_are_the_counts_of_the_first_n_draws():
    W = torch.randn(40, 3, generator=torch.Generator().manual_seed(1))
    kw = dict(lo=[-1] * 3, hi=[1] * 3, sample_chunk=1000, seed=3, progress=False)
    c = cell_shares(W, n_samples=20_000, **kw)
    # about N/32, N/16, ..., N/2, rounded up to whole chunks
    assert [n for n, _ in c.checkpoints] == [1000, 2000, 3000, 5000, 10_000]
    for n, counts in c.checkpoints:
        assert counts.sum() == n and np.all(counts <= c.counts)
        again = cell_shares(W, n_samples=n, **kw)     # a shorter run is a prefix of the same draws
        assert np.array_equal(again.counts, counts)
    assert cell_shares(W, n_samples=1000, **kw).checkpoints == []   # one chunk: nothing before N


def test_sconv_convergence_equal_cells_converge_to_minus_ln4():
    c = cell_shares(torch.tensor([[1., 0], [-1, 0], [0, 1], [0, -1]]), n_samples=64_000, lo=[-1, -1],
                    hi=[1, 1], sample_chunk=1000, progress=False)
    rows = sconv_convergence(c)
    assert [r["n"] for r in rows] == [2000, 4000, 8000, 16_000, 32_000, 64_000]
    last = rows[-1]
    assert last["s_conv_drop"] == pytest.approx(-math.log(4), abs=0.02)
    # the bound rule puts each share at its 95% upper bound, a little above 1/4 (so s_conv a
    # little above -ln 4), and closes in on it as n grows
    assert all(r["s_conv"] > -math.log(4) for r in rows)
    assert last["s_conv"] - rows[0]["s_conv"] < 0 and last["s_conv"] == pytest.approx(-math.log(4), abs=0.05)
    assert last["s_conv"] == pytest.approx(fit_s_conv(c, zero_hit="bound").s_conv)
    assert all(r["zero_hit"] == 0 and not r["sample_limited"] for r in rows)
    assert describe_convergence(rows).endswith(": converged")


def test_sconv_convergence_flags_a_sample_limited_census():
    W = torch.randn(5000, 4, generator=torch.Generator().manual_seed(0))
    c = cell_shares(W, n_samples=4000, lo=[-1] * 4, hi=[1] * 4, sample_chunk=500, progress=False)
    rows = sconv_convergence(c)
    assert rows[-1]["sample_limited"] and rows[-1]["zero_hit"] == c.zero_hit
    # the never-hit count falls as n grows, and the bound value follows ln(n/3)
    assert [r["zero_hit"] for r in rows] == sorted((r["zero_hit"] for r in rows), reverse=True)
    assert rows[-1]["s_conv"] < rows[0]["s_conv"]
    assert "sample-limited" in describe_convergence(rows)
    assert describe_convergence(rows[:1]).startswith("one sample count only")


def test_unequal_norms_argmax_vs_voronoi_exact_areas():
    # w1 = (1,0), w2 = (-2,0): argmax splits at x1 = 0 (1/2 each);
    # Voronoi at the bisector x1 = -1/2, so w1 owns (1 + 1/2)/2 = 3/4 of [-1, 1]^2
    W = [[1, 0], [-2, 0]]
    a, v = _shares(W, "argmax"), _shares(W, "voronoi")
    assert np.all(np.abs(a.shares - [0.5, 0.5]) < 4 * a.stderr)
    assert np.all(np.abs(v.shares - [0.75, 0.25]) < 4 * v.stderr)
    # three rows (1,0), (0,1), (0,0): argmax gives the origin row the quadrant x1,x2 < 0 (1/4)
    # and 3/8 to each other; Voronoi gives it [-1, 1/2]^2 = 2.25/4 and 0.875/4 to each other
    W3 = [[1, 0], [0, 1], [0, 0]]
    a3, v3 = _shares(W3, "argmax"), _shares(W3, "voronoi")
    assert np.all(np.abs(a3.shares - [0.375, 0.375, 0.25]) < 4 * a3.stderr)
    assert np.all(np.abs(v3.shares - [0.21875, 0.21875, 0.5625]) < 4 * v3.stderr)
    # a bias moves argmax cells: b = (0, 0, 1/2) gives row 3 the set x1, x2 < 1/2 (Voronoi's)
    ab = _shares(W3, "argmax", b=torch.tensor([0.0, 0.0, 0.5]))
    assert np.all(np.abs(ab.shares - [0.21875, 0.21875, 0.5625]) < 4 * ab.stderr)


def test_argmax_equals_voronoi_iff_equal_norms():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(500, 16, generator=g)
    W = W / W.norm(dim=1, keepdim=True)
    x = torch.randn(2000, 16, generator=g)
    assert torch.equal(assign_tokens(x, W, None, "argmax"), assign_tokens(x, W, None, "voronoi"))
    W2 = W * torch.rand(500, 1, generator=g).add(0.5)
    agree = (assign_tokens(x, W2, None, "argmax") == assign_tokens(x, W2, None, "voronoi")).float().mean()
    assert agree < 0.9
    # vocabulary chunking changes nothing
    assert torch.equal(assign_tokens(x, W2, None, "argmax", vocab_chunk=37),
                       assign_tokens(x, W2, None, "argmax"))


def test_ball_and_hull_supports():
    W = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    c = cell_shares(W, None, n_samples=50_000, support="ball", radius=2.0, progress=False)
    assert abs(c.shares[0] - 0.5) < 4 * c.stderr[0]
    # hull of samples all with x1 > 0: every point lands in row 0's cell
    S = np.array([[0.1, -1.0], [0.5, 2.0], [2.0, 0.0]])
    h = cell_shares(W, None, n_samples=5000, support="hull", samples=S, progress=False)
    assert h.counts[0] == 5000 and h.zero_hit == 1
    with pytest.raises(ValueError, match="support"):
        cell_shares(W, None, n_samples=10, support="cube", progress=False)
    with pytest.raises(ValueError, match="assign"):
        cell_shares(W, None, n_samples=10, lo=[0, 0], hi=[1, 1], assign="nearest", progress=False)


# ------------------------------------------------------------------ s_conv

def test_uniform_shares_give_minus_ln_v():
    V = 1000
    f = fit_s_conv(np.full(V, 1.0 / V))
    assert f.s_conv == pytest.approx(-math.log(V), abs=1e-9)
    assert f.intercept == pytest.approx(0.0, abs=1e-9)


def test_log_share_medians_match_monte_carlo_and_drop_zeros():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(2000, 0.3))
    p[:50] = 0.0
    med = log_share_medians(p)
    lp = np.log(p[p > 0])
    mc = [np.median(rng.choice(lp, (200_000, k)).sum(1)) for k in range(1, 7)]
    assert np.allclose(med, mc, atol=0.06)
    f = fit_s_conv(p)
    assert f.n_zero == 50 and f.n_tokens == 1950
    # the median of a sum grows like k * mean(ln p); skewed cells make tokens dearer than ln V
    assert f.s_conv == pytest.approx(lp.mean(), rel=0.02)
    assert f.s_conv < -math.log(1950)

def test_zero_hit_share_is_the_one_sided_binomial_bound():
    for n in (10, 1000, 10**6):
        q = zero_hit_share(n)
        assert (1 - q) ** n == pytest.approx(0.05, rel=1e-9)   # P(no hit | share q) = 5%
    assert zero_hit_share(10**6) == pytest.approx(3.0e-6, rel=0.01)  # the rule of three
    assert zero_hit_share(1000, level=0.99) == pytest.approx(-math.expm1(math.log(0.01) / 1000))
    with pytest.raises(ValueError, match="n_samples"):
        zero_hit_share(0)
    with pytest.raises(ValueError, match="level"):
        zero_hit_share(10, level=1.0)


def test_upper_shares_are_clopper_pearson_bounds():
    from scipy.stats import binom
    n = 500
    k = np.array([0, 1, 7, 250, 499, 500])
    q = upper_shares(k, n)
    assert q[0] == pytest.approx(zero_hit_share(n))
    assert q[-1] == 1.0
    # at the bound, seeing k or fewer hits has probability 5%
    assert binom.cdf(k[:-1], n, q[:-1]) == pytest.approx(np.full(5, 0.05), rel=1e-6)
    assert np.all(q[:-1] > k[:-1] / n)
    with pytest.raises(ValueError, match="counts"):
        upper_shares([3, 600], n)


def test_zero_hit_bound_vs_drop_on_a_sample_limited_cell_census():
    # 1000 tokens: 10 own 99% of the space, the other 990 share 1% (1e-5 each). With N = 20000
    # samples most small cells are never hit: "bound" (every share at its upper confidence
    # bound, an unseen token at ~3/N) then sits near ln(N/3): above ln|V| because N > 3|V|,
    # below the truth, i.e. a valid, conservative cost per token.
    rng = np.random.default_rng(3)
    V, N = 1000, 20000
    p_true = np.r_[np.full(10, 0.099), np.full(990, 1e-5)]
    p_true /= p_true.sum()
    counts = rng.multinomial(N, p_true)
    cs = CellShares(counts, N, "argmax", "box")
    drop = fit_s_conv(cs, zero_hit="drop")
    bound = fit_s_conv(cs, zero_hit="bound")
    truth = fit_s_conv(p_true)
    assert drop.n_zero == bound.n_zero == int(np.sum(counts == 0)) > 750
    assert bound.sample_limited and bound.zero_fraction > 0.75
    assert bound.floor == pytest.approx(math.log(zero_hit_share(N)))
    assert math.log(V) < abs(bound.s_conv) < abs(truth.s_conv)
    assert bound.s_conv == pytest.approx(bound.floor, rel=0.1)
    # too few samples (N < 3|V|): the bound cannot even reach ln|V|
    small = CellShares(rng.multinomial(2000, p_true), 2000, "argmax", "box")
    assert abs(fit_s_conv(small, zero_hit="bound").s_conv) < math.log(V)
    # many samples: every token hit, both rules close to the truth
    big_n = 10**8
    big = CellShares(rng.multinomial(big_n, p_true), big_n, "argmax", "box")
    for rule in ("drop", "bound"):
        f = fit_s_conv(big, zero_hit=rule)
        assert f.n_zero == 0 and not f.sample_limited
        assert f.s_conv == pytest.approx(truth.s_conv, rel=0.02)
    with pytest.raises(ValueError, match="zero_hit"):
        fit_s_conv(cs, zero_hit="ignore")
    with pytest.raises(ValueError, match="n_samples"):
        fit_s_conv(cs.shares, zero_hit="bound")


# ------------------------------------------------------------------ principal axes and cosines

def test_principal_axes_recover_known_gaussian():
    rng = np.random.default_rng(1)
    d, n = 6, 20000
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    sig = np.array([5.0, 3.0, 2.0, 1.0, 0.5, 0.1])
    x = rng.standard_normal((n, d)) * sig @ Q.T + 7.0
    pa = fit_principal_axes(torch.tensor(x))
    assert np.allclose(pa.sigmas, sig, rtol=0.03)
    assert np.allclose(np.abs(np.sum(pa.axes * Q, axis=0)), 1.0, atol=1e-3)
    assert np.allclose(pa.center, 7.0, atol=0.1)
    z = (x - pa.center) @ pa.axes
    assert np.all(np.abs(z) <= pa.semi_axes + 1e-9)          # the rotated box holds every sample
    assert np.all(pa.semi_axes / sig > 3.0) and np.all(pa.semi_axes / sig < 5.0)  # max |N(0,1)|
    assert np.max(np.sum((z / (pa.mahalanobis_scale * pa.sigmas)) ** 2, 1)) <= 1 + 1e-9
    assert np.all(pa.mahalanobis_scale * pa.sigmas >= pa.semi_axes - 1e-9)


def test_min_pairwise_cosine_matches_brute_force():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(300, 8, generator=g) + 1.0
    u = x / x.norm(dim=1, keepdim=True)
    c = u @ u.T
    c.fill_diagonal_(2.0)
    assert min_pairwise_cosine(x, chunk=64) == pytest.approx(float(c.min()), abs=1e-6)
    assert min_pairwise_cosine(x, max_points=50) >= float(c.min()) - 1e-6


# ------------------------------------------------------------------ tiny models

@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_final_hidden_is_post_norm_input_of_unembedding(family):
    m = _tiny(family)
    ids = torch.randint(0, 64, (3, 7), generator=torch.Generator().manual_seed(0))
    h = final_hidden(m, input_ids=ids)
    with torch.no_grad():
        out = m(ids, output_hidden_states=True)
    assert h.shape == (3, 32)
    assert torch.allclose(h, out.hidden_states[-1][:, -1].float(), atol=1e-5)
    W, b = decoder_weights(m)
    logits = h @ W.T + (0 if b is None else b)
    assert torch.allclose(logits, out.logits[:, -1], atol=1e-4)


def test_support_stats_on_tiny_model():
    m = _tiny("gpt_neox")
    x = sample_support(m, lengths=[4, 16], per_length=24, progress=False)
    assert x.shape == (48, 32) and torch.isfinite(x).all()
    st = support_stats(x)
    assert st.n == 48 and st.d == 32
    assert st.r_2 / math.sqrt(st.d) <= st.r_inf <= st.r_2 + 1e-6
    assert np.all(st.lo <= x.numpy().min(0)) and np.all(st.hi >= x.numpy().max(0))
    assert np.all(st.widths <= 2 * st.r_inf + 1e-6)
    assert -1.0 <= st.min_cos <= 1.0 and 0 <= st.phi <= math.pi / 2
    # same seed, same samples
    assert torch.equal(x, sample_support(m, lengths=[4, 16], per_length=24, progress=False))


def test_geometry_report_orders_refinements():
    m = _tiny("llama")
    rep = geometry_report(m, lengths=[4, 8], per_length=32, n_cells=20_000, progress=False)
    s = rep.slopes
    assert rep.eps == pytest.approx(rep.stats.r_inf * 2.0**-11)
    assert s["ball"].C == pytest.approx(bounds.slope(32, 64, rep.eps, rep.stats.r_inf))
    assert s["box"].C <= s["ball"].C and s["cone"].C <= s["ball"].C
    assert s["ellipsoid"].log_count <= s["ball"].log_count
    assert rep.cells.counts.sum() == 20_000
    assert s["cells"].C == pytest.approx(s["ball"].log_count / abs(rep.sconv.s_conv))
    assert rep.sconv.s_conv < 0
    assert rep.convergence[-1]["n"] == 20_000 and rep.convergence[-1]["s_conv"] == rep.sconv.s_conv
    # N/32 ... N/2 in chunks of 4,096: counts kept after 4,096, 8,192 and 12,288 samples, then N
    assert [r["n"] for r in rep.convergence] == [4096, 8192, 12_288, 20_000]


def test_effective_eps_brackets_a_change():
    m = _tiny("gpt_neox")
    mem = torch.randn(1, 32, generator=torch.Generator().manual_seed(1)) * 0.02
    ee = effective_eps(m, mem, n_directions=6, n_tokens=3, steps=16, t_min=1e-6, t_max=10.0)
    assert ee.rel.shape == (6,) and ee.dtype == "float32"
    assert np.sum(np.isfinite(ee.rel) & (ee.rel > ee.t_min)) >= 3
    base = greedy(m, mem[None], 3, cache=False)
    g = torch.Generator().manual_seed(0)  # same directions as effective_eps draws after memory
    u = torch.randn(6, 1, 32, generator=g)
    u = u / u.flatten(1).norm(dim=1)[:, None, None]
    for i, t in enumerate(ee.rel):
        if np.isfinite(t) and t > ee.t_min:
            out = greedy(m, (mem + float(t) * ee.memory_norm * u[i])[None], 3, cache=False)
            assert not torch.equal(out, base)
    with pytest.raises(ValueError, match="t_min"):
        effective_eps(m, mem, t_min=1.0, t_max=0.5)


# ------------------------------------------------------------------ 2-D toy plots and app (headless)

def test_cells_on_grid_exact_areas():
    from accesslib.plots.geometry import cells_on_grid
    _, sh = cells_on_grid([[1, 0], [-2, 0]], assign="voronoi", res=401)
    assert sh == pytest.approx([0.75, 0.25], abs=0.005)
    _, sh = cells_on_grid([[1, 0], [0, 1], [0, 0]], assign="argmax", res=401)
    assert sh == pytest.approx([0.375, 0.375, 0.25], abs=0.005)
    with pytest.raises(ValueError, match="W"):
        cells_on_grid(np.ones((3, 3)))


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
