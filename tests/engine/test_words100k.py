"""The paper's random-words protocol: the 100k-word list, its licence, the "words100k" source,
and the cost of targets in nats per token (accesslib/engine/targets.py, engine/difficulty.py)."""
import fnmatch
import gzip
import math
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from accesslib.config import data_path
from accesslib.engine import difficulty as D
from accesslib.engine import targets as T

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lm():
    from accesslib.models.loading import load_model
    return load_model("tiny-d32-v257")


def test_the_100k_list_is_lowercase_words_near_100k():
    w = T.word_list(source="words100k")
    assert len(w) == 115_162 and len(set(w)) == len(w) and list(w) == sorted(w)
    assert all(x.isascii() and x.isalpha() and x.islower() and len(x) >= 2 for x in w)
    common = set(T.word_list())
    assert common <= set(w)                                          # the common words are in it
    assert {"aardvark", "zygote", "quixotic"} <= set(w)
    assert T.word_list(source="words") == T.word_list()               # the common list unchanged


def test_licence_and_header_are_shipped_and_name_the_package():
    lic = data_path("words100k.LICENSE.txt").read_text(encoding="utf-8")
    assert "wamerican-large" in lic and "2020.12.07-2" in lic and "Kevin Atkinson" in lic
    assert "115,162" in lic and "scripts/make_wordlist.py" in lic
    head = gzip.decompress(data_path("words100k.txt.gz").read_bytes()).decode().splitlines()[:3]
    assert all(h.startswith("#") for h in head) and "wamerican-large" in head[1]


def test_the_wheel_carries_the_list_and_its_licence():
    """pyproject's package-data patterns match both files (what setuptools puts in the wheel)."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["accesslib"]
    for name in ("data/words100k.txt.gz", "data/words100k.LICENSE.txt"):
        assert (ROOT / "accesslib" / name).is_file()
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name


@pytest.mark.skipif(not Path("/usr/share/dict/american-english-large").is_file() or not shutil.which("dpkg-query"),
                    reason="Debian package wamerican-large not installed (apt-get install -y wamerican-large)")
def test_make_wordlist_rebuilds_the_shipped_files_byte_for_byte():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_wordlist.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.count(": same") == 2, r.stdout + r.stderr


def test_words100k_strings_are_distinct_deterministic_and_from_the_list(lm):
    tok = lm.tokenizer   # byte-level: one token per letter
    ids, texts = T.make_targets("words100k", 24, 8, seed=5, tokenizer=tok)
    assert ids.shape == (8, 24) and len({tuple(r) for r in ids.tolist()}) == 8
    assert torch.equal(ids, T.make_targets("words100k", 24, 8, seed=5, tokenizer=tok)[0])
    assert torch.equal(T.make_targets("words100k", 10, 3, seed=5, tokenizer=tok)[0], ids[:3, :10])
    assert not torch.equal(ids, T.make_targets("words", 24, 8, seed=5, tokenizer=tok)[0])
    big, common = set(T.word_list(source="words100k")), set(T.word_list())
    words = [w for t in texts for w in t.split(" ")[:-1]]          # the last word may be cut
    assert words and all(w in big for w in words)
    assert sum(w in common for w in words) < len(words) / 2         # mostly rarer words than "words"


def test_words100k_refuses_more_strings_than_it_has(lm):
    """At n = 1 a byte-level string is a word's first letter: 26 distinct strings, not 27."""
    ids = T.random_words(lm.tokenizer, 1, 26, seed=0, source="words100k")
    assert sorted(lm.tokenizer.decode(r) for r in ids.tolist()) == [chr(c) for c in range(97, 123)]
    with pytest.raises(ValueError, match=r"B must be at most .* source 'words100k' can supply"):
        T.random_words(lm.tokenizer, 1, 27, seed=0, source="words100k")
    with pytest.raises(ValueError, match="source must be one of 'words', 'words100k', 'glove100k'; got 'natural'"):
        T.random_words(lm.tokenizer, 3, 2, source="natural")


