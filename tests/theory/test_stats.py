"""Statistics (accesslib.theory.stats): n50 and slope fits on synthetic data, the one-sided
binomial bounds on cell shares, and s_conv on known share distributions."""
import math

import numpy as np
import pytest
from scipy.special import expit

from accesslib.theory import stats as S_
from accesslib.theory.stats import fit_s_conv, log_share_medians, upper_shares, zero_hit_share


def _synthetic(x0, k, lengths, t, seed):
    rng = np.random.default_rng(seed)
    p = expit(k * (np.asarray(lengths) - x0))
    return list(lengths), rng.binomial(t, p).tolist(), [t] * len(lengths)


def test_fit_n50_recovers_known_parameters():
    lengths = np.arange(60, 141, 5)
    fit = S_.fit_n50(_synthetic(100.0, -0.2, lengths, 4000, 0))
    assert fit.status == "ok" and fit.method == "mle"
    assert abs(fit.n50 - 100.0) < 3 * fit.stderr and fit.stderr < 0.1
    assert abs(fit.k + 0.2) < 3 * fit.k_stderr
    n50, se, k = fit  # the shared-contract tuple form
    assert n50 == fit.n50 and k == fit.k
    np.testing.assert_allclose(fit.predict(fit.n50), 0.5)


def test_fit_n50_stderr_matches_monte_carlo():
    lengths = np.arange(70, 131, 10)
    fits = [S_.fit_n50(_synthetic(100.0, -0.1, lengths, 40, s)) for s in range(300)]
    est = np.array([f.n50 for f in fits])
    se = np.array([f.stderr for f in fits])
    assert abs(est.mean() - 100) < 0.5
    # the Fisher stderr agrees with the spread of the estimates within 20%
    assert 0.8 < np.median(se) / est.std() < 1.2


def test_fit_n50_dict_input_and_edge_cases():
    sep = S_.fit_n50({10: (8, 8), 20: (8, 8), 30: (0, 8), 40: (0, 8)})  # a clean step
    assert sep.status == "separated" and sep.method == "firth" and 20 < sep.n50 < 30 and sep.k < 0
    a = S_.fit_n50({10: (5, 5), 20: (5, 5)})
    assert a.status == "all_success" and np.isnan(a.n50) and a.lower == 20 and "n50 > 20" in a.message
    b = S_.fit_n50({10: (0, 5), 20: (0, 5)})
    assert b.status == "all_fail" and b.upper == 10 and not b.ok
    assert S_.fit_n50({10: (2, 5)}).status == "too_few"
    merged = S_.fit_n50(([10, 10, 20, 30], [3, 3, 2, 0], [4, 4, 4, 4]))
    assert merged.n_lengths == 3 and merged.n_strings == 16
    with pytest.raises(ValueError, match="0 <= successes <= totals"):
        S_.fit_n50({10: (6, 5), 20: (0, 5)})


def test_fit_slope_exact_noisy_and_weighted():
    f = S_.fit_slope([1, 2, 3, 4, 5], [90, 180, 270, 360, 450])
    assert f.slope == pytest.approx(90) and f.intercept == pytest.approx(0, abs=1e-9) and f.r2 == pytest.approx(1)
    assert f.slope_stderr == pytest.approx(0, abs=1e-6)
    rng = np.random.default_rng(1)
    m = np.arange(1, 6)
    y = 44 * m + 10 + rng.normal(0, 3, 5)
    g = S_.fit_slope(m, y)
    ref = np.polyfit(m, y, 1)
    assert g.slope == pytest.approx(ref[0]) and g.intercept == pytest.approx(ref[1])
    assert abs(g.slope - 44) < 3 * g.slope_stderr and 0.99 < g.r2 <= 1
    # a point with a huge stderr barely moves a weighted fit; nan n50s are left out
    w = S_.fit_slope([1, 2, 3, 4, 5], [90, 180, 270, 360, 1000], stderrs=[1, 1, 1, 1, 1e6])
    assert w.slope == pytest.approx(90, abs=0.01)
    assert S_.fit_slope([1, 2, 3], [90, np.nan, 270]).n_points == 2
    with pytest.raises(ValueError, match="at least two distinct m"):
        S_.fit_slope([1, 2], [90, np.nan])


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




def test_binomial_stderr_plain_and_with_pseudo_counts():
    # plain: sqrt(p(1-p)/t); 0/t and t/t have no spread
    assert S_.binomial_stderr(5, 20, pseudo=0) == pytest.approx(math.sqrt(0.25 * 0.75 / 20))
    assert S_.binomial_stderr([0, 20], [20, 20], pseudo=0).tolist() == [0.0, 0.0]
    # default (plots): half a success each side, so 0/t still gets a bar
    assert S_.binomial_stderr(0, 20) == pytest.approx(math.sqrt((0.5 / 21) * (20.5 / 21) / 20))
    assert S_.binomial_stderr(3, 0, pseudo=0) == 0.0   # no strings: no division by zero
