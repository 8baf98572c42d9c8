"""Run-time settings read from the environment once, at import.

ACCESSLIB_FAST=1     tiny workloads everywhere (nbval, browser tests, CI)
ACCESSLIB_HOME       where the results store and model caches live (default ~/.cache/accesslib)
"""
from __future__ import annotations

import os
import platform
import sys
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


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware() -> dict:
    """What a measurement ran on: cpu, cores, torch threads and device, versions, platform.

    torch is described only when it is installed (it is imported here, on demand)."""
    out = dict(cpu=cpu_name(), cores=os.cpu_count(), python=sys.version.split()[0],
               platform=platform.platform())
    try:
        import torch
    except ImportError:
        return out
    out.update(torch_threads=torch.get_num_threads(), torch=torch.__version__,
               device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    return out
