"""The results store under bad files and faults: one line naming the file and the cause, exit
status 2 from the command line, and the file left exactly as it was (accesslib/results/store.py).

Tests run as root here, where ``chmod 0444`` does not stop a write: the store counts a file
without any write permission bit as read-only for everyone (so the chmod test binds as root
too), and a read-only filesystem is emulated by making ``os.access`` answer "not writable".
A full disk cannot be made here either: a connection whose INSERT fails as SQLite fails on a
full disk (it rolls the transaction back itself, then raises) stands in for it.
"""
from __future__ import annotations

import gc
import os
import sqlite3
import stat

import numpy as np
import pytest

from accesslib import cli
from accesslib.results import store as store_mod
from accesslib.results.store import ResultsStore, StoreError, backup_store

CRAM = ["cram", "--model", "tiny-d32-v257", "--m", "1", "--lengths", "2", "--samples", "1",
        "--max-steps", "2", "--no-progress"]


def _row(i, *, m=1, n=3, ph="p0"):
    return dict(model="tiny", m=m, n=n, source="tokens", target_ids=[i, i + 1, i + 2][:n], seed=0,
                protocol_hash=ph, success=i % 2 == 0, steps=3, memory=np.zeros((m, 2), np.float32))


def _snapshot(path):
    """The file's bytes and which of its -wal / -shm / -journal files exist."""
    data = open(path, "rb").read() if os.path.isfile(path) else None
    return data, tuple(os.path.exists(f"{path}{s}") for s in ("-wal", "-shm", "-journal"))


def _store_file(path, rows=3):
    """A valid store with ``rows`` strings, closed (its WAL folded into the file)."""
    st = ResultsStore(path)
    st.add_many([_row(i) for i in range(rows)])
    st.close()
    del st
    gc.collect()
    assert not os.path.exists(f"{path}-wal")
    return path


def _sqlite_file(path, *statements):
    conn = sqlite3.connect(path)
    for s in statements:
        conn.execute(s)
    conn.commit()
    conn.close()
    return path


# --- every bad file: the one-line message, and the file unchanged -----------------------------
def _not_sqlite(p):
    p.write_bytes(b"x\n")


def _bad_header(p):
    _store_file(p)
    data = bytearray(p.read_bytes())
    data[0:16] = b"Not SQLite here!"
    p.write_bytes(bytes(data))


def _bad_page_size(p):
    _store_file(p)
    data = bytearray(p.read_bytes())
    data[16:18] = b"\x00\x03"            # page size 3: not a power of two
    p.write_bytes(bytes(data))


