"""Published reference numbers (docs/paper.md, section 6) shipped as package data.

Each record carries its ``source``. These are published figures, never measured here.
"""
from __future__ import annotations

import json
from functools import lru_cache

from accesslib._checks import fail
from accesslib.config import data_path


@lru_cache(maxsize=1)
def _load():
    with data_path("reference.json").open() as f:
        return json.load(f)


def models():
    """The model table of [A]: d, vocab_size, r_inf, min_cos, slope_pg19, slope_random, s_conv, source."""
    return [dict(r) for r in _load()["models"]]


def model(name):
    """One row of :func:`models` by hub name (case-insensitive) or its last path part."""
    key = name.lower()
    for r in models():
        if r["name"].lower() == key or r["name"].split("/")[-1].lower() == key:
            return r
    fail("model", "a model of the published table (" + ", ".join(r["name"] for r in models()) + ")", name)


def n50_points(model_name=None):
    """Published n50 by m (read off [A]'s figures), optionally for one model."""
    pts = [dict(p) for p in _load()["n50_points"]]
    if model_name is not None:
        pts = [p for p in pts if p["model"].lower() == model_name.lower()]
    return pts


#: [A]'s dataset whose slope a target source of this project is set beside, and how alike the
#: targets are (their word list itself; another 100k list; a smaller list; other public-domain text)
COMPARABLE = {"glove100k": ("Random", "the same targets: [A]'s own word list (GloVe's 100k most frequent words)"),
              "words100k": ("Random", "similar targets: random words from another 100k-word list (SCOWL), "
                                      "not [A]'s own (glove100k)"),
              "words": ("Random", "easier targets: random words from a list of 10,901 common words, not [A]'s "
                                  "100k-word list"),
              "natural": ("PG19", "similar targets: public-domain text (the shipped corpus), not PG19 itself")}


def published_match(model_name, source):
    """[A]'s measurement of the model ``model_name`` (hub name or its last part) on the dataset
    comparable with the target ``source``, or None when [A] did not measure that model.

    A dict: ``model`` ([A]'s name), ``dataset`` ("PG19", "Random" or None for uniform random
    tokens, which [A] did not measure), ``slope`` (their fitted tokens per vector), ``points``
    ({m: n50} read off their figure, or None where they published none), ``targets`` (how our
    targets compare with theirs, in words) and ``source`` (the citation)."""
    key = str(model_name).lower()
    row = next((r for r in models() if key in (r["name"].lower(), r["name"].split("/")[-1].lower())), None)
    if row is None:
        return None
    dataset, targets = COMPARABLE.get(source, (None, f"no comparable targets: [A] measured natural text "
                                                     f"(PG19) and random words, not {source}"))
    slope = row.get({"PG19": "slope_pg19", "Random": "slope_random"}[dataset]) if dataset else None
    pts = [p for p in n50_points(row["name"]) if p["dataset"] == dataset] if dataset else []
    return dict(model=row["name"], dataset=dataset, slope=slope, targets=targets, source=row["source"],
                points=dict(zip(pts[0]["m"], pts[0]["n50"])) if pts else None)


def kuratov_capacity():
    """[K]'s one-vector capacities (largest length with mean accuracy >= 0.99)."""
    return [dict(p) for p in _load()["kuratov_capacity"]]


def sources():
    return dict(_load()["sources"])
