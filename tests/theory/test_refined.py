"""Refined slopes (accesslib.theory.refined) against closed forms, Monte Carlo and mpmath."""
import math

import numpy as np
import pytest

from accesslib.theory import bounds
from accesslib.theory.refined import (
    RefinedSlope,
    ball_log_count,
    box_slope,
    cell_slope,
    cone_half_angle,
    cone_slope,
    ellipsoid_slope,
    log_betainc,
    log_cone_fraction,
)


@pytest.mark.parametrize("phi", [0.05, 0.4, 1.0, 1.5, 2.0, 3.0])
def test_cone_fraction_closed_forms_low_d(phi):
    # d = 2: sector of angle 2 phi out of 2 pi; d = 3: cap area (1 - cos phi)/2
    assert log_cone_fraction(2, phi) == pytest.approx(math.log(phi / math.pi), rel=1e-10)
    assert log_cone_fraction(3, phi) == pytest.approx(math.log((1 - math.cos(phi)) / 2), rel=1e-10)


@pytest.mark.parametrize("d", [2, 5, 100, 768, 16384, 100000])
def test_cone_fraction_half_space_is_half(d):
    assert log_cone_fraction(d, math.pi / 2) == pytest.approx(math.log(0.5), abs=1e-12)
    assert log_cone_fraction(d, math.pi) == pytest.approx(0.0, abs=1e-12)
    assert log_cone_fraction(d, 0.0) == -math.inf


@pytest.mark.parametrize("d,phi", [(4, 0.7), (6, 1.2), (5, 2.2)])
def test_cone_fraction_monte_carlo(d, phi):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400_000, d))
    inside = x[:, 0] / np.linalg.norm(x, axis=1) >= math.cos(phi)
    p = inside.mean()
    se = math.sqrt(p * (1 - p) / x.shape[0])
    assert math.exp(log_cone_fraction(d, phi)) == pytest.approx(p, abs=4 * se)


def test_cone_fraction_high_d_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for d in (768, 2048, 16384):
        for phi in (0.01, 0.2354, 0.9, 1.4, 1.7, 2.5):
            x = mpmath.sin(phi) ** 2
            i = mpmath.betainc(mpmath.mpf(d - 1) / 2, 0.5, 0, x, regularized=True)
            f = i / 2 if phi <= math.pi / 2 else 1 - i / 2
            assert log_cone_fraction(d, phi) == pytest.approx(float(mpmath.log(f)), rel=1e-9, abs=1e-12)


def test_cone_fraction_small_angle_asymptotics():
    # small phi: F ~ sin^{d-1}(phi) Gamma(d/2) / (2 sqrt(pi) Gamma((d+1)/2)) * (1 + O(phi^2))
    # (leading term of I_x(a, 1/2) = x^a (1-x)^(1/2) / (a B(a, 1/2)) * cf, cf -> 1 as x -> 0)
    d, phi = 16384, 1e-3
    lead = ((d - 1) * math.log(math.sin(phi)) + math.lgamma(d / 2) - math.lgamma((d + 1) / 2)
            - math.log(2 * math.sqrt(math.pi)))
    got = log_cone_fraction(d, phi)
    assert np.isfinite(got) and got < -1e5  # F itself underflows to 0 in float64
    assert got == pytest.approx(lead, abs=d * phi**2)


def test_log_betainc_matches_scipy_where_representable():
    from scipy import special
    a, b, x = 3.5, 0.5, 0.3
    assert log_betainc(a, b, x) == pytest.approx(math.log(special.betainc(a, b, x)), rel=1e-12)
    arr = log_betainc(np.array([1.0, 2.0]), 0.5, np.array([0.2, 0.9]))
    assert arr.shape == (2,)


