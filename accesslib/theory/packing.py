"""Packing eps-separated points in a radius-r ball: the counting argument of [A], made visible.

docs/paper.md, section 2: a model computing at precision eps cannot tell apart inputs closer
than eps, and its inputs live in a ball of radius r. A set of points that are pairwise at least
eps apart ("eps-separated") inside the closed ball B(0, r) in R^d has at most

    (1 + 2r/eps)^d                                            (packing bound, [A] Theorem 4.5)

points: the balls of radius eps/2 around them are disjoint and all lie in B(0, r + eps/2), so
their total volume N * (eps/2)^d * vol(B_1) is at most (r + eps/2)^d * vol(B_1).

This module counts concrete eps-separated sets and checks them against that bound:

- :func:`grid_count` - the cubic grid eps * Z^d, counted *exactly* (integer arithmetic);
- :func:`lattice_points` - the densest lattice packings in 2-D (hexagonal) and 3-D (face-
  centred cubic), nearest-neighbour distance eps;
- :func:`greedy_packing` - random sequential addition: uniform candidates, each kept if it is
  at least eps from every kept point (seeded; a maximal packing once ``patience`` candidates in
  a row are rejected).

Pure numpy (no torch, no matplotlib). Counts are also returned as log10 where they can be large.
"""
from __future__ import annotations

import math

import numpy as np

from accesslib._checks import check_choice, check_float, check_int, check_seed
from accesslib.theory import bounds

#: relative slack for points exactly on the sphere |x| = r (closed ball, float round-off)
BOUNDARY_RTOL = 1e-9
METHODS = ("grid", "lattice", "greedy")


def _ball(r, eps, d, *, max_d):
    """(r, eps, d) checked by accesslib._checks: r >= 0, eps > 0, d a whole number in 1..max_d."""
    d = check_int("d", d, 1, max_d)
    return check_float("r", r, 0), check_float("eps", eps, 0, low_open=True), d


def log10_bound(r, eps, d):
    """log10 (1 + 2r/eps)^d, via :func:`accesslib.theory.bounds.log10_accessible` with m = 1."""
    return bounds.log10_accessible(d, eps, r, 1)


def bound(r, eps, d):
    """(1 + 2r/eps)^d as a float (fine for the small d of this module; validated by bounds)."""
    log10_bound(r, eps, d)
    out = (1.0 + 2.0 * np.asarray(r, dtype=float) / np.asarray(eps, dtype=float)) ** np.asarray(d, dtype=float)
    return float(out) if out.ndim == 0 else out


def _isqrt_floor(t):
    """floor(sqrt(t)) for an array of non-negative integers held as floats, exact."""
    s = np.floor(np.sqrt(t))
    s = np.where((s + 1) ** 2 <= t, s + 1, s)
    s = np.where(s ** 2 > t, s - 1, s)
    return s


def grid_count(r, eps, d):
    """Exact number of points of the grid eps * Z^d in the closed ball |x| <= r.

    Counts integer vectors k with |k|^2 <= (r/eps)^2 (with a 1e-9 relative slack so points
    exactly on the sphere count despite float round-off). Recursion over the first coordinate,
    the last one in closed form (2*floor(sqrt(t)) + 1). Returns a Python int.
    """
    r, eps, d = _ball(r, eps, d, max_d=6)
    R2 = (r / eps) ** 2 * (1 + BOUNDARY_RTOL)
    t_int = math.floor(R2)   # |k|^2 is an integer: |k|^2 <= R2  <=>  |k|^2 <= floor(R2)

    def count(dim, t):  # t: integer budget for the remaining squared coordinates
        if dim == 1:
            return int(2 * math.isqrt(t) + 1)
        if dim == 2:
            xs = np.arange(-math.isqrt(t), math.isqrt(t) + 1, dtype=float)
            return int(np.sum(2 * _isqrt_floor(t - xs ** 2) + 1))
        m = math.isqrt(t)
        return sum(count(dim - 1, t - x * x) for x in range(-m, m + 1))

    return count(d, t_int)


def grid_points(r, eps, d, *, max_points=200_000):
    """The points of eps * Z^d in the closed ball |x| <= r, as an array [N, d]."""
    r, eps, d = _ball(r, eps, d, max_d=3)
    n = grid_count(r, eps, d)
    if n > max_points:
        raise ValueError(f"r/eps is too large to list the grid points ({n:,} > max_points={max_points:,}); "
                         f"raise eps or lower r")
    m = int(math.floor(r / eps * (1 + BOUNDARY_RTOL)))
    axes = [np.arange(-m, m + 1)] * d
    k = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, d)
    k = k[(k ** 2).sum(1) <= (r / eps) ** 2 * (1 + BOUNDARY_RTOL)]
    return k * eps


#: lattice bases with nearest-neighbour distance 1 (rows are basis vectors)
_BASES = {
    1: np.array([[1.0]]),
    2: np.array([[1.0, 0.0], [0.5, math.sqrt(3) / 2]]),                      # hexagonal
    3: np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]) / math.sqrt(2),  # FCC
}
LATTICE_NAMES = {1: "integer", 2: "hexagonal", 3: "face-centred cubic"}


