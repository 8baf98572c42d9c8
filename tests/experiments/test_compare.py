"""`accesslib store compare`: two runs of one protocol at one budget, string by string and by n50."""
import math

import pytest

from accesslib.cli import main
from accesslib.experiments.bundling import measured_rung
from accesslib.experiments.compare import compare_runs
from accesslib.results.store import ResultsStore

PAPER = dict(lr=0.01, patience_on="accuracy", schedule=None)
LENGTHS = (4, 8, 12)


def _store(path, max_steps, patience, outcomes, extra=(), model="tiny", ran_on=None):
    """A run of ``max_steps`` / ``patience`` whose string i at length n ended as ``outcomes[n][i]``:
    a step it crammed at, or None (stopped by patience at step 700). A crammed string's best
    accuracy rose every 400 steps until it crammed (so patience 500 does not stop it first)."""
    settings = dict(PAPER, max_steps=max_steps, patience=patience)
    st = ResultsStore(path)
    ph = f"p{max_steps}"
    for n, ends in list(outcomes.items()) + list(extra):
        for i, step in enumerate(ends):
            ok = step is not None
            st.add(dict(model=model, m=1, n=n, source="tokens", target_ids=[n, i] + [0] * (n - 2), seed=0,
                        protocol_hash=ph, sample=i, success=ok, steps=step if ok else 700,
                        reason=None if ok else "patience",
                        accuracy_history=[[s, s / step] for s in range(0, step, 400)] + [[step, 1.0]] if ok
                        else [[0, 0.0], [200, 0.5]], ran_on=ran_on),
                   settings=settings)
    return st.path


A = {4: [100, 200, 300, 400], 8: [500, None, 900, None], 12: [None, None, None, 2500]}
# B: the same strings, run at 9000 / 1500: some at the same step, some at another, some past 3000
B = {4: [100, 250, 300, 400], 8: [500, 800, 4000, None], 12: [None, 6000, None, 2600]}


def test_two_runs_are_compared_string_by_string_and_by_n50(tmp_path):
    a = _store(tmp_path / "a.sqlite", 3000, 500, A)
    b = _store(tmp_path / "b.sqlite", 9000, 1500, B, extra=[(16, [None])])
    (c,) = compare_runs(a, b, (3000, 500))
    assert (c["model"], c["m"], c["source"], c["budget"]) == ("tiny", 1, "tokens", (3000, 500))
    assert c["a"]["rung"]["successes"] == [4, 2, 1] and c["b"]["rung"]["successes"] == [4, 2, 1, 0]
    assert (c["a"]["max_steps"], c["b"]["patience"]) == (3000, 1500)
    # at 3000 / 500: B's string (8, 2) crammed past 3000 and (8, 1) crammed where A's patience ended it
    assert (c["strings"], c["both"], c["same_step"], c["only_a"], c["only_b"], c["neither"], c["open"]) == (
        12, 6, 4, 1, 1, 4, 0)
    assert (c["only_in_a"], c["only_in_b"]) == (0, 1)
    assert c["a"]["ran_on"] == {"not recorded": 12} and c["b"]["ran_on"] == {"not recorded": 13}
    ra = measured_rung(3000, 500, LENGTHS, [4, 2, 1], [4, 4, 4])
    rb = measured_rung(3000, 500, LENGTHS + (16,), [4, 2, 1, 0], [4, 4, 4, 1])
    assert c["n50_diff"] == pytest.approx(ra["n50"] - rb["n50"])
    assert c["z"] == pytest.approx(c["n50_diff"] / math.hypot(ra["stderr"], rb["stderr"]))
    # at B's own budget A cannot be read; a store of another model shares no curve: said in words
    with pytest.raises(ValueError, match=r"^a budget read from a run cannot exceed the run's own: 9000 / 1500 is "
                                         r"larger than tiny's curve at m = 1 \(tokens, protocol p3000"):
        compare_runs(a, b, (9000, 1500))
    other = _store(tmp_path / "other.sqlite", 9000, 1500, B, model="other")
    with pytest.raises(ValueError, match=r"^no curve \(model, m, source\) can be read at 3000 / 500 in both stores "
                                         r"\(curves that can: .*a\.sqlite: tiny m=1 tokens; .*other\.sqlite: other m=1 "
                                         r"tokens\)$"):
        compare_runs(a, other, (3000, 500))