def test_pythia_160m_cone_removes_about_17_percent():
    # docs/paper.md, section 4: Pythia-160M min cos 0.89 -> about 17% below the ball slope
    d, V, r = 768, 50304, 22.45
    eps = bounds.eps_for_dtype("paper", r)
    phi = cone_half_angle(0.890)
    res = cone_slope(d, V, eps, r, phi)
    ball = bounds.slope(d, V, eps, r)
    assert isinstance(res, RefinedSlope) and res.kind == "cone"
    assert res.C == pytest.approx(ball + res.log_fraction / math.log(V))
    assert 0.15 < 1 - res.C / ball < 0.19
    # wide cones matter little (docs/paper.md, section 4: 1-2%; with phi = theta/2, Pythia-410M's min cos
    # -0.196 gives 3.1%: computed, ln F = (d-1)/2 ln sin^2 phi to leading order)
    wide = cone_slope(1024, V, eps, r, cone_half_angle(-0.196))
    assert 0.025 < 1 - wide.C / bounds.slope(1024, V, eps, r) < 0.035


def test_box_slope_hand_values_and_ball_limit():
    V, eps = 1000, 0.01
    res = box_slope([0.01, 0.03, 0.0], V, eps, r=0.5)
    assert res.log_count == pytest.approx(math.log(2) + math.log(4) + 0.0)
    assert res.C == pytest.approx((math.log(2) + math.log(4)) / math.log(V))
    assert res.log_fraction == pytest.approx(res.log_count - 3 * math.log(101))
    # widths 2r everywhere: the box is the ball bound
    d, r = 64, 3.0
    eq = box_slope(np.full(d, 2 * r), V, eps, r=r)
    assert eq.C == pytest.approx(bounds.slope(d, V, eps, r))
    assert eq.log_fraction == pytest.approx(0.0, abs=1e-9)


def test_ellipsoid_slope_and_cell_slope():
    V, eps = 50304, 0.01
    a = np.array([1.0, 0.5, 0.0])
    res = ellipsoid_slope(a, V, eps, r=1.0)
    assert res.log_count == pytest.approx(math.log(201) + math.log(101))
    assert res.log_fraction == pytest.approx(res.log_count - 3 * math.log(201))
    # replacing ln|V| by |s_conv|
    lc = ball_log_count(768, 1.0, 2048.0)
    assert lc == pytest.approx(768 * math.log(4097))
    c = cell_slope(lc, -12.87)
    assert c.C == pytest.approx(768 * math.log(4097) / 12.87)
    assert c.denominator == pytest.approx(12.87)


@pytest.mark.parametrize("call,message", [
    (lambda: log_cone_fraction(1, 0.5), "d must be a whole number >= 2; got 1"),
    (lambda: log_cone_fraction(10, -0.1), "phi must be angles in [0, pi]; got -0.1"),
    (lambda: log_cone_fraction(10, 4.0), "phi must be angles in [0, pi]; got 4.0"),
    (lambda: cone_half_angle(1.5), "min_cos must be cosines in [-1, 1]; got 1.5"),
    (lambda: box_slope([-1.0], 100, 0.1),
     "widths must be a non-empty 1-D list of per-coordinate extents >= 0; got [-1.0]"),
    (lambda: box_slope([[1.0]], 100, 0.1),
     "widths must be a non-empty 1-D list of per-coordinate extents >= 0; got [[1.0]]"),
    (lambda: box_slope([1.0], 1, 0.1), "vocab_size must be a whole number >= 2; got 1"),
    (lambda: box_slope([1.0], 100, 0.0), "eps must be a number > 0; got 0.0"),
    (lambda: ellipsoid_slope([], 100, 0.1), "semi_axes must be a non-empty 1-D list of semi-axes >= 0; got []"),
    (lambda: cell_slope(10.0, 0.0), "s_conv must be a single nonzero number; got 0.0"),
    (lambda: cell_slope(-1.0, -3.0), "log_count must be a number >= 0; got -1.0"),
    (lambda: cone_slope(10, 100, 0.1, -1.0, 0.3), "r must be a number >= 0; got -1.0"),
    (lambda: ball_log_count([768, 1024], 1.0, 2.0), "d must be a single whole number; got [768, 1024]"),
])
def test_bad_input_names_parameter(call, message):
    # accesslib._checks' one style: "<name> must be <allowed>; got <value>"
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value) == message
