"""Run-time settings read from the environment once, at import, and where files live.

ACCESSLIB_FAST=1     tiny workloads everywhere (nbval, browser tests, CI)
ACCESSLIB_HOME       one folder for the results store and the model caches (overrides both
                     defaults below)

Without ACCESSLIB_HOME:

- the results store (measurements that took hours) lives in the user data directory,
  ``platformdirs.user_data_dir("accesslib")`` (``~/.local/share/accesslib`` on Linux,
  ``~/Library/Application Support/accesslib`` on macOS, ``%LOCALAPPDATA%\\accesslib`` on
  Windows): :func:`data_home`. It used to live in the cache folder, which users and cleaning
  tools delete; :func:`legacy_store_dirs` names the old places, from which
  ``accesslib.results.store.default_path`` moves a store once.
- model caches (dequantised GGUF files, cheap to remake) stay in the user cache directory,
  ``$XDG_CACHE_HOME/accesslib`` or ``~/.cache/accesslib``: :func:`home`.

Standard library only, plus platformdirs.
"""
from __future__ import annotations

import functools
import os
import platform
import sys
from importlib import resources
from pathlib import Path


def _flag(name, default="0"):
    return os.environ.get(name, default).strip().lower() in {"1", "true", "yes", "on"}


FAST = _flag("ACCESSLIB_FAST")


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                "accesslib")


def home() -> Path:
    """Per-user folder for caches (dequantised model files; created on demand):
    ``ACCESSLIB_HOME``, else ``$XDG_CACHE_HOME/accesslib`` or ``~/.cache/accesslib``."""
    p = Path(os.environ.get("ACCESSLIB_HOME") or _cache_root())
    p.mkdir(parents=True, exist_ok=True)
    return p


def data_home() -> Path:
    """Per-user folder for data worth keeping, the default results store (created on demand):
    ``ACCESSLIB_HOME``, else ``platformdirs.user_data_dir("accesslib")``."""
    root = os.environ.get("ACCESSLIB_HOME")
    if not root:
        import platformdirs

        root = platformdirs.user_data_dir("accesslib", appauthor=False)
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


def legacy_store_dirs() -> list[Path]:
    """Where earlier versions kept the results store (the cache folders: ``$XDG_CACHE_HOME/
    accesslib`` and ``~/.cache/accesslib``); none when ``ACCESSLIB_HOME`` is set (it was, and
    still is, the store's folder)."""
    if os.environ.get("ACCESSLIB_HOME"):
        return []
    out = []
    for p in (_cache_root(), Path(os.path.expanduser("~"), ".cache", "accesslib")):
        if p not in out:
            out.append(p)
    return out


# --- network filesystems: SQLite's file locking is unreliable there ----------------------------
#: mount types on which SQLite's locks (and WAL's shared memory) cannot be trusted
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "fuse.ceph",
    "fuse.cephfs", "glusterfs", "fuse.glusterfs", "lustre", "gpfs", "beegfs", "fuse.sshfs", "sshfs",
    "fuse.s3fs", "fuse.rclone", "fuse.gcsfuse", "fuse.juicefs", "davfs", "fuse.davfs2", "fuse.gvfsd-fuse",
})

#: the mount table read by :func:`read_mounts` (tests point it elsewhere)
MOUNTS_FILE = "/proc/mounts"


def _unescape_mount(field: str) -> str:
    r"""/proc/mounts writes a space as \040, a tab as \011, a backslash as \134."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 3 < len(field) and all(ch in "01234567" for ch in field[i + 1:i + 4]):
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_mounts(path: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """(mount point, filesystem type) of every mount in the mount table (``/proc/mounts``);
    an empty list where there is none (macOS, Windows) or it cannot be read."""
    try:
        with open(path or MOUNTS_FILE, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            out.append((_unescape_mount(parts[1]), parts[2]))
    return out


def filesystem_type(path: str | os.PathLike, mounts: list[tuple[str, str]] | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (the longest mount point above it; the path
    need not exist yet), or None when the mount table is unknown."""
    mounts = read_mounts() if mounts is None else mounts
    if not mounts:
        return None
    p = os.path.realpath(os.path.abspath(os.fspath(path)))
    best, kind = -1, None
    for point, fstype in mounts:   # later mounts hide earlier ones on the same point
        point = point.rstrip("/") or "/"
        if p == point or p.startswith(point if point == "/" else point + "/"):
            if len(point) >= best:
                best, kind = len(point), fstype
    return kind


def network_filesystem(path: str | os.PathLike, mounts: list[tuple[str, str]] | None = None) -> str | None:
    """The network filesystem type (nfs4, cifs, fuse.sshfs, ...) that holds ``path``, or None
    when it is on a local disk (or the mount table is unknown)."""
    kind = filesystem_type(path, mounts)
    if kind is None:
        return None
    k = kind.lower()
    return kind if k in NETWORK_FILESYSTEMS or k.startswith(("nfs", "smb")) else None


def data_path(*parts) -> Path:
    """A file or folder shipped in the package's ``data/`` (models, corpus, bundles, word list)."""
    return Path(str(resources.files("accesslib").joinpath("data", *parts)))


@functools.cache
def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where there is one; read once)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def cpu_id() -> str | None:
    """The processor's family, model and stepping ("family 25 model 1 stepping 1", from
    /proc/cpuinfo; None where there is none): model names such as "AMD EPYC" name several
    generations, whose kernels sum floats in other orders."""
    want = {"cpu family": "family", "model": "model", "stepping": "stepping"}
    got: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in want and key not in got:
                    got[key] = value.strip()
                if len(got) == len(want) or not line.strip():
                    break
    except OSError:
        return None
    return " ".join(f"{word} {got[key]}" for key, word in want.items() if key in got) or None


def hardware() -> dict:
    """What a measurement ran on: cpu, cores, torch threads and device, versions, platform.

    torch is described only when it is installed (it is imported here, on demand)."""
    out = dict(cpu=cpu_name(), cpu_id=cpu_id(), cores=os.cpu_count(), python=sys.version.split()[0],
               platform=platform.platform())
    try:
        import torch
    except ImportError:
        return out
    out.update(torch_threads=torch.get_num_threads(), torch=str(torch.__version__), kernels=cpu_kernels(),
               device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    return out


def cpu_kernels() -> str | None:
    """The CPU kernels torch dispatches to ("AVX2", "AVX512", "DEFAULT"; None without torch or where
    torch does not say): another set sums floats in another order."""
    try:
        import torch
        return str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError):
        return None
