"""A larger budget goes on from a smaller one: the engine keeps the state each string finished in
(``final_states`` of the results store), and a run with more steps or a larger patience (the same
settings otherwise, a constant learning rate) resumes each string from there, with exactly the
result of a run with that budget from the start."""
import io

import pytest
import torch

import accesslib.engine.cramming as cramming
from accesslib.engine.cramming import cram
from accesslib.experiments.curves import accessibility_curves, carried_note, carries_up, protocol_hash_for
from accesslib.models import embedded
from accesslib.models.loading import load_model, tiny_model
from accesslib.results.store import ResultsStore

V = 64
#: [A]'s rule (constant learning rate, patience on teacher-forced accuracy), small budgets; one
#: string at a time, so that every run gives each string the same batch-mates (none): batch-mates
#: change a row's float rounding (about 1e-7 here) in any run, extended or not
KW = dict(seed=5, lr=5e-2, prefix_ids=[0], patience_on="accuracy", batch_size=1, keep_final=True)
SHORT, LONG = dict(max_steps=30, patience=20), dict(max_steps=160, patience=40)


def targets(seed=3, lens=(1, 2, 3, 4, 4, 5, 5, 6)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, V, (n,), generator=g).tolist() for n in lens]


def same(a, b):
    assert [(s.success, s.steps, s.reason) for s in a.strings] == [(s.success, s.steps, s.reason) for s in b.strings]
    for x, y in zip(a.strings, b.strings):
        assert torch.equal(x.memory, y.memory) and x.final_loss == y.final_loss
        assert x.accuracy_history == y.accuracy_history and x.greedy_ids == y.greedy_ids


def test_a_larger_budget_goes_on_where_the_smaller_one_finished(neox, tmp_path):
    T = targets()
    store = ResultsStore(tmp_path / "s.sqlite")
    short = cram(neox, T, 1, checkpoint=store, **KW, **SHORT)
    why = [s.reason for s in short.strings]
    assert "patience" in why and "max_steps" in why and None in why   # every way a string finishes
    assert store.finals() == len(T) and store.inflight() == []
    other = ResultsStore(tmp_path / "other.sqlite")       # kept only when asked for (a few KB a string)
    cram(neox, T, 1, checkpoint=other, **dict(KW, keep_final=False), **SHORT)
    assert other.finals() == 0
    cram(neox, T, 1, checkpoint=other, **KW, **SHORT, schedule="cosine")   # a schedule: never gone on from
    assert other.finals() == 0
    fresh = cram(neox, T, 1, **KW, **LONG)
    assert [s.steps for s in fresh.strings] != [s.steps for s in short.strings]   # the budget matters here
    longer = cram(neox, T, 1, checkpoint=store, extend=True, **KW, **LONG)
    assert longer.extended == longer.resumed == len(T) and all(s.extended for s in longer.strings)
    assert [s.resumed_at for s in longer.strings] == [s.steps for s in short.strings]
    same(longer, fresh)            # bit for bit, also the strings it crammed at once again
    # interrupted on the way, the longer run resumes as any run does, and ends the same
    store = ResultsStore(tmp_path / "cut.sqlite")
    cram(neox, T, 1, checkpoint=store, **KW, **SHORT)
    seen = []
    cut = cram(neox, T, 1, checkpoint=store, extend=True, on_step=seen.append, stop=lambda: len(seen) >= 25,
               **KW, **LONG)
    assert cut.interrupted and store.inflight()
    again = cram(neox, T, 1, checkpoint=store, extend=True, **KW, **LONG)
    same(again, fresh)
    assert all(s.extended for s in again.strings if s.resumed_at)
    # a larger patience alone, or more steps alone, goes on the same way
    for budget in (dict(SHORT, patience=LONG["patience"]), dict(SHORT, max_steps=LONG["max_steps"])):
        store = ResultsStore(tmp_path / f"{budget['max_steps']}-{budget['patience']}.sqlite")
        cram(neox, T, 1, checkpoint=store, **KW, **SHORT)
        same(cram(neox, T, 1, checkpoint=store, extend=True, **KW, **budget), cram(neox, T, 1, **KW, **budget))


