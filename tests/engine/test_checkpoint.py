"""Nothing lost when a run is interrupted mid-string: the engine keeps the state of the strings
still being crammed in the results store (``inflight``), and the same call again goes on from
there with the same result as an uninterrupted run."""
import re
import sqlite3
import threading
import time

import pytest
import torch

import accesslib.engine.cramming as cramming
from accesslib.engine.cramming import cram
from accesslib.experiments.curves import accessibility_curves
from accesslib.models import embedded
from accesslib.models.loading import load_model, tiny_model
from accesslib.results.store import ResultsStore, backup_store

V = 64
KW = dict(max_steps=120, patience=60, seed=5, lr=5e-2, prefix_ids=[0], schedule="warmup_cosine")


def targets(seed=3, lens=(1, 2, 3, 4)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, V, (n,), generator=g).tolist() for n in lens]


def stop_after(k):
    """A stop callable that says stop once ``k`` steps have run (counted through on_step)."""
    seen = []
    return seen.append, (lambda: len(seen) >= k)


def same(a, b):
    assert [s.steps for s in a.strings] == [s.steps for s in b.strings]
    assert [s.success for s in a.strings] == [s.success for s in b.strings]
    assert [s.reason for s in a.strings] == [s.reason for s in b.strings]
    for x, y in zip(a.strings, b.strings):
        assert torch.equal(x.memory, y.memory) and x.final_loss == y.final_loss
        assert x.accuracy_history == y.accuracy_history and x.accuracy_history[0][0] == 0


@pytest.mark.parametrize("lean", [True, False])
def test_an_interrupted_cram_resumes_where_it_stopped(neox, tmp_path, lean):
    T = targets()
    whole = cram(neox, T, 1, lean=lean, **KW)
    assert 0 < whole.n_success < len(T)   # some finish early, some run out of steps
    store = ResultsStore(tmp_path / "s.sqlite")
    count, stop = stop_after(7)
    cut = cram(neox, T, 1, lean=lean, checkpoint=store, on_step=count, stop=stop, **KW)
    assert cut.interrupted and cut.strings == []
    kept = store.inflight()
    assert len(kept) == len(T) and {k["steps"] for k in kept} == {7}   # saved when it stopped
    again = cram(neox, T, 1, lean=lean, checkpoint=ResultsStore(tmp_path / "s.sqlite"), **KW)
    assert again.resumed == len(T) and not again.interrupted
    assert [s.resumed_at for s in again.strings] == [7] * len(T)
    same(again, whole)                      # bit for bit: the same memories, steps and losses
    assert store.inflight() == []           # finished strings keep nothing


def test_a_kept_state_says_when_its_session_took_the_string_on(neox, tmp_path, capsys):
    """Each kept state records the step and time at which the session that kept it took the string
    on (``went_on``), so `accesslib store pace` counts a resumed run's pace from its first step, not
    from an earlier copy taken before the hours between two sessions (nor the model's loading)."""
    from accesslib.cli import main
    T = targets()
    store = ResultsStore(tmp_path / "s.sqlite")
    count, stop = stop_after(7)
    t0 = time.time()
    cram(neox, T, 1, checkpoint=store, on_step=count, stop=stop, **KW)
    t1 = time.time()
    first = cramming.kept_states(store)["states"]
    assert len(first) == len(T) and all(k["went_on"][0] == 0 and t0 <= k["went_on"][1] <= t1 for k in first)
    backup_store(store.path, tmp_path / "snap.sqlite")
    con = sqlite3.connect(tmp_path / "snap.sqlite")    # the snapshot as if taken an hour before this session
    con.execute("UPDATE inflight SET updated_at = ?",
                (time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t1 - 3600)),))
    con.commit()
    con.close()
    count, stop = stop_after(5)
    t2 = time.time()
    cram(neox, T, 1, checkpoint=ResultsStore(tmp_path / "s.sqlite"), on_step=lambda i: (count(i), time.sleep(0.3)),
         stop=stop, **KW)
    t3 = time.time()
    again = cramming.kept_states(store)["states"]
    assert {k["step"] for k in again} == {12}
    assert all(k["went_on"][0] == 7 and t2 <= k["went_on"][1] <= t3 for k in again)
    assert main(["store", "pace", "--since", str(tmp_path / "snap.sqlite"), "--store", str(store.path)]) == 0
    out = capsys.readouterr().out
    per_step = float(re.search(r"went on since .*: ([0-9.]+) s per step \(median string: 5 steps in ", out).group(1))
    assert per_step * 5 <= t3 - t2 + 1        # the 5 steps of this session, not the hour before it (720 s a step)


