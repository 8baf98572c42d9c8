"""[A]'s own random-words list (source "glove100k"): the list their code draws from, shipped
byte for byte with its provenance and licence, and strings drawn from it as from the others."""
import fnmatch
import gzip
import hashlib
import tomllib
from pathlib import Path

import pytest
import torch

from accesslib.config import data_path
from accesslib.engine import targets as T

ROOT = Path(__file__).resolve().parents[2]
#: sha256 of [A]'s cramming/data/vocab_100k.txt at commit d82cea1 (its licence file says so)
A_SHA256 = "e52a405502a79f6c6fd70f1ba18818775001af8485088b8fc018cd645e28570e"


@pytest.fixture(scope="module")
def lm():
    from accesslib.models.loading import load_model
    return load_model("tiny-d32-v257")


def test_the_list_is_As_file_byte_for_byte():
    raw = gzip.decompress(data_path("glove100k.txt.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == A_SHA256
    w = T.word_list(source="glove100k")
    assert len(w) == 100_000 and len(set(w)) == len(w)
    assert w[:5] == ("the", ",", ".", "of", "to")                     # GloVe's frequency order
    assert "#" in w and "#e" in w                                      # words, not comments, here
    assert T.word_list(source="words100k")[0] != "#"


def test_licence_names_the_source_and_the_pddl():
    lic = data_path("glove100k.LICENSE.txt").read_text(encoding="utf-8")
    assert A_SHA256 in lic and "d82cea1" in lic and "vocab_100k.txt" in lic
    assert "Public Domain Dedication and License" in lic and "glove.6B" in lic
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["accesslib"]
    for name in ("data/glove100k.txt.gz", "data/glove100k.LICENSE.txt"):
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name


def test_glove100k_strings(lm):
    tok = lm.tokenizer
    ids, texts = T.make_targets("glove100k", 24, 8, seed=5, tokenizer=tok)
    assert ids.shape == (8, 24) and len({tuple(r) for r in ids.tolist()}) == 8
    assert torch.equal(T.make_targets("glove100k", 10, 3, seed=5, tokenizer=tok)[0], ids[:3, :10])
    assert not torch.equal(ids, T.make_targets("words100k", 24, 8, seed=5, tokenizer=tok)[0])
    vocab = set(T.word_list(source="glove100k"))
    words = [w for t in texts for w in t.split(" ")[:-1]]
    assert words and all(w in vocab for w in words)
    assert "glove100k" in T.SOURCES and "[A]" in T.SOURCE_LABELS["glove100k"]
