"""Results store: keys, resume after a kill, concurrent writers (accesslib/store.py)."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from accesslib.results.store import KEY_COLUMNS, ResultsStore, backup_store, protocol_hash, target_hash

#: the repository root, put on the path of the jobs these tests run in fresh interpreters
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _row(i, *, model="tiny", m=1, n=5, success=None, ph="p0"):
    ids = [i, i + 1, i + 2, i + 3, i + 4][:n]
    return dict(model=model, m=m, n=n, source="tokens", target_ids=ids, seed=0, protocol_hash=ph,
                success=(i % 3 != 0) if success is None else success, steps=10 + i, final_loss=0.5,
                memory=np.full((m, 4), i, dtype=np.float32), prefix_ids=[0], sample=i)


def test_add_is_idempotent_and_rows_round_trip(tmp_path):
    st = ResultsStore(tmp_path / "r.sqlite")
    assert st.journal_mode == "wal"
    assert st.add(_row(1), settings={"lr": 0.01}) is True
    assert st.add(_row(1)) is False  # same key: ignored, not duplicated
    assert st.count() == 1
    key = {c: v for c, v in _row(1).items() if c in KEY_COLUMNS}
    key["target_hash"] = target_hash([1, 2, 3, 4, 5])
    assert st.has(key)
    assert not st.has(dict(key, seed=1))
    (r,) = st.rows(memory=True)
    assert r["target_ids"] == [1, 2, 3, 4, 5] and r["prefix_ids"] == [0] and r["success"] is True
    assert r["memory"].dtype == np.float32 and r["memory"].shape == (1, 4) and r["memory"][0, 0] == 1.0
    assert "memory" not in st.rows()[0]
    assert st.settings("p0") == {"lr": 0.01}


def test_curve_done_keys_runs(tmp_path):
    st = ResultsStore(tmp_path / "r.sqlite")
    st.add_many([_row(i, n=n) for i in range(6) for n in (2, 4)])
    assert st.curve("tiny", 1, "tokens", "p0") == {2: (4, 6), 4: (4, 6)}  # i%3==0 fail: 0 and 3
    assert len(st.done_keys("tiny", 1, n=2)) == 6
    (run,) = st.runs()
    assert run["strings"] == 12 and run["successes"] == 8 and run["n_min"] == 2 and run["n_max"] == 4
    assert len(st.rows(n=[2, 4], success=True)) == 8


def test_protocol_hash_stable_and_sensitive():
    a = protocol_hash({"lr": 0.01, "betas": (0.9, 0.9), "max_steps": np.int64(3000)})
    assert a == protocol_hash({"max_steps": 3000, "betas": [0.9, 0.9], "lr": 0.01})
    assert a != protocol_hash({"lr": 0.02, "betas": (0.9, 0.9), "max_steps": 3000})
    assert len(a) == 16
    # pinned: stores and shipped bundles key their rows by this hash (value from before the
    # hash had one function, accesslib.experiments.curves.protocol_hash_for)
    assert a == "d50900bbfb5b13ee"


def test_bad_rows_raise(tmp_path):
    st = ResultsStore(tmp_path / "r.sqlite")
    with pytest.raises(ValueError, match=r"^model must be given in every row \(a key column: model, m, n, "
                                         r"source, target_hash, seed, protocol_hash\); got None$"):
        st.add({k: v for k, v in _row(1).items() if k != "model"})
    with pytest.raises(ValueError, match=r"^row columns must be among model, m, n, .*, run_id, accuracy_history, ran_on; got \['colour'\]$"):
        st.add(dict(_row(1), colour="red"))
    with pytest.raises(ValueError, match=r"^success must be given in every row; got None$"):
        st.add({k: v for k, v in _row(1).items() if k != "success"})
    with pytest.raises(ValueError, match=r"^m must be a whole number >= 1; got 0$"):
        st.add(dict(_row(1), m=0))
    with pytest.raises(ValueError, match=r"^n must be a whole number >= 1; got 0$"):
        st.add(dict(_row(1), n=0))
    with pytest.raises(ValueError, match=r"^filter column must be one of 'model', 'm', .*; got 'colour'$"):
        st.rows(colour="red")
    with pytest.raises(ValueError, match=r"^order_by must be one of 'id', 'model', .*; got 'colour'$"):
        st.rows(order_by="colour")
    with pytest.raises(ValueError, match=r"^timeout must be a number > 0; got 0$"):
        ResultsStore(tmp_path / "t.sqlite", timeout=0)
    with pytest.raises(ValueError, match=r"^settings must be a dict of cramming settings; got 'paper'$"):
        protocol_hash("paper")


def _writer(path, worker, count):
    st = ResultsStore(path, timeout=30)
    new = 0
    for i in range(count):
        # every key is written by two workers: (worker, i) and (worker+1, i) overlap
        new += st.add(_row(i, model=f"w{(worker + i) % 3}"))
    return new


def _open_fds(path):
    """Paths of this process's open file descriptors that start with ``path`` (Linux)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    return sorted(out)


