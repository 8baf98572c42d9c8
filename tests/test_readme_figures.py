"""The README's measured figures are the shipped bundles' own.

The README quotes SmolLM2-135M's n50 and slopes under [A]'s protocol and Gemma-3-270M's n50 in
prose. Each figure is computed here from ``accesslib/data/bundles/`` and must appear in the README
as it is written there, so a bundle re-read with more strings (the runs go on for days) cannot
leave the README telling the older numbers."""
import math
import re
from pathlib import Path

import pytest

from accesslib.results import bundles
from accesslib.theory import bounds

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def readme():
    return re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))


def rung(rec, steps, patience):
    return next(r for r in rec["budget_ladder"]["rungs"] if (r["max_steps"], r["patience"]) == (steps, patience))


def says(text, *phrases):
    for p in phrases:
        assert p in text, f"the README no longer says {p!r}: check it against the shipped bundle"


def test_smollm2_under_the_published_protocol(readme):
    smol = bundles.load("cram", "smollm2-135m")
    recs = smol["remeasured"]
    words9, tokens9 = (next(r for r in recs if r["source"] == s and not r.get("read_from")
                            and (r["settings"]["max_steps"], r["settings"]["patience"]) == (9000, 1500))
                       for s in ("glove100k", "tokens"))
    words3, tokens3 = (next(r for r in recs if r["source"] == s and r.get("read_from")) for s in ("glove100k", "tokens"))
    w3, w9 = rung(words9, 3000, 500), rung(words9, 9000, 1500)
    t3, t9 = rung(tokens9, 3000, 500), rung(tokens9, 9000, 1500)
    says(readme, f"n50 = {w3['n50']:.1f} ± {w3['stderr']:.1f} at m = 1 with 3000 / 500 and "
                 f"{w9['n50']:.1f} ± {w9['stderr']:.1f} with 9000 / 1500",
         f"On random tokens: {t3['n50']:.1f} ± {t3['stderr']:.1f} with 3000 / 500 and "
         f"{t9['n50']:.1f} ± {t9['stderr']:.1f} with 9000 / 1500")
    ball = bounds.slope(smol["facts"]["d"], smol["facts"]["vocab_size"], 2.0 ** -11, 1.0)
    wc = {c["m"]: c for c in words3["curves"]}
    tc = {c["m"]: c for c in tokens3["curves"]}
    ws, ts = words3["slope"], tokens3["slope"]
    chk, w9s = words3["budget_check"]["ms"], words9["slope"]   # the words run's own 9000 / 1500
    assert [round(c["n50"], 1) for c in sorted(words9["curves"], key=lambda c: c["m"])] == [
        round(chk[m]["n50_3x"], 1) for m in "123"]
    says(readme, f"gives n50 = {wc[2]['n50']:.1f} ± {wc[2]['n50_stderr']:.1f} and "
                 f"{wc[3]['n50']:.1f} ± {wc[3]['n50_stderr']:.1f}: **a slope of {ws['slope']:.1f} ± "
                 f"{ws['slope_stderr']:.1f} tokens per vector over m = 1..3 under [A]'s own protocol** "
                 f"(C_ball / a = {ball / ws['slope']:.0f})",
         "9000 / 1500 gives " + ", ".join(f"{chk[m]['n50_3x']:.1f} ± {chk[m]['stderr_3x']:.1f}" for m in "12")
         + f" and {chk['3']['n50_3x']:.1f} ± {chk['3']['stderr_3x']:.1f} at m = 1, 2, 3, **a slope of "
         f"{w9s['slope']:.1f} ± {w9s['slope_stderr']:.1f}** (C_ball / a = {ball / w9s['slope']:.0f})",
         f"[A]'s protocol gives {tc[2]['n50']:.1f} ± {tc[2]['n50_stderr']:.1f} at m = 2 and "
         f"{tc[3]['n50']:.1f} ± {tc[3]['n50_stderr']:.1f} at m = 3: **a slope of {ts['slope']:.2f} ± "
         f"{ts['slope_stderr']:.1f} over m = 1..3** (C_ball / a = {ball / ts['slope']:.0f})")
    apart = (ws["slope"] - ts["slope"]) / math.hypot(ws["slope_stderr"], ts["slope_stderr"])
    says(readme, f"Words hold {ws['slope'] / ts['slope']:.1f} times as many tokens per vector as random ids "
                 f"({apart:.1f} combined standard errors apart)")
    assert {bundles.budget_status(r)[0] for r in (words9, tokens9, words3, tokens3)} == {"budget-limited"}
    says(readme, "budget-limited as well")


