"""Fixtures of the engine tests."""
import pytest
import torch


@pytest.fixture(scope="module")
def neox():
    """The engine tests' model: a 2-layer GPT-NeoX of width 32 over 64 tokens."""
    from accesslib.models.loading import tiny_model
    return tiny_model("gpt_neox", d=32, vocab_size=64, layers=2, seed=0, initializer_range=0.3).model


@pytest.fixture(scope="module", autouse=True)
def _engine_one_thread(one_thread):
    """Every engine test on one thread (tests/conftest.py: one_thread)."""
    yield


def _plain_greedy(model, prefix, memory, n, given=()):
    """Independent check of the decoder: one row, the whole sequence re-run for every token (no
    cache, full logits), argmax of the last position."""
    emb = model.get_input_embeddings()
    parts = [emb(torch.tensor([prefix]))[0]] if prefix else []
    parts.append(memory.to(emb.weight.dtype))
    if len(given):
        parts.append(emb(torch.tensor([list(given)]))[0])
    x = torch.cat(parts, 0)
    out = []
    with torch.no_grad():
        for _ in range(n):
            t = int(model(inputs_embeds=x[None]).logits[0, -1].argmax())
            out.append(t)
            x = torch.cat([x, emb(torch.tensor([[t]]))[0]], 0)
    return out


@pytest.fixture
def plain_greedy():
    """The reference greedy loop, to compare the engine's decoder with."""
    return _plain_greedy