# The writers are forked from a fresh interpreter, not from the pytest process: an xdist worker
# that has run torch tests holds threads (OpenMP, torch's pool), and a fork taken while one of
# them holds a lock leaves the child waiting on it for ever (seen once, 7 December: 4 forked
# writers sat in a futex wait for 24 minutes without running a line). A fresh interpreter that
# imports only the store has one thread, so the fork is the one a notebook user makes.
_FORKED_WRITERS = textwrap.dedent("""
    import json, multiprocessing as mp, sys
    sys.path.insert(0, {root!r})
    from tests.results.test_store import _writer
    from accesslib.results.store import ResultsStore
    keep = ResultsStore({path!r})  # the parent keeps a store open across the fork, as a notebook would
    keep.count()
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool({workers}) as pool:
        news = pool.starmap(_writer, [({path!r}, w, {count}) for w in range({workers})])
    print(json.dumps(dict(news=news, kept=keep.count())), flush=True)
""")


def _forked_writers(tmp_path, path, workers, count):
    """The command that forks ``workers`` writers of ``count`` rows each into ``path``."""
    job = tmp_path / "writers.py"
    job.write_text(_FORKED_WRITERS.format(root=ROOT, path=path, workers=workers, count=count))
    return [sys.executable, str(job)]


@pytest.mark.parametrize("round_", range(4))
def test_concurrent_writers_from_processes(tmp_path, round_):
    path = str(tmp_path / "r.sqlite")
    try:
        out = subprocess.run(_forked_writers(tmp_path, path, 4, 40), capture_output=True, text=True,
                             timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("4 forked writers did not finish 40 rows each in 300 s (a lock held across the fork?)")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    st = ResultsStore(path)
    # distinct keys: model w{(w+i)%3} x sample i -> 3 models x 40 samples at most, all written
    expected = {((w + i) % 3, i) for w in range(4) for i in range(40)}
    assert st.count() == len(expected) == sum(got["news"]) == got["kept"]
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    dup = con.execute(f"SELECT COUNT(*) FROM (SELECT {', '.join(KEY_COLUMNS)}, COUNT(*) c FROM strings "
                      f"GROUP BY {', '.join(KEY_COLUMNS)} HAVING c > 1)").fetchone()[0]
    assert dup == 0


def test_backups_taken_while_processes_write_are_whole(tmp_path):
    """Every backup taken while writers commit is one consistent file: it passes SQLite's
    integrity check, holds only whole rows (no duplicates), and no fewer than the one before."""
    path = str(tmp_path / "r.sqlite")
    ResultsStore(path).add(_row(0, model="w0"))
    counts = []
    writers = subprocess.Popen(_forked_writers(tmp_path, path, 2, 60), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while writers.poll() is None or len(counts) < 3:
            assert time.monotonic() < deadline, "2 forked writers did not finish 60 rows each in 300 s"
            out = tmp_path / f"b{len(counts)}.sqlite"
            strings, unfinished = backup_store(path, out)
            con = sqlite3.connect(out)
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
            assert con.execute("SELECT COUNT(*) FROM strings").fetchone()[0] == strings and unfinished == 0
            con.close()
            assert ResultsStore(out).count() == strings
            counts.append(strings)
    finally:
        if writers.poll() is None:
            writers.kill()
        _, stderr = writers.communicate()
    assert writers.returncode == 0, stderr
    assert counts == sorted(counts) and counts[-1] <= ResultsStore(path).count()
    assert backup_store(path, tmp_path / "last.sqlite")[0] == ResultsStore(path).count()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")
def test_a_dropped_store_closes_its_file(tmp_path):
    # sqlite3.Connection sits in a reference cycle: without an explicit close a dropped store
    # kept the database open until the next garbage collection (and so across a fork)
    path = tmp_path / "r.sqlite"
    ResultsStore(path).add(_row(1))
    assert _open_fds(path) == []
    st = ResultsStore(path)
    assert st.count() == 1 and str(path) in _open_fds(path)
    st.close()
    assert _open_fds(path) == []
    assert st.count() == 1  # reopens on use


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"),
                    reason="needs fork and /proc/self/fd (Linux)")
def test_fork_closes_every_open_connection_first(tmp_path):
    path = tmp_path / "r.sqlite"
    st = ResultsStore(path)
    st.add(_row(1))
    # another thread holds its own open connection (same store object) across the fork
    opened, forked, seen = threading.Event(), threading.Event(), []

    def other_thread():
        seen.append(st.count())
        opened.set()
        forked.wait(30)
        seen.append(_open_fds(path))  # its connection was closed under it ...
        seen.append(st.count())       # ... and reopens on use

    t = threading.Thread(target=other_thread)
    t.start()
    assert opened.wait(30) and seen == [1]
    assert _open_fds(path).count(str(path)) == 2  # the main thread's connection and the other's
    pid = os.fork()
    if pid == 0:  # the child: no connection of the parent's came across; its own works
        code = 0 if _open_fds(path) == [] else 3
        try:
            code = code or (0 if st.add(_row(2)) and st.count() == 2 else 4)
        except BaseException:
            code = 5
        os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung for 60 s (a lock held across the fork)")
    status = done[1]
    assert os.WEXITSTATUS(status) == 0, f"child exit {os.WEXITSTATUS(status)}: 3 inherited an open " \
                                        "connection, 4 wrote wrongly, 5 raised"
    assert _open_fds(path) == []  # the parent's connections, both threads', were closed before the fork
    forked.set()
    t.join(30)
    assert seen[1] == [] and seen[2] == 2
    assert st.count() == 2 and st.has(dict(model="tiny", m=1, n=5, source="tokens", seed=0,
                                           protocol_hash="p0", target_hash=target_hash([2, 3, 4, 5, 6])))


_RESUMABLE_JOB = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from tests.results.test_store import _row
    from accesslib.results.store import ResultsStore, KEY_COLUMNS, target_hash
    st = ResultsStore({path!r})
    for i in range({total}):
        r = _row(i)
        key = {{c: r[c] for c in KEY_COLUMNS if c in r}}
        key["target_hash"] = target_hash(r["target_ids"])
        if st.has(key):
            continue          # finished before the kill: not redone
        time.sleep({delay})  # "cramming"
        st.add(r)
        print(i, flush=True)
""")


def test_resume_after_kill_neither_loses_nor_duplicates(tmp_path):
    path = str(tmp_path / "r.sqlite")
    total = 30
    job = tmp_path / "job.py"
    job.write_text(_RESUMABLE_JOB.format(root=ROOT, path=path, total=total, delay=0.05))
    proc = subprocess.Popen([sys.executable, str(job)], stdout=subprocess.PIPE, text=True)
    done_before = [proc.stdout.readline() for _ in range(8)]  # let it finish 8 strings
    os.kill(proc.pid, signal.SIGKILL)  # killed mid-run, without any clean-up
    proc.wait()
    st = ResultsStore(path)
    killed_count = st.count()
    assert 8 <= killed_count < total
    out = subprocess.run([sys.executable, str(job.with_name("job.py"))], capture_output=True, text=True,
                         check=True).stdout.split()
    redone = {int(x) for x in out}
    assert len(redone) == total - killed_count  # only the missing strings were crammed again
    assert not redone & {int(x) for x in done_before}
    assert st.count() == total
    assert sorted(r["sample"] for r in st.rows()) == list(range(total))


def test_store_pickles_without_connection(tmp_path):
    import pickle
    st = ResultsStore(tmp_path / "r.sqlite")
    st.add(_row(2))
    st2 = pickle.loads(pickle.dumps(st))
    assert st2.count() == 1 and st2.path == st.path


def test_a_store_is_called_corrupt_only_when_every_read_says_so(tmp_path, monkeypatch):
    """One quick_check that fails (a read racing other processes' writes, seen once under heavy load)
    is read again; a file that fails every read is corrupt."""
    from accesslib.results import store as store_mod
    from accesslib.results.store import StoreError

    path = tmp_path / "r.sqlite"
    ResultsStore(path).add(_row(1))
    real, said = store_mod._quick_check, []

    def once_wrong(p, timeout, conn=None):
        said.append(p)
        return ("corrupt (SQLite: On tree page 2 cell 0: invalid page number 14)" if len(said) == 1
                else real(p, timeout, conn))
    monkeypatch.setattr(store_mod, "_quick_check", once_wrong)
    assert ResultsStore(path).count() == 1 and len(said) == 2
    said.clear()
    monkeypatch.setattr(store_mod, "_quick_check", lambda p, timeout, conn=None: said.append(p) or "corrupt (SQLite: bad)")
    with pytest.raises(StoreError, match=r"corrupt \(SQLite: bad\)$"):
        ResultsStore(path)
    assert len(said) == store_mod._CHECK_READS == 3
