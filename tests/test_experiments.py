"""n50 and slope fits on synthetic data, length searches on a simulated engine, and the
accessibility curve on a tiny model with stop + resume (accesslib/experiments.py)."""
import threading

import numpy as np
import pytest
from scipy.special import expit

from accesslib.experiments import curves as E
from accesslib.theory import stats as S_


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


def test_paper_search_follows_the_published_rule():
    S = E.LengthSampler(E.logistic_oracle(250.5, -50.0), max_length=1000)  # a sharp step at 250.5
    E.search_paper(S, 1, 20)
    # +100 while > 0.9 (10, 110, 210, fail at 310), +10 from 210 until < 0.1 (260), one more +100
    assert S.order == [10, 110, 210, 310, 220, 230, 240, 250, 260, 360]
    assert S.crammed == 20 * 10


def test_bisect_search_finds_n50_with_fewer_strings_than_paper():
    """The measured saving on a simulated engine (strings x squared error at equal precision)."""
    x0, k = 183.0, -0.15
    cost = {}
    for name in ("paper", "bisect"):
        n_str, sq = [], []
        for seed in range(16):
            S = E.LengthSampler(E.logistic_oracle(x0, k, seed), max_length=1000)
            if name == "paper":
                E.search_paper(S, 1, 20)
            else:
                E.search_bisect(S, 1, 20, precision=0.01)
            fit = S_.fit_n50(S.curve())
            n_str.append(S.crammed)
            sq.append((fit.n50 - x0) ** 2)
        cost[name] = (np.mean(n_str), np.sqrt(np.mean(sq)))
    (ps, pe), (bs, be) = cost["paper"], cost["bisect"]
    assert bs < 0.6 * ps               # far fewer strings crammed
    assert be < 2.5 and pe < 2.0       # both locate n50 to within ~1.3% (x0 = 183)
    assert ps * pe ** 2 > 1.2 * bs * be ** 2  # more information per string


def test_bisect_edge_cases_end_cleanly():
    S = E.LengthSampler(E.logistic_oracle(5000, -1.0), max_length=300)  # accessible up to the cap
    E.search_bisect(S, 1, 8)
    assert max(S.results) == 300 and S_.fit_n50(S.curve()).status == "all_success"
    S = E.LengthSampler(E.logistic_oracle(-50, -1.0), min_length=1, max_length=300)  # never accessible
    E.search_bisect(S, 1, 8)
    assert min(S.results) == 1 and S_.fit_n50(S.curve()).status == "all_fail"


def test_protocol_settings_and_errors():
    from accesslib.engine.cramming import protocol_settings
    pytest.importorskip("torch")
    p = protocol_settings("paper")
    assert p["lr"] == 1e-2 and tuple(p["betas"]) == (0.9, 0.9) and p["max_steps"] == 3000
    assert p["patience"] == 500 and p["first_token_as_input"] is True
    assert protocol_settings("fast", max_steps=7)["max_steps"] == 7
    with pytest.raises(ValueError, match="protocol must be one of"):
        protocol_settings("slow")


def test_protocol_hash_is_pinned():
    # stores and shipped bundles key their rows by these hashes: the same settings must give
    # the same hash forever (values computed before the hash had one function)
    pytest.importorskip("torch")
    assert E.protocol_hash_for("paper") == "93504c321ca2c8bf"
    assert E.protocol_hash_for("fast") == "72513ca5cda23e34"
    assert E.protocol_hash_for("fast", {"max_steps": 30}) == "b3f5c7402d754e2b"
    assert E.protocol_hash_for("fast", {"max_steps": 30, "patience": None}) == "b3f5c7402d754e2b"
    assert E.protocol_hash_for("paper", {"max_steps": 1000}, text="hello world") == "10d8ea2b63777e57"
    settings = E.hashed_settings("paper", {"max_steps": 1000}, text="hello world")
    assert settings["max_steps"] == 1000 and len(settings["source_text"]) == 8
    from accesslib.results.store import protocol_hash
    assert protocol_hash(settings) == "10d8ea2b63777e57"


@pytest.fixture(scope="module")
def tiny():
    torch = pytest.importorskip("torch")
    pytest.importorskip("accesslib.engine.cramming")
    torch.set_num_threads(1)
    from accesslib.models.loading import tiny_model
    return tiny_model("gpt_neox", d=32, vocab_size=64, layers=2, seed=0)


def test_accessibility_curve_stop_and_resume(tiny, tmp_path):
    from accesslib.results.store import ResultsStore
    st = ResultsStore(tmp_path / "r.sqlite")
    kw = dict(lengths=[1, 2], samples=3, source="tokens", store=st, protocol="fast", max_steps=30, patience=10)
    stop = threading.Event()
    seen = []

    def on_step(info):  # a "kill" in the middle of the second length's batch
        if len(seen) >= 3 and info.step >= 3:
            stop.set()

    c1 = E.accessibility_curve(tiny, 1, stop=stop, on_string=seen.append, on_step=on_step, **kw)
    assert c1.interrupted and c1.strings_crammed == st.count() == len(seen) == 3
    c2 = E.accessibility_curve(tiny, 1, **kw)
    assert not c2.interrupted
    assert c2.strings_from_store == st.count() - c2.strings_crammed == c1.strings_crammed
    assert st.count() == 6 and c2.totals == [3, 3]
    # the stored rows are exactly the strings of the curve, each once, with checkable memory
    rows = st.rows(memory=True)
    assert len({(r["n"], r["target_hash"]) for r in rows}) == 6
    assert all(r["memory"].shape == (1, 32) for r in rows)
    c3 = E.accessibility_curve(tiny, 1, **kw)
    assert c3.strings_crammed == 0 and c3.successes == c2.successes
    # a success in the store is reproduced by independent greedy generation from its memory
    import torch

    from accesslib.engine.decoding import greedy
    for r in rows:
        if r["success"]:
            out = greedy(tiny.model, torch.tensor(r["memory"])[None], r["n"], prefix_ids=r["prefix_ids"])
            assert out[0].tolist() == r["target_ids"]


def test_accessibility_curve_bad_input(tiny):
    with pytest.raises(ValueError, match=r"^m must be a whole number >= 1; got 0$"):
        E.accessibility_curve(tiny, 0, lengths=[2])
    with pytest.raises(ValueError, match=r"^samples must be a whole number >= 1; got 2\.5$"):
        E.accessibility_curve(tiny, 1, lengths=[2], samples=2.5)
    with pytest.raises(ValueError, match=r"^source must be one of 'natural', .*; got 'pg19'$"):
        E.accessibility_curve(tiny, 1, lengths=[2], source="pg19")
    with pytest.raises(ValueError, match=r"^lengths must be None with search='paper', .*give lengths only "
                                         r"with search='grid'\); got \[2\]$"):
        E.accessibility_curve(tiny, 1, lengths=[2], search="paper")
    with pytest.raises(ValueError, match=r"^lengths must be a non-empty list of whole numbers >= 1; got \[2, 0\]$"):
        E.accessibility_curve(tiny, 1, lengths=[2, 0])
    with pytest.raises(ValueError, match=r"^search must be one of 'bisect', 'paper', 'grid'; got 'fancy'$"):
        E.accessibility_curve(tiny, 1, search="fancy")
    with pytest.raises(ValueError, match=r"^pilot must be a whole number >= 1; got 0$"):
        E.accessibility_curve(tiny, 1, pilot=0)
    with pytest.raises(ValueError, match=r"^precision must be a number > 0; got 0$"):
        E.accessibility_curve(tiny, 1, precision=0)
