"""Run-time settings read from the environment once, at import.

ACCESSLIB_FAST=1     tiny workloads everywhere (nbval, browser tests, CI)
ACCESSLIB_HOME       where the results store and model caches live (default ~/.cache/accesslib)
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def _flag(name, default="0"):
    return os.environ.get(name, default).strip().lower() in {"1", "true", "yes", "on"}


FAST = _flag("ACCESSLIB_FAST")


def home() -> Path:
    """Per-user directory for caches and the default results store (created on demand)."""
    root = os.environ.get("ACCESSLIB_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "accesslib")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


def data_path(*parts) -> Path:
    """A file or folder shipped in the package's ``data/`` (models, corpus, bundles, word list)."""
    return Path(str(resources.files("accesslib").joinpath("data", *parts)))
