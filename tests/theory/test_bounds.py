"""The counting bounds of [A] (docs/paper.md, section 2) against hand-computed values."""
import math

import numpy as np
import pytest

from accesslib.theory import bounds

# Pythia-160m with [A]'s eps = r * 2^-11: 1 + 2r/eps = 4097 whatever r is.
D, V, R = 768, 50304, 22.45
EPS = R / 2048


def test_slope_pythia_paper_value():
    # C = 768 * ln(4097) / ln(50304) = 768 * 8.31801 / 10.82585 = 590.09
    C = bounds.slope(D, V, EPS, R)
    assert C == pytest.approx(768 * math.log(4097) / math.log(50304), rel=1e-12)
    assert round(C, 1) == 590.1


def test_slope_does_not_depend_on_r_at_relative_eps():
    for r in (0.5, 9.95, 226.75):
        assert bounds.slope(D, V, r / 2048, r) == pytest.approx(590.0911, abs=1e-3)


def test_log10_accessible_hand_value():
    # (1 + 2r/eps)^(d m) with 2r/eps = 4096, d = 768, m = 3: 3 * 768 * log10(4097)
    assert bounds.log10_accessible(D, EPS, R, 3) == pytest.approx(3 * 768 * math.log10(4097), rel=1e-12)
    # a small case one can do by hand: d = 2, m = 1, 2r/eps = 9 -> 10^2 points -> log10 = 2
    assert bounds.log10_accessible(2, 2.0, 9.0, 1) == pytest.approx(2.0, abs=1e-12)


def test_natural_log_agrees_with_log10():
    assert bounds.log_accessible(D, EPS, R, 2) == pytest.approx(
        bounds.log10_accessible(D, EPS, R, 2) * math.log(10), rel=1e-12)


def test_limiting_cases():
    assert bounds.log10_accessible(D, EPS, R, 0) == 0.0       # no prompt: one output
    assert bounds.log10_accessible(D, EPS, 0.0, 5) == 0.0     # zero support: one point
    assert bounds.slope(D, V, EPS, 0.0) == 0.0
    assert bounds.n_star(0, D, V, EPS, R) == 0.0
    # tiny 2r/eps: log1p keeps it exact, ln(1 + x) ~ x
    x = 1e-12
    assert bounds.log_accessible(1, 1.0, x / 2, 1) == pytest.approx(x, rel=1e-9)
    # linear in d and in m
    assert bounds.log10_accessible(2 * D, EPS, R, 1) == pytest.approx(2 * bounds.log10_accessible(D, EPS, R, 1))
    assert bounds.n_star(4, D, V, EPS, R) == pytest.approx(4 * bounds.slope(D, V, EPS, R))


def test_huge_model_stays_finite():
    # d = 8192, m = 10^4, |V| = 10^6: the count has ~3e8 digits, far beyond any float
    val = bounds.log10_accessible(8192, EPS, R, 1e4)
    assert math.isfinite(val)
    assert val == pytest.approx(8192 * 1e4 * math.log10(4097), rel=1e-12)
    C = bounds.slope(8192, 1e6, EPS, R)
    assert C == pytest.approx(8192 * math.log(4097) / math.log(1e6), rel=1e-12)
    ns = bounds.n_star(1e4, 8192, 1e6, EPS, R)
    assert math.isfinite(ns) and ns == pytest.approx(1e4 * C)
    frac = bounds.log10_accessible_fraction(2 * ns, 1e4, 8192, 1e6, EPS, R)
    assert frac == pytest.approx(-ns * 6.0, rel=1e-9)
    # fp32 precision: 1 + 2r/eps = 1 + 2^25
    eps32 = bounds.eps_for_dtype("float32", R)
    assert math.isfinite(bounds.log10_accessible(8192, eps32, R, 1e4))