def test_words100k_through_an_accessibility_curve(lm, tmp_path):
    from accesslib.experiments.curves import accessibility_curve
    from accesslib.results.store import ResultsStore

    store = ResultsStore(tmp_path / "r.sqlite")
    c = accessibility_curve(lm, 1, lengths=[2, 6], samples=2, source="words100k", protocol="fast",
                            max_steps=60, patience=30, store=store)
    assert c.source == "words100k" and c.lengths == [2, 6] and c.totals == [2, 2]
    rows = store.rows()
    assert len(rows) == 4 and {r["source"] for r in rows} == {"words100k"}
    from accesslib.experiments.curves import _derive_seed
    want, _ = T.make_targets("words100k", 6, 2, _derive_seed(0, 6, "words100k"), tokenizer=lm.tokenizer)
    assert [r["target_ids"] for r in c.results[6]] == want.tolist()   # the curve crammed this source's strings


def test_target_cost_is_the_models_own_cross_entropy(lm):
    """Against transformers' loss with labels on [BOS] + target, one string at a time."""
    c = D.target_cost(lm, "natural", 12, 3, seed=1)
    ids, _ = T.make_targets("natural", 12, 3, 1, tokenizer=lm.tokenizer)
    assert c.prefix_ids == [0] and c.scored == 12 and c.ln_vocab == pytest.approx(math.log(257))
    for i in range(3):
        x = torch.tensor([[0] + ids[i].tolist()])
        labels = x.clone()
        labels[0, 0] = -100                     # BOS is not scored
        with torch.no_grad():
            ref = float(lm.model(input_ids=x, labels=labels).loss)
        assert c.per_string[i] == pytest.approx(ref, rel=1e-5)
    assert c.nats_per_token == pytest.approx(sum(c.per_string) / 3)
    assert c.bits_per_token == pytest.approx(c.nats_per_token / math.log(2))
    nobos = D.target_cost(lm, "natural", 12, 3, seed=1, prefix_ids=[])
    assert nobos.scored == 11 and nobos.prefix_ids == []


def test_target_cost_orders_the_sources(lm):
    """On a model trained on text: uniform random tokens cost more than random words, which cost
    more than held-out natural text; the 100k list costs more than common words."""
    cost = {s: D.target_cost(lm, s, 32, 48, seed=0) for s in ("natural", "words", "words100k", "tokens")}
    nat, words, big, toks = (cost[s].nats_per_token for s in ("natural", "words", "words100k", "tokens"))
    assert nat < words < big < toks
    assert toks > cost["tokens"].ln_vocab              # worse than a uniform guess: bytes it never saw
    assert big - words > 3 * math.hypot(cost["words"].stderr, cost["words100k"].stderr)


def test_target_cost_checks_its_arguments(lm):
    with pytest.raises(ValueError, match="source must be one of"):
        D.target_cost(lm, "pg19", 4, 2)
    with pytest.raises(ValueError, match="n must be at most 63"):
        D.target_cost(lm, "tokens", 64, 2)


def test_cli_cram_takes_source_words100k(tmp_path, capsys):
    from accesslib.cli import main
    from accesslib.results.store import ResultsStore

    store = tmp_path / "r.sqlite"
    assert main(["cram", "--model", "tiny-d32-v257", "--m", "1", "--samples", "2", "--source", "words100k",
                 "--lengths", "3", "--protocol", "fast", "--max-steps", "20", "--store", str(store),
                 "--threads", "1", "--no-progress"]) == 0
    assert "source words100k" in capsys.readouterr().out
    assert {r["source"] for r in ResultsStore(store).rows()} == {"words100k"}


def test_tokens_per_word_counts_each_drawn_word_with_its_space(lm):
    """On the byte-level embedded model a word of w characters is w + 1 tokens (its space)."""
    import numpy as np

    for source in ("words", "words100k", "glove100k"):
        words = T.word_list(source=source)
        drawn = [words[j] for j in np.random.default_rng(3).integers(0, len(words), size=500)]
        want = sum(len((" " + w).encode("utf-8")) for w in drawn) / 500
        assert D.tokens_per_word(lm.tokenizer, source, k=500, seed=3) == pytest.approx(want)
    # the rare words are longer: more tokens per word
    assert D.tokens_per_word(lm.tokenizer, "words100k") > D.tokens_per_word(lm.tokenizer, "words") + 1
    with pytest.raises(ValueError, match="source must be one of 'words', 'words100k', 'glove100k'; got 'tokens'"):
        D.tokens_per_word(lm.tokenizer, "tokens")
