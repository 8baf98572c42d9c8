"""The budget map: n50 over step budgets x patiences read from one run, the strings each step cap
stops while they are still gaining, its words, its command line, its bundle record and its plot."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from accesslib.cli import main  # noqa: E402
from accesslib.experiments import bundling  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.store import ResultsStore  # noqa: E402
from accesslib.theory.bounds import slope  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STORES = ROOT / "benchmarks" / "runs" / "stores"
SCRIPT = str(ROOT / "scripts" / "make_bundles.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Copies of the committed snapshots of SmolLM2-135M's two runs on the same 42 random-token
    strings at m = 1 under [A]'s protocol: patience 500 (9000 steps) and patience 1500 (9000
    steps). Opened as copies: a committed snapshot is never written."""
    d = tmp_path_factory.mktemp("runs")
    for name in ("smol-paper-tokens.sqlite", "smol-tokens-9k.sqlite"):
        shutil.copyfile(STORES / name, d / name)
    return d


def _nine(maps):
    """The map of the 9000 / 1500 run: the store also holds the 27000 / 4500 run that goes on from it."""
    (mp,) = [mp for mp in maps if tuple(mp["run"]) == (9000, 1500)]
    return mp


def _counts(rows, lengths):
    return [sum(1 for r in rows if int(r["n"]) == n and r["success"]) for n in lengths]


def test_patience_500_read_from_the_1500_run_is_the_500_run_and_its_cap_never_binds(runs):
    """Read from the patience-1500 run, every step budget from 2000 up at patience 500 crams
    exactly the strings the separate patience-500 run crammed; [A]'s 3000-step cap stops none of
    them while still gaining (the 500 run never needed more than 3000 steps), so that column is
    settled by 2000 steps; the patience moves n50, the steps past 2000 do not."""
    got = bundling.budget_map(runs / "smol-tokens-9k.sqlite", [1000, 2000, 3000, 4500], [250, 500, 1000], m=1)
    mp = _nine(got["maps"])
    assert (mp["model"], mp["m"], mp["source"], tuple(mp["run"])) == ("smollm2-135m", 1, "tokens", (9000, 1500))
    assert mp["steps"] == [1000, 2000, 3000, 4500, 9000] and mp["patiences"] == [250, 500, 1000, 1500]
    assert mp["settings"]["lr"] == 0.01 and mp["settings"]["patience_on"] == "accuracy"
    five = ResultsStore(runs / "smol-paper-tokens.sqlite").rows()
    assert len(five) == 42 and max(int(r["steps"]) for r in five) <= 3000
    want = _counts(five, mp["lengths"])
    col = [row[mp["patiences"].index(500)] for row in mp["cells"]]
    assert [c["successes"] for c in col[1:]] == [want] * 4          # 2000, 3000, 4500, 9000 steps
    assert col[0]["successes"] != want                               # 1000 steps cram fewer
    assert mp["settled"][mp["patiences"].index(500)] == 2000
    cell = col[mp["steps"].index(3000)]
    assert (cell["cut"], cell["cut_unknown"]) == (0, 0)
    assert col[0]["cut"] > 0                                          # 1000 steps stop strings still gaining
    assert round(cell["n50"], 1) == 12.8
    last = mp["cells"][-1]                                            # at 9000 steps, by patience
    assert [round(c["n50"], 1) for c in last] == [10.1, 12.8, 13.5, 15.6]
    lines = bundles.budget_map_lines(mp, (3000, 500))
    assert "patience 500: settled from 2,000 steps: n50 12.8 up to 9,000" in lines
    assert ("[A]'s 3,000 / 500: its 3,000-step cap stopped none of the 42 strings while still gaining accuracy "
            "(each crammed or ran out of patience first), so more steps cannot move n50 at patience 500") in lines
    assert "at 9,000 steps, n50 by patience: 10.1 (250), 12.8 (500), 13.5 (1,000), 15.6 (1,500)" in lines


def _row(n, success, steps, history):
    return dict(n=n, success=success, steps=steps, accuracy_history=history)