def test_a_state_kept_before_histories_were_recorded_resumes_without_one(neox, tmp_path):
    """A state an older accesslib kept has no accuracy history: the string resumes as before, and
    its history is unknown (None), never a partial one that would pass for whole."""
    import io

    T = targets()
    store = ResultsStore(tmp_path / "s.sqlite")
    count, stop = stop_after(7)
    cram(neox, T, 1, checkpoint=store, on_step=count, stop=stop, **KW)
    for k in store.inflight():
        state = torch.load(io.BytesIO(store.load_inflight(k["key"])), weights_only=True)
        assert state["acc_history"][0][0] == 0
        del state["acc_history"]
        buf = io.BytesIO()
        torch.save(state, buf)
        store.save_inflight({k["key"]: (buf.getvalue(), k["steps"])})
    again = cram(neox, T, 1, checkpoint=store, **KW)
    assert again.resumed == len(T) and [s.accuracy_history for s in again.strings] == [None] * len(T)
    assert [s.steps for s in again.strings] == [s.steps for s in cram(neox, T, 1, **KW).strings]


def test_states_are_kept_while_it_runs_and_a_crash_keeps_the_last_whole_step(neox, tmp_path, monkeypatch):
    T = targets(lens=(6, 6))
    whole = cram(neox, T, 1, **KW)
    store = ResultsStore(tmp_path / "s.sqlite")
    seen = []
    real = cramming.CramSession._update

    def update(self, grad):
        if self.steps_run == 12:   # a failure in the middle of step 12's update
            raise RuntimeError("injected fault")
        seen.append([k["steps"] for k in store.inflight()])
        return real(self, grad)

    monkeypatch.setattr(cramming.CramSession, "_update", update)
    with pytest.raises(RuntimeError, match="injected fault"):
        cram(neox, T, 1, checkpoint=store, checkpoint_every=0, **KW)
    assert seen[1] == [1, 1] and seen[5] == [5, 5]    # saved before every step (every 0 s)
    assert [k["steps"] for k in store.inflight()] == [11, 11]   # not the half-done step 12
    monkeypatch.setattr(cramming.CramSession, "_update", real)
    again = cram(neox, T, 1, checkpoint=store, **KW)
    assert again.resumed == 2 and [s.resumed_at for s in again.strings] == [11, 11]
    same(again, whole)


def test_a_state_kept_for_other_settings_is_not_resumed(neox, tmp_path):
    T = targets(lens=(5,))
    store = ResultsStore(tmp_path / "s.sqlite")
    count, stop = stop_after(5)
    cram(neox, T, 1, checkpoint=store, on_step=count, stop=stop, **KW)
    assert len(store.inflight()) == 1
    other = dict(KW, lr=2e-2)
    got = cram(neox, T, 1, checkpoint=store, **other)
    assert got.resumed == 0 and got.strings[0].resumed_at == 0
    same(got, cram(neox, T, 1, **other))
    assert store.inflight() == []     # the stale state was dropped, not kept
    # another model of the same shape: not resumed either
    count, stop = stop_after(5)
    cram(neox, T, 1, checkpoint=store, on_step=count, stop=stop, **KW)
    twin = tiny_model("gpt_neox", d=32, vocab_size=V, layers=2, seed=1, initializer_range=0.3).model
    assert cram(twin, T, 1, checkpoint=store, **KW).resumed == 0


def test_bad_checkpoint_arguments_are_named(neox):
    with pytest.raises(ValueError, match="checkpoint must be None or a results store"):
        cram(neox, targets(lens=(3,)), 1, checkpoint=42, **KW)
    with pytest.raises(ValueError, match="checkpoint_every must be seconds >= 0"):
        cram(neox, targets(lens=(3,)), 1, checkpoint_every=-1, **KW)


