"""models.py: tiny models of every family from a config, and load_model's resolution and errors."""
import math

import pytest
import torch

from accesslib.models.loading import FAMILIES, ModelFacts, load_model, tiny_model, torch_dtype


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_model_forward_and_facts(family):
    lm = tiny_model(family, d=32, vocab_size=48, layers=2, seed=3)
    assert lm.tokenizer is None
    f = lm.facts
    assert isinstance(f, ModelFacts)
    assert (f.d, f.vocab_size, f.dtype, f.device, f.source) == (32, 48, "float32", "cpu", "config")
    assert f.max_context == (None if family == "mamba" else 512)
    # Gemma scales its embedding output by sqrt(d) inside the embedding module
    assert f.embed_scale == pytest.approx(math.sqrt(32) if family == "gemma3" else 1.0, rel=1e-4)
    assert not lm.model.training
    assert not any(p.requires_grad for p in lm.model.parameters())
    ids = torch.randint(0, 48, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = lm.model(input_ids=ids).logits
    assert logits.shape == (2, 5, 48)
    assert torch.isfinite(logits).all()


def test_tiny_model_is_seeded_and_leaves_global_rng():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = tiny_model("llama", seed=1).model.lm_head.weight
    after = torch.rand(1)
    assert torch.equal(before, after)            # global RNG untouched by the init
    b = tiny_model("llama", seed=1).model.lm_head.weight
    c = tiny_model("llama", seed=2).model.lm_head.weight
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_tiny_model_config_overrides_and_errors():
    lm = tiny_model("gpt_neox", initializer_range=0.3, seed=0)
    assert lm.model.config.initializer_range == 0.3
    assert lm.model.lm_head.weight.std().item() == pytest.approx(0.3, rel=0.1)
    with pytest.raises(ValueError, match="family"):
        tiny_model("bert")
    with pytest.raises(ValueError, match="d must be"):
        tiny_model("gpt2", d=2)
    with pytest.raises(ValueError, match="dtype"):
        torch_dtype("float8")


def test_load_model_local_dir_roundtrip(tmp_path):
    lm = tiny_model("qwen2", d=32, vocab_size=40, seed=5)
    lm.model.save_pretrained(tmp_path, safe_serialization=True)
    assert (tmp_path / "model.safetensors").exists()
    got = load_model(str(tmp_path))
    assert got.facts.source == "local"
    assert (got.facts.d, got.facts.vocab_size, got.facts.family) == (32, 40, "qwen2")
    assert not got.model.training and not any(p.requires_grad for p in got.model.parameters())
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(got.model(input_ids=ids).logits, lm.model(input_ids=ids).logits, atol=1e-6)
    # bf16 on request
    assert load_model(tmp_path, dtype="bfloat16").facts.dtype == "bfloat16"


def test_load_model_gemma_embed_scale_survives_roundtrip(tmp_path):
    lm = tiny_model("gemma3", d=16, vocab_size=32)
    lm.model.save_pretrained(tmp_path, safe_serialization=True)
    assert load_model(tmp_path).facts.embed_scale == pytest.approx(4.0, rel=1e-4)


def test_load_model_pickle_only_dir_is_refused(tmp_path):
    lm = tiny_model("gpt2", d=16, vocab_size=32)
    lm.model.save_pretrained(tmp_path, safe_serialization=False)
    for f in tmp_path.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(ValueError) as e:
        load_model(tmp_path)
    assert "\n" not in str(e.value)


def test_load_model_unknown_hub_name_offline_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError) as e:
        load_model("nobody-here/no-such-model-xyz")
    msg = str(e.value)
    assert "\n" not in msg
    assert "not on disk" in msg and "huggingface-cli download nobody-here/no-such-model-xyz" in msg
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_load_model_bad_arguments(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(ValueError, match="is a file"):
        load_model(str(f))
    with pytest.raises(ValueError, match="name_or_path"):
        load_model("")
    with pytest.raises(ValueError, match="dtype"):
        load_model("whatever", dtype="int3")