def test_cut_by_cap_counts_strings_stopped_by_the_steps_within_their_patience():
    h = [[0, 0.1], [40, 0.5], [50, 1.0]]         # crammed at 50; a 40-step stall first
    crammed = _row(4, True, 50, h)
    failed = _row(4, False, 100, [[0, 0.1], [20, 0.3], [60, 0.4]])   # rises at 20 and 60, then nothing
    unknown = _row(4, False, 100, None)
    kept = dict(n=4, step=45, accuracy_history=[[0, 0.1], [40, 0.5]])
    strings = dict(rows=[crammed], kept=[])
    assert bundling.cut_by_cap(strings, 30, 20, 100) == (0, 0, 0)    # patience 20 ends it at 20: not the cap
    assert bundling.cut_by_cap(strings, 30, 50, 100) == (1, 0, 0)    # at 30 still within 50 of a rise: cut
    assert bundling.cut_by_cap(strings, 60, 50, 100) == (0, 0, 0)    # crammed within 60
    one = dict(rows=[failed], kept=[])
    assert bundling.cut_by_cap(one, 80, 30, 100) == (0, 0, 0)        # the 40-step stall ends it at 20 + 30 = 50
    assert bundling.cut_by_cap(one, 80, 50, 100) == (1, 0, 0)        # 60 + 50 = 110 > 80: the cap ended it
    assert bundling.cut_by_cap(one, 120, 50, 100) == (0, 0, 0)       # ...and not a cap of 120
    assert bundling.cut_by_cap(dict(rows=[unknown], kept=[]), 80, 50, 100) == (0, 0, 1)   # no history
    k = dict(rows=[], kept=[kept])
    assert bundling.cut_by_cap(k, 30, 50, 100) == (1, 0, 0)          # past 30 at step 45, last rise 40: cut
    assert bundling.cut_by_cap(k, 60, 50, 100) == (0, 1, 0)          # not there yet: cannot be told
    assert bundling.cut_by_cap(k, 60, 3, 100) == (0, 0, 0)           # patience 3 ended it at step 3
    both = dict(rows=[crammed, failed, unknown], kept=[kept])
    assert bundling.cut_by_cap(both, 30, 50, 100) == (3, 0, 1)


def _cell(successes, n50=None, se=None, open_=None, cut=0, cut_unknown=0, **extra):
    """A map cell; ``extra``: n50_above / n50_below, or ``range`` (strings open)."""
    return dict(successes=successes, open=open_ or [0] * len(successes), n50=n50, stderr=se, cut=cut,
                cut_unknown=cut_unknown, **extra)


def _map(cells, steps=(100, 300, 900), pats=(50, 150)):
    mp = dict(model="m", m=1, source="tokens", protocol_hash="p", run=(steps[-1], pats[-1]), steps=list(steps),
              patiences=list(pats), lengths=[4, 8], totals=[3, 3], cells=cells, finished=6, kept=0)
    mp["settled"] = [bundling._settled(list(steps), [row[j] for row in cells]) for j in range(len(pats))]
    return mp


def test_a_column_settles_where_its_counts_stop_changing_and_the_words_say_so():
    a, b = _cell([2, 0], 6.0, 0.5), _cell([3, 1], 7.0, 0.6, cut=1)
    op = _cell([3, 1], open_=[0, 1], range=dict(low=7.0, high=8.5, above=0, below=0), cut_unknown=1)
    mp = _map([[a, a], [b, b], [b, op]])
    assert mp["settled"] == [300, None]
    lines = bundles.budget_map_lines(mp, (300, 150))
    assert lines[0] == "patience 50: settled from 300 steps: n50 7.0 up to 900"
    assert lines[1] == "patience 150: not decided at 900 steps (n50 ≥ 7.0, strings still being crammed)"
    assert lines[2] == "at 900 steps, n50 by patience: 7.0 (50), ≥ 7.0 (150)"
    assert lines[3] == ("[A]'s 300 / 150: its 300-step cap stopped 1 of the 6 strings while still gaining accuracy "
                        "(within their patience of 150); it is still being crammed short of 900 steps")
    assert lines[4] == ("the run's 900 / 150: whether its 900-step cap stops strings still gaining accuracy cannot "
                        "be told yet (of the 6 strings, 1 still being crammed short of it)")
    still = _map([[a, a], [a, b]], steps=(100, 900))
    assert bundles.budget_map_lines(still)[1] == "patience 150: still moving at 900 steps (6.0 at 100, 7.0 at 900)"
    # a cut string in a column that settled: it did not cram with more steps
    settled = _map([[a, a], [b, _cell([3, 1], 7.0, 0.6, cut=2)], [b, b]])
    assert bundles.cap_text(settled, 300, 150, "x").endswith(
        "stopped 2 of the 6 strings while still gaining accuracy (within their patience of 150); none of them "
        "crammed with more steps (n50 the same up to 900)")
    assert bundles.cap_text(settled, 301, 150, "x") == ""
    # a cut string in a column that moves later: more steps did cram
    later = _map([[a, _cell([2, 0], 6.0, 0.5, cut=3)], [b, b], [b, b]])
    assert bundles.cap_text(later, 100, 150, "x").endswith(
        "stopped 3 of the 6 strings while still gaining accuracy (within their patience of 150); with more steps "
        "2 of them crammed by 300 steps: n50 6.0 → 7.0 (+1.3 combined standard errors), the same from there up to 900")
    bare = _map([[a, _cell([2, 0], 6.0, None, cut=1)], [b, b], [b, b]])
    assert bundles.cap_text(bare, 100, 150, "x").endswith(
        "; with more steps it crammed by 300 steps, and n50 is the same from there up to 900")
    # cut strings while the largest budget still crams some: how many crammed so far, how many are open
    c3 = _cell([2, 0], 6.0, 0.5, cut=3)
    going = _map([[a, c3], [a, c3], [b, _cell([3, 0], open_=[0, 1], range=dict(low=7.0, high=8.5), cut_unknown=1)]])
    assert going["settled"][1] is None
    assert bundles.cap_text(going, 300, 150, "x").endswith(
        "stopped 3 of the 6 strings while still gaining accuracy (within their patience of 150); with more steps "
        "(up to 900) 1 of them crammed so far, 1 still being crammed")
    none_yet = _map([[a, c3], [a, c3], [b, _cell([2, 0], open_=[0, 2], range=dict(low=6.0, high=8.5), cut_unknown=2)]])
    assert bundles.cap_text(none_yet, 300, 150, "x").endswith("(up to 900) none of them crammed so far, "
                                                              "2 still being crammed")
    # the map cannot read the largest budget at that patience: no claim about later steps
    blind = _map([[a, c3], [a, c3], [b, dict(_cell([2, 0]), unreadable=2)]])
    assert bundles.cap_text(blind, 300, 150, "x").endswith(", so more steps could still cram them")
    missing = _map([[a, None], [b, None], [b, None]])
    assert bundles.budget_map_lines(missing)[1] == "patience 150: cannot be read from this run"


