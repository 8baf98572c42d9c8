"""Where the results store lives: the user data folder, overrides, moving a store from the old
cache folder without losing a row, and the warning on a network filesystem. Every test runs
with a temporary HOME and XDG folders (never the real ones)."""
import os
import sqlite3
from pathlib import Path

import numpy as np
import platformdirs
import pytest

from accesslib import config
from accesslib.results import store as store_mod
from accesslib.results.store import ResultsStore, default_path, migrate_store


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh HOME without ACCESSLIB_HOME or XDG settings; every notice may show again."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var in ("ACCESSLIB_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(store_mod, "_NOTICED", set())
    monkeypatch.setattr(config, "MOUNTS_FILE", str(tmp_path / "no-mounts"))   # no network mounts
    return h


def _rows(k, *, model="tiny"):
    return [dict(model=model, m=1 + i % 2, n=2 + i % 5, source="tokens", target_ids=[i, i + 1, i + 2], seed=0,
                 protocol_hash="p0", success=i % 3 != 0, steps=i, final_loss=1.0 / (i + 1),
                 memory=np.full((1 + i % 2, 4), i, dtype=np.float32), prefix_ids=[0], target_text=f"s{i}")
            for i in range(k)]


def _content(path):
    st = ResultsStore(path)
    rows = st.rows(memory=True)
    st.close()
    for r in rows:
        r["memory"] = r["memory"].tolist()
    return rows


def _data_dir():
    return Path(platformdirs.user_data_dir("accesslib", appauthor=False))


def test_default_store_is_in_the_user_data_folder_not_the_cache(home):
    p = default_path()
    assert p == _data_dir() / "results.sqlite"
    assert str(p).startswith(str(home)) and ".cache" not in p.parts
    assert ResultsStore().path == p
    # model caches stay in the cache folder
    assert config.home() == home / ".cache" / "accesslib"


def test_accesslib_home_and_an_explicit_path_override(home, tmp_path, monkeypatch, capsys):
    old = home / ".cache" / "accesslib" / "results.sqlite"
    old.parent.mkdir(parents=True)
    ResultsStore(old).add_many(_rows(3))
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path / "al"))
    assert default_path() == tmp_path / "al" / "results.sqlite"
    assert config.home() == tmp_path / "al"
    assert old.is_file() and capsys.readouterr().err == ""   # nothing is moved under ACCESSLIB_HOME
    monkeypatch.delenv("ACCESSLIB_HOME")
    explicit = tmp_path / "elsewhere" / "mine.sqlite"
    assert ResultsStore(explicit).path == explicit
    assert old.is_file()   # an explicit path moves nothing either


@pytest.mark.parametrize("xdg_cache", [False, True])
def test_a_store_in_the_old_cache_folder_is_moved_with_every_row(home, tmp_path, monkeypatch, capsys, xdg_cache):
    if xdg_cache:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdgcache"))
        old_dir = tmp_path / "xdgcache" / "accesslib"
    else:
        old_dir = home / ".cache" / "accesslib"
    old_dir.mkdir(parents=True)
    old = old_dir / "results.sqlite"
    writer = ResultsStore(old)
    writer.add_many(_rows(40), settings={"lr": 0.05})
    for r in _rows(45)[40:]:
        writer.add(r)        # one transaction each: rows that live only in the -wal file so far
    assert Path(f"{old}-wal").stat().st_size > 0
    want = _content(old)
    writer.close()
    (old_dir / "models").mkdir()    # model caches are left alone

    new = default_path()
    assert new == _data_dir() / "results.sqlite" and new.is_file()
    assert not old.exists() and not Path(f"{old}-wal").exists() and not Path(f"{old}-shm").exists()
    assert (old_dir / "models").is_dir()
    got = _content(new)
    assert len(got) == len(want) == 45 and got == want           # count and content
    assert ResultsStore(new).settings("p0") == {"lr": 0.05}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "moved the results store (45 strings)" in err[0] and str(old) in err[0]
    assert not [p for p in new.parent.iterdir() if ".moving-" in p.name]   # no temporary file left
    # the moved store is used from now on: nothing more to move, nothing more said
    assert default_path() == new and capsys.readouterr().err == ""


def test_the_notebook_sweep_store_moves_too(home, capsys):
    old = home / ".cache" / "accesslib" / "sweeps.sqlite"
    old.parent.mkdir(parents=True)
    ResultsStore(old).add_many(_rows(4))
    p = default_path("sweeps.sqlite")
    assert p == _data_dir() / "sweeps.sqlite" and ResultsStore(p).count() == 4 and not old.exists()