def lattice_points(r, eps, d, *, max_points=200_000):
    """Points of the densest lattice packing (d=2 hexagonal, d=3 FCC) with spacing eps in |x| <= r.

    Every pair is at least eps apart (the nearest-neighbour distance of the lattice). These
    lattices are the densest packings in 2-D and 3-D, so for large r/eps their count approaches
    the packing limit (density pi/sqrt(12) resp. pi/sqrt(18)) times (2r/eps)^d.
    """
    r, eps, d = _ball(r, eps, d, max_d=3)
    B = _BASES[d] * eps
    # coefficient range: |c_i| <= r * ||B^-1||_2 covers the ball
    span = int(math.ceil(r * np.linalg.norm(np.linalg.inv(B), 2) * (1 + BOUNDARY_RTOL))) + 1
    if (2 * span + 1) ** d > 50 * max_points:
        raise ValueError(f"r/eps is too large to list the lattice points (about {(2*span+1)**d:,} "
                         f"candidates); raise eps or lower r")
    c = np.stack(np.meshgrid(*[np.arange(-span, span + 1)] * d, indexing="ij"), -1).reshape(-1, d)
    x = c @ B
    x = x[(x ** 2).sum(1) <= r * r * (1 + BOUNDARY_RTOL) ** 2]
    if len(x) > max_points:
        raise ValueError(f"too many lattice points ({len(x):,} > max_points={max_points:,}); raise eps")
    return x


def lattice_count(r, eps, d):
    """Number of :func:`lattice_points`."""
    return int(len(lattice_points(r, eps, d)))


def uniform_in_ball(n, d, r, rng):
    """n points uniform in the d-ball of radius r (Gaussian direction, radius r * U^(1/d))."""
    g = rng.standard_normal((n, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return g * (r * rng.random(n) ** (1.0 / d))[:, None]


def greedy_packing(r, eps, d, *, seed=0, patience=2000, max_candidates=200_000, max_points=50_000):
    """Random sequential addition of eps-separated points in the ball |x| <= r.

    Uniform candidates in the ball, in order; a candidate is kept if its distance to every kept
    point is >= eps (checked through a hash grid of cell size eps: only the 3^d neighbouring
    cells can hold a point closer than eps). Stops after ``patience`` rejections in a row (the
    packing is then very likely maximal) or ``max_candidates`` candidates. Seeded. Returns
    the kept points [N, d].
    """
    r, eps, d = _ball(r, eps, d, max_d=3)
    rng = np.random.default_rng(check_seed("seed", seed))
    cells: dict = {}
    kept = []
    offsets = np.stack(np.meshgrid(*[np.arange(-1, 2)] * d, indexing="ij"), -1).reshape(-1, d)
    offsets = [tuple(o) for o in offsets]
    eps2 = eps * eps
    fails = tried = 0
    chunk = 4096
    while fails < patience and tried < max_candidates:
        for p in uniform_in_ball(chunk, d, r, rng):
            tried += 1
            key = tuple(np.floor(p / eps).astype(int))
            ok = True
            for o in offsets:
                for q in cells.get(tuple(k + oo for k, oo in zip(key, o)), ()):
                    if ((p - q) ** 2).sum() < eps2:
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                cells.setdefault(key, []).append(p)
                kept.append(p)
                fails = 0
                if len(kept) >= max_points:
                    raise ValueError(f"too many points (> max_points={max_points:,}); raise eps")
            else:
                fails += 1
            if fails >= patience or tried >= max_candidates:
                break
    return np.array(kept).reshape(-1, d)


def min_distance(points):
    """Smallest pairwise distance of a point set (inf for fewer than 2 points)."""
    p = np.asarray(points, dtype=float)
    if len(p) < 2:
        return math.inf
    best = math.inf
    for i in range(0, len(p), 512):  # blocks keep memory small
        blk = p[i : i + 512]
        dd = ((blk[:, None, :] - p[None, :, :]) ** 2).sum(-1)
        idx = np.arange(i, i + len(blk))
        dd[np.arange(len(blk)), idx] = np.inf
        best = min(best, float(dd.min()))
    return math.sqrt(best)


def points(method, r, eps, d, *, seed=0):
    """Points of ``method`` ('grid', 'lattice' or 'greedy') in the ball."""
    if method == "grid":
        return grid_points(r, eps, d)
    if method == "lattice":
        return lattice_points(r, eps, d)
    if method == "greedy":
        return greedy_packing(r, eps, d, seed=seed)
    check_choice("method", method, METHODS)


def count_curve(d, ratios, method="grid"):
    """Counts for r/eps in ``ratios`` (eps = 1): grid exactly, lattice by enumeration."""
    fn = {"grid": grid_count, "lattice": lattice_count}[check_choice("method", method, ("grid", "lattice"))]
    return np.array([fn(float(x), 1.0, d) for x in ratios], dtype=float)