def test_an_interrupted_curve_resumes_through_its_store(tmp_path):
    """accessibility_curves keeps unfinished strings in its store: stopped mid-run and run
    again, it reads the finished strings back, goes on with the kept ones, and ends with the
    rows of an uninterrupted run."""
    lm = load_model(embedded.DEFAULT)
    kw = dict(samples=3, source="natural", search="grid", protocol="fast", max_steps=150, patience=150,
              seed=0)
    lengths = {1: [6, 9]}
    whole = accessibility_curves(lm, [1], lengths, store=tmp_path / "whole.sqlite", **kw)[0]
    stop = threading.Event()
    steps = []

    def on_step(info):
        steps.append(info.step)
        if len(steps) == 20:
            stop.set()

    path = tmp_path / "cut.sqlite"
    cut = accessibility_curves(lm, [1], lengths, store=path, stop=stop, on_step=on_step, **kw)[0]
    assert cut.interrupted
    kept = ResultsStore(path).inflight()
    assert kept and all(0 < k["steps"] <= 20 for k in kept)
    # the run goes on from a backup of its store (e.g. one committed at the end of a session)
    copy = tmp_path / "elsewhere" / "copy.sqlite"
    assert backup_store(path, copy) == (ResultsStore(path).count(), len(kept))
    again = accessibility_curves(lm, [1], lengths, store=copy, **kw)[0]
    assert again.strings_resumed == len(kept) and again.strings_from_store + again.strings_crammed == 6
    assert (again.successes, again.totals) == (whole.successes, whole.totals)
    got = {(r["n"], r["sample"]): (r["success"], r["steps"]) for r in ResultsStore(copy).rows()}
    want = {(r["n"], r["sample"]): (r["success"], r["steps"]) for r in ResultsStore(tmp_path / "whole.sqlite").rows()}
    assert got == want and ResultsStore(copy).inflight() == []
    assert ResultsStore(path).inflight() == kept          # the backup left the original as it was