def test_a_check_that_only_the_stop_called_is_not_kept(neox, tmp_path, monkeypatch):
    """A string right (teacher-forced) at the step the patience or the step budget stops it, with
    its greedy check not due, gets one then that a larger budget would not make; the state it finished in keeps the
    verify schedule from before that check, so the larger budget checks it when a run from the
    start would. Greedy decoding is made to fail on two steps in three (the same in every run), so
    that teacher-forced strings wait for their checks."""
    real_greedy, real_final = cramming.CramSession._greedy_for, cramming.CramSession._final_states
    stop_called = []

    def greedy_for(self, rows, mem):
        got = real_greedy(self, rows, mem)
        return {r: (g + 1) % V if self._state["step"][r] % 3 else g for r, g in got.items()}

    def final_states(self, reasons):
        stop_called.extend(r for r in reasons if r in self._schedule_before)
        return real_final(self, reasons)

    monkeypatch.setattr(cramming.CramSession, "_greedy_for", greedy_for)
    monkeypatch.setattr(cramming.CramSession, "_final_states", final_states)
    T = targets(lens=(1, 2, 3, 4))
    kw = dict(KW, patience_on="loss")        # a string right at every step goes on improving its loss
    store = ResultsStore(tmp_path / "s.sqlite")
    short = cram(neox, T, 1, checkpoint=store, **kw, max_steps=200, patience=3)
    assert stop_called and short.strings[0].reason == "max_steps" and short.strings[0].tf_success
    fresh = cram(neox, T, 1, **kw, max_steps=400, patience=40)
    assert fresh.strings[0].steps != 200
    same(cram(neox, T, 1, checkpoint=store, extend=True, **kw, max_steps=400, patience=40), fresh)


def test_a_state_that_cannot_be_gone_on_from_is_left_alone(neox, tmp_path):
    T = targets(lens=(3, 5))
    store = ResultsStore(tmp_path / "s.sqlite")
    cram(neox, T, 1, checkpoint=store, **KW, **LONG)
    kept = {k: store.load_final(k) for k in _keys(store)}
    # a smaller budget than the kept one, other settings, a schedule: crammed from the start
    for kw in (dict(KW, **SHORT), dict(KW, **LONG, lr=2e-2), dict(KW, **LONG, schedule="cosine")):
        got = cram(neox, T, 1, checkpoint=store, extend=True, **kw)
        assert got.extended == 0
        same(got, cram(neox, T, 1, **kw))
        cram(neox, T, 1, checkpoint=store, **KW, **LONG)   # the kept states again (each run keeps its own)
    assert {k: store.load_final(k) for k in _keys(store)}.keys() == kept.keys()
    # another model of the same shape
    twin = tiny_model("gpt_neox", d=32, vocab_size=V, layers=2, seed=1, initializer_range=0.3).model
    assert cram(twin, T, 1, checkpoint=store, extend=True, **KW, **dict(LONG, max_steps=200)).extended == 0
    # a damaged state: a fresh start, never a wrong one
    cram(neox, T, 1, checkpoint=store, **KW, **SHORT)
    store.save_final({k: (b"not a state", 1) for k in _keys(store)})
    assert cram(neox, T, 1, checkpoint=store, extend=True, **KW, **LONG).extended == 0


def _keys(store):
    return [r[0] for r in store._query("SELECT key FROM final_states")]


def test_the_kept_state_is_the_one_a_longer_run_has_at_that_step(neox, tmp_path):
    """What is kept: memory, AdamW moments, the step, the best accuracy and its step, and the
    accuracy history so far, of the row at the start of its last step."""
    T = targets(lens=(5,))
    store = ResultsStore(tmp_path / "s.sqlite")
    short = cram(neox, T, 1, checkpoint=store, **KW, **SHORT).strings[0]
    (key,) = _keys(store)
    state = torch.load(io.BytesIO(store.load_final(key)), weights_only=True)
    assert state["step"] == short.steps and state["acc_history"] == short.accuracy_history
    assert torch.equal(state["memory"], short.memory) and state["exp_avg_sq"].abs().sum() > 0
    assert state["fingerprint"]["max_steps"] == SHORT["max_steps"]


