"""The paper's model families load through ``accesslib.models.loading.load_model``.

No download: for each family (GPT-NeoX/Pythia, Qwen2, Llama, Gemma-3) a config shaped like the
real checkpoint's (same model_type, architecture class, tying, GQA, rotary settings, embedding
scale) but tiny is saved with a tiny tokenizer, then loaded
  - from a local directory (in this process), and
  - by its hub name (e.g. "EleutherAI/pythia-160m") from a fake hub cache in a subprocess with
    HF_HUB_OFFLINE=1: the very code path a machine with network takes after its download.
A hub name that is neither cached nor reachable must fail with a one-line ValueError.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
models = pytest.importorskip("accesslib.models.loading")

D, V = 64, 320     # |V| above the tokenizer's 300 entries, as for Pythia (50304 > 50277)

# hub name -> (model_type after loading, expected embed_scale, config builder)
# Field values follow the public config.json of each checkpoint, scaled down (d, layers, |V|).


def _pythia():
    return transformers.GPTNeoXConfig(   # EleutherAI/pythia-160m
        hidden_size=D, num_hidden_layers=2, num_attention_heads=4, intermediate_size=4 * D,
        rotary_pct=0.25, rotary_emb_base=10000, use_parallel_residual=True, hidden_act="gelu",
        layer_norm_eps=1e-5, max_position_embeddings=2048, vocab_size=V,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
        architectures=["GPTNeoXForCausalLM"])


def _qwen2():
    return transformers.Qwen2Config(     # Qwen/Qwen2.5-0.5B
        hidden_size=D, intermediate_size=5 * D, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
        use_sliding_window=False, vocab_size=V, tie_word_embeddings=True,
        bos_token_id=V - 1, eos_token_id=V - 1, architectures=["Qwen2ForCausalLM"])


def _llama():
    return transformers.LlamaConfig(     # meta-llama/Llama-3.2-1B
        hidden_size=D, intermediate_size=4 * D, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=D // 4, max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "high_freq_factor": 4.0,
                      "low_freq_factor": 1.0, "original_max_position_embeddings": 8192},
        rms_norm_eps=1e-5, vocab_size=V, tie_word_embeddings=True,
        bos_token_id=V - 2, eos_token_id=V - 1, architectures=["LlamaForCausalLM"])


def _gemma3():
    return transformers.Gemma3TextConfig(  # google/gemma-3-270m
        hidden_size=D, intermediate_size=3 * D, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32, sliding_window=16,
        max_position_embeddings=32768, rope_theta=1e6, rope_local_base_freq=10000.0,
        rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", vocab_size=V,
        tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        architectures=["Gemma3ForCausalLM"])


FAMILIES = {
    "EleutherAI/pythia-160m": ("gpt_neox", 1.0, _pythia),
    "Qwen/Qwen2.5-0.5B": ("qwen2", 1.0, _qwen2),
    "meta-llama/Llama-3.2-1B": ("llama", 1.0, _llama),
    "google/gemma-3-270m": ("gemma3_text", math.sqrt(D), _gemma3),
}

PROMPT = "the cat sat on the mat"
IDS = torch.tensor([[3, 17, 250, 301, 3, 42, 319]])   # fixed ids, some beyond the tokenizer


def _tokenizer():
    """A byte-level BPE tokenizer (the kind Pythia, Qwen2.5 and Llama-3 use) with 300 entries,
    trained on three sentences. transformers rebuilds some families' tokenizer classes (e.g.
    Qwen2Tokenizer) from vocab + merges, so it has to be a real byte-level BPE."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tk_models
    from transformers import PreTrainedTokenizerFast
    text = ["the cat sat on the mat", "a dog ran after the cat",
            "the quick brown fox jumps over the lazy dog"] * 20
    tk = Tokenizer(tk_models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>")


def _save(hub_name, target_dir):
    """Build the tiny model of `hub_name` (seeded), save model + tokenizer; return its logits
    on IDS, as the ground truth the loaded model must reproduce."""
    family, _, make = FAMILIES[hub_name]
    cfg = make()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    tok = _tokenizer()
    model.save_pretrained(target_dir, safe_serialization=True)
    tok.save_pretrained(target_dir)
    with torch.no_grad():
        return model(IDS).logits


@pytest.mark.parametrize("hub_name", list(FAMILIES))
def test_family_loads_from_local_directory(hub_name, tmp_path):
    family, scale, _ = FAMILIES[hub_name]
    want = _save(hub_name, tmp_path)
    lm = models.load_model(str(tmp_path))
    f = lm.facts
    assert (f.family, f.d, f.vocab_size, f.source, f.dtype) == (family, D, V, "local", "float32")
    assert f.embed_scale == pytest.approx(scale, rel=1e-5)
    assert not lm.model.training and not any(p.requires_grad for p in lm.model.parameters())
    assert lm.tokenizer is not None
    ids = lm.tokenizer(PROMPT)["input_ids"]
    assert 0 < len(ids) < len(PROMPT) and max(ids) < 300   # merges used, ids in the vocabulary
    assert lm.tokenizer.decode(ids) == PROMPT
    with torch.no_grad():
        got = lm.model(IDS).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_gemma_embedding_scales_by_sqrt_d(tmp_path):
    """Gemma-3 multiplies token embeddings by sqrt(d) (about 25 for the real d = 640): the
    input a soft prompt competes with is that much larger than the raw embedding rows."""
    _save("google/gemma-3-270m", tmp_path)
    lm = models.load_model(str(tmp_path))
    emb = lm.model.get_input_embeddings()
    assert type(emb).__name__ == "Gemma3TextScaledWordEmbedding"
    ids = torch.tensor([[3, 4, 5]])
    with torch.no_grad():
        torch.testing.assert_close(emb(ids), emb.weight[ids] * math.sqrt(D), rtol=1e-6, atol=0)


_HUB_SCRIPT = textwrap.dedent("""
    import json, sys
    from accesslib.models import loading as models
    out = {}
    for name in json.loads(sys.argv[1]):
        try:
            lm = models.load_model(name)
            out[name] = dict(ok=True, facts=vars(lm.facts), tok=lm.tokenizer is not None)
        except ValueError as err:
            out[name] = dict(ok=False, error=str(err))
    print("RESULT " + json.dumps(out))
""")


def _fake_hub(cache, hub_name, make_files):
    """Lay out a model the way huggingface_hub caches a download (refs/main -> snapshot)."""
    repo = cache / ("models--" + hub_name.replace("/", "--"))
    rev = "0" * 40
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    return make_files(snap)


@pytest.fixture(scope="module")
def hub_run(tmp_path_factory):
    """One subprocess (the hub cache location is read at import) that loads every family by
    hub name from a fake offline cache, plus one name that is not cached."""
    cache = tmp_path_factory.mktemp("hub")
    for hub_name in FAMILIES:
        _fake_hub(cache, hub_name, lambda snap, h=hub_name: _save(h, snap))
    names = list(FAMILIES) + ["EleutherAI/pythia-410m"]
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "hf_home"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ACCESSLIB_HOME=str(cache.parent / "al"))
    proc = subprocess.run([sys.executable, "-c", _HUB_SCRIPT, json.dumps(names)], env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("hub_name", list(FAMILIES))
def test_family_loads_by_hub_name_offline(hub_run, hub_name):
    family, scale, _ = FAMILIES[hub_name]
    r = hub_run[hub_name]
    assert r["ok"], r.get("error")
    f = r["facts"]
    assert (f["family"], f["d"], f["vocab_size"], f["source"]) == (family, D, V, "hub")
    assert f["name"] == hub_name
    assert f["embed_scale"] == pytest.approx(scale, rel=1e-5)
    assert r["tok"]


def test_uncached_hub_name_offline_is_one_line_error(hub_run):
    r = hub_run["EleutherAI/pythia-410m"]
    assert not r["ok"]
    msg = r["error"]
    assert "\n" not in msg and "EleutherAI/pythia-410m" in msg
    assert len(msg) < 400
