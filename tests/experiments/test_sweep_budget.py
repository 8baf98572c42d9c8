"""The sweep's budget check (accesslib.experiments.sweep.budget, `accesslib sweep --budget-check`):
the same sweep at m = 1 and the largest m with 3x the step budget, and the verdict per model."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from accesslib.experiments import sweep
from accesslib.experiments.bundling import n50_moved, usable_n50
from accesslib.theory.stats import fit_n50

torch = pytest.importorskip("torch")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sweep-tiny.yaml"


pytestmark = pytest.mark.usefixtures("one_thread")


def test_budget_spec():
    spec = sweep.load_spec(EXAMPLE)
    check = sweep.budget_spec(spec)
    assert check.m == [1, 2] and check.name == "sweep-tiny-budget-x3"
    assert check.engine == dict(spec.engine, max_steps=240, patience=120)
    assert (check.lengths, check.samples, check.source, check.seeds) == (spec.lengths, spec.samples, spec.source,
                                                                         spec.seeds)
    assert sweep.protocol_hash_of(check) != sweep.protocol_hash_of(spec)
    assert sweep.engine_steps(spec) == 80 and sweep.engine_steps(check) == 240
    # a named protocol's own budget: the paper's 3000 steps and patience 500, x2
    paper = sweep.budget_spec(spec.replace(m=[1, 3, 5], engine={"protocol": "paper"}), 2)
    assert paper.m == [1, 5] and paper.engine == {"protocol": "paper", "max_steps": 6000, "patience": 1000}
    with pytest.raises(ValueError, match="factor must be a whole number >= 2; got 1"):
        sweep.budget_spec(spec, 1)


def test_the_check_runs_and_says_whether_n50_moved(tmp_path, capsys):
    from accesslib.cli import main

    store = str(tmp_path / "s.sqlite")
    spec = sweep.load_spec(EXAMPLE, store=store)
    assert sweep.budget_table(spec)[0]["verdict"] == "not measured"
    assert main(["sweep", str(EXAMPLE), "--store", store, "--scheduler", "inprocess", "--no-progress",
                 "--budget-check"]) in (0, 1)
    out = capsys.readouterr().out
    assert "budget check (sweep-tiny-budget-x3, 240 steps):" in out
    rows = sweep.budget_table(spec)
    assert [(r["model"], r["m"]) for r in rows] == [("tiny-gpt2-random", 1), ("tiny-gpt2-random", 2)]
    base, longer = sweep.sweep_curves(spec), sweep.sweep_curves(sweep.budget_spec(spec))
    for r in rows:
        assert r["strings"] == r["strings_x"] == 30 and r["max_steps"] == [80, 240]
        for curve, key in ((base, ""), (longer, "_x")):
            c = curve[("tiny-gpt2-random", r["m"])]
            fit = fit_n50(c)
            want = usable_n50(*[v if math.isfinite(v) else None for v in (fit.n50, fit.stderr, fit.k)],
                              fit.status, sorted(c))
            assert (r["n50" + key], r["stderr" + key]) == want
        assert (r["moved"], r["shift"]) == n50_moved(r["n50"], r["stderr"], r["n50_x"], r["stderr_x"])
    moved = [r["moved"] for r in rows]
    verdict = ("budget-limited" if True in moved else "inconclusive" if None in moved else "converged")
    assert {r["verdict"] for r in rows} == {verdict}
    assert out.rstrip().endswith(f"tiny-gpt2-random: {verdict}")
    assert sweep.format_budget(rows).splitlines()[0].split() == ["model", "m", "n50,", "80", "steps", "n50,",
                                                                 "240", "steps", "moved"]
    # a second run finds everything in the store; a dry run lists both job sets
    assert main(["sweep", str(EXAMPLE), "--store", store, "--scheduler", "inprocess", "--no-progress",
                 "--budget-check"]) in (0, 1)
    assert "0 jobs run, 10 already done" in capsys.readouterr().out
    assert main(["sweep", str(EXAMPLE), "--store", store, "--dry-run", "--budget-check", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("10 jobs, store") and "10 jobs (sweep-tiny-budget-x2: 160 steps), store" in out
