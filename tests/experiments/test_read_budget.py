"""A bundle at a smaller budget read from a larger run's strings (bundling.read_budget_bundle,
make_bundles.py --read-budget): the counts of a fresh run with that budget at every m, its slope,
its check against the run's own budget, refused in words while undecided."""
import json
import shutil
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")

from accesslib.experiments import bundling  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.store import ResultsStore  # noqa: E402
from accesslib.theory import stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LENGTHS = {1: [2, 4, 6, 8], 2: [4, 8, 12, 16]}
KW = dict(samples=4, source="natural", seed=0, search="grid", protocol="paper")


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory):
    """A 120-step run (patience 60 on accuracy, [A]'s protocol) at m = 1 and 2, stopped at step 70,
    and the model: every string still being crammed has passed 40 steps."""
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.models.loading import load_model

    lm = load_model(embedded.DEFAULT)
    store = tmp_path_factory.mktemp("read") / "run.sqlite"
    stop = threading.Event()

    def on_step(info):
        if info.step >= 70:
            stop.set()

    cut = accessibility_curves(lm, [1, 2], LENGTHS, store=store, stop=stop, on_step=on_step, max_steps=120,
                               patience=60, **KW)
    assert any(c.interrupted for c in cut)
    return lm, store


def test_a_smaller_budget_read_at_every_m_is_a_fresh_run_of_it(cut_run, tmp_path, capsys):
    """40 / 20 read from the run still going: the counts at m = 1 and 2 of a fresh 40 / 20 run, its
    n50 and slope (stderr propagated from the n50 stderrs with two m), nothing crammed; the run's own
    budget is refused while its strings are open, and read once the run has ended."""
    from accesslib.experiments.curves import accessibility_curves

    lm, store = cut_run
    work = tmp_path / "run.sqlite"
    shutil.copyfile(store, work)
    b = bundling.read_budget_bundle(work, embedded.DEFAULT, 40, 20, command="read")
    fresh = accessibility_curves(lm, [1, 2], LENGTHS, store=tmp_path / "fresh.sqlite", max_steps=40, patience=20,
                                 **KW)
    assert [c["m"] for c in b["curves"]] == [1, 2]
    for c, f in zip(b["curves"], fresh):
        assert (c["lengths"], c["successes"], c["totals"]) == (LENGTHS[c["m"]], list(f.successes), list(f.totals))
        rung = bundling.measured_rung(40, 20, f.lengths, f.successes, f.totals)
        assert (c["n50"], c["n50_stderr"]) == (rung["n50"], rung["stderr"])
        assert c["strings_crammed"] == 0 and c["strings_from_store"] == 16
    assert (b["settings"]["max_steps"], b["settings"]["patience"], b["protocol"]) == (40, 20, "paper")
    assert b["settings"]["patience_on"] == "accuracy" and b["settings"]["schedule"] is None
    assert (b["kind"], b["model"], b["source"], b["samples"], b["search"], b["seed"]) == (
        "cram", embedded.DEFAULT, "natural", 4, "grid", 0)
    assert b["facts"] == bundles.load("cram", embedded.DEFAULT)["facts"]
    rf = b["read_from"]
    assert (rf["max_steps"], rf["patience"], rf["store"]) == (120, 60, str(work))
    assert rf["finished"] + rf["kept"] == 32 and rf["kept"] > 0
    n50s = [c["n50"] for c in b["curves"]]
    assert None not in n50s
    assert b["slope"]["slope"] == pytest.approx(n50s[1] - n50s[0])
    assert b["slope"]["slope_stderr"] == pytest.approx(stats.propagated_slope_stderr(
        [1, 2], [c["n50_stderr"] for c in b["curves"]]))
    json.dumps(b)                                          # a bundle as saved
    # `store ladder` prints the slope at 40 / 20 and the command that writes it as a bundle
    from accesslib.cli import main
    assert None not in n50s                                # the premise: both m located at 40 / 20
    assert main(["store", "ladder", "--budget", "40/20", "--store", str(work)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3].startswith(f"  40 / 20: a = {b['slope']['slope']:.2f} +- ")
    assert out[-1] == ("  as a bundle (every m, its slope and its check against the run's budget): python "
                       f"scripts/make_bundles.py --read-budget 40/20 --models {embedded.DEFAULT} --source natural "
                       f"--store {work} --out DIR")
    with pytest.raises(ValueError, match=r"120 / 60 is not decided yet in .*: m = \d: \d+ strings still open "
                                         r"\(its strings being crammed are at steps \d+ to \d+\).*"
                                         r"passed step 120 or stopped"):
        bundling.read_budget_bundle(work, embedded.DEFAULT, 120, 60)
    # ended: the run's own budget reads back its curves; 40 / 20 then carries the check against it
    whole = accessibility_curves(lm, [1, 2], LENGTHS, store=work, max_steps=120, patience=60, **KW)
    own = bundling.read_budget_bundle(work, embedded.DEFAULT, 120, 60)
    assert [c["successes"] for c in own["curves"]] == [list(c.successes) for c in whole]
    assert own["budget_check"] is None and own["read_from"]["kept"] == 0
    again = bundling.read_budget_bundle(work, embedded.DEFAULT, 40, 20)
    assert [c["successes"] for c in again["curves"]] == [c["successes"] for c in b["curves"]]
    chk = again["budget_check"]
    assert chk["factor"] == 3 and chk["read_from_run"] and chk["settings"]["max_steps"] == [40, 120]
    for c, w in zip(again["curves"], whole):
        r = chk["ms"][str(c["m"])]
        assert r["successes_3x"] == list(w.successes) and r["open_3x"] == [0] * 4
        assert r["moved"] == bundling.rungs_moved(dict(c, stderr=c["n50_stderr"]),
                                                  bundling.measured_rung(120, 60, w.lengths, w.successes,
                                                                         w.totals))[0]
    label, text = bundles.budget_status(again)
    assert label in ("budget-limited", "converged", "inconclusive")
    assert text.endswith("Both budgets are read from the same strings, of one run of 120 steps with patience 60 "
                         "(here 40 / 20).")


def test_what_cannot_be_read_is_refused_in_words(cut_run, tmp_path):
    _, store = cut_run
    work = tmp_path / "run.sqlite"
    shutil.copyfile(store, work)
    for args, kw, words in (
            (("no-such-model", 40, 20), {}, r"holds no finished string of 'no-such-model'"),
            ((embedded.DEFAULT, 40, 20), dict(source="tokens"), r"no finished string of .* with source 'tokens'"),
            ((embedded.DEFAULT, 40, 20), dict(ms=[3]), r"ms must be among the m of the run .*\[1, 2\]"),
            ((embedded.DEFAULT, 240, 20), {}, r"cannot exceed the run's own: 240 / 20 is larger than"),
            ((embedded.DEFAULT, 0, 20), {}, r"max_steps")):
        with pytest.raises(ValueError, match=words):
            bundling.read_budget_bundle(work, *args, **kw)
    # one m only, where the other is undecided
    one = bundling.read_budget_bundle(work, embedded.DEFAULT, 40, 20, ms=[2])
    assert [c["m"] for c in one["curves"]] == [2] and one["slope"] is None
    # two runs of the model in one store: name the source
    other = tmp_path / "other.sqlite"
    from accesslib.experiments.curves import accessibility_curves
    accessibility_curves(cut_run[0], [1], {1: [2, 3]}, samples=2, source="tokens", seed=0, search="grid",
                         protocol="paper", store=other, max_steps=30, patience=30)
    ResultsStore(work).merge(other)
    with pytest.raises(ValueError, match=r"holds 2 runs of .*natural, 120 / 60 \(protocol .*tokens, 30 / 30 "
                                         r"\(protocol .*name one by its source or its own budget"):
        bundling.read_budget_bundle(work, embedded.DEFAULT, 20, 10)
    assert bundling.read_budget_bundle(work, embedded.DEFAULT, 20, 10, source="tokens")["source"] == "tokens"
    assert bundling.read_budget_bundle(work, embedded.DEFAULT, 20, 10, run_budget=(30, 30))["source"] == "tokens"
    with pytest.raises(ValueError, match=r"no run of .* with the budget 90 / 30; its runs: natural, 120 / 60, "
                                         r"tokens, 30 / 30"):
        bundling.read_budget_bundle(work, embedded.DEFAULT, 20, 10, run_budget=(90, 30))
    # a larger run going on in the same store, of the same source: picked by its own budget
    longer = tmp_path / "longer.sqlite"
    accessibility_curves(cut_run[0], [1], {1: [2, 3]}, samples=2, source="tokens", seed=0, search="grid",
                         protocol="paper", store=longer, max_steps=90, patience=30)
    ResultsStore(work).merge(longer)
    with pytest.raises(ValueError, match=r"holds 2 runs .*tokens, 30 / 30 .*tokens, 90 / 30"):
        bundling.read_budget_bundle(work, embedded.DEFAULT, 20, 10, source="tokens")
    got = [bundling.read_budget_bundle(work, embedded.DEFAULT, 20, 10, source="tokens", run_budget=rb)
           for rb in ((30, 30), (90, 30))]
    assert [b["read_from"]["max_steps"] for b in got] == [30, 90]
    assert got[0]["curves"][0]["successes"] == got[1]["curves"][0]["successes"]   # the same strings, read alike
    # a schedule (the fast protocol) stretches with the steps: no smaller budget is its prefix
    fast = tmp_path / "fast.sqlite"
    accessibility_curves(cut_run[0], [1], {1: [2, 3]}, samples=2, source="natural", seed=0, search="grid",
                         protocol="fast", store=fast, max_steps=30, patience=30)
    with pytest.raises(ValueError, match="schedule .*stretches with max_steps"):
        bundling.read_budget_bundle(fast, embedded.DEFAULT, 10, 10)


def test_make_bundles_read_budget_and_notebook_03(cut_run, tmp_path, capsys, load_script):
    """--read-budget writes the bundle to --out and says it in one line; bad input is refused in
    one line; kept in a model's bundle (--add-remeasure), notebook 03 names the run it was read from."""
    from accesslib.apps.nb03_predicted import remeasured_html, remeasured_points

    _, store = cut_run
    work = tmp_path / "run.sqlite"
    shutil.copyfile(store, work)
    mb = load_script("scripts/make_bundles.py")
    out = tmp_path / "b40"
    mb.main(["--read-budget", "40/20", "--models", embedded.DEFAULT, "--store", str(work), "--out", str(out),
             "--m", "1", "--read-from", "120/60"])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    b = bundles.load("cram", embedded.DEFAULT, out)
    assert [c["m"] for c in b["curves"]] == [1] and b["command"].endswith(f"--out {out} --m 1 --read-from 120/60")
    assert line.startswith(f"{embedded.DEFAULT} at 40 / 20 (read from the 120 / 60 run, natural): m=1: ")
    assert line.endswith(f" -> {out / f'cram-{embedded.DEFAULT}.json'}")
    for args, words in ((["--read-budget", "40"], "--read-budget: expected STEPS/PATIENCE, whole numbers >= 1 "
                                                  "(e.g. 3000/500); got 40"),
                        (["--read-budget", "40/20"], "--read-budget needs one model (--models NAME); got none"),
                        (["--read-budget", "40/20", "--models", embedded.DEFAULT], "needs --store"),
                        (["--read-budget", "40/20", "--models", embedded.DEFAULT, "--store", str(tmp_path / "x"),
                          "--out", str(out)], "--read-budget: no results store at"),
                        (["--read-budget", "120/60", "--models", embedded.DEFAULT, "--store", str(work),
                          "--out", str(out)], "--read-budget: 120 / 60 is not decided yet"),
                        (["--read-budget", "40/20", "--models", embedded.DEFAULT, "--store", str(work),
                          "--out", str(out), "--read-from", "120"], "--read-from: expected STEPS/PATIENCE"),
                        (["--read-budget", "40/20", "--models", embedded.DEFAULT, "--store", str(work),
                          "--out", str(out), "--read-from", "90/30"], "with the budget 90 / 30; its runs: natural, "
                                                                      "120 / 60")):
        with pytest.raises(SystemExit) as e:
            mb.main(args)
        assert words in (str(e.value.code) if isinstance(e.value.code, str) else capsys.readouterr().err)
    # kept in the model's bundle: drawn at its own budget, said with the run it was read from
    model = dict(model=embedded.DEFAULT)
    rec = bundles.add_remeasure(model, b, "runs/b40")
    assert rec["read_from"]["max_steps"] == 120
    assert [p[3] for p in remeasured_points(model)] == ["natural text, 40 / 20"]
    assert "budget 40 / 20 (steps / patience, read from the strings of a run with 120 / 60)" in remeasured_html(model)


def test_real_runs_read_at_the_published_budget_agree_with_their_ladders(tmp_path):
    """SmolLM2-135M's committed snapshots: [A]'s 3000 / 500 read at m = 1 from the 9000 / 1500 runs
    is the 3000 / 500 rung of their shipped ladders, with the same move to 9000 / 1500."""
    shipped = bundles.load("cram", "smollm2-135m")
    stores = ROOT / "benchmarks" / "runs" / "stores"
    for name, source in (("smol-glove-9k", "glove100k"), ("smol-tokens-9k", "tokens")):
        shutil.copyfile(stores / f"{name}.sqlite", tmp_path / f"{name}.sqlite")   # opened as a copy: never written
        # the store holds the run (9000 / 1500) and the 27000 / 4500 one going on from its strings
        b = bundling.read_budget_bundle(tmp_path / f"{name}.sqlite", "smollm2-135m", 3000, 500, ms=[1],
                                        run_budget=(9000, 1500), facts=shipped["facts"])
        rec = next(r for r in shipped["remeasured"] if r["origin"].endswith(name))
        rung = next(r for r in rec["budget_ladder"]["rungs"] if (r["max_steps"], r["patience"]) == (3000, 500))
        (c,) = b["curves"]
        assert (b["source"], c["successes"], c["n50"], c["n50_stderr"]) == (
            source, rung["successes"], pytest.approx(rung["n50"]), pytest.approx(rung["stderr"]))
        assert b["budget_check"]["ms"]["1"]["moved"] is True and bundles.budget_status(b)[0] == "budget-limited"
        assert b["budget_check"]["ms"]["1"]["successes_3x"] == next(
            x for x in rec["curves"] if x["m"] == 1)["successes"]
        # and at every m it ships (m = 1..3 for both) it is the shipped record read from that
        # run (its curves and slope; the check against the run's own budget moves on with the run, the
        # 3000 / 500 rung does not)
        read = next(r for r in shipped["remeasured"] if r.get("read_from") and r["source"] == source)
        ms = [c["m"] for c in read["curves"]]
        assert ms == [1, 2, 3]
        both = bundling.read_budget_bundle(tmp_path / f"{name}.sqlite", "smollm2-135m", 3000, 500, ms=ms,
                                           run_budget=(9000, 1500), facts=shipped["facts"])
        key = ("m", "lengths", "successes", "totals")
        assert [{k: c[k] for k in key} for c in both["curves"]] == [{k: c[k] for k in key} for c in read["curves"]]
        assert [c["n50"] for c in both["curves"]] == pytest.approx([c["n50"] for c in read["curves"]])
        assert both["slope"]["slope"] == pytest.approx(read["slope"]["slope"])
        assert both["slope"]["slope_stderr"] == pytest.approx(read["slope"]["slope_stderr"])


def test_a_check_against_a_run_still_going_says_the_least_n50_it_can_reach():
    """The run's own rung still open at m = 2 (SmolLM2's words at 19:17 UTC, 5 December): 3000 / 500
    has moved however the open strings end, and the check says the least n50 they can give."""
    lengths, successes, totals, open_ = [24, 34, 46, 62, 82], [6, 6, 5, 0, 0], [6] * 5, [0, 0, 1, 6, 6]
    own = dict(max_steps=9000, patience=1500, lengths=lengths, successes=successes, totals=totals, open=open_,
               unknown=0, own=True, n50=None, stderr=None,
               n50_range=bundling.open_n50_range(lengths, successes, totals, open_))
    read = dict(bundling.measured_rung(3000, 500, lengths, [6, 3, 4, 0, 0], totals), open=[0] * 5, own=False)
    curve = dict(m=2, rungs=[read, own])
    check, undecided = bundling._against_own([curve], {2: read})
    (r,) = check.values()
    assert undecided == [] and r["moved"] is True and r["shift"] > 1 and r["open_3x"] == open_
    assert r["n50_3x"] is None and r["n50_3x_low"] == pytest.approx(own["n50_range"]["low"])
    assert r["n50_3x_low"] > read["n50"] + read["stderr"]
    b = dict(budget_check=dict(factor=3, ms={"2": r}, settings=dict(max_steps=[3000, 9000], patience=[500, 1500]),
                               read_from_run=True))
    label, text = bundles.budget_status(b)
    assert label == "budget-limited"
    assert (f"m = 2: {read['n50']:.1f} with 3000 steps, at least {r['n50_3x_low']:.1f} (strings still being "
            "crammed) with 9000") in text
    # not yet told: the open strings can still end near the read n50
    close = dict(own, successes=[6, 3, 3, 0, 0], open=[0, 3, 3, 6, 6],
                 n50_range=bundling.open_n50_range(lengths, [6, 3, 3, 0, 0], totals, [0, 3, 3, 6, 6]))
    assert bundling._against_own([dict(m=2, rungs=[read, close])], {2: read}) == ({}, [2])
    # an m not yet told is named in the text, the label stands on the m that are
    b["read_from"] = dict(max_steps=9000, patience=1500, undecided_ms=[3])
    assert bundles.budget_status(b) == (label, text + " At m = 3 the run's own 9,000 / 1,500 cannot be told yet: "
                                        "too many of its strings are still being crammed.")


def test_a_remeasured_slope_carries_the_stderr_its_n50_stderrs_give_it():
    """A run's own bundle fits its slope with the residual stderr; kept as a re-measurement (or read
    at a budget) it carries the one its n50 stderrs give it, as `store ladder` says it, so slopes
    read from the same strings at two budgets compare like with like. By hand: m = 1, 2, 3 with
    stderrs 1, 1, 2 give the coefficients (-1/2, 0, 1/2), so sqrt(1/4 + 4/4) = 1.118."""
    curves = [dict(m=1, n50=10.0, n50_stderr=1.0), dict(m=2, n50=19.0, n50_stderr=1.0), dict(m=3, n50=31.0, n50_stderr=2.0)]
    fit = dict(slope=10.5, intercept=-0.67, r2=0.99, slope_stderr=1.44, n_points=3, weighted=False)
    out = bundles.with_propagated_stderr(fit, curves)
    assert out["slope_stderr"] == pytest.approx(5 ** 0.5 / 2) and out["stderr_from"] == "n50 stderrs"
    assert out["slope_stderr_residual"] == 1.44 and out["slope"] == 10.5 and fit["slope_stderr"] == 1.44  # a copy
    assert bundles.with_propagated_stderr(out, curves) == out                      # once only
    no_se = [dict(c) for c in curves]
    no_se[1]["n50_stderr"] = None                                                  # a point without one: kept as fitted
    assert bundles.with_propagated_stderr(fit, no_se) == fit
    assert bundles.with_propagated_stderr(None, curves) is None
    run = dict(kind="cram", model="m", source="tokens", protocol="paper", settings=dict(max_steps=9000, patience=1500),
               samples=6, seed=0, curves=curves, slope=fit)
    rec = bundles.remeasure_record(run, "runs/x")
    assert rec["slope"] == out and run["slope"] is fit and rec["origin"] == "runs/x"


def test_a_second_sample_checked_against_a_larger_budget_labels_the_shipped_bundle():
    """A re-measurement of the same strings under the same protocol and budget (Gemma's gemma-9k read
    at [A]'s 3000 / 500 beside the shipped gemma-n50) carries its check into the shipped bundle's
    label: budget-limited outweighs an inconclusive own check; another budget, source, seed or
    strings per length is not a second sample; a second sample without a check changes nothing."""
    settings = dict(lr=0.01, max_steps=3000, patience=500, schedule=None)
    shipped = dict(source="glove100k", protocol="paper", settings=settings, seed=0, samples=6, budget_ladder=dict(
        m=1, rungs=[dict(max_steps=1000, patience=500, n50=9.0, stderr=0.8, compared_with=3000, moved=False),
                    dict(max_steps=3000, patience=500, n50=9.5, stderr=1.0, shipped=True)]))
    own = bundles.budget_status(shipped)
    assert own[0] == "inconclusive" and bundles.own_budget_status(shipped) == own
    check = dict(factor=3, read_from_run=True, ms={"1": dict(n50=11.4, stderr=1.2, n50_3x=None, n50_3x_low=16.2,
                                                              moved=True)},
                 settings=dict(max_steps=[3000, 9000], patience=[500, 1500]))
    twin = dict(source="glove100k", protocol="paper", settings=dict(settings), seed=0, samples=6,
                budget_check=check, origin="benchmarks/runs/bundles/gemma-3k")
    b = dict(shipped, remeasured=[twin])
    assert bundles.second_samples(b) == [twin]
    label, text = bundles.budget_status(b)
    assert label == "budget-limited" and text.startswith(own[1])
    assert ("A second run of the same strings under the same protocol and budget (benchmarks/runs/bundles/gemma-3k) "
            "checked it too: Budget-limited: with 3x the step budget n50 moved by more than its standard error "
            "(m = 1: 11.4 with 3000 steps, at least 16.2 (strings still being crammed) with 9000)") in text
    # not second samples: another budget, source, seed, strings per length
    for change in (dict(settings=dict(settings, max_steps=9000, patience=1500)), dict(source="tokens"),
                   dict(seed=1), dict(samples=12)):
        other = dict(b, remeasured=[dict(twin, **change)])
        assert bundles.second_samples(other) == [] and bundles.budget_status(other) == own
    # a second sample that stayed put settles an inconclusive own check; one without a check says nothing
    still = dict(check, ms={"1": dict(check["ms"]["1"], n50_3x=11.9, stderr_3x=1.3, moved=False)})
    assert bundles.budget_status(dict(shipped, remeasured=[dict(twin, budget_check=still)]))[0] == "converged"
    bare = {k: v for k, v in twin.items() if k != "budget_check"}
    assert bundles.budget_status(dict(shipped, remeasured=[bare])) == own
    # an own check that moved is not undone by a second sample that did not
    moved = dict(shipped, budget_ladder=dict(shipped["budget_ladder"], rungs=[
        dict(shipped["budget_ladder"]["rungs"][0], moved=True), shipped["budget_ladder"]["rungs"][1]]))
    assert bundles.budget_status(dict(moved, remeasured=[dict(twin, budget_check=still)]))[0] == "budget-limited"


def test_the_budget_table_shows_a_second_samples_check(tmp_path, load_script):
    """The results tables' budget check row of a bundle checked only through a second sample: its
    check, named as the second run's, with the least n50 the open strings can give."""
    settings = dict(lr=0.01, max_steps=3000, patience=500)
    check = dict(factor=3, read_from_run=True, wall_time=0.0, ms={"1": dict(
        n50=11.4, stderr=1.2, n50_3x=None, stderr_3x=None, n50_3x_low=16.2, moved=True, shift=3.9,
        lengths_3x=[6, 12], totals_3x=[6, 6], strings_crammed=0, strings_from_store=12)},
        settings=dict(max_steps=[3000, 9000], patience=[500, 1500], search="grid"))
    twin = dict(source="glove100k", protocol="paper", settings=settings, seed=0, samples=6, budget_check=check,
                origin="runs/gemma-3k")
    b = dict(kind="cram", model="m-g", source="glove100k", protocol="paper", settings=settings, seed=0, samples=6,
             curves=[dict(m=1, lengths=[6, 12], successes=[5, 1], totals=[6, 6], n50=9.5, n50_stderr=1.0)],
             remeasured=[twin])
    bundles.save(b, tmp_path)
    table = "\n".join(load_script("scripts/make_bundles.py").budget_table(["m-g"], tmp_path))
    assert ("| m-g, second run (runs/gemma-3k) | budget-limited | 1 | 3000, 500 | 11.4 ± 1.2 | 9000, 1500 | "
            "at least 16.2 (strings still being crammed) | yes (+3.9) | 12 | 0 (both budgets read from one run's "
            "strings) |") in table
    assert "m-g: no check" not in table