def _bad_pages(p):
    _store_file(p, rows=400)
    data = bytearray(p.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for start in range(page, len(data) - page, page):   # every page but the first and last
        data[start:start + 64] = b"\xa5" * 64
    p.write_bytes(bytes(data))


def _truncated(p):
    _store_file(p, rows=400)
    data = p.read_bytes()
    p.write_bytes(data[:len(data) // 2 + 100])


def _foreign(p):
    _sqlite_file(p, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
                 "INSERT INTO users VALUES (1, 'ada')")


def _foreign_wal(p):
    _sqlite_file(p, "PRAGMA journal_mode = WAL", "CREATE TABLE users (id INTEGER PRIMARY KEY)")


def _schema_2(p):
    _sqlite_file(p, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
                 "INSERT INTO meta VALUES ('schema_version', '2')",
                 "CREATE TABLE strings (id INTEGER PRIMARY KEY, everything TEXT)")


def _meta_without_version(p):
    _sqlite_file(p, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")


def _read_only(p):
    _store_file(p)
    os.chmod(p, 0o444)


BAD_FILES = {
    "not SQLite": (_not_sqlite, "not an accesslib results store (not a SQLite database)"),
    "corrupt header": (_bad_header, "not an accesslib results store (not a SQLite database)"),
    "corrupt page size": (_bad_page_size, "not an accesslib results store (not a SQLite database)"),
    "corrupt pages": (_bad_pages, "corrupt"),
    "truncated": (_truncated, "corrupt"),
    "another program's schema": (_foreign, "not an accesslib results store (a SQLite database of another "
                                           "program: tables users, no accesslib 'meta' table)"),
    "another program's WAL database": (_foreign_wal, "not an accesslib results store (a SQLite database of "
                                                     "another program: tables users"),
    "schema version 2": (_schema_2, "another schema version (2; this accesslib reads version 1)"),
    "meta without version": (_meta_without_version, "not an accesslib results store (its 'meta' table "
                                                    "has no schema_version)"),
    "read-only file": (_read_only, "not writable (read-only file, mode 0444)"),
}


@pytest.fixture(params=sorted(BAD_FILES))
def bad_file(request, tmp_path):
    make, cause = BAD_FILES[request.param]
    path = tmp_path / "x.sqlite"
    make(path)
    yield path, cause
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


def test_a_bad_file_is_refused_in_one_line_and_left_as_it_was(bad_file):
    path, cause = bad_file
    before = _snapshot(path)
    with pytest.raises(StoreError) as e:
        ResultsStore(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"results store {path}: {cause}"), msg
    assert e.value.path == path and isinstance(e.value, ValueError)
    assert _snapshot(path) == before   # no byte written, no -wal / -shm / -journal made


def test_cram_on_a_bad_file_prints_one_line_and_exits_2(bad_file, capsys):
    path, cause = bad_file
    before = _snapshot(path)
    assert cli.main(CRAM + ["--store", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [f"accesslib cram: error: results store {path}: " + err.split(": ", 3)[3]]
    assert err.startswith(f"accesslib cram: error: results store {path}: {cause}"), err
    assert _snapshot(path) == before


def test_store_summary_on_a_bad_file_prints_one_line_and_exits_2(bad_file, capsys):
    path, cause = bad_file
    before = _snapshot(path)
    if cause.startswith("not writable"):   # summary only reads: a read-only store is read
        assert cli.main(["store", "summary", "--store", str(path)]) == 0
        assert f"store {path}: 3 strings in 1 curves" in capsys.readouterr().out
        assert _snapshot(path) == before
        return
    assert cli.main(["store", "summary", "--store", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"accesslib store summary: error: results store {path}: {cause}"), err
    assert _snapshot(path) == before


def test_merging_a_bad_file_names_it_and_changes_neither(bad_file, tmp_path):
    path, cause = bad_file
    if cause.startswith("not writable"):
        pytest.skip("a read-only file can be merged from: it is only read")
    good = _store_file(tmp_path / "good.sqlite")
    st = ResultsStore(good)
    rows = st.rows()
    before = _snapshot(path)
    with pytest.raises(StoreError, match=f"^results store {path}: "):
        st.merge(path)
    assert _snapshot(path) == before and st.rows() == rows


def test_backing_up_a_bad_file_names_it_and_writes_nothing(bad_file, tmp_path):
    path, cause = bad_file
    if cause.startswith("not writable"):
        pytest.skip("a read-only store can be backed up: it is only read")
    before = _snapshot(path)
    with pytest.raises(StoreError, match=f"^results store {path}: "):
        backup_store(path, tmp_path / "copy.sqlite")
    assert _snapshot(path) == before and not (tmp_path / "copy.sqlite").exists()


def test_backing_up_an_empty_file_says_there_is_nothing(tmp_path):
    (tmp_path / "empty.sqlite").write_bytes(b"")
    with pytest.raises(StoreError, match="empty.sqlite: holds no results yet"):
        backup_store(tmp_path / "empty.sqlite", tmp_path / "copy.sqlite")
    assert not (tmp_path / "copy.sqlite").exists()


def test_a_read_only_file_can_still_be_merged_from(tmp_path):
    src = _store_file(tmp_path / "src.sqlite")
    os.chmod(src, 0o444)
    before = _snapshot(src)
    assert ResultsStore(tmp_path / "dst.sqlite").merge(src) == 3
    assert _snapshot(src) == before


def test_dev_null_is_refused(capsys):
    with pytest.raises(StoreError, match=r"^results store /dev/null: not a regular file"):
        ResultsStore("/dev/null")
    assert cli.main(CRAM + ["--store", "/dev/null"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("accesslib cram: error: results store /dev/null: not a regular file (a device, pipe or "
                   "socket cannot hold a results store)")
    assert not os.path.exists("/dev/null-wal") and not os.path.exists("/dev/null-shm")


def test_a_folder_that_cannot_be_made(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    path = blocker / "x.sqlite"
    with pytest.raises(StoreError, match=f"^results store {path}: not writable \\(cannot create the folder "
                                         f"{blocker}: "):
        ResultsStore(path)
    assert cli.main(CRAM + ["--store", str(path)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"accesslib cram: error: results store {path}: not writable")
    assert blocker.read_text() == "a file where a folder should be"


def test_an_unwritable_folder(tmp_path, monkeypatch, capsys):
    """Root writes any folder, so the folder's answer to os.access is made 'no' (as a read-only
    filesystem or a folder without write permission answers)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real = os.access
    monkeypatch.setattr(store_mod.os, "access",
                        lambda p, mode, **kw: False if mode & os.W_OK and str(p).startswith(str(folder))
                        else real(p, mode, **kw))
    path = folder / "x.sqlite"
    with pytest.raises(StoreError) as e:
        ResultsStore(path)
    assert str(e.value) == f"results store {path}: not writable (the folder {folder} is read-only)"
    assert list(folder.iterdir()) == []            # nothing created
    assert cli.main(CRAM + ["--store", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"accesslib cram: error: {e.value}"


def test_a_read_only_filesystem(tmp_path, monkeypatch):
    """An existing store on a read-only filesystem (os.access says not writable, even to root)."""
    path = _store_file(tmp_path / "x.sqlite")
    before = _snapshot(path)
    monkeypatch.setattr(store_mod.os, "access", lambda p, mode, **kw: not mode & os.W_OK)
    with pytest.raises(StoreError, match=f"^results store {path}: not writable \\(read-only file"):
        ResultsStore(path)
    assert ResultsStore(path, readonly=True).count() == 3   # reading it needs no write
    assert _snapshot(path) == before


def test_sqlite_saying_readonly_is_not_writable(tmp_path):
    """SQLite's own refusal (SQLITE_READONLY) comes out as 'not writable' too."""
    path = _store_file(tmp_path / "x.sqlite")
    st = ResultsStore(path)
    h = st._handle()
    with h.lock:
        h.conn.close()
        h.conn = sqlite3.connect(store_mod._uri(path, mode="ro"), uri=True, isolation_level=None,
                                 check_same_thread=False)
    with pytest.raises(StoreError) as e:
        st.add(_row(10))
    assert str(e.value).startswith(f"results store {path}: not writable (SQLite: attempt to write a readonly")
    st.close()
    assert ResultsStore(path).count() == 3


# --- a full disk -----------------------------------------------------------------------------
class _FullDisk:
    """A connection whose INSERT into strings fails as on a full disk: SQLite rolls the
    transaction back itself, then raises SQLITE_FULL."""

    def __init__(self, real):
        self.real = real

    def execute(self, sql, *args):
        if sql.startswith("INSERT OR IGNORE INTO strings"):
            self.real.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        return self.real.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_full_disk_says_disk_full_and_loses_no_row(tmp_path, capsys):
    path = _store_file(tmp_path / "x.sqlite")
    st = ResultsStore(path)
    before = st.rows()
    h = st._handle()
    with st._connection():
        pass
    with h.lock:
        h.conn = _FullDisk(h.conn)
    with pytest.raises(StoreError) as e:
        st.add_many([_row(10), _row(11)], settings={"lr": 1})
    assert str(e.value) == f"results store {path}: disk full (SQLite: database or disk is full)"
    assert "rollback" not in str(e.value)
    assert not h.conn.in_transaction
    with h.lock:
        h.conn = h.conn.real                    # the disk has room again
    assert st.rows() == before                  # nothing lost, nothing half-written
    assert st.settings("p0") is None
    assert st.add(_row(10)) is True and st.count() == 4


def test_rollback_after_sqlite_rolled_back_is_safe(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.sqlite", isolation_level=None)
    store_mod._rollback(conn)                   # no transaction: nothing happens, no error
    conn.execute("BEGIN")
    store_mod._rollback(conn)
    assert not conn.in_transaction


def test_sqlite_errors_are_sorted_by_cause():
    cause = store_mod._sqlite_cause
    assert cause(sqlite3.OperationalError("database or disk is full")).startswith("disk full")
    assert cause(sqlite3.OperationalError("attempt to write a readonly database")).startswith("not writable")
    assert cause(sqlite3.DatabaseError("file is not a database")).startswith("not an accesslib results store")
    assert cause(sqlite3.DatabaseError("database disk image is malformed")).startswith("corrupt")
    assert cause(sqlite3.OperationalError("database is locked")).startswith("locked")
    assert cause(sqlite3.OperationalError("unable to open database file")).startswith("cannot be opened")


# --- files that are fine ---------------------------------------------------------------------
def test_an_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "x.sqlite"
    path.write_bytes(b"")
    st = ResultsStore(path)
    assert st.add(_row(1)) and st.count() == 1


def test_a_good_store_reopens_with_its_rows(tmp_path):
    path = _store_file(tmp_path / "x.sqlite")
    st = ResultsStore(path)
    assert st.count() == 3 and st.journal_mode == "wal"


# --- the cached summary ----------------------------------------------------------------------
def _bulk(path, start, count, groups=4):
    """Insert rows straight through SQLite (fast): ``groups`` curves, lengths 1..20."""
    conn = sqlite3.connect(path)
    conn.executemany(
        "INSERT INTO strings (model, m, n, source, target_hash, seed, protocol_hash, success, created_at) "
        "VALUES (?, ?, ?, 'tokens', ?, 0, 'p0', ?, ?)",
        [("tiny", 1 + i % groups, 1 + i % 20, f"h{i}", i % 3 == 0, f"2026-01-01T00:{i % 60:02d}:00")
         for i in range(start, start + count)])
    conn.commit()
    conn.close()


def _opcodes(st, call):
    """How many SQLite virtual-machine steps ``call`` takes (a measure of rows read)."""
    steps = [0]

    def tick():
        steps[0] += 1
        return 0

    with st._connection() as conn:
        conn.set_progress_handler(tick, 1)
    try:
        result = call()
    finally:
        with st._connection() as conn:
            conn.set_progress_handler(None, 1)
    return result, steps[0]


def test_cached_runs_equal_a_full_scan_and_read_only_new_rows(tmp_path):
    path = tmp_path / "x.sqlite"
    st = ResultsStore(path)
    assert st.runs(cached=True) == st.runs() == []
    _bulk(path, 0, 50_000)
    first, full = _opcodes(st, lambda: st.runs(cached=True))
    assert first == st.runs()
    again, none_new = _opcodes(st, lambda: st.runs(cached=True))
    assert again == first
    assert none_new * 100 < full, (none_new, full)       # no rescan: a few lookups
    _bulk(path, 50_000, 50, groups=5)                    # a new curve (m=5) and more rows
    st.add(_row(1, m=7, n=2, ph="p1"))
    after, few_new = _opcodes(st, lambda: st.runs(cached=True))
    assert after == st.runs() and after != first
    assert few_new * 20 < full, (few_new, full)
    assert sum(r["strings"] for r in after) == 50_051


def test_cached_runs_see_rows_of_other_store_objects_and_a_replaced_file(tmp_path):
    path = tmp_path / "x.sqlite"
    a, b = ResultsStore(path), ResultsStore(path)
    a.add_many([_row(i) for i in range(5)])
    assert b.runs(cached=True) == a.runs()
    a.add_many([_row(i, n=2) for i in range(5, 9)])
    assert b.runs(cached=True) == a.runs()
    a.close()
    b.close()
    other = tmp_path / "y.sqlite"
    ResultsStore(other).add(_row(0))
    gc.collect()
    os.replace(other, path)                               # fewer rows: the cache starts again
    assert b.runs(cached=True) == b.runs() and b.runs()[0]["strings"] == 1


# --- schema statements wait while another process holds the file -----------------------------
class _LockedConn:
    """A connection whose first ``fails`` statements find the file locked."""

    def __init__(self, fails):
        self.fails, self.calls = fails, 0

    def execute(self, sql):
        self.calls += 1
        if self.calls <= self.fails:
            raise sqlite3.OperationalError("database is locked")
        return sql


def test_a_schema_statement_waits_out_a_passing_lock(tmp_path, monkeypatch):
    st = ResultsStore(tmp_path / "x.sqlite")
    monkeypatch.setattr("accesslib.results.store.time.sleep", lambda s: None)
    conn = _LockedConn(fails=3)
    assert st._retry_locked(conn, "PRAGMA x", "do x") == "PRAGMA x" and conn.calls == 4


def test_a_lock_that_never_clears_names_what_could_not_be_done(tmp_path, monkeypatch):
    st = ResultsStore(tmp_path / "x.sqlite")
    waits = []
    monkeypatch.setattr("accesslib.results.store.time.sleep", waits.append)
    with pytest.raises(StoreError, match=r"locked by another process \(could not create the inflight"):
        st._retry_locked(_LockedConn(fails=10**6), "CREATE ...", "create the inflight table")
    assert len(waits) == 50 and sum(waits) == pytest.approx(63.75)  # about a minute in all


def test_a_schema_error_other_than_a_lock_is_not_retried(tmp_path):
    st = ResultsStore(tmp_path / "x.sqlite")

    class Broken:
        def execute(self, sql):
            raise sqlite3.OperationalError("no such table: meta")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        st._retry_locked(Broken(), "SELECT", "read")
