"""The shipped tiny models and the shipped corpus (offline defaults, no download).

The package ships a small family of GPT-NeoX (Pythia-architecture) causal LMs trained on this
machine's CPU by ``scripts/train_tiny.py`` on the train split of the King James Bible
(``data/corpus/kjv.txt.gz``, public domain, built by ``scripts/make_corpus.py``). Each model
lives in ``data/models/<name>/`` with ``config.json``, ``model.safetensors`` (fp16),
``tokenizer.json`` (+ ``tokenizer_config.json``, its own byte-level BPE) and ``training.json``
(the training record: losses, time, hardware, exact command).

Names read ``tiny-d{d}-v{|V|}``. :data:`DEFAULT` is the smallest model that still behaves like
a language model (it attends to its context, so memory vectors can steer it).

Beside the transformers, ``tiny-mamba-d{d}-v{|V|}`` is a state-space model (``MambaForCausalLM``,
transformers' pure-torch path) trained by the same script with ``--arch mamba`` on the same
corpus, tokenizer, context, batch, step budget and seed as its transformer twin
``tiny-d{d}-v{|V|}`` (notebook 09). :func:`family` tells them apart; ``names(family=...)``
lists one kind only.

This module imports no torch: it only finds files and reads text/json.

    >>> from accesslib import embedded
    >>> embedded.resolve(embedded.DEFAULT)      # doctest: +SKIP
    PosixPath('.../accesslib/data/models/tiny-d32-v257')
"""
from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

from accesslib._checks import check_choice
from accesslib.config import data_path

DEFAULT = "tiny-d32-v257"
"""Name of the default embedded model (the smallest of the family)."""

SPLITS = ("train", "heldout")
HELDOUT_EVERY = 20
"""Chapter k (0-based, canonical order) is held out when k % HELDOUT_EVERY == HELDOUT_EVERY - 1."""

FAMILIES = ("gpt_neox", "mamba")
"""The kinds of shipped models (config ``model_type``): transformers and the state-space twin."""

_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "training.json")


def _data_dir() -> Path:
    return data_path()


def models_dir() -> Path:
    """Directory holding one sub-directory per shipped model."""
    return _data_dir() / "models"


def _is_model_dir(p: Path) -> bool:
    return p.is_dir() and all((p / f).is_file() for f in _REQUIRED)


def names(family: str | None = None) -> list[str]:
    """Names of the shipped models, ordered by width d, then vocabulary size |V|; with
    ``family`` ("gpt_neox" or "mamba", a config's ``model_type``) only the models of that kind."""
    root = models_dir()
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _is_model_dir(p)]
    if family is not None:
        check_choice("family", family, FAMILIES)
        found = [p for p in found if _model_type(p) == family]

    def key(p: Path):
        cfg = json.loads((p / "config.json").read_text())
        return (cfg.get("hidden_size", 0), cfg.get("vocab_size", 0), p.name)

    return [p.name for p in sorted(found, key=key)]


def _model_type(p: Path) -> str:
    return json.loads((p / "config.json").read_text()).get("model_type", "")


def family(name: str) -> str:
    """Kind of a shipped model: its config's ``model_type`` ("gpt_neox" or "mamba")."""
    p = resolve(name)
    if p is None:
        check_choice("name", name, names())   # raises: name is not a shipped model
    return _model_type(p)


def resolve(name: str) -> Path | None:
    """Directory of the shipped model ``name`` (loadable with ``from_pretrained``), or None."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    p = models_dir() / name
    return p if _is_model_dir(p) else None


def info(name: str) -> dict:
    """Training record of a shipped model (``training.json``): losses, bits per byte, time,
    hardware, versions and the exact command that reproduces it."""
    p = resolve(name)
    if p is None:
        check_choice("name", name, names())   # raises: name is not a shipped model
    return json.loads((p / "training.json").read_text())


def corpus_path() -> Path:
    """Path of the shipped corpus file (gzip, plain text)."""
    return _data_dir() / "corpus" / "kjv.txt.gz"


@lru_cache(maxsize=1)
def corpus_text() -> str:
    """The whole shipped corpus: the King James Bible, one verse per line, chapters separated
    by a blank line (see ``data/corpus/README.md`` for source and licence)."""
    with gzip.open(corpus_path(), "rt", encoding="utf-8") as f:
        return f.read()


def corpus_chapters() -> list[str]:
    """The corpus as a list of chapters (1189 of them, canonical order)."""
    return [c.strip("\n") for c in corpus_text().split("\n\n") if c.strip()]


def is_heldout_chapter(k: int) -> bool:
    """Whether chapter index k (0-based) belongs to the held-out split (every 20th chapter)."""
    return k % HELDOUT_EVERY == HELDOUT_EVERY - 1


@lru_cache(maxsize=2)
def corpus_split(part: str) -> str:
    """One split of the corpus: ``"train"`` (about 95%, used to train tokenizers and models) or
    ``"heldout"`` (every 20th chapter, about 5%: natural-text targets and held-out losses).

    Chapters keep their blank-line separation, so ``split("\\n\\n")`` recovers them."""
    check_choice("part", part, SPLITS)
    want = part == "heldout"
    return "\n\n".join(c for k, c in enumerate(corpus_chapters()) if is_heldout_chapter(k) == want) + "\n"


def training_table(models: list[str] | None = None) -> str:
    """Markdown table of the shipped models' training records (``training.json``): size,
    steps, training time, final train / held-out loss (nats/token) against ln|V|, held-out bits
    per byte, and the command that reproduces each model."""
    rows = ["| model | d | \\|V\\| | layers | params | steps | train time | train loss | held-out loss "
            "| ln\\|V\\| | held-out bits/byte | command |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in models if models is not None else names():
        r = info(name)
        rows.append(f"| {name} | {r['d']} | {r['vocab_size']} | {r['layers']} | {r['n_params']:,} "
                    f"| {r['steps']} | {r['train_time_s'] / 60:.1f} min | {r['train_loss']:.3f} "
                    f"| {r['heldout_loss']:.3f} | {r['ln_vocab']:.3f} | {r['heldout_bpb']:.3f} "
                    f"| `{r['command']}` |")
    return "\n".join(rows) + "\n"
