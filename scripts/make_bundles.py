"""Produce the precomputed cramming bundles (accesslib/data/bundles/cram-*.json) and the tables.

With the project's own engine: for each model, accessibility curves for every m (the default
length search), their n50 fits, the slope fit, and the model's measured geometry (support and
decoder cells) for the refined bounds. Strings go to a results store as they finish, so an
interrupted run resumes where it stopped. Then docs/cramming-results.md is rewritten from all
bundles (``--table-only`` does just that).

    python scripts/make_bundles.py                         # every embedded model, m = 1..4
    python scripts/make_bundles.py --models tiny-d32-v257 --m 1 2 3 4 --samples 16
    python scripts/make_bundles.py --fast --out /tmp/b     # a small subset, for tests
    python scripts/make_bundles.py --geometry-only         # re-measure only the geometry
    python scripts/make_bundles.py --models smollm2-135m --m 1 2 --source tokens \
        --search grid --lengths 16 24 32 --geometry-file g.json   # geometry measured before
    python scripts/make_bundles.py --radius                # the twins' radius against context length
    python scripts/make_bundles.py --models tiny-d32-v257 --with-budget-check   # bundle + its budget check
    python scripts/make_bundles.py --add-budget-check tiny-d32-v257 \
        --store scratch/budget-tiny-d32-v257.sqlite   # n50 at m = 1 and the largest m with 3x the budget
    python scripts/make_bundles.py --add-budget-ladder smollm2-135m --ladder 500/100 1500/300 4500/900 \
        --ladder-lengths 10 13 16 20 --store s.sqlite   # n50 at m = 1 by step budget: where it settles
    python scripts/make_bundles.py --add-budget-ladder gemma-3-270m --ladder 1000/500 \
        --store gemma.sqlite   # [A]'s protocol: a smaller budget read from the bundle's own strings
    python scripts/make_bundles.py --add-remeasure benchmarks/runs/bundles/smol-glove-9k \
        # another run of a shipped model (its bundle's folder): kept in the shipped bundle
    python scripts/make_bundles.py ... --protocol paper --max-steps 27000 --patience 4500 \
        --extend-from 9000/1500 --store s.sqlite   # goes on from where the 9000 / 1500 run left each string
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _one_m(b) -> str:
    """The slope column of a bundle measured at fewer than two m: what it has instead."""
    from accesslib.results import bundles

    one = bundles.single_point(b)
    return f"one m (n50 = {one[1]:.1f} ± {one[2]:.1f} at m = {one[0]})" if one else "no n50 to fit"


def table_markdown(directory=None) -> str:
    """Markdown tables from the bundles in ``directory``: n50 per m, then the family slopes."""
    from accesslib.models import embedded
    from accesslib.results import bundles

    names = bundles.available("cram") if directory is None else [
        __import__("json").loads(p.read_text())["model"] for p in sorted(Path(directory).glob("cram-*.json"))]
    lines = ["# Cramming results measured by this project", "",
             "Produced by `python scripts/make_bundles.py` (do not edit by hand); every number below",
             "comes from the bundles in `accesslib/data/bundles/`.", "",
             "## The embedded models (training records)", "",
             "From each model's `training.json` (`accesslib.models.embedded.training_table()`).", "",
             embedded.training_table([n for n in names if n in embedded.names()]), "",
             "## n50 by m (logistic fit, ± stderr)", "",
             "Targets: natural = held-out KJV text, tokens = uniform random token ids.", "",
             "| model | d | V | targets | m | lengths measured | strings | n50 | wall time (s) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        b = bundles.load("cram", name, directory)
        for c in b["curves"]:
            n50 = f"{c['n50']:.1f} ± {c['n50_stderr']:.1f}" if c["n50"] is not None and c["n50_stderr"] is not None \
                else (f"{c['n50']:.1f}" if c["n50"] is not None else c["fit_message"])
            lines.append(f"| {name} | {b['facts']['d']} | {b['facts']['vocab_size']} | {b['source']} | {c['m']} | "
                         f"{len(c['lengths'])} | {sum(c['totals'])} | {n50} | {_wall(c)} |")
    lines += ["", "## Slope n50 = a*m + b and the theory/experiment ratio", "",
              "C_ball = d ln(1 + 2r/eps)/ln|V| with eps = r_inf * 2^-11 ([A]'s choice); C_box from the",
              "measured per-coordinate extents; ratios are C/a.", "",
              "| model | d | V | a (tokens/vector) | R^2 | C_ball | C_ball/a | C_box | C_box/a | settings | hardware | wall time (s) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ball = {r["model"]: r for r in bundles.family_table(names, bound="ball")} if directory is None else {}
    box = {r["model"]: r for r in bundles.family_table(names, bound="box")} if directory is None else {}
    for name in names:
        b = bundles.load("cram", name, directory)
        sl = b.get("slope") or {}
        rb, rx = ball.get(name, {}), box.get(name, {})
        fmt = lambda v, f=".1f": format(v, f) if isinstance(v, (int, float)) else "-"  # noqa: E731
        st = b["settings"]
        lines.append(
            f"| {name} | {b['facts']['d']} | {b['facts']['vocab_size']} | "
            + (f"{fmt(sl.get('slope'), '.2f')} ± {fmt(sl.get('slope_stderr'), '.2f')} | {fmt(sl.get('r2'), '.3f')} | "
               if sl.get("slope") else f"none: {_one_m(b)} | - | ") +
            f"{fmt(rb.get('C'))} | {fmt(rb.get('ratio'))} | {fmt(rx.get('C'))} | {fmt(rx.get('ratio'))} | "
            f"{b['source']}, {b['protocol']}, {b['samples']} strings/length, max_steps {st.get('max_steps')}"
            f"{', after BOS' if st.get('prefix_ids') else ''} | "
            f"{b['hardware'].get('cpu', '?')} ({b['hardware'].get('cores')} cores) | {_wall(b)} |")
    lines += refined_table(names, directory)
    lines += budget_table(names, directory)
    lines += remeasured_table(names, directory)
    lines += sources_table(names, directory)
    lines += beyond_table(directory)
    return "\n".join(lines) + "\n"


def remeasured_table(names, directory=None) -> list[str]:
    """The shipped models measured again by other runs (a bundle's ``remeasured``): n50 by m at each
    run's budget, and by step budget at its ladder's m; [] when no bundle has one."""
    from accesslib.results import bundles

    rows = []
    for name in names:
        for rec in bundles.load("cram", name, directory).get("remeasured") or []:
            label = bundles.budget_status(rec)[0]
            where = f"{rec.get('source')}, {rec.get('protocol')}, {rec.get('samples')} strings/length"
            for m, r, words in bundles.remeasure_rungs(rec):
                read = f" (read from the {r['derived_from']:,}-step run)" if r.get("derived_from") else ""
                rows.append(f"| {name} | {where} | {m} | {words}{read} | {bundles.rung_n50_text(r)} | {label} | "
                            f"{rec.get('origin')} |")
    if not rows:
        return []
    return ["", "## Re-measured: other runs of a shipped model", "",
            "Kept in the model's bundle (`make_bundles.py --add-remeasure`) and drawn in notebook 03; the label",
            "is the run's own budget check.", "",
            "| model | targets, protocol, strings | m | steps / patience | n50 | step budget | run bundle |",
            "|---|---|---|---|---|---|---|"] + rows


def beyond_table(directory=None) -> list[str]:
    """Notebook 09's comparison: the twins' slopes, R^2, C/a, budget checks, and the radius of
    the hidden states against context length (from the cram and radius bundles)."""
    from accesslib.experiments import beyond
    from accesslib.results import bundles

    if directory is not None:
        return []
    rows = beyond.twin_rows()
    have = [n for n in beyond.TWINS.values() if n in bundles.available("radius")]
    if not rows and not have:
        return []
    fmt = lambda v, f: format(v, f) if isinstance(v, (int, float)) else "-"  # noqa: E731
    out = ["", "## Beyond transformers: the Mamba twin (notebook 09)", "",
           "tiny-d64-v257 (GPT-NeoX) and tiny-mamba-d64-v257 (Mamba) share corpus, tokenizer, context,",
           "batch, step budget and seed. C = C_ball with eps = r_inf * 2^-11.", "",
           "| model | family | n50 (m = 1, 2, 3, 4) | a (tokens/vector) | R^2 | C_ball | C_ball/a |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        n50 = ", ".join(fmt(r["n50"].get(m), ".1f") for m in sorted(r["n50"]))
        out.append(f"| {r['model']} | {r['family']} | {n50} | {fmt(r['slope'], '.2f')} ± "
                   f"{fmt(r['slope_stderr'], '.2f')} | {fmt(r['r2'], '.3f')} | {fmt(r['C'], '.1f')} | "
                   f"{fmt(r['ratio'], '.1f')} |")
    out += ["", "Budget checks (3 times the step budget at m = 1 and 4): see the budget-check table above."]
    verdicts = {n: beyond.divergence_verdict(bundles.load("radius", n), "tokens") for n in have}
    said = beyond.conclusion(rows, verdicts)
    if said:
        out += ["", f"**What the comparison shows.** {said}"]
    if have:
        out += ["", "Radius of the hidden states at the last position against context length L (max over the",
                "samples; the transformer was trained on 64-token windows, longer inputs extrapolate its rotary",
                "positions). final: the input of the unembedding (what the bound counts); residual: the input",
                "of the final norm; ssm: Mamba's recurrent state (max-abs). k: growth exponent, r ~ L^k.", ""]
        for name in have:
            b = bundles.load("radius", name)
            for c in b["curves"]:
                v = beyond.divergence_verdict(b, c["source"])
                what = {"tokens": "uniform random tokens", "natural": "held-out text"}.get(c["source"], c["source"])
                out += [f"**{name}**, inputs: {what}, {c['per_length']} per length "
                        f"(cap of the final norm: r_inf {c['cap']['r_inf']:.1f}, r_2 {c['cap']['r_2']:.1f}):", "",
                        "| L | " + " | ".join(str(L) for L in c["lengths"]) + " | k |",
                        "|---|" + "---|" * (len(c["lengths"]) + 1)]
                for key in ("final_inf", "final_2", "residual_inf", "residual_2", "ssm_inf"):
                    if key in c["max"]:
                        out.append(f"| {key} | " + " | ".join(f"{x:.3g}" for x in c["max"][key])
                                   + f" | {fmt(v[key]['exponent'], '+.2f')} |")
                out.append("")
    return out


def budget_table(names, directory=None) -> list[str]:
    """Each bundle's budget check (accesslib.experiments.bundling.budget_check): n50 at the bundle's
    step budget and at the larger one (3x by default), at m = 1 and the largest m, and the verdict of
    bundles.budget_status; a note where the check measured other lengths than the bundle."""
    from accesslib.results import bundles

    fmt = lambda v, f=".1f": format(v, f) if isinstance(v, (int, float)) else "-"  # noqa: E731
    out = ["", "## Budget convergence: does a larger step budget move n50?", "",
           "n50 re-measured (same strings, length search and settings) with a larger step budget and",
           "patience: 3 times unless the steps columns say otherwise (`scripts/make_bundles.py",
           "--add-budget-check MODEL`; `--budget-max-steps`, `--budget-lengths` for a budget and lengths of",
           "its own, notes below the table). *Moved*: the two n50 differ by more than their combined standard",
           "error; a bundle where n50 moved is **budget-limited**: its n50 measure the step budget as well",
           "as the model.", "",
           "| model | status | m | steps, patience | n50 | steps, patience | n50 | moved (stderr) | strings | "
           "wall time (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for name in names:
        b = bundles.load("cram", name, directory)
        label, text = bundles.budget_status(b)
        chk = b.get("budget_check")
        # its own check, then those of its second samples (the same strings, protocol and budget run
        # again, checked against a larger budget read from their own strings)
        checks = ([(chk, name)] if chk else []) + [
            (t["budget_check"], f"{name}, second run ({t.get('origin') or 'another run'})")
            for t in bundles.second_samples(b) if t.get("budget_check")]
        if not checks:
            out.append(f"| {name} | {label} | - | - | - | - | - | - | - | - |")
            if b.get("budget_ladder"):   # checked by its ladder only (below): say how far that goes
                said = text.split(". n50 at")[0]
                notes.append(f"- {name}: no check with a larger step budget *and* patience; {said[:1].lower()}{said[1:]}"
                             " (its budget ladder, below).")
            continue
        own = {int(c["m"]): c["lengths"] for c in b["curves"]}
        for chk, whose in checks:
            st = chk["settings"]
            for m, r in sorted(chk["ms"].items(), key=lambda kv: int(kv[0])):
                wall = fmt(chk["wall_time"], ".0f")
                if chk.get("read_from_run"):
                    wall += " (both budgets read from one run's strings)"
                elif r.get("strings_from_store") and not r.get("strings_crammed"):
                    wall += " (all from the store: an earlier run crammed them)"
                larger = ((r.get("n50_3x") is None and bundles.open_n50_text(r))
                          or f"{fmt(r.get('n50_3x'))} ± {fmt(r.get('stderr_3x'))}")
                out.append(f"| {whose} | {label} | {m} | {st['max_steps'][0]}, {st['patience'][0]} | "
                           f"{fmt(r['n50'])} ± {fmt(r['stderr'])} | {st['max_steps'][1]}, {st['patience'][1]} | "
                           f"{larger} | {'-' if r['moved'] is None else ('yes' if r['moved'] else 'no')} "
                           f"({fmt(r['shift'], '+.1f')}) | {sum(r['totals_3x'])} | {wall} |")
                if st.get("search") == "grid" and list(r.get("lengths_3x") or []) != list(own.get(int(m)) or []):
                    notes.append(f"- {name}, m = {m}: the larger budget was measured at n = "
                                 f"{', '.join(map(str, r['lengths_3x']))} (the bundle's lengths: "
                                 f"{', '.join(map(str, own.get(int(m)) or []))}).")
    if notes:
        out += [""] + notes
    ladders = [(name, b["budget_ladder"]) for name in names
               if (b := bundles.load("cram", name, directory)).get("budget_ladder")]
    if ladders:
        out += ["", "### Budget ladders: n50 by step budget", "",
                "The same curve (same strings) measured at several step budgets (`scripts/make_bundles.py",
                "--add-budget-ladder MODEL --ladder STEPS/PATIENCE ...`): where does n50 stop moving? Each budget",
                "is compared with the first one that has at least 3 times its steps (*moved*: by more than the",
                "combined standard error; the shift in those units). Where every string crammed at a budget's",
                "longest length, its n50 is only known to lie beyond it (> n): moved *at least* so far. Under",
                "a protocol without a schedule ([A]'s), a smaller budget is read from the steps the bundle's",
                "own strings took (a smaller patience on accuracy from when their best accuracy rose): a",
                "smaller run is a prefix of the larger one.", "",
                "| model | m | steps, patience | lengths | crammed / strings per length | n50 | against | moved (stderr) |",
                "|---|---|---|---|---|---|---|---|"]
        summaries = []
        for name, lad in ladders:
            for r in lad["rungs"]:
                counts = ", ".join(f"{s}/{t}" for s, t in zip(r["successes"], r["totals"]))
                against = "-" if r.get("compared_with") is None else f"{r['compared_with']:,} steps"
                note = " (shipped)" if r.get("shipped") else bundles.rung_source(r)
                out.append(f"| {name} | {lad['m']} | {r['max_steps']:,}, {r['patience']:,}{note}"
                           f" | {', '.join(map(str, r['lengths']))} | "
                           f"{counts} | {bundles.rung_n50_text(r)} | {against} | {bundles.rung_shift_text(r)} |")
            summaries.append(f"- {name}: {bundles.ladder_text({'budget_ladder': lad})}")
        out += [""] + summaries   # below the table: a line inside it would cut it in two
    return out


#: real models in the target-cost table even without a cramming bundle: [A]'s own Gemma-3-270M
REAL_COST_MODELS = ("gemma-3-270m",)


def sources_table(names, directory=None, *, n: int = 32, B: int = 64) -> list[str]:
    """How hard each target source is: mean cost in nats per token of B targets of n tokens under
    each embedded model that has a bundle (teacher-forced cross-entropy after BOS,
    accesslib.engine.difficulty.cost_table)."""
    if directory is not None:
        return []
    from accesslib.engine import difficulty
    from accesslib.engine.targets import SOURCE_LABELS, SOURCES
    from accesslib.models import embedded
    from accesslib.models.loading import load_model

    # the embedded models with a bundle, then the real models with a bundle and [A]'s Gemma-3-270M
    # where their weights are on this machine (GGUF packages; loaded one at a time)
    models, rows, skipped, tokens_per_word = [], [], [], {}
    embedded_ones = [m for m in embedded.names() if m in names]
    for name in embedded_ones + [m for m in names if m not in embedded_ones] + \
            [m for m in REAL_COST_MODELS if m not in names]:
        try:
            lm = load_model(name)
        except (OSError, ValueError, ImportError, RuntimeError) as err:
            skipped.append(f"{name} ({str(err).splitlines()[0][:80]})")
            continue
        rows += [dict(r, model=name) for r in difficulty.cost_table([lm], SOURCES, n=n, B=B)]
        if lm.tokenizer is not None:
            tokens_per_word[name] = tuple(difficulty.tokens_per_word(lm.tokenizer, s)
                                          for s in ("words", "words100k", "glove100k"))
        models.append(name)
        del lm
    if not models:
        return []
    out = ["", "## Target sources: how hard a target is", "",
           "Mean cost of a target under the model, in nats per token: the teacher-forced cross-entropy of",
           f"its {n} tokens after BOS, over {B} strings (± standard error; seed 0), measured by",
           "`accesslib.engine.difficulty.cost_table`. A memory must supply what the model does not already",
           "expect, so a source that costs more nats per token is a harder target. ln|V| is the cost of a",
           "uniform guess; a trained model can pay far more for uniform random tokens, because it has learned",
           "to expect almost none of the tokens its training text never had. Sources:", ""]
    out += [f"- {s}: {SOURCE_LABELS[s]}" for s in SOURCES]
    out += ["", "glove100k is the paper's \"Random\" protocol exactly: [A]'s own list (the 100,000 most frequent",
            "entries of GloVe 6B's vocabulary, punctuation and numbers included; `accesslib/data/glove100k.LICENSE.txt`).",
            "words100k is a dictionary list of about that size (115,162 words from SCOWL size 70,",
            "`accesslib/data/words100k.LICENSE.txt`);",
            "words is the smaller list of 10,901 common words. Tokens per word: the mean number of tokens",
            "of a word of each list inside a target (2000 words, `difficulty.tokens_per_word`). Per token, the",
            "common words can cost more than the 100k list: a common word is mostly one token, each a fresh",
            "draw from the list, while a rare word is split into several tokens, the later ones predictable",
            "from the first. Per word (nats per token x tokens per word) the 100k list is the harder one.", "",
            "| model | ln\\|V\\| | " + " | ".join(SOURCES) + " | tokens per word (words, words100k, glove100k) |",
            "|---|---|" + "---|" * len(SOURCES) + "---|"]
    for name in models:
        r = {row["source"]: row for row in rows if row["model"] == name}
        tpw = tokens_per_word.get(name)
        out.append(f"| {name} | {r[SOURCES[0]]['ln_vocab']:.2f} | "
                   + " | ".join(f"{r[s]['nats_per_token']:.2f} ± {r[s]['stderr']:.2f}" for s in SOURCES)
                   + (" | " + ", ".join(f"{v:.2f}" for v in tpw) + " |" if tpw else " | - |"))
    if skipped:
        out += ["", "Not on this machine, so not in the table: " + "; ".join(skipped) + "."]
    return out


def _add_budget_check(a, command):
    """--add-budget-check: a budget check for shipped bundles, nothing else re-measured."""
    from accesslib.experiments import bundling
    from accesslib.models.loading import load_model
    from accesslib.results import bundles
    from accesslib.results.store import ResultsStore

    store = ResultsStore(a.store) if a.store else ResultsStore()
    from accesslib.experiments.beyond import fast_mamba_scan
    fast_mamba_scan()   # Mamba only: same arithmetic as transformers' torch scan, O(L) backward
    for name in a.add_budget_check:
        b = bundles.load("cram", name, a.out)
        chk = bundling.budget_check(load_model(name), b, a.budget_factor, a.budget_ms, store=store, progress=True,
                                    command=command, max_steps=a.budget_max_steps, patience=a.budget_patience,
                                    lengths=a.budget_lengths)
        b = bundles.load("cram", name, a.out)   # re-read: keep what another step wrote meanwhile
        b["budget_check"] = chk
        path = bundles.save(b, a.out)
        label, text = bundles.budget_status(b)
        print(f"{name}: {text} ({chk['wall_time']:.0f} s) -> {path}", flush=True)


def _add_budget_ladder(a, command):
    """--add-budget-ladder: n50 at --ladder-m by step budget for shipped bundles (the strings of each
    budget from --store where an earlier run left them), nothing else re-measured."""
    from accesslib.experiments import bundling
    from accesslib.results import bundles
    from accesslib.results.store import ResultsStore

    store = ResultsStore(a.store) if a.store else ResultsStore()
    for name in a.add_budget_ladder:
        b = bundles.load("cram", name, a.out)
        # the model is loaded by name only where a rung crams (smaller budgets of a schedule-free
        # protocol are read from the bundle's own strings)
        lad = bundling.budget_ladder(name, b, a.ladder, a.ladder_m, lengths=a.ladder_lengths,
                                     store=store, progress=True, command=command)
        b = bundles.load("cram", name, a.out)   # re-read: keep what another step wrote meanwhile
        b["budget_ladder"] = lad
        path = bundles.save(b, a.out)
        print(f"{name}: {bundles.ladder_text(b)} ({lad['wall_time']:.0f} s) -> {path}", flush=True)


def given_flags(argv) -> set[str]:
    """The options written on the command line ``argv`` ("--source" of "--source=x" too): where an
    option's default must not count as chosen (--source picks a run only when given)."""
    return {x.split("=")[0] for x in argv if x.startswith("--")}


def _add_budget_map(a, p, command, argv):
    """--add-budget-map: n50 over step budgets x patiences read from a run in --store (also one
    still going), kept in the model's shipped bundle; nothing crammed."""
    from datetime import datetime, timezone

    from accesslib.experiments import bundling
    from accesslib.results import bundles

    if not a.store or not Path(a.store).is_file():
        p.error(f"--add-budget-map needs --store, the run's results store; got {a.store or 'none'}")
    if not a.map_steps or not a.map_patience:
        p.error("--add-budget-map needs --map-steps and --map-patience (e.g. --map-steps 500 1000 2000 3000 "
                "--map-patience 100 250 500)")
    filters = {"source": a.source} if "--source" in given_flags(argv) else {}
    for name in a.add_budget_map:
        try:
            got = bundling.budget_map(a.store, a.map_steps, a.map_patience, model=name, **filters)
        except ValueError as e:
            raise SystemExit(f"--add-budget-map: {e}") from None
        if not got["maps"]:
            raise SystemExit(f"--add-budget-map: {a.store} holds no run of {name}"
                             + (f" on {a.source}" if filters else "") + " with protocol settings")
        got["maps"] = _maps_of_one_run(got["maps"], a, p, name)
        b = bundles.load("cram", name, a.out)
        when = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for mp in got["maps"]:
            bundles.add_budget_map(b, dict(mp, created=when, command=command))
        path = bundles.save(b, a.out)
        for mp in got["maps"]:
            print(f"{name}, m = {mp['m']}, {mp['source']} ({mp['run'][0]:,} / {mp['run'][1]:,}, "
                  f"{mp['finished']} finished, {mp['kept']} open): " + "; ".join(bundles.budget_map_lines(mp)),
                  flush=True)
        print(f"-> {path}", flush=True)


def _maps_of_one_run(maps, a, p, name):
    """The maps of the run --read-from names, or of the store's only run per source: a run still
    going beside a finished one (a larger budget extending its strings) holds only the strings it
    has reached, and its map must not pass for the finished run's."""
    runs = sorted({(mp["source"], tuple(mp["run"])) for mp in maps})
    if a.read_from:
        want = parse_budget(a.read_from, "--read-from", p.error, "9000/1500")
        kept = [mp for mp in maps if tuple(mp["run"]) == want]
        if not kept:
            raise SystemExit(f"--add-budget-map: {a.store} holds no run of {name} at {want[0]:,} / {want[1]:,} "
                             f"(--read-from); it holds " + ", ".join(f"{s}, {r[0]:,} / {r[1]:,}" for s, r in runs))
        return kept
    sources = [s for s, _ in runs]
    several = sorted({s for s in sources if sources.count(s) > 1})
    if several:
        raise SystemExit(f"--add-budget-map: {a.store} holds several runs of {name} on {', '.join(several)} ("
                         + ", ".join(f"{r[0]:,} / {r[1]:,}" for s, r in runs if s in several)
                         + "); name one by its own budget: --read-from STEPS/PATIENCE")
    return maps


def _add_remeasure(a):
    """--add-remeasure: each folder's cramming bundle (another run of a model that has a shipped
    bundle: another protocol, targets or budget) kept in that shipped bundle, nothing measured."""
    from accesslib.results import bundles

    for folder in a.add_remeasure:
        runs = sorted(Path(folder).glob("cram-*.json"))
        if len(runs) != 1:
            raise SystemExit(f"--add-remeasure: {folder} must hold one cramming bundle (cram-MODEL.json); "
                             f"it holds {len(runs)}")
        run = json.loads(runs[0].read_text())
        b = bundles.load("cram", run["model"], a.out)
        try:
            origin = Path(folder).resolve().relative_to(ROOT).as_posix()
        except ValueError:
            origin = str(Path(folder).resolve())
        rec = bundles.add_remeasure(b, run, origin)
        path = bundles.save(b, a.out)
        print(f"{run['model']}: re-measured under the {rec.get('protocol')} protocol, {rec.get('source')} "
              f"({bundles.budget_status(rec)[0]}) from {origin} -> {path}", flush=True)


def _read_budget(a, p, command, argv):
    """--read-budget: a bundle at a smaller budget read from a larger run's strings in --store."""
    from accesslib.experiments import bundling
    from accesslib.results import bundles

    budget = parse_budget(a.read_budget, "--read-budget", p.error, "3000/500")
    if not a.models or len(a.models) != 1:
        p.error(f"--read-budget needs one model (--models NAME); got {a.models or 'none'}")
    if not a.store or not a.out:
        p.error("--read-budget needs --store (the larger run's) and --out (a folder for the bundle, e.g. "
                "benchmarks/runs/bundles/NAME-3000): the shipped bundles are not written over")
    if not Path(a.store).is_file():
        p.error(f"--read-budget: no results store at {a.store}")
    given = given_flags(argv)
    try:
        b = bundling.read_budget_bundle(a.store, a.models[0], *budget,
                                        source=a.source if "--source" in given else None,
                                        run_budget=parse_budget(a.read_from, "--read-from", p.error, "9000/1500")
                                        if a.read_from else None,
                                        ms=a.m if "--m" in given else None, command=command)
    except ValueError as e:
        raise SystemExit(f"--read-budget: {e}") from None
    path = bundles.save(b, a.out)
    sl = b["slope"] or {}
    n50s = ", ".join(f"m={c['m']}: {bundles.rung_n50_text(dict(c, stderr=c['n50_stderr']))}" for c in b["curves"])
    print(f"{b['model']} at {bundles.budget_words(*budget)} (read from the {b['read_from']['max_steps']:,} / "
          f"{b['read_from']['patience']:,} run, {b['source']}): {n50s}"
          + (f"; slope {sl['slope']:.2f}" if sl.get("slope") is not None else "")
          + f"; {bundles.budget_status(b)[0]} -> {path}", flush=True)


def parse_budget(text, flag, error, example):
    """``9000/1500`` -> (9000, 1500); ``error`` (argparse's) names ``flag`` otherwise."""
    parts = text.split("/")
    if len(parts) != 2 or not all(x.isdigit() and int(x) >= 1 for x in parts):
        error(f"{flag}: expected STEPS/PATIENCE, whole numbers >= 1 (e.g. {example}); got {text}")
    return int(parts[0]), int(parts[1])


def parse_budgets(items, error):
    """``500/100 4500/900:10,16,24`` -> [(500, 100), (4500, 900, [10, 16, 24])] (max_steps/patience,
    and the lengths of that budget after a colon)."""
    out = []
    try:
        for item in items:
            budget, _, lengths = item.partition(":")
            b = tuple(int(x) for x in budget.split("/"))
            if len(b) != 2 or min(b) < 1:
                raise ValueError
            n = [int(x) for x in lengths.split(",")] if lengths else None
            if n is not None and min(n) < 1:
                raise ValueError
            out.append(b if n is None else (*b, n))
    except ValueError:
        out = []
    if not out:
        error(f"--ladder: expected STEPS/PATIENCE pairs of whole numbers >= 1, e.g. 1500/300 (or "
              f"1500/300:10,16,24 with lengths of its own); got {' '.join(items)}")
    return out


def _wall(rec) -> str:
    """Wall time of the run that wrote a curve or bundle, naming the curves whose strings were
    all taken from the results store (crammed by an earlier run, so their time is not in it)."""
    curves = rec.get("curves", [rec])
    old = [c for c in curves if c.get("strings_from_store") and not c.get("strings_crammed")]
    if not old:
        return f"{rec['wall_time']:.0f}"
    if "curves" not in rec:
        return f"{rec['wall_time']:.0f} ({rec['strings_from_store']} strings from an earlier run's store)"
    ms = ", ".join(str(c["m"]) for c in old)
    return f"{rec['wall_time']:.0f} (m = {ms} from an earlier run's store)"


def refined_table(names, directory=None) -> list[str]:
    """Every refined slope of each bundle's geometry record and its ratio to the measured a."""
    from accesslib.results import bundles

    kinds = ("ball", "box", "cone", "ellipsoid", "cells", "box+cells")
    out = ["", "## Geometry: every refined slope and the theory/experiment ratio", "",
           "From each bundle's geometry record (`accesslib.engine.geometry.geometry_report`, eps = r_inf * 2^-11).",
           "s_conv: shares at their 95% upper confidence bounds (the cells bound stays an upper bound)",
           "and, in brackets, [A]'s rule (never-hit tokens dropped). Effective eps: median over random",
           "directions of the smallest relative move of a memory vector that changes the greedy output.",
           "N/2 → N: how much s_conv (95% rule) moved when the cell samples doubled",
           "(`accesslib.theory.stats.sconv_convergence`); while it still moves, |s_conv| is underestimated and",
           "C_cells is an upper bound that more samples would lower.", "",
           "| model | support samples | r_inf | min cos | cell samples N | never hit | s_conv [A's] | N/2 → N | "
           "ln\\|V\\| | effective eps | a | " + " | ".join(f"C_{k} (C/a)" for k in kinds) + " |",
           "|" + "---|" * (11 + len(kinds))]
    for name in names:
        b = bundles.load("cram", name, directory)
        g = b.get("geometry") or {}
        if not g:
            continue
        a = (b.get("slope") or {}).get("slope")
        fmt = lambda v, f: format(v, f) if isinstance(v, (int, float)) else "-"  # noqa: E731
        cells = (f"{fmt(g.get('s_conv'), '.2f')} [{fmt(g.get('s_conv_drop'), '.2f')}]"
                 if g.get("s_conv") is not None else "-")
        conv = g.get("s_conv_convergence") or []
        moved = f"{conv[-1]['s_conv'] - conv[-2]['s_conv']:+.2f}" if len(conv) > 1 else "-"
        eff = (g.get("effective_eps") or {}).get("median")
        cs = []
        for k in kinds:
            C = (g.get("slopes") or {}).get(k)
            cs.append(f"{fmt(C, '.1f')} ({fmt(C / a, '.1f')})" if C and a else fmt(C, ".1f"))
        import math
        out.append(f"| {name} | {g.get('n_samples', '-')} | {fmt(g.get('r_inf'), '.3g')} | "
                   f"{fmt(g.get('min_cos'), '.3f')} | {fmt(g.get('cells_n_samples'), ',')} | "
                   f"{fmt(g.get('zero_hit_tokens'), ',')} | {cells} | {moved} | "
                   f"{math.log(b['facts']['vocab_size']):.2f} | {fmt(eff, '.3g')} | {fmt(a, '.2f')} | "
                   + " | ".join(cs) + " |")
    return out


def parse_lengths(items, ms, error):
    """``16 24 32`` (every m) or ``1:16,24 2:40,56`` (per m) -> {m: [n, ...]}."""
    try:
        if all(":" in x for x in items):
            out = {int(k): [int(n) for n in v.split(",")] for k, v in (x.split(":", 1) for x in items)}
        else:
            out = {m: [int(n) for n in items] for m in ms}
    except ValueError:
        error(f"--lengths: expected whole numbers or M:N1,N2,...; got {' '.join(items)}")
    missing = [m for m in ms if m not in out]
    if missing or any(n < 1 for v in out.values() for n in v):
        error(f"--lengths: need lengths >= 1 for every m; missing m = {missing}")
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (also read by the tests of benchmarks/runs/runs.sh)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="*", default=None, help="default: every embedded model")
    p.add_argument("--m", nargs="+", type=int, default=[1, 2, 3, 4])
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--source", default="natural", choices=["natural", "words", "words100k", "glove100k", "tokens"])
    p.add_argument("--protocol", default="fast", choices=["fast", "paper"])
    p.add_argument("--search", default="bisect", choices=["bisect", "paper", "grid"])
    p.add_argument("--lengths", nargs="+", default=None,
                   help="search=grid: these lengths for every m, or M:N1,N2,... per m (1:16,24 2:40,56)")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--patience", type=int, default=None)
    p.add_argument("--lr", type=float, default=None, help="override the protocol's learning rate")
    p.add_argument("--keep-final", action="store_true",
                   help="keep, in --store, the state each string finished in (a few KB per string and "
                        "memory vector), so that a later run with a larger budget can --extend-from it")
    p.add_argument("--extend-from", default=None, metavar="STEPS/PATIENCE",
                   help="the strings a run with this smaller budget (same settings otherwise; a constant "
                        "learning rate: --protocol paper) finished in --store go on from where it left "
                        "them: the result of this budget from the start, for the steps beyond")
    p.add_argument("--hold-at", default=None, metavar="STEPS/PATIENCE",
                   help="a budget below this run's (a constant learning rate: --protocol paper): cram each "
                        "string only until its outcome within it is known, and set the ones it would have "
                        "ended uncrammed aside in --store as they are (no bundle then): that budget is decided "
                        "hours sooner (accesslib store ladder, --read-budget); the same command without it "
                        "goes on from them")
    p.add_argument("--bos", action="store_true",
                   help="put the model's BOS token before the memory (real models: attention sink)")
    p.add_argument("--add-special-tokens", action="store_true",
                   help="start each target with the tokenizer's special tokens (BOS) after the memory, "
                        "counted in n: the layout of [A]'s code")
    p.add_argument("--precision", type=float, default=None,
                   help="bisect search: target relative stderr of n50 (default 0.02)")
    p.add_argument("--store", default=None, help="results store (default: the user's store)")
    p.add_argument("--out", default=None, help="bundle directory (default: the package's data/bundles)")
    p.add_argument("--table", default=str(ROOT / "docs" / "cramming-results.md"))
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--no-geometry", action="store_true")
    p.add_argument("--geometry-file", default=None,
                   help="use this geometry record (python -m accesslib geometry --out FILE) "
                        "instead of measuring it")
    p.add_argument("--effective-eps", type=int, default=None, metavar="K",
                   help="--geometry-only: directions for the effective eps (default 16; with "
                        "--geometry-file, re-measure it around a crammed memory; without it, the "
                        "bundle keeps the effective eps it had)")
    p.add_argument("--geometry-only", action="store_true",
                   help="keep the bundles' curves, re-measure (or take from --geometry-file) and "
                        "replace only their geometry")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (tiny models are overhead-bound: 1 is fastest, and fair on a shared CPU)")
    p.add_argument("--fast", action="store_true", help="tiny settings (tests): 2 strings, m=1,2, 40 steps")
    p.add_argument("--geometry-lengths", nargs="+", type=int, default=None,
                   help="context lengths of the support samples (default 4, 8, ... up to the model's "
                        "context, 1024 without one: give 4 8 16 32 64 to match a 64-token twin)")
    p.add_argument("--radius", action="store_true",
                   help="measure radius-<model>.json (hidden-state radius against context length) for "
                        "--models (default: notebook 09's twins) instead of cramming")
    p.add_argument("--radius-lengths", nargs="+", type=int, default=None,
                   help="--radius: context lengths (default 4 8 ... 4096)")
    p.add_argument("--radius-samples", type=int, default=16, help="--radius: inputs per length and source")
    p.add_argument("--with-budget-check", action="store_true",
                   help="after measuring a bundle, re-measure n50 at m = 1 and the largest m with "
                        "--budget-factor times the step budget and patience; store it as budget_check")
    p.add_argument("--add-budget-check", nargs="+", default=None, metavar="MODEL",
                   help="add that budget check to these existing bundles, re-measuring nothing else")
    p.add_argument("--budget-factor", type=int, default=3, help="budget check: step budget multiple (default 3)")
    p.add_argument("--budget-ms", nargs="+", type=int, default=None, metavar="M",
                   help="budget check: these m (default: 1 and the largest m of the bundle)")
    p.add_argument("--budget-max-steps", type=int, default=None, metavar="N",
                   help="budget check: this step budget instead of --budget-factor times the bundle's")
    p.add_argument("--budget-patience", type=int, default=None, metavar="N",
                   help="with --budget-max-steps: this patience (default: the bundle's, scaled alike)")
    p.add_argument("--budget-lengths", nargs="+", default=None, metavar="M:N1,N2",
                   help="budget check of a grid bundle: measure at these lengths (M:N1,N2,... per m)")
    p.add_argument("--add-budget-ladder", nargs="+", default=None, metavar="MODEL",
                   help="add a budget ladder (n50 at --ladder-m by step budget) to these existing bundles")
    p.add_argument("--ladder", nargs="+", default=None, metavar="STEPS/PATIENCE",
                   help="--add-budget-ladder: the budgets besides the bundle's own, e.g. 500/100 1500/300 "
                        "(4500/900:10,16,24: that budget at lengths of its own); under a protocol without a "
                        "schedule (paper), a budget below the bundle's with its patience is read from the "
                        "bundle's own strings in --store, nothing crammed")
    p.add_argument("--add-remeasure", nargs="+", default=None, metavar="FOLDER",
                   help="keep the cramming bundle in each FOLDER (another run of a model with a shipped "
                        "bundle: another protocol, targets or step budget) in the model's bundle in --out; "
                        "notebook 03 draws it beside the shipped n50")
    p.add_argument("--read-budget", default=None, metavar="STEPS/PATIENCE",
                   help="a bundle of --models (one) at this smaller budget, read from the strings of a larger "
                        "run in --store (also one still going), written to --out: every m of the run (or "
                        "--m), its n50 and slope, and the check against the run's own budget; nothing is "
                        "crammed. --source picks the run where the store holds several")
    p.add_argument("--read-from", default=None, metavar="STEPS/PATIENCE",
                   help="--read-budget and --add-budget-map: the run's own budget, where --store holds several "
                        "runs of one source (a larger budget extending a finished run's strings)")
    p.add_argument("--add-budget-map", nargs="+", default=None, metavar="MODEL",
                   help="keep in these models' bundles the n50 over --map-steps x --map-patience read from the "
                        "run in --store (every m of it; --source picks one), nothing crammed; notebook 03 "
                        "draws it")
    p.add_argument("--map-steps", nargs="+", type=int, default=None, metavar="STEPS",
                   help="--add-budget-map: the step budgets (the run's own is added)")
    p.add_argument("--map-patience", nargs="+", type=int, default=None, metavar="P",
                   help="--add-budget-map: the patiences (the run's own is added)")
    p.add_argument("--ladder-m", type=int, default=1, help="--add-budget-ladder: the m (default 1)")
    p.add_argument("--ladder-lengths", nargs="+", type=int, default=None, metavar="N",
                   help="--add-budget-ladder of a grid bundle: the lengths of the larger budgets "
                        "(default the bundle's)")
    return p