def test_the_random_token_slope_at_three_times_the_papers_budget(readme):
    """The tokens run's own 9000 / 1500 over m = 1..3 against [A]'s 3000 / 500 read from the same
    strings, and the patience behind the jump at m = 3 (its budget map at 9,000 steps)."""
    smol = bundles.load("cram", "smollm2-135m")
    tokens9 = next(r for r in smol["remeasured"] if r["source"] == "tokens" and not r.get("read_from")
                   and (r["settings"]["max_steps"], r["settings"]["patience"]) == (9000, 1500))
    tokens3 = next(r for r in smol["remeasured"] if r["source"] == "tokens" and r.get("read_from"))
    c9, c3 = ({c["m"]: c for c in r["curves"]} for r in (tokens9, tokens3))
    s9, s3 = tokens9["slope"], tokens3["slope"]
    assert s9["stderr_from"] == s3["stderr_from"] == "n50 stderrs"   # like with like
    ball = bounds.slope(smol["facts"]["d"], smol["facts"]["vocab_size"], 2.0 ** -11, 1.0)
    apart = (s9["slope"] - s3["slope"]) / math.hypot(s9["slope_stderr"], s3["slope_stderr"])
    says(readme, f"n50 = {c9[1]['n50']:.1f}, {c9[2]['n50']:.1f} and {c9[3]['n50']:.1f} at m = 1, 2, 3, "
                 f"**a = {s9['slope']:.1f} ± {s9['slope_stderr']:.1f}** (C_ball / a = {ball / s9['slope']:.0f}), "
                 f"{apart:.1f} combined standard errors above [A]'s 3000 / 500",
         f"The jump is at m = 3 ({c3[3]['n50']:.1f} → {c9[3]['n50']:.1f})")
    mp = next(mp for mp in smol["budget_maps"] if mp["source"] == "tokens" and mp["m"] == 3)
    row = mp["cells"][mp["steps"].index(9000)]
    at = [f"{row[mp['patiences'].index(p)]['n50']:.1f}" for p in (500, 1000, 1500)]
    says(readme, f"at 9,000 steps m = 3 gives {at[0]}, {at[1]} and {at[2]} with patience 500, 1,000 and 1,500")
    assert at[2] == f"{c9[3]['n50']:.1f}" and bundles.budget_status(tokens9)[0] == "budget-limited"


def test_gemma_under_the_published_protocol(readme):
    gemma = bundles.load("cram", "gemma-3-270m")
    (c,) = gemma["curves"]
    low = rung(gemma, 1000, 500)
    says(readme, f"n50 = {c['n50']:.1f} ± {c['n50_stderr']:.1f} at m = 1, against [A]'s slope of 22.97")
    assert bundles.own_budget_status(gemma)[0] == "inconclusive" and low["moved"] is False
    (twin,) = bundles.second_samples(gemma)                     # gemma-9k read at [A]'s 3000 / 500
    (t,) = twin["curves"]
    r = twin["budget_check"]["ms"]["1"]
    assert bundles.budget_status(gemma)[0] == "budget-limited" and r["moved"] is True
    assert sum(r["open_3x"]) == 0                                # gemma-9k has finished: every string decided
    says(readme, f"Its label reads *budget-limited*: a second run of the same {sum(t['totals'])} strings",
         f"reads [A]'s 3000 / 500 as {t['n50']:.1f} ± {t['n50_stderr']:.1f} and 9000 / 1500 as "
         f"{r['n50_3x']:.1f} ± {r['stderr_3x']:.1f} (+{r['shift']:.1f} combined standard errors)",
         "(its own check, 1000 against 3000 steps, compared the steps at one patience only)",
         f"Gemma's n50 at m = 1 is {r['n50_3x'] / 22.97:.2f} of [A]'s slope, against {c['n50'] / 22.97:.2f} at "
         "[A]'s budget")
    # the whole 9000 / 1500 run is kept beside the shipped curve, its n50 the second sample's larger budget
    (whole,) = [b for b in gemma["remeasured"] if b["settings"]["max_steps"] == 9000]
    assert whole["curves"][0]["n50"] == pytest.approx(r["n50_3x"]) and sum(whole["curves"][0]["totals"]) == 36