def test_a_curve_goes_on_from_a_smaller_budget_in_its_store(tmp_path):
    """accessibility_curves(extend_from=...): the rows of a run with the larger budget, for the
    steps beyond the smaller one; the smaller run's rows stay as they were."""
    lm = load_model(embedded.DEFAULT)
    kw = dict(samples=3, source="natural", search="grid", protocol="paper", seed=0, batch_size=1, keep_final=True)
    lengths = {1: [6, 9]}
    path = tmp_path / "s.sqlite"
    accessibility_curves(lm, [1], lengths, store=path, max_steps=60, patience=10, **kw)
    fresh = accessibility_curves(lm, [1], lengths, store=tmp_path / "fresh.sqlite", max_steps=240, patience=40,
                                 **kw)[0]
    longer = accessibility_curves(lm, [1], lengths, store=path, max_steps=240, patience=40,
                                  extend_from=dict(max_steps=60, patience=10), **kw)[0]
    # the strings it crammed within its budget are taken as they are, the others go on
    assert longer.strings_carried > 0 and longer.strings_extended == longer.strings_resumed > 0
    assert longer.strings_carried + longer.strings_extended == 6
    assert (longer.successes, longer.totals) == (fresh.successes, fresh.totals)
    carried = [r for r in ResultsStore(path).rows() if r["run_id"]]
    assert len(carried) == longer.strings_carried and all(r["success"] for r in carried)
    assert {r["run_id"] for r in carried} == {carried_note(protocol_hash_for("paper", dict(max_steps=60, patience=10)))}

    def rows(store, **where):
        return {(r["n"], r["sample"]): (r["success"], r["steps"], r["accuracy_history"])
                for r in ResultsStore(store).rows(**where)}
    ph = {r["protocol_hash"] for r in ResultsStore(tmp_path / "fresh.sqlite").rows()}
    assert rows(path, protocol_hash=ph.pop()) == rows(tmp_path / "fresh.sqlite")
    assert ResultsStore(path).count() == 12   # both budgets' rows
    with pytest.raises(ValueError, match=r"extend_from\['patience'\] must be at most this run's patience \(40\)"):
        accessibility_curves(lm, [1], lengths, store=path, max_steps=240, patience=40,
                             extend_from=dict(patience=50), **kw)
    with pytest.raises(ValueError, match="extend_from must be given with a store"):
        accessibility_curves(lm, [1], lengths, max_steps=240, patience=40, extend_from=dict(patience=10), **kw)
    with pytest.raises(ValueError, match="constant learning rate only"):
        accessibility_curves(lm, [1], lengths, store=path, max_steps=240, patience=40,
                             extend_from=dict(patience=10), **dict(kw, protocol="fast"))
    with pytest.raises(ValueError, match="extend_from must be None or a dict of the earlier run's max_steps"):
        accessibility_curves(lm, [1], lengths, store=path, extend_from=dict(lr=1e-2), **kw)


