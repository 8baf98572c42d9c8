"""Shipped tiny models, shipped corpus and the training script (scripts/train_tiny.py)."""
from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path

import pytest

from accesslib.models import embedded

ROOT = Path(__file__).resolve().parents[2]
REQUIRED_FIELDS = ("name", "architecture", "d", "vocab_size", "layers", "heads", "context", "n_params",
                   "train_loss", "heldout_loss", "ln_vocab", "train_bpb", "heldout_bpb", "steps",
                   "batch", "lr", "seed", "train_time_s", "wall_time_s", "hardware", "command",
                   "torch_version", "transformers_version", "corpus", "loss_curve")


@pytest.fixture(scope="module")
def train_tiny(load_script):
    return load_script("scripts/train_tiny.py")


# ----------------------------------------------------------------------------- corpus
def test_corpus_is_the_kjv_without_references():
    text = embedded.corpus_text()
    assert text.startswith("In the beginning God created the heaven and the earth.\n")
    assert text.rstrip().endswith("The grace of our Lord Jesus Christ be with you all. Amen.")
    chapters = embedded.corpus_chapters()
    assert len(chapters) == 1189
    assert sum(len(c.split("\n")) for c in chapters) == 31102          # verses, one per line
    assert not re.search(r"^\d+ ", text, flags=re.M)                    # verse numbers stripped
    assert "Genesis 1" not in text                                      # headings stripped
    assert 4_000_000 < len(text) < 4_300_000


def test_corpus_split_is_a_disjoint_partition():
    chapters = embedded.corpus_chapters()
    train = embedded.corpus_split("train").rstrip("\n").split("\n\n")
    held = embedded.corpus_split("heldout").rstrip("\n").split("\n\n")
    assert len(held) == 59 and len(train) == 1189 - 59
    assert held == [c for k, c in enumerate(chapters) if k % 20 == 19]
    assert train == [c for k, c in enumerate(chapters) if k % 20 != 19]
    assert not set(train) & set(held)
    assert held[0] == chapters[19] and held[0].startswith("And Abraham journeyed from thence toward the south country")
    with pytest.raises(ValueError, match="part"):
        embedded.corpus_split("test")


# ----------------------------------------------------------------------------- registry
def test_default_and_resolve():
    ns = embedded.names()
    assert embedded.DEFAULT in ns
    assert ns[0] == embedded.DEFAULT                       # the default is the smallest model
    p = embedded.resolve(embedded.DEFAULT)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "training.json"):
        assert (p / f).is_file(), f
    assert embedded.resolve("no-such-model") is None
    assert embedded.resolve("../corpus") is None
    with pytest.raises(ValueError, match="name must be one of"):
        embedded.info("no-such-model")


def test_import_does_not_pull_torch():
    import subprocess
    code = "import sys, accesslib.models.embedded as e; e.names(); e.info(e.DEFAULT); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", embedded.names())
def test_training_record(name):
    rec = embedded.info(name)
    for k in REQUIRED_FIELDS:
        assert k in rec, k
    cfg = json.loads((embedded.resolve(name) / "config.json").read_text())
    prefix = "tiny-mamba" if cfg["model_type"] == "mamba" else "tiny"   # the state-space twin (notebook 09)
    assert rec["name"] == name == f"{prefix}-d{cfg['hidden_size']}-v{cfg['vocab_size']}"
    assert (rec["d"], rec["vocab_size"], rec["layers"]) == (cfg["hidden_size"], cfg["vocab_size"],
                                                            cfg["num_hidden_layers"])
    assert rec["command"].startswith("python scripts/train_tiny.py ")
    assert f"--d {rec['d']}" in rec["command"] and f"--vocab {rec['vocab_size']}" in rec["command"]
    assert rec["corpus"]["sha256_text"] == hashlib.sha256(embedded.corpus_text().encode()).hexdigest()
    assert rec["corpus"]["corpus_chars"] is None                       # trained on the whole train split
    assert rec["heldout_loss"] < 0.8 * math.log(rec["vocab_size"])
    assert 0.5 < rec["heldout_bpb"] < 4.0


# ----------------------------------------------------------------------------- the models
def _heldout_windows(tok, n_windows, length):
    import torch
    ids = tok(embedded.corpus_split("heldout"))["input_ids"]
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(ids) - length, (n_windows,), generator=g).tolist()
    return torch.tensor([ids[s:s + length] for s in starts])


