"""Model identity checks and the readings of the support (accesslib.models.check, docs/gemma.md).

The core runs on tiny models built from configs; the test on Gemma-3-270M itself is marked
``slow`` and skipped (saying ``make real``) when its packages are not installed.
"""
from __future__ import annotations

import json
import math

import pytest
import torch

from accesslib.cli import main
from accesslib.engine import geometry
from accesslib.models import check
from accesslib.models.loading import tiny_model

LENGTHS, PER_LENGTH = [4, 8], 6


def _tiny(family="gemma3", seed=0, norm_value=None):
    lm = tiny_model(family, d=32, vocab_size=64, seed=seed)
    if norm_value is not None:   # a final norm whose gain is not 1 (nor 2 for Gemma)
        _, norm = check.final_norm(lm)
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            norm.weight.copy_(norm_value + torch.randn(norm.weight.shape, generator=g))
    return lm


# --------------------------------------------------------------------------- fingerprint and comparison

def test_fingerprint_is_deterministic_and_reads_the_logits():
    a = check.fingerprint(_tiny())
    b = check.fingerprint(_tiny())            # a second model built from the same config and seed
    assert a == b and len(a.top_ids) == 5 and a.shape == (16, 64)
    lm = _tiny()
    ids = check.probe_ids(lm)
    assert ids == a.ids and all(0 <= i < 64 for i in ids)
    with torch.no_grad():
        z = lm.model(torch.tensor([ids])).logits[0].float()
    assert a.top_ids[0] == int(z[-1].argmax()) and a.top_values[0] == pytest.approx(float(z[-1].max()))
    assert a.checksum == pytest.approx(float(z.double().sum()), rel=1e-12)
    assert a.last_norm == pytest.approx(float(z[-1].double().norm()), rel=1e-9)
    assert check.fingerprint(_tiny(seed=1)).sha256 != a.sha256


def test_compare_logits_by_hand():
    # p_a = (1/2, 1/2), p_b = (1/4, 3/4): KL = ln(4/3) / 2; argmax 0 against 1
    c = check.compare_logits(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, math.log(3.0)]]))
    assert not c.identical and c.positions == 1 and c.vocab == 2
    assert c.max_abs == pytest.approx(math.log(3.0)) and c.mean_abs == pytest.approx(math.log(3.0) / 2)
    assert c.kl_mean == pytest.approx(0.5 * math.log(4 / 3)) and c.top1_agreement == 0.0
    same = check.compare_logits(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]))
    assert same.identical and same.max_abs == 0 and same.kl_max == 0 and same.top1_agreement == 1
    assert "bit-identical" in same.summary()
    with pytest.raises(ValueError, match="one shape"):
        check.compare_logits(torch.zeros(2, 3), torch.zeros(2, 4))


def test_compare_models_same_and_perturbed():
    a, b = _tiny(), _tiny()
    same = check.compare_models(a, b)
    assert same.identical and same.max_abs == 0.0 and same.kl_mean == 0.0 and same.top1_agreement == 1.0
    with torch.no_grad():
        b.model.get_output_embeddings().weight.add_(
            1e-2 * torch.randn(b.model.get_output_embeddings().weight.shape, generator=torch.Generator().manual_seed(2)))
    diff = check.compare_models(a, b)
    za, zb = check.logits(a), check.logits(b)
    assert not diff.identical and diff.max_abs == pytest.approx(float((za - zb).abs().max()))
    assert diff.max_abs > 0 and diff.kl_mean > 0 and "different" in diff.summary()
    with pytest.raises(ValueError, match="different vocabularies"):
        check.compare_models(a, tiny_model("gemma3", d=32, vocab_size=65))


def test_continuations_are_greedy():
    lm = _tiny()
    out = check.continuations(lm, n_tokens=4)
    assert len(out) == 3 and all(len(c.new_ids) == 4 for c in out)
    c = out[0]
    seq = list(c.prompt_ids)
    for t in c.new_ids:   # each new id is the argmax after the ones before it
        with torch.no_grad():
            assert t == int(lm.model(torch.tensor([seq])).logits[0, -1].argmax())
        seq.append(t)
    assert c.text == " ".join(map(str, c.new_ids))
    with pytest.raises(ValueError, match="token ids for a model without a tokenizer"):
        check.continuations(lm, prompts=["hello"])


