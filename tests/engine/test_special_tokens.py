"""[A]'s layout: the tokenizer's special tokens (Gemma's BOS) start each target after the memory
and count in n (``add_special_tokens``: targets, curves, protocol hash, sweeps, command lines)."""
import copy

import pytest
import torch
from tokenizers import processors

from accesslib.engine import targets
from accesslib.experiments.curves import accessibility_curves, hashed_settings, protocol_hash_for
from accesslib.experiments.sweep.spec import check_engine
from accesslib.models import embedded
from accesslib.models.loading import load_model
from accesslib.results.store import ResultsStore


@pytest.fixture(scope="module")
def lm():
    return load_model(embedded.DEFAULT)


def with_template(tok, single):
    """A copy of ``tok`` whose post-processor adds special tokens as ``single`` says."""
    t = copy.deepcopy(tok)
    t.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=single, special_tokens=[("<|endoftext|>", t.convert_tokens_to_ids("<|endoftext|>"))])
    return t


def test_leading_special_ids(lm):
    bos = lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert targets.leading_special_ids(lm.tokenizer) == []            # the byte-level tokenizer adds none
    assert targets.leading_special_ids(with_template(lm.tokenizer, "<|endoftext|> $A")) == [bos]
    with pytest.raises(ValueError, match="adds special tokens other than before the text"):
        targets.leading_special_ids(with_template(lm.tokenizer, "$A <|endoftext|>"))


@pytest.mark.parametrize("source", ["natural", "words100k", "tokens"])
def test_targets_start_with_bos_and_keep_n(lm, source):
    tok = with_template(lm.tokenizer, "<|endoftext|> $A")
    bos = targets.leading_special_ids(tok)[0]
    kw = dict(tokenizer=tok, vocab_size=257)
    ids, _ = targets.make_targets(source, 6, 3, 7, add_special_tokens=True, **kw)
    plain, _ = targets.make_targets(source, 5, 3, 7, **kw)
    assert ids.shape == (3, 6) and torch.equal(ids[:, 0], torch.full((3,), bos))
    assert torch.equal(ids[:, 1:], plain)           # the same strings, after the special token
    # a tokenizer that adds nothing: unchanged
    same, _ = targets.make_targets(source, 6, 3, 7, add_special_tokens=True, tokenizer=lm.tokenizer, vocab_size=257)
    assert torch.equal(same, targets.make_targets(source, 6, 3, 7, **dict(kw, tokenizer=lm.tokenizer))[0])
    with pytest.raises(ValueError, match=r"n must be longer than the 1 special token\(s\) the tokenizer adds; got n=1"):
        targets.make_targets(source, 1, 3, 7, add_special_tokens=True, **kw)


def test_hash_and_curves(lm, tmp_path):
    assert protocol_hash_for("paper", {"add_special_tokens": False}) == protocol_hash_for("paper")
    assert protocol_hash_for("paper", {"add_special_tokens": True}) != protocol_hash_for("paper")
    assert hashed_settings("paper", {"add_special_tokens": True})["add_special_tokens"] is True
    tok = with_template(lm.tokenizer, "<|endoftext|> $A")
    bos = targets.leading_special_ids(tok)[0]
    store = ResultsStore(tmp_path / "s.sqlite")
    (c,) = accessibility_curves(lm.model, [1], {1: [4, 6]}, samples=2, source="words100k", store=store,
                                search="grid", protocol="paper", tokenizer=tok, model_name="t", max_steps=30,
                                add_special_tokens=True)
    rows = store.rows()
    assert len(rows) == 4 and all(r["target_ids"][0] == bos and len(r["target_ids"]) == r["n"] for r in rows)
    assert {r["protocol_hash"] for r in rows} == {protocol_hash_for("paper", {"add_special_tokens": True, "max_steps": 30})}
    # the BOS is the given first token ([A]'s layout): the predicted tokens are the words' n - 1
    assert all(len(r["greedy_ids"]) in (0, r["n"] - 1) for r in rows)
    assert c.settings["add_special_tokens"] is True
    with pytest.raises(ValueError, match="add_special_tokens must be False for a model without a tokenizer"):
        accessibility_curves(lm.model, [1], {1: [4]}, samples=1, source="tokens", search="grid", model_name="t",
                             max_steps=2, add_special_tokens=True)


def test_sweeps_take_it():
    assert check_engine({"protocol": "paper", "add_special_tokens": True})["add_special_tokens"] is True
    with pytest.raises(ValueError, match="engine.add_special_tokens"):
        check_engine({"add_special_tokens": "yes"})
    with pytest.raises(ValueError, match="checkpoint"):
        check_engine({"checkpoint": "x.sqlite"})
