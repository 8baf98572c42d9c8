"""benchmarks/runs/runs.sh, the long real-model runs of issue 18: every run's arguments are a
valid make_bundles.py command line (a typo would only show hours into a session otherwise), and
bad input is refused with a message naming it."""
import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "runs" / "runs.sh"


def _runs(*argv):
    env = dict(os.environ, PY="/nonexistent/python")   # nothing here may start a run
    return subprocess.run(["bash", str(RUNS), *argv], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(scope="module")
def make_bundles():
    spec = importlib.util.spec_from_file_location("make_bundles_runs", ROOT / "scripts" / "make_bundles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_run_is_a_valid_make_bundles_command(make_bundles):
    names = _runs("names").stdout.split()
    assert names == ["gemma-n50", "smol-tokens", "smol-glove"]
    for name in names:
        r = _runs("args", name)
        assert r.returncode == 0, r.stderr
        argv = r.stdout.split()
        a = make_bundles.build_parser().parse_args(argv)          # SystemExit on any bad option
        assert a.m == [1] and a.samples == 6 and a.search == "grid" and a.no_geometry, name
        lengths = make_bundles.parse_lengths(a.lengths, a.m, pytest.fail)[1]
        assert len(lengths) >= 4 and lengths == sorted(lengths), name
    gemma = make_bundles.build_parser().parse_args(_runs("args", "gemma-n50").stdout.split())
    # [A]'s protocol and layout, their own word list (docs/gemma.md, section 5)
    assert (gemma.models, gemma.protocol, gemma.source, gemma.add_special_tokens) == (
        ["gemma-3-270m"], "paper", "glove100k", True)
    smol = make_bundles.build_parser().parse_args(_runs("args", "smol-tokens").stdout.split())
    assert (smol.max_steps, smol.patience, smol.bos, smol.source) == (4500, 900, True, "tokens")


@pytest.mark.parametrize("argv, msg", [
    (["start", "gemma-n50,nope"], "unknown run 'nope' (one of: gemma-n50 smol-tokens smol-glove)"),
    (["args", "nope"], "unknown run 'nope'"),
])
def test_unknown_runs_are_named_and_nothing_starts(argv, msg, tmp_path):
    r = _runs(*argv)
    assert r.returncode == 2 and msg in r.stderr and "started" not in r.stdout


def test_no_action_prints_the_usage():
    r = _runs()
    assert r.returncode == 2 and "runs.sh start NAME" in r.stdout and "smol-glove" in r.stdout
