"""The training script's Mamba path (scripts/train_tiny.py --arch mamba) and the shipped Mamba twin."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from accesslib.models import embedded

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TWIN = "tiny-mamba-d64-v257"


@pytest.fixture(scope="module")
def train_tiny(load_script):
    return load_script("scripts/train_tiny.py")


pytestmark = pytest.mark.usefixtures("one_thread")


ARGV = ["--arch", "mamba", "--d", "16", "--vocab", "260", "--layers", "1", "--state", "4", "--context", "16",
        "--batch", "4", "--steps", "12", "--warmup", "2", "--lr", "2e-2", "--eval-windows", "4",
        "--corpus-chars", "40000", "--seed", "5"]


def test_mamba_smoke_and_bit_identical_rebuild(train_tiny, tmp_path):
    """A few steps: a loadable MambaForCausalLM with its record, whose loss fell; the same
    command twice gives the same weights, byte for byte."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rec = train_tiny.main(ARGV + ["--out", str(tmp_path / "a")])
    assert rec["architecture"] == "MambaForCausalLM" and rec["name"] == "tiny-mamba-d16-v260"
    assert (rec["state_size"], rec["expand"], rec["conv_kernel"]) == (4, 2, 4)
    assert rec["heads"] is None and rec["rotary_pct"] is None and rec["steps"] == 12
    assert rec["loss_curve"][-1][1] < rec["loss_curve"][0][1] - 0.3          # it learnt something
    assert rec["command"].startswith("python scripts/train_tiny.py --arch mamba ")
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["model_type"] == "mamba" and cfg["tie_word_embeddings"] is False and cfg["dtype"] == "float16"
    m = AutoModelForCausalLM.from_pretrained(tmp_path / "a", dtype=torch.float32)
    assert type(m).__name__ == "MambaForCausalLM"
    # parameters: embeddings + head (untied) + one mixer block of inner width 2d = 32, state 4
    d, V, e, N, r, k = 16, 260, 32, 4, 1, 4
    block = d * 2 * e + e * k + e + e * (r + 2 * N) + r * e + e + e * N + e + e * d + d
    assert rec["n_params"] == 2 * V * d + block + d == sum(p.numel() for p in m.parameters())
    tok = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert len(tok) == 260
    train_tiny.main(ARGV + ["--out", str(tmp_path / "b")])
    wa, wb = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_fast_scan_is_the_reference_arithmetic(train_tiny):
    """The training script's scan (unbind instead of select) gives the very same outputs and
    gradients as transformers' own pure-torch scan."""
    import transformers
    from transformers.models.mamba import modeling_mamba as mm

    cfg = train_tiny.make_mamba_config(16, 40, 2, 4, 2, 4)
    torch.manual_seed(0)
    model = transformers.MambaForCausalLM(cfg).train()
    x = torch.randint(0, 40, (3, 11), generator=torch.Generator().manual_seed(1))

    def run():
        model.zero_grad(set_to_none=True)
        out = model(input_ids=x).logits
        out.square().mean().backward()
        return out.detach().clone(), {n: p.grad.clone() for n, p in model.named_parameters()}

    current = mm.mamba_selective_scan
    reference = getattr(current, "reference", current)   # transformers' own, even if replaced before
    try:
        mm.mamba_selective_scan = reference
        o0, g0 = run()
        train_tiny.fast_mamba_scan()
        assert mm.mamba_selective_scan is not reference and mm.mamba_selective_scan.accesslib_unbind
        o1, g1 = run()
    finally:
        mm.mamba_selective_scan = current
    assert torch.equal(o0, o1)
    assert g0.keys() == g1.keys() and all(torch.equal(g0[k], g1[k]) for k in g0)


def test_mamba_args_are_checked(train_tiny, tmp_path):
    with pytest.raises(SystemExit):
        train_tiny.parse_args(["--arch", "rnn", "--d", "16", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        train_tiny.parse_args(["--arch", "mamba", "--d", "16", "--state", "0", "--out", str(tmp_path)])
    a = train_tiny.parse_args(["--arch", "mamba", "--d", "64", "--vocab", "257", "--out", str(tmp_path)])
    assert a.name == "tiny-mamba-d64-v257"


# ----------------------------------------------------------------------------- the shipped twin
shipped = pytest.mark.skipif(embedded.resolve(TWIN) is None, reason=f"{TWIN} not trained yet")


@shipped
def test_shipped_twin_record_matches_the_transformer_recipe():
    """Same corpus, tokenizer, context, batch, steps, schedule and seed as tiny-d64-v257, and a
    parameter count within 2% of it."""
    rec, tw = embedded.info(TWIN), embedded.info("tiny-d64-v257")
    assert embedded.family(TWIN) == "mamba" and embedded.family("tiny-d64-v257") == "gpt_neox"
    assert TWIN in embedded.names() and embedded.names("mamba") == [TWIN]
    assert TWIN not in embedded.names("gpt_neox")
    for k in ("vocab_size", "context", "batch", "steps", "lr", "warmup", "weight_decay", "seed", "d"):
        assert rec[k] == tw[k], k
    assert rec["corpus"] == tw["corpus"]
    assert abs(rec["n_params"] - tw["n_params"]) < 0.02 * tw["n_params"]
    assert rec["heldout_loss"] < 0.5 * math.log(rec["vocab_size"])
    assert "--arch mamba" in rec["command"] and f"--out accesslib/data/models/{TWIN}" in rec["command"]
    from transformers import AutoTokenizer
    a = AutoTokenizer.from_pretrained(embedded.resolve(TWIN))
    b = AutoTokenizer.from_pretrained(embedded.resolve("tiny-d64-v257"))
    text = embedded.corpus_split("heldout")[:500]
    assert a(text)["input_ids"] == b(text)["input_ids"]                    # the same (byte) tokenizer


@shipped
def test_shipped_twin_is_a_language_model():
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = embedded.resolve(TWIN)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    ids = tok(embedded.corpus_split("heldout")[:4000])["input_ids"]
    x = torch.tensor([ids[i:i + 65] for i in range(0, 8 * 400, 400)])
    with torch.no_grad():
        logits = model(input_ids=x[:, :-1]).logits
    ce = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
    assert ce.mean().item() < 0.5 * math.log(257)
    assert abs(ce.mean().item() - embedded.info(TWIN)["heldout_loss"]) < 0.5
    assert ce[:, 32:].mean() < ce[:, :2].mean() - 0.3                       # context helps