@pytest.mark.parametrize("name", embedded.names())
def test_shipped_model_is_a_language_model(name):
    """Held-out loss well below the uniform ln|V|, and lower late in a window than at its start
    (the model uses its context, which is what lets memory vectors steer it)."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    path = embedded.resolve(name)
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    V = model.config.vocab_size
    assert len(tok) == V and tok.eos_token_id == 0 and tok.bos_token_id == 0
    x = _heldout_windows(tok, 8, 65)
    with torch.no_grad():
        logits = model(input_ids=x[:, :-1]).logits
    ce = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")     # [8, 64]
    loss = ce.mean().item()
    assert loss < 0.8 * math.log(V), (loss, math.log(V))
    assert abs(loss - embedded.info(name)["heldout_loss"]) < 0.5
    assert ce[:, 32:].mean() < ce[:, :2].mean() - 0.3                  # context helps


@pytest.mark.parametrize("name", embedded.names())
def test_tokenizer_round_trips(name):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded.resolve(name))
    held = embedded.corpus_split("heldout")[:2000]
    for text in (held, "  naïve café — 日本語, tabs\tand\nnewlines!  "):
        ids = tok(text)["input_ids"]
        assert max(ids) < len(tok)
        assert tok.decode(ids) == text
    n_tokens = len(tok(held)["input_ids"])
    if len(tok) <= 257:   # bytes + end-of-text: no merges, one token per byte
        assert n_tokens == len(held.encode())
    else:                 # BPE compresses the corpus: fewer tokens than bytes
        assert n_tokens < 0.8 * len(held.encode())


# ----------------------------------------------------------------------------- the script
def test_lr_schedule(train_tiny):
    lr = train_tiny.lr_at
    assert lr(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr(9, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr(10, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr(55, 100, 1.0, 10) == pytest.approx(0.55)                 # cosine midpoint: (1 + 0.1) / 2
    assert lr(100, 100, 1.0, 10) == pytest.approx(0.1)


def test_tokenizer_training(train_tiny):
    texts = embedded.corpus_split("train")[:50_000].split("\n\n")
    tok = train_tiny.train_tokenizer(texts, 300)
    assert tok.get_vocab_size() == 300 and tok.token_to_id("<|endoftext|>") == 0
    assert tok.decode(tok.encode("And God said, Let there be light").ids) == "And God said, Let there be light"
    with pytest.raises(ValueError, match="vocab"):
        train_tiny.train_tokenizer(texts, 256)


def test_train_tiny_smoke(train_tiny, tmp_path):
    """A few steps of the real script: a loadable model whose loss fell, reproducible by seed."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, GPTNeoXForCausalLM

    argv = ["--d", "16", "--vocab", "300", "--layers", "1", "--heads", "2", "--context", "32",
            "--batch", "8", "--steps", "40", "--warmup", "5", "--lr", "1e-2", "--eval-windows", "8",
            "--corpus-chars", "100000", "--seed", "3"]
    rec = train_tiny.main(argv + ["--out", str(tmp_path / "a")])
    for k in REQUIRED_FIELDS:
        assert k in rec, k
    assert rec["steps"] == 40 and rec["vocab_size"] == 300 and rec["corpus"]["corpus_chars"] == 100000
    assert rec["command"] == "python scripts/train_tiny.py " + " ".join(argv + ["--out", str(tmp_path / "a")])
    assert rec["loss_curve"][-1][1] < rec["loss_curve"][0][1] - 0.5      # it learnt something
    assert rec["train_loss"] < 0.9 * math.log(300)
    assert json.loads((tmp_path / "a" / "training.json").read_text())["heldout_loss"] == rec["heldout_loss"]
    m = GPTNeoXForCausalLM.from_pretrained(tmp_path / "a", torch_dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert m.config.hidden_size == 16 and len(tok) == 300
    out = m.generate(torch.tensor([tok("And")["input_ids"]]), max_new_tokens=5, do_sample=False)
    assert out.shape == (1, len(tok("And")["input_ids"]) + 5)
    # same seed -> same weights
    train_tiny.main(argv + ["--out", str(tmp_path / "b")])
    wa, wb = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_train_tiny_rejects_bad_args(train_tiny, tmp_path):
    with pytest.raises(SystemExit):
        train_tiny.parse_args(["--d", "32", "--vocab", "100", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        train_tiny.parse_args(["--d", "30", "--heads", "4", "--out", str(tmp_path)])
