"""benchmarks/runs/runs.sh, the long real-model runs: every run's arguments are a
valid make_bundles.py command line (a typo would only show hours into a session otherwise), and
bad input is refused with a message naming it."""
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "runs" / "runs.sh"


def _runs(*argv):
    env = dict(os.environ, PY="/nonexistent/python")   # nothing here may start a run
    return subprocess.run(["bash", str(RUNS), *argv], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(scope="module")
def make_bundles(load_script):
    return load_script("scripts/make_bundles.py")


def test_every_run_is_a_valid_make_bundles_command(make_bundles):
    names = _runs("names").stdout.split()
    assert names == ["gemma-n50", "smol-tokens", "smol-paper-tokens", "smol-glove-9k", "smol-tokens-9k",
                     "smol-glove-9k-m2", "smol-tokens-9k-m2", "gemma-9k", "smol-glove-27k", "smol-tokens-27k",
                     "smol-glove-9k-m3", "smol-tokens-9k-m3", "gemma-27k"]
    for name in names:
        r = _runs("args", name)
        assert r.returncode == 0, r.stderr
        argv = r.stdout.split()
        a = make_bundles.build_parser().parse_args(argv)          # SystemExit on any bad option
        two = name.endswith(("-m2", "-27k")) and not name.startswith("gemma")
        assert a.m == ([1, 2] if two else [1, 2, 3] if name.endswith("-m3") else [1]), name
        assert a.samples == 6 and a.search == "grid" and a.no_geometry, name
        for lengths in make_bundles.parse_lengths(a.lengths, a.m, pytest.fail).values():
            assert len(lengths) >= 4 and lengths == sorted(lengths), name
    # an m = 2 run is its m = 1 run with m = 2 added: the same settings and m = 1 lengths, so
    # that the m = 1 strings are read back from the store they share
    for name in ("smol-glove-9k", "smol-tokens-9k"):
        one = make_bundles.build_parser().parse_args(_runs("args", name).stdout.split())
        two = make_bundles.build_parser().parse_args(_runs("args", f"{name}-m2").stdout.split())
        assert {k: v for k, v in vars(two).items() if k not in ("m", "lengths")} == \
            {k: v for k, v in vars(one).items() if k not in ("m", "lengths")}
        got = make_bundles.parse_lengths(two.lengths, two.m, pytest.fail)
        assert got[1] == make_bundles.parse_lengths(one.lengths, one.m, pytest.fail)[1]
        assert min(got[2]) >= 12 and max(got[2]) > max(got[1])
    # an m = 3 run is its m = 2 run with m = 3 added: the m = 1 and 2 strings are read back or go on,
    # and the m = 3 grid lies above the m = 2 one
    for name in ("smol-glove-9k", "smol-tokens-9k"):
        two = make_bundles.build_parser().parse_args(_runs("args", f"{name}-m2").stdout.split())
        three = make_bundles.build_parser().parse_args(_runs("args", f"{name}-m3").stdout.split())
        assert {k: v for k, v in vars(three).items() if k not in ("m", "lengths")} == \
            {k: v for k, v in vars(two).items() if k not in ("m", "lengths")}
        got, had = (make_bundles.parse_lengths(x.lengths, x.m, pytest.fail) for x in (three, two))
        assert {m: got[m] for m in (1, 2)} == had and len(got[3]) == len(had[2]) and got[3][1:] == had[2][2:] + [
            got[3][-1]] and got[3][-1] > had[2][-1]
    # a 27k run is its 9000 / 1500 run (SmolLM2's at m = 1 and 2) with 3x the steps and patience, gone on
    # from where that run left each string
    for name, m2 in (("smol-glove", "-m2"), ("smol-tokens", "-m2"), ("gemma", "")):
        nine = make_bundles.build_parser().parse_args(_runs("args", f"{name}-9k{m2}").stdout.split())
        more = make_bundles.build_parser().parse_args(_runs("args", f"{name}-27k").stdout.split())
        assert {k: v for k, v in vars(more).items() if k not in ("max_steps", "patience", "extend_from")} == \
            {k: v for k, v in vars(nine).items() if k not in ("max_steps", "patience", "extend_from")}
        assert (more.max_steps, more.patience, more.extend_from, nine.extend_from) == (27000, 4500, "9000/1500", None)
        assert f"{nine.max_steps}/{nine.patience}" == more.extend_from
    gemma = make_bundles.build_parser().parse_args(_runs("args", "gemma-n50").stdout.split())
    # [A]'s protocol and layout, their own word list (docs/gemma.md, section 5)
    assert (gemma.models, gemma.protocol, gemma.source, gemma.add_special_tokens) == (
        ["gemma-3-270m"], "paper", "glove100k", True)
    # gemma-9k is gemma-n50 with 3x the steps and the patience: the same strings, one more rung
    g9 = make_bundles.build_parser().parse_args(_runs("args", "gemma-9k").stdout.split())
    assert {k: v for k, v in vars(g9).items() if k not in ("max_steps", "patience")} == \
        {k: v for k, v in vars(gemma).items() if k not in ("max_steps", "patience")}
    assert (g9.max_steps, g9.patience) == (9000, 1500) and (gemma.max_steps, gemma.patience) == (None, None)
    smol = make_bundles.build_parser().parse_args(_runs("args", "smol-tokens").stdout.split())
    assert (smol.max_steps, smol.patience, smol.bos, smol.source) == (4500, 900, True, "tokens")
    # [A]'s protocol (no schedule) with 3x its steps (and patience): the 1000- and 3000-step rungs
    # are read from the same strings (bundling.derived_rung)
    for name, source, patience in (("smol-paper-tokens", "tokens", 500), ("smol-glove-9k", "glove100k", 1500),
                                   ("smol-tokens-9k", "tokens", 1500)):
        p = make_bundles.build_parser().parse_args(_runs("args", name).stdout.split())
        assert (p.protocol, p.max_steps, p.patience, p.bos, p.source) == ("paper", 9000, patience, True, source)


@pytest.mark.parametrize("argv, msg", [
    (["start", "gemma-n50,nope"], "unknown run 'nope' (one of: gemma-n50 smol-tokens smol-paper-tokens smol-glove-9k smol-tokens-9k "
                                "smol-glove-9k-m2 smol-tokens-9k-m2 gemma-9k smol-glove-27k smol-tokens-27k smol-glove-9k-m3 "
                                "smol-tokens-9k-m3 gemma-27k)"),
    (["args", "nope"], "unknown run 'nope'"),
])
def test_unknown_runs_are_named_and_nothing_starts(argv, msg, tmp_path):
    r = _runs(*argv)
    assert r.returncode == 2 and msg in r.stderr and "started" not in r.stdout


def test_no_action_prints_the_usage():
    r = _runs()
    assert r.returncode == 2 and "runs.sh start NAME" in r.stdout and "smol-glove-9k" in r.stdout


FAKE = """#!/bin/bash
# stands in for python: logs its arguments, then sleeps as long as FAKE_SLEEP says
echo "$$ $*" >> "$FAKE_LOG"
sleep "${FAKE_SLEEP:-0}"
"""


def _fake_env(tmp_path, sleep=0):
    fake = tmp_path / "python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    return dict(os.environ, PY=str(fake), FAKE_LOG=str(tmp_path / "calls.log"), FAKE_SLEEP=str(sleep),
                RUNS_LIVE=str(tmp_path / "live"), RUNS_KEPT=str(tmp_path / "kept"))


