"""`accesslib bound`: the counting bound at one setting, from numbers, [A]'s table or a shipped bundle."""
import json
import math

import pytest

from accesslib.cli import main


def _json(capsys, *argv):
    assert main(["bound", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_setting_where_every_number_is_known_by_hand(capsys):
    """d = 1, |V| = 2, 1 + 2r/eps = 2: one token per vector, n* = m, and each token past n* halves
    the share of strings a prompt can force."""
    argv = ["bound", "--d", "1", "--vocab", "2", "--r", "0.5", "--eps", "1", "--m", "1", "2",
            "--n", "0", "2", "3", "4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ln(1 + 2r/eps) = 0.6931 nats per coordinate" in out
    assert "C = d ln(1 + 2r/eps) / ln|V| = 1.00 tokens per prompt vector" in out
    table = [line.split() for line in out.splitlines()
             if line.startswith("  ") and line.split()[0] in "01234"]
    # m rows: m, log10 prompts (log10 2^m), n* = m, n50 bound = m + 1 (share 1/2 one token past n*)
    assert ["1", "0.3", "1.0", "2.0"] in table and ["2", "0.6", "2.0", "3.0"] in table
    # share rows: n, at m = 1, at m = 2
    assert ["0", "1", "1"] in table and ["2", "0.5", "1"] in table
    assert ["3", "0.25", "0.5"] in table and ["4", "0.125", "0.25"] in table
    t = _json(capsys, "--d", "1", "--vocab", "2", "--r", "0.5", "--eps", "1", "--m", "1", "2", "--n", "4")
    assert t["slope"] == pytest.approx(1.0) and t["eps_from"] == "given" and t["origin"] is None
    assert [r["m"] for r in t["rows"]] == [1, 2]
    assert [r["n50"] for r in t["rows"]] == pytest.approx([2.0, 3.0])
    assert t["shares"] == [{"n": 4, "log10_share": pytest.approx([-3 * math.log10(2), -2 * math.log10(2)])}]


def test_a_model_of_the_published_table_with_its_ratios(capsys):
    """Pythia-160m with [A]'s eps = r_inf * 2^-11: C = 768 ln 4097 / ln 50304 = 590.1 tokens per
    vector, 6.5 and 13.4 times [A]'s measured slopes (90.37 on PG19, 44.13 on random words)."""
    assert main(["bound", "--model", "pythia-160m", "--m", "1", "--n", "1000"]) == 0
    out = capsys.readouterr().out
    assert "EleutherAI/pythia-160m, [A]'s table" in out
    assert "d = 768, |V| = 50,304, r = 22.45, eps = 0.0109619 (r x 2^-11: [A]'s choice)" in out
    assert "= 590.09 tokens per prompt vector" in out
    assert "[A]'s slope on PG19: 90.37 tokens per vector; C / a = 6.5" in out
    assert "[A]'s slope on random words: 44.13 tokens per vector; C / a = 13.4" in out
    # 410 tokens past n* = 590.1, each a factor 50,304: 10^-(409.9 * log10 50304) = 10^-1,927.2
    assert "10^-1,927.2" in out
    t = _json(capsys, "--model", "pythia-160m", "--m", "1")
    assert t["slope"] == pytest.approx(768 * math.log(4097) / math.log(50304))
    assert [x["ratio"] for x in t["ratios"]] == pytest.approx([t["slope"] / 90.37, t["slope"] / 44.13])
    # an explicit value replaces the model's; another dtype's eps follows r
    t = _json(capsys, "--model", "pythia-160m", "--r", "10", "--dtype", "bfloat16", "--m", "1")
    assert t["r"] == 10 and t["eps"] == pytest.approx(10 * 2.0**-8)
    assert t["slope"] == pytest.approx(768 * math.log1p(2 * 2**8) / math.log(50304))
    # [A]'s measured slopes go with its own setting: no C / a away from it (as in notebook 01)
    assert t["ratios"] == [] and t["origin"].endswith(", with the values given here in its place")
    assert main(["bound", "--model", "pythia-160m", "--dtype", "float32", "--m", "1"]) == 0
    out = capsys.readouterr().out
    assert "C / a = " not in out and "only at the model's own d, |V|, r and [A]'s eps" in out


def test_a_shipped_bundle_says_its_budget_check(capsys):
    """The measured slope is set beside the bound with the bundle's budget label: SmolLM2-135M's
    shipped slope is budget-limited, the embedded tiny model's converged."""
    from accesslib.results import bundles

    for name in ("smollm2-135m", "tiny-d32-v257"):
        b = bundles.load("cram", name)
        t = _json(capsys, "--bundle", name, "--m", "1")
        assert (t["d"], t["vocab_size"]) == (b["facts"]["d"], b["facts"]["vocab_size"])
        assert t["r"] == pytest.approx(b["geometry"]["r_inf"])
        assert t["budget"] == bundles.budget_status(b)[0]
        assert t["ratios"][0]["ratio"] == pytest.approx(t["slope"] / b["slope"]["slope"])
    assert main(["bound", "--bundle", "smollm2-135m", "--m", "1"]) == 0
    out = capsys.readouterr().out
    assert "budget check: budget-limited" in out and "the ratio overstates the gap" in out
    assert main(["bound", "--bundle", "tiny-d32-v257", "--m", "1"]) == 0
    out = capsys.readouterr().out
    assert "budget check: converged" in out and "overstates" not in out


@pytest.mark.parametrize("argv, msg", [
    (["--d", "5"], "--vocab, --r must be given (or --model NAME / --bundle NAME, which sets them)"),
    (["--model", "nope"], "--model must be a model of [A]'s table (EleutherAI/pythia-160m"),
    (["--bundle", "nope"], "--bundle must be a shipped cramming bundle (gemma-3-270m"),
    (["--model", "gemma-3-1b-pt", "--dtype", "bfloat16"],
     "--r must be given for google/gemma-3-1b-pt with --eps or --dtype ([A]'s table has no r_inf for it)"),
    (["--table", "--d", "4"], "--d must be left out with --table (each model's own values are used); got 4"),
    (["--table", "--n", "5"],
     "--n must be left out with --table (each model's own values are used); got [5]"),
    (["--d", "0", "--vocab", "3", "--r", "1"], "argument --d: must be a whole number >= 1; got 0"),
    (["--d", "4", "--vocab", "1", "--r", "1"], "argument --vocab: must be a whole number >= 2; got 1"),
    (["--d", "4", "--vocab", "9", "--r", "1", "--eps", "0"], "argument --eps: must be a number > 0; got 0"),
    (["--model", "pythia-160m", "--bundle", "tiny-d32-v257"],
     "argument --bundle: not allowed with argument --model"),
    (["--model", "pythia-160m", "--eps", "0.1", "--dtype", "float16"], "not allowed with argument --eps"),
])
def test_bad_input_is_one_line_naming_the_option(argv, msg, capsys):
    try:   # the parser's own checks exit, the later ones return the status
        code = main(["bound", *argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_a_bundle_with_one_m_sets_n_star_against_its_n50(capsys):
    """Gemma-3-270M's bundle measured m = 1 only: no slope, so n* = C at m = 1 against its n50, the
    figure notebook 03 shows (426.7, 44.7 times the n50), with its budget label."""
    from accesslib.results import bundles

    b = bundles.load("cram", "gemma-3-270m")
    m, n50, se = bundles.single_point(b)
    t = _json(capsys, "--bundle", "gemma-3-270m", "--m", "1")
    assert t["ratios"] == [] and t["n50_point"] == {"m": 1, "n50": n50, "stderr": se,
                                                    "ratio": pytest.approx(t["slope"] / n50)}
    assert (round(t["slope"], 1), round(t["n50_point"]["ratio"], 1)) == (426.7, 44.7)
    assert main(["bound", "--bundle", "gemma-3-270m", "--m", "1"]) == 0
    out = capsys.readouterr().out
    assert ("one m measured here, no slope: n50 = 9.5 +- 1.0 at m = 1 (glove100k targets; budget check: "
            "budget-limited); n* / n50 = 44.7") in out
    assert "the ratio overstates the gap" in out
    # away from the bundle's own setting there is no ratio
    assert _json(capsys, "--bundle", "gemma-3-270m", "--dtype", "float32")["n50_point"] is None


def test_the_table_of_every_published_model_and_its_ratio_ranges(capsys):
    """[A]'s own numbers give back its reported theory/experiment ratios: C / a over the models with
    a published r_inf is 6.0 to 13.5 against PG19 and 11.4 to 29.4 against Random ([A] reports 5.5 to
    13.5 and 11 to 29). Gemma-3-1b-pt has no r_inf, but at
    [A]'s eps C does not depend on r: its C is given, and it is left out of the ranges."""
    from accesslib.results import reference

    t = _json(capsys, "--table")
    assert [x["model"] for x in t["models"]] == [x["name"] for x in reference.models()]
    by = {x["model"]: x for x in t["models"]}
    for row in reference.models():   # by hand: d ln 4097 / ln |V|
        want = row["d"] * math.log(4097) / math.log(row["vocab_size"])
        assert by[row["name"]]["slope"] == pytest.approx(want)
    assert round(by["meta-llama/Llama-3.2-1B"]["ratio_random"], 1) == 20.3   # [A]'s own example
    assert {k: [round(x, 1) for x in v] for k, v in t["ranges"].items()} == {
        "ratio_pg19": [6.0, 13.5], "ratio_random": [11.4, 29.4]}
    one = by["google/gemma-3-1b-pt"]
    assert one["r_inf"] is None and round(one["slope"], 1) == 768.0 and round(one["ratio_random"], 1) == 109.4
    assert main(["bound", "--table"]) == 0
    out = capsys.readouterr().out
    assert "C / a is 6.0 to 13.5 against the PG19 slopes and 11.4 to 29.4 against the Random slopes" in out
    assert "[A] reports 5.5 to 13.5 and 11 to 29" in out
    # at another eps the ratios go (the measured slopes go with [A]'s eps); a model without r_inf has no C
    t = _json(capsys, "--table", "--dtype", "float32")
    assert t["ranges"] == {} and all(x["ratio_pg19"] is None for x in t["models"])
    assert by["google/gemma-3-1b-pt"]["slope"] and t["models"][-1]["slope"] is None
    # the model alone: no r needed at [A]'s eps, r needed at another
    t = _json(capsys, "--model", "gemma-3-1b-pt", "--m", "1")
    assert round(t["slope"], 2) == 768.02 and t["r_published"] is False
    assert main(["bound", "--model", "gemma-3-1b-pt", "--dtype", "float32"]) == 2
    assert "--r must be given for google/gemma-3-1b-pt with --eps or --dtype" in capsys.readouterr().err


def test_the_readme_quotes_the_tables_ranges(capsys):
    from pathlib import Path

    t = _json(capsys, "--table")
    (lo, hi), (rlo, rhi) = t["ranges"]["ratio_pg19"], t["ranges"]["ratio_random"]
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert (f"C / a is {lo:.1f} to {hi:.1f} against its PG19 slopes and {rlo:.1f} to {rhi:.1f} against its "
            f"Random ones") in readme