# --------------------------------------------------------------------------- support readings

def test_support_inputs_are_the_geometry_inputs():
    lm = _tiny()
    table = check.support_readings(lm, lengths=LENGTHS, per_length=PER_LENGTH, positions=("last",),
                                   min_cosine=geometry.min_pairwise_cosine)
    samples = geometry.sample_support(lm, LENGTHS, PER_LENGTH, seed=0, progress=False)
    st = geometry.support_stats(samples, principal=False)
    row = table.row("decoder input", "float32", "last")
    assert row.n == st.n == 12 and row.nonfinite == 0
    assert row.r_inf == st.r_inf and row.r_2 == pytest.approx(st.r_2, rel=1e-6)
    assert row.min_cos == st.min_cos
    assert sum(b.shape[0] for b in check.support_inputs(lm, LENGTHS, PER_LENGTH)) == 12


def test_support_table_rows_and_readings_gemma():
    lm = _tiny(norm_value=0.5)            # Gemma's gain is 1 + w, here about 1.5 with spread
    table = check.support_readings(lm, lengths=LENGTHS, per_length=PER_LENGTH, dtypes=("float32", "bfloat16"),
                                   min_cosine=geometry.min_pairwise_cosine)
    keys = {(r.reading, r.dtype, r.positions) for r in table.rows}
    assert keys == {(name, dt, p) for name in check.READINGS for dt in ("float32", "bfloat16")
                    for p in ("last", "all")}
    assert len(table.rows) == 20 and table.gain == "1 + w" and table.decoder_is_norm_output
    assert table.sequences == 12 and table.tokens == 6 * 4 + 6 * 8
    r = {(x.reading, x.positions): x for x in table.rows if x.dtype == "float32"}
    assert r["decoder input", "last"].n == 12 and r["decoder input", "all"].n == 72
    # the model computes normalised x (1 + w): "gain 1 + w" is the decoder input, "gain w" is not
    for pos in ("last", "all"):
        dec = r["decoder input", pos]
        assert r["gain 1 + w", pos].r_inf == pytest.approx(dec.r_inf, rel=1e-6)
        assert r["gain 1 + w", pos].top_coords == dec.top_coords
        assert r["gain w", pos].r_inf != pytest.approx(dec.r_inf, rel=1e-3)
        assert r["before final norm", pos].r_inf != pytest.approx(dec.r_inf, rel=1e-3)
        # RMS normalisation: every vector has L2 norm sqrt(d), and the same directions as before it
        assert r["normalised, gain 1", pos].r_2 == pytest.approx(math.sqrt(32), rel=1e-4)
        assert r["normalised, gain 1", pos].min_cos == pytest.approx(r["before final norm", pos].min_cos, abs=1e-5)
    bf = table.row("decoder input", "bfloat16", "last")
    assert bf.r_inf == pytest.approx(r["decoder input", "last"].r_inf, rel=0.05) and bf.nonfinite == 0
    assert table.weight_top[0][1] == pytest.approx(float((check.final_norm(lm)[1].weight + 1).abs().max()))
    gain = (check.final_norm(lm)[1].weight + 1).detach()
    assert table.weight_bottom[0][1] == pytest.approx(float(gain[gain.abs().argmin()]))
    assert table.gain_median == pytest.approx(float(gain.median()))
    named = {c for x in table.rows for c in x.top_coords}
    assert set(table.gains) == named and all(table.gains[c] == pytest.approx(float(gain[c])) for c in named)
    # the residual stream after the last block is what enters the final norm
    assert [len(table.residual_max[dt]) for dt in ("float32", "bfloat16")] == [2, 2]
    assert table.residual_max["float32"][-1] == pytest.approx(r["before final norm", "all"].r_inf)
    lines = table.lines()
    assert len(lines) == 8 + 20 and "gain 1 + w" in lines[1]