def main(argv=None):
    p = build_parser()
    a = p.parse_args(argv)
    if a.add_budget_ladder is not None:
        if not a.ladder:
            p.error("--add-budget-ladder needs --ladder STEPS/PATIENCE ... (e.g. --ladder 500/100 1500/300)")
        a.ladder = parse_budgets(a.ladder, p.error)
    if a.budget_lengths:
        a.budget_lengths = parse_lengths(a.budget_lengths, a.budget_ms or [], p.error)

    import torch

    from accesslib.experiments import bundling
    from accesslib.models import embedded
    from accesslib.results import bundles
    from accesslib.results.store import ResultsStore

    torch.set_num_threads(max(1, a.threads))

    argv = list(argv if argv is not None else sys.argv[1:])
    command = "python " + " ".join(shlex.quote(x) for x in [sys.argv[0]] + argv)
    if a.radius and not a.table_only:
        _beyond(a, command)
    elif a.add_budget_check and not a.table_only:
        _add_budget_check(a, command)
    elif a.add_budget_ladder and not a.table_only:
        _add_budget_ladder(a, command)
    elif a.add_remeasure and not a.table_only:
        _add_remeasure(a)
    elif a.add_budget_map and not a.table_only:
        _add_budget_map(a, p, command, argv)
    elif a.read_budget and not a.table_only:
        _read_budget(a, p, command, argv)
    elif a.geometry_only and not a.table_only:
        from accesslib.models.loading import load_model
        for name in a.models or bundles.available("cram"):
            t0 = time.perf_counter()
            b = bundles.load("cram", name, a.out)
            n50s = [c["n50"] for c in b["curves"] if c["m"] == 1 and c["n50"]]
            # effective eps around a memory that holds a string a little shorter than n50 (m = 1),
            # crammed the way the bundle's strings were (same source, prefix, protocol and layout)
            eff = dict(memory_n=int(0.75 * n50s[0]) if n50s else None, seed=b.get("seed", 0),
                       prefix_ids=b["settings"].get("prefix_ids"))
            settings = b["settings"]   # crammed_memory takes the prefix from prefix_ids
            if a.store and n50s:   # one of the bundle's own crammed memories, when its store holds them
                eff["crammed"] = bundling.stored_memory(a.store, b, 0.75 * n50s[0])
            if a.geometry_file:   # a record measured before (python -m accesslib geometry --out)
                kept = (b.get("geometry") or {}).get("effective_eps")
                b["geometry"] = json.loads(Path(a.geometry_file).read_text())
                if kept and not a.effective_eps and "effective_eps" not in b["geometry"]:
                    b["geometry"]["effective_eps"] = kept   # nothing measured before is lost
                if a.effective_eps:
                    b["geometry"]["effective_eps"] = bundling.measure_effective_eps(
                        load_model(name), a.effective_eps, source=b["source"], settings=settings, **eff)
            else:
                b["geometry"] = bundling.measure_geometry(load_model(name), name, memory_source=b["source"],
                                                         memory_settings=settings,
                                                         effective_eps=a.effective_eps or 16, **eff)
                b["geometry"]["command"] = command
            path = bundles.save(b, a.out)
            g = b["geometry"]
            how = f"taken from {a.geometry_file}" if a.geometry_file else "re-measured"
            print(f"{name}: geometry {how} (s_conv {g.get('s_conv', float('nan')):.3f}, "
                  f"{g.get('zero_hit_tokens')} tokens never hit); {time.perf_counter() - t0:.0f} s -> {path}",
                  flush=True)
    elif not a.table_only:
        models = a.models or embedded.names()
        geometry = not a.no_geometry
        geometry_options = None
        if a.geometry_file:
            geometry = json.loads(Path(a.geometry_file).read_text())
        if a.geometry_lengths:
            geometry_options = dict(lengths=a.geometry_lengths)
        if a.fast:
            a.samples, a.m = min(a.samples, 2), a.m[:2]
            a.max_steps = a.max_steps or 40
            geometry_options = dict(per_length=4, lengths=[4, 16], n_cells=2000, effective_eps=2)
        overrides = {k: v for k, v in (("max_steps", a.max_steps), ("patience", a.patience),
                                        ("precision", a.precision), ("lr", a.lr)) if v}
        if a.bos:
            overrides["prefix_ids"] = "bos"
        if a.add_special_tokens:
            overrides["add_special_tokens"] = True
        if a.search == "grid":
            if not a.lengths:
                p.error("--search grid needs --lengths")
            overrides["lengths"] = parse_lengths(a.lengths, a.m, p.error)
        store = ResultsStore(a.store) if a.store else ResultsStore()
        extend_from = None
        if a.extend_from:
            steps, patience = parse_budget(a.extend_from, "--extend-from", p.error, "9000/1500")
            extend_from = dict(max_steps=steps, patience=patience)
            if a.protocol != "paper":
                p.error(f"--extend-from needs a constant learning rate (--protocol paper); the {a.protocol} "
                        "protocol's schedule follows the step budget, so a longer run is not the shorter one "
                        "continued")
        if any(n in embedded.names("mamba") for n in models):
            from accesslib.experiments.beyond import fast_mamba_scan
            fast_mamba_scan()   # same arithmetic as transformers' torch scan, O(L) backward
        hold_at = None
        if a.hold_at:
            steps, patience = parse_budget(a.hold_at, "--hold-at", p.error, "3000/500")
            hold_at = dict(max_steps=steps, patience=patience)
            from accesslib.engine.cramming import protocol_settings
            from accesslib.experiments.curves import hold_rule
            try:   # refused before any model loads
                hold_rule(hold_at, protocol_settings(a.protocol, **{k: overrides[k] for k in ("max_steps", "patience")
                                                                     if k in overrides}), store)
            except ValueError as e:
                p.error(f"--hold-at: {e}")
        for name in models:
            t0 = time.perf_counter()
            try:
                b = bundling.make_cramming_bundle(name, a.m, samples=a.samples, source=a.source,
                                                 protocol=a.protocol, search=a.search, store=store, command=command,
                                                 geometry=geometry, geometry_options=geometry_options,
                                                 budget_check=a.budget_factor if a.with_budget_check else False,
                                                 extend_from=extend_from, keep_final=a.keep_final, hold_at=hold_at,
                                                 **overrides)
            except bundling.RunHeld as held:
                print(f"held: {held}; {time.perf_counter() - t0:.0f} s", flush=True)
                continue
            path = bundles.save(b, a.out)
            sl = b["slope"] or {}
            n50s = ", ".join(f"m={c['m']}: {c['n50']:.1f}" if c["n50"] is not None else f"m={c['m']}: -"
                             for c in b["curves"])
            print(f"{name}: {n50s}; slope {sl.get('slope', float('nan')):.2f} (R^2 {sl.get('r2') or float('nan'):.3f}); "
                  f"{time.perf_counter() - t0:.0f} s -> {path}", flush=True)
    if a.out is None and a.table:
        Path(a.table).parent.mkdir(parents=True, exist_ok=True)
        Path(a.table).write_text(table_markdown())
        print(f"tables -> {a.table}")


def _beyond(a, command):
    """--radius (notebook 09): the radius bundles of --models (default: the twins)."""
    from accesslib.experiments import beyond
    from accesslib.results import bundles

    beyond.fast_mamba_scan()   # Mamba only: same arithmetic as transformers' torch scan, O(L) backward
    for name in a.models or list(beyond.TWINS.values()):
        t0 = time.perf_counter()
        b = beyond.radius_bundle(name, a.radius_lengths or beyond.RADIUS_LENGTHS, a.radius_samples,
                                 progress=True, command=command)
        path = bundles.save(b, a.out)
        print(f"{name}: radius measured in {time.perf_counter() - t0:.0f} s -> {path}", flush=True)


if __name__ == "__main__":
    main()
