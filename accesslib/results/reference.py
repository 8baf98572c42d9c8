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


def kuratov_capacity():
    """[K]'s one-vector capacities (largest length with mean accuracy >= 0.99)."""
    return [dict(p) for p in _load()["kuratov_capacity"]]


def sources():
    return dict(_load()["sources"])
