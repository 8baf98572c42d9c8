"""The one greedy decoder (accesslib.engine.decoding.greedy), docs/paper.md section 5.

- With and without the cache it gives the same tokens, on every family (transformers with a KV
  cache, Mamba with its recurrent cache), and both agree with a plain one-row re-run loop.
- Cramming, geometry and precision give identical results (cram's memories and verdicts,
  effective_eps's thresholds, the perturbation and saturation tables) when the plain loop
  decodes in its place.
- Token ids only (the copy task), row batches, fallbacks, and the argument checks.
"""

import numpy as np
import pytest
import torch

from accesslib.engine import cramming, geometry, precision
from accesslib.engine.decoding import greedy
from accesslib.models.loading import FAMILIES, hf_model, tiny_model

V, D = 64, 32


_MODELS = {}


def lm_of(family):
    if family not in _MODELS:
        _MODELS[family] = tiny_model(family, d=D, vocab_size=V, seed=0, initializer_range=0.3)
    return _MODELS[family]


def memories(B, m, seed=0, scale=1.0):
    return torch.randn(B, m, D, generator=torch.Generator().manual_seed(seed)) * scale


# --------------------------------------------------------------------------- references

def reference_decoder(plain_greedy):
    """A drop-in for :func:`greedy` built from the plain one-row loop: the engine's results must
    not depend on which of the two decodes."""
    def decode(model, memory, n, *, prefix_ids=None, given_ids=None, **_):
        model = hf_model(model)
        given = [[] for _ in range(memory.shape[0])] if given_ids is None else [list(map(int, g)) for g in given_ids]
        return torch.tensor([plain_greedy(model, list(prefix_ids or []), memory[b], n, given[b])
                             for b in range(memory.shape[0])], dtype=torch.long)
    return decode









# --------------------------------------------------------------------------- cache on == off

@pytest.mark.parametrize("family", FAMILIES)
def test_cache_on_equals_cache_off_and_plain_greedy(family, plain_greedy):
    lm = lm_of(family)
    mem = memories(5, 2, seed=1, scale=cramming.init_std_of(lm.model))
    given = torch.randint(0, V, (5, 1), generator=torch.Generator().manual_seed(2))
    for prefix, g in (([0], None), ([], given), ([0, 5], [7, 9])):
        on = greedy(lm, mem, 6, prefix_ids=prefix, given_ids=g)
        off = greedy(lm, mem, 6, prefix_ids=prefix, given_ids=g, cache=False)
        assert on.shape == (5, 6) and on.dtype == torch.long
        assert torch.equal(on, off), (family, prefix)
        rows = g.tolist() if isinstance(g, torch.Tensor) else [g or []] * 5
        for b in range(5):
            assert on[b].tolist() == plain_greedy(lm.model, prefix, mem[b], 6, rows[b])
    assert len({tuple(r) for r in on.tolist()}) > 1      # the memories steer the output




# --------------------------------------------------------------------------- callers: same results

def _same_cram(a, b):
    assert [s.index for s in a.strings] == [s.index for s in b.strings]
    for x, y in zip(a.strings, b.strings):
        assert (x.success, x.tf_success, x.steps, x.reason, x.greedy_ids) == \
            (y.success, y.tf_success, y.steps, y.reason, y.greedy_ids)
        assert torch.equal(x.memory, y.memory)


@pytest.mark.parametrize("family", ["gpt_neox", "llama", "mamba"])
def test_cramming_does_not_depend_on_the_decoder(family, monkeypatch, plain_greedy):
    lm = lm_of(family)
    T = torch.randint(0, V, (4, 2), generator=torch.Generator().manual_seed(5))
    runs = {}
    for name in ("new", "old"):
        if name == "old":
            monkeypatch.setattr(cramming, "greedy", reference_decoder(plain_greedy))
        runs[name] = (cramming.cram(lm, T, 1, max_steps=60, lr=5e-2, prefix_ids=[0]),
                      cramming.cram(lm, T, 1, max_steps=60, lr=5e-2, first_token_as_input=True))
    _same_cram(runs["new"][0], runs["old"][0])
    _same_cram(runs["new"][1], runs["old"][1])
    assert any(s.success for r in runs["new"] for s in r.strings)
    for s in runs["new"][0].strings:     # each verdict is the plain loop's
        assert (plain_greedy(lm.model, [0], s.memory, 2) == s.target_ids) == s.success


