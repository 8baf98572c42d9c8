"""Notebook 09's measurements: the radius against context length (accesslib.engine.radius),
cramming, decoding and geometry on a Mamba, and accesslib.experiments.beyond."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from accesslib.engine import radius  # noqa: E402
from accesslib.experiments import beyond  # noqa: E402
from accesslib.models.loading import tiny_model  # noqa: E402
from accesslib.results import bundles  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def mamba():
    return tiny_model("mamba", d=16, vocab_size=40, layers=2, seed=0)


@pytest.fixture(scope="module")
def neox():
    return tiny_model("gpt_neox", d=16, vocab_size=40, layers=2, seed=0, max_context=32)


# ----------------------------------------------------------------------------- radius
def test_final_norm_and_cap(mamba, neox):
    assert type(radius.final_norm(mamba)).__name__ == "MambaRMSNorm"
    assert type(radius.final_norm(neox)).__name__ == "LayerNorm"
    norm = radius.final_norm(neox)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(-2.0, 1.5, 16))
        norm.bias.fill_(0.25)
    try:
        cap = radius.norm_cap(neox)
        assert cap["r_inf"] == pytest.approx(4 * 2.0 + 0.25)
        assert cap["r_2"] == pytest.approx(4 * 2.0 + 0.25 * 4)
        # the cap holds for any input, however large: LayerNorm of huge vectors
        x = torch.randn(200, 16) * 1e6
        y = norm(x)
        assert y.abs().max() <= cap["r_inf"] and y.norm(dim=1).max() <= cap["r_2"]
    finally:
        with torch.no_grad():
            norm.weight.fill_(1.0)
            norm.bias.zero_()
    assert radius.norm_cap(mamba)["r_2"] == pytest.approx(4.0)              # RMSNorm gain 1, d = 16


def test_hidden_radii_read_what_geometry_reads(mamba, neox):
    from accesslib.engine.geometry import final_hidden

    ids = torch.randint(0, 40, (3, 9), generator=torch.Generator().manual_seed(0))
    for lm in (mamba, neox):
        r = radius.hidden_radii(lm, ids)
        h = final_hidden(lm, input_ids=ids)
        assert torch.allclose(r["final_2"], h.norm(dim=1)) and torch.allclose(r["final_inf"], h.abs().amax(1))
        # the final norm maps the residual to the final state: RMSNorm/LayerNorm with unit gain
        assert torch.all(r["final_2"] <= math.sqrt(16) + 1e-4)
    assert radius.hidden_radii(neox, ids)["ssm_inf"] is None
    ssm = radius.hidden_radii(mamba, ids)["ssm_inf"]
    assert ssm.shape == (3,) and torch.all(ssm > 0)


def test_ssm_state_is_the_recurrence(mamba):
    """The recurrent state read from the cache is the scan's last state: feeding the sequence in
    two parts with the cache gives the same state as one pass."""
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    hf = mamba.model
    with torch.no_grad():
        full = hf(input_ids=ids, use_cache=True)
    s_full = radius._ssm_inf(full)
    assert s_full.shape == (2,)
    states = [full["cache"].get_recurrent_state(i) for i in range(2)]
    assert states[0].shape == (2, 32, 8)
    assert torch.allclose(s_full, torch.stack([s.abs().flatten(1).amax(1) for s in states]).amax(0))


def test_radius_curve_on_both_families(mamba, neox):
    c = radius.radius_curve(mamba, [4, 16, 64], 3, seed=1)
    assert c.family == "mamba" and c.trained_context is None and c.lengths == [4, 16, 64]
    assert set(c.max) == {"final_inf", "final_2", "residual_inf", "residual_2", "ssm_inf"}
    for k, v in c.max.items():
        assert len(v) == 3 and all(m >= a - 1e-6 for m, a in zip(v, c.mean[k]))
    assert max(c.max["final_2"]) <= c.cap["r_2"] + 1e-4
    assert c.growth["final_2"] == pytest.approx(radius.growth_exponent(c.lengths, c.max["final_2"]))
    again = radius.radius_curve(mamba, [4, 16, 64], 3, seed=1)
    assert again.max == c.max                                            # seeded
    # a transformer refuses lengths beyond its positions unless asked to extrapolate
    with pytest.raises(ValueError, match="lengths must be <= the model's context 32"):
        radius.radius_curve(neox, [4, 64], 2)
    t = radius.radius_curve(neox, [4, 64], 2, allow_beyond_context=True)
    assert t.trained_context == 32 and "ssm_inf" not in t.max and t.family == "gpt_neox"
    with pytest.raises(ValueError, match="source must be one of"):
        radius.radius_curve(neox, [4], 2, source="words")


def test_radius_curve_natural_text(mamba):
    class Tok:   # a character tokenizer over the tiny vocabulary
        def __call__(self, text, verbose=True):
            return {"input_ids": [ord(ch) % 40 for ch in text]}

    c = radius.radius_curve(mamba, [4, 8], 2, source="natural", tokenizer=Tok(), text="abcdefghij" * 10)
    assert c.source == "natural" and len(c.max["final_2"]) == 2
    with pytest.raises(ValueError, match="lengths must be shorter than the text"):
        radius.radius_curve(mamba, [200], 1, source="natural", tokenizer=Tok(), text="abc" * 10)


def test_growth_exponent():
    L = [4, 16, 64, 256]
    assert radius.growth_exponent(L, [3.0] * 4) == pytest.approx(0.0, abs=1e-12)
    assert radius.growth_exponent(L, [2 * x for x in L]) == pytest.approx(1.0)
    assert radius.growth_exponent(L, [x ** 0.5 for x in L]) == pytest.approx(0.5)
    assert radius.growth_exponent([4], [1.0]) is None
    assert radius.growth_exponent(L, [0, 0, 0, 1.0]) is None


# ----------------------------------------------------------------------------- engine on a Mamba
def test_cram_and_greedy_on_a_mamba(mamba):
    """cram() runs on a Mamba (inputs_embeds, logits_to_keep) and its successes are
    greedy-confirmed; the cached greedy decoder agrees with the uncached one."""
    from accesslib.engine import cramming
    from accesslib.engine.decoding import greedy

    tg = torch.tensor([[5], [17], [33]])
    res = cramming.cram(mamba, tg, 1, lr=0.1, max_steps=150, patience=150, schedule="constant")
    assert [r.success for r in res.strings] == [True, True, True]           # one token: always reachable
    for r, t in zip(res.strings, tg):
        mem = r.memory.reshape(1, 1, -1)
        assert greedy(mamba, mem, 1).tolist() == [t.tolist()]
        assert torch.equal(greedy(mamba, mem, 5), greedy(mamba, mem, 5, cache=False))


def test_geometry_report_on_a_mamba(mamba):
    from accesslib.engine.geometry import geometry_report

    rep = geometry_report(mamba, lengths=[4, 8], per_length=40, n_cells=2000, progress=False)
    assert rep.stats.n == 80 and rep.stats.d == 16
    assert rep.stats.r_2 <= radius.norm_cap(mamba)["r_2"] + 1e-4
    for k in ("ball", "box", "cone", "ellipsoid", "cells"):
        assert k in rep.slopes and rep.slopes[k].C > 0
    assert rep.slopes["box"].C <= rep.slopes["ball"].C * 1.0001


# ----------------------------------------------------------------------------- bundles and verdicts
def _radius_bundle(name, family, final, residual, ssm=None, cap=10.0, trained=None):
    L = [4, 16, 64, 256]
    mx = dict(final_inf=[v / 2 for v in final], final_2=final, residual_inf=[v / 2 for v in residual],
              residual_2=residual)
    if ssm:
        mx["ssm_inf"] = ssm
    curve = dict(model=name, family=family, source="tokens", lengths=L, per_length=4, max=mx, mean=mx,
                 cap=dict(r_inf=cap, r_2=cap), trained_context=trained, seed=0,
                 growth={k: radius.growth_exponent(L, v) for k, v in mx.items()})
    return dict(kind="radius", version=1, model=name, facts=dict(d=16, vocab_size=40, family=family),
                trained_context=trained, curves=[curve], created="x", hardware={}, wall_time=0.0, command="")


def test_divergence_verdict():
    grow = [1.0, 4.0, 16.0, 64.0]
    b = _radius_bundle("m", "mamba", [3.9, 3.95, 3.99, 4.0], grow, ssm=[0.1, 0.1, 0.1, 0.1], cap=4.0)
    v = beyond.divergence_verdict(b)
    assert v["final_2"]["bounded"] and v["final_under_cap"]
    assert v["residual_2"]["exponent"] == pytest.approx(1.0) and not v["residual_2"]["bounded"]
    assert v["residual_2"]["spread"] == pytest.approx(64.0)
    assert v["ssm_inf"]["bounded"] and v["ssm_inf"]["exponent"] == pytest.approx(0.0, abs=1e-12)
    over = beyond.divergence_verdict(_radius_bundle("t", "gpt_neox", [3, 3, 3, 12.0], grow, cap=4.0))
    assert not over["final_under_cap"] and "ssm_inf" not in over
    with pytest.raises(ValueError, match="source must be one of"):
        beyond.divergence_verdict(b, "natural")


def test_twin_rows_from_bundles(tmp_path, monkeypatch):
    base = dict(kind="cram", version=1, source="natural", samples=1, search="grid", seed=0, protocol="fast",
                settings={}, examples=[], created="x", hardware={}, wall_time=1.0, command="")
    for name, fam, a in [("tw-t", "gpt_neox", 4.0), ("tw-m", "mamba", 2.0)]:
        curves = [dict(m=m, lengths=[1], successes=[1], totals=[1], n50=a * m + 1, n50_stderr=0.2, k=-1.0)
                  for m in (1, 2, 3, 4)]
        bundles.save(dict(base, model=name, facts=dict(d=64, vocab_size=257, dtype="float32", family=fam,
                                                       max_context=None),
                          curves=curves, slope=bundles.slope_record(curves), geometry=dict(r_inf=3.0)), tmp_path)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: tmp_path)
    rows = beyond.twin_rows(["tw-t", "tw-m", "absent"])
    assert [r["model"] for r in rows] == ["tw-t", "tw-m"]
    C = 64 * math.log1p(2 * 2.0 ** 11) / math.log(257)
    assert rows[0]["slope"] == pytest.approx(4.0) and rows[0]["r2"] == pytest.approx(1.0)
    assert rows[1]["ratio"] == pytest.approx(C / 2.0) and rows[1]["family"] == "mamba"
    assert rows[1]["n50"] == {1: 3.0, 2: 5.0, 3: 7.0, 4: 9.0}


def test_twins_are_named():
    assert beyond.TWINS == {"transformer": "tiny-d64-v257", "mamba": "tiny-mamba-d64-v257"}
    assert beyond.RADIUS_LENGTHS[0] == 4 and beyond.RADIUS_LENGTHS[-1] == 4096
    assert np.all(np.diff(beyond.RADIUS_LENGTHS) > 0)


def test_conclusion_states_what_was_measured():
    rows = [dict(model="t", family="gpt_neox", slope=4.0, r2=0.99, ratio=24.0),
            dict(model="m", family="mamba", slope=2.0, r2=0.95, ratio=48.0)]
    flat = [3.9, 3.95, 3.99, 4.0]
    v = {"t": beyond.divergence_verdict(_radius_bundle("t", "gpt_neox", flat, flat, cap=4.0)),
         "m": beyond.divergence_verdict(_radius_bundle("m", "mamba", flat, [1.0, 4.0, 16.0, 64.0],
                                                       ssm=[0.1] * 4, cap=4.0))}
    s = beyond.conclusion(rows, v)
    assert s.startswith("At the same width") and "fewer tokens per vector" in s
    assert "a = 2.00 against 4.00" in s and "48.0 against 24.0" in s
    assert "stays bounded up to L = 256 for both twins" in s
    assert "states before the norm grow (residual_2: k = +1.00)" in s
    v["m"] = beyond.divergence_verdict(_radius_bundle("m", "mamba", flat, flat, ssm=[0.1] * 4, cap=4.0))
    assert "do not diverge either" in beyond.conclusion(rows, v)
    v["t"] = beyond.divergence_verdict(_radius_bundle("t", "gpt_neox", [1.0, 4.0, 16.0, 64.0], flat, cap=99.0))
    assert "is not bounded over L <= 256" in beyond.conclusion([], v)
    assert beyond.conclusion([], {}) == ""


def test_make_bundles_beyond_table(tmp_path, monkeypatch, load_script):
    """scripts/make_bundles.py writes the twins' section of docs/cramming-results.md from the bundles."""
    mb = load_script("scripts/make_bundles.py")
    b = _radius_bundle("tiny-mamba-d64-v257", "mamba", [3.9, 3.95, 3.99, 4.0], [1.0, 4.0, 16.0, 64.0],
                       ssm=[0.1] * 4, cap=4.0)
    bundles.save(b, tmp_path)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: tmp_path)
    lines = mb.beyond_table()
    text = "\n".join(lines)
    assert "## Beyond transformers" in text and "inputs: uniform random tokens" in text
    assert "| residual_2 | 1 | 4 | 16 | 64 | +1.00 |" in text
    assert "| ssm_inf | 0.1 | 0.1 | 0.1 | 0.1 | " in text
    assert "the Mamba's states before the norm grow" in text