def test_kept_progress_says_where_each_kept_string_stands(neox, tmp_path, monkeypatch, capsys):
    """Steps, best loss and best teacher-forced accuracy of the strings an interrupted run kept, per
    length, as the engine saw them (accuracy recorded here from each step's own forward pass), also
    under the "loss" patience of KW, and printed by `accesslib store summary`."""
    from accesslib.cli import main
    T = targets(seed=11, lens=(5, 6, 6))
    accs, best = [], []
    real = cramming.CramSession._forward_backward

    def forward_backward(self, want_grad):
        lv, ncorrect, grad = real(self, want_grad)
        if want_grad:
            accs.append((ncorrect.float() / self._state["n_pred"]).tolist())
        return lv, ncorrect, grad

    monkeypatch.setattr(cramming.CramSession, "_forward_backward", forward_backward)
    count, stop = stop_after(25)
    store = ResultsStore(tmp_path / "s.sqlite")
    cut = cram(neox, T, 1, checkpoint=store, stop=stop, on_step=lambda i: (count(i), best.append(i.best_losses)), **KW)
    assert cut.strings == [] and len(accs) == 25     # all three kept, every step seen
    top = [max(step[j] for step in accs) for j in range(3)]
    got = cramming.kept_progress(store)
    assert got["unreadable"] == 0
    five, six = got["lengths"]
    assert (five["m"], five["n"], five["strings"], five["steps"]) == (1, 5, 1, (25, 25))
    assert (six["m"], six["n"], six["strings"], six["steps"]) == (1, 6, 2, (25, 25))
    assert five["best_loss"] == pytest.approx(best[-1][0])
    assert six["best_loss"] == pytest.approx((best[-1][1] + best[-1][2]) / 2)
    assert five["best_accuracy"] == pytest.approx([top[0]])
    assert six["best_accuracy"] == pytest.approx(sorted(top[1:]))
    assert all(0 <= a <= 1 for a in top) and max(top) > 0
    # a damaged state is counted, not read
    store.save_inflight({"damaged": (b"not a state", 3)})
    assert cramming.kept_progress(store)["unreadable"] == 1
    assert main(["store", "summary", "--store", str(store.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("4 strings kept mid-way (steps 3-25")
    assert out[2].split()[:5] == ["m", "n", "kept", "steps", "best"]
    row6 = out[4].split()
    assert row6[:4] == ["1", "6", "2", "25"] and float(row6[4]) == pytest.approx(six["best_loss"], rel=1e-2)
    assert " ".join(row6[5:]) == f"{min(top[1:]):.2f} / {sum(top[1:]) / 2:.2f} / {max(top[1:]):.2f}"
    assert out[5] == "  1 kept states could not be read (damaged, or written by another program)"
    with pytest.raises(ValueError, match="store must be a results store"):
        cramming.kept_progress(object())


def test_kept_ends_is_each_strings_best_step_plus_its_patience():
    """Where kept strings end if none improves again: best step + patience, capped by the step
    budget, never before the step a string is at; states without a patience are left out."""
    def state(step, best, patience=500, max_steps=3000, on="accuracy"):
        return dict(step=step, best_step=best, patience=patience, max_steps=max_steps, patience_on=on)

    got = cramming.kept_ends([state(1200, 1000), state(2800, 2700), state(400, 390, patience=100),
                              dict(state(10, 5), patience=None), dict(state(10, 5), best_step=None)])
    # 1000 + 500 = 1500 (300 left); 2700 + 500 capped at 3000 (200 left); 390 + 100 = 490 (90 left)
    assert got == dict(strings=3, last_step=3000, steps_left=590, patience=[100, 500],
                       patience_on=["accuracy"], max_steps=[3000])
    assert cramming.kept_ends([dict(state(10, 5), patience=None)]) is None and cramming.kept_ends([]) is None


def test_the_pace_line_turns_the_steps_left_into_hours(capsys):
    """At 12 s a step for 4 strings (3 s a string-step), 2,400 steps left are 2.0 hours; one string
    gets the singular."""
    from accesslib.cli import _print_kept_ends
    _print_kept_ends(dict(strings=4, last_step=14453, steps_left=2400, patience=[1500, 4500],
                          patience_on=["accuracy"], max_steps=[27000]), 12 / 4)
    _print_kept_ends(dict(strings=1, last_step=90, steps_left=30, patience=[60], patience_on=["loss"],
                          max_steps=[]), None)
    _print_kept_ends(None, 1.0)
    assert capsys.readouterr().out.splitlines() == [
        "if no string improves its teacher-forced accuracy again, the 4 open strings end by their patience "
        "(1,500 or 4,500 steps): the last at step 14,453, 2,400 steps in all, about 2.0 hours at that pace; "
        "one that crams ends sooner, one that improves goes on (to step 27,000 at most)",
        "if no string improves its loss again, the 1 open string ends by its patience (60 steps): "
        "at step 90, 30 steps in all; one that crams ends sooner, one that improves goes on"]


def test_store_pace_says_where_kept_strings_end_by_their_patience(neox, tmp_path, capsys):
    """`accesslib store pace` adds where the open strings end if none improves again, read from
    their kept states (best step, and the run's patience and step budget): a string that does not
    improve again ends by its patience at exactly that step, one that improves later."""
    from accesslib.cli import main
    kw = dict(max_steps=200, patience=30, seed=5, lr=1e-2, prefix_ids=[0], patience_on="accuracy")
    T = targets(lens=(4, 6, 8, 10))
    store = ResultsStore(tmp_path / "s.sqlite")
    count, stop = stop_after(25)
    cram(neox, T, 1, checkpoint=store, on_step=count, stop=stop, **kw)
    states = cramming.kept_states(store)["states"]
    assert len(states) == len(T)
    assert all((k["patience"], k["max_steps"], k["patience_on"], k["step"]) == (30, 200, "accuracy", 25)
               and 0 <= k["best_step"] <= 25 for k in states)
    ends = {tuple(k["ids"]): k["best_step"] + 30 for k in states}
    got = cramming.kept_ends(states)
    assert got == dict(strings=4, last_step=max(ends.values()), steps_left=sum(e - 25 for e in ends.values()),
                       patience=[30], patience_on=["accuracy"], max_steps=[200])
    backup_store(store.path, tmp_path / "snap.sqlite")
    assert main(["store", "pace", "--since", str(tmp_path / "snap.sqlite"), "--store", str(store.path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        f"if no string improves its teacher-forced accuracy again, the 4 open strings end by their patience "
        f"(30 steps): the last at step {got['last_step']}, {got['steps_left']} steps in all; one that crams "
        "ends sooner, one that improves goes on (to step 200 at most)")
    done = cram(neox, T, 1, checkpoint=ResultsStore(tmp_path / "s.sqlite"), **kw)
    assert [s.reason for s in done.strings] == ["patience"] * 4
    steps = [(s.steps, ends[tuple(ids)]) for s, ids in zip(done.strings, T)]
    assert all(a >= b for a, b in steps) and sum(a == b for a, b in steps) >= 2, steps
