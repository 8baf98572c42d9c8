"""Copy task (docs/paper.md, section 7): data, loss mask, exact-match evaluation, training loop."""
import threading
from types import SimpleNamespace

import pytest
import torch

from accesslib.engine import copying as cp


def test_vocabulary_and_examples():
    assert cp.VOCAB_SIZE == 30
    assert cp.decode(cp.encode("$abc|abc.")) == "$abc|abc."
    ex = cp.make_examples(torch.tensor([cp.encode("hello")]))
    assert cp.decode(ex[0]) == "$hello|hello."
    with pytest.raises(ValueError, match="text"):
        cp.encode("ABC")


def test_batch_loss_mask_only_on_copy():
    g = torch.Generator().manual_seed(0)
    ids, labels = cp.make_batch([3, 5], g)
    assert ids.shape == labels.shape == (2, 13)
    row = cp.decode(ids[0])
    assert row[0] == "$" and row[4] == "|" and row[5:8] == row[1:4] and row[8] == "." and row[9:] == "____"
    # labels: exactly the copied letters and EOS, everything else ignored
    want0 = [-100] * 5 + ids[0, 5:9].tolist() + [-100] * 4
    assert labels[0].tolist() == want0
    want1 = [-100] * 7 + ids[1, 7:13].tolist()
    assert labels[1].tolist() == want1
    # the model's loss with these labels equals cross-entropy on the copy positions only
    model = cp.build_model(cp.CopyConfig(d=16, layers=1, heads=2, intermediate=32, max_len=10, max_position=64))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        mask = labels[:, 1:] != -100
        manual = torch.nn.functional.cross_entropy(logits[:, :-1][mask], labels[:, 1:][mask])
        assert float(model(input_ids=ids, labels=labels).loss) == pytest.approx(float(manual), rel=1e-5)
    with pytest.raises(ValueError, match="lengths"):
        cp.make_batch([0], g)


class Oracle(torch.nn.Module):
    """A fake causal LM that copies perfectly up to ``limit`` letters, then writes 'a'.

    Implements the transformers call interface (past_key_values holds the ids so far).
    """

    def __init__(self, limit=10**9):
        super().__init__()
        self.limit = limit
        self.config = SimpleNamespace(max_position_embeddings=4096)

    def forward(self, input_ids, past_key_values=None, use_cache=False, labels=None):
        ids = input_ids if past_key_values is None else torch.cat([past_key_values, input_ids], 1)
        B, T = ids.shape
        logits = torch.full((B, T, cp.VOCAB_SIZE), -1.0)
        for b in range(B):
            seq = ids[b].tolist()
            sep = seq.index(cp.SEP) if cp.SEP in seq else None
            for t in range(T):
                if sep is None or t < sep:
                    nxt = cp.PAD
                else:
                    j = t - sep            # letters already copied
                    L = sep - 1
                    nxt = cp.EOS if j >= L else (seq[1 + j] if j < self.limit else cp.FIRST_LETTER)
                logits[b, t, nxt] = 1.0
        start = T - input_ids.shape[1]
        return SimpleNamespace(logits=logits[:, start:], past_key_values=ids)


def test_exact_match_logic_with_oracle():
    letters = torch.tensor([cp.encode("bcdefg"), cp.encode("zzzzzz")])
    perfect = Oracle()
    assert cp.decode(cp.greedy_copy(perfect, letters)[0]) == "bcdefg."
    assert cp.greedy_correct(perfect, letters).tolist() == [True, True]
    assert cp.teacher_forced_correct(perfect, letters).tolist() == [True, True]
    # an oracle that breaks after 3 letters fails both measures on every string
    broken = Oracle(limit=3)
    assert cp.decode(cp.greedy_copy(broken, letters)[0]) == "bcdaaa."
    assert cp.greedy_correct(broken, letters).tolist() == [False, False]
    assert cp.teacher_forced_correct(broken, letters).tolist() == [False, False]
    # ...unless the wrong letter happens to be right ('a' copies 'a')
    assert cp.greedy_correct(broken, torch.tensor([cp.encode("bcdaa")])).tolist() == [True]
    with pytest.raises(ValueError, match="shape"):
        cp.exact_match(torch.zeros(2, 3), torch.zeros(2, 4))


