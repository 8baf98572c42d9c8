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
    assert set(cli.SUBCOMMANDS) == {"cram", "geometry", "sweep"}
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