def _calls(tmp_path):
    p = tmp_path / "calls.log"
    return [line.split(" ", 1)[1] for line in p.read_text().splitlines()] if p.exists() else []


def _wait(cond, seconds=30):
    import time
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


def test_a_chain_runs_one_after_the_other_and_resumes_from_a_snapshot(tmp_path):
    env = _fake_env(tmp_path)
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "smol-glove-9k.sqlite").write_text("a committed snapshot")
    r = subprocess.run(["bash", str(RUNS), "start", "smol-tokens,smol-glove-9k"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and "started smol-tokens,smol-glove-9k" in r.stdout, r.stderr
    _wait(lambda: len(_calls(tmp_path)) == 3 and not list((tmp_path / "live").glob(".chain-*")))
    calls = _calls(tmp_path)
    live = tmp_path / "live"
    assert calls[0].startswith("scripts/make_bundles.py --models smollm2-135m") and "--source tokens" in calls[0]
    assert calls[0].endswith(f"--threads 1 --keep-final --store {live}/smol-tokens.sqlite --out {live}/smol-tokens-bundle")
    assert "--source glove100k" in calls[1] and f"--store {live}/smol-glove-9k.sqlite" in calls[1]
    # the run without a live store started from its committed snapshot; the other from nothing
    assert (live / "smol-glove-9k.sqlite").read_text() == "a committed snapshot"
    assert "resuming from the committed snapshot" in (live / "smol-glove-9k.log").read_text()
    assert not (live / "smol-tokens.sqlite").exists()


def _on_live_stores(tmp_path, action, names, plan=""):
    """runs.sh ACTION with an empty live store for each of ``names``, python faked and ``plan``."""
    env = _fake_env(tmp_path)
    (tmp_path / "plan").write_text(plan)
    env["RUNS_PLAN"] = str(tmp_path / "plan")
    (tmp_path / "live").mkdir()
    for name in names:
        (tmp_path / "live" / f"{name}.sqlite").write_text("")
    r = subprocess.run(["bash", str(RUNS), action], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r


def test_snapshot_backs_every_live_store_up_into_the_kept_folder(tmp_path):
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "smol-tokens.sqlite").write_text("the snapshot before")
    _on_live_stores(tmp_path, "snapshot", ("gemma-n50", "smol-tokens"))
    kept, live = tmp_path / "kept", tmp_path / "live"
    assert _calls(tmp_path) == [f"-m accesslib store backup {kept}/{n}.sqlite --store {live}/{n}.sqlite"
                                for n in ("gemma-n50", "smol-tokens")]
    # the snapshot it replaces stays in the live folder, for `status` to read the run's pace from
    assert (live / ".before-smol-tokens.sqlite").read_text() == "the snapshot before"
    assert not (live / ".before-gemma-n50.sqlite").exists()


def test_status_reads_the_9k_runs_ladder_and_patience_500(tmp_path):
    r = _on_live_stores(tmp_path, "status", ("gemma-n50", "smol-glove-9k"), plan="focus smol-glove-9k-m3 3 3000/500\n")
    live = tmp_path / "live"
    assert _calls(tmp_path) == [f"-m accesslib store summary --by-length --store {live}/gemma-n50.sqlite",
                                f"-m accesslib store summary --by-length --patience 500 --stalls --store {live}/smol-glove-9k.sqlite",
                                f"-m accesslib store ladder --budget 1000/500 3000/500 9000/1500 --store {live}/smol-glove-9k.sqlite",
                                f"-m accesslib store ladder --budget 3000/500 --m 3 --decided --store {live}/smol-glove-9k.sqlite"]
    assert "== gemma-n50 (stopped)" in r.stdout and "== smol-glove-9k (stopped)" in r.stdout
    assert r.stdout.splitlines()[-1] == "plan: focus smol-glove-9k-m3 3 3000/500: decided"   # (the fake says 0)
    (live / ".focus-ended-smol-glove-9k-m3-3").write_text("")
    env = dict(_fake_env(tmp_path), RUNS_PLAN=str(tmp_path / "plan"))
    (tmp_path / "python").write_text(FAKE + 'case "$*" in *--decided*) exit 3;; esac\n')   # not decided
    again = subprocess.run(["bash", str(RUNS), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert again.stdout.splitlines()[-1] == "plan: focus smol-glove-9k-m3 3 3000/500: ended undecided"


def test_stop_ends_the_running_run_and_the_rest_of_its_chain(tmp_path):
    env = _fake_env(tmp_path, sleep=60)
    subprocess.run(["bash", str(RUNS), "start", "gemma-n50,smol-glove-9k"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    pid = int((tmp_path / "calls.log").read_text().split()[0])
    r = subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    def gone():
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
    _wait(gone)
    import time
    time.sleep(1)
    assert len(_calls(tmp_path)) == 1     # smol-glove-9k never started


def test_a_run_under_the_papers_protocol_is_followed_by_its_ladder(tmp_path):
    """gemma-n50, smol-paper-tokens and smol-*-9k end with the budget ladder read from their own strings (same store
    and bundle folder); the fast-protocol runs have none."""
    env = _fake_env(tmp_path)
    r = subprocess.run(["bash", str(RUNS), "start", "gemma-n50,smol-glove-9k,smol-tokens"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    _wait(lambda: len(_calls(tmp_path)) == 5 and not list((tmp_path / "live").glob(".chain-*")))
    calls, live = _calls(tmp_path), tmp_path / "live"
    assert calls[0].startswith("scripts/make_bundles.py --models gemma-3-270m")
    assert calls[1] == (f"scripts/make_bundles.py --add-budget-ladder gemma-3-270m --ladder 1000/500 "
                        f"--store {live}/gemma-n50.sqlite --out {live}/gemma-n50-bundle")
    assert calls[2].startswith("scripts/make_bundles.py --models smollm2-135m") and "glove100k" in calls[2]
    assert calls[3] == (f"scripts/make_bundles.py --add-budget-ladder smollm2-135m --ladder 1000/500 3000/500 "
                        f"--store {live}/smol-glove-9k.sqlite --out {live}/smol-glove-9k-bundle")
    assert calls[4].startswith("scripts/make_bundles.py --models smollm2-135m") and "--source tokens" in calls[4]


def test_a_run_that_fails_ends_its_chain_without_a_ladder(tmp_path):
    env = _fake_env(tmp_path)
    fake = tmp_path / "python"
    fake.write_text(FAKE + "exit 1\n")
    subprocess.run(["bash", str(RUNS), "start", "gemma-n50,smol-glove-9k"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) >= 1 and not list((tmp_path / "live").glob(".chain-*")))
    calls = _calls(tmp_path)
    assert len(calls) == 1 and calls[0].startswith("scripts/make_bundles.py --models gemma-3-270m")


def test_an_m2_run_follows_its_m1_run_on_the_same_store(tmp_path):
    """smol-glove-9k-m2 writes to smol-glove-9k's store (the m = 1 strings are read back from it),
    into a bundle folder of its own, resumes from that store's committed snapshot on a fresh clone,
    and ends with its ladder."""
    env = _fake_env(tmp_path)
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "smol-glove-9k.sqlite").write_text("a committed snapshot")
    r = subprocess.run(["bash", str(RUNS), "start", "smol-glove-9k,smol-glove-9k-m2"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    _wait(lambda: len(_calls(tmp_path)) == 4 and not list((tmp_path / "live").glob(".chain-*")))
    calls, live = _calls(tmp_path), tmp_path / "live"
    assert " --m 1 --" in calls[0] and calls[0].endswith(
        f"--store {live}/smol-glove-9k.sqlite --out {live}/smol-glove-9k-bundle")
    assert " --m 1 2 --" in calls[2] and " --lengths 1:10,16,24,34,46 2:24,34,46,62,82 " in calls[2]
    assert calls[2].endswith(f"--threads 1 --keep-final --store {live}/smol-glove-9k.sqlite "
                             f"--out {live}/smol-glove-9k-m2-bundle")
    assert calls[3] == (f"scripts/make_bundles.py --add-budget-ladder smollm2-135m --ladder 1000/500 3000/500 "
                        f"--store {live}/smol-glove-9k.sqlite --out {live}/smol-glove-9k-m2-bundle")
    assert (live / "smol-glove-9k.sqlite").read_text() == "a committed snapshot"
    assert not (live / "smol-glove-9k-m2.sqlite").exists()


@pytest.mark.parametrize("name, store, has, ladder", [
    # a 27k run goes on in its 9000 / 1500 run's store from where that run left each string, and ends
    # with its ladder down to [A]'s budget
    ("smol-tokens-27k", "smol-tokens-9k", " --max-steps 27000 --patience 4500 --extend-from 9000/1500 ",
     "1000/500 3000/500 9000/1500"),
    ("gemma-27k", "gemma-9k", " --max-steps 27000 --patience 4500 --extend-from 9000/1500 ",
     "1000/500 3000/500 9000/1500"),
    # an m = 3 run goes on in its m = 1 run's store (m = 1 read back, m = 2 from its kept states)
    ("smol-glove-9k-m3", "smol-glove-9k", " --m 1 2 3 --samples 6 ", "1000/500 3000/500"),
])
def test_a_run_that_goes_on_in_another_runs_store(tmp_path, name, store, has, ladder):
    """It writes to that store, into a bundle folder of its own, and ends with its ladder."""
    env = _fake_env(tmp_path)
    r = subprocess.run(["bash", str(RUNS), "start", name], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    _wait(lambda: len(_calls(tmp_path)) == 2 and not list((tmp_path / "live").glob(".chain-*")))
    calls, live = _calls(tmp_path), tmp_path / "live"
    assert has in calls[0] and calls[0].endswith(f"--store {live}/{store}.sqlite --out {live}/{name}-bundle")
    model = "gemma-3-270m" if name.startswith("gemma") else "smollm2-135m"
    assert calls[1] == (f"scripts/make_bundles.py --add-budget-ladder {model} --ladder {ladder} "
                        f"--store {live}/{store}.sqlite --out {live}/{name}-bundle")
    if name.endswith("-m3"):
        assert " --lengths 1:10,16,24,34,46 2:24,34,46,62,82 3:34,46,62,82,108 " in calls[0]


def test_resume_starts_the_plans_chains_less_what_is_finished_or_running(tmp_path):
    """resume reads the plan: a chain whose runs all finished here is left alone, a finished run
    is dropped from its chain, a chain already running is not started twice; each run that ends
    well is marked finished; an unknown name in the plan is refused."""
    env = _fake_env(tmp_path, sleep=3)
    plan = tmp_path / "plan"
    plan.write_text("# a comment\n\ngemma-n50,smol-glove-9k\nsmol-tokens\nsmol-paper-tokens\n")
    env["RUNS_PLAN"] = str(plan)
    live = tmp_path / "live"
    live.mkdir()
    (live / ".done-gemma-n50").write_text("")
    (live / ".done-smol-paper-tokens").write_text("")
    r = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    # gemma-n50 finished: its chain starts at smol-glove-9k
    assert "started smol-glove-9k (pid" in r.stdout and "started smol-tokens (pid" in r.stdout
    assert "smol-paper-tokens: finished" in r.stdout
    _wait(lambda: len(_calls(tmp_path)) == 2)
    again = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert "gemma-n50,smol-glove-9k: running" in again.stdout and "smol-tokens: running" in again.stdout
    _wait(lambda: not list(live.glob(".chain-*")), seconds=60)
    calls = _calls(tmp_path)
    assert len(calls) == 3 and sum(c.startswith("scripts/make_bundles.py --add-budget-ladder") for c in calls) == 1
    assert (live / ".done-smol-glove-9k").exists() and (live / ".done-smol-tokens").exists()
    done = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.splitlines() == ["gemma-n50,smol-glove-9k: finished", "smol-tokens: finished",
                                        "smol-paper-tokens: finished"]
    plan.write_text("smol-tokens,nope\n")
    bad = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "unknown run 'nope'" in bad.stderr


def test_resume_queues_the_rest_of_a_chain_behind_a_run_already_going(tmp_path):
    """A plan chain whose first run is going in another chain: resume starts the rest of it, which
    waits (@NAME) until that chain has ended, so no two runs of a core overlap."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/bash\necho "start $*" >> "$FAKE_LOG"\nsleep "${FAKE_SLEEP:-0}"\necho "end $*" >> "$FAKE_LOG"\n')
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    env = dict(os.environ, PY=str(fake), FAKE_LOG=str(log), FAKE_SLEEP="3", RUNS_POLL="0.2",
               RUNS_LIVE=str(tmp_path / "live"), RUNS_KEPT=str(tmp_path / "kept"), RUNS_PLAN=str(tmp_path / "plan"))
    (tmp_path / "plan").write_text("smol-tokens,gemma-n50\n")
    subprocess.run(["bash", str(RUNS), "start", "smol-tokens"], env=env, timeout=60, capture_output=True)
    _wait(lambda: log.exists() and log.read_text().startswith("start"))
    r = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert "smol-tokens,gemma-n50: running up to smol-tokens; the rest waits for it" in r.stdout
    assert "started @smol-tokens,gemma-n50 (pid" in r.stdout
    _wait(lambda: not list((tmp_path / "live").glob(".chain-*")), seconds=60)
    lines = [line.split(" scripts/make_bundles.py ")[0] + " " + ("gemma" if "gemma" in line else "smol")
             for line in log.read_text().splitlines()]
    # the tokens run ends before Gemma's starts; Gemma's ladder follows its run
    assert lines == ["start smol", "end smol", "start gemma", "end gemma", "start gemma", "end gemma"]
    again = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert again.stdout.splitlines() == ["smol-tokens,gemma-n50: finished"]


FOCUS_FAKE = """#!/bin/bash
# stands in for python: logs its arguments; a held run (--hold-at) marks its store decided and
# sleeps FAKE_HOLD_SLEEP; `store ladder` says decided (0) once its store is marked (or FAKE_LADDER
# says so), 3 before; the rest sleep FAKE_SLEEP
echo "$$ $*" >> "$FAKE_LOG"
tag=$(basename "$(echo "$*" | sed -E 's/.*--store ([^ ]+).*/\\1/')")
case "$*" in
  *"store ladder"*) [ "${FAKE_LADDER:-}" = 0 ] || [ -f "$FAKE_DIR/decided-$tag" ] && exit 0; exit 3;;
  *--hold-at*) [ "${FAKE_LADDER:-}" = 3 ] || touch "$FAKE_DIR/decided-$tag"; sleep "${FAKE_HOLD_SLEEP:-1}";;
  *) sleep "${FAKE_SLEEP:-0}";;
esac
"""


def _focus_env(tmp_path, plan, ladder=""):
    env = _fake_env(tmp_path, sleep=30)
    (tmp_path / "python").write_text(FOCUS_FAKE)
    (tmp_path / "plan").write_text(plan)
    env.update(FAKE_LADDER=str(ladder), FAKE_DIR=str(tmp_path), RUNS_THREADS="2", RUNS_PLAN=str(tmp_path / "plan"))
    return env


def _gone(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


@pytest.mark.parametrize("ladder, says", [(0, "m = 3 decided within 3000/500"),
                                          (3, "m = 3 not decided within 3000/500 (see smol-tokens-9k-m3-focus-ladder.log)")])
def test_focus_runs_one_m_alone_until_its_budget_is_decided_then_resumes(tmp_path, ladder, says):
    """focus stops what runs (also a paused one), runs that run's m = 3 strings alone on every core
    (RUNS_THREADS), each only until its outcome within [A]'s 3000 / 500 is known (--hold-at), asks the
    store whether that budget is decided at m = 3, says so, and resumes the plan."""
    env = _focus_env(tmp_path, "gemma-n50\n", ladder)
    subprocess.run(["bash", str(RUNS), "start", "gemma-n50"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    first = int((tmp_path / "calls.log").read_text().split()[0])
    os.kill(first, signal.SIGSTOP)                                  # paused by hand: stopped all the same
    r = subprocess.run(["bash", str(RUNS), "focus", "smol-tokens-9k-m3", "3", "3000/500"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    live = tmp_path / "live"
    assert "focused smol-tokens-9k-m3 on m = 3 until 3000/500 is decided" in r.stdout
    _wait(lambda: len(_calls(tmp_path)) == 4)
    try:
        calls = _calls(tmp_path)
        assert calls[0].startswith("scripts/make_bundles.py --models gemma-3-270m")
        assert calls[1].startswith("scripts/make_bundles.py --models smollm2-135m --m 3 --samples 6 --source tokens ")
        assert " --lengths 1:6,9,12,17,22,27,32 2:12,17,24,32,42,54 3:17,24,32,42,54,70 " in calls[1]
        assert calls[1].endswith(f"--threads 2 --keep-final --hold-at 3000/500 --store {live}/smol-tokens-9k.sqlite "
                                 f"--out {live}/smol-tokens-9k-m3-focus-bundle")
        assert calls[2] == f"-m accesslib store ladder --budget 3000/500 --m 3 --decided --store {live}/smol-tokens-9k.sqlite"
        assert calls[3].startswith("scripts/make_bundles.py --models gemma-3-270m")     # the plan resumed
        _wait(lambda: _gone(first))
        _wait(lambda: not list(live.glob(".focus-*.sh")))
        assert says in (live / "smol-tokens-9k-m3-focus.log").read_text()
        # undecided (the run failed): resume will not start it again by itself
        assert (live / ".focus-ended-smol-tokens-9k-m3-3").exists() == (ladder == 3)
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)


ALONE_FAKE = """#!/bin/bash
# stands in for python: logs its arguments; the tokens run fails where FAKE_FAIL=1 says so, the
# rest sleep FAKE_SLEEP (the first call, the run already going, sleeps 30 s)
echo "$$ $*" >> "$FAKE_LOG"
[ "$(wc -l < "$FAKE_LOG")" -eq 1 ] && { sleep 30; exit 0; }
case "$*" in *"--source tokens"*) [ "${FAKE_FAIL:-0}" = 1 ] && exit 1;; esac
sleep "${FAKE_SLEEP:-0}"
"""


@pytest.mark.parametrize("fail", [False, True])
def test_alone_runs_one_run_whole_on_every_core_then_resumes(tmp_path, fail):
    """alone stops what runs, runs NAME's own command (every m, its budget) on every core
    (RUNS_THREADS) and its ladder, marks it finished (so that resume leaves it out) and resumes the
    plan; a run that fails is not marked, says so in its log, and the plan resumes all the same."""
    env = _focus_env(tmp_path, "smol-tokens-9k-m3,gemma-n50\n")
    (tmp_path / "python").write_text(ALONE_FAKE)
    subprocess.run(["bash", str(RUNS), "start", "gemma-n50"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    first = int((tmp_path / "calls.log").read_text().split()[0])
    r = subprocess.run(["bash", str(RUNS), "alone", "smol-tokens-9k-m3"], capture_output=True, text=True,
                       env=dict(env, FAKE_SLEEP="1", FAKE_FAIL=str(int(fail))), timeout=60)
    assert r.returncode == 0, r.stderr
    live = tmp_path / "live"
    assert r.stdout.startswith("running smol-tokens-9k-m3 alone on 2 threads (pid ")
    try:
        _wait(lambda: _gone(first))
        _wait(lambda: not list(live.glob(".focus-*.sh")))
        _wait(lambda: len(_calls(tmp_path)) >= (3 if fail else 4))
        calls = _calls(tmp_path)
        assert calls[1].startswith("scripts/make_bundles.py --models smollm2-135m --m 1 2 3 --samples 6 --source tokens ")
        assert calls[1].endswith(f"--threads 2 --keep-final --store {live}/smol-tokens-9k.sqlite "
                                 f"--out {live}/smol-tokens-9k-m3-bundle")
        log = (live / "smol-tokens-9k-m3.log").read_text()
        if fail:     # no ladder, no mark: the plan's chain starts with it again
            assert "ran alone and failed (status 1)" in log and not (live / ".done-smol-tokens-9k-m3").exists()
            assert (live / ".alone-failed-smol-tokens-9k-m3").exists()     # a plan's alone line passes it over
            assert calls[2].startswith("scripts/make_bundles.py --models smollm2-135m --m 1 2 3")
            assert calls[2].endswith("--threads 1 --keep-final --store " f"{live}/smol-tokens-9k.sqlite "
                                     f"--out {live}/smol-tokens-9k-m3-bundle")
        else:        # its ladder, its mark, and the plan resumes without it: Gemma's run next
            assert calls[2] == (f"scripts/make_bundles.py --add-budget-ladder smollm2-135m --ladder 1000/500 3000/500 "
                                f"--store {live}/smol-tokens-9k.sqlite --out {live}/smol-tokens-9k-m3-bundle")
            assert "ran alone to its end" in log and (live / ".done-smol-tokens-9k-m3").exists()
            assert calls[3].startswith("scripts/make_bundles.py --models gemma-3-270m")
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)


@pytest.mark.parametrize("argv, msg", [
    (["focus", "smol-tokens-9k-m3"], "usage: runs.sh focus NAME M STEPS/PATIENCE"),
    (["focus", "nope", "3", "3000/500"], "unknown run 'nope'"),
    (["focus", "smol-tokens-9k-m3", "4", "3000/500"], "M must be one of the m of run 'smol-tokens-9k-m3' (--m 1 2 3); got '4'"),
    (["focus", "smol-tokens-9k", "x", "3000/500"], "M must be one of the m of run 'smol-tokens-9k' (--m 1); got 'x'"),
    (["focus", "smol-tokens-9k-m3", "3", "3000"], "the budget must be STEPS/PATIENCE, whole numbers >= 1 (e.g. "
                                                  "3000/500); got '3000'"),
    (["focus", "smol-tokens", "1", "1000/200"], "focus needs a run of a constant learning rate (--protocol paper); "
                                                "'smol-tokens' has a schedule"),
    (["alone"], "usage: runs.sh alone NAME"),
    (["alone", "nope"], "unknown run 'nope'"),
])
def test_focus_and_alone_refuse_bad_input_and_stop_nothing(argv, msg, tmp_path):
    env = _fake_env(tmp_path, sleep=30)
    subprocess.run(["bash", str(RUNS), "start", "gemma-n50"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    try:
        r = subprocess.run(["bash", str(RUNS), *argv], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 2 and msg in r.stderr and "focused" not in r.stdout and "alone" not in r.stdout
        pid = int((tmp_path / "calls.log").read_text().split()[0])
        assert not _gone(pid) and list((tmp_path / "live").glob(".chain-*"))     # the run goes on
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)


def test_resume_runs_the_plans_focus_lines_first_then_its_chains(tmp_path):
    """Focus lines of the plan come first, one at a time and in order; one whose budget the store
    says is decided is passed over; once all are, the chains start. While a focus runs, resume
    starts nothing; one that ended undecided is not started again by resume."""
    env = _focus_env(tmp_path, "# [A]'s budget at m = 3 first\nfocus smol-tokens-9k-m3 3 3000/500\n"
                               "focus smol-glove-9k-m3 3 1000/500\ngemma-n50\n")
    env["FAKE_HOLD_SLEEP"] = "3"
    live = tmp_path / "live"
    try:
        r = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "focused smol-tokens-9k-m3 on m = 3 until 3000/500 is decided" in r.stdout
        _wait(lambda: any("--hold-at" in c for c in _calls(tmp_path)))
        busy = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
        assert busy.stdout.strip() == "a focus is running: the plan resumes when it ends"
        _wait(lambda: any("gemma-3-270m" in c for c in _calls(tmp_path)), seconds=60)
        runs = [c for c in _calls(tmp_path) if c.startswith("scripts/make_bundles.py")]
        assert [("smollm2-135m" in c, " --source tokens " in c, "--hold-at" in c) for c in runs] == [
            (True, True, True), (True, False, True), (False, False, False)]
        assert " --source glove100k " in runs[1] and runs[2].startswith("scripts/make_bundles.py --models gemma-3-270m")
        assert " --hold-at 1000/500 " in runs[1] and " --m 3 " in runs[1]
        again = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
        assert again.stdout.splitlines() == ["focus smol-tokens-9k-m3 3 3000/500: decided",
                                             "focus smol-glove-9k-m3 3 1000/500: decided", "gemma-n50: running"]
        assert not list(live.glob(".focus-*.sh"))
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)
    # a focus that ended undecided is passed over (runs.sh focus tries it again)
    (tmp_path / "decided-smol-glove-9k.sqlite").unlink()
    (live / ".focus-ended-smol-glove-9k-m3-3").write_text("")
    _resume_passes_over(tmp_path, env, "focus smol-glove-9k-m3 3 1000/500", "focus nope 3 1000/500",
                        f"focus smol-glove-9k-m3 3 1000/500: ended undecided (see {live}/smol-glove-9k-m3-focus.log; "
                        "runs.sh focus tries again)")


def _resume_passes_over(tmp_path, env, line, unknown, says):
    """resume with a plan of ``line`` (one that ended badly, marked so) then ``unknown`` (a line naming
    an unknown run): it says ``says`` of the first, starts nothing, and refuses the second by name."""
    (tmp_path / "plan").write_text(f"{line}\n{unknown}\n")
    bad = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.stdout.splitlines() == [says]
    assert bad.returncode == 2 and "unknown run 'nope'" in bad.stderr


def test_resume_runs_the_plans_alone_lines_after_its_focus_lines(tmp_path):
    """An alone line of the plan runs its run whole on every core (runs.sh alone) once the focus
    lines are decided, then the chains without it; a finished one is passed over, and so is one
    that failed alone (runs.sh alone tries it again); status says where each stands."""
    env = _focus_env(tmp_path, "focus smol-tokens-9k-m3 3 3000/500\nalone smol-glove-9k-m3\n"
                               "smol-glove-9k-m3,gemma-n50\n", ladder=0)
    (tmp_path / "python").write_text(ALONE_FAKE.replace('[ "$(wc -l < "$FAKE_LOG")" -eq 1 ] && { sleep 30; exit 0; }\n', ""))
    env.update(FAKE_SLEEP="2")
    live = tmp_path / "live"
    try:
        r = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[0] == "focus smol-tokens-9k-m3 3 3000/500: decided"
        assert r.stdout.splitlines()[1].startswith("running smol-glove-9k-m3 alone on 2 threads")
        st = subprocess.run(["bash", str(RUNS), "status"], capture_output=True, text=True, env=env, timeout=60)
        assert "plan: alone smol-glove-9k-m3: running" in st.stdout.splitlines()
        _wait(lambda: any("gemma-3-270m" in c for c in _calls(tmp_path)), seconds=60)
        runs = [c for c in _calls(tmp_path) if c.startswith("scripts/make_bundles.py --models")]
        assert " --source glove100k " in runs[0] and " --threads 2 " in runs[0]
        assert runs[1].startswith("scripts/make_bundles.py --models gemma-3-270m")    # its chain, without it
        again = subprocess.run(["bash", str(RUNS), "resume"], capture_output=True, text=True, env=env, timeout=60)
        assert again.stdout.splitlines()[1:] == ["alone smol-glove-9k-m3: finished", "smol-glove-9k-m3,gemma-n50: running"]
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)
    (live / ".done-smol-glove-9k-m3").unlink()
    (live / ".alone-failed-smol-glove-9k-m3").write_text("")
    _resume_passes_over(tmp_path, env, "alone smol-glove-9k-m3", "alone nope",
                        f"alone smol-glove-9k-m3: failed (see {live}/smol-glove-9k-m3.log; runs.sh alone tries again)")
    st = subprocess.run(["bash", str(RUNS), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert "plan: alone smol-glove-9k-m3: failed" in st.stdout.splitlines()


def test_the_committed_plan_is_valid(make_bundles):
    """benchmarks/runs/plan: each focus line names a run under [A]'s protocol, one of its m and a budget
    below its own; each alone line and each chain names known runs."""
    names = _runs("names").stdout.split()
    lines = [x.strip() for x in (ROOT / "benchmarks" / "runs" / "plan").read_text().splitlines()]
    lines = [x for x in lines if x and not x.startswith("#")]
    focus = [x.split() for x in lines if x.startswith("focus ")]
    alone = [x.split() for x in lines if x.startswith("alone ")]
    assert all(len(a) == 2 and a[1] in names for a in alone), alone
    assert focus and all(len(f) == 4 for f in focus)
    for _, name, m, budget in focus:
        a = make_bundles.build_parser().parse_args(_runs("args", name).stdout.split())
        steps, patience = make_bundles.parse_budget(budget, "budget", pytest.fail, "3000/500")
        assert a.protocol == "paper" and int(m) in a.m, name
        assert steps <= a.max_steps and patience <= a.patience and (steps, patience) != (a.max_steps, a.patience)
    for chain in (x for x in lines if not x.startswith(("focus ", "alone "))):
        assert set(chain.split(",")) <= set(names), chain


def _finished(tmp_path, name, store, model="smollm2-135m"):
    """A live folder where run ``name`` (on ``store``) has finished: its mark and its bundle."""
    live = tmp_path / "live"
    (live / f"{name}-bundle").mkdir(parents=True)
    (live / f"{name}-bundle" / f"cram-{model}.json").write_text('{"the": "run\'s bundle"}')
    (live / f".done-{name}").write_text("")
    (live / f"{store}.sqlite").write_text("")
    return live


@pytest.mark.parametrize("name, store, folder, source, own, three", [
    ("smol-glove-9k-m3", "smol-glove-9k", "smol-glove-9k", "glove100k", "9000/1500", "smol-glove-3k"),
    ("smol-tokens-9k-m2", "smol-tokens-9k", "smol-tokens-9k", "tokens", "9000/1500", "smol-tokens-3k"),
    ("smol-tokens-27k", "smol-tokens-9k", "smol-tokens-27k", "tokens", "27000/4500", None),
    ("gemma-9k", "gemma-9k", "gemma-9k", "glove100k", "9000/1500", "gemma-3k"),
    ("gemma-27k", "gemma-9k", "gemma-27k", "glove100k", "27000/4500", None),
])
def test_ship_keeps_a_finished_runs_bundle_its_map_and_its_3000_500(tmp_path, name, store, folder, source, own,
                                                                   three):
    """Every reading names the run by its own budget: the store may hold a larger run going on
    from it (-27k extends the -9k strings in the same store). Gemma's check (gemma-9k) goes into
    Gemma's bundle. The readings read the store's snapshot, taken first, so that the commands
    they record name the committed file."""
    model = "gemma-3-270m" if name.startswith("gemma") else "smollm2-135m"
    env = dict(_fake_env(tmp_path), RUNS_BUNDLES=str(tmp_path / "bundles"))
    live = _finished(tmp_path, name, store, model)
    r = subprocess.run(["bash", str(RUNS), "ship", name], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    bundles = tmp_path / "bundles"
    assert (bundles / folder / f"cram-{model}.json").read_text() == '{"the": "run\'s bundle"}'
    kept = tmp_path / "kept"
    want = [f"-m accesslib store backup {kept}/{store}.sqlite --store {live}/{store}.sqlite",
            f"scripts/make_bundles.py --add-remeasure {bundles}/{folder}",
            f"scripts/make_bundles.py --add-budget-map {model} --source {source} --read-from {own} "
            f"--store {kept}/{store}.sqlite "
            "--map-steps 500 1000 2000 3000 4500 6000 --map-patience 100 250 500 1000"]
    if three:   # [A]'s budget at every m, read from the same strings, kept beside the run's own
        want += [f"scripts/make_bundles.py --read-budget 3000/500 --models {model} --source {source} "
                 f"--read-from {own} --store {kept}/{store}.sqlite --out {bundles}/{three}",
                 f"scripts/make_bundles.py --add-remeasure {bundles}/{three}"]
    assert _calls(tmp_path) == want
    assert f"shipped {name} ({bundles}/{folder}, read from {kept}/{store}.sqlite: commit both)" in r.stdout


@pytest.mark.parametrize("argv, msg", [
    (["ship"], "usage: runs.sh ship NAME"),
    (["ship", "nope"], "unknown run 'nope'"),
    (["ship", "gemma-n50"],
     "ship takes a run measured beside a shipped bundle (smol-*, gemma-9k, gemma-27k); got 'gemma-n50'"),
    (["ship", "gemma-9k"], "run 'gemma-9k' has not finished here (no "),
    (["ship", "smol-tokens"], "ship takes a run under [A]'s protocol (--protocol paper); 'smol-tokens' has a schedule"),
    (["ship", "smol-tokens-9k-m3"], "run 'smol-tokens-9k-m3' has not finished here (no "),
])
def test_ship_refuses_bad_input_and_unfinished_runs_and_changes_nothing(argv, msg, tmp_path):
    env = dict(_fake_env(tmp_path), RUNS_BUNDLES=str(tmp_path / "bundles"))
    _finished(tmp_path, "smol-glove-9k-m3", "smol-glove-9k")     # another run has finished: not this one
    r = subprocess.run(["bash", str(RUNS), *argv], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert _calls(tmp_path) == [] and not (tmp_path / "bundles").exists()


def test_ship_waits_for_the_run_writing_to_its_store(tmp_path):
    env = dict(_fake_env(tmp_path, sleep=30), RUNS_BUNDLES=str(tmp_path / "bundles"))
    _finished(tmp_path, "smol-glove-9k-m3", "smol-glove-9k")
    subprocess.run(["bash", str(RUNS), "start", "smol-glove-27k"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    try:
        r = subprocess.run(["bash", str(RUNS), "ship", "smol-glove-9k-m3"], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 2 and "a run is writing to " in r.stderr and "smol-glove-9k.sqlite" in r.stderr
        assert len(_calls(tmp_path)) == 1 and not (tmp_path / "bundles").exists()
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)


def test_status_reads_a_running_runs_pace_from_when_it_started(tmp_path):
    """A run resumed on a fresh clone made its steps since it started, not since its committed snapshot
    was taken: status passes the run's start to `store pace`."""
    import datetime
    env = _fake_env(tmp_path)
    # the run sleeps; what status calls returns at once
    (tmp_path / "python").write_text(FAKE.replace('sleep "${FAKE_SLEEP:-0}"',
                                                  'case "$1" in scripts/make_bundles.py) sleep 30;; esac'))
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "smol-tokens.sqlite").write_text("the committed snapshot")
    (tmp_path / "plan").write_text("")
    env["RUNS_PLAN"] = str(tmp_path / "plan")
    subprocess.run(["bash", str(RUNS), "start", "smol-tokens"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    try:
        r = subprocess.run(["bash", str(RUNS), "status"], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and "== smol-tokens (running)" in r.stdout, r.stderr
        live = tmp_path / "live"
        pace = [c for c in _calls(tmp_path) if "store pace" in c]
        # from the store as the run found it: here the committed snapshot, copied
        assert (live / ".start-smol-tokens.sqlite").read_text() == "the committed snapshot"
        assert len(pace) == 1 and pace[0].startswith(
            f"-m accesslib store pace --store {live}/smol-tokens.sqlite --since {live}/.start-smol-tokens.sqlite "
            "--to-step 4500 --running-since ")
        started = datetime.datetime.fromisoformat(pace[0].split()[-1])
        age = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
        assert 0 <= age < 60
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)


def _status_pace_since(tmp_path, env):
    r = subprocess.run(["bash", str(RUNS), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "== smol-tokens (running)" in r.stdout, r.stderr
    pace = [c for c in _calls(tmp_path) if "store pace" in c]
    return pace[-1].split("--since ")[1].split()[0]


def test_status_reads_a_resumed_runs_pace_from_the_store_it_found(tmp_path):
    """A run stopped after a snapshot, then resumed on this machine, went on from its live store
    (with the stopped run's last steps, some still in its -wal file), not from that snapshot: its
    pace counts from a copy of the store as it found it, until a snapshot taken since it runs."""
    import time
    env = _fake_env(tmp_path)
    (tmp_path / "python").write_text(FAKE.replace('sleep "${FAKE_SLEEP:-0}"',
                                                  'case "$1" in scripts/make_bundles.py) sleep 30;; esac'))
    live, kept = tmp_path / "live", tmp_path / "kept"
    live.mkdir(), kept.mkdir()
    (kept / "smol-tokens.sqlite").write_text("the last snapshot")
    (live / ".before-smol-tokens.sqlite").write_text("the snapshot before")
    os.utime(live / ".before-smol-tokens.sqlite", (time.time() - 1800,) * 2)
    (live / "smol-tokens.sqlite").write_text("the stopped run's store")
    (live / "smol-tokens.sqlite-wal").write_text("its last saves")
    (live / ".start-smol-tokens.sqlite-shm").write_text("left by an earlier read")
    (tmp_path / "plan").write_text("")
    env["RUNS_PLAN"] = str(tmp_path / "plan")
    subprocess.run(["bash", str(RUNS), "start", "smol-tokens"], env=env, timeout=60, capture_output=True)
    _wait(lambda: len(_calls(tmp_path)) == 1)
    try:
        assert (live / ".start-smol-tokens.sqlite").read_text() == "the stopped run's store"
        assert (live / ".start-smol-tokens.sqlite-wal").read_text() == "its last saves"
        assert not (live / ".start-smol-tokens.sqlite-shm").exists()
        assert _status_pace_since(tmp_path, env) == f"{live}/.start-smol-tokens.sqlite"
        # a snapshot taken since the run started is the earlier copy again
        (live / ".before-smol-tokens.sqlite").write_text("a snapshot of this run")
        os.utime(live / ".before-smol-tokens.sqlite", (time.time() + 5,) * 2)
        assert _status_pace_since(tmp_path, env) == f"{live}/.before-smol-tokens.sqlite"
    finally:
        subprocess.run(["bash", str(RUNS), "stop"], env=env, timeout=60, capture_output=True)


def test_snapshot_keeps_the_time_the_snapshot_before_was_taken(tmp_path):
    import time
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "smol-tokens.sqlite").write_text("the snapshot before")
    taken = time.time() - 900
    os.utime(tmp_path / "kept" / "smol-tokens.sqlite", (taken, taken))
    _on_live_stores(tmp_path, "snapshot", ("smol-tokens",))
    assert abs((tmp_path / "live" / ".before-smol-tokens.sqlite").stat().st_mtime - taken) < 1
