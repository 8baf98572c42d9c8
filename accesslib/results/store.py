"""The results store: one SQLite row per crammed string, written the moment it finishes.

Why SQLite (stdlib ``sqlite3``) in WAL mode: a cramming sweep runs for hours or days and may be
killed at any moment (Ctrl-C, a lost Dask worker, a pre-empted GPU job). Each finished string
is committed on its own (one ``INSERT OR IGNORE`` in autocommit mode is one transaction), so
a kill loses at most the strings still being optimised. The row is keyed uniquely by

    (model, m, n, source, target_hash, seed, protocol_hash)

so a restarted run asks :meth:`ResultsStore.has` / :meth:`ResultsStore.done_keys` what is
finished, crams only the rest, and a string that two processes both finish is stored once.

Concurrency: several processes (Dask workers on one host, parallel notebooks) may write to the
same file. Every process opens its own connection (lazily, per process and per thread, so a
store object can be pickled to a worker) and closes them all before it forks (SQLite
connections must not cross a ``fork()``: see :class:`_Handle`); WAL lets readers run while
one writer commits, and the busy timeout makes a writer wait for the lock instead of
failing. WAL needs all writers on one host (a local disk, not NFS): on a multi-host cluster
let the workers return rows and the client write them.

Where it lives: ``--store PATH`` / ``ResultsStore(path)``, else :func:`default_path`, in the
user data directory (``accesslib.config.data_home``; ``ACCESSLIB_HOME`` overrides it). Earlier
versions kept it in the cache folder (``~/.cache/accesslib``), which users and cleaning tools
delete; :func:`default_path` moves a store found there once, without losing a row
(:func:`migrate_store`). A store on a network filesystem gets a one-line warning: SQLite's
locking is unsafe there.

Getting results out: :meth:`ResultsStore.rows` (dicts), :meth:`ResultsStore.to_csv` (standard
library), :meth:`ResultsStore.to_pandas` and :meth:`ResultsStore.to_parquet` (pandas and
pyarrow, imported when called), :meth:`ResultsStore.summary` (one row per curve with its n50
fit); the command line is ``accesslib store export | summary | merge``.

Reading someone else's results: ``ResultsStore(path, readonly=True)`` opens an existing store
without changing a byte of it (no WAL switch, no schema upgrade, no folder created), also a
read-only file or one on a read-only disk; the ``accesslib store`` commands that only read
(summary, export, ladder, map, compare, pace, backup) open it so. A store of an older layout
(without the columns and tables added since) is read through an upgraded temporary copy.

Only numpy and the stdlib are imported here (pandas, pyarrow and scipy when a method needs
them): memory vectors are stored as float32 bytes and given back as numpy arrays.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import socket
import sqlite3
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from accesslib import config
from accesslib._checks import check_choice, check_float, fail

__all__ = ["ResultsStore", "StoreError", "KEY_COLUMNS", "EXPORT_COLUMNS", "protocol_hash", "target_hash", "inflight_key", "default_path",
           "migrate_store", "backup_store", "kept_pace", "read_inflight", "STORE_NAME"]

SCHEMA_VERSION = 1


class StoreError(ValueError):
    """A results store file that cannot be used, in one line naming the file and the cause:
    ``results store PATH: <cause>`` (not writable, not an accesslib results store, corrupt,
    another schema version, disk full, ...). A ValueError, so the command line prints it as one
    line with exit status 2. A file that is refused at opening is left exactly as it was."""

    def __init__(self, path, cause: str):
        self.path, self.cause = Path(path), cause
        super().__init__(f"results store {path}: {cause}")


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _sqlite_cause(e: BaseException) -> str:
    """What is wrong, in a few words, from a sqlite3 error (its code, else its message)."""
    name = getattr(e, "sqlite_errorname", "") or ""
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    low = msg.lower()
    if name.startswith("SQLITE_FULL") or "disk is full" in low:
        return f"disk full (SQLite: {msg})"
    if name.startswith("SQLITE_READONLY") or "readonly database" in low:
        return f"not writable (SQLite: {msg})"
    if name.startswith("SQLITE_NOTADB") or "not a database" in low:
        return "not an accesslib results store (not a SQLite database)"
    if name.startswith("SQLITE_CORRUPT") or "malformed" in low:
        return f"corrupt (SQLite: {msg})"
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in low:
        return f"cannot be opened (SQLite: {msg})"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in low:
        return f"locked by another process (SQLite: {msg})"
    if name.startswith("SQLITE_IOERR") or "i/o error" in low:
        return f"disk I/O error (SQLite: {msg})"
    return f"SQLite error: {msg}"


def _uri(path: Path, **params) -> str:
    """A SQLite ``file:`` URI of ``path`` (absolute, percent-quoted) with query ``params``."""
    from urllib.parse import quote

    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(Path(path).absolute()))}" + (f"?{query}" if query else "")


def _read_uri(path: Path, header: bytes | None = None) -> str:
    """A URI that reads ``path`` without creating a file: ``mode=ro``, or ``immutable=1`` for a
    WAL database with no ``-wal`` file (all of it is in the file, and a read-only connection to
    a WAL database would create ``-wal`` and ``-shm`` files)."""
    if header is None:
        with open(path, "rb") as f:
            header = f.read(100)
    wal = len(header) >= 20 and header[18] == 2 and header[19] == 2
    return _uri(path, **({"immutable": 1} if wal and not Path(f"{path}-wal").exists() else {"mode": "ro"}))


def _inspect(path: Path, timeout: float = 60.0) -> str:
    """Look at ``path`` without changing it: "new" (absent, empty, or a SQLite database without
    tables) or "ours" (an accesslib results store of this schema version); raises
    :class:`StoreError` otherwise. Opened read-only (``mode=ro``; ``immutable=1`` for a WAL
    database with no ``-wal`` file, so that not even a ``-shm`` file is created)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "new"
    except OSError as e:
        raise StoreError(path, f"cannot be read ({e.strerror or e})") from None
    import stat as stat_

    if stat_.S_ISDIR(st.st_mode):
        raise StoreError(path, "a directory, not a file")
    if not stat_.S_ISREG(st.st_mode):
        raise StoreError(path, "not a regular file (a device, pipe or socket cannot hold a results store)")
    if st.st_size == 0:
        return "new"
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as e:
        raise StoreError(path, f"cannot be read ({e.strerror or e})") from None
    if not header.startswith(_SQLITE_MAGIC):
        raise StoreError(path, "not an accesslib results store (not a SQLite database)")
    if len(header) < 100:
        raise StoreError(path, "corrupt (shorter than a SQLite header)")
    try:
        conn = sqlite3.connect(_read_uri(path, header), uri=True, timeout=timeout)
    except sqlite3.Error as e:
        raise StoreError(path, _sqlite_cause(e)) from None
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        if not tables:
            return "new"
        if "meta" not in tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreError(path, f"not an accesslib results store (a SQLite database of another program: "
                                   f"tables {shown}, no accesslib 'meta' table)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            raise StoreError(path, "not an accesslib results store (its 'meta' table has no schema_version)")
        if str(row[0]) != str(SCHEMA_VERSION):
            raise StoreError(path, f"another schema version ({row[0]}; this accesslib reads version "
                                   f"{SCHEMA_VERSION})")
        missing = {"strings", "protocols"} - set(tables)
        if missing:
            raise StoreError(path, f"not an accesslib results store (no {', '.join(sorted(missing))} table)")
        wrong = _quick_check(path, timeout, conn)   # the first read through this connection
    except sqlite3.Error as e:
        raise StoreError(path, _sqlite_cause(e)) from None
    finally:
        conn.close()
    if wrong is None:
        return "ours"
    # "corrupt" only when every one of a few reads says so: a read racing other processes' writes
    # has been seen to fail once (a test, four processes opening one store under heavy load; 160
    # more runs did not repeat it); a damaged file fails every time
    for attempt in range(1, _CHECK_READS):
        time.sleep(0.1 * attempt)
        wrong = _quick_check(path, timeout)
        if wrong is None:
            return "ours"
    raise StoreError(path, wrong)


#: how many reads :func:`_inspect` makes of a file before it calls it corrupt
_CHECK_READS = 3


def _quick_check(path: Path, timeout: float, conn: sqlite3.Connection | None = None) -> str | None:
    """SQLite's quick_check of ``path``, read as :func:`_inspect` reads it (through ``conn``, left
    open, when given): None when it passes, else what is wrong in :class:`StoreError`'s words
    ("corrupt (SQLite: ...)")."""
    own = conn is None
    try:
        if own:
            conn = sqlite3.connect(_read_uri(path), uri=True, timeout=timeout)
        check = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        return None if check == "ok" else f"corrupt (SQLite: {check})"
    except sqlite3.Error as e:
        return _sqlite_cause(e)
    finally:
        if own and conn is not None:
            conn.close()


def _check_writable(path: Path):
    """StoreError unless ``path`` (and its folder, for the -wal and -shm files) may be written.
    A file without any write permission bit counts as read-only even for root, who may write it
    anyway: its owner made it read-only on purpose."""
    folder = path.parent
    if path.exists():
        st = os.stat(path)
        if not os.access(path, os.W_OK) or not st.st_mode & 0o222:
            raise StoreError(path, f"not writable (read-only file, mode {st.st_mode & 0o777:04o})")
    if not os.access(folder, os.W_OK):
        raise StoreError(path, f"not writable (the folder {folder} is read-only)")

#: The columns that identify one crammed string (the table's unique key).
KEY_COLUMNS = ("model", "m", "n", "source", "target_hash", "seed", "protocol_hash")

# (name, SQL type) of every column after the key; json columns hold lists/dicts.
_COLUMNS = (
    ("sample", "INTEGER"),            # index of the string within its (n, seed) batch
    ("success", "INTEGER NOT NULL"),  # greedy generation reproduces the target exactly
    ("tf_success", "INTEGER"),        # teacher-forced all-argmax
    ("steps", "INTEGER"),
    ("final_loss", "REAL"),
    ("token_accuracy", "REAL"),
    ("greedy_accuracy", "REAL"),
    ("target_text", "TEXT"),
    ("target_ids", "TEXT"),           # json list[int]
    ("greedy_ids", "TEXT"),           # json list[int]
    ("memory", "BLOB"),               # float32 bytes, C order, shape memory_shape
    ("memory_shape", "TEXT"),         # json [m, d]
    ("prefix_ids", "TEXT"),           # json list[int]
    ("first_token_as_input", "INTEGER"),
    ("wall_time", "REAL"),            # seconds of the cram call that finished this string
    ("created_at", "TEXT"),           # ISO 8601 UTC
    ("host", "TEXT"),
    ("reason", "TEXT"),               # why the optimisation stopped (None on success)
    ("run_id", "TEXT"),
    ("accuracy_history", "TEXT"),     # json [[step, accuracy], ...]: where the best teacher-forced
                                      # accuracy rose (StringResult.accuracy_history; added later)
    ("ran_on", "TEXT"),               # json [{"from": step, "cpu", "cpu_id", "kernels", "threads", "torch",
                                      # "device", "transformers", "engine"}, ...]:
                                      # what its steps ran on (StringResult.ran_on; added later)
)
_JSON_COLUMNS = {"target_ids", "greedy_ids", "memory_shape", "prefix_ids", "accuracy_history", "ran_on"}
#: columns added to the strings table after schema 1 shipped: an older file gains them when opened
_ADDED_COLUMNS = ("accuracy_history", "ran_on")
_BOOL_COLUMNS = {"success", "tf_success", "first_token_as_input"}
ALL_COLUMNS = KEY_COLUMNS + tuple(name for name, _ in _COLUMNS)
#: what an export holds by default: the row id and every column but the memory vectors
EXPORT_COLUMNS = ("id",) + tuple(c for c in ALL_COLUMNS if c != "memory")
#: the default store's file name (in ``accesslib.config.data_home()``)
STORE_NAME = "results.sqlite"


def canonical(obj: Any) -> Any:
    """Make settings json-stable: tuples -> lists, numpy scalars -> python, dict keys sorted."""
    if isinstance(obj, Mapping):
        return {str(k): canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def protocol_hash(settings: Mapping[str, Any]) -> str:
    """A short stable hash (16 hex digits of SHA-256) of a dict of cramming settings.

    Key order, tuples vs lists and numpy scalars do not change the hash; any changed value does.
    The hash of a protocol name and overrides (what the experiments and the apps key rows by) is
    ``accesslib.experiments.curves.protocol_hash_for``, which calls this.
    """
    if not isinstance(settings, Mapping):
        fail("settings", "a dict of cramming settings", settings)
    text = json.dumps(canonical(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def target_hash(ids: Iterable[int]) -> str:
    """16 hex digits of SHA-256 of the comma-joined token ids of a target string."""
    text = ",".join(str(int(i)) for i in ids)
    if not text:
        fail("target ids", "a non-empty list of token ids", [])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _require_key(key: Mapping[str, Any]) -> None:
    """Refuse, in words, a key that lacks one of the :data:`KEY_COLUMNS`."""
    missing = [c for c in KEY_COLUMNS if key.get(c) is None]
    if missing:
        fail("key", f"a mapping of every key column ({', '.join(KEY_COLUMNS)}); missing {missing}", dict(key))


def describe_ran_on(ran_on: list | None) -> str:
    """A string's ``ran_on`` (StringResult.ran_on) in words: see :meth:`ResultsStore.environments`."""
    if not ran_on:
        return "not recorded"

    def one(e):
        threads = e.get("threads")
        which = ", ".join(str(x) for x in (e.get("cpu_id"), e.get("kernels")) if x)
        cpu = None if e.get("cpu") is None else e["cpu"] + (f" ({which})" if which else "")
        parts = [cpu, None if threads is None else f"{threads} thread{'s' if threads != 1 else ''}",
                 None if e.get("torch") is None else f"torch {e['torch']}", e.get("device"),
                 None if e.get("transformers") is None else f"transformers {e['transformers']}",
                 None if e.get("engine") is None else f"engine {e['engine']}"]
        return ", ".join(str(x) for x in parts if x is not None) or "?"

    text = "; then ".join(one(e) for e in ran_on)
    return text if ran_on[0]["from"] == 0 else f"not recorded at first; then {text}"


def inflight_key(key: Mapping[str, Any]) -> str:
    """The name under which a string still being crammed keeps its state (:meth:`ResultsStore.save_inflight`):
    SHA-256 of its key (the :data:`KEY_COLUMNS`, as a row of the store has them), so that a kept
    state names the very string it belongs to."""
    _require_key(key)
    canon = {c: (int(key[c]) if c in ("m", "n", "seed") else str(key[c])) for c in KEY_COLUMNS}
    return hashlib.sha256(repr(sorted(canon.items())).encode()).hexdigest()


# --- where the store lives ---------------------------------------------------------------------
_NOTICED: set = set()


def _notice(key, message: str):
    """One line on stderr, once per process per ``key`` (a notice, not an error)."""
    if key in _NOTICED:
        return
    _NOTICED.add(key)
    print(f"accesslib: {message}", file=sys.stderr, flush=True)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def default_path(name: str = STORE_NAME) -> Path:
    """The default store, ``accesslib.config.data_home()/results.sqlite`` (``name``: another
    store file in the same folder, e.g. the notebook sweep's ``sweeps.sqlite``).

    A store that an earlier version left at the old place (``$XDG_CACHE_HOME/accesslib`` or
    ``~/.cache/accesslib``) is moved here the first time (:func:`migrate_store`, with a one-line
    notice) when there is none here yet; when both exist this one is used and a one-line warning
    names the old one (``accesslib store merge OLD`` copies its rows). ``ACCESSLIB_HOME`` set:
    that folder, and nothing is moved.
    """
    new = config.data_home() / name
    for old_dir in config.legacy_store_dirs():
        old = old_dir / name
        if not old.is_file() or _same_file(old, new):
            continue
        if new.exists():
            _notice(("both", str(old)), f"an older results store is still at {old} and is not used (results "
                    f"are kept in {new} now): `accesslib store merge {old}` copies its rows, then delete it")
            continue
        try:
            n = migrate_store(old, new)
        except (OSError, sqlite3.Error, RuntimeError) as e:
            _notice(("failed", str(old)), f"could not move the results store from {old} to {new} "
                    f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); it stays where it is")
            continue
        if n is not None:
            _notice(("moved", str(old)), f"moved the results store ({n} strings) from {old} to {new}: the "
                    "cache folder is for files that may be deleted")
    return new


def _table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in names}


def _consistent_copy(old: Path, tmp: Path, timeout: float) -> dict[str, int]:
    """Copy the store ``old`` into the new file ``tmp`` as one self-contained file (the rows still
    in ``old``'s ``-wal`` file included) while writers may be running; returns the row count per
    table. A write lock on ``old`` keeps every writer from committing between the copy and the
    count; the copy must pass ``PRAGMA integrity_check`` and hold as many rows as ``old``."""
    # one connection holds the write lock; a second one reads the copy (backup cannot read
    # through a writing connection)
    lock = sqlite3.connect(str(old), timeout=timeout, isolation_level=None)
    try:
        lock.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        lock.execute("BEGIN IMMEDIATE")
        try:
            want = _table_counts(lock)
            src = sqlite3.connect(str(old), timeout=timeout)
            dst = sqlite3.connect(str(tmp))
            try:
                src.backup(dst)
                dst.execute("PRAGMA journal_mode = DELETE")   # one self-contained file
                got = _table_counts(dst)
                check = dst.execute("PRAGMA integrity_check").fetchone()[0]
            finally:
                dst.close()
                src.close()
        finally:
            lock.execute("ROLLBACK")
    finally:
        lock.close()
    if check != "ok" or got != want:
        raise RuntimeError(f"the copy of {old} does not match it ({got} rows vs {want}; "
                           f"integrity check: {check})")
    return want


def backup_store(src: str | os.PathLike, dest: str | os.PathLike, *, timeout: float = 60.0) -> tuple[int, int]:
    """Write a consistent copy of the store ``src`` to ``dest`` (replaced if it exists) while
    cramming may still be writing to ``src``; returns how many finished strings and saved states
    of unfinished strings it holds.

    The copy is one file that holds everything a resumed run needs (finished strings and the
    saved state of unfinished ones): copied back under any name and given as ``--store``, the
    run resumes where the copy was taken. It is written next to ``dest`` first and takes its
    name only once checked, so an interrupted backup leaves ``dest`` as it was.
    """
    src, dest = Path(src), Path(dest)
    if not src.is_file():
        fail("src", "an existing results store file", str(src))
    if dest.exists() and _same_file(src, dest):
        fail("dest", "a file other than the store itself", str(dest))
    if dest.is_dir():
        fail("dest", "a file name, not a folder", str(dest))
    if _inspect(src, timeout) != "ours":   # another file: one line naming it, as ResultsStore says
        raise StoreError(src, "holds no results yet (an empty database): nothing to back up")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.backup-{os.getpid()}-{threading.get_ident()}")
    try:
        want = _consistent_copy(src, tmp, timeout)
        os.replace(tmp, dest)
    finally:
        for p in (tmp, Path(f"{tmp}-journal")):
            if p.exists():
                p.unlink()
    return int(want.get("strings", 0)), int(want.get("inflight", 0))


def migrate_store(old: str | os.PathLike, new: str | os.PathLike, *, timeout: float = 60.0) -> int | None:
    """Move the store at ``old`` to ``new`` without losing a row; returns the number of strings
    moved, or None when ``new`` appeared meanwhile (another process moved it; nothing changed).

    SQLite's backup API copies a consistent snapshot of ``old`` (the rows still in its ``-wal``
    file included) into a temporary file next to ``new``, under a write lock on ``old`` so no
    writer commits meanwhile; the copy must pass ``PRAGMA integrity_check`` and hold as many rows
    in every table as ``old``. Only then does it take the name ``new`` (a hard link, which fails
    instead of replacing a file that another process put there) and are ``old`` and its
    ``-wal`` / ``-shm`` files deleted. Any failure leaves ``old`` as it was.
    """
    old, new = Path(old), Path(new)
    if not old.is_file():
        fail("old", "an existing results store file", str(old))
    if new.exists():
        return None
    new.parent.mkdir(parents=True, exist_ok=True)
    tmp = new.with_name(f".{new.name}.moving-{os.getpid()}-{threading.get_ident()}")
    try:
        want = _consistent_copy(old, tmp, timeout)
        try:
            os.link(tmp, new)         # never replaces a store that appeared meanwhile
        except FileExistsError:
            return None
        except OSError:               # no hard links on this filesystem
            if new.exists():
                return None
            os.replace(tmp, new)
    finally:
        for p in (tmp, Path(f"{tmp}-journal")):
            if p.exists():
                p.unlink()
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(old) + suffix)
        try:
            if p.exists():
                p.unlink()
        except OSError:   # still open elsewhere (Windows): the copy is in place; the next
            pass          # default_path() says that the old file is still there
    return int(want.get("strings", 0))


def _warn_if_network(path: Path):
    kind = config.network_filesystem(path.parent)
    if kind:
        _notice(("network", str(path.parent)),
                f"the results store {path} is on a network filesystem ({kind}): SQLite's locking is unsafe "
                "there and concurrent writers can corrupt it; use a local disk (--store PATH or "
                "ACCESSLIB_HOME), or let one process write (sweep --write client)")


class _Handle:
    """One SQLite connection of one store in one thread of one process.

    SQLite must not carry an open connection across ``fork()``: the child inherits the
    parent's record of which file locks it holds (POSIX locks are not inherited), so a
    connection the child then opens to the same file believes it holds locks it does not,
    and concurrent writers overwrite each other's commits (seen: 37 of 120 rows kept by 4
    forked writers). So every handle registers here; before a fork the process closes them
    all (each waits for its statement to finish), and they reopen lazily on next use.
    A handle also closes its connection when it is freed: ``sqlite3.Connection`` sits in a
    reference cycle, so without this a dropped store kept its file open until the next
    garbage collection.
    """

    __slots__ = ("path", "timeout", "readonly", "pid", "lock", "conn", "__weakref__")

    def __init__(self, path: Path, timeout: float, readonly: bool = False):
        self.path, self.timeout, self.readonly, self.pid = path, timeout, readonly, os.getpid()
        self.lock = threading.Lock()
        self.conn: sqlite3.Connection | None = None
        with _HANDLES_LOCK:
            _HANDLES.add(self)

    def open(self):
        # isolation_level=None: autocommit, so one INSERT is one committed transaction.
        # check_same_thread=False only so a fork hook or finaliser in another thread may close it.
        uri = _read_uri(self.path) if self.readonly else _uri(self.path)
        conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints in WAL mode
        self.conn = conn

    def close(self):
        with self.lock:
            self._close_held()

    def _close_held(self):
        if self.conn is not None and self.pid == os.getpid():
            self.conn.close()
        self.conn = None  # a connection inherited from a parent is dropped, never closed here

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


_HANDLES: "weakref.WeakSet[_Handle]" = weakref.WeakSet()
_HANDLES_LOCK = threading.Lock()
_HELD: list = []


def _before_fork():
    _HANDLES_LOCK.acquire()  # no handle is created during the fork
    for h in sorted(_HANDLES, key=id):
        h.lock.acquire()     # waits for a statement in flight in another thread
        _HELD.append(h)
        h._close_held()


def _after_fork():
    # release every lock before dropping the references: in the child, a handle whose thread
    # did not survive the fork is freed here, and its __del__ takes its own lock
    for h in _HELD:
        h.lock.release()
    _HELD.clear()
    _HANDLES_LOCK.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)


class ResultsStore:
    """A SQLite results store, safe to share between threads and processes on one host.

    ``readonly=True`` reads an existing store without changing a byte of it (also a read-only
    file) and refuses every write with a :class:`StoreError`; otherwise the file and its folder
    are made when absent, and an older layout is upgraded in place.

    >>> store = ResultsStore("results.sqlite")            # doctest: +SKIP
    >>> store.add(dict(model="tiny", m=1, n=10, source="natural", target_ids=[5, 6],
    ...                seed=0, protocol_hash="abc", success=True))   # doctest: +SKIP
    True
    """

    def __init__(self, path: str | os.PathLike | None = None, *, timeout: float = 60.0, readonly: bool = False):
        check_float("timeout", timeout, 0, low_open=True)   # seconds a writer waits for the lock
        self.path = Path(path) if path is not None else default_path()
        self.readonly = bool(readonly)
        if self.path.is_dir():
            fail("path", "a file, not a directory", str(self.path))
        if not self.readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(self.path, f"not writable (cannot create the folder {self.path.parent}: "
                                            f"{e.strerror or e})") from None
        _warn_if_network(self.path)
        self.timeout = float(timeout)
        self._read_path = self.path   # the file read (a read-only store of an older layout: an upgraded copy)
        self._local = threading.local()
        self._runs_lock = threading.Lock()
        self._runs_cache: tuple[int, dict] = (0, {})
        self._init_schema()

    # --- connections -------------------------------------------------------------------
    def __getstate__(self):  # picklable for Dask/multiprocessing: connections are per process
        return {"path": self.path, "timeout": self.timeout, "readonly": self.readonly,
                "read_path": self._read_path}

    def __setstate__(self, state):
        self.path, self.timeout = state["path"], state["timeout"]
        self.readonly = state.get("readonly", False)
        self._read_path = state.get("read_path", self.path)
        self._local = threading.local()
        self._runs_lock = threading.Lock()
        self._runs_cache = (0, {})

    def __repr__(self):
        return f"ResultsStore({str(self.path)!r}{', readonly=True' if self.readonly else ''})"

    def _handle(self) -> "_Handle":
        h = getattr(self._local, "handle", None)
        if h is None or h.pid != os.getpid():
            h = self._local.handle = _Handle(self._read_path, self.timeout, self.readonly)
        return h

    def _writing(self, what: str):
        """StoreError unless this store may be written (it was not opened with readonly=True)."""
        if self.readonly:
            raise StoreError(self.path, f"opened read-only (readonly=True): cannot {what}")

    @contextmanager
    def _connection(self):
        """This thread's connection, held (so a fork waits for the statement to finish). A
        SQLite error inside comes out as a one-line :class:`StoreError` naming the file."""
        h = self._handle()
        with h.lock:
            try:
                if h.conn is None:
                    h.open()
                yield h.conn
            except sqlite3.Error as e:
                raise StoreError(self.path, _sqlite_cause(e)) from e

    def close(self):
        """Close this thread's connection (others close when their thread ends or the store is freed)."""
        h = getattr(self._local, "handle", None)
        if h is not None:
            h.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _init_schema(self):
        """Refuse a file that is not ours before writing a byte (:func:`_inspect` reads it
        read-only), then switch on WAL mode and create the tables of a new store."""
        state = _inspect(self.path, self.timeout)
        if self.readonly:
            return self._open_readonly(state)
        _check_writable(self.path)
        with self._connection() as conn:
            # several processes may create the same file at once
            mode = self._retry_locked(conn, "PRAGMA journal_mode = WAL", "switch on WAL mode").fetchone()[0]
            self.journal_mode = mode
            if state == "new":
                self._create_tables(conn)
            version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if version is None or str(version[0]) != str(SCHEMA_VERSION):
                raise StoreError(self.path, f"another schema version ({version[0] if version else None}; "
                                            f"this accesslib reads version {SCHEMA_VERSION})")
            # strings still being crammed (added after schema 1 shipped: older files gain it here;
            # a reader that does not know it ignores it)
            self._retry_locked(conn, INFLIGHT_TABLE, "create the inflight table")
            self._retry_locked(conn, FINAL_TABLE, "create the final-state table")
            have = {r[1] for r in conn.execute("PRAGMA table_info(strings)")}
            for c in _ADDED_COLUMNS:
                if c not in have:
                    try:
                        self._retry_locked(conn, f"ALTER TABLE strings ADD COLUMN {c} {dict(_COLUMNS)[c]}",
                                           f"add the column {c}")
                    except sqlite3.OperationalError as e:   # another process added it meanwhile
                        if "duplicate column" not in str(e):
                            raise

    def _open_readonly(self, state: str):
        """readonly=True: read the file as it is; a store of an older layout (without the
        columns and tables added since schema 1 shipped) through an upgraded temporary copy."""
        if state != "ours":
            raise StoreError(self.path, "nothing to read ("
                             + ("absent" if not self.path.exists() else "empty: no results yet") + ")")
        with self._connection() as conn:
            self.journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            have = {r[1] for r in conn.execute("PRAGMA table_info(strings)")}
        if {"inflight", "final_states"} <= tables and set(_ADDED_COLUMNS) <= have:
            return
        import shutil
        import tempfile

        self.close()
        folder = tempfile.mkdtemp(prefix="accesslib-store-")
        weakref.finalize(self, shutil.rmtree, folder, True)
        copy = Path(folder) / self.path.name
        src = sqlite3.connect(_read_uri(self.path), uri=True, timeout=self.timeout)
        dst = sqlite3.connect(str(copy))
        try:
            src.backup(dst)   # one consistent snapshot, also while a run writes to the file
        except sqlite3.Error as e:
            raise StoreError(self.path, _sqlite_cause(e)) from None
        finally:
            dst.close()
            src.close()
        ResultsStore(copy, timeout=self.timeout).close()   # adds the columns and tables; then read-only
        self._read_path = copy
        self._local = threading.local()   # the next connection opens the copy

    def _retry_locked(self, conn, sql: str, what: str, attempts: int = 50):
        """Run one schema statement, waiting (up to ~1 minute) while another process holds the
        file locked; a :class:`StoreError` saying what could not be done if it stays locked."""
        for attempt in range(attempts):
            try:
                return conn.execute(sql)
            except sqlite3.OperationalError as e:
                if not _sqlite_cause(e).startswith("locked"):
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise StoreError(self.path, f"locked by another process (could not {what})")

    @staticmethod
    def _create_tables(conn):
        cols = ",\n  ".join(
            [f"{c} {'INTEGER' if c in ('m', 'n', 'seed') else 'TEXT'} NOT NULL" for c in KEY_COLUMNS]
            + [f"{name} {typ}" for name, typ in _COLUMNS])
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(f"CREATE TABLE IF NOT EXISTS strings (\n  id INTEGER PRIMARY KEY,\n  {cols},\n"
                         f"  UNIQUE ({', '.join(KEY_COLUMNS)}))")
            conn.execute("CREATE TABLE IF NOT EXISTS protocols (protocol_hash TEXT PRIMARY KEY, "
                         "settings TEXT NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("CREATE INDEX IF NOT EXISTS strings_curve ON strings "
                         "(model, source, protocol_hash, m, n)")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    # --- writing -----------------------------------------------------------------------
    @staticmethod
    def _encode(row: Mapping[str, Any]) -> dict:
        """Validate one row and turn it into column -> SQL value."""
        unknown = set(row) - set(ALL_COLUMNS) - {"settings"}
        if unknown:
            fail("row columns", f"among {', '.join(ALL_COLUMNS)}", sorted(unknown))
        r = dict(row)
        r.pop("settings", None)
        if r.get("target_hash") is None:
            if r.get("target_ids") is None:
                fail("target_ids", "given when a row has no target_hash", None)
            r["target_hash"] = target_hash(r["target_ids"])
        for c in KEY_COLUMNS:
            if r.get(c) is None:
                fail(c, f"given in every row (a key column: {', '.join(KEY_COLUMNS)})", None)
        if r.get("success") is None:
            fail("success", "given in every row", None)
        for c in ("m", "n", "seed"):
            r[c] = int(r[c])
        for c in ("m", "n"):
            if r[c] < 1:
                fail(c, "a whole number >= 1", row[c])
        mem = r.get("memory")
        if mem is not None and not isinstance(mem, (bytes, bytearray, memoryview)):
            if hasattr(mem, "detach"):  # a torch tensor, without importing torch here
                mem = mem.detach().float().cpu().numpy()
            arr = np.ascontiguousarray(np.asarray(mem, dtype=np.float32))
            r["memory_shape"] = list(arr.shape)
            r["memory"] = arr.tobytes()
        for c in _JSON_COLUMNS - {"accuracy_history", "ran_on"}:
            if r.get(c) is not None and not isinstance(r[c], str):
                r[c] = json.dumps([int(x) for x in r[c]])
        hist = r.get("accuracy_history")
        if hist is not None and not isinstance(hist, str):
            try:
                r["accuracy_history"] = json.dumps([[int(s), float(a)] for s, a in hist])
            except (TypeError, ValueError):
                fail("accuracy_history", "a list of [step, accuracy] pairs", hist)
        ran = r.get("ran_on")
        if ran is not None and not isinstance(ran, str):
            if not (isinstance(ran, (list, tuple)) and all(isinstance(e, Mapping) and isinstance(e.get("from"), int)
                                                           for e in ran)):
                fail("ran_on", 'a list of {"from": step, ...} dicts (StringResult.ran_on)', ran)
            r["ran_on"] = json.dumps(canonical(list(ran)))
        for c in _BOOL_COLUMNS:
            if r.get(c) is not None:
                r[c] = int(bool(r[c]))
        for c in ("final_loss", "token_accuracy", "greedy_accuracy", "wall_time"):
            if r.get(c) is not None:
                r[c] = float(r[c])
        r.setdefault("created_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
        r.setdefault("host", socket.gethostname())
        return r

    def add(self, row: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> bool:
        """Insert one finished string, committed at once. True if new, False if already stored.

        ``row`` holds the key columns (``target_hash`` may be left out when ``target_ids`` is
        given) and ``success``; the other columns are optional. ``memory`` may be a numpy
        array or a torch tensor [m, d] (stored as float32 bytes). ``settings`` (the protocol's
        settings dict) is recorded once per ``protocol_hash`` so a hash can be read back.
        """
        return self.add_many([row], settings=settings) == 1

    def add_many(self, rows: Iterable[Mapping[str, Any]], settings: Mapping[str, Any] | None = None) -> int:
        """Insert several rows in one transaction; returns how many were new."""
        self._writing("add strings")
        enc = [self._encode(r) for r in rows]
        if not enc:
            return 0
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if settings is not None:
                    for ph in {r["protocol_hash"] for r in enc}:
                        conn.execute("INSERT OR IGNORE INTO protocols VALUES (?, ?)",
                                     (ph, json.dumps(canonical(settings), sort_keys=True)))
                new = 0
                for r in enc:
                    cols = list(r)
                    cur = conn.execute(f"INSERT OR IGNORE INTO strings ({', '.join(cols)}) VALUES "
                                       f"({', '.join('?' * len(cols))})", [r[c] for c in cols])
                    new += cur.rowcount
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            return new

    # --- reading -----------------------------------------------------------------------
    @staticmethod
    def _where(filters: Mapping[str, Any]) -> tuple[str, list]:
        parts, args = [], []
        for c, v in filters.items():
            check_choice("filter column", c, ALL_COLUMNS)
            if v is None:
                continue
            if isinstance(v, (list, tuple, set, frozenset)):
                v = list(v)
                if not v:
                    parts.append("0")
                    continue
                parts.append(f"{c} IN ({', '.join('?' * len(v))})")
                args += [int(x) if isinstance(x, (bool, np.integer)) else x for x in v]
            else:
                parts.append(f"{c} = ?")
                args.append(int(v) if isinstance(v, (bool, np.integer)) else v)
        return (" WHERE " + " AND ".join(parts)) if parts else "", args

    def _query(self, sql: str, args=()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(sql, args).fetchall()

    # --- strings still being crammed ------------------------------------------------------
    def save_inflight(self, states: Mapping[str, tuple[bytes, int]]) -> None:
        """Keep the optimisation state of strings still being crammed (``key -> (state bytes,
        steps done)``, replacing what was kept under those keys), in one transaction: an
        interrupted run resumes them (:class:`accesslib.engine.cramming.CramSession`)."""
        self._save_states("inflight", states)

    def _save_states(self, table: str, states: Mapping[str, tuple[bytes, int]]) -> None:
        """``key -> (state bytes, steps)`` into ``table`` (inflight or final_states), one transaction."""
        self._writing(f"keep optimisation states ({table})")
        if not states:
            return
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?)",
                                 [(k, sqlite3.Binary(b), int(st), now) for k, (b, st) in states.items()])
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def _load_state(self, table: str, key: str) -> bytes | None:
        got = self._query(f"SELECT state FROM {table} WHERE key = ?", (key,))
        return bytes(got[0][0]) if got else None

    def load_inflight(self, key: str) -> bytes | None:
        """The state kept under ``key`` by :meth:`save_inflight`, or None."""
        return self._load_state("inflight", key)

    def drop_inflight(self, keys: Iterable[str]) -> None:
        """Forget the kept state of these strings (finished, or kept for settings that changed)."""
        self._writing("drop kept states")
        keys = list(keys)
        if not keys:
            return
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("DELETE FROM inflight WHERE key = ?", [(k,) for k in keys])
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def inflight(self) -> list[dict]:
        """The strings kept mid-optimisation: key, steps done, when kept (oldest first)."""
        return _inflight_dicts(self._query(_INFLIGHT_SQL))

    # --- strings finished: where each stopped, so a larger budget can go on from there -----
    def save_final(self, states: Mapping[str, tuple[bytes, int]]) -> None:
        """Keep the optimisation state in which strings finished (``key -> (state bytes, steps
        done)``, replacing what was kept under those keys), in one transaction: a run with a
        larger step budget or patience goes on from it instead of starting again
        (:meth:`accesslib.engine.cramming.CramSession.submit`, ``extend``)."""
        self._save_states("final_states", states)

    def load_final(self, key: str) -> bytes | None:
        """The state kept under ``key`` by :meth:`save_final`, or None."""
        return self._load_state("final_states", key)

    def finals(self) -> int:
        """How many finished strings keep the state they finished in (:meth:`save_final`)."""
        return int(self._query("SELECT COUNT(*) FROM final_states")[0][0])

    def final_keys(self) -> set[str]:
        """The keys of the finished strings that keep the state they finished in (:meth:`save_final`)."""
        return {str(k) for (k,) in self._query("SELECT key FROM final_states")}

    def has(self, key: Mapping[str, Any]) -> bool:
        """Whether the string with this key (the 7 key columns) is stored."""
        _require_key(key)
        where, args = self._where({c: key[c] for c in KEY_COLUMNS})
        return bool(self._query(f"SELECT 1 FROM strings{where} LIMIT 1", args))

    def done_keys(self, model: str, m: int | None = None, *, source: str | None = None,
                  protocol_hash: str | None = None, n: int | None = None,
                  seed: int | None = None) -> set[tuple]:
        """The finished strings as a set of full key tuples (in :data:`KEY_COLUMNS` order)."""
        where, args = self._where(dict(model=model, m=m, source=source, protocol_hash=protocol_hash,
                                       n=n, seed=seed))
        return {tuple(r) for r in self._query(f"SELECT {', '.join(KEY_COLUMNS)} FROM strings{where}", args)}

    def rows(self, *, memory: bool = False, order_by: str = "id", **filters) -> list[dict]:
        """Stored rows matching ``filters`` (column=value, or column=[values]) as dicts.

        json columns come back as lists, booleans as bool; ``memory=True`` also decodes the
        memory vectors to float32 numpy arrays (left out by default: they are the bulk).
        """
        check_choice("order_by", order_by, ("id",) + ALL_COLUMNS)
        cols = ["id"] + [c for c in ALL_COLUMNS if memory or c != "memory"]
        where, args = self._where(filters)
        out = []
        for values in self._query(f"SELECT {', '.join(cols)} FROM strings{where} ORDER BY {order_by}, id", args):
            r = dict(zip(cols, values))
            for c in _JSON_COLUMNS:
                if r.get(c) is not None:
                    r[c] = json.loads(r[c])
            for c in _BOOL_COLUMNS:
                if r.get(c) is not None:
                    r[c] = bool(r[c])
            if memory and r.get("memory") is not None:
                r["memory"] = np.frombuffer(r["memory"], dtype=np.float32).reshape(r["memory_shape"]).copy()
            out.append(r)
        return out

    def count(self, **filters) -> int:
        where, args = self._where(filters)
        return self._query(f"SELECT COUNT(*) FROM strings{where}", args)[0][0]

    def curve(self, model: str, m: int, source: str, protocol_hash: str,
              seed: int | None = None) -> dict[int, tuple[int, int]]:
        """Accessibility counts per length: ``{n: (successes, total)}``, sorted by n."""
        where, args = self._where(dict(model=model, m=m, source=source, protocol_hash=protocol_hash,
                                       seed=seed))
        rows = self._query(f"SELECT n, SUM(success), COUNT(*) FROM strings{where} GROUP BY n ORDER BY n", args)
        return {int(n): (int(s), int(t)) for n, s, t in rows}

    def settings(self, protocol_hash: str) -> dict | None:
        """The settings recorded for a protocol hash (None if never recorded)."""
        rows = self._query("SELECT settings FROM protocols WHERE protocol_hash = ?", (protocol_hash,))
        return json.loads(rows[0][0]) if rows else None

    _RUN_KEYS = ("model", "source", "protocol_hash", "m", "strings", "successes", "lengths",
                 "n_min", "n_max", "last")

    def runs(self, *, cached: bool = False) -> list[dict]:
        """Summary per (model, source, protocol_hash, m): strings, successes, length range, last write.

        ``cached=True`` gives the same list without reading the whole table again: this store
        object keeps the sums of the rows it has seen and reads only the rows added since (ids
        above the largest it saw; the store only ever adds rows, and a row's id is visible once
        every smaller id is). For a page that shows the summary after every string."""
        if cached:
            return self._runs_cached()
        rows = self._query(
            "SELECT model, source, protocol_hash, m, COUNT(*), SUM(success), COUNT(DISTINCT n), "
            "MIN(n), MAX(n), MAX(created_at) FROM strings "
            "GROUP BY model, source, protocol_hash, m ORDER BY model, source, protocol_hash, m")
        return [dict(zip(self._RUN_KEYS, r)) for r in rows]

    def _runs_cached(self) -> list[dict]:
        with self._runs_lock:
            last, groups = self._runs_cache
            with self._connection() as conn:
                conn.execute("BEGIN")   # one snapshot for the top id and the rows below it
                try:
                    top = conn.execute("SELECT MAX(id) FROM strings").fetchone()[0] or 0
                    if top < last:      # another file took this name: start again
                        last, groups = 0, {}
                    new = conn.execute(
                        "SELECT model, source, protocol_hash, m, n, COUNT(*), SUM(success), MAX(created_at) "
                        "FROM strings WHERE id > ? AND id <= ? GROUP BY model, source, protocol_hash, m, n",
                        (last, top)).fetchall() if top > last else []
                finally:
                    _rollback(conn)
            groups = {k: dict(v, ns=set(v["ns"])) for k, v in groups.items()} if new else groups
            for model, source, ph, m, n, count, succ, created in new:
                g = groups.setdefault((model, source, ph, m), dict(strings=0, successes=0, ns=set(), last=None))
                g["strings"] += int(count)
                g["successes"] += int(succ or 0)
                g["ns"].add(n)
                if created is not None and (g["last"] is None or created > g["last"]):
                    g["last"] = created
            self._runs_cache = (top, groups)
        return [dict(model=k[0], source=k[1], protocol_hash=k[2], m=k[3], strings=g["strings"],
                     successes=g["successes"], lengths=len(g["ns"]), n_min=min(g["ns"]), n_max=max(g["ns"]),
                     last=g["last"]) for k, g in sorted(groups.items())]

    # --- getting results out -------------------------------------------------------------
    @staticmethod
    def _cell(value) -> Any:
        """A CSV cell: lists as JSON, None as an empty cell, everything else as str() gives it."""
        if value is None:
            return ""
        if isinstance(value, (list, tuple)):
            return json.dumps(value, separators=(",", ":"))
        return value

    def to_csv(self, file, **filters) -> int:
        """Write the rows matching ``filters`` as CSV (standard library only): a header of
        :data:`EXPORT_COLUMNS`, one line per string, token lists as JSON (``[5,6,7]``), booleans
        as True/False, missing values empty. The memory vectors are left out. ``file``: a path
        or an open text file. Returns the number of rows written."""
        rows = self.rows(**filters)

        def write(f):
            w = csv.writer(f, lineterminator="\n")
            w.writerow(EXPORT_COLUMNS)
            for r in rows:
                w.writerow([self._cell(r.get(c)) for c in EXPORT_COLUMNS])

        if hasattr(file, "write"):
            write(file)
        else:
            with open(file, "w", newline="", encoding="utf-8") as f:
                write(f)
        return len(rows)

    def to_pandas(self, *, memory: bool = False, **filters):
        """The rows matching ``filters`` (column=value or column=[values], as in :meth:`rows`)
        as a ``pandas.DataFrame``: one row per string, the columns of :data:`EXPORT_COLUMNS`
        (settings, outcome, token lists as lists, ``created_at`` as UTC timestamps), plus
        ``memory`` (float32 arrays [m, d]) when ``memory=True``. Needs pandas (imported here)."""
        pd = _need("pandas", "ResultsStore.to_pandas needs pandas: pip install pandas")
        cols = list(EXPORT_COLUMNS) + (["memory"] if memory else [])
        df = pd.DataFrame.from_records(self.rows(memory=memory, **filters), columns=cols)
        for c in ("id", "m", "n", "seed"):
            df[c] = df[c].astype("int64")
        for c in ("sample", "steps"):
            df[c] = df[c].astype("Int64")
        for c in sorted(_BOOL_COLUMNS):
            df[c] = df[c].astype("boolean")
        for c in ("final_loss", "token_accuracy", "greedy_accuracy", "wall_time"):
            df[c] = df[c].astype("float64")
        df["created_at"] = pd.to_datetime(df["created_at"], utc=True)
        return df

    def to_parquet(self, path, **filters) -> int:
        """Write the rows matching ``filters`` (without the memory vectors) as a Parquet file;
        needs pandas and pyarrow. Returns the number of rows written."""
        msg = "writing Parquet needs pandas and pyarrow: pip install pandas pyarrow"
        _need("pandas", msg)
        _need("pyarrow", msg)
        df = self.to_pandas(**filters)
        df.to_parquet(path, index=False, engine="pyarrow")
        return len(df)

    def summary(self, protocol_names: Mapping[str, str] | None = None, **filters) -> list[dict]:
        """One dict per accessibility curve, i.e. per (model, m, source, protocol_hash), sorted so:
        strings, successes, lengths and n50 ± stderr of the logistic fit
        (:func:`accesslib.theory.stats.fit_n50`; nan with the fit's ``message`` when there is no
        n50, e.g. every string succeeded). ``protocol_names`` maps a hash to a readable name
        (the command line passes the named protocols' hashes); ``protocol`` is "" otherwise."""
        from accesslib.theory.stats import fit_n50

        where, args = self._where(filters)
        rows = self._query("SELECT model, m, source, protocol_hash, n, SUM(success), COUNT(*) FROM strings"
                           f"{where} GROUP BY model, m, source, protocol_hash, n "
                           "ORDER BY model, source, protocol_hash, m, n", args)
        curves: dict[tuple, dict[int, tuple[int, int]]] = {}
        for model, m, source, ph, n, s, t in rows:
            curves.setdefault((model, int(m), source, ph), {})[int(n)] = (int(s), int(t))
        names = dict(protocol_names or {})
        out = []
        for (model, m, source, ph), counts in curves.items():
            fit = fit_n50(counts)
            out.append(dict(model=model, m=m, source=source, protocol_hash=ph, protocol=names.get(ph, ""),
                            strings=sum(t for _, t in counts.values()),
                            successes=sum(s for s, _ in counts.values()), lengths=len(counts),
                            n_min=min(counts), n_max=max(counts),
                            n50=float(fit.n50) if fit.ok else float("nan"),
                            n50_stderr=float(fit.stderr) if fit.ok else float("nan"),
                            fit=fit.status, message=fit.message))
        return out

    def environments(self, **filters) -> list[dict]:
        """What the strings of each curve ran on (their ``ran_on``), counted: one dict per (model, m,
        source, protocol_hash) and way of running, ``{..., ran_on: text, strings: count}``, sorted.
        ``ran_on`` reads e.g. "AMD EPYC (family 25 model 1 stepping 1, AVX2), 2 threads, torch
        2.13.0+cpu, cpu, transformers 4.57.1, engine 0123456789ab"; "A; then B" where a string
        went on under another thread count, processor, library or engine code (its steps from then on
        may be summed otherwise: docs/engine.md, "Float rounding"; at which step: the rows'
        ``ran_on``); "not recorded" for strings stored before it was (or by hand); and starts "not
        recorded at first; then" where a string went on from a state kept before it was."""
        where, args = self._where(filters)
        rows = self._query(f"SELECT model, m, source, protocol_hash, ran_on FROM strings{where}", args)
        counts: dict[tuple, int] = {}
        for model, m, source, ph, ran in rows:
            key = (model, int(m), source, ph, describe_ran_on(None if ran is None else json.loads(ran)))
            counts[key] = counts.get(key, 0) + 1
        return [dict(model=k[0], m=k[1], source=k[2], protocol_hash=k[3], ran_on=k[4], strings=c)
                for k, c in sorted(counts.items())]

    def merge(self, other: str | os.PathLike) -> int:
        """Copy every string (and recorded protocol, and the state a string finished in) of the
        store file ``other`` that this store does not hold yet (same key: kept once; a string this
        store holds keeps its own final state, or none); returns how many strings were new.
        ``other`` is only read."""
        self._writing("merge another store in")
        other = Path(other)
        if not other.is_file():
            fail("other", "an existing results store file", str(other))
        if _same_file(other, self.path):
            fail("other", "a different file from this store", str(other))
        if _inspect(other, self.timeout) != "ours":
            raise StoreError(other, "not an accesslib results store (it has no tables)")
        with self._connection() as conn:
            conn.execute("ATTACH DATABASE ? AS other", (_read_uri(other),))
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM other.sqlite_master WHERE type='table'")}
                if "strings" not in tables:
                    fail("other", "a results store (it has no 'strings' table)", str(other))
                theirs = {r[1] for r in conn.execute("PRAGMA other.table_info(strings)")}
                # an older file lacks the columns added since: those stay empty
                cols = ", ".join(c for c in ALL_COLUMNS if c in theirs)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    before = conn.execute("SELECT COUNT(*) FROM main.strings").fetchone()[0]
                    # the strings this store holds already keep their own final state (or none), never
                    # another run's beside this store's row of the same string
                    mine = set()
                    if "final_states" in tables:
                        mine = {inflight_key(dict(zip(KEY_COLUMNS, r)))
                                for r in conn.execute(f"SELECT {', '.join(KEY_COLUMNS)} FROM main.strings")}
                    conn.execute(f"INSERT OR IGNORE INTO main.strings ({cols}) SELECT {cols} FROM other.strings")
                    if "protocols" in tables:
                        conn.execute("INSERT OR IGNORE INTO main.protocols SELECT protocol_hash, settings "
                                     "FROM other.protocols")
                    if "final_states" in tables:   # where its strings finished: a larger budget goes on
                        keys = [k for (k,) in conn.execute("SELECT key FROM other.final_states") if k not in mine]
                        conn.executemany("INSERT OR IGNORE INTO main.final_states SELECT key, state, steps, updated_at "
                                         "FROM other.final_states WHERE key = ?", [(k,) for k in keys])
                    after = conn.execute("SELECT COUNT(*) FROM main.strings").fetchone()[0]
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
            finally:
                conn.execute("DETACH DATABASE other")
        return int(after - before)


#: strings still being crammed: their optimisation state, so an interrupted run resumes them
INFLIGHT_TABLE = ("CREATE TABLE IF NOT EXISTS inflight (key TEXT PRIMARY KEY, state BLOB NOT NULL, "
                  "steps INTEGER, updated_at TEXT)")
#: finished strings: the optimisation state each finished in, so a larger budget goes on from there
FINAL_TABLE = ("CREATE TABLE IF NOT EXISTS final_states (key TEXT PRIMARY KEY, state BLOB NOT NULL, "
               "steps INTEGER, updated_at TEXT)")


def _rollback(conn):
    """Roll back the open transaction, if SQLite has not already (it does on a full disk, and a
    second ROLLBACK would hide the cause behind 'cannot rollback - no transaction is active')."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _need(module: str, message: str):
    """Import an optional dependency, or raise ImportError with a one-line message naming it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(message) from None


#: the strings kept mid-optimisation, oldest first (:meth:`ResultsStore.inflight`, :func:`read_inflight`)
_INFLIGHT_SQL = "SELECT key, steps, updated_at FROM inflight ORDER BY updated_at, key"


def _inflight_dicts(rows) -> list[dict]:
    return [dict(key=k, steps=st, updated_at=t) for k, st, t in rows]


def read_inflight(path: str | os.PathLike, timeout: float = 60.0) -> list[dict]:
    """The strings kept mid-optimisation in the store file ``path`` (as :meth:`ResultsStore.inflight`
    gives them), read without changing the file in any way (an earlier copy, a committed
    snapshot); [] for a store without that table."""
    path = Path(path)
    if not path.is_file():
        fail("path", "an existing results store file", str(path))
    if _inspect(path, timeout) != "ours":
        raise StoreError(path, "not an accesslib results store (it has no tables)")
    conn = sqlite3.connect(_read_uri(path), uri=True, timeout=timeout)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='inflight'").fetchone():
            return []
        return _inflight_dicts(conn.execute(_INFLIGHT_SQL))
    except sqlite3.DatabaseError as e:
        raise StoreError(path, _sqlite_cause(e)) from e
    finally:
        conn.close()


def kept_pace(now: Iterable[Mapping[str, Any]], before: Iterable[Mapping[str, Any]],
              running_since: str | None = None) -> dict | None:
    """How fast a run goes, from the strings it kept mid-way at two moments (:meth:`ResultsStore.inflight`
    of the store now and of an earlier copy, e.g. its last snapshot): for each string kept in both
    and saved again since, the steps it made over the time between its two saves. A run steps all
    its open strings together, so their median is the run's pace.

    ``running_since`` (ISO time): when the run writing now started. A run resumed from the copy
    later (a fresh clone resumes from its committed snapshot) made every step since then, so a
    string's time counts from the later of its earlier save and that start: the hours the run was
    not going are not its pace.

    A string of ``now`` may also carry ``went_on``: (step, Unix time) at which the session writing
    now took it on (``kept_states``). Where that came after its earlier save (or it was not kept
    then), its steps and time count from there: a run's pace without the minutes it spent loading
    its model and reading back its store before its first step.

    Returns ``dict(strings, steps, seconds, seconds_per_step, open, lowest_step)`` (``steps`` and
    ``seconds``: the median string's; ``open``: the strings kept now, ``lowest_step``: the fewest
    steps among them), or None when no string was saved again since the earlier copy."""
    earlier = {k["key"]: k for k in before}
    now = list(now)
    started = datetime.fromisoformat(running_since) if running_since else None
    moves = []
    for k in now:
        e, went = earlier.get(k["key"]), k.get("went_on")
        base = None     # (steps, time) the string's pace counts from
        if e is not None:
            base = (e["steps"], datetime.fromisoformat(e["updated_at"]))
            if started is not None:
                base = (base[0], max(base[1], started))
        if went is not None:
            took = datetime.fromtimestamp(went[1], timezone.utc)
            if base is None or took > base[1]:
                base = (int(went[0]), took)
        if base is None or k["steps"] <= base[0]:
            continue
        seconds = (datetime.fromisoformat(k["updated_at"]) - base[1]).total_seconds()
        if seconds > 0:
            moves.append((seconds / (k["steps"] - base[0]), k["steps"] - base[0], seconds))
    if not moves:
        return None
    per_step, steps, seconds = sorted(moves)[len(moves) // 2]
    return dict(strings=len(moves), steps=steps, seconds=seconds, seconds_per_step=per_step, open=len(now),
                lowest_step=min(k["steps"] for k in now))

