"""A smaller budget decided first: with ``hold`` the engine crams each string only until its outcome
within a smaller budget is known, sets the others aside with their states kept in the store, and
a run without it goes on from those states with exactly the result of an uninterrupted run."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from accesslib.engine.cramming import CramSession, cram, kept_states
from accesslib.experiments import bundling
from accesslib.experiments.curves import hold_rule
from accesslib.models import embedded
from accesslib.models.loading import tiny_model
from accesslib.results.bundles import ended_under
from accesslib.results.store import ResultsStore

V = 64
#: [A]'s rule with small budgets, one string at a time (batch-mates change a row's float rounding)
KW = dict(seed=5, lr=5e-2, prefix_ids=[0], patience_on="accuracy", batch_size=1)
SHORT, LONG = dict(max_steps=30, patience=20), dict(max_steps=160, patience=40)
SETTINGS = dict(schedule=None, patience_on="accuracy", **LONG)


def targets(seed=3, lens=(1, 2, 3, 4, 4, 5, 5, 6)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, V, (n,), generator=g).tolist() for n in lens]


class Tag:
    def __init__(self):
        self.how = None

    def done(self, res):
        self.how = "done"

    def held(self):
        self.how = "held"


def held_run(model, T, store, hold, only=None):
    """CramSession with ``hold`` over ``T`` (the indices ``only``), string i keyed k{i}."""
    s = CramSession(model, checkpoint=store, hold=hold, **KW, **LONG)
    tags = {}
    for i, t in enumerate(T):
        if only is None or i in only:
            tags[i] = Tag()
            s.submit(torch.tensor(t), 1, tag=tags[i], key=f"k{i}")
    s.run()
    return s, [tags[i].how for i in sorted(tags)]


def test_hold_decides_the_smaller_budget_and_the_run_goes_on_exactly(neox, tmp_path):
    T = targets() + targets(lens=(2, 3, 3, 4, 4, 5))
    short = cram(neox, T, 1, **KW, **SHORT)
    whole = cram(neox, T, 1, **KW, **LONG)
    assert 0 < short.n_success < whole.n_success < len(T)     # the budget matters here
    store = ResultsStore(tmp_path / "s.sqlite")
    hold = hold_rule(dict(SHORT), SETTINGS, store)
    s, tags = held_run(neox, T, store, hold)
    res = s.result()
    # the strings the smaller budget crams finish, at its steps and with its memories; the rest wait
    done = {r.index: r for r in res.strings}
    assert sorted(done) == [i for i, r in enumerate(short.strings) if r.success]
    for i, r in done.items():
        assert r.success and r.steps == short.strings[i].steps and torch.equal(r.memory, short.strings[i].memory)
    assert res.held == s.held == len(T) - short.n_success and not res.interrupted
    assert tags == ["done" if r.success else "held" for r in short.strings]
    inflight = store.inflight()
    assert sorted(k["key"] for k in inflight) == sorted(f"k{i}" for i, r in enumerate(short.strings) if not r.success)
    # each one set aside is a failure of the smaller budget already, and set aside no later than
    # one step after that budget ended it (its steps, or its patience)
    states = {k["key"]: k for k in kept_states(store)["states"]}
    for i, r in enumerate(short.strings):
        if not r.success:
            k = states[f"k{i}"]
            assert ended_under(k["step"], k["accuracy_history"], **SHORT)
            assert k["step"] == r.steps + 1
    # again with the hold: every kept one is set aside at once, nothing runs
    open_ = {i for i, r in enumerate(short.strings) if not r.success}
    again, tags2 = held_run(neox, T, store, hold, only=open_)
    assert again.held == res.held and again.steps_run == 0 and tags2 == ["held"] * len(open_)
    # without it: the run goes on from the kept states, with the uninterrupted run's results
    s3, _ = held_run(neox, T, store, None, only=open_)
    out = s3.result()
    assert out.resumed == res.held and out.held == 0 and store.inflight() == []
    got = {sorted(open_)[r.index]: r for r in out.strings}     # (indices in the order submitted)
    for i, want in enumerate(whole.strings):
        if short.strings[i].success:
            continue       # finished in the first run (its result went to its tag)
        assert (got[i].success, got[i].steps, got[i].reason) == (want.success, want.steps, want.reason)
        assert torch.equal(got[i].memory, want.memory) and got[i].accuracy_history == want.accuracy_history


def test_ended_under_reads_the_steps_and_the_patience_on_accuracy():
    hist = [[0, 0.1], [10, 0.3], [40, 0.6]]        # a stall of 30 after step 10
    assert not ended_under(30, hist, 30, 40)        # evaluated at 0..29: step 30 can still cram it
    assert ended_under(31, hist, 30, 40)
    assert not ended_under(30, hist, 100, 20) and ended_under(31, hist, 100, 20)   # patience 20 stops it at 30
    assert not ended_under(31, hist, 100, 30)       # 30 steps without a rise is not more than 30
    assert not ended_under(50, None, 100, 20) and not ended_under(50, hist, 100, None)   # nothing to read
    assert ended_under(101, None, 100, None)


def test_hold_rule_refuses_what_it_cannot_read(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    assert hold_rule(None, SETTINGS, None) is None
    for hold_at, settings, st, msg in [
        (dict(SHORT), SETTINGS, None, "hold_at must be given with a store"),
        (dict(max_steps=30), SETTINGS, store, "hold_at must be None or a dict of a smaller budget's max_steps"),
        (dict(SHORT), dict(SETTINGS, schedule="cosine"), store, "used with a constant learning rate only"),
        (dict(max_steps=200, patience=20), SETTINGS, store, "a budget below this run's own (160 steps, patience 40)"),
        (dict(LONG), SETTINGS, store, "a budget below this run's own"),
        (dict(max_steps=30, patience=0), SETTINGS, store, "hold_at['patience'] must be"),
        (dict(SHORT), dict(SETTINGS, patience_on="loss"), store, "hold_at['patience'] must be this run's patience (40) "
                                                                 "under patience on the loss"),
    ]:
        with pytest.raises(ValueError, match=None) as e:
            hold_rule(hold_at, settings, st)
        assert msg in str(e.value), (msg, str(e.value))
    # patience on the loss, the run's own patience: only the steps are read
    rule = hold_rule(dict(max_steps=30, patience=40), dict(SETTINGS, patience_on="loss"), store)
    assert not rule(30, [[0, 0.1]]) and rule(31, None)
    with pytest.raises(ValueError, match="hold must be None without a checkpoint"):
        CramSession(tiny_model("gpt_neox", d=16, vocab_size=V, layers=1, seed=0).model, hold=rule)


def test_make_bundles_hold_at(tmp_path):
    """`make_bundles.py --hold-at STEPS/PATIENCE`: the run writes no bundle, says how many strings it
    set aside, the store reads the smaller budget as decided, with the counts of a run of that budget;
    the same command without it writes the bundle of a run of the whole budget."""
    from accesslib.cli import main
    from accesslib.results import bundles

    script = str(Path(__file__).resolve().parents[2] / "scripts" / "make_bundles.py")
    base = [sys.executable, script, "--models", embedded.DEFAULT, "--m", "1", "--samples", "3", "--source", "natural",
            "--protocol", "paper", "--search", "grid", "--lengths", "1:6,9", "--no-geometry"]

    def run(*args, out, code=0):
        proc = subprocess.run(base + ["--out", str(tmp_path / out), *args], capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == code, proc.stderr[-2000:]
        return proc

    store = str(tmp_path / "s.sqlite")
    held = run("--max-steps", "120", "--patience", "30", "--hold-at", "40/10", "--store", store, out="held")
    assert "held: " in held.stdout and "string(s) set aside" in held.stdout, held.stdout[-2000:]
    assert not (tmp_path / "held").exists() or not list((tmp_path / "held").glob("*.json"))
    assert ResultsStore(store).inflight()
    assert main(["store", "ladder", "--budget", "40/10", "--decided", "--store", store]) == 0
    (curve,) = bundling.live_ladder(store, [(40, 10)])["curves"]
    rung = next(r for r in curve["rungs"] if (r["max_steps"], r["patience"]) == (40, 10))
    short = run("--max-steps", "40", "--patience", "10", "--store", str(tmp_path / "short.sqlite"), out="short")
    assert short.returncode == 0
    want = bundles.load("cram", embedded.DEFAULT, tmp_path / "short")["curves"][0]
    assert (rung["successes"], rung["totals"]) == (want["successes"], want["totals"])
    whole = run("--max-steps", "120", "--patience", "30", "--store", store, out="whole")
    assert whole.returncode == 0 and ResultsStore(store).inflight() == []
    fresh = run("--max-steps", "120", "--patience", "30", "--store", str(tmp_path / "f.sqlite"), out="fresh")
    assert fresh.returncode == 0
    got, ref = (bundles.load("cram", embedded.DEFAULT, tmp_path / o)["curves"][0] for o in ("whole", "fresh"))
    assert (got["successes"], got["totals"]) == (ref["successes"], ref["totals"])
    # refused before anything loads
    bad = run("--max-steps", "120", "--patience", "30", "--hold-at", "200/10", "--store", store, out="x", code=2)
    assert "--hold-at: hold_at must be a budget below this run's own (120 steps, patience 30)" in bad.stderr
    bad = run("--max-steps", "120", "--hold-at", "40-10", "--store", store, out="x", code=2)
    assert "--hold-at: expected STEPS/PATIENCE" in bad.stderr
    fast = [x if x != "paper" else "fast" for x in base]
    proc = subprocess.run(fast + ["--hold-at", "40/10", "--store", store], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "used with a constant learning rate only" in proc.stderr
