"""Budget convergence as a measured property: bundling.budget_check, bundles.budget_status and
scripts/make_bundles.py --with-budget-check / --add-budget-check, on the default embedded model."""
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from accesslib.experiments import bundling  # noqa: E402
from accesslib.experiments.curves import protocol_hash_for  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.store import ResultsStore  # noqa: E402
from accesslib.theory import stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "scripts" / "make_bundles.py")
LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.fixture(scope="module")
def short_budget(tmp_path_factory):
    """A grid bundle crammed with 45 steps, checked with 10x that (450 steps, patience 450):
    at 45 steps the warm-up and cosine decay leave too few steps, and n50 moves."""
    store = tmp_path_factory.mktemp("budget") / "s.sqlite"
    b = bundling.make_cramming_bundle(embedded.DEFAULT, (1,), samples=8, source="natural", protocol="fast",
                                      search="grid", lengths={1: LENGTHS}, max_steps=45, patience=45,
                                      store=store, geometry=False, progress=False, budget_check=10)
    return b, store


def test_the_check_recrams_the_same_strings_with_the_larger_budget(short_budget):
    b, store = short_budget
    chk = b["budget_check"]
    assert chk["factor"] == 10 and set(chk["ms"]) == {"1"}
    assert chk["settings"]["max_steps"] == [45, 450] and chk["settings"]["patience"] == [45, 450]
    assert chk["settings"]["protocol"] == "fast" and chk["settings"]["samples"] == 8
    r = chk["ms"]["1"]
    assert r["lengths_3x"] == LENGTHS and r["totals_3x"] == [8] * 8 and r["strings_crammed"] == 64
    rows = ResultsStore(store).rows()
    short = protocol_hash_for("fast", {"max_steps": 45, "patience": 45})
    long = protocol_hash_for("fast", {"max_steps": 450, "patience": 450})
    by = {h: {(x["n"], x["sample"]): x for x in rows if x["protocol_hash"] == h} for h in (short, long)}
    assert len(by[short]) == len(by[long]) == 64 and by[short].keys() == by[long].keys()
    assert all(by[short][k]["target_hash"] == by[long][k]["target_hash"] for k in by[short])   # paired
    assert max(x["steps"] for x in by[short].values()) <= 45 < max(x["steps"] for x in by[long].values())
    # the counts are the store's, the base n50 is the bundle's own fit
    assert r["successes_3x"] == [sum(by[long][(n, i)]["success"] for i in range(8)) for n in LENGTHS]
    assert r["n50"] == pytest.approx(b["curves"][0]["n50"])


def test_a_short_budget_is_caught(short_budget):
    b, _ = short_budget
    r = b["budget_check"]["ms"]["1"]
    assert sum(r["successes_3x"]) > sum(b["curves"][0]["successes"])     # more steps cram more strings
    comb = math.hypot(r["stderr"], r["stderr_3x"])
    assert r["shift"] == pytest.approx((r["n50_3x"] - r["n50"]) / comb)
    assert r["moved"] is (abs(r["n50_3x"] - r["n50"]) > comb) is True
    assert b["budget_check"]["budget_limited"] is True and b["budget_check"]["inconclusive"] == []
    label, text = bundles.budget_status(b)
    assert label == "budget-limited"
    assert f"m = 1: {r['n50']:.1f} with 45 steps, {r['n50_3x']:.1f} with 450" in text


def test_a_bundle_read_back_from_json_resumes_from_the_store(short_budget, tmp_path):
    """The check of a saved bundle (lists, not tuples; settings as written) finds the same strings
    under the same protocol hash: nothing is crammed again and the result is the same."""
    b, store = short_budget
    bundles.save(b, tmp_path)
    saved = json.loads((tmp_path / f"cram-{embedded.DEFAULT}.json").read_text())
    again = bundling.budget_check(embedded.DEFAULT, saved, 10, store=store)
    r0, r1 = b["budget_check"]["ms"]["1"], again["ms"]["1"]
    assert r1["strings_crammed"] == 0 and r1["strings_from_store"] == 64
    assert {k: r1[k] for k in ("n50", "n50_3x", "moved", "successes_3x")} == \
        {k: r0[k] for k in ("n50", "n50_3x", "moved", "successes_3x")}
    with pytest.raises(ValueError, match=r"ms must be among the measured m \[1\]; got \[2\]"):
        bundling.budget_check(embedded.DEFAULT, saved, 3, [2])
    with pytest.raises(ValueError, match="factor must be a whole number >= 2; got 1"):
        bundling.budget_check(embedded.DEFAULT, saved, 1)


def test_a_check_with_its_own_budget_and_lengths_reuses_a_longer_run(short_budget, tmp_path):
    """max_steps/patience given outright and lengths of its own: the check finds the strings a
    longer run left in the store (here the factor-10 check's) and crams nothing."""
    b, store = short_budget
    bundles.save(b, tmp_path)
    saved = json.loads((tmp_path / f"cram-{embedded.DEFAULT}.json").read_text())
    chk = bundling.budget_check(embedded.DEFAULT, saved, max_steps=450, patience=450, lengths={1: [2, 4, 6]},
                                store=store)
    r, r10 = chk["ms"]["1"], b["budget_check"]["ms"]["1"]
    assert chk["factor"] == 10 and chk["settings"]["max_steps"] == [45, 450]
    assert chk["settings"]["patience"] == [45, 450]
    assert r["strings_crammed"] == 0 and r["strings_from_store"] == 24 and r["lengths_3x"] == [2, 4, 6]
    assert r["successes_3x"] == [r10["successes_3x"][LENGTHS.index(n)] for n in (2, 4, 6)]
    # patience follows the step ratio when not given (45 -> 90 steps: 2x, patience 90)
    two = bundling.budget_check(embedded.DEFAULT, saved, max_steps=90, lengths={1: [1]}, store=store)
    assert two["factor"] == 2 and two["settings"]["patience"] == [45, 90]
    with pytest.raises(ValueError, match=r"lengths must give lengths for every m checked \[1\]; missing m = \[1\]"):
        bundling.budget_check(embedded.DEFAULT, saved, max_steps=90, lengths={2: [3]})
    with pytest.raises(ValueError, match="max_steps must be a whole number >= 46; got 45"):
        bundling.budget_check(embedded.DEFAULT, saved, max_steps=45)
    with pytest.raises(ValueError, match="lengths can be given for a grid search only"):
        bundling.budget_check(embedded.DEFAULT, dict(saved, search="bisect"), lengths={1: [3]})


def _bundle(**extra):
    return dict(kind="cram", model="x", curves=[], **extra)


def _check(moved_by_m, n50=5.0, se=0.2):
    ms = {str(m): dict(n50=n50, stderr=se, n50_3x=n50 + d, stderr_3x=se, moved=mv, shift=None)
          for m, (d, mv) in moved_by_m.items()}
    return dict(factor=3, ms=ms, budget_limited=any(mv is True for _, mv in moved_by_m.values()),
                settings=dict(max_steps=[1000, 3000], patience=[200, 600]), wall_time=1.0)


def test_budget_status_labels_and_words():
    assert bundles.budget_status(_bundle())[0] == "not checked"
    assert "--add-budget-check" in bundles.budget_status(_bundle(budget_check=None))[1]
    label, text = bundles.budget_status(_bundle(budget_check=_check({1: (0.1, False), 4: (-0.2, False)})))
    assert label == "converged"
    assert text == ("Converged: with 3x the step budget n50 moved by less than its standard error "
                    "(m = 1: 5.0 with 1000 steps, 5.1 with 3000; m = 4: 5.0 with 1000 steps, 4.8 with 3000).")
    label, text = bundles.budget_status(_bundle(budget_check=_check({1: (0.1, False), 4: (2.0, True)})))
    assert label == "budget-limited" and "(m = 4: 5.0 with 1000 steps, 7.0 with 3000)" in text
    assert bundles.budget_status(_bundle(budget_check=_check({1: (0.0, None)})))[0] == "inconclusive"
    # the grid checks of notebook 09 (same lengths and strings at both budgets) count too
    grid = dict(m=1, n50=[5.0, 6.5], n50_stderr=[0.5, 0.5], max_steps=[1000, 3000], factor=3, shift=2.12)
    assert bundles.budget_status(_bundle(budget_checks=[grid]))[0] == "budget-limited"
    assert bundles.budget_status(_bundle(budget_checks=[dict(grid, shift=0.4)]))[0] == "converged"
    assert set(bundles.BUDGET_LABELS) == {"converged", "budget-limited", "inconclusive", "not checked"}