def test_make_bundles_extend_from(tmp_path):
    """`make_bundles.py --extend-from STEPS/PATIENCE`: the bundle of the larger budget, its strings
    gone on from the smaller run's in the same store, says so, and has the curve of a fresh run."""
    import subprocess
    import sys
    from pathlib import Path

    from accesslib.results import bundles

    script = str(Path(__file__).resolve().parents[2] / "scripts" / "make_bundles.py")
    base = [sys.executable, script, "--models", embedded.DEFAULT, "--m", "1", "--samples", "2", "--source", "natural",
            "--protocol", "paper", "--search", "grid", "--lengths", "1:6,9", "--no-geometry"]

    def run(*args, out):
        proc = subprocess.run(base + ["--out", str(tmp_path / out), *args], capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return bundles.load("cram", embedded.DEFAULT, tmp_path / out)

    store = str(tmp_path / "s.sqlite")
    run("--max-steps", "40", "--patience", "10", "--keep-final", "--store", store, out="short")
    assert ResultsStore(store).finals() == 4
    longer = run("--max-steps", "120", "--patience", "30", "--extend-from", "40/10", "--store", store, out="long")
    fresh = run("--max-steps", "120", "--patience", "30", "--store", str(tmp_path / "f.sqlite"), out="fresh")
    ext = longer["extended_from"]
    assert (ext["max_steps"], ext["patience"], ext["strings"] + ext["carried"]) == (40, 10, 4)
    assert "extended_from" not in fresh
    assert [(c["successes"], c["totals"]) for c in longer["curves"]] == [(c["successes"], c["totals"])
                                                                         for c in fresh["curves"]]
    proc = subprocess.run(base + ["--max-steps", "120", "--extend-from", "40:10", "--store", store],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--extend-from: expected STEPS/PATIENCE" in proc.stderr
    fast = [x if x != "paper" else "fast" for x in base]          # a schedule: refused before anything runs
    proc = subprocess.run(fast + ["--max-steps", "120", "--extend-from", "40/10", "--store", store],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--extend-from needs a constant learning rate (--protocol paper)" in proc.stderr
    # without --keep-final a run keeps no state (a few KB per string and vector)
    run("--max-steps", "40", "--patience", "10", "--store", str(tmp_path / "k.sqlite"), out="nokeep")
    assert ResultsStore(tmp_path / "k.sqlite").finals() == 0


def test_which_crammed_strings_carry_up():
    """A string crammed before its step budget ran out and before its patience on accuracy was spent
    is crammed at the same step by any larger budget; one crammed at its last allowed step, or
    without a history, or under a patience on the loss, is crammed again."""
    small = dict(max_steps=100, patience=10, patience_on="accuracy")
    row = dict(success=True, steps=50, accuracy_history=[[0, 0.0], [30, 0.5], [45, 1.0]])
    assert carries_up(row, small)
    assert not carries_up(dict(row, steps=55), small)                       # 10 steps since the last rise: stale
    assert carries_up(dict(row, steps=54), small)
    assert not carries_up(dict(row, steps=100, accuracy_history=[[0, 0.0], [99, 1.0]]), small)   # at its last step
    assert not carries_up(dict(row, success=False), small)
    assert not carries_up(dict(row, accuracy_history=None), small)
    assert not carries_up(row, dict(small, patience_on="loss"))


def test_a_budget_check_reads_a_string_crammed_again_from_its_own_steps(tmp_path):
    """A string a larger run crams again from the start (the smaller run kept no final state) may
    take another trajectory than its first run did (another thread count or CPU): the larger run's
    readings of the smaller budget take it from its own steps, so both budgets it compares come
    from one trajectory. Here a first run's crammed string is rewritten as failed (a first run that
    parted): the larger run crams it again, at the step its own steps give, and its reading of the
    smaller budget counts it crammed where the first run's own reading counts it failed."""
    import sqlite3

    from accesslib.experiments import bundling

    lm = load_model(embedded.DEFAULT)
    kw = dict(samples=3, source="natural", search="grid", protocol="paper", seed=0, batch_size=1)
    lengths = {1: [6, 9]}
    path = tmp_path / "s.sqlite"
    small = dict(max_steps=60, patience=10)
    accessibility_curves(lm, [1], lengths, store=path, **small, **kw)      # no final states kept
    ph_small = protocol_hash_for("paper", small)
    rows = ResultsStore(path).rows(protocol_hash=ph_small)
    crammed = [r for r in rows if r["success"]]
    assert crammed and len(rows) == 6
    con = sqlite3.connect(path)
    con.execute("UPDATE strings SET success = 0, reason = 'patience' WHERE id = ?", (crammed[0]["id"],))
    con.commit()
    con.close()
    longer = accessibility_curves(lm, [1], lengths, store=path, max_steps=240, patience=40,
                                  extend_from=small, **kw)[0]
    assert longer.strings_extended == 0 and longer.strings_carried == len(crammed) - 1
    again = next(r for r in ResultsStore(path).rows() if r["target_hash"] == crammed[0]["target_hash"]
                 and r["n"] == crammed[0]["n"] and r["protocol_hash"] != ph_small)
    assert again["success"] and again["steps"] == crammed[0]["steps"] and not again["run_id"]
    curves = bundling.live_ladder(path, [(60, 10)], keep_strings=True)["curves"]
    big = next(c for c in curves if c["max_steps"] == 240)
    first = next(c for c in curves if c["max_steps"] == 60)
    assert big["extends"] == (60, 10) and len(big["strings"]["restarts"]) == 6 - (len(crammed) - 1)
    assert (big["restarts"], big["parted"]) == (len(big["strings"]["restarts"]), 0)   # same CPU: same steps
    key = bundling._row_key(crammed[0])
    read = {o["key"]: o["crammed"]
            for o in bundling.string_outcomes(big["strings"], big["extends"], 40, 60, 10)}
    theirs = {o["key"]: o["crammed"] for o in bundling.string_outcomes(first["strings"], None, 10, 60, 10)}
    assert read[key] is True and theirs[key] is False
    assert all(read[k] == theirs[k] for k in read if k != key)
    rung = next(r for r in big["rungs"] if (r["max_steps"], r["patience"]) == (60, 10))
    mine = next(r for r in first["rungs"] if r["own"])
    assert sum(rung["successes"]) == sum(mine["successes"]) + 1
    # not reached yet: one the larger run will cram again is open within the smaller budget; one it
    # takes as it is, or goes on from, is read from the smaller run's row
    strings = dict(big["strings"], rows=[r for r in big["strings"]["rows"] if bundling._row_key(r) != key])
    rows_, kept_, theirs_, unknown = bundling._within_parent(strings)
    assert [bundling._row_key(r) for r in unknown] == [key]
    assert key not in {bundling._row_key(r) for r in theirs_}
    carried = next(r for r in big["strings"]["theirs"]
                   if bundling._row_key(r) not in big["strings"]["restarts"])
    strings = dict(big["strings"], rows=[r for r in big["strings"]["rows"]
                                         if bundling._row_key(r) != bundling._row_key(carried)])
    rows_, kept_, theirs_, unknown = bundling._within_parent(strings)
    assert not unknown and bundling._row_key(carried) in {bundling._row_key(r) for r in theirs_}