@pytest.mark.parametrize("family", ["gpt_neox", "llama"])
def test_effective_eps_does_not_depend_on_the_decoder(family, monkeypatch, plain_greedy):
    lm = lm_of(family)
    kw = dict(n_directions=5, n_tokens=3, steps=14, t_min=1e-6, t_max=10.0)
    mem = memories(1, 1, seed=6, scale=0.3)[0]
    new = [geometry.effective_eps(lm, **kw), geometry.effective_eps(lm.model, mem, **kw)]
    monkeypatch.setattr(geometry, "greedy", reference_decoder(plain_greedy))
    old = [geometry.effective_eps(lm, **kw), geometry.effective_eps(lm.model, mem, **kw)]
    for a, b in zip(new, old):
        # a bisection threshold: the cached and the plain decoder may round differently exactly at
        # the step where the output changes (seen: 0.004056 against 0.004052 in one direction)
        assert np.allclose(a.rel, b.rel, rtol=2e-3, atol=0) and a.memory_norm == b.memory_norm
    assert np.isfinite(new[1].rel).any()


def test_effective_eps_prefix_goes_before_the_memory():
    """As in cramming: a memory crammed after [0] reproduces its target when [0] comes first."""
    lm = lm_of("llama")
    T = torch.randint(0, V, (4, 2), generator=torch.Generator().manual_seed(7))
    res = cramming.cram(lm, T, 1, max_steps=60, prefix_ids=[0])
    s = next(s for s in res.strings if s.success)
    assert greedy(lm, s.memory[None], 2, prefix_ids=[0], cache=False)[0].tolist() == s.target_ids
    ee = geometry.effective_eps(lm, s.memory, n_directions=3, n_tokens=2, steps=6, prefix_ids=[0])
    assert ee.rel.shape == (3,)


def test_precision_tables_do_not_depend_on_the_decoder(monkeypatch, plain_greedy):
    lm = lm_of("gpt_neox")
    new = (precision.perturbation_test(lm, n=3, directions=4), precision.saturation_test(lm, n=3, ks=(2, 4, 8)))
    monkeypatch.setattr(precision, "greedy", reference_decoder(plain_greedy))
    old = (precision.perturbation_test(lm, n=3, directions=4), precision.saturation_test(lm, n=3, ks=(2, 4, 8)))
    for a, b in zip(new, old):
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k
    assert new[0]["same_input"][0] == 1.0 and new[0]["same_output"][0] == 1.0


# --------------------------------------------------------------------------- ids, batches, fallbacks

def test_token_ids_only_matches_generate():
    model = lm_of("llama").model
    ids = torch.randint(1, V, (3, 5), generator=torch.Generator().manual_seed(8))
    ref = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4,
                         min_new_tokens=4, do_sample=False, pad_token_id=0, eos_token_id=None)
    assert torch.equal(greedy(model, None, 4, given_ids=ids), ref[:, 5:])
    assert torch.equal(greedy(model, None, 4, given_ids=ids, cache=False), ref[:, 5:])
    # a prefix is the same as those ids at the start of every row
    assert torch.equal(greedy(model, None, 4, prefix_ids=ids[0, :2].tolist(), given_ids=ids[:, 2:]),
                       greedy(model, None, 4, given_ids=torch.cat([ids[:1, :2].expand(3, -1), ids[:, 2:]], 1)))


def test_batches_and_training_mode():
    lm = lm_of("gpt_neox")
    mem = memories(7, 2, seed=9, scale=0.5)
    whole = greedy(lm, mem, 4)
    assert torch.equal(greedy(lm, mem, 4, batch=3), whole)
    lm.model.train()
    try:
        assert torch.equal(greedy(lm, mem, 4), whole)       # decoded in eval mode ...
        assert lm.model.training                            # ... and the mode is restored
    finally:
        lm.model.eval()