def test_make_bundles_with_and_add_budget_check(tmp_path):
    """--fast --with-budget-check makes a bundle with its check; --add-budget-check re-checks an
    existing bundle and changes nothing else in it."""
    store = str(tmp_path / "s.sqlite")
    proc = subprocess.run([sys.executable, SCRIPT, "--fast", "--models", embedded.DEFAULT, "--no-geometry",
                           "--source", "words100k", "--with-budget-check", "--out", str(tmp_path),
                           "--store", store], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b = bundles.load("cram", embedded.DEFAULT, tmp_path)
    chk = b["budget_check"]
    assert b["source"] == "words100k" and chk["settings"]["source"] == "words100k"
    assert set(chk["ms"]) == {"1", "2"} and chk["settings"]["max_steps"] == [40, 120]   # m = 1 and the largest
    proc = subprocess.run([sys.executable, SCRIPT, "--add-budget-check", embedded.DEFAULT, "--budget-ms", "2",
                           "--budget-factor", "2", "--out", str(tmp_path), "--store", store],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b2 = bundles.load("cram", embedded.DEFAULT, tmp_path)
    assert {k: v for k, v in b2.items() if k != "budget_check"} == {k: v for k, v in b.items() if k != "budget_check"}
    assert set(b2["budget_check"]["ms"]) == {"2"} and b2["budget_check"]["settings"]["max_steps"] == [40, 80]
    assert "--add-budget-check" in b2["budget_check"]["command"]
    assert bundles.budget_status(b2)[1].split(":")[0] in proc.stdout
    # the larger budget given outright: 120 steps (3x, patience scaled alike) finds the strings of
    # the --with-budget-check run in the store and crams none
    proc = subprocess.run([sys.executable, SCRIPT, "--add-budget-check", embedded.DEFAULT, "--budget-ms", "1",
                           "--budget-max-steps", "120", "--out", str(tmp_path), "--store", store],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = bundles.load("cram", embedded.DEFAULT, tmp_path)["budget_check"]
    assert r["factor"] == 3 and r["settings"]["max_steps"] == [40, 120]
    assert r["ms"]["1"]["strings_crammed"] == 0 and r["ms"]["1"]["n50_3x"] == chk["ms"]["1"]["n50_3x"]


@pytest.mark.parametrize("name", embedded.names())
def test_shipped_embedded_bundles_record_their_budget_check_and_are_converged(name):
    """Every embedded model's shipped bundle records its check, and three times its step budget
    and patience moved no n50 by its combined standard error (tiny-d128-v257 only from 3000 /
    600 steps on: its 1000-step n50 at m = 4 moved, see its budget ladder)."""
    b = bundles.load("cram", name)
    chk = b["budget_check"]
    largest = max(c["m"] for c in b["curves"])
    assert set(chk["ms"]) == {"1", str(largest)} and chk["factor"] == 3
    assert chk["settings"]["max_steps"] == [b["settings"]["max_steps"], 3 * b["settings"]["max_steps"]]
    for m, r in chk["ms"].items():
        curve = next(c for c in b["curves"] if c["m"] == int(m))
        assert r["n50"] == pytest.approx(curve["n50"]) and r["stderr"] == pytest.approx(curve["n50_stderr"])
        if r["moved"] is not None:
            assert r["moved"] is (abs(r["n50_3x"] - r["n50"]) > math.hypot(r["stderr"], r["stderr_3x"]))
    assert chk["budget_limited"] is any(r["moved"] is True for r in chk["ms"].values())
    label = bundles.budget_status(b)[0]
    assert label == ("budget-limited" if chk["budget_limited"] else
                     "inconclusive" if chk["inconclusive"] else "converged")
    assert label == "converged"


def test_a_budget_ladder_shows_where_n50_settles(short_budget, tmp_path):
    """The ladder of a saved bundle: its own 45-step curve, a fresh 135-step curve and the
    450-step curve the factor-10 check left in the store (read back, not crammed again), each
    compared with the first rung of at least 3x its steps."""
    b, store = short_budget
    bundles.save(b, tmp_path)
    saved = json.loads((tmp_path / f"cram-{embedded.DEFAULT}.json").read_text())
    lad = bundling.budget_ladder(embedded.DEFAULT, saved, [(450, 450), (135, 135)], store=store)
    r45, r135, r450 = lad["rungs"]
    assert [r["max_steps"] for r in lad["rungs"]] == [45, 135, 450] and lad["m"] == 1
    assert [r["patience"] for r in lad["rungs"]] == [45, 135, 450]
    assert r45["shipped"] and not r135["shipped"] and not r450["shipped"]
    assert r45["n50"] == pytest.approx(b["curves"][0]["n50"]) and r45["successes"] == b["curves"][0]["successes"]
    assert r135["strings_crammed"] == 64 and r450["strings_crammed"] == 0 and r450["strings_from_store"] == 64
    chk = b["budget_check"]["ms"]["1"]
    assert r450["successes"] == chk["successes_3x"] and r450["n50"] == pytest.approx(chk["n50_3x"])
    assert (r45["compared_with"], r135["compared_with"], r450["compared_with"]) == (135, 450, None)
    for lo, hi in ((r45, r135), (r135, r450)):
        comb = math.hypot(lo["stderr"], hi["stderr"])
        assert lo["shift"] == pytest.approx((hi["n50"] - lo["n50"]) / comb)
        assert lo["moved"] is (abs(hi["n50"] - lo["n50"]) > comb)
    assert r45["moved"] is True   # 45 steps are too few (the fixture's premise)
    settled = [r["max_steps"] for r in (r45, r135) if r["moved"] is False]
    assert lad["converged_at"] == (min(settled) if settled else None)
    assert lad["still_moving"] is (not settled)
    assert lad["settings"]["source"] == "natural" and lad["settings"]["samples"] == 8
    # the bundle's status says it in words, after the budget check's verdict
    label, text = bundles.budget_status(dict(saved, budget_ladder=lad))
    assert label == "budget-limited"
    assert text.startswith(bundles.budget_status(saved)[1])
    assert f"n50 at m = 1 by step budget: 45 steps {r45['n50']:.1f} ± {r45['stderr']:.1f} (shipped), " in text
    # without a budget check the ladder's shipped rung is the check
    alone = {k: v for k, v in saved.items() if k != "budget_check"}
    assert bundles.budget_status(dict(alone, budget_ladder=lad))[0] == "budget-limited"
    with pytest.raises(ValueError, match=r"budgets must have distinct max_steps other than the bundle's 45; got \[45\]"):
        bundling.budget_ladder(embedded.DEFAULT, saved, [(45, 10)])
    with pytest.raises(ValueError, match=r"budgets must be \(max_steps, patience\) pairs or \(max_steps, "
                                         r"patience, lengths\); got 90"):
        bundling.budget_ladder(embedded.DEFAULT, saved, [90])
    # a budget with lengths of its own: the 450-step strings at two of the grid's lengths
    own = bundling.budget_ladder(embedded.DEFAULT, saved, [(450, 450, [2, 6])], store=store)
    r = own["rungs"][1]
    assert r["lengths"] == [2, 6] and r["strings_crammed"] == 0 and r["strings_from_store"] == 16
    assert r["successes"] == [chk["successes_3x"][LENGTHS.index(n)] for n in (2, 6)]
    with pytest.raises(ValueError, match="lengths can be given for a grid search only"):
        bundling.budget_ladder(embedded.DEFAULT, dict(saved, search="bisect"), [(90, 90, [3])])
    with pytest.raises(ValueError, match=r"m must be among the bundle's measured m \[1\]; got 2"):
        bundling.budget_ladder(embedded.DEFAULT, saved, [(90, 90)], 2)


def test_ladder_verdict_and_words():
    def rung(steps, n50, se=0.5, shipped=False):
        return dict(max_steps=steps, patience=steps // 5, n50=n50, stderr=se, shipped=shipped)

    # 300 -> 1500 moves, 1500 -> 4500 does not: it settles at 1500 (500 is compared with 1500)
    v = bundling.ladder_verdict([rung(300, 10.6, shipped=True), rung(500, 10.9), rung(1500, 16.8), rung(4500, 17.0)])
    assert [c["compared_with"] for c in v["comparisons"]] == [1500, 1500, 4500, None]
    assert [c["moved"] for c in v["comparisons"]] == [True, True, False, None]
    assert v["converged_at"] == 1500 and v["still_moving"] is False
    v = bundling.ladder_verdict([rung(300, 10.6), rung(1500, 16.8), rung(4500, 22.0)])
    assert v["converged_at"] is None and v["still_moving"] is True
    # 1000 -> 3000 still, 3000 -> 9000 moved (SmolLM2 on [A]'s word list): n50 has not settled
    v = bundling.ladder_verdict([rung(1000, 18.7, 1.7), rung(3000, 20.1, 1.8), rung(9000, 32.0, 3.0, shipped=True)])
    assert [c["moved"] for c in v["comparisons"]] == [False, True, None]
    assert v["converged_at"] is None and v["still_moving"] is True
    v = bundling.ladder_verdict([rung(300, 10.6), rung(600, 16.8)])   # nothing 3x away: no verdict
    assert v["converged_at"] is None and v["still_moving"] is False
    v = bundling.ladder_verdict([rung(300, None), rung(900, 12.0)])   # no n50 at 300: no comparison
    assert v["comparisons"][0]["moved"] is None and v["converged_at"] is None
    rungs = [rung(300, 10.6, shipped=True), rung(1500, 16.8), rung(4500, 17.0)]
    for r, c in zip(rungs, bundling.ladder_verdict(rungs)["comparisons"]):
        r.update(c)
    lad = dict(m=1, rungs=rungs, converged_at=1500, still_moving=False)
    assert bundles.ladder_text(dict(budget_ladder=lad)) == (
        "n50 at m = 1 by step budget: 300 steps 10.6 ± 0.5 (shipped), 1,500 steps 16.8 ± 0.5, "
        "4,500 steps 17.0 ± 0.5. It settles at 1,500 steps: 4,500 steps move it by less than its "
        "standard error.")
    assert bundles.ladder_text(dict(budget_ladder=dict(lad, converged_at=None, still_moving=True))).endswith(
        "Still moving from 1,500 to 4,500 steps: no budget measured here settles it yet.")
    assert bundles.ladder_text({}) == ""


def test_make_bundles_add_budget_ladder(tmp_path, load_script):
    """--add-budget-ladder adds the ladder to an existing bundle and nothing else; the results
    table shows it; a missing or malformed --ladder is refused in one line."""
    store = str(tmp_path / "s.sqlite")
    proc = subprocess.run([sys.executable, SCRIPT, "--fast", "--models", embedded.DEFAULT, "--no-geometry",
                           "--out", str(tmp_path), "--store", store], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b = bundles.load("cram", embedded.DEFAULT, tmp_path)
    proc = subprocess.run([sys.executable, SCRIPT, "--add-budget-ladder", embedded.DEFAULT, "--ladder", "120/60",
                           "--out", str(tmp_path), "--store", store], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b2 = bundles.load("cram", embedded.DEFAULT, tmp_path)
    assert {k: v for k, v in b2.items() if k != "budget_ladder"} == b
    lad = b2["budget_ladder"]
    assert [(r["max_steps"], r["patience"]) for r in lad["rungs"]] == [(40, b["settings"]["patience"]), (120, 60)]
    assert lad["rungs"][1]["strings_crammed"] == sum(lad["rungs"][1]["totals"]) > 0
    assert bundles.ladder_text(b2) in proc.stdout
    mb = load_script("scripts/make_bundles.py")
    table = "\n".join(mb.budget_table([embedded.DEFAULT], tmp_path))
    assert mb.parse_budgets(["500/100", "4500/900:10,16,24"], None) == [(500, 100), (4500, 900, [10, 16, 24])]
    assert "### Budget ladders: n50 by step budget" in table
    assert f"| {embedded.DEFAULT} | 1 | 120, 60 | " in table and " (shipped) | " in table
    for args, msg in ((["--add-budget-ladder", embedded.DEFAULT], "--add-budget-ladder needs --ladder"),
                      (["--add-budget-ladder", embedded.DEFAULT, "--ladder", "120"],
                       "--ladder: expected STEPS/PATIENCE pairs of whole numbers >= 1, e.g. 1500/300 (or "
                       "1500/300:10,16,24 with lengths of its own); got 120"),
                      (["--add-budget-ladder", embedded.DEFAULT, "--ladder", "120/60:4,x"], "got 120/60:4,x")):
        bad = subprocess.run([sys.executable, SCRIPT, *args, "--out", str(tmp_path)], capture_output=True, text=True,
                             timeout=300)
        assert bad.returncode == 2 and msg in bad.stderr


def test_bar_hooks_show_steps_between_strings():
    """Long strings (a real model on a CPU) keep the bar moving: the engine's step and the active
    strings in its postfix; each finished string advances it and reaches on_string."""
    from types import SimpleNamespace

    class Bar:
        def __init__(self):
            self.n, self.postfix = 0, []

        def update(self, k):
            self.n += k

        def set_postfix(self, d):
            self.postfix.append(dict(d))

    bar, seen = Bar(), []
    string, step = bundling.bar_hooks(bar, seen.append, every=0)
    step(SimpleNamespace(step=120, active=[0, 1, 2]))
    string(dict(m=1, n=16))
    step(SimpleNamespace(step=121, active=[0, 1]))
    assert bar.n == 1 and seen == [dict(m=1, n=16)]
    assert bar.postfix == [dict(step=120, active=3), dict(m=1, n=16), dict(m=1, n=16, step=121, active=2)]
    quiet = Bar()
    _, step = bundling.bar_hooks(quiet, every=3600)
    step(SimpleNamespace(step=1, active=[0]))
    step(SimpleNamespace(step=2, active=[0]))
    assert quiet.postfix == [dict(step=1, active=1)]      # at most once per `every` seconds
    assert bundling.bar_hooks(None, seen.append) == (seen.append, None)


def test_a_rung_past_the_grid_is_a_one_sided_n50():
    """All crammed at the longest length: n50 lies beyond it, and a budget that got there moved
    n50 when the smaller budget's n50 + stderr falls short of that length."""
    assert bundling.n50_bounds([6, 6, 6, 6], [6, 6, 6, 6], [10, 13, 16, 20]) == {"n50_above": 20}
    assert bundling.n50_bounds([0, 0], [6, 6], [30, 24]) == {"n50_below": 24}
    assert bundling.n50_bounds([6, 3, 1], [6, 6, 6], [10, 16, 20]) == {}
    assert bundling.n50_bounds([], [], []) == {}

    def rung(steps, n50=None, se=None, **bound):
        return dict(max_steps=steps, patience=steps // 5, n50=n50, stderr=se, **bound)

    # the SmolLM2 case: 16.8 +- 1.6 at 1500, every string crammed through n = 20 at 4500
    v = bundling.ladder_verdict([rung(500, 10.9, 0.8), rung(1500, 16.8, 1.6), rung(4500, n50_above=20)])
    c = v["comparisons"]
    assert [x["moved"] for x in c] == [True, True, None]
    assert c[1]["shift"] == pytest.approx((20 - 16.8) / 1.6) and c[1]["shift_is_bound"] is True
    assert c[0]["shift_is_bound"] is False and v["still_moving"] is True and v["converged_at"] is None
    # a bound the point still reaches: cannot tell
    assert bundling.rungs_moved(rung(1500, 19.0, 1.6), rung(4500, n50_above=20)) == (None, None, False)
    # the smaller budget's bound against a larger budget's point below it (n50 fell): moved
    moved, shift, is_bound = bundling.rungs_moved(rung(300, n50_above=20), rung(900, 15.0, 1.0))
    assert moved is True and shift == pytest.approx(-5.0) and is_bound
    # two bounds that cannot meet; two that can
    assert bundling.rungs_moved(rung(300, n50_below=8), rung(900, n50_above=10)) == (True, None, False)
    assert bundling.rungs_moved(rung(300, n50_above=8), rung(900, n50_above=10)) == (None, None, False)
    # words: the bound in the sentence and the table cell
    rungs = [rung(500, 10.9, 0.8), rung(1500, 16.8, 1.6), rung(4500, n50_above=20)]
    for r, x in zip(rungs, v["comparisons"]):
        r.update(x)
    text = bundles.ladder_text(dict(budget_ladder=dict(m=1, rungs=rungs, **{k: v[k] for k in
                                                                             ("converged_at", "still_moving")})))
    assert text == ("n50 at m = 1 by step budget: 500 steps 10.9 ± 0.8, 1,500 steps 16.8 ± 1.6, 4,500 steps "
                    "> 20 (all crammed at 20). Still moving from 1,500 to 4,500 steps: no budget measured "
                    "here settles it yet.")
    assert [bundles.rung_shift_text(r) for r in rungs] == ["yes (+3.3)", "yes (at least +2.0)", "-"]
    # a fit that places n50 outside the lengths, without a one-sided bound: the counts at the ends
    unlocated = dict(max_steps=3000, patience=500, lengths=[12, 17, 22, 27, 32], successes=[2, 1, 1, 0, 0],
                     totals=[6] * 5, n50=None, stderr=None)
    assert bundles.rung_n50_text(unlocated) == "not located (2/6 crammed at 12, 0/6 crammed at 32)"


def test_the_results_table_shows_a_rung_past_the_grid(tmp_path, load_script):
    """scripts/make_bundles.py's ladder table writes a one-sided n50 and an at-least shift."""
    mb = load_script("scripts/make_bundles.py")
    b = bundles.load("cram", "smollm2-135m")
    rungs = [dict(max_steps=1500, patience=300, lengths=[10, 20], successes=[5, 2], totals=[6, 6], n50=16.8,
                  stderr=1.6, shipped=True),
             dict(max_steps=4500, patience=900, lengths=[10, 20], successes=[6, 6], totals=[6, 6], n50=None,
                  stderr=None, shipped=False, n50_above=20)]
    v = bundling.ladder_verdict(rungs)
    for r, c in zip(rungs, v.pop("comparisons")):
        r.update(c)
    b["budget_ladder"] = dict(m=1, rungs=rungs, **v)
    bundles.save(b, tmp_path)
    text = "\n".join(mb.budget_table(["smollm2-135m"], tmp_path))
    assert ("| smollm2-135m | 1 | 1,500, 300 (shipped) | 10, 20 | 5/6, 2/6 | 16.8 ± 1.6 | 4,500 steps | "
            "yes (at least +2.0) |") in text
    assert "| smollm2-135m | 1 | 4,500, 900 | 10, 20 | 6/6, 6/6 | > 20 (all crammed at 20) | - | - |" in text
    assert "4,500 steps > 20 (all crammed at 20). Still moving from 1,500 to 4,500 steps" in text


def test_smaller_budgets_are_read_from_the_steps_of_a_schedule_free_run(tmp_path):
    """Under [A]'s protocol (no schedule) a run with fewer steps and the same patience is a prefix
    of a longer one: the ladder reads its rung from the steps the bundle's strings took, crams
    nothing, needs no model, and gets the same counts as measuring that budget afresh."""
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.models.loading import load_model

    store = tmp_path / "s.sqlite"
    lengths = [2, 3, 4, 5, 6, 7, 8]
    b = bundling.make_cramming_bundle(embedded.DEFAULT, (1,), samples=6, source="natural", protocol="paper",
                                      search="grid", lengths={1: lengths}, max_steps=90, patience=90, store=store,
                                      geometry=False, progress=False)
    bundles.save(b, tmp_path)
    saved = json.loads((tmp_path / f"cram-{embedded.DEFAULT}.json").read_text())
    lad = bundling.budget_ladder(None, saved, [(10, 90), (30, 90)], store=store)   # None: no model loaded
    r10, r30, r90 = lad["rungs"]
    assert [r["max_steps"] for r in lad["rungs"]] == [10, 30, 90] and r90["shipped"]
    lm = load_model(embedded.DEFAULT)
    for r in (r10, r30):
        assert r["derived_from"] == 90 and r["patience"] == 90 and r["strings_crammed"] == 0
        assert r["strings_from_store"] == 42 and r["lengths"] == lengths
        (fresh,) = accessibility_curves(lm, [1], {1: lengths}, samples=6, source="natural", seed=0, store=store,
                                        search="grid", protocol="paper", max_steps=r["max_steps"], patience=90)
        assert fresh.strings_crammed == 42 and r["successes"] == list(fresh.successes)   # exactly the same
    assert sum(r10["successes"]) < sum(r90["successes"])     # the premise: 10 steps cram fewer
    assert r10["compared_with"] == 30 and r30["compared_with"] == 90 and r90["compared_with"] is None
    # the shipped rung is the largest: the status reads the comparison below it
    label, text = bundles.budget_status(dict(saved, budget_ladder=lad))
    last = r30 if lad["converged_at"] != 10 else r10
    want = {True: "budget-limited", False: "converged", None: "inconclusive"}[last["moved"]]
    assert label == want and f"with {last['max_steps']} steps" in text
    # what cannot be read from the strings is refused, in words
    with pytest.raises(ValueError, match=r"smaller than its own 90 steps / patience 90 .*got 90 / 90"):
        bundling.derived_rung(store, saved, 1, 90)
    with pytest.raises(ValueError, match=r"smaller than its own 90 steps / patience 90 .*got 30 / 120"):
        bundling.derived_rung(store, saved, 1, 30, 120)
    with pytest.raises(ValueError, match="give the results store they were crammed into"):
        bundling.derived_rung(None, saved, 1, 30)
    ResultsStore(tmp_path / "empty.sqlite").close()   # a store without strings
    with pytest.raises(ValueError, match=r"lacks strings of .* at m = 1 .*n = 2: 0 of 6.*run the bundle's command"):
        bundling.derived_rung(tmp_path / "empty.sqlite", saved, 1, 30)
    # a store is only read: a wrong path is named, and no file is made there
    with pytest.raises(ValueError, match=r"absent.sqlite: nothing to read \(absent\)"):
        bundling.derived_rung(tmp_path / "absent.sqlite", saved, 1, 30)
    assert not (tmp_path / "absent.sqlite").exists()
    fast = dict(saved, settings=dict(saved["settings"], schedule="warmup_cosine"))
    with pytest.raises(ValueError, match="schedule .*stretches with max_steps"):
        bundling.derived_rung(store, fast, 1, 30)


def test_smaller_patience_is_read_from_when_the_best_accuracy_rose(tmp_path):
    """Each string keeps the steps where its best teacher-forced accuracy rose: under patience on
    accuracy, a run with a smaller patience stops a string at the first rise not followed by
    another within it, so its rung is read from the larger run's strings, and gets exactly the
    counts of a fresh run with that patience."""
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.models.loading import load_model

    store = tmp_path / "s.sqlite"
    lengths = [3, 5, 7, 9]
    b = bundling.make_cramming_bundle(embedded.DEFAULT, (1,), samples=6, source="natural", protocol="paper",
                                      search="grid", lengths={1: lengths}, max_steps=120, patience=60, store=store,
                                      geometry=False, progress=False)
    bundles.save(b, tmp_path)
    saved = json.loads((tmp_path / f"cram-{embedded.DEFAULT}.json").read_text())
    rows = ResultsStore(store).rows()
    assert len(rows) == 24
    for r in rows:   # the history: from step 0, rising, the last rise at or before the string's end
        h = r["accuracy_history"]
        assert h[0][0] == 0 and all(s1 > s0 and a1 > a0 for (s0, a0), (s1, a1) in zip(h, h[1:]))
        assert h[-1][0] <= r["steps"] and (h[-1][1] == 1.0) == bool(r["tf_success"])
        if r["reason"] == "patience":   # stopped 60 steps after its last rise
            assert bundling.patience_stop(h, 60) == r["steps"] == h[-1][0] + 60
    lm = load_model(embedded.DEFAULT)
    for steps, patience in ((120, 8), (40, 20)):
        rung = bundling.derived_rung(store, saved, 1, steps, patience)
        assert rung["derived_from"] == 120 and rung["derived_patience_from"] == 60 and rung["strings_crammed"] == 0
        (fresh,) = accessibility_curves(lm, [1], {1: lengths}, samples=6, source="natural", seed=0, store=store,
                                        search="grid", protocol="paper", max_steps=steps, patience=patience)
        assert fresh.strings_crammed == 24 and rung["successes"] == list(fresh.successes), (steps, patience)
    assert sum(bundling.derived_rung(store, saved, 1, 120, 8)["successes"]) < sum(b["curves"][0]["successes"])
    # the ladder reads it too, and names the patience where rungs differ in it
    lad = bundling.budget_ladder(None, saved, [(40, 8)], store=store)
    assert lad["rungs"][0]["patience"] == 8 and lad["rungs"][0]["derived_patience_from"] == 60
    assert bundles.ladder_text(dict(saved, budget_ladder=lad)).startswith(
        "n50 at m = 1 by step budget: 40 steps, patience 8 ")
    assert "(read from the 120-step run, patience 60)" in bundles.ladder_text(dict(saved, budget_ladder=lad))
    # refused in words: patience on the loss, and strings crammed before the history was kept
    on_loss = dict(saved, settings=dict(saved["settings"], patience_on="loss"))
    with pytest.raises(ValueError, match="needs patience on teacher-forced accuracy; .* watched 'loss'"):
        bundling.derived_rung(store, on_loss, 1, 120, 8)
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE strings SET accuracy_history = NULL")
    with pytest.raises(ValueError, match=r"crammed strings .* have no accuracy history"):
        bundling.derived_rung(store, saved, 1, 120, 8)
    assert bundling.derived_rung(store, saved, 1, 40)["patience"] == 60   # the same patience needs none


def test_patience_stop_is_the_first_rise_not_followed_within_patience():
    h = [[0, 0.1], [5, 0.3], [30, 0.6], [34, 1.0]]
    assert bundling.patience_stop(h, 30) == 64       # no gap above 30: 30 steps after the last rise
    assert bundling.patience_stop(h, 25) == 59       # 5 -> 30 is a gap of 25: not above it
    assert bundling.patience_stop(h, 24) == 29       # ... above 24: stopped at 5 + 24
    assert bundling.patience_stop(h, 4) == 4 and bundling.patience_stop([], 4) is None


def test_a_read_rung_is_named_in_words_and_in_the_table(tmp_path, load_script):
    rungs = [dict(max_steps=1000, patience=500, lengths=[12, 18], successes=[5, 1], totals=[6, 6], n50=14.0,
                  stderr=1.0, shipped=False, derived_from=3000, compared_with=3000, moved=False, shift=0.3),
             dict(max_steps=3000, patience=500, lengths=[12, 18], successes=[6, 1], totals=[6, 6], n50=14.3,
                  stderr=1.0, shipped=True, compared_with=None, moved=None, shift=None)]
    b = dict(kind="cram", model="m-x", budget_ladder=dict(m=1, rungs=rungs, converged_at=1000, still_moving=False))
    assert bundles.ladder_text(b).startswith(
        "n50 at m = 1 by step budget: 1,000 steps 14.0 ± 1.0 (read from the 3,000-step run), 3,000 steps "
        "14.3 ± 1.0 (shipped). It settles at 1,000 steps")
    assert bundles.ladder_text(b).endswith("3,000 steps move it by less than its standard error, at the same "
                                           "patience (500), which was not checked.")
    label, text = bundles.budget_status(b)
    # both rungs have patience 500: the steps were checked, the patience was not, so not converged
    assert label == "inconclusive" and "(m = 1: 14.0 with 1000 steps, 14.3 with 3000)" in text
    assert text.startswith("Steps checked, patience not: with 3x the steps at the same patience (500) n50 moved by "
                           "less than its standard error (m = 1: 14.0 with 1000 steps, 14.3 with 3000), but the "
                           "patience was not tripled with the steps, and under a patience rule a larger patience "
                           "can move n50 where more steps alone do not. n50 at m = 1")
    # rungs whose patience grows with their steps: the whole budget was checked
    scaled = dict(b, budget_ladder=dict(b["budget_ladder"], rungs=[dict(rungs[0], patience=167), rungs[1]]))
    assert bundles.budget_status(scaled)[0] == "converged"
    b["budget_ladder"].update(converged_at=None, still_moving=True)
    rungs[0].update(moved=True, n50=10.0)
    assert bundles.budget_status(b)[0] == "budget-limited"
    bundles.save(b, tmp_path)
    table = "\n".join(load_script("scripts/make_bundles.py").budget_table(["m-x"], tmp_path))
    assert "| m-x | 1 | 1,000, 500 (read from the 3,000-step run) | 12, 18 | 5/6, 1/6 | " in table


def test_a_live_ladder_reads_smaller_budgets_from_a_run_still_going(tmp_path, capsys):
    """A 120-step run (patience 60 on accuracy) stopped at step 70: every string it is still
    cramming has passed 40 steps, so the 40 / 20 rung is decided already and has the counts of a
    fresh 40 / 20 run; the run's own rung says which strings may still cram, and once the run is
    resumed to its end it is the run's curve. A rung with a smaller patience counts a string
    stopped by it as failed before the run ends (never one that then crams)."""
    import threading

    from accesslib.cli import main
    from accesslib.engine.cramming import kept_states
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.models.loading import load_model

    lm = load_model(embedded.DEFAULT)
    kw = dict(samples=6, source="natural", seed=0, search="grid", protocol="paper")
    lengths = {1: [3, 5, 7, 9]}
    store = tmp_path / "run.sqlite"
    stop = threading.Event()

    def on_step(info):
        if info.step >= 70:
            stop.set()

    cut = accessibility_curves(lm, [1], lengths, store=store, stop=stop, on_step=on_step, max_steps=120,
                               patience=60, **kw)[0]
    assert cut.interrupted
    kept = kept_states(ResultsStore(store))["states"]
    assert kept and min(k["step"] for k in kept) > 40
    got = bundling.live_ladder(store, [(40, 20), (120, 8)])
    assert (got["unclaimed"], got["unreadable"]) == (0, 0)
    (live,) = got["curves"]
    assert (live["m"], live["source"], live["max_steps"], live["patience"]) == (1, "natural", 120, 60)
    assert live["kept"] == len(kept) and live["finished"] + live["kept"] == 24
    early, small_patience, own = live["rungs"]
    assert [(r["max_steps"], r["patience"], r["own"]) for r in live["rungs"]] == [(40, 20, False), (120, 8, False),
                                                                                 (120, 60, True)]
    assert early["open"] == [0, 0, 0, 0] and early["totals"] == [6, 6, 6, 6]
    (fresh,) = accessibility_curves(lm, [1], lengths, store=tmp_path / "fresh.sqlite", max_steps=40, patience=20,
                                    **kw)
    assert early["successes"] == list(fresh.successes) and early["lengths"] == [3, 5, 7, 9]
    assert early["n50"] == bundling.measured_rung(40, 20, [3, 5, 7, 9], fresh.successes, fresh.totals)["n50"]
    assert sum(own["open"]) == len(kept) and own["n50"] is None
    assert own["if_all_fail"]["successes"] == own["successes"]
    assert own["if_all_cram"]["successes"] == [s + o for s, o in zip(own["successes"], own["open"])]
    # the run's own rung and the 40 / 20 rung, printed
    assert main(["store", "ladder", "--budget", "40/20", "--store", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tiny-") and out[0].endswith(f"(120 steps, patience 60): {live['finished']} strings "
                                                          f"finished, {len(kept)} still being crammed (steps "
                                                          f"{min(k['step'] for k in kept)}-{max(k['step'] for k in kept)})")
    assert out[1].split() == ["budget", "n=3", "n=5", "n=7", "n=9", "n50"]
    assert out[2].split()[:7] == ["40", "/", "20", *(f"{s}/6" for s in fresh.successes)]
    assert out[3].split()[:5] == ["120", "/", "60", "(the", "run's)"]
    assert f"however the {sum(own['open'])} open strings end" in out[3]
    assert out[4] == "  +k?: strings still being crammed that may cram within that budget"
    assert out[5].startswith("  40 / 20 -> 120 / 60: ")    # the rung against the one with 3x its steps
    # --decided: 0 once every string's outcome within the budgets asked for is known, 3 while any may cram
    assert main(["store", "ladder", "--budget", "40/20", "--decided", "--store", str(store)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "decided: every string's outcome within 40 / 20 is known"
    assert main(["store", "ladder", "--budget", "40/20", "120/60", "--decided", "--store", str(store)]) == 3
    assert capsys.readouterr().out.splitlines()[-1] == (f"not decided: {len(kept)} strings may still cram within "
                                                        f"40 / 20, 120 / 60")
    assert main(["store", "ladder", "--budget", "40/20", "--decided", "--m", "2", "--store", str(store)]) == 3
    assert "no string finished or kept matches the filters" in capsys.readouterr().out     # nothing there yet
    png = tmp_path / "ladder.png"
    assert main(["store", "ladder", "--budget", "40/20", "--store", str(store), "--plot", str(png)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"plot: {png}"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["store", "ladder", "--budget", "40/20", "--store", str(store), "--plot", str(tmp_path / "x.txt")]) == 2
    assert "--plot must be a file ending in .png, .svg or .pdf" in capsys.readouterr().err
    # resumed to its end: nothing open, the own rung is the run's curve, decided counts stand
    (whole,) = accessibility_curves(lm, [1], lengths, store=store, max_steps=120, patience=60, **kw)
    (done,) = bundling.live_ladder(store, [(40, 20), (120, 8)])["curves"]
    assert done["kept"] == 0 and all(sum(r["open"]) == 0 for r in done["rungs"])
    assert main(["store", "ladder", "--budget", "120/8", "120/60", "--decided", "--store", str(store)]) == 0
    capsys.readouterr()
    assert done["rungs"][0]["successes"] == early["successes"]
    assert done["rungs"][2]["successes"] == list(whole.successes)
    for before, after in zip(small_patience["successes"], done["rungs"][1]["successes"]):
        assert before <= after
    assert [a <= s + o for a, s, o in zip(done["rungs"][1]["successes"], small_patience["successes"],
                                          small_patience["open"])] == [True] * 4
    assert sum(small_patience["open"]) < len(kept)          # patience 8 decided some strings already
    # a store with a curve that cannot read a budget: that curve says why, the other reads it
    ResultsStore(store).merge(tmp_path / "fresh.sqlite")
    mixed = bundling.live_ladder(store, [(60, 20)])["curves"]
    short, run = sorted(mixed, key=lambda c: c["max_steps"])
    assert (short["max_steps"], run["max_steps"]) == (40, 120)
    assert short["refused"] == [f"a budget read from a run cannot exceed the run's own: 60 / 20 is larger than "
                                f"{short['model']}'s curve at m = 1 (natural, protocol {short['protocol_hash']}: 40 "
                                "steps, patience 20); measure it (make_bundles.py --ladder)"]
    assert [r["max_steps"] for r in short["rungs"]] == [40] and run["refused"] == []
    assert [(r["max_steps"], r["patience"]) for r in run["rungs"]] == [(60, 20), (120, 60)]
    assert main(["store", "ladder", "--budget", "60/20", "--store", str(store)]) == 0
    assert "  not read: a budget read from a run cannot exceed the run's own: 60 / 20" in capsys.readouterr().out
    assert main(["store", "ladder", "--budget", "500/20", "--store", str(store)]) == 2
    assert "(and no other of the store's 2 curves can be read either)" in capsys.readouterr().err
    # a kept state of other settings is claimed by no curve, a damaged one is not read: both said
    import io

    import torch
    st = ResultsStore(store)
    assert st.inflight() == []
    foreign = dict(fingerprint=dict(max_steps=999), ids=[1, 2, 3], m=1, best=1.0, best_acc=0.5,
                   step=5, acc_history=[[0, 0.1]])
    buf = io.BytesIO()
    torch.save(foreign, buf)
    # a state still kept for a string that has its row (it finished between the two reads) counts once
    from accesslib.results.store import inflight_key
    row = st.rows(protocol_hash=live["protocol_hash"])[0]
    stale = io.BytesIO()
    torch.save(dict(foreign, ids=row["target_ids"]), stale)
    st.save_inflight({inflight_key(row): (stale.getvalue(), 5)})
    again = {c["protocol_hash"]: c for c in bundling.live_ladder(store, [(40, 20)])["curves"]}[live["protocol_hash"]]
    assert again["kept"] == 0 and sum(again["rungs"][-1]["totals"]) == 24
    st.drop_inflight([inflight_key(row)])
    st.save_inflight({"foreign": (buf.getvalue(), 5), "damaged": (b"not a state", 3)})
    got = bundling.live_ladder(store, [(40, 20)])
    assert (got["unclaimed"], got["unreadable"]) == (1, 1) and all(c["kept"] == 0 for c in got["curves"])
    assert main(["store", "ladder", "--budget", "40/20", "--store", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["kept strings that name no run of the store (none of their run's strings has finished yet): "
                       "1, counted in no rung",
                       "kept states that could not be read (damaged, or written by another program): 1, counted in "
                       "no rung"]
    # what cannot be read is refused, in words
    for budget, words in (("240/60", "cannot exceed the run's own: 240 / 60 is larger than"),
                          ("40", "--budget must be STEPS/PATIENCE pairs"),
                          ("0/5", "--budget must be STEPS/PATIENCE pairs")):
        assert main(["store", "ladder", "--budget", budget, "--store", str(store)]) == 2
        assert words in capsys.readouterr().err


def test_a_live_ladder_names_a_curve_none_of_whose_strings_has_finished(tmp_path, capsys):
    """A run's m = 2 strings, all still being crammed after its m = 1 curve finished: the kept
    states name their curve (the run is known from its m = 1 strings), so the ladder shows it with
    every string open under the run's budget and failed under a budget they have passed."""
    import threading

    from accesslib.cli import main
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.models.loading import load_model

    lm = load_model(embedded.DEFAULT)
    kw = dict(samples=3, source="natural", seed=0, search="grid", protocol="paper", max_steps=60, patience=30)
    store = tmp_path / "run.sqlite"
    accessibility_curves(lm, [1], {1: [3, 5]}, store=store, **kw)
    stop, full = threading.Event(), []

    def on_step(info):      # strings join the batch as they are submitted: stop 6 steps after the last joined
        if len(info.active) == 6:
            full.append(info.step)
        if full and info.step >= full[0] + 6:
            stop.set()

    assert accessibility_curves(lm, [2], {2: [14, 18]}, store=store, stop=stop, on_step=on_step, batch_size=6,
                                **kw)[0].interrupted
    assert ResultsStore(store).count(m=2) == 0 and len(ResultsStore(store).inflight()) == 6
    got = bundling.live_ladder(store, [(4, 2)])
    assert got["unclaimed"] == 0
    one, two = got["curves"]
    assert (one["m"], one["finished"], one["kept"]) == (1, 6, 0)
    assert (two["m"], two["finished"], two["kept"], two["source"]) == (2, 0, 6, "natural")
    assert two["protocol_hash"] == one["protocol_hash"] and (two["max_steps"], two["patience"]) == (60, 30)
    early, own = two["rungs"]
    assert (early["lengths"], early["successes"], early["totals"], early["open"]) == ([14, 18], [0, 0], [3, 3], [0, 0])
    assert early["n50_below"] == 14
    assert own["open"] == [3, 3] and own["n50"] is None and own["own"]
    # filters: m = 2 keeps only it, m = 1 leaves it out, a column a kept state cannot show leaves it out
    assert [c["m"] for c in bundling.live_ladder(store, [(4, 2)], m=2)["curves"]] == [2]
    assert [c["m"] for c in bundling.live_ladder(store, [(4, 2)], m=1)["curves"]] == [1]
    assert [c["m"] for c in bundling.live_ladder(store, [(4, 2)], n=3)["curves"]] == [1]
    assert main(["store", "ladder", "--budget", "4/2", "--m", "2", "--store", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    lo, hi = two["kept_steps"]
    assert 4 < lo <= hi and out[0].endswith(f"(60 steps, patience 30): 0 strings finished, 6 still being crammed "
                                            f"(steps {lo}-{hi})")
    assert out[2].split()[:5] == ["4", "/", "2", "0/3", "0/3"] and out[2].endswith("< 14 (none crammed at 14)")
    assert out[3].split()[:7] == ["60", "/", "30", "(the", "run's)", "0/3", "+3?"]
    # both m of the run: the slope per budget says why it cannot be read yet
    assert main(["store", "ladder", "--budget", "4/2", "--store", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3] == f"slope n50 = a*m + b over m = 1, 2: {one['model']}, natural, protocol {one['protocol_hash']}"
    assert out[-2].startswith("  4 / 2: not yet (") and "no n50 located at m = " in out[-2]
    assert out[-1].startswith("  60 / 30: not yet (strings still open at m = 2")
    # where its slope can end cannot be told there (m = 1 has no n50 at 60 / 30 yet): nothing more is said
    assert bundling.ladder_slopes(bundling.live_ladder(store, [(4, 2)])["curves"])[0]["budgets"][-1]["slope_range"] is None
    assert out[-1].endswith(")")


def test_row_filters_apply_to_kept_strings_as_to_their_rows(tmp_path):
    """A kept string passes a live ladder's filters as its row will: a seed filter keeps another
    seed's kept string out, an n filter other lengths', None is no filter, a set any of its values."""
    import io

    import torch

    from accesslib.results.store import inflight_key, protocol_hash, target_hash

    settings = dict(max_steps=60, patience=30, patience_on="accuracy", schedule=None)
    ph = protocol_hash(settings)
    st = ResultsStore(tmp_path / "s.sqlite")

    def key(seed, n, ids):
        return dict(model="x", m=1, n=n, source="tokens", target_hash=target_hash(ids), seed=seed, protocol_hash=ph)

    st.add_many([dict(key(0, 3, [1, 2, 3]), success=True, steps=10, accuracy_history=[[0, 0.5]]),
                 dict(key(1, 3, [4, 5, 6]), success=True, steps=10, accuracy_history=[[0, 0.5]])], settings=settings)
    buf = io.BytesIO()
    torch.save(dict(m=1, ids=[7, 8, 9], step=5, best=1.0, best_acc=0.3, acc_history=[[0, 0.3]]), buf)
    st.save_inflight({inflight_key(key(1, 3, [7, 8, 9])): (buf.getvalue(), 5)})

    def seen(**filters):
        got = bundling.live_ladder(st, [(60, 30)], **filters)
        return [(c["finished"], c["kept"], c["rungs"][-1]["totals"]) for c in got["curves"]], got["unclaimed"]

    assert seen() == ([(2, 1, [3])], 0)
    assert seen(seed=0) == ([(1, 0, [1])], 0)          # seed 1's kept string is not seed 0's
    assert seen(seed=1) == ([(1, 1, [2])], 0)
    assert seen(seed=frozenset({1})) == seen(seed=1) and seen(seed=None) == seen()
    assert seen(n=5) == ([], 0)
    assert seen(success=True) == ([(2, 0, [2])], 0)    # a kept string has not crammed (yet)


def test_a_shift_near_the_threshold_is_printed_with_two_decimals():
    from accesslib.results.bundles import rung_shift_text
    from accesslib.results.bundles import shift_text as _shift

    assert (_shift(1.02), _shift(0.98), _shift(-0.97)) == ("+1.02", "+0.98", "-0.97")   # never "+1.0" twice
    assert (_shift(3.71), _shift(0.6), _shift(1.05)) == ("+3.7", "+0.6", "+1.1")
    # the tables of docs and notebook 03 word it the same way as the CLI
    assert rung_shift_text({"moved": True, "shift": 1.02}) == "yes (+1.02)"
    assert rung_shift_text({"moved": False, "shift": 0.98}) == "no (+0.98)"


def test_ladder_slopes_fit_each_budget_read_at_every_m():
    """n50 = a*m + b per budget of one run; a budget with strings open (or no n50) at some m says
    which m, and a run at one m, or another run, is not mixed in."""
    def rung(a, b, n50, se, open_=0, above=None):
        r = dict(max_steps=a, patience=b, n50=n50, stderr=se, open=[open_, 0], unknown=0)
        return r if above is None else dict(r, n50_above=above)

    def curve(m, rungs, source="glove100k"):
        return dict(model="x", m=m, source=source, protocol_hash="p", rungs=rungs)

    curves = [curve(1, [rung(1000, 500, 18.7, 1.7), rung(3000, 500, 20.1, 1.8), rung(9000, 1500, 30.7, 2.2)]),
              curve(2, [rung(1000, 500, 40.0, 3.0), rung(3000, 500, None, None, open_=2),
                        rung(9000, 1500, None, None, above=82)]),
              curve(3, [rung(1000, 500, 58.0, 4.0)]),
              curve(1, [rung(1000, 500, 9.0, 1.0)], source="tokens")]
    (run,) = bundling.ladder_slopes(curves)
    assert (run["source"], run["ms"]) == ("glove100k", [1, 2, 3])
    (only,) = run["budgets"]                     # the one budget read at every m
    fit = stats.fit_slope([1, 2, 3], [18.7, 40.0, 58.0])
    assert (only["max_steps"], only["patience"]) == (1000, 500)
    assert only["slope"] == pytest.approx(fit.slope) and only["intercept"] == pytest.approx(fit.intercept)
    assert only["r2"] == pytest.approx(fit.r2)
    assert only["slope_stderr"] == pytest.approx(stats.propagated_slope_stderr([1, 2, 3], [1.7, 3.0, 4.0]))
    two = bundling.ladder_slopes(curves[:2])[0]["budgets"]
    assert two[0]["slope"] == pytest.approx(40.0 - 18.7) and two[0]["r2"] is None
    assert two[0]["slope_stderr"] == pytest.approx(math.hypot(1.7, 3.0))
    assert (two[1]["slope"], two[1]["why"]) == (None, "strings still open at m = 2")
    assert (two[2]["slope"], two[2]["why"]) == (None, "no n50 located at m = 2")
    assert stats.propagated_slope_stderr([1, 3], [2.0, 2.0]) == pytest.approx(math.hypot(2, 2) / 2)
    assert math.isnan(stats.propagated_slope_stderr([1, 1], [2.0, 2.0]))
    assert math.isnan(stats.propagated_slope_stderr([1, 2, 3], [1.0, math.inf, 1.0]))   # no point dropped
    # three m: the unweighted slope's own spread, a = sum c_i y_i, c = (m - 7/3) / (42/9)
    c = [(m - 7 / 3) / (42 / 9) for m in (1, 2, 4)]
    want = math.sqrt(sum((ci * se) ** 2 for ci, se in zip(c, (0.5, 1.0, 3.0))))
    assert want == pytest.approx(1.0833, abs=1e-4)
    assert stats.propagated_slope_stderr([1, 2, 4], [0.5, 1.0, 3.0]) == pytest.approx(want)
    rng = __import__("numpy").random.default_rng(0)       # and by simulation: the fitted slopes' spread
    draws = [stats.fit_slope([1, 2, 4], [10 + rng.normal(0, se) for se in (0.5, 1.0, 3.0)]).slope
             for _ in range(4000)]
    assert __import__("numpy").std(draws) == pytest.approx(want, rel=0.05)


def test_a_slope_with_strings_open_says_where_it_can_still_end(tmp_path, capsys):
    """While an m has strings open, the slope lies between the fits its n50 range allows: with m =
    1, 2, 3 the slope is (n50_3 - n50_1) / 2, so an open m = 3 that ends at 54 or more (SmolLM2's
    words under [A]'s 3000 / 500, 6 December) gives a of (54 - 20.1) / 2 or more; an m whose n50 can
    pass its longest length leaves the slope unbounded on that side; the middle m moves it not."""
    def rung(n50, se=1.0, rg=None):
        return dict(max_steps=3000, patience=500, n50=n50, stderr=se, open=[0, 2] if rg else [0, 0], unknown=0,
                    **({"n50_range": rg} if rg else {}))

    def rg(low, high, above=0, below=0):
        return dict(low=low, high=high, above=above, below=below, unlocated=0, ways=9, located=[])

    open_3 = [rung(20.1), rung(42.9), rung(None, None, rg(54.0, 107.4, above=3))]
    assert bundling.open_slope_range([1, 2, 3], open_3) == dict(low=pytest.approx((54.0 - 20.1) / 2), high=None)
    closed_3 = open_3[:2] + [rung(None, None, rg(54.0, 80.0))]
    assert bundling.open_slope_range([1, 2, 3], closed_3) == dict(low=pytest.approx(16.95), high=pytest.approx(29.95))
    # an open first m bounds it the other way round; the middle m's range does not count
    open_1 = [rung(None, None, rg(10.0, 14.0)), rung(None, None, rg(1.0, 900.0, above=1, below=1)), rung(40.0)]
    assert bundling.open_slope_range([1, 2, 3], open_1) == dict(low=pytest.approx(13.0), high=pytest.approx(15.0))
    # an open m = 1 that may pass its longest length, then a decided m = 2: unbounded below only
    # (the 27000 / 4500 words run's m = 1 strings open beside its decided m = 2 once crashed here)
    open_first = [rung(None, None, rg(20.1, 43.5, above=5)), rung(42.9)]
    assert bundling.open_slope_range([1, 2], open_first) == dict(low=None, high=pytest.approx(42.9 - 20.1))
    # nothing to tell: an open m without a range, strings without a history, a decided m without n50
    assert bundling.open_slope_range([1, 2], [rung(10.0), dict(rung(None), open=[1, 0])]) is None
    assert bundling.open_slope_range([1, 2], [rung(10.0), dict(rung(None, None, rg(20, 30)), unknown=1)]) is None
    assert bundling.open_slope_range([1, 2], [rung(None), rung(None, None, rg(20, 30))]) is None
    # ladder_slopes carries it, and `store ladder` prints it
    curves = [dict(model="x", m=m, source="glove100k", protocol_hash="p", rungs=[r]) for m, r in zip((1, 2, 3), open_3)]
    (run,) = bundling.ladder_slopes(curves)
    (entry,) = run["budgets"]
    assert entry["slope"] is None and entry["slope_range"] == dict(low=pytest.approx(16.95), high=None)
    from accesslib.cli import slope_range_text

    assert slope_range_text(entry["slope_range"]) == "; a = 16.95 or more however the open strings end"
    assert slope_range_text(dict(low=16.95, high=29.95)) == "; a between 16.95 and 29.95 however the open strings end"
    assert slope_range_text(dict(low=None, high=15.0)) == "; a = 15.00 or less however the open strings end"
    assert slope_range_text(None) == slope_range_text(dict(low=None, high=None)) == ""


def test_a_smaller_patience_read_from_a_real_run_is_the_run_with_that_patience(tmp_path):
    """SmolLM2-135M, the same 42 random-token strings crammed twice under [A]'s protocol (the
    committed snapshots of two long runs): once with patience 500 (`smol-paper-tokens`), once with
    patience 1500 (`smol-tokens-9k`, still going when a snapshot was taken). Read from the second
    run's accuracy histories, patience 500 (with 3000 steps) crams exactly the strings the first
    run crammed, at the same steps, and stops every other one at the step where it stopped."""
    import shutil

    from accesslib.engine.cramming import kept_states
    from accesslib.results.bundles import patience_stop
    from accesslib.results.store import target_hash

    stores = Path(__file__).resolve().parents[2] / "benchmarks" / "runs" / "stores"
    for name in ("smol-paper-tokens.sqlite", "smol-tokens-9k.sqlite"):     # opened as copies: never written
        shutil.copyfile(stores / name, tmp_path / name)
    five = {r["target_hash"]: r for r in ResultsStore(tmp_path / "smol-paper-tokens.sqlite").rows()}
    long = ResultsStore(tmp_path / "smol-tokens-9k.sqlite")
    rows = {r["target_hash"]: r for r in long.rows(m=1)}          # (its m = 2 strings come later)
    kept = {target_hash(k["ids"]): k for k in kept_states(long)["states"] if k["m"] == 1}
    assert len(five) == 42 and set(five) == set(rows) | set(kept)
    crammed = 0
    for h, r in five.items():
        assert int(r["steps"]) <= 3000       # the patience-500 run never needed more
        if h in rows:
            assert bundling.finished_under(rows[h], 3000, 500, 1500) is r["success"]
            history = rows[h]["accuracy_history"]
        else:
            # still being crammed: failed under patience 500 once past the step where that run
            # stopped it, open (None) until then
            assert not r["success"]
            assert bundling.kept_under(kept[h], 3000, 500) is (False if kept[h]["step"] > int(r["steps"]) else None)
            history = kept[h]["accuracy_history"]
        if r["success"]:
            crammed += 1
            assert int(rows[h]["steps"]) == int(r["steps"])   # the same trajectory, crammed at the same step
        else:
            assert patience_stop(history, 500) == int(r["steps"])
    assert crammed == 15


def test_a_kept_string_fails_a_budget_once_past_its_steps_or_its_patience():
    """A state kept at step 700 was evaluated at steps 0..699: a budget whose last evaluation (its
    max_steps, or its patience's stop) falls before 700 has failed it; one at 700 may still cram it."""
    state = dict(step=700, accuracy_history=[[0, 0.1], [150, 0.5], [180, 0.6]])
    assert bundling.kept_under(state, 699, 1500) is False        # evaluated to the end of the budget
    assert bundling.kept_under(state, 700, 1500) is None         # its last evaluation, at 700, is still to come
    assert bundling.kept_under(state, 3000, 500) is False        # no rise for 500 steps: stopped at 680
    assert bundling.kept_under(state, 3000, 520) is None         # stopped at 700: that evaluation may cram it
    assert bundling.kept_under(state, 3000, 519) is False
    assert bundling.kept_under(dict(state, accuracy_history=None), 3000, 500) is None   # nothing to read
    row = dict(success=True, steps=600, accuracy_history=[[0, 0.1], [100, 0.5], [600, 1.0]])
    assert bundling.finished_under(row, 600, 1500, 1500) is True
    assert bundling.finished_under(row, 599, 1500, 1500) is False
    assert bundling.finished_under(row, 3000, 499, 1500) is False and bundling.finished_under(row, 3000, 500, 1500)
    assert bundling.finished_under(dict(row, accuracy_history=None), 3000, 500, 1500) is None
    assert bundling.finished_under(dict(row, success=False), 3000, 1500, 1500) is False


def test_the_range_of_n50_over_every_way_the_open_strings_can_end():
    """open_n50_range fits each completion: the least and greatest located n50 and how many ways
    locate none (a falling curve past the grid, before it, or no falling curve), checked against
    fits made here one by one."""
    from accesslib.theory.stats import fit_n50

    lengths, successes, totals, open_ = [10, 16, 24, 34, 46], [6, 6, 5, 1, 0], [6] * 5, [0, 0, 1, 4, 6]
    rg = bundling.open_n50_range(lengths, successes, totals, open_, against=(20.0, 1.8))
    assert rg["ways"] == 2 * 5 * 7
    ways = [(a, b, c) for a in range(2) for b in range(5) for c in range(7)]
    fits = [fit_n50((lengths, [6, 6, 5 + a, 1 + b, c], totals)) for a, b, c in ways]
    falling = [f.status in ("ok", "separated") and f.k < 0 for f in fits]
    ok = [y and 10 <= f.n50 <= 46 for f, y in zip(fits, falling)]
    located = [(f.n50, f.stderr) for f, y in zip(fits, ok) if y]
    assert rg["low"] == pytest.approx(min(located)[0]) and rg["high"] == pytest.approx(max(located)[0])
    assert rg["low"] == pytest.approx(fit_n50((lengths, successes, totals)).n50)   # here: every open string fails
    above = sum(1 for (a, b, c), f, y, z in zip(ways, fits, ok, falling) if not y and (c == 6 or (z and f.n50 > 46)))
    assert rg["above"] == above > 0 and rg["below"] == 0
    assert rg["unlocated"] == rg["ways"] - len(located) - above
    assert rg["least_shift"] == pytest.approx(min((n - 20.0) / math.hypot(1.8, se) for n, se in located))
    assert bundling.open_n50_range(lengths, successes, totals, open_, limit=69) is None
    tail = f" ({rg['unlocated']} of the 70 ways: no falling curve)" if rg["unlocated"] else ""
    assert bundles.open_range_text(dict(lengths=lengths, open=open_, n50_range=rg)) == (
        f"{rg['low']:.1f} to {rg['high']:.1f} or > 46 however the 11 open strings end{tail}")
    assert bundles.open_range_text(dict(lengths=lengths, open=open_, n50_range=None)) == ""
    one = bundling.open_n50_range([4, 8], [3, 0], [4, 4], [0, 1])      # 3/4 then 0/4 or 1/4: located twice
    assert one["ways"] == 2 and one["above"] == one["below"] == one["unlocated"] == 0 and "least_shift" not in one
    assert bundles.open_range_text(dict(lengths=[4, 8], open=[0, 1], n50_range=one)).endswith(
        "however the open string ends")


def test_a_rung_with_open_strings_has_moved_once_every_way_it_can_end_has():
    lengths, totals = [10, 16, 24, 34, 46], [6] * 5
    a = bundling.measured_rung(3000, 500, lengths, [6, 5, 1, 0, 0], totals)
    b = dict(max_steps=9000, patience=1500, lengths=lengths, successes=[6, 6, 5, 1, 0], totals=totals,
             open=[0, 0, 1, 4, 6])
    moved, shift = bundling.open_rung_moved(a, b)
    rg = bundling.open_n50_range(lengths, b["successes"], totals, b["open"], against=(a["n50"], a["stderr"]))
    assert moved is True and shift == pytest.approx(min(rg["least_shift"], (46 - a["n50"]) / a["stderr"]))
    assert shift > 2.5
    # with more open strings at a shorter length, some way of ending still meets a: not yet
    c = dict(b, successes=[6, 4, 1, 0, 0], open=[0, 2, 5, 6, 6])
    assert bundling.open_rung_moved(a, c) == (None, None)
    # not only the lowest n50 counts: one way ([5, 3, 1, 0, 1]: 16.85 +- 4.1) lies within the combined
    # stderr of 13.1 +- 0.2 although the way with the lowest n50 lies beyond it
    d = dict(max_steps=9000, patience=1500, lengths=lengths, successes=[5, 3, 1, 0, 0], totals=totals,
             open=[1, 2, 3, 2, 1])
    assert bundling.open_rung_moved(dict(n50=13.1, stderr=0.2), d) == (None, None)
    assert bundling.open_rung_moved(a, dict(b, open=[0] * 5)) == (None, None)     # nothing open: not this test
