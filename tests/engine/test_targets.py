"""Target sources: deterministic, right shape, right content (accesslib/targets.py)."""
import pytest
import torch

from accesslib.engine import targets as T

TEXT = "\n".join(f"Line {i}: the quick brown fox number {i} jumps over the lazy dog." for i in range(200))


@pytest.fixture(scope="module")
def tok():
    """A small byte-level BPE tokenizer trained here (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    words = " ".join(T.word_list()[:3000])
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator([TEXT, words], trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")


def test_word_list_is_common_lowercase_words():
    w = T.word_list()
    assert 10_000 < len(w) < 20_000
    assert all(x.isascii() and x.isalpha() and x.islower() and len(x) >= 2 for x in w)
    assert {"house", "water", "friend"} <= set(w) and len(set(w)) == len(w)


def test_random_tokens_deterministic_excluding_and_prefix_stable():
    a = T.random_tokens(50, 12, 5, seed=3, exclude=[0, 1, 2])
    assert a.dtype == torch.long and a.shape == (5, 12)
    assert torch.equal(a, T.random_tokens(50, 12, 5, seed=3, exclude=[0, 1, 2]))
    assert not torch.equal(a, T.random_tokens(50, 12, 5, seed=4, exclude=[0, 1, 2]))
    assert a.min() >= 3 and a.max() < 50
    assert torch.equal(T.random_tokens(50, 6, 2, seed=3, exclude=[0, 1, 2]), a[:2, :6])  # B- and n-stable
    big = T.random_tokens(8, 4000, 1, seed=0)
    counts = torch.bincount(big[0], minlength=8).float()
    assert (counts / 4000 - 1 / 8).abs().max() < 0.03  # uniform


def test_random_words(tok):
    ids, texts = T.random_words(tok, 20, 4, seed=1, return_texts=True)
    assert ids.shape == (4, 20) and len(texts) == 4
    assert torch.equal(ids, T.random_words(tok, 20, 4, seed=1))
    assert torch.equal(T.random_words(tok, 9, 2, seed=1), ids[:2, :9])
    vocab = set(T.word_list())
    for t in texts:
        words = t.split(" ")
        assert all(w in vocab for w in words[:-1])  # the last one may be cut by the n-token limit
        assert len(words) >= 3


def test_natural_text(tok):
    ids, texts = T.natural_text(tok, 15, 3, seed=2, text=TEXT, return_texts=True)
    assert ids.shape == (3, 15)
    assert torch.equal(ids, T.natural_text(tok, 15, 3, seed=2, text=TEXT))
    assert torch.equal(T.natural_text(tok, 7, 3, seed=2, text=TEXT), ids[:, :7])
    for t in texts:
        assert t.startswith("Line ") and t in TEXT + "\n" + TEXT  # a chunk of the text from a line start
    long = T.natural_text(tok, 3000, 1, seed=0, text="a short text\n")  # wraps around
    assert long.shape == (1, 3000)


def test_natural_text_default_corpus(tok):
    try:
        from accesslib.models.embedded import corpus_split
        corpus_split("heldout")
    except Exception:
        pytest.skip("shipped corpus not available")
    ids, texts = T.natural_text(tok, 10, 2, seed=0, return_texts=True)
    assert ids.shape == (2, 10)


def test_make_targets_and_errors(tok):
    ids, texts = T.make_targets("tokens", 5, 2, 0, vocab_size=30)
    assert ids.shape == (2, 5) and texts == ["", ""]
    with pytest.raises(ValueError, match="source must be one of"):
        T.make_targets("pg19", 5, 2)
    with pytest.raises(ValueError, match="needs a tokenizer"):
        T.make_targets("words", 5, 2)
    with pytest.raises(ValueError, match="n must be a whole number >= 1; got 0"):
        T.random_tokens(10, 0, 2)
    with pytest.raises(ValueError, match="B must be a whole number >= 1; got 0"):
        T.random_words(tok, 4, 0)
    with pytest.raises(ValueError, match="vocab_size"):
        T.random_tokens(1, 4, 2)
    with pytest.raises(ValueError, match="exclude removes every token"):
        T.random_tokens(3, 4, 2, exclude=[0, 1, 2])
    with pytest.raises(ValueError, match="text must be a non-empty string"):
        T.natural_text(tok, 4, 2, text="  ")
