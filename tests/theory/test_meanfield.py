"""Mean-field invariances of position-free attention (docs/paper.md, section 2, Corollary 4.10 context)."""
import numpy as np
import pytest

from accesslib.theory import meanfield as mf


@pytest.fixture(scope="module")
def model():
    return mf.PositionFreeTransformer.random(vocab_size=6, d=12, layers=2, heads=3, seed=0)


def test_single_head_attention_by_hand():
    # one layer reduced to a plain softmax average: check against the formula in the docstring
    m = mf.PositionFreeTransformer.random(vocab_size=3, d=4, layers=1, heads=1, seed=2)
    L = m.layers[0]
    x = np.array([[1.0, 0, 0, 0], [0, 2.0, 0, 0], [0, 0, 0, -1.0]])
    s = (x[2] @ L["Wq"]) @ (x @ L["Wk"]).T / 2.0
    w = np.exp(s) / np.exp(s).sum()
    want = (w @ (x @ L["Wv"])) @ L["Wo"]
    got = m._attend(L, x[2:], x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # doubling every key (a measure with the same proportions) gives the same value
    got2 = m._attend(L, x[2:], np.repeat(x, 2, axis=0))[0]
    np.testing.assert_allclose(got2, want, rtol=1e-12)


def test_duplicate_and_permute_leave_output_unchanged(model):
    ids = np.random.default_rng(1).integers(0, 6, 40)
    c = mf.invariance_check(model, ids, k=3, seed=4)
    assert c.duplicated < 1e-12 and c.permuted < 1e-12 and c.measure < 1e-12
    # and the output is not trivially constant: a different context changes it
    other = np.concatenate([np.zeros(39, int), ids[-1:]])
    assert np.abs(mf.query_output(model, other) - mf.query_output(model, ids)).max() > 1e-2


def test_positions_or_causal_mask_break_the_invariance(model):
    ids = np.random.default_rng(1).integers(0, 6, 40)
    pos = mf.invariance_check(model, ids, k=2, positions=True)
    cau = mf.invariance_check(model, ids, k=2, causal=True)
    assert pos.duplicated > 1e-3 and pos.permuted > 1e-3
    assert cau.permuted > 1e-3


def test_duplicate_helper():
    np.testing.assert_array_equal(mf.duplicate([1, 2, 3], 2), [1, 1, 2, 2, 3, 3])
    np.testing.assert_allclose(mf.empirical_measure([0, 0, 2], 3), [2 / 3, 0, 1 / 3])
    with pytest.raises(ValueError, match=r"^k must be a whole number in 1\.\.1000; got 0$"):
        mf.duplicate([1], 0)


def test_measure_forward_is_limit_of_long_contexts(model):
    p = np.array([0.4, 0.3, 0.1, 0.1, 0.05, 0.05])
    c = mf.convergence(model, p, [10, 100, 1000], query=1, repeats=4, seed=0)
    d = c["out_dist"].mean(1)
    assert d[2] < d[1] < d[0]
    assert d[2] < d[0] / 4
    assert np.all(np.diff(c["tv"].mean(1)) < 0)


def test_exact_measure_context_matches_measure_forward(model):
    # a context whose empirical measure is exactly p gives exactly the mean-field output at p
    ids = np.array([0] * 4 + [1] * 3 + [2] * 2 + [5] * 1)
    p = mf.empirical_measure(ids, 6)
    for t in (0, 1, 2, 5):
        ctx = np.concatenate([np.delete(ids, np.where(ids == t)[0][0]), [t]])
        np.testing.assert_allclose(mf.query_output(model, ctx), model.forward_measure(p)[t], atol=1e-12)


def test_bad_input(model):
    with pytest.raises(ValueError, match=r"^ids must be a non-empty 1-D sequence of token ids in 0\.\.5; got \[0, 9\]$"):
        model.forward_tokens([0, 9])
    with pytest.raises(ValueError, match=r"^p must be 6 non-negative weights with a positive sum; got "):
        model.forward_measure(np.ones(3))
    with pytest.raises(ValueError, match=r"^d must be a multiple of heads; got d=10, heads=3$"):
        mf.PositionFreeTransformer.random(d=10, heads=3)
    with pytest.raises(ValueError, match=r"^vocab_size must be a whole number in 2\.\.10000; got 1$"):
        mf.PositionFreeTransformer.random(vocab_size=1)