def test_both_places_have_a_store_the_new_one_is_used_and_one_warning(home, capsys):
    old = home / ".cache" / "accesslib" / "results.sqlite"
    old.parent.mkdir(parents=True)
    ResultsStore(old).add_many(_rows(3, model="old"))
    new = _data_dir() / "results.sqlite"
    new.parent.mkdir(parents=True)
    ResultsStore(new).add_many(_rows(2, model="new"))
    assert default_path() == new
    assert default_path() == new
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "older results store is still at" in err[0] and str(old) in err[0]
    assert "accesslib store merge" in err[0]
    assert {r["model"] for r in ResultsStore(new).rows()} == {"new"}
    assert ResultsStore(old).count() == 3   # untouched
    # merging copies the old rows once
    assert ResultsStore(new).merge(old) == 3 and ResultsStore(new).merge(old) == 0


def test_migrate_store_never_replaces_a_store_and_keeps_the_old_one_on_failure(home, tmp_path, monkeypatch):
    old = tmp_path / "old.sqlite"
    ResultsStore(old).add_many(_rows(5))
    new = tmp_path / "new" / "results.sqlite"
    new.parent.mkdir()
    new.write_bytes(b"")
    assert migrate_store(old, new) is None and old.is_file() and new.read_bytes() == b""
    new.unlink()
    real = store_mod._table_counts
    calls = []

    def short_copy(conn):   # the copy seems to miss a row: nothing may be deleted
        calls.append(1)
        counts = real(conn)
        return dict(counts, strings=counts["strings"] - 1) if len(calls) == 2 else counts
    monkeypatch.setattr(store_mod, "_table_counts", short_copy)
    with pytest.raises(RuntimeError, match="does not match"):
        migrate_store(old, new)
    assert old.is_file() and not new.exists() and ResultsStore(old).count() == 5
    assert not [p for p in new.parent.iterdir()]   # the temporary copy is gone


def test_a_failed_move_is_one_line_and_the_old_store_stays(home, monkeypatch, capsys):
    old = home / ".cache" / "accesslib" / "results.sqlite"
    old.parent.mkdir(parents=True)
    ResultsStore(old).add_many(_rows(2))

    def broken(*a, **k):
        raise sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(store_mod, "migrate_store", broken)
    assert default_path() == _data_dir() / "results.sqlite"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not move the results store" in err[0] and "database is locked" in err[0]
    assert ResultsStore(old).count() == 2


# --- network filesystems -----------------------------------------------------------------------
def _mounts(tmp_path, *lines):
    f = tmp_path / "mounts"
    f.write_text("".join(line + "\n" for line in lines))
    return f


def test_the_mount_table_reader(tmp_path):
    f = _mounts(tmp_path, "/dev/sda1 / ext4 rw 0 0", "srv:/x /mnt/lab\\040data nfs4 rw 0 0",
                "u@h: /mnt/ssh fuse.sshfs rw 0 0", "tmpfs /mnt/lab\\040data/tmp tmpfs rw 0 0")
    mounts = config.read_mounts(f)
    assert ("/mnt/lab data", "nfs4") in mounts
    assert config.network_filesystem("/mnt/lab data/runs/results.sqlite", mounts) == "nfs4"
    assert config.network_filesystem("/mnt/lab data/tmp/r.sqlite", mounts) is None   # a local mount inside
    assert config.network_filesystem("/mnt/ssh/a", mounts) == "fuse.sshfs"
    assert config.network_filesystem("/mnt/labx/a", mounts) is None                  # not a prefix match
    assert config.network_filesystem("/home/u/r.sqlite", mounts) is None
    assert config.read_mounts(tmp_path / "absent") == [] and config.filesystem_type("/x", []) is None


def test_a_store_on_a_network_filesystem_warns_once(home, tmp_path, monkeypatch, capsys):
    share = tmp_path / "share"
    monkeypatch.setattr(config, "MOUNTS_FILE", str(_mounts(tmp_path, "/dev/sda1 / ext4 rw 0 0",
                                                           f"fileserver:/export {share} nfs4 rw 0 0")))
    ResultsStore(share / "a" / "r.sqlite")
    ResultsStore(share / "a" / "r.sqlite")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "network filesystem (nfs4)" in err[0] and "SQLite" in err[0]
    ResultsStore(tmp_path / "local" / "r.sqlite")
    assert capsys.readouterr().err == ""
    # the default store too (ACCESSLIB_HOME on the share)
    monkeypatch.setenv("ACCESSLIB_HOME", str(share / "home"))
    ResultsStore()
    assert "network filesystem (nfs4)" in capsys.readouterr().err
    assert os.environ["ACCESSLIB_HOME"].startswith(str(share))