def test_accessible_fraction_flat_then_slope_minus_log10_V():
    ns = bounds.n_star(2, D, V, EPS, R)
    n = np.array([0.0, 10.0, ns - 1.0, ns, ns + 1.0, ns + 2.0, ns + 10.5])
    f = bounds.log10_accessible_fraction(n, 2, D, V, EPS, R)
    assert np.all(f[:4] == 0.0)
    lv = math.log10(V)
    assert f[4] == pytest.approx(-1 * lv)
    assert f[5] == pytest.approx(-2 * lv)
    assert f[6] == pytest.approx(-10.5 * lv)
    assert np.all(np.diff(f) <= 0)


def test_n50_bound():
    C = bounds.slope(D, V, EPS, R)
    for m in (0, 1, 5):
        n50 = bounds.n50_bound(m, D, V, EPS, R)
        assert n50 == pytest.approx(C * m + math.log(2) / math.log(V))
        # by definition the fraction bound there is exactly 1/2
        assert 10 ** bounds.log10_accessible_fraction(n50, m, D, V, EPS, R) == pytest.approx(0.5)


def test_vectorisation_broadcasts():
    d = np.array([640, 768, 2048])
    v = np.array([262144, 50304, 128256])
    C = bounds.slope(d, v, EPS, R)
    assert isinstance(C, np.ndarray) and C.shape == (3,)
    for i in range(3):
        assert C[i] == pytest.approx(bounds.slope(int(d[i]), int(v[i]), EPS, R))
    m = np.arange(6)[:, None]
    ns = bounds.n_star(m, d[None, :], v[None, :], EPS, R)
    assert ns.shape == (6, 3)
    assert np.allclose(ns, m * C[None, :])
    n = np.linspace(0, 2000, 11)
    assert bounds.log10_accessible_fraction(n, 1, D, V, EPS, R).shape == (11,)
    # scalars come back as plain floats
    assert type(bounds.slope(D, V, EPS, R)) is float


def test_eps_for_dtype():
    assert bounds.eps_for_dtype("float16", 2.0) == 2.0 * 2**-11
    assert bounds.eps_for_dtype("bfloat16", 2.0) == 2.0 * 2**-8
    assert bounds.eps_for_dtype("float32", 2.0) == 2.0 * 2**-24
    assert bounds.eps_for_dtype("paper", 2.0) == 2.0 * 2**-11
    assert bounds.eps_for_dtype("bf16", 1.0) == 2**-8
    assert bounds.eps_for_dtype("torch.float32", 1.0) == 2**-24
    # docs/paper.md, section 3: bf16 about 25% lower slope, fp32 about twice
    c16 = bounds.slope(D, V, bounds.eps_for_dtype("float16", R), R)
    cbf = bounds.slope(D, V, bounds.eps_for_dtype("bfloat16", R), R)
    c32 = bounds.slope(D, V, bounds.eps_for_dtype("float32", R), R)
    assert cbf / c16 == pytest.approx(math.log(513) / math.log(4097))
    assert 0.70 < cbf / c16 < 0.80
    assert 1.9 < c32 / c16 < 2.1
    np.testing.assert_allclose(bounds.eps_for_dtype("float16", np.array([1.0, 4.0])), [2**-11, 2**-9])


def test_theory_ratio_llama():
    # docs/paper.md, section 6: Llama-3.2-1B, 1448 / 71.3 = 20.3
    C = bounds.slope(2048, 128256, 20.91 / 2048, 20.91)
    assert C == pytest.approx(1448.36, abs=0.01)
    assert bounds.theory_ratio(C, 71.3) == pytest.approx(20.3, abs=0.05)


