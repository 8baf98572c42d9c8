"""Target strings for cramming: uniform random tokens, random words, natural text.

Every source is deterministic: the same (seed, sample index) always gives the same string, and
sample i does not depend on how many samples were asked for (``B``). Within a source the string
of sample i at length n is a prefix of the one at length n' > n (the tokens are drawn as a
stream and cut), so curves over n can share strings when a caller wants that.

The B strings of one call are distinct (no two equal id sequences): sample i keeps its first
candidate unless an earlier sample already has that string; then it draws further candidates
(tokens, words: the next draws of its own stream; natural text: the chunk at the next line
start) until it has a new one. A source that cannot supply B distinct strings of n tokens
raises a ValueError naming the source, n, B and how many it can supply.

Sources (docs/paper.md, section 5):
- ``random_tokens``: token ids uniform over the vocabulary minus excluded (special) ids: the
  hardest case, ln|V| nats per token.
- ``random_words``: words drawn uniformly from a shipped word list, joined with spaces,
  tokenized, cut to n tokens: [A]'s "Random" strings. Source ``glove100k`` is [A]'s own list,
  drawn as their code draws it: the 100,000 most frequent entries of GloVe 6B's vocabulary
  (``data/glove100k.txt.gz``, copied from their repository; public domain, see
  ``data/glove100k.LICENSE.txt``), punctuation, numbers and names included. Source
  ``words100k`` is a dictionary list of about that size: 115,162 English words
  (``data/words100k.txt.gz``, SCOWL size 70 from Debian's ``wamerican-large``, rebuilt by
  ``scripts/make_wordlist.py``; licence in ``data/words100k.LICENSE.txt``), many of them rare: on
  the embedded models its strings cost more nats per token than common words
  (docs/cramming-results.md). Source ``words``
  ("common words") draws from 10,901 common words (``data/words.txt``, SCOWL sizes 10+20;
  licence in ``data/words.LICENSE.txt``), an easier target per token.
- ``natural_text``: chunks of a public-domain text starting at a line start, cut to n tokens:
  [A]'s "PG19" strings. By default the held-out split of the shipped King James Bible
  (``accesslib.models.embedded.corpus_split("heldout")``), which the embedded models never saw.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import math
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from accesslib._checks import check_choice, check_int, check_seed, fail
from accesslib.config import data_path

__all__ = ["SOURCES", "SOURCE_LABELS", "WORD_FILES", "random_tokens", "random_words", "natural_text", "make_targets", "word_list"]

#: Names accepted by :func:`make_targets` (and by ``accessibility_curve(source=...)``).
SOURCES = ("natural", "words", "words100k", "glove100k", "tokens")

#: What each source is, in a reader's words.
SOURCE_LABELS = {"natural": "natural text", "words": "random common words",
                 "words100k": "random words from a 100k-word list (SCOWL 70)",
                 "glove100k": "random words from [A]'s own list (GloVe's 100k most frequent words)",
                 "tokens": "uniform random tokens"}

#: The shipped word list of each random-words source (files in ``accesslib/data``).
WORD_FILES = {"words": "words.txt", "words100k": "words100k.txt.gz", "glove100k": "glove100k.txt.gz"}
#: Word lists with '#' comment lines (glove100k has none: some of its words start with '#').
_COMMENTED = ("words", "words100k")

_WORDS_PATH = data_path(WORD_FILES["words"])
# Salts keep the streams of the sources independent for the same seed.
_SALT = {"tokens": 11, "words": 23, "natural": 37, "words100k": 29, "glove100k": 31}


def _check(n, B, seed):
    """n (target length in tokens) >= 1, B (number of strings) >= 1, seed in 0..2**64 - 1."""
    check_int("n", n, 1)
    check_int("B", B, 1)
    check_seed("seed", seed)


def _too_few(source: str, n: int, B: int, supply: str) -> None:
    """The one message for a source that cannot give B distinct strings of n tokens."""
    fail("B", f"at most the number of distinct strings of n={n} tokens that source {source!r} can "
         f"supply ({supply})", B)


#: Extra candidates one sample may draw before its source is judged unable to supply a new
#: string (random words and natural text, whose number of distinct strings is not known ahead).
_REDRAWS = 2000


def _rng(source: str, seed: int, i: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(i), _SALT[source]])


def _encode(tokenizer, text: str) -> list[int]:
    if hasattr(tokenizer, "encode"):
        try:
            return list(tokenizer.encode(text, add_special_tokens=False))
        except TypeError:  # a plain callable-like tokenizer without the keyword
            return list(tokenizer.encode(text))
    raise ValueError("tokenizer must have an encode(text) method (a Hugging Face tokenizer)")


def _decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids)) if hasattr(tokenizer, "decode") else ""


def _finish(rows: list[list[int]], texts: list[str], return_texts: bool):
    ids = torch.tensor(rows, dtype=torch.long)
    return (ids, texts) if return_texts else ids


def random_tokens(vocab_size: int, n: int, B: int, seed: int = 0, exclude: Iterable[int] = (),
                  *, tokenizer=None, return_texts: bool = False):
    """B distinct strings of n token ids drawn uniformly from ``range(vocab_size)`` minus ``exclude``.

    A string equal to an earlier one is replaced by the next draw of its sample's stream; B
    larger than the number of distinct strings, (allowed ids)^n, is refused.
    Returns LongTensor [B, n] (and the decoded texts if ``return_texts``; they need
    ``tokenizer``, else they are empty strings).
    """
    _check(n, B, seed)
    check_int("vocab_size", vocab_size, 2)
    allowed = np.setdiff1d(np.arange(vocab_size), np.fromiter((int(e) for e in exclude), dtype=np.int64))
    if allowed.size == 0:
        raise ValueError("exclude removes every token id: nothing left to draw from")
    size = int(allowed.size)
    if n * math.log2(size) < 64 and size ** n < B:
        _too_few("tokens", n, B, f"{size ** n} = {size}^{n} from {size} allowed token ids")
    rows, seen = [], set()
    for i in range(B):
        rng = _rng("tokens", seed, i)
        while True:
            row = allowed[rng.integers(0, size, size=n)].tolist()
            if tuple(row) not in seen:
                break
        seen.add(tuple(row))
        rows.append(row)
    texts = [_decode(tokenizer, r) if tokenizer is not None else "" for r in rows] if return_texts else []
    return _finish(rows, texts, return_texts)


@functools.lru_cache(maxsize=4)
def word_list(path: str | None = None, *, source: str = "words") -> tuple[str, ...]:
    """The shipped word list of a random-words ``source`` (a key of :data:`WORD_FILES`: "words",
    the common words, "words100k", a 100k list from SCOWL, or "glove100k", [A]'s own list), or a
    file of one word per line (gzip-compressed when it ends in ``.gz``); '#' lines are comments
    (except in the shipped glove100k list, whose words may start with '#')."""
    check_choice("source", source, tuple(WORD_FILES))
    p = Path(path) if path is not None else data_path(WORD_FILES[source])
    raw = gzip.decompress(p.read_bytes()).decode("utf-8") if p.suffix == ".gz" else p.read_text(encoding="utf-8")
    comments = path is not None or source in _COMMENTED
    words = tuple(w.strip() for w in raw.splitlines() if w.strip() and not (comments and w.startswith("#")))
    if not words:
        raise ValueError(f"word list {p} is empty")
    return words


def random_words(tokenizer, n: int, B: int, seed: int = 0, *, words: Sequence[str] | None = None,
                 return_texts: bool = False, source: str = "words"):
    """B strings of random words joined by spaces, tokenized and cut to n tokens ([A]'s "Random").

    ``source`` names the shipped list and the random stream: "words" (common words),
    "words100k" (a 100k-word list from SCOWL) or "glove100k" ([A]'s list, GloVe's 100k most
    frequent words); ``words`` replaces the list (same stream).
    Words are drawn uniformly with replacement from the list as a
    stream of blocks, so a longer n extends the same string. The B strings are distinct: a string
    equal to an earlier one is replaced by a fresh draw of words from its sample's stream (a
    ValueError when no new string turns up in many draws). Returns LongTensor [B, n] (and the
    decoded texts of the n tokens if ``return_texts``).
    """
    _check(n, B, seed)
    check_choice("source", source, tuple(WORD_FILES))
    vocab = tuple(words) if words is not None else word_list(source=source)
    if not vocab:
        raise ValueError("words must not be empty")
    rows, texts, seen = [], [], set()
    for i in range(B):
        rng = _rng(source, seed, i)
        for _ in range(_REDRAWS + 1):
            drawn: list[str] = []
            while True:
                # ~1.3 tokens per common word: one block usually suffices; more blocks extend it.
                drawn += [vocab[j] for j in rng.integers(0, len(vocab), size=max(16, n))]
                ids = _encode(tokenizer, " ".join(drawn))
                if len(ids) > n:  # > n: the last kept token is never a word cut by the block end
                    break
            if tuple(ids[:n]) not in seen:
                break
        else:
            _too_few(source, n, B, f"it gave {len(seen)} distinct strings, then none new in "
                     f"{_REDRAWS} further draws")
        seen.add(tuple(ids[:n]))
        rows.append(ids[:n])
        if return_texts:
            texts.append(_decode(tokenizer, ids[:n]))
    return _finish(rows, texts, return_texts)


def _default_text() -> str:
    try:
        from accesslib.models import embedded
        return embedded.corpus_split("heldout")
    except (ImportError, AttributeError, FileNotFoundError) as e:  # corpus not shipped here
        raise ValueError("natural_text needs text=...: the shipped corpus "
                         f"(accesslib.models.embedded.corpus_split) is not available ({e})") from None


@functools.lru_cache(maxsize=8)
def _line_starts(text: str) -> np.ndarray:
    """Character offsets where a non-empty line starts (the candidate chunk starts)."""
    starts, pos = [], 0
    for line in text.split("\n"):
        if line.strip():
            starts.append(pos)
        pos += len(line) + 1
    return np.asarray(starts, dtype=np.int64)


def natural_text(tokenizer, n: int, B: int, seed: int = 0, text: str | None = None, *,
                 return_texts: bool = False):
    """B chunks of natural text, each from the start of a random line, cut to n tokens ([A]'s "PG19").

    ``text`` defaults to the held-out split of the shipped public-domain corpus. A chunk that
    runs past the end of the text continues from its beginning. The B chunks are distinct: a
    chunk equal to an earlier one (e.g. "And" at n=1) is replaced by the chunk at the next line
    start that gives a new one; when no line start does, a ValueError says how many distinct
    chunks the text has. Returns LongTensor [B, n] (and the decoded texts if ``return_texts``).
    """
    _check(n, B, seed)
    if text is None:
        text = _default_text()
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty string")
    starts = _line_starts(text)
    chunks: dict[int, tuple] = {}   # line index -> its chunk of n ids (each encoded once)

    def chunk(k: int) -> tuple:
        if k not in chunks:
            chunks[k] = tuple(_chunk(tokenizer, text, int(starts[k]), n))
        return chunks[k]

    rows, texts, seen = [], [], set()
    for i in range(B):
        first = int(_rng("natural", seed, i).integers(0, len(starts)))
        for step in range(len(starts)):
            ids = chunk((first + step) % len(starts))
            if ids not in seen:
                break
        else:
            _too_few("natural", n, B, f"{len(seen)} distinct chunks from the text's {len(starts)} line "
                     "starts")
        seen.add(ids)
        ids = list(ids)
        rows.append(ids)
        if return_texts:
            texts.append(_decode(tokenizer, ids[:n]))
    return _finish(rows, texts, return_texts)


def _chunk(tokenizer, text: str, start: int, n: int) -> list[int]:
    """The first n token ids of ``text`` from character ``start`` (wrapping to its beginning)."""
    width = 8 * n + 64  # characters; grown until the window holds more than n tokens
    while True:
        window = text[start:start + width]
        wrapped = start + width > len(text)
        if wrapped:
            window = (window + "\n" + text * (1 + width // len(text)))[:width]
        ids = _encode(tokenizer, window)
        if len(ids) > n:
            return ids[:n]
        if len(window) < width and not wrapped:
            raise ValueError("text is too short to give a chunk")
        width *= 2
        if width > 64 * len(text) + 64 * n:
            raise ValueError(f"text gives fewer than n={n} tokens even when repeated")


def leading_special_ids(tokenizer) -> list[int]:
    """The ids a tokenizer puts before every text it encodes (``add_special_tokens=True``): BOS
    for Gemma and Llama, nothing for Pythia, Qwen2.5 and the byte-level models."""
    plain = list(tokenizer.encode("a b", add_special_tokens=False))
    full = list(tokenizer.encode("a b", add_special_tokens=True))
    k = len(full) - len(plain)
    if k < 0 or full[k:] != plain:
        raise ValueError("add_special_tokens: this tokenizer adds special tokens other than before the text "
                         f"({full} against {plain} without them); only leading ones (BOS) are supported")
    return full[:k]


def make_targets(source: str, n: int, B: int, seed: int = 0, *, tokenizer=None, vocab_size=None,
                 exclude: Iterable[int] = (), text: str | None = None, add_special_tokens: bool = False):
    """Dispatch by source name (one of :data:`SOURCES`); returns (LongTensor [B, n], texts).

    ``add_special_tokens``: each target starts with the ids the tokenizer puts before a text
    (:func:`leading_special_ids`, e.g. Gemma's ``<bos>``), followed by the first n - k tokens of
    the source, k of them: the layout of [A]'s code, whose ``tokenizer(text, max_length=n)``
    adds BOS and counts it in n (with the first target token given as input, BOS is given and
    n - 1 tokens are predicted). The same strings as without, shifted by the special tokens."""
    check_choice("source", source, SOURCES)
    if add_special_tokens:
        if tokenizer is None:
            raise ValueError("add_special_tokens needs a tokenizer (the model has none)")
        lead = leading_special_ids(tokenizer)
        k = len(lead)
        if n <= k:
            raise ValueError(f"n must be longer than the {k} special token(s) the tokenizer adds; got n={n}")
        ids, texts = make_targets(source, n - k, B, seed, tokenizer=tokenizer, vocab_size=vocab_size,
                                  exclude=exclude, text=text)
        if k:
            ids = torch.cat([torch.tensor(lead, dtype=torch.long).expand(ids.shape[0], -1), ids], 1)
        return ids, texts
    if source == "tokens":
        if vocab_size is None:
            raise ValueError("source='tokens' needs vocab_size")
        return random_tokens(vocab_size, n, B, seed, exclude, tokenizer=tokenizer, return_texts=True)
    if tokenizer is None:
        raise ValueError(f"source={source!r} needs a tokenizer (the model has none: use source='tokens')")
    if source in WORD_FILES:
        return random_words(tokenizer, n, B, seed, source=source, return_texts=True)
    return natural_text(tokenizer, n, B, seed, text, return_texts=True)


def text_digest(text: str) -> str:
    """Short SHA-256 of a text (to name a custom natural-text source in the store)."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]
