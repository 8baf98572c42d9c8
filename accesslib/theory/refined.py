"""Refined slopes of [A] (docs/paper.md, section 4): box, cone, ellipsoid and decoder cells.

Pure numpy/scipy, everything in log space. The ball slope of :func:`accesslib.theory.bounds.slope` is
C_ball = d ln(1 + 2r/eps) / ln|V|: the log of the number of eps-distinguishable points of the
support (per prompt vector) over the log of the number of choices per output token. Each
refinement here shrinks the numerator (a smaller support) or grows the denominator (the cost
of a token is its cell share, not 1/|V|). Every function returns a :class:`RefinedSlope` with
the slope C, the log count (numerator, nats per vector) and, where it applies, the log
fraction: ln(refined count / ball count), i.e. how many nats per vector the refinement removes.

The counting metric. A float format distinguishes two vectors when some coordinate differs by
more than its precision: points of a support are counted as the cells of an eps-grid, i.e.
eps-separated points in the per-coordinate (L-infinity) metric. Disjoint cubes of side eps
around eps-separated points of a box of widths w_i lie in the box grown by eps/2 on each side,
so there are at most prod_i (1 + w_i/eps) of them; with w_i = 2r this is the ball bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from accesslib._checks import check_array, fail
from accesslib.theory import bounds

__all__ = [
    "RefinedSlope", "log_betainc", "log_cone_fraction", "cone_half_angle", "ball_log_count",
    "box_slope", "cone_slope", "ellipsoid_slope", "cell_slope", "measured_eps_slopes",
]


@dataclass(frozen=True)
class RefinedSlope:
    """One refined bound.

    kind: 'ball' | 'box' | 'cone' | 'ellipsoid' | 'cells';  C: tokens per prompt vector;
    log_count: ln of the number of distinguishable points per vector (nats);
    log_fraction: ln(refined count / ball count) when a ball is given (the cone's ln F), else
    None; denominator: the nats per output token used (ln|V| or |s_conv|).
    """
    kind: str
    C: float
    log_count: float
    log_fraction: float | None
    denominator: float


def _single(name, value, *, low, low_open=False, integer=False):
    """One number (not an array), checked by :func:`accesslib._checks.check_array`."""
    arr = check_array(name, value, low=low, low_open=low_open, integer=integer)
    if arr.ndim != 0:
        fail(name, "a single whole number" if integer else "a single number", value)
    return float(arr)


def _vocab(vocab_size):
    return _single("vocab_size", vocab_size, low=2, integer=True)


def ball_log_count(d, eps, r):
    """d ln(1 + 2r/eps): log packing number of the support ball/cube ([A] Theorem 4.5), i.e.
    :func:`accesslib.theory.bounds.log_accessible` of one vector (m = 1), for single numbers."""
    d = _single("d", d, low=1, integer=True)
    eps = _single("eps", eps, low=0, low_open=True)
    r = _single("r", r, low=0)
    return float(bounds.log_accessible(d, eps, r, 1))


# --------------------------------------------------------------------------- incomplete beta

def _log_betainc_cf(a, b, x):
    """ln I_x(a, b) from the continued fraction (modified Lentz), for x < (a+1)/(a+b+2).

    I_x(a,b) = x^a (1-x)^b / (a B(a,b)) * 1/(1 + d1/(1 + d2/(1 + ...))) with
    d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)),  d_{2m} = m(b-m)x / ((a+2m-1)(a+2m)).
    The prefactor is kept as a log, so nothing underflows; the fraction itself is O(1).
    """
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    dd = 1.0 - qab * x / qap
    dd = 1.0 / (dd if abs(dd) > tiny else tiny)
    h = dd
    for m in range(1, 100000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        dd = 1.0 + aa * dd
        dd = 1.0 / (dd if abs(dd) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= dd * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        dd = 1.0 + aa * dd
        dd = 1.0 / (dd if abs(dd) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = dd * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    log_pref = a * math.log(x) + b * math.log1p(-x) - math.log(a) - special.betaln(a, b)
    return log_pref + math.log(h)


def _log_betainc_scalar(a, b, x):
    if x <= 0.0:
        return -math.inf
    if x >= 1.0:
        return 0.0
    direct = special.betainc(a, b, x)
    if direct > 1e-280:  # scipy is accurate here; below, it underflows: use the log fraction
        return math.log(direct)
    if x < (a + 1.0) / (a + b + 2.0):
        return _log_betainc_cf(a, b, x)
    # I_x(a,b) = 1 - I_{1-x}(b,a); here I_x is not tiny, so log1p is exact enough
    return math.log1p(-math.exp(_log_betainc_cf(b, a, 1.0 - x)))


def log_betainc(a, b, x):
    """ln I_x(a, b), the log of the regularised incomplete beta function, without underflow.

    Uses scipy's betainc where it is representable and the continued fraction with a log
    prefactor where it underflows (large a, e.g. a = (d-1)/2 with d up to 16384 and more).
    Vectorised over a, b, x by numpy broadcasting.
    """
    a = check_array("a", a, low=0, low_open=True)
    b = check_array("b", b, low=0, low_open=True)
    x_in = x
    x = check_array("x", x, low=0, allowed="numbers in [0, 1]")
    if np.any(x > 1):
        fail("x", "numbers in [0, 1]", x_in)
    out = np.vectorize(_log_betainc_scalar, otypes=[float])(a, b, x)
    return float(out) if out.ndim == 0 else out


def log_cone_fraction(d, phi):
    """ln F: log volume fraction of a spherical sector (cone of half-angle phi) in the d-ball.

    F equals the area fraction of the cap of half-angle phi on the sphere S^{d-1}
    (the sector is the cone over the cap):
        F = 1/2 I_{sin^2 phi}((d-1)/2, 1/2)          for phi <= pi/2,
        F = 1 - 1/2 I_{sin^2 phi}((d-1)/2, 1/2)      for phi >  pi/2.
    Checks: d = 2 gives phi/pi, d = 3 gives (1 - cos phi)/2, phi = pi/2 gives 1/2 for every d.
    Exact and finite in log space for any d >= 2 (F itself underflows for large d).
    """
    d = check_array("d", d, low=2, integer=True)
    phi_in = phi
    phi = check_array("phi", phi, low=0, allowed="angles in [0, pi]")
    if np.any(phi > math.pi):
        fail("phi", "angles in [0, pi]", phi_in)
    d, phi = np.broadcast_arrays(d, phi)
    s2 = np.sin(phi) ** 2
    s2 = np.where(np.abs(phi - math.pi / 2) < 1e-15, 1.0, s2)
    li = np.asarray(log_betainc((d - 1.0) / 2.0, 0.5, s2), dtype=float)
    half = li - math.log(2.0)
    out = np.where(phi <= math.pi / 2, half, np.log1p(-np.exp(np.minimum(half, 0.0))))
    out = np.where(phi == 0, -np.inf, out)
    return float(out) if out.ndim == 0 else out


def cone_half_angle(min_cos):
    """phi = theta/2 with theta = arccos(minimum pairwise cosine) ([A], docs/paper.md, section 4)."""
    c = check_array("min_cos", min_cos, low=-1, allowed="cosines in [-1, 1]")
    if np.any(c > 1):
        fail("min_cos", "cosines in [-1, 1]", min_cos)
    out = np.arccos(c) / 2.0
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------- slopes

def _result(kind, log_count, log_fraction, denominator):
    return RefinedSlope(kind, log_count / denominator, log_count, log_fraction, denominator)


def _extent_slope(kind, name, extents, what, per_extent, vocab_size, eps, r):
    """sum_i ln(1 + per_extent * x_i / eps) / ln|V| over the extents x_i of a box-like support
    (box: full widths, per_extent 1; ellipsoid: semi-axes, per_extent 2), compared with the
    ball of radius r when r is given."""
    allowed = f"a non-empty 1-D list of {what} >= 0"
    x = check_array(name, extents, low=0, allowed=allowed)
    if x.ndim != 1 or x.size == 0:
        fail(name, allowed, extents)
    V = _vocab(vocab_size)
    eps = _single("eps", eps, low=0, low_open=True)
    log_count = float(np.sum(np.log1p(per_extent * x / eps)))
    frac = None if r is None else log_count - ball_log_count(x.size, eps, r)
    return _result(kind, log_count, frac, math.log(V))


def box_slope(widths, vocab_size, eps, r=None):
    """C_box = sum_i ln(1 + w_i/eps) / ln|V|, with w_i = max - min of coordinate i ([A]).

    ``r`` (optional): the ball radius to compare with; then log_fraction =
    sum_i ln(1 + w_i/eps) - d ln(1 + 2r/eps) (<= 0 when every w_i <= 2r).
    """
    return _extent_slope("box", "widths", widths, "per-coordinate extents", 1.0, vocab_size, eps, r)


def cone_slope(d, vocab_size, eps, r, phi):
    """C_cone = (d ln(1 + 2r/eps) + ln F) / ln|V|, ln F = :func:`log_cone_fraction` (d, phi).

    phi: half-angle of the cone holding the samples, :func:`cone_half_angle` (min cosine).
    """
    lf = float(log_cone_fraction(_single("d", d, low=2, integer=True), _single("phi", phi, low=0)))
    V = _vocab(vocab_size)
    return _result("cone", ball_log_count(d, eps, r) + lf, lf, math.log(V))


def ellipsoid_slope(semi_axes, vocab_size, eps, r=None):
    """C_ell = sum_i ln(1 + 2 a_i/eps) / ln|V| for a support with principal semi-axes a_i.

    Why this bounds the count: the ellipsoid (or any set) whose projections on orthonormal
    principal axes u_i lie in [-a_i, a_i] is inside the rotated box prod_i [-a_i, a_i]. In the
    principal frame, points separated by eps in every-coordinate (L-infinity) distance have
    disjoint cubes of side eps that lie in the box grown by eps/2, so at most
    prod_i (2a_i + eps)/eps = prod_i (1 + 2a_i/eps) of them fit: the box bound in the
    principal frame. Caveat: float precision is axis-aligned in the model's own frame; the
    bound treats eps as the same in the rotated frame (true for the Euclidean-ball view of
    [A]'s Theorem 4.5, an assumption for the grid view). With :func:`accesslib.engine.geometry`'s
    fit, a_i = max |projection| of the samples, so the box contains every sample.
    """
    return _extent_slope("ellipsoid", "semi_axes", semi_axes, "semi-axes", 2.0, vocab_size, eps, r)


def cell_slope(log_count, s_conv):
    """C_cells = log_count / |s_conv|: the token cost ln|V| replaced by the cell cost.

    log_count: nats per vector of any support (:func:`ball_log_count`, or ``.log_count`` of
    a box/cone/ellipsoid result); s_conv: the fitted slope of the log-share convolution
    (negative, nats per token; [A] found -12.9 to -16.9), see
    :func:`accesslib.theory.stats.fit_s_conv`.
    """
    lc = _single("log_count", log_count, low=0)
    s = check_array("s_conv", s_conv, low=-math.inf, allowed="a single nonzero number")
    if s.ndim != 0 or float(s) == 0.0:
        fail("s_conv", "a single nonzero number", s_conv)
    return _result("cells", lc, None, abs(float(s)))


def slopes_at_eps(d, vocab_size, eps, r, *, widths=None, s_conv=None) -> dict:
    """The ball bound at precision eps and support radius r, with the box and cell refinements on
    top: {name: :class:`RefinedSlope`}: "ball" = d ln(1 + 2r/eps) / ln|V|
    (:func:`ball_log_count`); with ``widths``, "box" (:func:`box_slope`); with ``s_conv``, "cells"
    and, with both, "box+cells" (:func:`cell_slope` of the ball's and the box's log counts). The one
    place these four are composed: :func:`accesslib.engine.geometry.geometry_report` (at the
    dtype's eps) and :func:`measured_eps_slopes` (at a measured eps) call it."""
    V = _vocab(vocab_size)
    eps = _single("eps", eps, low=0, low_open=True)
    r = _single("r", r, low=0, low_open=True)
    lnV = math.log(V)
    ball = ball_log_count(d, eps, r)
    out = {"ball": RefinedSlope("ball", ball / lnV, ball, 0.0, lnV)}
    if widths is not None:
        out["box"] = box_slope(widths, V, eps, r=r)
    if s_conv is not None:
        out["cells"] = cell_slope(ball, s_conv)
        if "box" in out:
            out["box+cells"] = cell_slope(out["box"].log_count, s_conv)
    return out


def measured_eps_slopes(d, vocab_size, eps_rel, r, *, widths=None, s_conv=None) -> dict:
    """The counting bound at a measured precision: eps = eps_rel * r in place of the dtype's
    eps = r * unit roundoff, with the box and cell refinements on top.

    eps_rel: a measured effective eps, e.g. the median over random directions of the smallest
    relative move ||delta|| / ||x|| of a crammed memory that changes its greedy output
    (:func:`accesslib.engine.geometry.effective_eps`); it takes the place of the unit roundoff
    (2^-11 for [A]'s fp16) relative to the support radius r (r_inf). Returns
    :func:`slopes_at_eps` at eps = eps_rel * r ("ball": d ln(1 + 2/eps_rel) / ln|V|, r cancels;
    "box" with ``widths``; "cells" with ``s_conv``; "box+cells" with both).
    """
    eps_rel = _single("eps_rel", eps_rel, low=0, low_open=True)
    r = _single("r", r, low=0, low_open=True)
    return slopes_at_eps(d, vocab_size, eps_rel * r, r, widths=widths, s_conv=s_conv)
