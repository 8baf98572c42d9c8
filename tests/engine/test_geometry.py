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
    sconv_convergence,
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