@pytest.mark.parametrize("call, name", [
    (lambda: bounds.slope(0, V, EPS, R), "d"),
    (lambda: bounds.slope(2.5, V, EPS, R), "d"),
    (lambda: bounds.slope(D, 1, EPS, R), "vocab_size"),
    (lambda: bounds.slope(D, 100.5, EPS, R), "vocab_size"),
    (lambda: bounds.slope(D, V, 0.0, R), "eps"),
    (lambda: bounds.slope(D, V, -1e-3, R), "eps"),
    (lambda: bounds.slope(D, V, EPS, -1.0), "r"),
    (lambda: bounds.n_star(-1, D, V, EPS, R), "m"),
    (lambda: bounds.log10_accessible(D, float("nan"), R, 1), "eps"),
    (lambda: bounds.log10_accessible(D, EPS, float("inf"), 1), "r"),
    (lambda: bounds.log10_accessible(D, EPS, R, float("inf")), "m"),
    (lambda: bounds.log10_accessible("768", EPS, R, 1), "d"),
    (lambda: bounds.log10_accessible(None, EPS, R, 1), "d"),
    (lambda: bounds.log10_accessible(True, EPS, R, 1), "d"),
    (lambda: bounds.log10_accessible(D, [EPS, "x"], R, 1), "eps"),
    (lambda: bounds.log10_accessible_fraction(-1, 1, D, V, EPS, R), "n"),
    (lambda: bounds.n50_bound(1, D, 1, EPS, R), "vocab_size"),
    (lambda: bounds.slope(np.array([768, 0]), V, EPS, R), "d"),
    (lambda: bounds.eps_for_dtype("float8", R), "dtype"),
    (lambda: bounds.eps_for_dtype("float16", 0.0), "r"),
    (lambda: bounds.eps_for_dtype("float16", -2.0), "r"),
])
def test_invalid_input_names_parameter(call, name):
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith(name + " ")
    # and says what is allowed
    assert any(w in msg for w in (">", "one of", "finite", "whole number"))


@pytest.mark.parametrize("call, message", [
    (lambda: bounds.slope(2.5, V, EPS, R), "d must be a whole number >= 1; got 2.5"),
    (lambda: bounds.slope(D, 1, EPS, R), "vocab_size must be a whole number >= 2; got 1"),
    (lambda: bounds.slope(D, V, 0.0, R), "eps must be a number > 0; got 0.0"),
    (lambda: bounds.log10_accessible(D, EPS, R, float("inf")), "m must be a number >= 0; got inf"),
    (lambda: bounds.log10_accessible("768", EPS, R, 1), "d must be a whole number >= 1; got '768'"),
    (lambda: bounds.eps_for_dtype("float8", R),
     "dtype must be one of 'float16', 'bfloat16', 'float32', 'paper'; got 'float8'"),
    (lambda: bounds.theory_ratio(20.0, 0), "measured_slope must be a number > 0; got 0"),
])
def test_invalid_input_message_style(call, message):
    # accesslib._checks' one style: "<name> must be <allowed>; got <value>"
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value) == message


def test_bounds_does_not_import_refined():
    # refined imports bounds (ball counts), never the other way round; no lazy re-exports
    import subprocess
    import sys
    code = ("import sys, accesslib.theory.bounds as b; "
            "print('accesslib.theory.refined' in sys.modules, hasattr(b, 'box_slope'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_bound_table_agrees_with_the_functions_it_gathers():
    t = bounds.bound_table(576, 49152, 0.03, 56.4, [1, 2.5], [400, 800])   # C = 443.6
    c = bounds.slope(576, 49152, 0.03, 56.4)
    assert t["slope"] == pytest.approx(c) and t["ln_cells"] == pytest.approx(math.log1p(2 * 56.4 / 0.03))
    assert [r["m"] for r in t["rows"]] == [1, 2.5]
    assert [r["n_star"] for r in t["rows"]] == pytest.approx([c, 2.5 * c])
    half = math.log(2) / math.log(49152)   # the tokens past n* at which the share falls to 1/2
    assert [r["n50"] for r in t["rows"]] == pytest.approx([c + half, 2.5 * c + half])
    assert t["rows"][1]["log10_prompts"] == pytest.approx(576 * 2.5 * math.log10(1 + 2 * 56.4 / 0.03))
    # n = 800 lies past n* at m = 1 only: (800 - C) tokens of log10 |V| each
    assert t["shares"][1]["log10_share"] == pytest.approx([-(800 - c) * math.log10(49152), 0.0])
    assert t["shares"][0]["log10_share"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="vocab_size must be a whole number >= 2; got 1"):
        bounds.bound_table(4, 1, 0.1, 1.0, [1])
    with pytest.raises(ValueError, match="m must be a number >= 0; got -1"):
        bounds.bound_table(4, 9, 0.1, 1.0, [-1])
