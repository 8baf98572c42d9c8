"""Reading a store without changing it (``ResultsStore(path, readonly=True)``, the ``accesslib
store`` commands that only read): not a byte of the file changes, a read-only file is read, a
store of an older layout is read through an upgraded copy, and writing is refused in words."""
import hashlib
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from accesslib.results.store import ResultsStore, StoreError, backup_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _row(i, n=3, success=True, **extra):
    return dict(model="tiny", m=1, n=n, source="tokens", target_ids=list(range(i, i + n)), seed=0,
                protocol_hash="p0", success=success, steps=10 + i, memory=np.full((1, 4), i, np.float32),
                **extra)


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def shipped(tmp_path):
    """A store as the project commits one: written by a run, then copied by backup_store (one
    self-contained file in rollback-journal mode)."""
    live = ResultsStore(tmp_path / "live.sqlite")
    live.add_many([_row(i, n=n, success=i % 2 == 0, accuracy_history=[[0, 0.5]]) for i in range(4) for n in (2, 5)],
                  settings={"max_steps": 30})
    live.close()
    backup_store(tmp_path / "live.sqlite", tmp_path / "shipped.sqlite")
    return tmp_path / "shipped.sqlite"


def test_reading_changes_not_a_byte_and_writing_is_refused(shipped):
    before = _sha(shipped)
    st = ResultsStore(shipped, readonly=True)
    assert st.count() == 8 and len(st.rows(success=True)) == 4 and st.settings("p0") == {"max_steps": 30}
    assert st.rows(memory=True)[0]["memory"].shape == (1, 4)
    assert [r["strings"] for r in st.runs()] == [8] and st.inflight() == [] and st.finals() == 0
    for write in (lambda: st.add(_row(9)), lambda: st.save_inflight({"k": (b"x", 1)}),
                  lambda: st.save_final({"k": (b"x", 1)}), lambda: st.drop_inflight(["k"]),
                  lambda: st.merge(shipped)):
        with pytest.raises(StoreError, match=r"shipped.sqlite: opened read-only \(readonly=True\): cannot "):
            write()
    st.close()
    assert _sha(shipped) == before
    assert sorted(os.listdir(shipped.parent)) == ["live.sqlite", "shipped.sqlite"]   # no -wal, no -shm
    # the writable store it always was: WAL switched on, the header changed
    ResultsStore(shipped).close()
    assert _sha(shipped) != before


def test_a_read_only_file_is_read_and_a_missing_one_named(shipped, tmp_path):
    os.chmod(shipped, 0o444)
    try:
        with pytest.raises(StoreError, match=r"not writable \(read-only file, mode 0444\)"):
            ResultsStore(shipped)
        assert ResultsStore(shipped, readonly=True).count() == 8
        env = dict(os.environ, PYTHONPATH=ROOT)
        out = subprocess.run([sys.executable, "-m", "accesslib", "store", "summary", "--store", str(shipped)],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "8 strings in 1 curves" in out.stdout
    finally:
        os.chmod(shipped, 0o644)
    with pytest.raises(StoreError, match=r"nope.sqlite: nothing to read \(absent\)"):
        ResultsStore(tmp_path / "nope.sqlite", readonly=True)
    assert not (tmp_path / "nope.sqlite").exists()
    (tmp_path / "empty.sqlite").write_bytes(b"")
    with pytest.raises(StoreError, match=r"nothing to read \(empty: no results yet\)"):
        ResultsStore(tmp_path / "empty.sqlite", readonly=True)


def test_an_older_layout_is_read_through_an_upgraded_copy(shipped):
    conn = sqlite3.connect(shipped)
    for c in ("accuracy_history", "ran_on"):
        conn.execute(f"ALTER TABLE strings DROP COLUMN {c}")
    conn.execute("DROP TABLE inflight")
    conn.execute("DROP TABLE final_states")
    conn.commit()
    conn.close()
    before = _sha(shipped)
    st = ResultsStore(shipped, readonly=True)
    rows = st.rows()
    assert len(rows) == 8 and all(r["accuracy_history"] is None and r["ran_on"] is None for r in rows)
    assert st.inflight() == [] and st.finals() == 0 and st.path == shipped
    with pytest.raises(StoreError, match="opened read-only"):
        st.add(_row(9))
    st.close()
    assert _sha(shipped) == before


def test_store_commands_that_read_leave_the_file_as_it_was(shipped, tmp_path):
    before = _sha(shipped)
    env = dict(os.environ, PYTHONPATH=ROOT)
    for args in (["summary"], ["export", "--csv", str(tmp_path / "rows.csv")], ["ladder", "--budget", "20/5"],
                 ["backup", str(tmp_path / "copy.sqlite")]):
        out = subprocess.run([sys.executable, "-m", "accesslib", "store", *args, "--store", str(shipped)],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
        assert _sha(shipped) == before, (args, out.stdout, out.stderr)
    assert (tmp_path / "rows.csv").read_text().count("\n") == 9
    assert not (tmp_path / "shipped.sqlite-wal").exists() and not (tmp_path / "shipped.sqlite-shm").exists()