def test_float16_overflow_is_counted_and_shown():
    lm = _tiny()
    with torch.no_grad():   # one embedding coordinate of 2e4 x sqrt(32): beyond float16's 65,504
        lm.model.get_input_embeddings().weight[:, 0] = 2e4
    table = check.support_readings(lm, lengths=[4], per_length=3, dtypes=("float32", "float16"),
                                   positions=("last",))
    assert table.row("decoder input", "float32").nonfinite == 0
    assert table.row("decoder input", "float16").nonfinite == 3
    assert math.isnan(table.row("decoder input", "float16").r_inf)
    assert min(table.residual_max["float32"]) > 65504 and table.residual_max["float16"] == [math.inf] * 2
    assert table.decoder_is_norm_output    # NaN where NaN: still the norm's output


def test_gain_convention_llama_and_without_cosine():
    lm = _tiny("llama", norm_value=0.5)       # Llama's gain is w itself
    assert check.gain_offset(check.final_norm(lm)[1]) == 0.0
    table = check.support_readings(lm, lengths=[4], per_length=5, positions=("last",))
    assert table.gain == "w"
    dec = table.row("decoder input")
    assert table.row("gain w").r_inf == pytest.approx(dec.r_inf, rel=1e-6)
    assert table.row("gain 1 + w").r_inf != pytest.approx(dec.r_inf, rel=1e-3)
    assert dec.min_cos is None and -1 <= dec.mean_cos <= 1
    with pytest.raises(KeyError):
        table.row("decoder input", "float16")
    with pytest.raises(ValueError, match="positions must be one of"):
        check.support_readings(lm, lengths=[4], per_length=2, positions=("first",))


def test_mean_cosine_is_the_mean_over_pairs():
    h = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [float("nan"), 1.0]])
    row = check._stats("x", "float32", "last", h, geometry.min_pairwise_cosine)
    # finite pairs: (0,1) 0, (0,2) -1, (1,2) 0 -> mean -1/3, min -1
    assert row.n == 4 and row.nonfinite == 1
    assert row.mean_cos == pytest.approx(-1 / 3) and row.min_cos == pytest.approx(-1.0)
    assert row.r_inf == 3.0 and row.r_2 == 3.0 and row.r_1 == 3.0 and row.top_coords[0] == 0


def test_untrained_like_with_norm_weight_one_doubles_gemmas_gain():
    lm = _tiny()
    fresh = check.untrained_like(lm, norm_weight=1.0, seed=3)
    assert type(fresh) is type(lm.model)
    assert not torch.equal(fresh.get_input_embeddings().weight, lm.model.get_input_embeddings().weight)
    assert all(float(m.weight.min()) == 1.0 == float(m.weight.max())
               for m in fresh.modules() if "Norm" in type(m).__name__)
    table = check.support_readings(fresh, lengths=[4, 8], per_length=4, positions=("last",))
    # gain 1 + 1 = 2 on every coordinate: L2 norm exactly 2 sqrt(d)
    assert table.row("decoder input").r_2 == pytest.approx(2 * math.sqrt(32), rel=1e-4)
    again = check.untrained_like(lm, norm_weight=1.0, seed=3)
    assert check.compare_models(fresh, again).identical
    with pytest.raises(ValueError, match="norm_weight"):
        check.untrained_like(lm, norm_weight=float("nan"))


def test_with_norm_weight_is_a_copy_with_every_norm_set():
    lm = _tiny(norm_value=0.5)
    before = check.final_norm(lm)[1].weight.clone()
    two = check.with_norm_weight(lm, 1.0)
    assert torch.equal(check.final_norm(lm)[1].weight, before)     # the model itself is untouched
    assert torch.equal(two.get_input_embeddings().weight, lm.model.get_input_embeddings().weight)
    table = check.support_readings(two, lengths=[4], per_length=4, positions=("last",))
    assert table.row("decoder input").r_2 == pytest.approx(2 * math.sqrt(32), rel=1e-4)
    with pytest.raises(ValueError, match="norm_weight must be a finite number"):
        check.with_norm_weight(lm, float("inf"))