def test_evaluate_accuracy_vs_length():
    res = cp.evaluate(Oracle(limit=12), [5, 12, 13, 20], n=6, batch_size=4)
    assert [r.length for r in res] == [5, 12, 13, 20]
    # strings longer than 12 fail unless every letter past 12 is an 'a' (chance 26^-k)
    assert [r.greedy for r in res] == [1.0, 1.0, 0.0, 0.0]
    assert [r.teacher_forced for r in res] == [1.0, 1.0, 0.0, 0.0]
    seen = []
    cp.evaluate(Oracle(), [4, 5, 6], n=2, stop=lambda: len(seen) >= 2, on_length=seen.append)
    assert [r.length for r in seen] == [4, 5]


def test_greedy_loop_matches_generate():
    model = cp.build_model(cp.CopyConfig(d=16, layers=2, heads=2, intermediate=32, max_len=10, max_position=64, seed=3))
    letters = cp.random_strings(3, 7, torch.Generator().manual_seed(0))
    prompt = cp.make_examples(letters)[:, :9]
    ref = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8,
                         min_new_tokens=8, do_sample=False, pad_token_id=cp.PAD, eos_token_id=None)
    assert torch.equal(cp.greedy_copy(model, letters), ref[:, 9:])


def test_eval_length_limited_by_positions():
    model = cp.build_model(cp.CopyConfig(d=16, layers=1, heads=2, intermediate=32, max_len=10, max_position=64))
    with pytest.raises(ValueError, match="length must be <= 30"):
        cp.evaluate(model, [31], n=1)


def test_train_callbacks_stop_and_learning():
    cfg = cp.CopyConfig(d=32, layers=2, heads=2, intermediate=64, min_len=2, max_len=4, batch_size=32,
                        lr=3e-3, warmup=10, max_position=64, eval_every=0)
    seen = []
    res = cp.train(cfg, steps=120, on_step=seen.append)
    assert res.steps_done == 120 and len(seen) == 120 and not res.interrupted
    assert seen[-1].step == 120 and seen[0].lr == pytest.approx(3e-4)
    first, last = sum(res.losses[:10]) / 10, sum(res.losses[-10:]) / 10
    assert first > 3.0 and last < first - 0.5          # ln 26 = 3.26 at chance
    assert res.wall_time > 0 and res.cpu_time > 0 and res.threads >= 1
    stop = threading.Event()
    res2 = cp.train(cfg, steps=50, on_step=lambda s: s.step == 3 and stop.set(), stop=stop)
    assert res2.steps_done == 3 and res2.interrupted


def test_config_validation():
    with pytest.raises(ValueError, match="max_len"):
        cp.CopyConfig(min_len=10, max_len=5).validate()
    with pytest.raises(ValueError, match="d must be a multiple of heads"):
        cp.CopyConfig(d=30, heads=4).validate()
    with pytest.raises(ValueError, match="lr"):
        cp.CopyConfig(lr=0).validate()
    with pytest.raises(ValueError, match="steps"):
        cp.train(cp.CopyConfig(), steps=0)


def test_adapt_pretrained_tiny_model():
    from accesslib.models.loading import tiny_model

    lm = tiny_model("gpt_neox", d=16, vocab_size=64, layers=1).model
    old = lm.get_input_embeddings().weight[:30].detach().clone()
    cp.adapt_pretrained(lm, max_position=256)
    assert lm.get_input_embeddings().weight.shape[0] == 30
    assert lm.get_output_embeddings().weight.shape[0] == 30
    assert torch.equal(lm.get_input_embeddings().weight.detach(), old)   # pretrained rows kept
    assert lm.config.max_position_embeddings >= 256 and lm.config.eos_token_id == cp.EOS
    cfg = cp.CopyConfig(min_len=2, max_len=3, batch_size=4, eval_every=0, max_position=256)
    res = cp.train(cfg, steps=3, model=lm)
    assert res.steps_done == 3 and all(torch.isfinite(torch.tensor(res.losses)))
    assert cp.evaluate(lm, [3], n=2)[0].n == 2


# ---------------------------------------------------------------- the App (headless)