@pytest.mark.parametrize("cell, text", [
    (None, "-"),
    (_cell([3, 1], 7.04, 0.61), "7.0"),
    (_cell([3, 3], n50_above=8), "> 8"),
    (_cell([0, 0], n50_below=4), "< 4"),
    (_cell([3, 1], open_=[0, 2], range=dict(low=None, high=None, above=3, below=0)), "> 8"),
    (_cell([3, 1], open_=[0, 2], range=dict(low=6.5, high=None, above=1, below=0)), "≥ 6.5"),
    (_cell([3, 1], open_=[0, 2], range=None), "open"),
    (_cell([1, 0]), "not located"),
])
def test_a_cell_in_a_few_characters(cell, text):
    assert bundles.map_cell_text(cell, [4, 8]) == text


def test_bad_grids_are_refused_in_words(runs):
    with pytest.raises(ValueError, match=r"needs step budgets and patiences, whole numbers >= 1; got steps none"):
        bundling.budget_map(runs / "smol-tokens-9k.sqlite", [], [500])
    with pytest.raises(ValueError, match=r"got steps \[0, 10\] and patiences \[5\]"):
        bundling.budget_map(runs / "smol-tokens-9k.sqlite", [10, 0], [5])


def test_store_map_prints_the_grid_the_words_and_draws_it(runs, tmp_path, capsys):
    assert main(["store", "map", "--store", str(runs / "smol-tokens-9k.sqlite"), "--steps", "2000", "3000",
                 "--patience", "500", "--m", "1", "--plot", str(tmp_path / "map.png")]) == 0
    out = capsys.readouterr().out
    head = ("smollm2-135m, m = 1, tokens, protocol 497a821daa41a07e (9,000 steps, patience 1,500): 42 strings "
            "finished; n50 by step budget (rows) and patience (columns)")
    assert head in out
    lines = out.split("\n")
    assert lines[lines.index(head) + 1].split() == ["steps", "\\", "patience", "500", "1,500"]
    assert "  patience 500: settled from 2,000 steps (the least read): n50 12.8 up to 9,000" in out
    assert "[A]'s 3,000 / 500: its 3,000-step cap stopped none of the 42 strings" in out
    assert (tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["store", "map", "--store", str(runs / "smol-tokens-9k.sqlite"), "--steps", "3000",
                 "--patience", "500"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m, tokens, protocol 497a821daa41a07e:\n  slope a over m = 1, 2, 3 at 3,000 steps, by patience: " \
           "11.4 +- 1.4 (500), " in out
    assert "  slope a over m = 1, 2, 3 at 9,000 steps, by patience: " in out
    for argv, msg in ((["--steps", "0", "--patience", "500"], "--steps must be whole numbers >= 1; got 0"),
                      (["--steps", "3000", "--patience", "500", "--plot", str(tmp_path / "x.txt")],
                       "--plot must be a file ending in .png, .svg or .pdf"),
                      (["--steps", "3000", "--patience", "500", "--mark", "3000"], "--mark must be STEPS/PATIENCE")):
        assert main(["store", "map", "--store", str(runs / "smol-tokens-9k.sqlite"), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("accesslib store map: error: ") and msg in err and len(err.splitlines()) == 1


def test_make_bundles_keeps_the_maps_and_replaces_them_when_read_again(runs, tmp_path):
    shutil.copyfile(ROOT / "accesslib" / "data" / "bundles" / "cram-smollm2-135m.json", tmp_path / "cram-smollm2-135m.json")
    before = json.loads((tmp_path / "cram-smollm2-135m.json").read_text())
    argv = [sys.executable, SCRIPT, "--add-budget-map", "smollm2-135m", "--store", str(runs / "smol-tokens-9k.sqlite"),
            "--source", "tokens", "--read-from", "9000/1500", "--map-steps", "2000", "3000", "--map-patience", "500",
            "--out", str(tmp_path)]
    for _ in range(2):   # read again: the same curves replaced, not added
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    after = json.loads((tmp_path / "cram-smollm2-135m.json").read_text())
    assert {k: v for k, v in after.items() if k != "budget_maps"} == {k: v for k, v in before.items()
                                                                     if k != "budget_maps"}
    tokens = [mp for mp in after["budget_maps"] if mp["source"] == "tokens"]
    assert [mp["m"] for mp in tokens] == sorted({mp["m"] for mp in tokens})   # one map per m
    assert tokens[0]["steps"] == [2000, 3000, 9000] and tokens[0]["patiences"] == [500, 1500]
    assert "smollm2-135m, m = 1, tokens (9,000 / 1,500, 42 finished, 0 open): " in proc.stdout
    assert tokens[0]["command"].startswith("python ") and tokens[0]["created"]
    bad = subprocess.run([sys.executable, SCRIPT, "--add-budget-map", "smollm2-135m", "--store",
                          str(runs / "smol-tokens-9k.sqlite"), "--out", str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "--add-budget-map needs --map-steps and --map-patience" in bad.stderr
    with pytest.raises(ValueError, match="the budget map is of model 'x', the bundle of 'smollm2-135m'"):
        bundles.add_budget_map(after, dict(tokens[0], model="x"))


def test_the_shipped_maps_agree_with_the_shipped_readings_of_the_same_runs():
    """SmolLM2-135M's shipped maps and its shipped 3000 / 500 readings come from the same strings:
    wherever the map's 3000 / 500 cell is decided it has the reading's n50; every map is of [A]'s
    optimiser and of a 9000 / 1500 run."""
    b = bundles.load("cram", "smollm2-135m")
    maps = b["budget_maps"]
    assert {mp["source"] for mp in maps} == {"glove100k", "tokens"} and {mp["m"] for mp in maps} == {1, 2, 3}
    read = {r["source"]: r for r in b["remeasured"] if (r.get("read_from") or {}).get("max_steps") == 9000
            and r["settings"]["max_steps"] == 3000}
    assert set(read) == {"glove100k", "tokens"}
    compared = 0
    for mp in maps:
        assert tuple(mp["run"]) == (9000, 1500) and mp["settings"]["lr"] == 0.01 and mp["settings"]["schedule"] is None
        cell = mp["cells"][mp["steps"].index(3000)][mp["patiences"].index(500)]
        curve = next(c for c in read[mp["source"]]["curves"] if c["m"] == mp["m"])
        if cell["n50"] is not None:
            assert cell["n50"] == pytest.approx(curve["n50"], abs=1e-9)
            compared += 1
    assert compared == 6


def test_the_docs_table_is_the_shipped_maps():
    """docs/real-models.md's "Which knob binds" table, row by row, from the shipped maps: a map read
    again as the runs go on cannot leave the table with older numbers."""
    docs = re.sub(r"[ \t]+", " ", (ROOT / "docs" / "real-models.md").read_text(encoding="utf-8"))
    names = {"glove100k": "[A]'s words", "tokens": "random tokens"}
    cut = {}
    for mp in bundles.load("cram", "smollm2-135m")["budget_maps"]:
        texts = {(s, p): t for s, row in zip(mp["steps"], bundles.map_texts(mp)) for p, t in zip(mp["patiences"], row)}

        settled = mp["settled"][mp["patiences"].index(500)]
        ours = mp["cells"][mp["steps"].index(3000)][mp["patiences"].index(500)]
        assert ours["cut_unknown"] == 0
        row = (f"| {names[mp['source']]}, {mp['m']} | {' / '.join(texts[s, 500] for s in (2000, 3000, 9000))} | "
               f"{'open' if settled is None else f'{settled:,} steps'} | "
               f"{' / '.join(texts[9000, p] for p in (100, 250, 500, 1000, 1500))} | {ours['cut']} of {sum(mp['totals'])}")
        assert row in docs, f"docs/real-models.md no longer has the row {row!r}"
        # "(none crammed later)" where n50 at patience 500 settled by [A]'s 3,000 steps after its cap cut strings
        # and "(k crammed later)" where it settled only after them
        later = {0: "", 1: " (it did not cram later) |"}.get(ours["cut"], " (none crammed later) |")
        gained = sum(mp["cells"][-1][mp["patiences"].index(500)]["successes"]) - sum(ours["successes"])
        if settled is not None and settled <= 3000 and ours["cut"]:
            assert row + later in docs, row
        elif settled is not None and ours["cut"]:
            assert gained > 0 and row + f" ({gained} crammed later) |" in docs, row
        else:
            assert row + " |" in docs, row
        if mp["m"] == 1:
            cut[mp["source"]] = [mp["cells"][mp["steps"].index(s)][mp["patiences"].index(500)]["cut"] for s in (2000, 3000)]
    assert cut == {"glove100k": [11, 1], "tokens": [7, 0]}   # "all but one had run out of patience" by 3000
    assert ("crams after 2,000 steps. 11 word strings (7 token strings) were still gaining accuracy at 2,000 steps, "
            "but by 3,000 all but one had run out of patience, and none of them crammed") in " ".join(docs.split())


def test_a_run_without_accuracy_histories_reads_only_its_own_patience(tmp_path):
    """Gemma-3-270M's 3000 / 500 run (committed snapshot, kept before strings kept their accuracy
    history): a smaller patience cannot be read ("?", said in words, never taken for open strings);
    its own patience can, and settles at 2000 steps; whether its cap cut strings cannot be told."""
    shutil.copyfile(STORES / "gemma-n50.sqlite", tmp_path / "g.sqlite")
    (mp,) = bundling.budget_map(tmp_path / "g.sqlite", [1000, 2000], [250])["maps"]
    assert (mp["model"], tuple(mp["run"]), mp["patiences"], mp["kept"]) == ("gemma-3-270m", (3000, 500), [250, 500], 0)
    small = [row[0] for row in mp["cells"]]
    assert all(c["unreadable"] > 0 and c["n50"] is None and "range" not in c for c in small)
    assert {t[0] for t in bundles.map_texts(mp)} == {"?"}
    crammed = sum(mp["cells"][-1][1]["successes"])
    lines = bundles.budget_map_lines(mp)
    assert lines[0] == (f"patience 250: cannot be read: {small[-1]['unreadable']} crammed strings kept no accuracy "
                        "history to read a smaller patience from") and small[-1]["unreadable"] == crammed
    assert lines[1] == "patience 500: settled from 2,000 steps: n50 9.5 up to 3,000"
    own = mp["cells"][-1][1]
    assert (own["cut"], own["cut_unknown"], own["cut_no_history"]) == (0, 36 - crammed, 36 - crammed)
    assert lines[-1] == ("the run's 3,000 / 500: whether its 3,000-step cap stops strings still gaining accuracy "
                         f"cannot be told (of the 36 strings, {36 - crammed} kept no accuracy history)")


def test_the_slope_at_every_cell_meets_the_shipped_slopes():
    """map_slopes fits n50 = a*m + b at every cell shared by a run's maps: at [A]'s 3000 / 500 it is
    the shipped 3000 / 500 reading's slope, on both sources; open cells give where it can end."""
    from accesslib.experiments.bundling import map_slopes

    b = bundles.load("cram", "smollm2-135m")
    runs = {r["source"]: r for r in map_slopes(b["budget_maps"])}
    assert set(runs) == {"glove100k", "tokens"} and runs["tokens"]["ms"] == [1, 2, 3]
    for source, run in runs.items():
        read = next(r for r in b["remeasured"] if r["source"] == source and r.get("read_from"))
        e = next(e for e in run["budgets"] if (e["max_steps"], e["patience"]) == (3000, 500))
        assert e["slope"] == pytest.approx(read["slope"]["slope"]) and e["slope_stderr"] == pytest.approx(
            read["slope"]["slope_stderr"])
        assert bundles.slope_entry_text(e) == f"{read['slope']['slope']:.1f} ± {read['slope']['slope_stderr']:.1f}"
    def at(source, steps, patience):
        return bundles.slope_entry_text(next(e for e in runs[source]["budgets"]
                                             if (e["max_steps"], e["patience"]) == (steps, patience)))

    docs = " ".join((ROOT / "docs" / "real-models.md").read_text(encoding="utf-8").split())
    assert (f"at 3,000 steps it is {at('glove100k', 3000, 100)}, {at('glove100k', 3000, 250)} and "
            f"{at('glove100k', 3000, 500)} on words with patience 100, 250 and 500, and {at('tokens', 3000, 250)} and "
            f"{at('tokens', 3000, 500)} on tokens with 250 and 500") in docs
    nine = at("glove100k", 9000, 500)
    assert at("tokens", 9000, 500) == at("tokens", 3000, 500)
    assert (f"At 9,000 steps and patience 500 the tokens slope is the same {at('tokens', 9000, 500)}, and the words "
            f"slope is {nine}, within its error of the {at('glove100k', 3000, 500)} at 3,000 steps") in docs
    tok100 = next(e for e in runs["tokens"]["budgets"] if (e["max_steps"], e["patience"]) == (3000, 100))
    assert tok100["slope"] is None and "no n50 located" in tok100["why"] and bundles.slope_entry_text(tok100) == "-"


@pytest.mark.parametrize("entry, text", [
    (dict(slope=21.21, slope_stderr=2.29), "21.2 ± 2.3"),
    (dict(slope=21.21, slope_stderr=None), "21.2"),
    (dict(slope=None, slope_range=dict(low=19.77, high=21.98), why="strings still open at m = 3"), "19.8 to 22.0"),
    (dict(slope=None, slope_range=dict(low=17.66, high=None), why="strings still open at m = 2, 3"), "≥ 17.7"),
    (dict(slope=None, slope_range=dict(low=None, high=30.0), why="strings still open at m = 1"), "≤ 30.0"),
    (dict(slope=None, slope_range=None, why="strings still open at m = 3"), "open"),
    (dict(slope=None, why="no n50 located at m = 1"), "-"),
])
def test_a_slope_in_a_few_characters(entry, text):
    assert bundles.slope_entry_text(entry) == text


def test_a_patience_the_run_cannot_give_is_said_with_the_reason(runs, tmp_path):
    """A run whose patience watched the loss cannot give a smaller patience: those cells are
    absent and the words give live_ladder's reason; its own patience still reads."""
    import sqlite3

    shutil.copyfile(runs / "smol-tokens-9k.sqlite", tmp_path / "loss.sqlite")
    with sqlite3.connect(tmp_path / "loss.sqlite") as conn:
        (raw,) = conn.execute("SELECT settings FROM protocols WHERE protocol_hash = '497a821daa41a07e'").fetchone()
        conn.execute("UPDATE protocols SET settings = ? WHERE protocol_hash = '497a821daa41a07e'",
                     (json.dumps(dict(json.loads(raw), patience_on="loss")),))
    mp = _nine(bundling.budget_map(tmp_path / "loss.sqlite", [3000], [500], m=1)["maps"])
    assert mp["patiences"] == [500, 1500] and [row[0] for row in mp["cells"]] == [None, None]
    assert round(mp["cells"][-1][1]["n50"], 1) == 15.6
    line = bundles.budget_map_lines(mp)[0]
    assert line.startswith("patience 500: cannot be read from this run (patience 500 is read from accuracy "
                           "histories, which needs patience on teacher-forced accuracy; ") and "watched 'loss'" in line


def test_a_run_with_a_schedule_gives_no_map_and_says_why(tmp_path):
    """The fast protocol's schedule stretches with the step budget: no smaller budget is a prefix of
    the run, so there is no map to draw, and the error says why."""
    shutil.copyfile(STORES / "smol-tokens.sqlite", tmp_path / "fast.sqlite")
    with pytest.raises(ValueError, match=r"1000 steps cannot be read from smollm2-135m's curve at m = 1 .*its "
                                         r"learning-rate schedule \('warmup_cosine'\) stretches with max_steps"):
        bundling.budget_map(tmp_path / "fast.sqlite", [1000, 3000], [300])


def test_the_docs_in_short_rows_at_9000_1500_are_the_shipped_readings():
    """docs/real-models.md's "In short" rows for 9000 / 1500: n50 at each m (a lower bound where
    strings are still open) from the shipped 3000 / 500 readings' checks, the slope (or its lower
    bound) from the shipped maps (map_slopes), and, once every m is decided, "(running)" gone and
    C_ball / a there, so a re-read cannot leave them older."""
    from accesslib.experiments.bundling import map_slopes

    b = bundles.load("cram", "smollm2-135m")
    ball = slope(b["facts"]["d"], b["facts"]["vocab_size"], 2.0 ** -11, 1.0)
    docs = re.sub(r"[ \t]+", " ", (ROOT / "docs" / "real-models.md").read_text(encoding="utf-8"))
    slopes = {r["source"]: r for r in map_slopes(b["budget_maps"])}
    names = {"glove100k": "[A]'s words", "tokens": "random tokens"}
    for source, name in names.items():
        read = next(r for r in b["remeasured"] if r["source"] == source and r.get("read_from"))
        ms = read["budget_check"]["ms"]

        def at(m, ms=ms):
            c = ms[str(m)]
            return f"{c['n50_3x']:.1f} ± {c['stderr_3x']:.1f}" if c["n50_3x"] is not None else f"≥ {c['n50_3x_low']:.1f}"

        e = next(e for e in slopes[source]["budgets"] if (e["max_steps"], e["patience"]) == (9000, 1500))
        done = all(ms[str(m)]["n50_3x"] is not None for m in (1, 2, 3))
        assert done == (e.get("slope") is not None)
        ratio = f"{ball / e['slope']:.0f} " if done else ""
        row = (f"| {name}, [A]'s protocol | 9000 / 1500{'' if done else ' (running)'} | {at(1)} | {at(2)} | "
               f"{at(3)} | {bundles.slope_entry_text(e)} | {ratio}|")
        assert row in docs, f"docs/real-models.md no longer has the row {row!r}"


def test_make_bundles_maps_only_the_run_named_where_a_larger_one_extends_it(tmp_path):
    """The words store holds the finished 9000 / 1500 run and the 27000 / 4500 run going on from
    its strings: --add-budget-map refuses to guess between them, and --read-from keeps only the
    named run's maps (a run just started holds a few strings and must not pass for it)."""
    shutil.copyfile(STORES / "smol-glove-9k.sqlite", tmp_path / "glove.sqlite")
    shipped = json.loads((ROOT / "accesslib" / "data" / "bundles" / "cram-smollm2-135m.json").read_text())
    shipped.pop("budget_maps", None)   # only what this call writes
    (tmp_path / "cram-smollm2-135m.json").write_text(json.dumps(shipped))
    base = [sys.executable, SCRIPT, "--add-budget-map", "smollm2-135m", "--store", str(tmp_path / "glove.sqlite"),
            "--source", "glove100k", "--map-steps", "3000", "--map-patience", "500", "--out", str(tmp_path)]
    before = (tmp_path / "cram-smollm2-135m.json").read_text()
    guess = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert guess.returncode == 1 and "holds several runs of smollm2-135m on glove100k (9,000 / 1,500, 27,000 / " \
        "4,500); name one by its own budget: --read-from STEPS/PATIENCE" in guess.stderr, guess.stderr[-2000:]
    absent = subprocess.run(base + ["--read-from", "9000/500"], capture_output=True, text=True, timeout=300)
    assert absent.returncode == 1 and "holds no run of smollm2-135m at 9,000 / 500 (--read-from); it holds " \
        "glove100k, 9,000 / 1,500, glove100k, 27,000 / 4,500" in absent.stderr, absent.stderr[-2000:]
    assert (tmp_path / "cram-smollm2-135m.json").read_text() == before       # nothing written
    ok = subprocess.run(base + ["--read-from", "9000/1500"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    words = [mp for mp in json.loads((tmp_path / "cram-smollm2-135m.json").read_text())["budget_maps"]
             if mp["source"] == "glove100k"]
    assert [(mp["m"], tuple(mp["run"]), mp["finished"]) for mp in words] == [(m, (9000, 1500), 30) for m in (1, 2, 3)]


def test_ladder_names_the_run_in_its_bundle_command_where_the_store_holds_two(tmp_path, capsys):
    """`store ladder` on the words store (the 9000 / 1500 run and the 27000 / 4500 run extending
    it): the command it prints for a bundle names the run, or make_bundles.py would refuse it."""
    shutil.copyfile(STORES / "smol-glove-9k.sqlite", tmp_path / "glove.sqlite")
    assert main(["store", "ladder", "--budget", "3000/500", "--store", str(tmp_path / "glove.sqlite")]) == 0
    out = capsys.readouterr().out.splitlines()
    hints = [line for line in out if "--read-budget 3000/500" in line]
    assert any("--source glove100k --read-from 9000/1500 --store " in h for h in hints), hints
    # the m = 1 strings the 27000 / 4500 run crams again, and how many already parted from their first run
    assert ("  11 strings crammed again from the start (the 9,000 / 1,500 run kept no final state for them): read at "
            "every budget from this run's own steps; 11 of them took other steps than the 9,000 / 1,500 run so "
            "far") in out


def test_a_run_extending_another_reads_each_string_from_one_trajectory(tmp_path):
    """The words store: the 27000 / 4500 run goes on from the 9000 / 1500 run's strings and holds
    only those it has reached. Within 9000 / 1500, a string it went on from (or took as it was)
    reads that run's steps, the same outcome string by string; a string it crams again from the
    start reads its own. The 11 m = 1 strings crammed again parted from their first run within a
    few hundred steps (that run finished before final states were kept, and recorded nothing of what
    it ran on), so their smaller budgets are open here, not the first run's failures: a budget check compares
    budgets on one trajectory. Its own budget has every string not reached yet open."""
    shutil.copyfile(STORES / "smol-glove-9k.sqlite", tmp_path / "glove.sqlite")
    got = bundling.live_ladder(tmp_path / "glove.sqlite", [(3000, 500), (9000, 1500)],
                               keep_strings=True)["curves"]
    by = {(c["m"], c["max_steps"]): c for c in got}
    big = {c["m"]: c for c in got if c["max_steps"] == 27000}
    assert set(big) == {1, 2}, "the store holds the 27000 / 4500 run at m = 1 and 2"
    for m, c in big.items():
        small = by[(m, 9000)]
        assert c["extends"] == (9000, 1500) and small["extends"] is None and small["waiting"] == 0
        assert c["finished"] + c["kept"] + c["waiting"] == small["finished"] == 30
        restarts = c["strings"]["restarts"]
        for budget in ((3000, 500), (9000, 1500)):
            mine = {o["key"]: o["crammed"] for o in bundling.string_outcomes(c["strings"], c["extends"],
                                                                            c["patience"], *budget)}
            theirs = {o["key"]: o["crammed"] for o in bundling.string_outcomes(small["strings"], None,
                                                                              small["patience"], *budget)}
            assert set(mine) == set(theirs) and len(mine) == 30
            assert all(mine[k] == theirs[k] for k in mine if k not in restarts)
        own = next(r for r in c["rungs"] if r["own"])
        assert sum(own["totals"]) == 30 and sum(own["open"]) >= c["waiting"]
        if c["waiting"]:
            assert own["n50"] is None
    # m = 2: every string went on from its final state or was taken as it was: the readings are that run's
    assert not big[2]["strings"]["restarts"]
    for budget in ((3000, 500), (9000, 1500)):
        mine = next(r for r in big[2]["rungs"] if (r["max_steps"], r["patience"]) == budget)
        theirs = next(r for r in by[(2, 9000)]["rungs"] if (r["max_steps"], r["patience"]) == budget)
        keys = ("lengths", "successes", "totals", "n50", "stderr")
        assert {k: mine[k] for k in keys} == {k: theirs[k] for k in keys}
    # m = 1: the 11 strings the first run failed at n = 34 and 46 are crammed again, and parted from it
    c1 = big[1]
    first = {bundling._row_key(r): r for r in by[(1, 9000)]["strings"]["rows"]}
    own = {bundling._row_key(r): r for r in c1["strings"]["rows"]}
    own.update({bundling._kept_key(k): k for k in c1["strings"]["kept"]})
    assert len(c1["strings"]["restarts"]) == 11
    for key in c1["strings"]["restarts"]:
        old, new = first[key], own[key]
        assert not old["success"] and key[0] in (34, 46)
        upto = min(int(old["steps"]), int(new.get("step") or new.get("steps")))
        assert [h for h in old["accuracy_history"] if h[0] < upto] != [h for h in new["accuracy_history"]
                                                                      if h[0] < upto]
    mine = {o["key"]: o["crammed"]
            for o in bundling.string_outcomes(c1["strings"], c1["extends"], c1["patience"], 9000, 1500)}
    still = [k for k in c1["strings"]["restarts"] if "step" in own[k]]      # kept: not finished yet
    assert all(mine[k] == bundling.kept_under(own[k], 9000, 1500) for k in still)
    # where its own steps cannot tell 9000 / 1500 yet, it is open, though the first run failed it there
    nine = next(r for r in c1["rungs"] if (r["max_steps"], r["patience"]) == (9000, 1500))
    assert sum(nine["open"]) == sum(mine[k] is None for k in c1["strings"]["restarts"])
    if sum(nine["open"]):
        assert nine["n50"] is None and by[(1, 9000)]["rungs"][-1]["n50"] is not None
    maps = bundling.budget_map(tmp_path / "glove.sqlite", [3000], [500])["maps"]
    for mp in (mp for mp in maps if mp["run"] == (27000, 4500)):
        small = next(x for x in maps if x["run"] == (9000, 1500) and x["m"] == mp["m"])
        assert mp["extends"] == (9000, 1500) and mp["finished"] + mp["kept"] + mp["waiting"] == 30
        cell = mp["cells"][mp["steps"].index(3000)][mp["patiences"].index(500)]
        theirs = small["cells"][small["steps"].index(3000)][small["patiences"].index(500)]
        if mp["m"] == 2:   # [A]'s 3000 / 500 cell: the same n50 and strings cut by the cap
            assert (cell["n50"], cell["cut"]) == (theirs["n50"], theirs["cut"])
        else:              # the strings crammed again are open there until their own steps pass it
            assert sum(cell["open"]) == sum(bundling.kept_under(own[k], 3000, 500) is None for k in still)
