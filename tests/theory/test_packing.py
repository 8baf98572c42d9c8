"""Packing counts against hand-computed cases and the (1 + 2r/eps)^d bound (docs/paper.md, section 2)."""
import math

import numpy as np
import pytest

from accesslib.theory import packing


@pytest.mark.parametrize("r,eps,d,want", [
    (1, 1, 1, 3),            # -1, 0, 1
    (2.5, 1, 1, 5),
    (1, 1, 2, 5),            # origin + 4 axis neighbours
    (2 ** 0.5, 1, 2, 9),     # the 3x3 square: corners exactly on the circle count (closed ball)
    (2, 1, 2, 13),           # 5 + 3 + 3 + 1 + 1
    (1, 1, 3, 7),            # origin + 6
    (0.99, 1, 3, 1),
    (0, 0.5, 2, 1),
    (0.2, 0.1, 2, 13),       # scale invariance: same as r=2, eps=1
])
def test_grid_count_hand_values(r, eps, d, want):
    assert packing.grid_count(r, eps, d) == want


def test_grid_count_matches_enumeration_and_points():
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = int(rng.integers(1, 4))
        r = float(rng.uniform(0, 6))
        k = np.stack(np.meshgrid(*[np.arange(-7, 8)] * d, indexing="ij"), -1).reshape(-1, d)
        brute = int(((k ** 2).sum(1) <= r * r).sum())
        assert packing.grid_count(r, 1.0, d) == brute
        assert len(packing.grid_points(r, 1.0, d)) == brute


def test_lattice_hand_values():
    assert packing.lattice_count(1, 1, 2) == 7     # hexagon + centre
    assert packing.lattice_count(1, 1, 3) == 13    # FCC: 12 neighbours + centre
    assert packing.lattice_count(0.5, 1, 3) == 1
    pts = packing.lattice_points(3, 0.7, 2)
    assert packing.min_distance(pts) == pytest.approx(0.7)


def test_counts_never_exceed_bound():
    for d in (1, 2, 3):
        for ratio in (0, 0.3, 1, 1.7, 2.5, 4, 7.3):
            b = packing.bound(ratio, 1.0, d)
            assert packing.grid_count(ratio, 1.0, d) <= b
            assert packing.lattice_count(ratio, 1.0, d) <= b
    for d, ratio in ((2, 3.0), (3, 1.5)):
        g = packing.greedy_packing(ratio, 1.0, d, seed=1, patience=300)
        assert packing.min_distance(g) >= 1.0 - 1e-12
        assert np.all(np.linalg.norm(g, axis=1) <= ratio + 1e-12)
        assert 1 <= len(g) <= packing.bound(ratio, 1.0, d)


def test_large_ratio_counts_approach_volume_ratio():
    # grid: count ~ volume of the ball in eps units; 2-D: pi R^2 (Gauss circle problem)
    R = 200
    assert packing.grid_count(R, 1, 2) / (math.pi * R * R) == pytest.approx(1, abs=2e-3)
    # hexagonal lattice is denser by 2/sqrt(3)
    R = 40
    assert packing.lattice_count(R, 1, 2) / (math.pi * R * R * 2 / math.sqrt(3)) == pytest.approx(1, abs=0.02)
    # and the bound (1 + 2R)^2 is about 4/pi above the grid count
    assert packing.bound(R, 1, 2) / packing.grid_count(R, 1, 2) == pytest.approx(4 / math.pi, rel=0.06)


def test_bound_matches_bounds_module():
    assert packing.bound(2, 1, 3) == 125.0
    assert packing.log10_bound(2, 1, 3) == pytest.approx(math.log10(125))


def test_greedy_seeded():
    a = packing.greedy_packing(2.0, 1.0, 2, seed=3, patience=200)
    b = packing.greedy_packing(2.0, 1.0, 2, seed=3, patience=200)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kw,message", [
    (dict(r=-1, eps=1, d=2), "r must be a number >= 0; got -1"),
    (dict(r=1, eps=0, d=2), "eps must be a number > 0; got 0"),
    (dict(r=1, eps=1, d=0), "d must be a whole number in 1..6; got 0"),
    (dict(r=1, eps=float("nan"), d=2), "eps must be a finite number > 0; got nan"),
    (dict(r=1, eps=1, d=2.5), "d must be a whole number in 1..6; got 2.5"),
])
def test_bad_input(kw, message):
    with pytest.raises(ValueError) as e:
        packing.grid_count(**kw)
    assert str(e.value) == message


def test_too_many_points_is_a_clear_error():
    with pytest.raises(ValueError, match="eps"):
        packing.grid_points(1000, 1, 3)
    with pytest.raises(ValueError, match=r"^method must be one of 'grid', 'lattice', 'greedy'; got 'hexagon'$"):
        packing.points("hexagon", 1, 1, 2)
    with pytest.raises(ValueError, match=r"^method must be one of 'grid', 'lattice'; got 'greedy'$"):
        packing.count_curve(2, [1.0], "greedy")


# ---------------------------------------------------------------- the Apps (headless)


