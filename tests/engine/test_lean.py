"""The lean GPT-NeoX forward (accesslib.engine.lean) is bit-identical to the transformers forward,
and the cramming engine uses it only where that holds."""
import pytest
import torch
import torch.nn.functional as F

from accesslib.engine.cramming import cram
from accesslib.engine.decoding import contiguous_head
from accesslib.engine.lean import lean_forward
from accesslib.models.loading import hf_model, load_model, tiny_model


def _hf(model, x, keep):
    """The transformers forward as the engine runs it: the head's input made contiguous (a strided
    input takes another matmul path, whose results may differ in the last bit)."""
    with contiguous_head(model):
        return model(inputs_embeds=x, use_cache=False, logits_to_keep=keep).logits


def _neox(**kw):
    return hf_model(tiny_model("gpt_neox", d=kw.pop("d", 32), vocab_size=61, layers=kw.pop("layers", 2),
                               seed=kw.pop("seed", 0), dtype=kw.pop("dtype", "float32"), **kw))


@pytest.mark.parametrize("kw", [
    {},
    {"use_parallel_residual": False},
    {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}},
    {"d": 48, "layers": 3, "seed": 3},
    {"attention_bias": False, "hidden_act": "gelu_new"},
])
@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 7, 6), (5, 13, 4), (3, 9, 9)])
def test_logits_and_gradients_bit_identical(kw, shape):
    model = _neox(**dict(kw))
    fn = lean_forward(model)
    assert fn is not None
    B, L, K = shape
    g = torch.Generator().manual_seed(B * 100 + L)
    x0 = torch.randn(B, L, model.config.hidden_size, generator=g)
    labels = torch.randint(0, 61, (B, K), generator=g)
    outs = []
    for f in (lambda x: _hf(model, x, K), lambda x: fn(x, K)):
        x = x0.clone().requires_grad_(True)
        logits = f(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        outs.append((logits.detach(), torch.autograd.grad(loss, x)[0]))
    assert outs[0][0].shape == (B, K, 61)
    assert torch.equal(outs[0][0], outs[1][0])
    assert torch.equal(outs[0][1], outs[1][1])


def test_embedded_model_bit_identical():
    model = hf_model(load_model("tiny-d64-v257"))
    fn = lean_forward(model)
    x = torch.randn(4, 11, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(_hf(model, x, 8), fn(x, 8))
        # a second call at the same length (cached rotary tables) and one at another length
        assert torch.equal(_hf(model, x, 8), fn(x, 8))
        assert torch.equal(_hf(model, x[:, :5], 2), fn(x[:, :5], 2))


def test_bfloat16_model_bit_identical():
    model = _neox(dtype="bfloat16")
    fn = lean_forward(model)
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(_hf(model, x, 5), fn(x, 5))


def test_unsupported_models_get_none():
    assert lean_forward(hf_model(tiny_model("llama", d=16, vocab_size=20))) is None
    assert lean_forward(hf_model(tiny_model("gpt2", d=16, vocab_size=20))) is None
    eager = _neox()
    eager.config._attn_implementation = "eager"
    assert lean_forward(eager) is None
    training = _neox()
    training.train()
    assert lean_forward(training) is None


def test_engine_results_unchanged_by_the_lean_forward():
    """Same per-string successes, steps, losses and memories with the lean forward as with the
    transformers forward (ragged targets, mixed m, a prefix)."""
    lm = load_model("tiny-d32-v257")
    model = hf_model(lm)
    targets = [lm.tokenizer(t)["input_ids"] for t in ("In the", "And God said", "Let", "the earth was")]
    kw = dict(prefix_ids=[0], max_steps=150, patience=40, lr=5e-2, batch_size=3)
    a = cram(model, targets, 1, **kw)
    b = cram(model, targets, 1, lean=False, **kw)
    assert a.settings["forward"] == "lean gpt_neox" and b.settings["forward"] == "transformers"
    for sa, sb in zip(a.strings, b.strings):
        assert (sa.success, sa.steps, sa.final_loss) == (sb.success, sb.steps, sb.final_loss)
        assert torch.equal(sa.memory, sb.memory)
    assert any(s.success for s in a.strings)


def test_engine_with_autocast_uses_transformers():
    model = _neox()
    r = cram(model, [torch.tensor([1, 2, 3])], 1, max_steps=3, patience=3, autocast_dtype="bfloat16")
    assert r.settings["forward"] == "transformers"


def test_lean_greedy_equals_transformers_greedy_without_cache():
    """The engine's greedy checks: the lean forward re-run per token gives the ids of
    decoding.greedy(cache=False) (bit-identical logits), with a prefix, given ids and batching."""
    from accesslib.engine.decoding import greedy
    from accesslib.engine.lean import lean_greedy

    lm = load_model("tiny-d64-v257")
    model = hf_model(lm)
    fn = lean_forward(model)
    emb = model.get_input_embeddings()
    g = torch.Generator().manual_seed(4)
    mem = torch.randn(7, 2, 64, generator=g) * 0.5
    given = torch.randint(1, 257, (7, 1), generator=g)
    with torch.no_grad():
        pre = emb(torch.tensor([0]))[None]
        got = lean_greedy(fn, emb, pre, mem, given, 9, batch=3)
    want = greedy(model, mem, 9, prefix_ids=[0], given_ids=given, cache=False)
    assert got.shape == (7, 9) and torch.equal(got, want)
    # no prefix, no given ids
    with torch.no_grad():
        got = lean_greedy(fn, emb, None, mem, given[:, :0], 5)
    assert torch.equal(got, greedy(model, mem, 5, cache=False))