class NoCache(torch.nn.Module):
    """A model whose forward takes no cache: decoded by re-running the sequence."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, inputs_embeds=None, input_ids=None, use_cache=False):
        return self.inner(inputs_embeds=inputs_embeds, input_ids=input_ids, use_cache=False)


class BrokenCache(NoCache):
    """Takes a cache argument but fails on a cached step: the decoder falls back."""

    def forward(self, inputs_embeds=None, input_ids=None, use_cache=False, cache=None):
        if cache is not None:
            raise TypeError("this cache is not supported")
        return self.inner(inputs_embeds=inputs_embeds, input_ids=input_ids, use_cache=use_cache)


@pytest.mark.parametrize("wrapper", [NoCache, BrokenCache])
def test_models_without_a_usable_cache(wrapper):
    model = lm_of("gpt2").model
    mem = memories(3, 1, seed=10, scale=0.5)
    want = greedy(model, mem, 5, prefix_ids=[0], cache=False)
    assert torch.equal(greedy(wrapper(model), mem, 5, prefix_ids=[0]), want)


def test_argument_checks():
    lm = lm_of("gpt_neox")
    with pytest.raises(ValueError, match="n must be a whole number >= 1; got 0"):
        greedy(lm, memories(1, 1), 0)
    with pytest.raises(ValueError, match=r"memory must be a tensor \[B, m, d\]"):
        greedy(lm, torch.zeros(1, D), 2)
    with pytest.raises(ValueError, match="memory must hold vectors of the model's width d=32; got width 8"):
        greedy(lm, torch.zeros(1, 1, 8), 2)
    with pytest.raises(ValueError, match=r"given_ids must be a LongTensor \[B=2, g\]"):
        greedy(lm, memories(2, 1), 2, given_ids=torch.zeros(3, 1, dtype=torch.long))
    with pytest.raises(ValueError, match=r"given_ids must be a LongTensor \[B, g\] when memory is None"):
        greedy(lm, None, 2, given_ids=[1, 2])
    with pytest.raises(ValueError, match="batch must be a whole number >= 1; got 0"):
        greedy(lm, memories(2, 1), 2, batch=0)
    with pytest.raises(ValueError, match=r"prefix_ids must be None or a list of token ids \(whole numbers >= 0\); got 3"):
        greedy(lm, memories(2, 1), 2, prefix_ids=3)


def test_contiguous_head_hands_the_head_a_contiguous_input_and_leaves_nothing():
    """decoding.contiguous_head: the output layer sees a contiguous input while it is on (the
    strided slice of logits_to_keep takes a slower CPU path), the logits agree with the plain
    forward, and the hook is gone afterwards, also after an error."""
    from accesslib.engine.decoding import contiguous_head

    model = hf_model(tiny_model("llama", d=32, vocab_size=61, layers=2, seed=0))
    head = model.get_output_embeddings()
    seen = []
    probe = head.register_forward_pre_hook(lambda mod, args: seen.append(args[0].is_contiguous()))
    x = torch.randn(3, 9, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = model(inputs_embeds=x, use_cache=False, logits_to_keep=4).logits
        with contiguous_head(model):
            hooked = model(inputs_embeds=x, use_cache=False, logits_to_keep=4).logits
    probe.remove()
    assert seen == [False, False]          # registered first, the probe sees the model's strided slice
    assert torch.allclose(plain, hooked, atol=1e-6, rtol=0)
    with contiguous_head(model):           # a probe registered after the hook sees its copy
        after = []
        p2 = head.register_forward_pre_hook(lambda mod, args: after.append(args[0].is_contiguous()))
        with torch.no_grad():
            model(inputs_embeds=x, use_cache=False, logits_to_keep=4)
        p2.remove()
    assert after == [True]
    assert len(head._forward_pre_hooks) == 0
    with pytest.raises(RuntimeError, match="boom"):
        with contiguous_head(model):
            raise RuntimeError("boom")
    assert len(head._forward_pre_hooks) == 0
    with contiguous_head(object()):     # no output layer: nothing to do
        pass