def test_the_command_prints_both_rungs_and_the_counts(tmp_path, capsys):
    a = _store(tmp_path / "a.sqlite", 3000, 500, A)
    env = {"cpu": "AMD EPYC", "cpu_id": "family 25 model 1 stepping 1", "kernels": "AVX2", "threads": 1}
    b = _store(tmp_path / "b.sqlite", 9000, 1500, B, ran_on=[dict(env, **{"from": 0}), dict(env, threads=2, **{"from": 9})])
    assert main(["store", "compare", str(b), "--budget", "3000/500", "--store", str(a)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tiny, m = 1, tokens, at 3,000 / 500:"
    assert out[1].split() == ["run", "store", "protocol", "(its", "budget)", "n=4", "n=8", "n=12", "n50"]
    assert out[2].split()[:8] == ["A", str(a), "p3000", "(3,000", "/", "500)", "4/4", "2/4"]
    assert out[3].split()[:8] == ["B", str(b), "p9000", "(9,000", "/", "1,500)", "4/4", "2/4"]
    assert out[4] == "  A ran on: not recorded (12 strings)"
    assert out[5] == ("  B ran on: AMD EPYC (family 25 model 1 stepping 1, AVX2), 1 thread; then AMD EPYC (family 25 "
                      "model 1 stepping 1, AVX2), 2 threads (12 strings)")
    assert out[6] == ("  12 strings in both: 6 crammed in both (4 at the same step), 1 only in A, 1 only in B, "
                      "4 failed in both")
    assert out[7] == "  n50: A - B = +0.0 (0.0 combined standard errors)"


@pytest.mark.parametrize("argv, msg", [
    (["store", "compare", "{tmp}/a.sqlite", "--budget", "3000/500", "--store", "{tmp}/a.sqlite"],
     "the other store must be a different file from the store"),
    (["store", "compare", "{tmp}/absent.sqlite", "--budget", "3000/500", "--store", "{tmp}/a.sqlite"],
     "OTHER must be an existing results store file"),
    (["store", "compare", "{tmp}/a.sqlite", "--budget", "3000", "--store", "{tmp}/a.sqlite"],
     "--budget must be STEPS/PATIENCE pairs"),
])
def test_bad_comparisons_are_one_line(tmp_path, capsys, argv, msg):
    _store(tmp_path / "a.sqlite", 3000, 500, A)
    assert main([x.replace("{tmp}", str(tmp_path)) for x in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]


def test_the_committed_smollm2_runs_summed_alike_cram_at_the_same_steps(tmp_path):
    """docs/engine.md, "Float rounding": SmolLM2-135M's two random-token runs under [A]'s protocol
    (separate runs of the same 42 strings, one thread each) read at 3000 / 500 are one run."""
    import shutil
    from pathlib import Path

    stores = Path(__file__).resolve().parents[2] / "benchmarks" / "runs" / "stores"
    for name in ("smol-paper-tokens", "smol-tokens-9k"):
        shutil.copyfile(stores / f"{name}.sqlite", tmp_path / f"{name}.sqlite")   # opened as copies: never written
    (c,) = compare_runs(tmp_path / "smol-paper-tokens.sqlite", tmp_path / "smol-tokens-9k.sqlite", (3000, 500))
    assert (c["model"], c["m"], c["source"]) == ("smollm2-135m", 1, "tokens")
    assert (c["strings"], c["both"], c["same_step"], c["only_a"], c["only_b"], c["neither"], c["open"]) == (
        42, 15, 15, 0, 0, 27, 0)
    assert (round(c["a"]["rung"]["n50"], 1), round(c["a"]["rung"]["stderr"], 1)) == (12.8, 1.5)
    assert c["n50_diff"] == 0.0


def test_gemmas_two_runs_part_at_1000_500_and_3000_500(tmp_path):
    """docs/gemma.md: `gemma-n50` and `gemma-9k` (the same 36 strings, [A]'s protocol; the second
    still running, but every string's outcome within 3000 / 500 known since 7 December, 12:04 UTC)
    are two samples, at 1000 / 500 and at [A]'s own 3000 / 500."""
    import shutil
    from pathlib import Path

    stores = Path(__file__).resolve().parents[2] / "benchmarks" / "runs" / "stores"
    for name in ("gemma-n50", "gemma-9k"):
        shutil.copyfile(stores / f"{name}.sqlite", tmp_path / f"{name}.sqlite")   # opened as copies: never written
    (c,) = compare_runs(tmp_path / "gemma-n50.sqlite", tmp_path / "gemma-9k.sqlite", (1000, 500))
    assert (c["strings"], c["both"], c["same_step"], c["only_a"], c["only_b"], c["neither"], c["open"]) == (
        36, 9, 0, 0, 2, 25, 0)
    assert [round(c[x]["rung"][k], 1) for x in "ab" for k in ("n50", "stderr")] == [9.0, 0.8, 10.0, 0.7]
    assert round(c["z"], 1) == -1.0
    (c,) = compare_runs(tmp_path / "gemma-n50.sqlite", tmp_path / "gemma-9k.sqlite", (3000, 500))
    assert (c["strings"], c["both"], c["same_step"], c["only_a"], c["only_b"], c["neither"], c["open"]) == (
        36, 10, 0, 0, 3, 23, 0)
    assert [round(c[x]["rung"][k], 1) for x in "ab" for k in ("n50", "stderr")] == [9.5, 1.0, 11.4, 1.2]
    assert round(c["z"], 1) == -1.2