# --------------------------------------------------------------------------- command line

def test_check_model_command(tmp_path, capsys):
    out = tmp_path / "check.json"
    ref = tmp_path / "copy"
    _tiny().model.save_pretrained(ref)
    argv = ["check-model", "tiny:gemma3", "--tokens", "3", "--against", str(ref), "--support",
            "--lengths", "4", "8", "--per-length", "3", "--json", str(out), "--threads", "1", "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    rec = json.loads(out.read_text())
    fp = check.fingerprint(_tiny())
    assert rec["fingerprint"]["sha256"] == fp.sha256 and fp.sha256[:16] in text
    assert len(rec["continuations"]) == 3 and all(len(c["new_ids"]) == 3 for c in rec["continuations"])
    assert rec["against"]["comparison"]["identical"] and "bit-identical" in text
    assert rec["against"]["fingerprint"]["sha256"] == fp.sha256
    rows = rec["support"]["rows"]
    assert len(rows) == 10 and rec["support"]["sequences"] == 6 and not rec["support"]["untrained"]
    dec = next(r for r in rows if r["reading"] == "decoder input" and r["positions"] == "last")
    assert f"{dec['r_inf']:>10.4g}" in text


def test_check_model_untrained_and_norm_weight_support(capsys):
    tail = ["--lengths", "4", "--per-length", "3", "--no-progress"]
    assert main(["check-model", "tiny:gemma3", "--tokens", "1", "--support", "--untrained",
                 "--norm-weight", "1", *tail]) == 0
    text = capsys.readouterr().out
    assert "untrained copy (seed 0, norm weights 1.0)" in text
    assert f"{2 * math.sqrt(32):>10.4g}" in text     # r_2 of the decoder input: gain 2
    assert main(["check-model", "tiny:gemma3", "--tokens", "1", "--support", "--norm-weight", "1", *tail]) == 0
    text = capsys.readouterr().out
    assert "of a copy with every norm weight 1.0" in text and f"{2 * math.sqrt(32):>10.4g}" in text


def test_check_model_missing_against_is_one_line(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "no-such-model"
    assert main(["check-model", "tiny:gemma3", "--against", str(missing)]) == 2
    err = capsys.readouterr()
    assert err.out == ""   # refused before the model loads
    assert err.err == (f"accesslib check-model: error: --against must be an existing model directory "
                       f"(config.json and *.safetensors) or a hub name; got '{missing}', which does not exist\n")
    assert main(["check-model", "tiny:gemma3", "--norm-weight", "1"]) == 2
    assert capsys.readouterr().err == ("accesslib check-model: error: --support must be given with --untrained "
                                       "and --norm-weight; got False\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["check-model", "tiny:gemma3", "--tokens", "1", "--against", "nobody/no-such-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'nobody/no-such-model' is not on disk" in err[0]


# --------------------------------------------------------------------------- Gemma-3-270M itself

@pytest.mark.slow
def test_gemma_reloads_bit_identically_and_reads_one_plus_w():
    from accesslib.models import gguf
    from accesslib.models.loading import load_model

    if "gemma-3-270m" not in gguf.available():
        pytest.skip("offline real model 'gemma-3-270m' is not installed: run `make real`")
    a, b = load_model("gemma-3-270m"), load_model("gemma-3-270m")
    assert check.compare_models(a, b).identical
    assert check.fingerprint(a) == check.fingerprint(b)
    table = check.support_readings(a, lengths=[4], per_length=4, positions=("last",))
    assert table.gain == "1 + w" and table.decoder_is_norm_output
    assert table.row("gain 1 + w").r_inf == pytest.approx(table.row("decoder input").r_inf, rel=1e-6)
    assert table.row("normalised, gain 1").r_2 == pytest.approx(math.sqrt(640), rel=1e-4)