def test_which_knob_binds_is_the_shipped_maps(readme):
    """The README's budget-map sentence: n50 at [A]'s patience from 2,000 steps on, by patience at
    9,000 steps, and the strings [A]'s cap stopped at m = 2 and 3, from the shipped maps."""
    maps = {(mp["source"], mp["m"]): mp for mp in bundles.load("cram", "smollm2-135m")["budget_maps"]}

    def cell(mp, steps, patience):
        return mp["cells"][mp["steps"].index(steps)][mp["patiences"].index(patience)]

    w1 = maps["glove100k", 1]
    assert w1["settled"][w1["patiences"].index(500)] == 2000
    says(readme, f"n50 on its words is {cell(w1, 2000, 500)['n50']:.1f} from 2,000 steps up to 9,000",
         "at 9,000 steps it grows with the patience ("
         + ", ".join(f"{cell(w1, 9000, p)['n50']:.1f}" for p in (100, 500)) + f" and {cell(w1, 9000, 1500)['n50']:.1f} "
         "at 100, 500 and 1,500)")
    cuts = [cell(maps["glove100k", m], 3000, 500) for m in (2, 3)]
    assert [c["cut_unknown"] for c in cuts] == [0, 0] and {sum(maps["glove100k", m]["totals"]) for m in (2, 3)} == {30}
    says(readme, f"[A]'s 3000-step cap stops {cuts[0]['cut']} and {cuts[1]['cut']} of the 30 word strings")
    # yet at patience 500 more steps cram none of them, except words at m = 3
    same = {k: cell(mp, 3000, 500)["successes"] == cell(mp, 9000, 500)["successes"] for k, mp in maps.items()}
    assert same == {("glove100k", 1): True, ("glove100k", 2): True, ("glove100k", 3): False,
                    ("tokens", 1): True, ("tokens", 2): True, ("tokens", 3): True}
    w3, a3 = cell(maps["glove100k", 3], 9000, 500), cell(maps["glove100k", 3], 3000, 500)
    shift = (w3["n50"] - a3["n50"]) / math.hypot(w3["stderr"], a3["stderr"])
    assert sum(w3["successes"]) - sum(a3["successes"]) == 1 and abs(shift) < 1       # within the error
    says(readme, "9000 steps cram none of them at m = 2: n50 stays "
                 f"{cell(maps['glove100k', 2], 9000, 500)['n50']:.1f} up to 9,000 steps (random tokens: "
                 f"{cell(maps['tokens', 2], 9000, 500)['n50']:.1f} and {cell(maps['tokens', 3], 9000, 500)['n50']:.1f} "
                 f"at m = 2 and 3 stay put too), and only words at m = 3 gain a string ({w3['n50']:.1f} ± "
                 f"{w3['stderr']:.1f} against {a3['n50']:.1f} ± {a3['stderr']:.1f}, {shift:+.1f} combined standard "
                 "errors). So at [A]'s patience three times its steps move no n50 by its standard error: the patience "
                 "binds, not the steps")


def test_every_embedded_model_is_converged_and_d128s_ladder(readme):
    from accesslib.models import embedded

    names = embedded.names()
    assert all(bundles.budget_status(bundles.load("cram", n))[0] == "converged" for n in names)
    assert len(names) == 6 and len(embedded.names("mamba")) == 1
    says(readme, "the six embedded models (five transformers and a Mamba twin)",
         "Every embedded model's is *converged*")
    d128 = bundles.load("cram", "tiny-d128-v257")
    assert d128["settings"]["max_steps"] == 3000 and d128["settings"]["patience"] == 600
    lad = {r["max_steps"]: r for r in d128["budget_ladder"]["rungs"]}
    assert d128["budget_ladder"]["m"] == 4 and d128["budget_ladder"]["converged_at"] == 3000
    assert lad[1000]["moved"] is True and lad[3000]["moved"] is False
    says(readme, f"n50 at m = 4 is {lad[1000]['n50']:.1f} ± {lad[1000]['stderr']:.1f} with 1000 steps, "
                 f"{lad[3000]['n50']:.1f} ± {lad[3000]['stderr']:.1f} with 3000 and "
                 f"{lad[9000]['n50']:.1f} ± {lad[9000]['stderr']:.1f} with 9000")
