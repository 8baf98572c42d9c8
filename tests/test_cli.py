"""Command line `python -m accesslib cram` (accesslib/__main__.py)."""
import subprocess
import sys

import pytest

from accesslib.cli import main


def test_cram_end_to_end_on_a_tiny_model(tmp_path, capsys):
    pytest.importorskip("accesslib.engine.cramming")
    store = tmp_path / "r.sqlite"
    argv = ["cram", "--model", "tiny:gpt_neox", "--m", "1", "2", "--samples", "2", "--source", "tokens",
            "--lengths", "1", "2", "--protocol", "fast", "--max-steps", "20", "--patience", "10",
            "--store", str(store), "--threads", "1", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "m=1:" in out and "m=2:" in out and "slope" in out
    assert "4 crammed, 0 from store" in out
    from accesslib.results.store import ResultsStore
    st = ResultsStore(store)
    assert st.count() == 8 and {r["m"] for r in st.rows()} == {1, 2}
    assert main(argv) == 0  # a second run resumes: nothing crammed again
    assert "0 crammed, 4 from store" in capsys.readouterr().out
    assert st.count() == 8


def test_cram_goes_on_from_a_smaller_budget(tmp_path, capsys):
    """`accesslib cram --keep-final`, then `--extend-from STEPS/PATIENCE` with a larger budget: the
    counts of a fresh run of that budget, the strings gone on from or taken as crammed."""
    pytest.importorskip("accesslib.engine.cramming")
    store, fresh = str(tmp_path / "r.sqlite"), str(tmp_path / "f.sqlite")
    argv = ["cram", "--model", "tiny-d32-v257", "--m", "1", "--samples", "3", "--source", "natural", "--lengths", "6",
            "--protocol", "paper", "--threads", "1", "--no-progress", "--batch-size", "1"]
    assert main(argv + ["--max-steps", "60", "--patience", "10", "--keep-final", "--store", store]) == 0
    capsys.readouterr()
    assert main(argv + ["--max-steps", "240", "--patience", "40", "--extend-from", "60/10", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "gone on from the 60/10 run" in out or "taken as the 60/10 run crammed them" in out
    assert main(argv + ["--max-steps", "240", "--patience", "40", "--store", fresh]) == 0
    counts = [line.split("; ")[-1] for line in out.splitlines() if line.startswith("m=1:")]
    assert counts == [line.split("; ")[-1] for line in capsys.readouterr().out.splitlines() if line.startswith("m=1:")]
    assert main(argv + ["--extend-from", "60:10", "--store", store]) == 2
    assert ("--extend-from must be STEPS/PATIENCE pairs of whole numbers >= 1, e.g. 3000/500; got '60:10'"
            in capsys.readouterr().err)
    assert main(argv + ["--protocol", "fast", "--extend-from", "60/10", "--store", store]) == 2
    assert "constant learning rate only" in capsys.readouterr().err


@pytest.mark.parametrize("argv, msg", [
    (["cram", "--model", "x", "--m", "0"], "argument --m: must be a whole number >= 1; got 0"),
    (["cram", "--model", "x", "--lr", "0"], "argument --lr: must be a number > 0; got 0.0"),
    (["cram", "--model", "x", "--precision", "abc"], "argument --precision: must be a finite number > 0; got 'abc'"),
    (["geometry", "--model", "x", "--cells", "-1"], "argument --cells: must be a whole number >= 0; got -1"),
    (["geometry", "--model", "x", "--effective-eps", "1.5"],
     "argument --effective-eps: must be a whole number >= 0; got '1.5'"),
    (["sweep", "x.yaml", "--workers", "0"], "argument --workers: must be a whole number >= 1; got 0"),
    (["sweep", "x.yaml", "--write", "nfs"], "argument --write: invalid choice: 'nfs'"),
    (["cram", "--m", "1"], "the following arguments are required: --model"),
    (["cram", "--model", "x", "--source", "pg19"], "invalid choice: 'pg19'"),
    (["nonsense"], "invalid choice: 'nonsense'"),
])
def test_bad_arguments_one_line_exit_2(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_library_errors_are_one_line_exit_2(tmp_path, capsys):
    pytest.importorskip("accesslib.engine.cramming")
    code = main(["cram", "--model", "tiny:nope", "--m", "1", "--store", str(tmp_path / "r.sqlite"),
                 "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "family must be one of" in err[0]
    assert main(["cram", "--model", "tiny:gpt_neox", "--search", "grid", "--no-progress"]) == 2
    assert capsys.readouterr().err == ("accesslib cram: error: --lengths must be given with --search grid; "
                                       "got None\n")
    assert main(["cram", "--model", "tiny:gpt_neox:x", "--no-progress"]) == 2
    assert ("--model must be tiny:FAMILY or tiny:FAMILY:d for a tiny random model; got 'tiny:gpt_neox:x'"
            in capsys.readouterr().err)


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "accesslib", "cram", "--model", "x", "--samples", "-1"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_geometry_prints_every_slope_and_writes_the_record(tmp_path, capsys):
    import json
    import math

    from accesslib.results import bundles
    from accesslib.theory import bounds
    out = tmp_path / "g.json"
    argv = ["geometry", "--model", "tiny-d32-v257", "--lengths", "4", "16", "--per-length", "40",
            "--cells", "20000", "--effective-eps", "4", "--out", str(out), "--threads", "1",
            "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    rec = json.loads(out.read_text())
    # the record is what the apps read, and its slopes are the printed ones
    assert rec["n_samples"] == 80 and rec["cells_n_samples"] == 20_000
    assert rec["s_conv_zero_hit"] == "bound" and "s_conv_drop" in rec
    assert sum(rec["cell_hits"]["counts"]) == 20_000
    assert len(rec["effective_eps"]["rel"]) == 4
    assert rec["slopes"]["ball"] == pytest.approx(bounds.slope(32, 257, rec["eps"], rec["r_inf"]))
    a = bundles.load("cram", "tiny-d32-v257")["slope"]["slope"]   # the shipped measured slope
    for kind in ("ball", "box", "cone", "cells"):
        C = rec["slopes"][kind]
        assert f"{C:9.2f}" in text and f"{C / a:8.1f}" in text
    assert f"s_conv {rec['s_conv']:.3f} (bound)" in text
    # s_conv on the first n of the samples (chunks of 4,096), printed and recorded
    conv = rec["s_conv_convergence"]
    assert [r["n"] for r in conv] == [4096, 8192, 12_288, 20_000] and conv[-1]["s_conv"] == rec["s_conv"]
    assert "s_conv against the first n cell samples" in text
    for r in conv:
        assert f"n {r['n']:>12,}  s_conv {r['s_conv']:8.3f}  drop rule {r['s_conv_drop']:8.3f}" in text
    assert math.isclose(rec["eps"], rec["r_inf"] * 2.0 ** -11, rel_tol=1e-9)


@pytest.mark.parametrize("argv, msg", [
    (["geometry", "--model", "tiny-d32-v257", "--out", "/nonexistent/dir/g.json"],
     "accesslib geometry: error: --out must be a file in an existing folder (/nonexistent/dir does not "
     "exist); got '/nonexistent/dir/g.json'"),
])
def test_geometry_bad_values_one_line(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_every_subcommand_is_in_the_cli():
    # no plugin registry: the command line lists every subcommand itself
    from accesslib import cli
    assert {"cram", "geometry", "sweep", "app", "store"} <= set(cli.SUBCOMMANDS)
    assert not hasattr(cli, "PLUGIN_MODULES")
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(cli.SUBCOMMANDS)


def test_cram_bos_puts_the_models_bos_before_the_memory(tmp_path, capsys):
    from accesslib.engine.cramming import default_prefix
    from accesslib.models.loading import load_model
    from accesslib.results.store import ResultsStore
    store = tmp_path / "r.sqlite"
    argv = ["cram", "--model", "tiny-d32-v257", "--m", "1", "--samples", "2", "--source", "tokens",
            "--lengths", "2", "--protocol", "fast", "--max-steps", "20", "--bos", "--store", str(store),
            "--threads", "1", "--no-progress"]
    assert main(argv) == 0
    rows = ResultsStore(store).rows()
    bos = default_prefix(load_model("tiny-d32-v257"))
    assert len(rows) == 2 and bos and all(r["prefix_ids"] == bos for r in rows)


# --- accesslib app, accesslib --version, missing extras ------------------------------------------
def test_version_prints_the_installed_version(capsys):
    import accesslib
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"accesslib {accesslib.__version__}\n"


def test_app_runs_the_voila_server_of_make_app(monkeypatch):
    from pathlib import Path

    from accesslib import cli
    monkeypatch.delenv("ACCESSLIB_PUBLIC", raising=False)
    argv, folder, env = cli.voila_command(port=1234, public=True)
    assert argv[:3] == [sys.executable, "-m", "voila"] and argv[-1] == "."
    assert set(cli.VOILA_FLAGS) | {"--port=1234"} == set(argv[3:-1])
    assert env["ACCESSLIB_PUBLIC"] == "1" and "ACCESSLIB_PUBLIC" not in cli.voila_command()[2]
    # an editable install serves the repository's notebooks (a wheel: accesslib/notebooks/)
    root = Path(__file__).resolve().parents[1]
    assert folder == root / "notebooks" and (folder / "00-index.ipynb").is_file()
    make = (root / "Makefile").read_text()
    assert "$(VENV)/bin/accesslib app --port=$(PORT)" in make  # `make app` is `accesslib app`


def test_app_on_a_port_in_use_says_so_and_starts_nothing(monkeypatch, capsys):
    """Voila would move to the next free port while `accesslib app` prints the one asked for: a
    port that a server already listens on is refused in one line, with a free way out."""
    import os
    import socket

    from accesslib import cli
    pytest.importorskip("voila")
    assert "--Voila.port_retries=0" in cli.VOILA_FLAGS   # nor does the server move on a race
    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail("the server was started"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["app", "--port", str(port)]) == 1
    out, err = capsys.readouterr()
    assert "accesslib apps:" not in out
    assert err.strip() == (f"accesslib app: error: port {port} on 127.0.0.1 is in use (another accesslib app or "
                           f"server?): stop it, or serve on another port: accesslib app --port {port + 1} "
                           f"(make app PORT={port + 1})")
    assert not cli._port_in_use(port)   # closed: free again


@pytest.mark.parametrize("argv, module, extra", [
    (["app", "--port", "8866"], "voila", "apps"),
    (["sweep", "examples/sweep-tiny.yaml"], "distributed", "sweep"),
])
def test_a_missing_extra_is_named_in_one_line(argv, module, extra, monkeypatch, capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f'accesslib {argv[0]}: {module} not installed: pip install "accesslib[{extra}]"']


# --- accesslib store ---------------------------------------------------------------------------
def _store(path, *, settings=None, ph="p0"):
    from accesslib.results.store import ResultsStore

    st = ResultsStore(path)
    rows = [dict(model=mod, m=m, n=n, source="tokens", target_ids=[i, n], seed=0, protocol_hash=ph,
                 success=n < 2 * m + i % 3, steps=n + i)
            for mod in ("tiny", "other") for m in (1, 2) for n in (1, 2, 3, 4, 5) for i in range(4)]
    st.add_many(rows, settings=settings)
    return st


def test_store_export_csv_with_filters_and_to_stdout(tmp_path, capsys):
    import csv

    from accesslib.results.store import EXPORT_COLUMNS
    st = _store(tmp_path / "r.sqlite")
    out = tmp_path / "out.csv"
    assert main(["store", "export", "--csv", str(out), "--model", "tiny", "--m", "2", "--store", str(st.path)]) == 0
    assert capsys.readouterr().out == f"wrote 20 strings to {out}\n"
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 20 and tuple(rows[0]) == EXPORT_COLUMNS
    assert {(r["model"], r["m"]) for r in rows} == {("tiny", "2")}
    assert main(["store", "export", "--csv", "-", "--source", "tokens", "--store", str(st.path)]) == 0
    cap = capsys.readouterr()
    assert cap.out.count("\n") == 81 and cap.err == "80 strings written\n"


def test_store_export_parquet_without_pyarrow_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    st = _store(tmp_path / "r.sqlite")
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # as if not installed
    assert main(["store", "export", "--parquet", str(tmp_path / "r.parquet"), "--store", str(st.path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("accesslib store export: error: writing Parquet needs")
    assert "pip install" in err and "pyarrow" in err and not (tmp_path / "r.parquet").exists()


def test_store_export_parquet(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    st = _store(tmp_path / "r.sqlite")
    assert main(["store", "export", "--parquet", str(tmp_path / "r.parquet"), "--model", "other",
                 "--store", str(st.path)]) == 0
    df = pd.read_parquet(tmp_path / "r.parquet")
    assert len(df) == 40 and set(df["model"]) == {"other"}


def test_store_summary_names_the_protocols(tmp_path, capsys):
    from accesslib.experiments.curves import hashed_settings, protocol_hash_for
    from accesslib.theory.stats import fit_n50
    path = tmp_path / "r.sqlite"
    st = _store(path, settings=hashed_settings("fast"), ph=protocol_hash_for("fast"))
    custom = protocol_hash_for("paper", {"max_steps": 30})
    st.add(dict(model="tiny", m=1, n=7, source="words", target_ids=[7], seed=0, protocol_hash=custom, success=True),
           settings=hashed_settings("paper", {"max_steps": 30}))
    assert main(["store", "summary", "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"store {path}: 81 strings in 5 curves"
    assert lines[1].split()[:4] == ["model", "m", "source", "protocol"]
    fast = [line for line in lines if line.startswith("tiny ") and " tokens " in line]
    assert len(fast) == 2 and all(f"{protocol_hash_for('fast')} fast " in line for line in fast)
    fit = fit_n50(st.curve("tiny", 1, "tokens", protocol_hash_for("fast")))
    assert f"{fit.n50:.1f} +- {fit.stderr:.1f}" in fast[0] and " 20 " in fast[0]
    (paper,) = [line for line in lines if " words " in line]
    assert f"{custom} paper, max_steps=30" in paper and "> 7 (all succeeded)" in paper
    assert main(["store", "summary", "--store", str(path), "--model", "other", "--m", "1"]) == 0
    assert "20 strings in 1 curves (model=['other'], m=[1])" in capsys.readouterr().out
    # strings an interrupted run kept mid-way are counted on the second line
    st.save_inflight({"a": (b"x", 120), "b": (b"y", 1400)})
    assert main(["store", "summary", "--store", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("2 strings kept mid-way (steps 120-1400, last kept ") and out[1].endswith(
        "the run that crammed them resumes them when started again")
    # ... and the n50 of the finished strings is named for what it is
    assert out[-1].startswith("n50 above: of the finished strings only, a biased sample while strings are still "
                              "being crammed") and "accesslib store ladder" in out[-1]
    assert not any(line.startswith("n50 above") for line in lines)
    assert not any("finished strings keep the state" in line for line in lines + out)
    # finished strings that keep the state they finished in: a larger budget can go on from them
    st.save_final({"c": (b"z", 300)})
    assert main(["store", "summary", "--store", str(path)]) == 0
    assert ("1 finished strings keep the state they finished in: a run of a constant learning rate with more "
            "steps or patience goes on from it (make_bundles.py --extend-from STEPS/PATIENCE)"
            ) in capsys.readouterr().out.splitlines()


def test_store_merge(tmp_path, capsys):
    from accesslib.results.store import ResultsStore
    old = _store(tmp_path / "old.sqlite")
    new = tmp_path / "new.sqlite"
    assert main(["store", "merge", str(old.path), "--store", str(new)]) == 0
    assert capsys.readouterr().out == f"copied 80 new strings from {old.path} into {new} (80 in all)\n"
    assert ResultsStore(new).count() == 80
    # with the states its strings finished in (a larger budget goes on from them), kept once; a
    # string this store holds already keeps its own state, or none (never another run's beside
    # this store's row)
    from accesslib.results.store import KEY_COLUMNS, inflight_key
    held = inflight_key({c: old.rows()[0][c] for c in KEY_COLUMNS})
    old.save_final({"a": (b"state a", 300), "b": (b"state b", 40), held: (b"their run's", 70)})
    ResultsStore(new).save_final({"b": (b"ours", 50)})
    assert main(["store", "merge", str(old.path), "--store", str(new)]) == 0
    merged = ResultsStore(new)
    assert merged.finals() == 2 and merged.load_final("a") == b"state a" and merged.load_final("b") == b"ours"
    assert merged.load_final(held) is None
    fresh = tmp_path / "fresh.sqlite"          # a store without the string takes its state with its row
    assert main(["store", "merge", str(old.path), "--store", str(fresh)]) == 0
    assert ResultsStore(fresh).load_final(held) == b"their run's"


def test_store_backup(tmp_path, capsys):
    from accesslib.results.store import ResultsStore
    st = _store(tmp_path / "r.sqlite")
    st.save_inflight({"a": (b"state", 120)})
    out = tmp_path / "b.sqlite"
    out.write_text("an older backup")                      # replaced
    assert main(["store", "backup", str(out), "--store", str(st.path)]) == 0
    assert capsys.readouterr().out == f"wrote {out}: 80 finished strings and the saved state of 1 unfinished ones\n"
    # one self-contained file, no temporary file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite", "r.sqlite", "r.sqlite-shm", "r.sqlite-wal"]
    copy = ResultsStore(out)
    assert copy.count() == 80 and copy.load_inflight("a") == b"state"
    st.save_final({"f": (b"final", 9000)})         # and the states finished strings keep
    assert main(["store", "backup", str(out), "--store", str(st.path)]) == 0
    assert ResultsStore(out).load_final("f") == b"final"


def test_kept_pace_is_the_median_strings_steps_over_its_time():
    from datetime import datetime, timezone

    from accesslib.results.store import kept_pace
    before = [dict(key="a", steps=100, updated_at="2026-12-06T06:00:00+00:00"),
              dict(key="b", steps=200, updated_at="2026-12-06T06:00:30+00:00"),
              dict(key="c", steps=300, updated_at="2026-12-06T06:00:00+00:00"),
              dict(key="gone", steps=50, updated_at="2026-12-06T06:00:00+00:00")]
    now = [dict(key="a", steps=160, updated_at="2026-12-06T06:03:00+00:00"),    # 3.0 s per step
           dict(key="b", steps=220, updated_at="2026-12-06T06:01:30+00:00"),    # 3.0 s per step
           dict(key="c", steps=300, updated_at="2026-12-06T06:00:00+00:00"),    # not saved again
           dict(key="new", steps=10, updated_at="2026-12-06T06:03:00+00:00"),   # not kept before
           dict(key="d", steps=400, updated_at="2026-12-06T06:03:00+00:00")]
    before.append(dict(key="d", steps=360, updated_at="2026-12-06T06:00:00+00:00"))   # 4.5 s per step
    pace = kept_pace(now, before)
    assert pace == dict(strings=3, steps=60, seconds=180.0, seconds_per_step=3.0, open=5, lowest_step=10)
    assert kept_pace(now[2:3], before) is None and kept_pace([], before) is None
    # resumed at 06:02 from the copy (a fresh clone): a made its 60 steps in 60 s and d its 40 (the upper
    # median); b was saved again before then (not a step of this run's: left out)
    later = kept_pace(now, before, running_since="2026-12-06T06:02:00+00:00")
    assert later == dict(strings=2, steps=40, seconds=60.0, seconds_per_step=1.5, open=5, lowest_step=10)
    assert kept_pace(now, before, running_since="2026-12-06T05:00:00+00:00") == pace   # running before the copy
    # a string's kept state says when the session writing now took it on (its first step there: after its
    # model loaded): a counts from 06:02:30 at step 130 (30 steps in 30 s), and "new", not kept before, from
    # 06:02:50 at step 0 (10 steps in 10 s); d took it on before the copy was kept (counted from the copy)
    at = datetime(2026, 12, 6, 6, 2, 30, tzinfo=timezone.utc).timestamp()
    went = [dict(now[0], went_on=(130, at)), now[1], now[2], dict(now[3], went_on=(0, at + 20)),
            dict(now[4], went_on=(300, at - 3600))]
    # (1.0, 1.0, 3.0 and 4.5 s per step: the upper median is b's)
    assert kept_pace(went, before) == dict(strings=4, steps=20, seconds=60.0, seconds_per_step=3.0, open=5,
                                           lowest_step=10)
    # started at 06:02: b was saved again before then (left out), d counts from then (40 steps in 60 s)
    assert kept_pace(went, before, running_since="2026-12-06T06:02:00+00:00") == dict(
        strings=3, steps=30, seconds=30.0, seconds_per_step=1.0, open=5, lowest_step=10)


def test_store_pace_against_an_earlier_copy(tmp_path, capsys):
    import sqlite3
    st = _store(tmp_path / "r.sqlite")
    st.save_inflight({"a": (b"x", 1000), "b": (b"y", 2000)})
    st.close()
    con = sqlite3.connect(st.path)
    con.execute("UPDATE inflight SET updated_at = '2026-12-06T06:00:00+00:00'")
    con.commit()
    con.close()
    assert main(["store", "backup", str(tmp_path / "snap.sqlite"), "--store", str(st.path)]) == 0   # a snapshot
    con = sqlite3.connect(tmp_path / "snap.sqlite")      # as committed: a rollback-journal file, which opening
    con.execute("PRAGMA journal_mode=DELETE")             # it as a store would turn to WAL (the file changed)
    con.close()
    snap = (tmp_path / "snap.sqlite").read_bytes()
    assert main(["store", "pace", "--since", str(tmp_path / "snap.sqlite"), "--store", str(st.path)]) == 0
    assert "none saved again since" in capsys.readouterr().out
    st.save_inflight({"a": (b"x", 1300), "b": (b"y", 2300)})          # 300 steps in 20 minutes: 4 s per step
    st.close()
    con = sqlite3.connect(st.path)
    con.execute("UPDATE inflight SET updated_at = '2026-12-06T06:20:00+00:00'")
    con.commit()
    con.close()
    assert main(["store", "pace", "--since", str(tmp_path / "snap.sqlite"), "--store", str(st.path),
                 "--to-step", "9000"]) == 0
    # the earlier copy (a committed snapshot) is only read: byte for byte the same, no -wal or -shm beside it
    assert (tmp_path / "snap.sqlite").read_bytes() == snap
    assert not (tmp_path / "snap.sqlite-wal").exists() and not (tmp_path / "snap.sqlite-shm").exists()
    assert capsys.readouterr().out == (
        f"2 strings went on since {tmp_path / 'snap.sqlite'}: 4.00 s per step (median string: 300 steps in 0:20:00); "
        "the 2 open strings reach step 9,000 in at most 8.6 hours at that pace (7,700 steps from the least "
        "advanced; fewer if they cram or end by patience)\n")
    # the run resumed from the snapshot at 06:10: its 300 steps took 10 minutes, not 20
    assert main(["store", "pace", "--since", str(tmp_path / "snap.sqlite"), "--store", str(st.path),
                 "--running-since", "2026-12-06T06:10:00+00:00"]) == 0
    assert "2.00 s per step (median string: 300 steps in 0:10:00)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["store", "pace", "--since", "{tmp}/absent.sqlite", "--store", "{tmp}/r.sqlite"],
     "accesslib store pace: error: --since must be an existing results store file (an earlier copy of the store)"),
    (["store", "pace", "--since", "{tmp}/r.sqlite", "--store", "{tmp}/r.sqlite", "--to-step", "0"],
     "accesslib store pace: error: --to-step must be a positive number of steps; got 0"),
    (["store", "pace", "--since", "{tmp}/r.sqlite", "--store", "{tmp}/r.sqlite", "--running-since", "18:46"],
     "accesslib store pace: error: --running-since must be an ISO time with its UTC offset (e.g. "
     "2026-12-06T18:46:00+00:00); got '18:46'"),
    (["store", "pace", "--since", "{tmp}/r.sqlite", "--store", "{tmp}/r.sqlite", "--running-since",
      "2026-12-06T18:46:00"],
     "accesslib store pace: error: --running-since must be an ISO time with its UTC offset"),
    (["store", "backup", "{tmp}/b.sqlite", "--store", "{tmp}/absent.sqlite"],
     "accesslib store backup: error: --store must be an existing results store file"),
    (["store", "backup", "/nonexistent/dir/b.sqlite", "--store", "{tmp}/r.sqlite"],
     "accesslib store backup: error: FILE must be a file in an existing folder (/nonexistent/dir does not exist)"),
    (["store", "backup", "{tmp}/r.sqlite", "--store", "{tmp}/r.sqlite"],
     "accesslib store backup: error: dest must be a file other than the store itself"),
    (["store", "backup", "{tmp}", "--store", "{tmp}/r.sqlite"],
     "accesslib store backup: error: dest must be a file name, not a folder"),
    (["store", "summary", "--store", "{tmp}/absent.sqlite"],
     "accesslib store summary: error: --store must be an existing results store file; got '{tmp}/absent.sqlite'"),
    (["store", "summary", "--store", "{tmp}/text.sqlite"],
     "accesslib store summary: error: results store {tmp}/text.sqlite: not an accesslib results store "
     "(not a SQLite database)"),
    (["store", "export", "--csv", "/nonexistent/dir/x.csv", "--store", "{tmp}/r.sqlite"],
     "accesslib store export: error: --csv must be a file in an existing folder (/nonexistent/dir does not exist)"),
    (["store", "merge", "{tmp}/absent.sqlite", "--store", "{tmp}/r.sqlite"],
     "accesslib store merge: error: FILE must be an existing results store file"),
    (["store", "merge", "{tmp}/r.sqlite", "--store", "{tmp}/r.sqlite"],
     "accesslib store merge: error: other must be a different file from this store"),
    (["store", "summary", "--m", "0"], "argument --m: must be a whole number >= 1; got 0"),
    (["store", "export", "--store", "x"], "one of the arguments --csv --parquet is required"),
    (["store", "export", "--csv", "a", "--parquet", "b"], "argument --parquet: not allowed with argument --csv"),
    (["store", "nonsense"], "invalid choice: 'nonsense'"),
])
def test_store_errors_are_one_line_exit_2(tmp_path, capsys, argv, msg):
    _store(tmp_path / "r.sqlite")
    (tmp_path / "text.sqlite").write_text("not a database")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and msg.replace("{tmp}", str(tmp_path)) in err and len(err.strip().splitlines()) == 1


def test_store_summary_reads_the_default_store_after_moving_it(tmp_path, capsys, monkeypatch):
    import platformdirs

    from accesslib import config
    from accesslib.results import store as store_mod
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("ACCESSLIB_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(store_mod, "_NOTICED", set())
    monkeypatch.setattr(config, "MOUNTS_FILE", str(tmp_path / "no-mounts"))
    assert main(["store", "summary"]) == 2
    assert "error: no results store at" in capsys.readouterr().err
    (tmp_path / ".cache" / "accesslib").mkdir(parents=True)
    _store(tmp_path / ".cache" / "accesslib" / "results.sqlite")
    assert main(["store", "summary"]) == 0
    cap = capsys.readouterr()
    new = tmp_path / platformdirs.user_data_dir("accesslib", appauthor=False) / "results.sqlite"
    assert cap.out.startswith(f"store {new}: 80 strings in 4 curves")
    assert "moved the results store (80 strings)" in cap.err and len(cap.err.strip().splitlines()) == 1


def test_the_parser_offers_every_target_source_the_engine_draws(capsys):
    from accesslib import cli
    from accesslib.engine import targets
    assert cli.TARGET_SOURCES == targets.SOURCES
    with pytest.raises(SystemExit):
        main(["store", "summary", "--help"])
    out = capsys.readouterr().out
    assert "(natural, words, words100k, glove100k, tokens)" in " ".join(out.split())


def test_store_summary_by_length_says_how_the_failures_ended(tmp_path, capsys):
    """--by-length: per curve and length, how many crammed and at which steps, and whether the
    patience or the step budget ended the others (the question [A]'s protocol raises)."""
    from accesslib.results.store import ResultsStore
    st = ResultsStore(tmp_path / "r.sqlite")
    rows = [(True, 580, None), (True, 1098, None), (False, 856, "patience"), (False, 2318, "patience"),
            (False, 3000, "max_steps"), (False, 12, "non-finite loss")]
    for i, (ok, steps, reason) in enumerate(rows):
        st.add(dict(model="smol", m=1, n=12, source="tokens", target_ids=[i, 1], seed=0, protocol_hash="p",
                    sample=i, success=ok, steps=steps, reason=reason))
    st.add(dict(model="smol", m=1, n=17, source="tokens", target_ids=[9, 9], seed=0, protocol_hash="p", sample=0,
                success=False, steps=1214, reason="patience"))
    assert main(["store", "summary", "--by-length", "--store", str(st.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("finished strings by length (steps: the range over the strings):")
    assert out[at + 1].split() == ["model", "source", "protocol", "m", "n", "strings", "crammed", "steps", "patience",
                                   "max_steps", "other", "steps", "(not", "crammed)"]
    assert out[at + 2].split() == ["smol", "tokens", "p", "1", "12", "6", "2", "580-1098", "2", "1", "1", "12-3000"]
    assert out[at + 3].split() == ["smol", "tokens", "p", "1", "17", "1", "0", "-", "1", "0", "0", "1214"]
    assert main(["store", "summary", "--store", str(st.path)]) == 0     # without it: no such table
    assert "by length" not in capsys.readouterr().out


def test_store_summary_by_length_with_a_smaller_patience(tmp_path, capsys):
    """--patience P: how many of the crammed strings a run with that patience on accuracy would
    have crammed, read from when each one's best accuracy rose; strings without a history are
    counted apart; bad use is one line and exit status 2."""
    from accesslib.results.store import ResultsStore
    st = ResultsStore(tmp_path / "r.sqlite")
    rows = [(True, 1506, [[0, 0.1], [1000, 0.5], [1506, 1.0]]),     # a gap of 1000 before cramming
            (True, 1952, [[0, 0.1], [1445, 0.9], [1952, 1.0]]),     # 507: stopped at 1945 by 500
            (True, 300, [[0, 0.2], [250, 0.9], [300, 1.0]]),        # never a gap near 500
            (True, 400, None),                                      # kept before histories were
            (False, 2000, [[0, 0.1], [500, 0.6]])]
    for i, (ok, steps, hist) in enumerate(rows):
        st.add(dict(model="smol", m=1, n=24, source="glove100k", target_ids=[i, 1], seed=0, protocol_hash="p",
                    sample=i, success=ok, steps=steps, reason=None if ok else "patience", accuracy_history=hist))
    assert main(["store", "summary", "--by-length", "--patience", "500", "--store", str(st.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("finished strings by length (steps: the range over the strings):")
    assert out[at + 1].split()[:10] == ["model", "source", "protocol", "m", "n", "strings", "crammed", "steps",
                                        "crammed,", "patience"]
    assert out[at + 2].split() == ["smol", "glove100k", "p", "1", "24", "5", "4", "300-1952", "1", "(+1", "unknown)",
                                   "1", "0", "0", "2000"]
    assert main(["store", "summary", "--by-length", "--patience", "1500", "--store", str(st.path)]) == 0
    assert capsys.readouterr().out.splitlines()[at + 2].split()[8:11] == ["3", "(+1", "unknown)"]
    # --stalls: the longest stall of each crammed string, max / median (1000, 1445 and 250 here)
    assert main(["store", "summary", "--by-length", "--stalls", "--store", str(st.path)]) == 0
    row = capsys.readouterr().out.splitlines()[at + 2].split()
    assert row[8:13] == ["1445", "/", "1000", "(+1", "unknown)"]
    from accesslib.results.bundles import longest_stall, patience_stop
    for hist, steps in (([[0, 0.1], [1000, 0.5]], 1506), ([[0, 0.1], [1445, 0.9]], 1952), ([[0, 0.2], [250, 0.9]], 300)):
        for patience in (250, 500, 507, 1000, 1500):   # crammed under a patience iff no stall exceeds it
            assert (longest_stall(hist, steps) <= patience) is (patience_stop(hist, patience) >= steps)
    assert longest_stall([], 40) is None and longest_stall([[0, 0.5]], 40) == 40
    for bad, words in ((["--stalls"], "--stalls goes with --by-length"),
                       (["--patience", "500"], "--patience goes with --by-length"),
                       (["--by-length", "--patience", "0"], "--patience must be a number of steps >= 1; got 0")):
        assert main(["store", "summary", *bad, "--store", str(st.path)]) == 2
        assert words in capsys.readouterr().err
