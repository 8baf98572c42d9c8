"""Command line: ``python -m accesslib SUBCOMMAND ...`` (also installed as ``accesslib``).

    python -m accesslib cram --model NAME_OR_PATH --m 1 2 3 4 --samples 16 --source natural

crams strings for every m, writes every finished string to the results store at once (a
killed run started again resumes where it stopped), then prints n50 per m and the slope of
n50 against m (docs/paper.md, section 5).

    python -m accesslib geometry --model NAME_OR_PATH --cells 100000 --out geometry.json

measures the support of the final hidden states, the decoder-cell shares and the effective
eps, prints every refined slope (and its ratio to a measured slope when one is known) and
writes the record the apps read (docs/paper.md, sections 3-4).

    python -m accesslib sweep examples/sweep-tiny.yaml --workers 2

runs a cramming sweep described by a YAML file on Dask (a LocalCluster by default, or a running
scheduler), writing to the results store; the same command again resumes (docs/sweeps.md).

    accesslib store summary | export --csv FILE | export --parquet FILE | merge OLD [--store PATH]

reads the results store: one line per curve with its n50, every string as CSV (standard
library) or Parquet (pandas + pyarrow), or another store's rows copied in.

    python -m accesslib bound --model pythia-160m --m 1 2 4 --n 1000

prints the counting bound of [A] at one setting (d, |V|, eps, r given, or a model of [A]'s table,
or a shipped bundle): C, and per m the prompts, n* = C m and the n50 bound (docs/paper.md,
section 2).

    accesslib check-model gemma-3-270m [--against DIR_OR_HUB_NAME] [--support] [--json FILE]

prints greedy continuations of fixed prompts and a fingerprint of the logits, compares them with
another copy of the model, and measures the support under every reading (docs/gemma.md).

    accesslib app --port 8866 [--public] [--cull-idle SECONDS] [--preheat N]

serves the notebooks as Voila web apps on 127.0.0.1 (what ``make app`` runs; needs the
``[apps]`` extra), freeing the kernels of closed pages (:func:`voila_command`); ``accesslib --version`` prints the installed version.

Every subcommand is in ``SUBCOMMANDS`` (name -> (add_arguments, run, help)); the modules it runs
are imported when the subcommand runs, so ``--help`` stays fast. Bad arguments give a one-line
error and exit code 2 (argument values are checked by :mod:`accesslib._checks`, in its one style).
"""
from __future__ import annotations

import argparse
import sys

from accesslib._checks import arg_type, check_float, check_int, check_seed, fail

# accesslib.engine.targets.SOURCES, written out so that the parser needs no torch import (a test
# keeps the two the same)
TARGET_SOURCES = ("natural", "words", "words100k", "glove100k", "tokens")

#: argparse types: whole numbers >= 1 / >= 0, numbers > 0
_POSITIVE_INT = arg_type(check_int, 1)
_COUNT = arg_type(check_int, 0)
_POSITIVE_FLOAT = arg_type(check_float, 0, low_open=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2 (argparse's default prints the usage too)
        self.exit(2, f"{self.prog}: error: {message}\n")


# --- cram ------------------------------------------------------------------------------------
def _add_cram(p: argparse.ArgumentParser):
    p.add_argument("--model", required=True,
                   help="embedded or offline short name, local directory, hub name, or tiny:FAMILY[:d] "
                        "(a random tiny model, e.g. tiny:gpt_neox)")
    p.add_argument("--m", type=_POSITIVE_INT, nargs="+", default=[1, 2, 3, 4], metavar="M",
                   help="numbers of memory vectors (default 1 2 3 4)")
    p.add_argument("--samples", type=_POSITIVE_INT, default=16, help="strings per length (default 16)")
    p.add_argument("--source", choices=TARGET_SOURCES, default="natural",
                   help="target strings: natural text, random common words, random words from SCOWL's "
                        "100k-word list, from [A]'s own GloVe 100k list (the paper's protocol), uniform "
                        "random tokens")
    p.add_argument("--lengths", type=_POSITIVE_INT, nargs="+", metavar="N",
                   help="measure exactly these lengths (search=grid); default: adaptive search")
    p.add_argument("--search", choices=("bisect", "paper", "grid"),
                   help="length search (default bisect, or grid when --lengths is given)")
    p.add_argument("--protocol", choices=("paper", "fast"), default="paper",
                   help="cramming settings: [A]'s published protocol or the engine's fast one")
    p.add_argument("--max-steps", type=_POSITIVE_INT, help="override the protocol's step limit")
    p.add_argument("--patience", type=_POSITIVE_INT, help="override the protocol's patience")
    p.add_argument("--lr", type=_POSITIVE_FLOAT, help="override the protocol's learning rate")
    p.add_argument("--bos", action="store_true",
                   help="put the model's BOS token before the memory (real models use it as an "
                        "attention sink)")
    p.add_argument("--add-special-tokens", action="store_true",
                   help="start each target with the tokenizer's special tokens (Gemma's, Llama's BOS) after "
                        "the memory, counted in n: the layout of [A]'s code")
    p.add_argument("--seed", type=arg_type(check_seed), default=0,
                   help="seed of the targets and the initial memory (0..2**64 - 1)")
    p.add_argument("--precision", type=_POSITIVE_FLOAT, default=0.02,
                   help="bisect search: target relative stderr of n50 (default 0.02)")
    p.add_argument("--max-length", type=_POSITIVE_INT, default=1000, help="longest target (default 1000)")
    p.add_argument("--store", help="results store file (default: results.sqlite in the user data folder, "
                                   "or in ACCESSLIB_HOME when set)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="weights' dtype (default: bfloat16 on cuda, float32 on cpu; memory vectors, "
                        "AdamW state and the loss stay in float32)")
    p.add_argument("--autocast", default=None, choices=("bfloat16", "float16"),
                   help="autocast the forward pass to this dtype (over float32 weights)")
    p.add_argument("--batch-size", type=_POSITIVE_INT, default=None,
                   help="strings optimised at once (default: 64 on cpu, from free memory on cuda)")
    p.add_argument("--threads", type=_POSITIVE_INT, help="torch CPU threads")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--keep-final", action="store_true",
                   help="keep in the store the state each string finished in (a few KB per string and "
                        "vector), so that a run with a larger budget can --extend-from this one")
    p.add_argument("--extend-from", metavar="STEPS/PATIENCE",
                   help="go on from a run of the same strings in --store with this smaller budget (same "
                        "settings otherwise, --protocol paper): the result of this budget from the start, "
                        "for the steps beyond")


def _load(name: str, dtype: str, device: str):
    from accesslib.models import loading as models
    if name.startswith("tiny:"):
        parts = name.split(":")
        family = parts[1] if len(parts) > 1 else ""
        d = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 32
        if len(parts) > 3 or (len(parts) > 2 and not parts[2].isdigit()):
            fail("--model", "tiny:FAMILY or tiny:FAMILY:d for a tiny random model", name)
        return models.tiny_model(family, d=d, dtype=dtype or models.default_dtype(device), device=device)
    return models.load_model(name, dtype=dtype, device=device)


def _run_cram(args) -> int:
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.results.store import ResultsStore
    from accesslib.theory.stats import fit_slope

    if args.search == "grid" and not args.lengths:
        fail("--lengths", "given with --search grid", args.lengths)
    if args.lengths and args.search not in (None, "grid"):
        fail("--search", "grid (or left out) when --lengths is given", args.search)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    # the store first: a file that cannot hold results is refused before the model loads
    store = ResultsStore(args.store) if args.store else ResultsStore()
    lm = _load(args.model, args.dtype, args.device)
    overrides = dict(max_steps=args.max_steps, patience=args.patience, lr=args.lr,
                     autocast_dtype=args.autocast)
    if args.bos:
        from accesslib.engine.cramming import default_prefix
        overrides["prefix_ids"] = default_prefix(lm) or None
    if args.add_special_tokens:
        overrides["add_special_tokens"] = True
    extend_from = None
    if args.extend_from:
        ((steps, patience),) = _parse_budgets([args.extend_from], "--extend-from")
        extend_from = dict(max_steps=steps, patience=patience)
    total = len(args.m) * len(args.lengths) * args.samples if args.lengths else None
    bar = None
    if not args.no_progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, unit="str", desc="cram", file=sys.stderr)

    def on_string(row):
        if bar is not None:
            bar.update(1)
            bar.set_postfix(m=row["m"], n=row["n"], ok=int(row["success"]))

    fits, ms = [], list(args.m)
    print(f"model {lm.facts.name} (d={lm.facts.d}, |V|={lm.facts.vocab_size}, {lm.facts.dtype} on "
          f"{lm.facts.device}), source {args.source}, protocol {args.protocol}, store {store.path}", flush=True)
    try:
        # one engine for every m: their searches share its batch (continuous batching)
        curves = accessibility_curves(lm, ms, lengths=args.lengths, samples=args.samples, source=args.source,
                                      seed=args.seed, store=store, search=args.search, protocol=args.protocol,
                                      precision=args.precision, max_length=args.max_length,
                                      on_string=on_string, batch_size=args.batch_size,
                                      keep_final=args.keep_final, extend_from=extend_from, **overrides)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"interrupted: finished strings are in {store.path}, unfinished ones as they were at their last "
              "checkpoint; run the same command again to resume", file=sys.stderr)
        return 130
    for m, curve in zip(ms, curves):
        if bar is not None and curve.strings_from_store:
            bar.update(curve.strings_from_store)
        fit = curve.fit()
        fits.append(fit)
        pts = ", ".join(f"{n}:{s}/{t}" for n, s, t in zip(curve.lengths, curve.successes, curve.totals))
        line = (f"m={m}: n50 = {fit.n50:.1f} +- {fit.stderr:.1f}  (k={fit.k:.3g}, {fit.method})"
                if fit.ok else f"m={m}: n50 not found: {fit.message}")
        (bar.write if bar is not None else print)(
            f"{line}; {curve.strings_crammed} crammed, {curve.strings_from_store} from store"
            + (f" ({curve.strings_resumed} resumed mid-way)" if curve.strings_resumed > curve.strings_extended else "")
            + (f" ({curve.strings_extended} gone on from the {args.extend_from} run)" if curve.strings_extended else "")
            + (f" ({curve.strings_carried} taken as the {args.extend_from} run crammed them)"
               if curve.strings_carried else "") + f"; {pts}")
    if bar is not None:
        bar.close()
    eng = curves[0].engine
    if eng is not None and eng.steps_run:
        t = eng.timings
        print(f"engine: {eng.steps_run} steps, {eng.row_steps} row-steps ({eng.row_steps / eng.steps_run:.1f} "
              f"strings per step); time in forward {t['forward']:.1f} s, backward {t['backward']:.1f} s, "
              f"update {t['update']:.1f} s, checks {t['checks']:.1f} s (greedy {t['greedy']:.1f} s)")
    good = [(m, f.n50, f.stderr) for m, f in zip(ms, fits) if f.ok]
    if len({m for m, _, _ in good}) >= 2:
        sf = fit_slope([g[0] for g in good], [g[1] for g in good])
        print(f"slope = {sf.slope:.2f} +- {sf.slope_stderr:.2f} tokens per vector, intercept {sf.intercept:.1f}, "
              f"R^2 = {sf.r2:.3f} ({sf.n_points} values of m)")
    else:
        print("slope: needs n50 for at least two values of m")
    return 0


# --- geometry --------------------------------------------------------------------------------
def _add_geometry(p: argparse.ArgumentParser):
    p.add_argument("--model", required=True,
                   help="embedded or offline short name, local directory, hub name, or tiny:FAMILY[:d]")
    p.add_argument("--lengths", type=_POSITIVE_INT, nargs="+", metavar="L",
                   help="random-token sequence lengths for the support (default 4, 8, ... up to "
                        "min(1024, context))")
    p.add_argument("--per-length", type=_POSITIVE_INT, default=None,
                   help="support samples per length (default 256)")
    p.add_argument("--support-samples", default=None, metavar="FILE.npy",
                   help="reuse the support samples in this file when it exists, else measure "
                        "them and save them there (reruns with other cell settings are cheap)")
    p.add_argument("--cells", type=_COUNT, default=None, metavar="N",
                   help="Monte Carlo cell samples (default 1,000,000; 0: no cells)")
    p.add_argument("--support", choices=("box", "ball", "hull"), default="box",
                   help="where cell samples are drawn (default: the measured box)")
    p.add_argument("--assign", choices=("argmax", "voronoi"), default="argmax",
                   help="argmax of the logits (greedy decoding) or nearest decoder row ([A])")
    p.add_argument("--zero-hit", choices=("bound", "drop"), default="bound",
                   help="shares at their 95%% upper bounds (default) or [A]'s rule (never-hit "
                        "tokens dropped)")
    p.add_argument("--dtype-eps", default="paper", choices=("paper", "float16", "bfloat16", "float32"),
                   help="eps = r_inf x unit roundoff of this dtype (paper: 2^-11)")
    p.add_argument("--effective-eps", type=_COUNT, default=16, metavar="K",
                   help="random directions for the effective eps (0: skip)")
    p.add_argument("--slope", type=_POSITIVE_FLOAT, default=None,
                   help="a measured slope (tokens per vector) to divide by; default: the "
                        "model's shipped cramming bundle, when there is one")
    p.add_argument("--out", default=None, help="write the geometry record (JSON) here")
    p.add_argument("--seed", type=arg_type(check_seed), default=0, help="seed (0..2**64 - 1)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--threads", type=_POSITIVE_INT, default=None, help="torch CPU threads")
    p.add_argument("--no-progress", action="store_true")


def _run_geometry(args) -> int:
    import json
    import math
    import os

    from accesslib.engine import geometry
    from accesslib.results import bundles

    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        fail("--out", f"a file in an existing folder ({os.path.dirname(os.path.abspath(args.out))} "
             f"does not exist)", args.out)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    lm = _load(args.model, args.dtype, args.device)
    name = getattr(getattr(lm, "facts", None), "name", None) or args.model
    samples = None
    if args.support_samples and os.path.exists(args.support_samples):
        import numpy as np
        samples = np.load(args.support_samples)
        if samples.ndim != 2 or samples.shape[1] != lm.facts.d:
            fail("--support-samples", f"a .npy file of samples [N, d={lm.facts.d}] (this one has shape "
                 f"{samples.shape})", args.support_samples)
        print(f"support samples from {args.support_samples}: {samples.shape[0]:,}")
    elif args.support_samples:
        import numpy as np
        samples = geometry.sample_support(lm, args.lengths, args.per_length, seed=args.seed,
                                          progress=not args.no_progress).numpy()
        np.save(args.support_samples, samples)
    rep = geometry.geometry_report(lm, name=name, samples=samples, dtype=args.dtype_eps, lengths=args.lengths,
                                   per_length=args.per_length, n_cells=args.cells,
                                   cell_support=args.support, assign=args.assign,
                                   zero_hit=args.zero_hit, seed=args.seed,
                                   progress=not args.no_progress)
    eff = None
    if args.effective_eps:
        eff = geometry.effective_eps(lm, n_directions=args.effective_eps, seed=args.seed)
    rec = bundles.geometry_record(rep, eff)
    slope, slope_from = args.slope, "--slope"
    if slope is None and args.model in bundles.available("cram"):
        slope = (bundles.load("cram", args.model).get("slope") or {}).get("slope")
        slope_from = f"the shipped bundle cram-{args.model}"
    st = rep.stats
    print(f"{rep.name}: d={rep.d}, |V|={rep.vocab_size:,}, {st.n:,} support samples")
    print(f"  r_inf {st.r_inf:.4g}, r_2 {st.r_2:.4g}, min cos {st.min_cos:.4f} (phi {math.degrees(st.phi):.1f} deg), "
          f"eps {rep.eps:.4g} ({rep.dtype})")
    if rep.sconv is not None:
        sc, dr = rep.sconv, rep.sconv_drop
        print(f"  cells: N={rep.cells.n_samples:,} ({rep.cells.support}, {rep.cells.assign}), "
              f"{sc.n_zero:,} tokens never hit; s_conv {sc.s_conv:.3f} ({sc.zero_hit}), "
              f"[A]'s drop rule {dr.s_conv:.3f}, ln|V| {math.log(rep.vocab_size):.3f}"
              + ("  [sample-limited: most tokens never hit]" if sc.sample_limited else ""))
        if len(rep.convergence) > 1:
            from accesslib.theory.stats import describe_convergence
            print("  s_conv against the first n cell samples (same draws):")
            for row in rep.convergence:
                print(f"    n {row['n']:>12,}  s_conv {row['s_conv']:8.3f}  drop rule {row['s_conv_drop']:8.3f}"
                      f"  never hit {row['zero_hit']:>9,}")
            print("  " + describe_convergence(rep.convergence))
    if eff is not None:
        q = eff.quantiles()
        print(f"  effective eps (relative, {len(eff.rel)} directions): median {eff.describe(q[1])}, "
              f"10-90% {eff.describe(q[0])} to {eff.describe(q[2])}; dtype eps / r_inf "
              f"{rep.eps / st.r_inf:.3g}")
    head = f"  {'bound':<10} {'C':>9} {'ln F':>10}"
    print(head + (f" {'C / a':>8}   (a = {slope:.3g}, from {slope_from})" if slope else ""))
    for kind, C, lf in rep.table():
        line = f"  {kind:<10} {C:9.2f} {'' if lf is None else format(lf, '.4g'):>10}"
        print(line + (f" {C / slope:8.1f}" if slope else ""))
    if args.out:
        rec["command"] = "python -m accesslib " + " ".join(sys.argv[1:]) if sys.argv else ""
        with open(args.out, "w") as f:
            json.dump(rec, f, indent=1)
        print(f"wrote {args.out}")
    return 0


# --- bound -----------------------------------------------------------------------------------
def _add_bound(p: argparse.ArgumentParser):
    p.description = ("The counting bound of [A] (docs/paper.md, section 2) at one setting: C = d "
                     "ln(1 + 2r/eps) / ln|V| tokens per prompt vector, and per m the number of "
                     "eps-distinguishable prompts, n* = C m and the bound on n50; with --n, the largest "
                     "share of the |V|^n strings of length n that a prompt can force. Give d, |V| and r, or "
                     "a model: one of [A]'s table (--model, its published r_inf and slopes) or a shipped "
                     "bundle (--bundle, the r_inf and slope measured here); an explicit --d, --vocab or --r "
                     "replaces the model's.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", metavar="NAME", help="a model of [A]'s table by hub name or its last part "
                                                     "(e.g. pythia-160m, gemma-3-270m)")
    src.add_argument("--bundle", metavar="NAME", help="a shipped cramming bundle (e.g. tiny-d32-v257, "
                                                      "smollm2-135m): its d, |V|, measured r_inf and slope")
    src.add_argument("--table", action="store_true",
                     help="every model of [A]'s table: C and C / a against [A]'s measured slopes")
    p.add_argument("--d", type=_POSITIVE_INT, help="width of a prompt vector")
    p.add_argument("--vocab", type=arg_type(check_int, 2), metavar="V", help="vocabulary size |V|")
    p.add_argument("--r", type=_POSITIVE_FLOAT, help="radius of the support (r_inf)")
    prec = p.add_mutually_exclusive_group()
    prec.add_argument("--eps", type=_POSITIVE_FLOAT, help="the precision eps itself")
    prec.add_argument("--dtype", default="paper", choices=("paper", "float16", "bfloat16", "float32"),
                      help="eps = r x unit roundoff of this dtype (default paper: [A]'s r x 2^-11)")
    p.add_argument("--m", type=_POSITIVE_INT, nargs="+", default=[1, 2, 4, 8], metavar="M",
                   help="prompt lengths in vectors (default 1 2 4 8)")
    p.add_argument("--n", type=_COUNT, nargs="+", default=[], metavar="N",
                   help="output lengths in tokens: the share of strings of each length a prompt can force")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")


def _share_text(log10_share: float) -> str:
    """A share given by its log10: 1, a number while it is one, else a power of ten."""
    if log10_share == 0:
        return "1"
    if log10_share > -300:
        return f"{10 ** log10_share:.3g}"
    return f"10^{log10_share:,.1f}"


def _run_bound(args) -> int:
    import json

    from accesslib.theory import bounds

    if args.table:
        return _bound_table_of_models(args)
    d, vocab, r, measured, origin, budget, single = args.d, args.vocab, args.r, [], "", None, None
    r_note = targets = ""
    if args.model:
        from accesslib.results import reference
        try:
            row = reference.model(args.model)
        except ValueError:
            names = ", ".join(x["name"] for x in reference.models())
            fail("--model", f"a model of [A]'s table ({names})", args.model)
        d, vocab = d or row["d"], vocab or row["vocab_size"]
        if r is None and row.get("r_inf") is None:
            if args.eps is not None or args.dtype != bounds.PAPER_DTYPE:
                fail("--r", f"given for {row['name']} with --eps or --dtype ([A]'s table has no r_inf "
                     f"for it)", None)
            r, r_note = 1.0, " (no r_inf in [A]'s table; at [A]'s eps nothing here depends on r)"
        r = row["r_inf"] if r is None else r
        origin = f"{row['name']}, [A]'s table"
        measured = [(f"[A]'s slope on {label}", row.get(key)) for key, label in
                    (("slope_pg19", "PG19"), ("slope_random", "random words"))]
    elif args.bundle:
        from accesslib.results import bundles
        names = bundles.available("cram")
        if args.bundle not in names:
            fail("--bundle", "a shipped cramming bundle (" + ", ".join(names) + ")", args.bundle)
        b = bundles.load("cram", args.bundle)
        d, vocab = d or b["facts"]["d"], vocab or b["facts"]["vocab_size"]
        r = (b.get("geometry") or {}).get("r_inf") if r is None else r
        origin = f"the shipped bundle {args.bundle}, measured here"
        budget = bundles.budget_status(b)[0]
        measured = [(f"slope measured here ({b['source']} targets; budget check: {budget})",
                     (b.get("slope") or {}).get("slope"))]
        single = bundles.single_point(b)   # one m measured (Gemma-3-270M): n* / n50 in place of C / a
        targets = b["source"]
    missing = [flag for flag, v in (("--d", d), ("--vocab", vocab), ("--r", r)) if v is None]
    if missing:
        fail(", ".join(missing), "given (or --model NAME / --bundle NAME, which sets them)", None)
    if args.eps is not None:
        eps, how = args.eps, "given"
    else:
        eps = bounds.eps_for_dtype(args.dtype, r)
        how = ("r x 2^-11: [A]'s choice" if args.dtype == bounds.PAPER_DTYPE
               else f"r x the unit roundoff of {args.dtype}")
    t = bounds.bound_table(d, vocab, eps, r, args.m, args.n)
    # a measured slope goes with the model's own setting (as notebook 01 puts [A]'s away off a preset)
    own = all(v is None for v in (args.d, args.vocab, args.r, args.eps)) and args.dtype == bounds.PAPER_DTYPE
    ratios = [(label, a, bounds.theory_ratio(t["slope"], a)) for label, a in measured if a] if own else []
    point = None
    if single and own:   # (m, n50, stderr) of a bundle with one m: n* there against that n50
        pm, n50, se = single
        ratio = bounds.theory_ratio(bounds.n_star(pm, d, vocab, eps, r), n50)
        point = dict(m=pm, n50=n50, stderr=se, ratio=ratio)
    if origin and not own:
        origin += ", with the values given here in its place"
    if args.json:
        ratios = [dict(against=label, slope=a, ratio=x) for label, a, x in ratios]
        print(json.dumps(dict(t, origin=origin or None, eps_from=how, budget=budget, ratios=ratios,
                              n50_point=point, r_published=not r_note), indent=1))
        return 0
    print("counting bound of [A] (Theorem 4.5, Corollary 4.6)" + (f": {origin}" if origin else ""))
    print(f"  d = {d:,}, |V| = {vocab:,}, r = {r:.6g}{r_note}, eps = {eps:.6g} ({how})")
    print(f"  ln(1 + 2r/eps) = {t['ln_cells']:.4f} nats per coordinate")
    print(f"  C = d ln(1 + 2r/eps) / ln|V| = {t['slope']:,.2f} tokens per prompt vector")
    table = [("m", "log10 prompts", "n* = C m", "n50 bound")]
    table += [(f"{row['m']:g}", f"{row['log10_prompts']:,.1f}", f"{row['n_star']:,.1f}", f"{row['n50']:,.1f}")
              for row in t["rows"]]
    _print_table(table, right={0, 1, 2, 3}, indent="  ")
    for label, a, x in ratios:
        print(f"  {label}: {a:.4g} tokens per vector; C / a = {x:.1f}")
    if point:
        print(f"  one m measured here, no slope: n50 = {point['n50']:.1f} +- {point['stderr']:.1f} at "
              f"m = {point['m']} ({targets} targets; budget check: {budget}); "
              f"n* / n50 = {point['ratio']:.1f}")
    if not own and (any(a for _, a in measured) or single):
        print("  C / a (n* / n50 where one m was measured): only at the model's own d, |V|, r and [A]'s eps, "
              "which the measured figures go with")
    if (ratios or point) and budget == "budget-limited":
        print("  budget-limited: a larger step budget moved the measured n50, so the measured figure is "
              "partly the budget's and the ratio overstates the gap (docs/real-models.md)")
    if t["shares"]:
        print("  at most this share of the |V|^n strings of length n can be forced by a prompt of m vectors:")
        table = [("n",) + tuple(f"m = {row['m']:g}" for row in t["rows"])]
        table += [(f"{sh['n']:g}",) + tuple(_share_text(x) for x in sh["log10_share"]) for sh in t["shares"]]
        _print_table(table, right=set(range(len(table[0]))), indent="  ")
    return 0


def _bound_table_of_models(args) -> int:
    """``accesslib bound --table``: C of every model of [A]'s table at the chosen eps, and C / a
    against [A]'s measured slopes (at [A]'s own eps only), with the range over the models."""
    import json

    from accesslib.results import reference
    from accesslib.theory import bounds

    given = [(f, v) for f, v in (("--d", args.d), ("--vocab", args.vocab), ("--r", args.r), ("--n", args.n))
             if v]
    if given:
        fail(given[0][0], "left out with --table (each model's own values are used)", given[0][1])
    paper = args.eps is None and args.dtype == bounds.PAPER_DTYPE
    rows = []
    for row in reference.models():
        r = row.get("r_inf")
        if r is None and not paper:
            C = None   # eps from r, or eps given: C needs r, which [A] does not give for this model
        else:
            r = 1.0 if r is None else r   # at [A]'s eps, 2r / eps = 4096 whatever r is
            eps = args.eps if args.eps is not None else bounds.eps_for_dtype(args.dtype, r)
            C = float(bounds.slope(row["d"], row["vocab_size"], eps, r))
        ratio = {k: bounds.theory_ratio(C, row[k]) for k in ("slope_pg19", "slope_random")
                 if paper and C and row.get(k)}
        rows.append(dict(model=row["name"], d=row["d"], vocab_size=row["vocab_size"], r_inf=row.get("r_inf"),
                         slope=C, a_pg19=row.get("slope_pg19"), ratio_pg19=ratio.get("slope_pg19"),
                         a_random=row.get("slope_random"), ratio_random=ratio.get("slope_random")))
    # the range over the models whose r_inf [A] gives (the models of its ratio figures)
    ranges = {k: (min(v), max(v)) for k in ("ratio_pg19", "ratio_random")
              if (v := [x[k] for x in rows if x[k] is not None and x["r_inf"] is not None])}
    if args.json:
        how = "paper" if paper else args.dtype if args.eps is None else "given"
        source = reference.models()[0]["source"]
        print(json.dumps(dict(models=rows, ranges=ranges, eps_from=how, source=source), indent=1))
        return 0
    eps_words = ("[A]'s eps = r x 2^-11 (C does not depend on r)" if paper else f"eps = {args.eps:g}"
                 if args.eps is not None else f"eps = r_inf x the unit roundoff of {args.dtype}")
    print(f"C of every model of [A]'s table, at {eps_words}:")

    def num(x, f):
        return "-" if x is None else format(x, f)
    table = [("model", "d", "|V|", "r_inf", "C", "a (PG19)", "C / a", "a (Random)", "C / a")]
    table += [(x["model"], f"{x['d']:,}", f"{x['vocab_size']:,}", num(x["r_inf"], "g"),
               num(x["slope"], ",.1f"), num(x["a_pg19"], "g"), num(x["ratio_pg19"], ".1f"),
               num(x["a_random"], "g"), num(x["ratio_random"], ".1f")) for x in rows]
    _print_table(table, right=set(range(1, 9)), indent="  ")
    if ranges:
        said = {"ratio_pg19": "PG19", "ratio_random": "Random"}
        print("  over the models with a published r_inf, C / a is " + " and ".join(
            f"{lo:.1f} to {hi:.1f} against the {said[k]} slopes" for k, (lo, hi) in ranges.items()))
        print("  ([A] reports 5.5 to 13.5 and 11 to 29; docs/paper.md, section 6)")
    else:
        print("  C / a: only at [A]'s eps, which the measured slopes go with")
    return 0


# --- sweep -----------------------------------------------------------------------------------
def _add_sweep(p: argparse.ArgumentParser):
    from accesslib.experiments.sweep import WRITE  # the sweep's description: no torch, no Dask

    p.description = ("Run the sweep described in FILE (see examples/sweep-tiny.yaml) on a Dask "
                     "LocalCluster (default) or an existing scheduler; results go to the results "
                     "store; running the same command again resumes.")
    p.add_argument("file", help="sweep description (YAML)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address (tcp://host:8786); 'inprocess' runs the jobs here, "
                        "one after another; default: a LocalCluster")
    p.add_argument("--workers", type=_POSITIVE_INT, default=None, help="LocalCluster worker processes")
    p.add_argument("--store", default=None, help="results store path (overrides the file)")
    p.add_argument("--write", choices=WRITE, default=None,
                   help="who writes rows: each worker, or the client (multi-host clusters)")
    p.add_argument("--dashboard-address", default=None, metavar="HOST:PORT",
                   help="where the LocalCluster's Dask dashboard listens (default 127.0.0.1, a free "
                        "port: this machine only; the dashboard has no login, so 0.0.0.0:PORT opens "
                        "it to anyone on the network)")
    p.add_argument("--dry-run", action="store_true",
                   help="check everything a run checks, list the jobs and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--budget-check", type=arg_type(check_int, 2), nargs="?", const=3, default=None,
                   metavar="FACTOR",
                   help="then re-measure n50 at m = 1 and the largest m with FACTOR (default 3) times the "
                        "step budget and patience, and say whether it moved (budget-limited or converged)")


def _run_sweep(args) -> int:
    """Exit status 0 done, 1 failed jobs, 130 interrupted (a bad description: 2, from main)."""
    from accesslib.experiments import sweep

    # every check a run makes, before anything starts (a dry run makes the same ones)
    spec = sweep.load_spec(args.file, store=args.store, workers=args.workers)
    sweep.check_run(spec, scheduler=args.scheduler, write=args.write, dashboard_address=args.dashboard_address)
    specs = [spec] + ([sweep.budget_spec(spec, args.budget_check)] if args.budget_check else [])
    needs_dask = not args.dry_run and args.scheduler != "inprocess"
    if needs_dask and _missing_extra("sweep", "sweep", ["distributed"]):
        return 2
    if args.dry_run:
        for sp in specs:
            jobs = sp.jobs()
            print(f"{len(jobs)} jobs" + (f" ({sp.name}: {sweep.engine_steps(sp)} steps)" if sp is not spec else "")
                  + f", store {sp.store_path()}")
            for j in jobs:
                print(" ", j.key)
        return 0
    failed = False
    for sp in specs:
        try:
            report = sweep.run_sweep(sp, scheduler=args.scheduler, progress=not args.no_progress,
                                     write=args.write, dashboard_address=args.dashboard_address)
        except KeyboardInterrupt:
            print("\ninterrupted: finished strings are in the store; run the same command to resume")
            return 130
        if sp is not spec:
            print(f"budget check ({sp.name}, {sweep.engine_steps(sp)} steps):")
        print(f"{report.done} jobs run, {report.skipped} already done, {report.crammed} strings crammed "
              f"in {report.wall_time:.1f} s; store {sp.store_path()}")
        for job, err in report.failed:
            print(f"failed: {job.key}: {err}")
        failed = failed or bool(report.failed)
        print(sweep.format_table(report.table()) if sp is spec else
              sweep.format_budget(sweep.budget_table(spec, args.budget_check)))
        if report.interrupted:
            print("interrupted: run the same command to resume")
            return 130
    return 1 if failed else 0


# --- app -------------------------------------------------------------------------------------
#: the Voila server of ``make app`` and ``accesslib app``: local only, no tracebacks on the page, and
#: port_retries=0: a port in use stops the server rather than moving it to another port than the
#: address ``accesslib app`` prints (Voila tries 50 more by default)
VOILA_FLAGS = ("--no-browser", "--Voila.ip=127.0.0.1", "--ServerApp.ip=127.0.0.1", "--show_tracebacks=False",
               "--Voila.port_retries=0")


def _port_in_use(port: int) -> bool:
    """Whether a server already listens on 127.0.0.1:``port`` (bound as Tornado binds: with
    SO_REUSEADDR on POSIX, so a port a closed server left in TIME_WAIT counts as free)."""
    import os
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if os.name == "posix":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _missing_extra(command: str, extra: str, modules: list[str]) -> bool:
    """Say in one line which extra to install when one of `modules` is not importable."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        print(f"accesslib {command}: {', '.join(missing)} not installed: pip install \"accesslib[{extra}]\"",
              file=sys.stderr)
    return bool(missing)


def notebooks_dir():
    """The notebooks: ``accesslib/notebooks/`` inside an installed wheel (setup.py copies them
    there), or the repository's ``notebooks/`` for an editable install."""
    from importlib import resources
    from pathlib import Path

    pkg = Path(str(resources.files("accesslib")))
    for where in (pkg / "notebooks", pkg.parent / "notebooks"):
        if (where / "00-index.ipynb").is_file() and (where == pkg / "notebooks"
                                                     or (pkg.parent / "pyproject.toml").is_file()):
            return where
    raise OSError(f"no notebooks found in {pkg / 'notebooks'} (nor in a repository checkout around it)")


def hosting_dir():
    """``accesslib/apps/share/``: the Voila settings of ``accesslib app`` (its README says what
    each file does): ``config/`` (and ``config-public/`` in public mode) for
    ``JUPYTER_CONFIG_PATH``, the folder itself for ``JUPYTER_PATH`` (the ``accesslib`` template)."""
    from importlib import resources
    from pathlib import Path

    return Path(str(resources.files("accesslib"))) / "apps" / "share"


def _add_app(p: argparse.ArgumentParser):
    p.add_argument("--port", type=arg_type(check_int, 1, 65535), default=8866,
                   help="port on 127.0.0.1 (default 8866)")
    p.add_argument("--public", action="store_true",
                   help="public mode for a class (ACCESSLIB_PUBLIC=1): shipped models only, capped runs; "
                        "idle pages' kernels are freed even while the page is open")
    p.add_argument("--cull-idle", type=_COUNT, default=None, metavar="SECONDS",
                   help="free the kernel of a closed page (public mode: of any page) after this many seconds "
                        "without a message (default 600; 0: never; keep it above a minute: a page being "
                        "opened has no connection yet)")
    p.add_argument("--preheat", type=_COUNT, default=0, metavar="N",
                   help="keep N kernels per notebook started and run in advance, so pages open at once "
                        "(memory: about 0.1-0.4 GB each; default 0)")


def _path_first(first, rest) -> str:
    """``first`` before the entries of an os.pathsep list ``rest`` (an environment variable)."""
    import os

    return os.pathsep.join([str(p) for p in first] + ([rest] if rest else []))


def voila_command(port: int = 8866, public: bool = False, *, cull_idle: int | None = None, preheat: int = 0):
    """(argv, folder to run it in, environment) of the Voila server that ``accesslib app`` starts.

    The settings live in :func:`hosting_dir` (reached through ``JUPYTER_CONFIG_PATH`` and
    ``JUPYTER_PATH``): the ``accesslib`` template (no request leaves the server) and kernel
    culling; public mode (``public`` or ACCESSLIB_PUBLIC on; a value that is not allowed counts
    as on) adds ``config-public/``. ``cull_idle`` (seconds; 0: never) overrides the culling
    timeout, with a check every ``cull_idle // 5`` seconds (1 to 60); ``preheat`` keeps that
    many kernels per notebook started in advance."""
    import os

    from accesslib.apps.policy import public_mode

    env = dict(os.environ)
    try:
        public = public or public_mode()
    except ValueError:   # refused by _run_app before it gets here; never an open class server
        public = True
    if public:
        env["ACCESSLIB_PUBLIC"] = "1"
    share = hosting_dir()
    configs = ([share / "config-public"] if public else []) + [share / "config"]
    env["JUPYTER_CONFIG_PATH"] = _path_first(configs, env.get("JUPYTER_CONFIG_PATH"))
    env["JUPYTER_PATH"] = _path_first([share], env.get("JUPYTER_PATH"))
    extra = []
    if cull_idle is not None:
        extra += [f"--MappingKernelManager.cull_idle_timeout={int(cull_idle)}",
                  f"--MappingKernelManager.cull_interval={min(60, max(1, int(cull_idle) // 5))}"]
    if preheat:
        extra += ["--VoilaConfiguration.preheat_kernel=True", f"--VoilaConfiguration.default_pool_size={int(preheat)}"]
    argv = [sys.executable, "-m", "voila", *VOILA_FLAGS, f"--port={port}", *extra, "."]
    return argv, notebooks_dir(), env


def _run_app(args) -> int:
    import os

    if _missing_extra("app", "apps", ["voila", "ipywidgets", "ipympl"]):
        return 2
    from accesslib.apps.policy import public_mode

    public = public_mode() or args.public   # a bad ACCESSLIB_PUBLIC is refused here, before the server starts
    argv, folder, env = voila_command(args.port, public, cull_idle=args.cull_idle, preheat=args.preheat)
    if _port_in_use(args.port):
        raise OSError(f"port {args.port} on 127.0.0.1 is in use (another accesslib app or server?): stop it, or "
                      f"serve on another port: accesslib app --port {args.port + 1} (make app PORT={args.port + 1})")
    print(f"\n  accesslib apps: http://127.0.0.1:{args.port}/voila/render/00-index.ipynb"
          f"{'  (public mode)' if public else ''}\n  (Ctrl-C to stop)\n", flush=True)
    os.chdir(folder)
    if os.name == "posix":  # become the server: Ctrl-C and signals reach Voila itself, as with `make app`
        os.execve(sys.executable, argv, env)
    import subprocess
    return subprocess.call(argv, env=env)


def version() -> str:
    """The installed distribution's version (accesslib.__version__ when not installed)."""
    from importlib import metadata

    try:
        return metadata.version("accesslib")
    except metadata.PackageNotFoundError:
        from accesslib import __version__
        return __version__


# --- store -----------------------------------------------------------------------------------
def _add_store_filters(p: argparse.ArgumentParser):
    p.add_argument("--model", nargs="+", metavar="M", help="only these models")
    p.add_argument("--m", type=_POSITIVE_INT, nargs="+", metavar="M", help="only these numbers of vectors")
    p.add_argument("--source", nargs="+", metavar="S", help=f"only these target sources ({', '.join(TARGET_SOURCES)})")
    p.add_argument("--store", help="results store file (default: the one accesslib cram writes to)")


def _add_store(p: argparse.ArgumentParser):
    p.description = ("Get results out of the results store (one row per crammed string): export it "
                     "as CSV or Parquet, print its curves with their n50, read n50 at smaller step budgets from a "
                     "run (also one still going), copy another store's rows in, or back it up while a "
                     "run writes to it.")
    sub = p.add_subparsers(dest="store_command", required=True, parser_class=_Parser, metavar="ACTION")
    ex = sub.add_parser("export", help="write the rows (without memory vectors) as CSV or Parquet",
                        description="Write one row per string (model, m, n, source, seed, protocol hash, "
                                    "success, steps, losses, token ids, ...; no memory vectors) to a file. "
                                    "CSV needs nothing else; Parquet needs pandas and pyarrow.")
    fmt = ex.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", metavar="FILE", help="CSV file ('-': standard output)")
    fmt.add_argument("--parquet", metavar="FILE", help="Parquet file (needs pandas and pyarrow)")
    _add_store_filters(ex)
    ex.set_defaults(_store_run=_run_store_export)
    su = sub.add_parser("summary", help="one line per curve: strings, successes, n50 +- stderr",
                        description="One line per accessibility curve (model, m, source, protocol): "
                                    "strings, successes, lengths and the logistic fit's n50 +- stderr.")
    su.add_argument("--by-length", action="store_true",
                    help="also one row per length of each curve: strings crammed, how the others ended "
                         "(patience, max_steps, a non-finite loss) and at which steps")
    su.add_argument("--patience", type=int, default=None, metavar="P",
                    help="with --by-length: also how many of the crammed strings a run with patience P on "
                         "teacher-forced accuracy would have crammed (read from when each string's best "
                         "accuracy rose; a smaller patience than the run's: a failure under the run's own "
                         "cannot say what a larger one would have done)")
    su.add_argument("--stalls", action="store_true",
                    help="with --by-length: also the longest stall of each crammed string (the most steps "
                         "between two rises of its best teacher-forced accuracy, or from the last rise to "
                         "cramming), the largest and the median per length: near the patience, a larger "
                         "patience would cram more")
    su.add_argument("--ran-on", action="store_true",
                    help="also what each curve's strings ran on (processor and its kernels, torch threads, "
                         "torch, device, transformers, engine code), counted: strings summed on another thread "
                         "count or processor are not bit-identical, and one that went on elsewhere mid-way says so")
    _add_store_filters(su)
    su.set_defaults(_store_run=_run_store_summary)
    la = sub.add_parser("ladder", help="n50 by smaller step budgets, read from a run (also one still going)",
                        description="For each curve in the store: the curve as runs with smaller step budgets "
                                    "(and patience on teacher-forced accuracy) of the same protocol would have "
                                    "measured it, read from the strings the run finished and the ones it is still "
                                    "cramming (one past a budget's steps or patience without cramming has failed "
                                    "there already), and the run's own budget as it stands. Exact for protocols "
                                    "without a learning-rate schedule (e.g. paper).")
    la.add_argument("--budget", nargs="+", required=True, metavar="STEPS/PATIENCE",
                    help="the budgets to read, e.g. 1000/500 3000/500 (at most the run's own)")
    la.add_argument("--plot", metavar="FILE", help="also draw each curve at every budget into FILE (.png, .svg or .pdf)")
    la.add_argument("--decided", action="store_true",
                    help=f"exit with status 0 once no string of the curves shown may still cram within any --budget "
                         f"(every one crammed, failed there, or finished), {LADDER_OPEN} while some may or no curve "
                         f"is there yet: for a script that waits for a budget to be decided")
    _add_store_filters(la)
    la.set_defaults(_store_run=_run_store_ladder)
    mp = sub.add_parser("map", help="n50 over step budgets x patiences, read from a run: which knob limits n50",
                        description="For each curve in the store: n50 at every step budget of --steps with every "
                                    "patience of --patience (the run's own added to both), read from the strings "
                                    "the run finished and the ones it is still cramming, as `store ladder` reads "
                                    "one budget. Per patience it says from which step budget n50 stops moving "
                                    "(every string crammed or out of patience before the step cap), and at the "
                                    "run's steps how n50 grows with the patience. Exact for protocols without a "
                                    "learning-rate schedule and with patience on teacher-forced accuracy (paper).")
    mp.add_argument("--steps", nargs="+", type=int, required=True, metavar="STEPS",
                    help="step budgets, e.g. 500 1000 2000 3000 4500 6000 (at most the run's own)")
    mp.add_argument("--patience", nargs="+", type=int, required=True, metavar="P",
                    help="patiences, e.g. 100 250 500 1000 (at most the run's own)")
    mp.add_argument("--plot", metavar="FILE", help="also draw each map into FILE (.png, .svg or .pdf)")
    mp.add_argument("--mark", metavar="STEPS/PATIENCE", default="3000/500",
                    help="the budget ringed in the plot (default [A]'s 3000/500)")
    _add_store_filters(mp)
    mp.set_defaults(_store_run=_run_store_map)
    co = sub.add_parser("compare", help="two runs of one protocol at one budget: string by string and by n50",
                        description="Compare the runs of two store files at one step budget (e.g. [A]'s 3000/500, "
                                    "read from each as `store ladder` reads it, so also from a larger or still "
                                    "running run): for each curve (model, m, source) both hold, the strings both "
                                    "crammed (how many at the very same step, as a bit-identical run would), the "
                                    "ones only one crammed, both n50 and their difference in combined standard "
                                    "errors. Float rounding (another thread count or CPU) parts two runs of one "
                                    "protocol: they are two samples. Neither file's strings change (an older "
                                    "file gains the columns added since, as on every opening).")
    co.add_argument("other", metavar="OTHER", help="the other store file (B)")
    co.add_argument("--budget", required=True, metavar="STEPS/PATIENCE",
                    help="the budget both are read at, e.g. 3000/500 (at most each run's own)")
    _add_store_filters(co)
    co.set_defaults(_store_run=_run_store_compare)
    pa = sub.add_parser("pace", help="how fast a run goes, against an earlier copy of its store",
                        description="The steps the strings kept mid-way made since an earlier copy of the "
                                    "store (e.g. its last snapshot, `accesslib store backup`), per second: the "
                                    "run's pace (a string the running session took on since then counts from "
                                    "its first step there, not from the copy), and with --to-step when its "
                                    "open strings reach that step at that pace (at the latest: strings that "
                                    "end by their patience or cram finish sooner), and where they end if "
                                    "none of them improves again (each at its last gain plus its run's "
                                    "patience, read from its kept state). Both files are only read.")
    pa.add_argument("--since", required=True, metavar="FILE", help="the earlier copy of the store")
    pa.add_argument("--to-step", type=int, metavar="STEPS", help="the run's step budget (e.g. 9000)")
    pa.add_argument("--running-since", metavar="TIME",
                    help="when the run writing now started (ISO time, e.g. 2026-12-06T18:46:00+00:00): a run "
                         "resumed after the copy was taken counts its pace from then")
    pa.add_argument("--store", help="the store a run writes to (default: the one accesslib cram writes to)")
    pa.set_defaults(_store_run=_run_store_pace)
    me = sub.add_parser("merge", help="copy the rows of another store file into this one",
                        description="Copy every string of FILE (e.g. an older store left in ~/.cache/accesslib) "
                                    "that the store does not hold yet; FILE is only read.")
    me.add_argument("file", metavar="FILE", help="the store file to read")
    me.add_argument("--store", help="the store to copy into (default: the one accesslib cram writes to)")
    me.set_defaults(_store_run=_run_store_merge)
    bk = sub.add_parser("backup", help="write a consistent copy of the store, also while a run writes to it",
                        description="Copy the store into FILE (replaced if it exists) as one self-contained "
                                    "file, safe while accesslib cram or make_bundles.py is writing to it: "
                                    "finished strings and the saved state of unfinished ones. Copy it "
                                    "back and pass it as --store to resume the run where the copy was taken.")
    bk.add_argument("file", metavar="FILE", help="the file to write")
    bk.add_argument("--store", help="the store to copy (default: the one accesslib cram writes to)")
    bk.set_defaults(_store_run=_run_store_backup)


def _open_store(path, *, must_exist=True):
    from accesslib.results.store import ResultsStore, default_path

    if path is None:
        p = default_path()
        if must_exist and not p.is_file():
            raise OSError(f"no results store at {p} yet (accesslib cram writes one; --store PATH reads another)")
    else:
        import os
        p = os.path.expanduser(path)
        if must_exist and not os.path.isfile(p):
            fail("--store", "an existing results store file", path)
    # a command that reads a store (must_exist) changes nothing in it, and reads a read-only file;
    # a bad file raises StoreError: one line naming the file and the cause
    return ResultsStore(p, readonly=must_exist)


def _store_filters(args) -> dict:
    return {k: v for k, v in (("model", args.model), ("m", args.m), ("source", args.source)) if v}


def _output_file(option: str, path: str) -> str:
    import os

    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(folder):
        fail(option, f"a file in an existing folder ({folder} does not exist)", path)
    return os.path.expanduser(path)


def _run_store_export(args) -> int:
    filters = _store_filters(args)
    if args.parquet:
        _need_parquet()
        out = _output_file("--parquet", args.parquet)
        n = _open_store(args.store).to_parquet(out, **filters)
    elif args.csv == "-":
        n = _open_store(args.store).to_csv(sys.stdout, **filters)
        print(f"{n} strings written", file=sys.stderr)
        return 0
    else:
        out = _output_file("--csv", args.csv)
        n = _open_store(args.store).to_csv(out, **filters)
    print(f"wrote {n} strings to {out}")
    return 0


def _need_parquet():
    """ImportError with a one-line message unless pandas and pyarrow are installed."""
    import importlib.util

    missing = [m for m in ("pandas", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"writing Parquet needs {' and '.join(missing)}: pip install {' '.join(missing)} "
                          "(or export --csv FILE, which needs nothing)")


def _protocol_names(store, hashes) -> dict:
    """hash -> 'paper', 'fast', or 'fast, max_steps=30' (a named protocol with a few settings
    changed, read from the settings the store recorded); nothing when torch is missing."""
    import json

    try:
        from accesslib.experiments.curves import hashed_settings, protocol_hash_for
    except ImportError:
        return {}
    named = ("paper", "fast")
    out = {protocol_hash_for(p): p for p in named}
    canon = {p: {k: json.dumps(v, sort_keys=True) for k, v in hashed_settings(p).items()} for p in named}
    for h in hashes:
        settings = store.settings(h)
        if h in out or not settings:
            continue
        have = {k: json.dumps(v, sort_keys=True) for k, v in settings.items()}
        best = None
        for p, base in canon.items():
            diff = sorted(k for k in set(base) | set(have) if base.get(k) != have.get(k))
            if best is None or len(diff) < len(best[1]):
                best = (p, diff)
        p, diff = best
        if len(diff) <= 3:
            parts = ["text targets" if k == "source_text" else f"{k}={have.get(k, 'unset')}" for k in diff]
            out[h] = ", ".join([p] + parts)
    return out


def _run_store_summary(args) -> int:
    import math

    if args.stalls and not args.by_length:
        raise ValueError("--stalls goes with --by-length (it adds a column to that table)")
    if args.patience is not None:
        if not args.by_length:
            raise ValueError("--patience goes with --by-length (it adds a column to that table)")
        if args.patience < 1:
            raise ValueError(f"--patience must be a number of steps >= 1; got {args.patience}")
    store = _open_store(args.store)
    filters = _store_filters(args)
    hashes = {r["protocol_hash"] for r in store.runs()}
    rows = store.summary(_protocol_names(store, hashes), **filters)
    total = sum(r["strings"] for r in rows)
    print(f"store {store.path}: {total} strings in {len(rows)} curves"
          + (f" ({', '.join(f'{k}={v}' for k, v in filters.items())})" if filters else ""))
    kept = store.inflight()
    if kept:
        steps = sorted(k["steps"] for k in kept)
        print(f"{len(kept)} strings kept mid-way (steps {steps[0]}-{steps[-1]}, last kept {kept[-1]['updated_at']}): "
              "the run that crammed them resumes them when started again")
        _print_kept_progress(store)
    finals = store.finals()
    if finals:
        print(f"{finals} finished strings keep the state they finished in: a run of a constant learning rate with "
              "more steps or patience goes on from it (make_bundles.py --extend-from STEPS/PATIENCE)")
    if not rows:
        if args.ran_on and kept:
            _print_kept_ran_on(store)
        return 0
    table = [("model", "m", "source", "protocol", "strings", "successes", "lengths", "n50 +- stderr")]
    for r in rows:
        if math.isfinite(r["n50"]):
            n50 = f"{r['n50']:.1f} +- {r['n50_stderr']:.1f}" + (" (separated)" if r["fit"] == "separated" else "")
        elif r["fit"] == "all_success":
            n50 = f"> {r['n_max']} (all succeeded)"
        elif r["fit"] == "all_fail":
            n50 = f"< {r['n_min']} (all failed)"
        else:
            n50 = f"- ({r['message']})" if r["message"] else "-"
        proto = r["protocol_hash"] + (f" {r['protocol']}" if r["protocol"] else "")
        table.append((r["model"], str(r["m"]), r["source"], proto, str(r["strings"]), str(r["successes"]),
                      f"{r['n_min']}-{r['n_max']} ({r['lengths']})", n50))
    _print_table(table, right={1, 4, 5})
    if kept:
        print("n50 above: of the finished strings only, a biased sample while strings are still being crammed "
              "(the easy ones finish first); `accesslib store ladder --budget STEPS/PATIENCE` counts those too")
    if args.by_length:
        _print_by_length(store, filters, args.patience, args.stalls)
    if args.ran_on:
        print("what the strings ran on:")
        names = {r["protocol_hash"]: r["protocol"] for r in rows}
        _print_table([("model", "m", "source", "protocol", "strings", "ran on")]
                     + [(e["model"], str(e["m"]), e["source"],
                         e["protocol_hash"] + (f" {names[e['protocol_hash']]}" if names.get(e["protocol_hash"]) else ""),
                         str(e["strings"]), e["ran_on"]) for e in store.environments(**filters)], right={1, 4})
        if kept:
            _print_kept_ran_on(store)
    return 0


def _print_kept_ran_on(store) -> None:
    """What the strings kept mid-way ran on so far, counted (nothing when torch is missing)."""
    try:
        from accesslib.engine.cramming import kept_states
    except ImportError:
        return
    from collections import Counter

    from accesslib.results.store import describe_ran_on

    counts = Counter(describe_ran_on(k["ran_on"]) for k in kept_states(store)["states"])
    print("what the strings kept mid-way ran on so far:")
    _print_table([("kept", "ran on")] + [(str(c), label) for label, c in sorted(counts.items())], right={0},
                 indent="  ")


def _parse_budgets(items, flag: str = "--budget") -> list[tuple[int, int]]:
    out = []
    for item in items:
        parts = item.split("/")
        if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
            fail(flag, "STEPS/PATIENCE pairs of whole numbers >= 1, e.g. 3000/500", item)
        out.append((int(parts[0]), int(parts[1])))
    return out


def _ladder_comparisons(rungs) -> list[str]:
    """Each rung against the first with 3x its steps (:data:`bundling.LADDER_FACTOR`): moved or not,
    in combined standard errors, also where the larger one still has strings open."""
    from accesslib.experiments.bundling import LADDER_FACTOR, open_rung_moved, rungs_moved
    from accesslib.results.bundles import binding_shared_patience, shift_text

    out = []
    for i, a in enumerate(rungs):
        b = next((r for r in rungs[i + 1:] if r["max_steps"] >= LADDER_FACTOR * a["max_steps"]), None)
        if b is None or any(a["open"]) or a["unknown"] or b["unknown"]:
            continue
        pair = f"{a['max_steps']:,} / {a['patience']:,} -> {b['max_steps']:,} / {b['patience']:,}:"
        if any(b["open"]):
            moved, shift = open_rung_moved(a, b)
            rg = b.get("n50_range") or {}
            if moved:
                left = (f" ({rg['unlocated']} of the {rg['ways']} ways locate no n50)" if rg.get("unlocated") else "")
                out.append(f"{pair} moved, by at least {shift_text(shift)} combined stderr, however the open strings "
                           f"end{left}")
            else:
                out.append(f"{pair} not decided while strings are open")
            continue
        moved, shift, bound = rungs_moved(a, b)
        if moved is None:
            out.append(f"{pair} cannot tell (no n50 located on one side)")
        else:
            size = "" if shift is None else f" ({'at least ' if bound else ''}{shift_text(shift)} combined stderr)"
            same = binding_shared_patience(a, b)
            out.append(f"{pair} {'moved' if moved else 'did not move'}{size}"
                       + (f", at the same patience ({same:,}): the patience was not checked"
                          if same is not None and not moved else ""))
    return out


def _plural(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")



def _waiting_text(c) -> str:
    """", 11 of the 9,000 / 1,500 run's strings not reached yet (counted open)" for a run going on
    from a smaller one's strings (:func:`accesslib.experiments.bundling.live_ladder`'s ``waiting``)."""
    if not c.get("waiting"):
        return ""
    a, b = c["extends"]
    return f", {c['waiting']} of the {a:,} / {b:,} run's strings not reached yet (counted open)"

def _rung_n50(rung) -> str:
    """A rung's n50 as :func:`accesslib.results.bundles.rung_n50_text` words it, with the CLI's
    ASCII "+-": "20.1 +- 1.8", "> 46 (all crammed at 46)", "< 6 (none crammed at 6)"."""
    from accesslib.results.bundles import rung_n50_text

    return rung_n50_text(rung).replace(" ± ", " +- ")


def _live_rung_n50(r) -> str:
    """A :func:`accesslib.experiments.bundling.live_ladder` rung's n50 in words: where it can still
    end while strings are open, why there is none, or :func:`_rung_n50`."""
    from accesslib.results.bundles import open_range_text

    if any(r["open"]):
        return (open_range_text(r) or f"{_rung_n50(r['if_all_fail'])} if all open fail, "
                f"{_rung_n50(r['if_all_cram'])} if all cram") if "if_all_fail" in r else "- (open)"
    if r["unknown"]:
        return f"- ({_plural(r['unknown'], 'crammed string')} without an accuracy history)"
    return _rung_n50(r)


#: ``accesslib store ladder --decided``: the exit status while a budget is not decided yet
LADDER_OPEN = 3


def slope_range_text(rg: dict | None) -> str:
    """Where a slope with strings open can still end (``bundling.open_slope_range``), as `store
    ladder` appends it: "; a = 16.95 or more however the open strings end", "" where nothing is
    known."""
    lo, hi = (rg or {}).get("low"), (rg or {}).get("high")
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f"; a = {lo:.2f} or more however the open strings end"
    if lo is None:
        return f"; a = {hi:.2f} or less however the open strings end"
    return f"; a between {lo:.2f} and {hi:.2f} however the open strings end"


def _plot_file(path) -> str | None:
    """``--plot FILE``: a writable file ending in .png, .svg or .pdf, or None without one."""
    if not path:
        return None
    plot = _output_file("--plot", path)
    if not plot.lower().endswith((".png", ".svg", ".pdf")):
        fail("--plot", "a file ending in .png, .svg or .pdf", path)
    return plot


def _run_store_ladder(args) -> int:
    from accesslib.experiments.bundling import ladder_slopes, live_ladder
    from accesslib.plots.cramming import rung_label

    budgets = _parse_budgets(args.budget)
    plot = _plot_file(args.plot)
    store = _open_store(args.store)
    got = live_ladder(store, budgets, **_store_filters(args))
    curves = got["curves"]
    for k, what in ((got["unclaimed"], "kept strings that name no run of the store (none of their run's strings "
                                        "has finished yet)"),
                    (got["unreadable"], "kept states that could not be read (damaged, or written by another program)")):
        if k:
            print(f"{what}: {k}, counted in no rung")
    labels: dict = {}
    if not curves:
        print(f"store {store.path}: no string finished or kept" + (" matches the filters" if _store_filters(args)
                                                                   else "")
              + " (a rung is read from a run once one of its strings has finished)")
        return LADDER_OPEN if args.decided else 0
    for c in curves:
        kept = (f", {c['kept']} still being crammed (steps {c['kept_steps'][0]}-{c['kept_steps'][1]})"
                if c["kept"] else "")
        budget = "" if c["max_steps"] is None else f" ({c['max_steps']:,} steps, patience {c['patience']:,})"
        print(f"{c['model']}, m = {c['m']}, {c['source']}, protocol {c['protocol_hash']}{budget}: "
              f"{_plural(c['finished'], 'string')} finished{kept}{_waiting_text(c)}")
        for why in dict.fromkeys(c["refused"]):
            print(f"  not read: {why}")
        if not c["rungs"]:
            continue
        lengths = c["rungs"][0]["lengths"]
        table = [("budget",) + tuple(f"n={n}" for n in lengths) + ("n50",)]
        notes = []
        for r in c["rungs"]:
            cells = tuple(f"{s}/{t}" + (f" +{o}?" if o else "")
                          for s, t, o in zip(r["successes"], r["totals"], r["open"]))
            label = f"{r['max_steps']:,} / {r['patience']:,}" + (" (the run's)" if r["own"] else "")
            n50 = _live_rung_n50(r)
            table.append((label,) + cells + (n50,))
            labels.setdefault(id(c), []).append(f"{rung_label(r)}: n50 {n50}")
        _print_table(table, right=set(range(1, len(lengths) + 1)), indent="  ")
        if any(any(r["open"]) for r in c["rungs"]):
            notes.append("+k?: strings still being crammed that may cram within that budget")
        if c.get("restarts"):
            first = f"{c['extends'][0]:,} / {c['extends'][1]:,}"
            notes.append(f"{_plural(c['restarts'], 'string')} crammed again from the start (the {first} run "
                         f"kept no final state for them): read at every budget from this run's own steps; "
                         f"{c['parted']} of them took other steps than the {first} run so far")
        notes += _ladder_comparisons(c["rungs"])
        for note in notes:
            print(f"  {note}")
    for run in ladder_slopes(curves):
        print(f"slope n50 = a*m + b over m = {', '.join(map(str, run['ms']))}: {run['model']}, {run['source']}, "
              f"protocol {run['protocol_hash']}")
        for e in run["budgets"]:
            budget = f"  {e['max_steps']:,} / {e['patience']:,}:"
            if e["slope"] is None:
                print(f"{budget} not yet ({e['why']}){slope_range_text(e.get('slope_range'))}")
                continue
            se = "" if e["slope_stderr"] is None else f" +- {e['slope_stderr']:.1f}"
            r2 = "" if e["r2"] is None else f", R^2 {e['r2']:.3f}"
            print(f"{budget} a = {e['slope']:.2f}{se} tokens per vector, b = {e['intercept']:.1f}{r2} "
                  f"(n50 {', '.join(f'{v:.1f}' for v in e['n50'])})")
        own = next((c["max_steps"], c["patience"]) for c in curves
                   if (c["model"], c["source"], c["protocol_hash"]) == (run["model"], run["source"], run["protocol_hash"]))
        done = [e for e in run["budgets"] if e["slope"] is not None and (e["max_steps"], e["patience"]) != own]
        # a store with several runs of this source (a larger one extending it) needs the run named
        several = len({(c["max_steps"], c["patience"]) for c in curves
                       if (c["model"], c["source"]) == (run["model"], run["source"])}) > 1
        if done:
            e = done[-1]
            print(f"  as a bundle (every m, its slope and its check against the run's budget): python "
                  f"scripts/make_bundles.py --read-budget {e['max_steps']}/{e['patience']} --models {run['model']} "
                  f"--source {run['source']}" + (f" --read-from {own[0]}/{own[1]}" if several else "")
                  + f" --store {store.path} --out DIR")
    if plot:
        _plot_ladders(curves, plot, labels)
        print(f"plot: {plot}")
    if args.decided:
        asked = set(budgets)
        still = sum(sum(r["open"]) for c in curves for r in c["rungs"] if (r["max_steps"], r["patience"]) in asked)
        said = ", ".join(f"{a:,} / {b:,}" for a, b in sorted(asked))
        print(f"decided: every string's outcome within {said} is known" if not still else
              f"not decided: {_plural(still, 'string')} may still cram within {said}")
        return LADDER_OPEN if still else 0
    return 0


def _run_store_map(args) -> int:
    from accesslib.experiments.bundling import budget_map, map_slopes
    from accesslib.results.bundles import budget_map_lines, map_cell_text, map_slope_lines

    for flag, values in (("--steps", args.steps), ("--patience", args.patience)):
        bad = [v for v in values if v < 1]
        if bad:
            fail(flag, "whole numbers >= 1", bad[0])
    mark = _parse_budgets([args.mark], "--mark")[0]
    plot = _plot_file(args.plot)
    store = _open_store(args.store)
    got = budget_map(store, args.steps, args.patience, **_store_filters(args))
    if not got["maps"]:
        print(f"store {store.path}: no curve with protocol settings" + (" matches the filters"
                                                                      if _store_filters(args) else ""))
        return 0
    for mp in got["maps"]:
        kept = (f", {mp['kept']} still being crammed (steps {mp['kept_steps'][0]}-{mp['kept_steps'][1]})"
                if mp["kept"] else "")
        print(f"{mp['model']}, m = {mp['m']}, {mp['source']}, protocol {mp['protocol_hash']} ({mp['run'][0]:,} "
              f"steps, patience {mp['run'][1]:,}): {_plural(mp['finished'], 'string')} finished{kept}"
              f"{_waiting_text(mp)}; "
              f"n50 by step budget (rows) and patience (columns)")
        table = [("steps \\ patience",) + tuple(f"{p:,}" for p in mp["patiences"])]
        for s, row in zip(mp["steps"], mp["cells"]):
            table.append((f"{s:,}",) + tuple(_ascii(map_cell_text(c, mp["lengths"], stderr=True)) for c in row))
        _print_table(table, right=set(range(len(table[0]))), indent="  ")
        for line in budget_map_lines(mp, mark):
            print(f"  {_ascii(line)}")
    for run in map_slopes(got["maps"]):
        print(f"{run['model']}, {run['source']}, protocol {run['protocol_hash']}:")
        own = {tuple(mp["run"]) for mp in got["maps"] if (mp["model"], mp["source"], mp["protocol_hash"])
               == (run["model"], run["source"], run["protocol_hash"])}
        for line in map_slope_lines(run, sorted({mark[0]} | {s for s, _ in own})):
            print(f"  {_ascii(line)}")
    if plot:
        _plot_maps(got["maps"], plot, mark)
        print(f"plot: {plot}")
    return 0


def _ascii(text: str) -> str:
    """The words of :mod:`accesslib.results.bundles` for a terminal: "±" as "+-", "≥" as ">=",
    "≤" as "<=", as the other store commands print them."""
    return text.replace("±", "+-").replace("≥", ">=").replace("≤", "<=")


def _plot_maps(maps, path, mark) -> None:
    """Both panels of :func:`accesslib.plots.cramming.draw_budget_map` per map into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from accesslib.plots.cramming import draw_budget_map
    from accesslib.results.bundles import map_texts

    fig, axes = plt.subplots(len(maps), 2, figsize=(11, 4.4 * len(maps)), squeeze=False, layout="constrained")
    for (a, b), mp in zip(axes, maps):
        draw_budget_map(a, b, mp, map_texts(mp), mark=mark)
        a.set_title(f"{mp['model']}, m = {mp['m']}, {mp['source']}: n50 against the step budget",
                    fontsize=a.title.get_fontsize())
    fig.savefig(path, dpi=120, facecolor="white")
    plt.close(fig)


def _plot_ladders(curves, path, labels) -> None:
    """One panel per curve of :func:`accesslib.experiments.bundling.live_ladder` into ``path``,
    each rung labelled by ``labels[id(curve)]`` (its budget and n50 as the table gives them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from accesslib.plots.cramming import plot_ladder

    fig, axes = plt.subplots(len(curves), 1, figsize=(8, 4.2 * len(curves)), squeeze=False)
    for ax, c in zip(axes[:, 0], curves):
        plot_ladder(ax, c, [label.replace(" +- ", " ± ") for label in labels.get(id(c), [])] or None)
    fig.tight_layout()
    fig.savefig(path, dpi=120, facecolor="white", bbox_inches="tight")
    plt.close(fig)


def _steps_range(steps) -> str:
    return "-" if not steps else f"{min(steps)}" + (f"-{max(steps)}" if max(steps) != min(steps) else "")


def _crammed_with_patience(rows, patience: int) -> str:
    """How many of the crammed ``rows`` a run with ``patience`` on teacher-forced accuracy would
    have crammed too (its stop, :func:`accesslib.results.bundles.patience_stop`, not before the
    step where the string crammed); "+k unknown" for strings kept without an accuracy history."""
    from accesslib.results.bundles import patience_stop

    known = [r for r in rows if r["success"] and r.get("accuracy_history")]
    k = sum(patience_stop(r["accuracy_history"], patience) >= int(r["steps"]) for r in known)
    unknown = sum(1 for r in rows if r["success"]) - len(known)
    return f"{k}" + (f" (+{unknown} unknown)" if unknown else "")


def _longest_stalls(rows) -> str:
    """The longest stall of each crammed string of ``rows`` (:func:`accesslib.results.bundles.longest_stall`):
    "max / median" over them, "+k unknown" for strings kept without an accuracy history."""
    import statistics

    from accesslib.results.bundles import longest_stall

    got = [longest_stall(r["accuracy_history"], int(r["steps"])) for r in rows
           if r["success"] and r.get("accuracy_history")]
    unknown = sum(1 for r in rows if r["success"]) - len(got)
    text = "-" if not got else f"{max(got)} / {statistics.median(got):g}"
    return text + (f" (+{unknown} unknown)" if unknown else "")


def _print_by_length(store, filters, patience=None, stalls=False) -> None:
    """The finished strings per curve and length: how many crammed and at which steps, and how the
    others ended (patience, max_steps, non-finite loss) and at which steps. Under a patience rule
    this says whether the step budget or the patience ends the strings that fail. ``patience``:
    also how many of the crammed a run with that (smaller) patience would have crammed; ``stalls``:
    also the longest stall of the crammed strings (max / median)."""
    groups: dict = {}
    for r in store.rows(**filters):
        key = (r["model"], r["source"], r["protocol_hash"], r["m"], r["n"])
        groups.setdefault(key, []).append(r)
    extra = ((f"crammed, patience {patience}",) if patience else ()) + (("longest stall, max / median",) if stalls
                                                                      else ())
    table = [("model", "source", "protocol", "m", "n", "strings", "crammed", "steps") + extra
             + ("patience", "max_steps", "other", "steps (not crammed)")]
    for (model, source, ph, m, n), rs in sorted(groups.items()):
        ok = [int(r["steps"]) for r in rs if r["success"]]
        failed = [r for r in rs if not r["success"]]
        why = [r.get("reason") for r in failed]
        table.append((model, source, ph, str(m), str(n), str(len(rs)), str(len(ok)), _steps_range(ok))
                     + ((_crammed_with_patience(rs, patience),) if patience else ())
                     + ((_longest_stalls(rs),) if stalls else ())
                     + (str(why.count("patience")), str(why.count("max_steps")),
                        str(len(why) - why.count("patience") - why.count("max_steps")),
                        _steps_range([int(r["steps"]) for r in failed if r.get("steps") is not None])))
    print("finished strings by length (steps: the range over the strings):")
    _print_table(table, right=set(range(3, 11 + len(extra))), indent="  ")


def _print_table(table, right=(), indent="") -> None:
    """Rows of strings in aligned columns (the columns in ``right`` aligned right)."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print(indent + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))).rstrip())


def _print_kept_progress(store) -> None:
    """Where the strings kept mid-way stand, per (m, n): steps, best loss and best teacher-forced
    accuracy so far (nothing when torch, which reads the states, is missing)."""
    import statistics

    try:
        from accesslib.engine.cramming import kept_progress
    except ImportError:
        return
    got = kept_progress(store)
    table = [("m", "n", "kept", "steps", "best loss", "best teacher-forced accuracy (min / median / max)")]
    for g in got["lengths"]:
        acc = g["best_accuracy"]
        table.append((str(g["m"]), str(g["n"]), str(g["strings"]),
                      f"{g['steps'][0]}" + (f"-{g['steps'][1]}" if g["steps"][1] != g["steps"][0] else ""),
                      f"{g['best_loss']:.3g}",
                      f"{acc[0]:.2f} / {statistics.median(acc):.2f} / {acc[-1]:.2f}" if acc else "- (not tracked)"))
    if len(table) > 1:
        _print_table(table, right={0, 1, 2, 3, 4}, indent="  ")
    if got["unreadable"]:
        print(f"  {got['unreadable']} kept states could not be read (damaged, or written by another program)")


def _run_store_compare(args) -> int:
    import os

    from accesslib.experiments.compare import compare_runs

    (budget,) = _parse_budgets([args.budget])
    store = _open_store(args.store)
    other = os.path.expanduser(args.other)
    if not os.path.isfile(other):
        fail("OTHER", "an existing results store file", args.other)
    for c in compare_runs(store.path, _open_store(other).path, budget, **_store_filters(args)):
        print(f"{c['model']}, m = {c['m']}, {c['source']}, at {budget[0]:,} / {budget[1]:,}:")
        lengths = sorted(set(c["a"]["rung"]["lengths"]) | set(c["b"]["rung"]["lengths"]))
        table = [("run", "store", "protocol (its budget)") + tuple(f"n={n}" for n in lengths) + ("n50",)]
        for name in ("a", "b"):
            side, r = c[name], c[name]["rung"]
            cell = {n: f"{s}/{t}" + (f" +{o}?" if o else "")
                    for n, s, t, o in zip(r["lengths"], r["successes"], r["totals"], r["open"])}
            table.append((name.upper(), side["store"],
                          f"{side['protocol_hash']} ({side['max_steps']:,} / {side['patience']:,})")
                         + tuple(cell.get(n, "-") for n in lengths) + (_live_rung_n50(r),))
        _print_table(table, right=set(range(3, 3 + len(lengths))), indent="  ")
        for name in ("a", "b"):
            print(f"  {name.upper()} ran on: " + "; and ".join(f"{label} ({_plural(k, 'string')})"
                                                            for label, k in c[name]["ran_on"].items()))
        parts = [f"{c['both']} crammed in both ({c['same_step']} at the same step)", f"{c['only_a']} only in A",
                 f"{c['only_b']} only in B", f"{c['neither']} failed in both"]
        if c["open"]:
            parts.append(f"{c['open']} open in either")
        print(f"  {_plural(c['strings'], 'string')} in both: {', '.join(parts)}"
              + "".join(f"; {k} held only by {x}" for k, x in ((c["only_in_a"], "A"), (c["only_in_b"], "B")) if k))
        if c["n50_diff"] is not None:
            z = "" if c["z"] is None else f" ({abs(c['z']):.1f} combined standard errors)"
            print(f"  n50: A - B = {c['n50_diff']:+.1f}{z}")
        else:
            print("  n50: no difference yet (a rung still open, or without a fitted n50)")
    return 0


def _run_store_pace(args) -> int:
    import os
    from datetime import datetime, timedelta

    from accesslib.results.store import kept_pace, read_inflight

    since = os.path.expanduser(args.since)
    if not os.path.isfile(since):
        fail("--since", "an existing results store file (an earlier copy of the store)", args.since)
    if args.to_step is not None and args.to_step < 1:
        fail("--to-step", "a positive number of steps", args.to_step)
    if args.running_since is not None:
        try:
            if datetime.fromisoformat(args.running_since).utcoffset() is None:
                raise ValueError
        except ValueError:
            fail("--running-since", "an ISO time with its UTC offset (e.g. 2026-12-06T18:46:00+00:00)",
                 args.running_since)
    from accesslib.engine.cramming import kept_ends, kept_states

    store = _open_store(args.store)
    now = store.inflight()
    states = kept_states(store)["states"]
    # where each string's kept state says when this session took it on (model loaded, store read back)
    went = {k["key"]: k["went_on"] for k in states}
    now = [dict(k, went_on=went.get(k["key"])) for k in now]
    # the earlier copy is only read, never changed
    pace = kept_pace(now, read_inflight(since), running_since=args.running_since)
    if pace is None:
        print(f"{len(now)} strings kept mid-way; none saved again since {since}: no pace to tell yet")
        _print_kept_ends(kept_ends(states), None)
        return 0
    line = (f"{pace['strings']} strings went on since {since}: {pace['seconds_per_step']:.2f} s per step "
            f"(median string: {pace['steps']:,} steps in {timedelta(seconds=round(pace['seconds']))})")
    if args.to_step is not None:
        left = max(args.to_step - pace["lowest_step"], 0)
        hours = left * pace["seconds_per_step"] / 3600
        line += (f"; the {pace['open']} open strings reach step {args.to_step:,} in at most {hours:.1f} hours at "
                 f"that pace ({left:,} steps from the least advanced; fewer if they cram or end by patience)")
    print(line)
    _print_kept_ends(kept_ends(states), pace["seconds_per_step"] / pace["open"])
    return 0


def _print_kept_ends(ends: dict | None, seconds_per_string_step: float | None) -> None:
    """The line of `accesslib store pace` that says where the open strings end if none of them
    improves again (:func:`accesslib.engine.cramming.kept_ends`): the earliest a run can end by its
    patience alone, against the latest its step budget allows."""
    if ends is None:
        return
    what = {"accuracy": "teacher-forced accuracy", "loss": "loss"}
    on = " or ".join(what.get(p, p) for p in ends["patience_on"]) or "patience measure"
    patience = " or ".join(f"{p:,}" for p in ends["patience"])
    one = ends["strings"] == 1
    line = (f"if no string improves its {on} again, the {_plural(ends['strings'], 'open string')} "
            f"end{'s' if one else ''} by {'its' if one else 'their'} patience ({patience} steps): "
            f"{'' if one else 'the last '}at step {ends['last_step']:,}, {ends['steps_left']:,} steps in all")
    if seconds_per_string_step is not None:
        hours = ends["steps_left"] * seconds_per_string_step / 3600
        line += f", about {hours:.1f} hours at that pace"
    budget = " or ".join(f"{b:,}" for b in ends["max_steps"])
    print(line + "; one that crams ends sooner, one that improves goes on"
          + (f" (to step {budget} at most)" if budget else ""))


def _run_store_merge(args) -> int:
    import os

    src = os.path.expanduser(args.file)
    if not os.path.isfile(src):
        fail("FILE", "an existing results store file", args.file)
    store = _open_store(args.store, must_exist=False)
    n = store.merge(src)
    print(f"copied {n} new strings from {src} into {store.path} ({store.count()} in all)")
    return 0


def _run_store_backup(args) -> int:
    from accesslib.results.store import backup_store

    store = _open_store(args.store)
    dest = _output_file("FILE", args.file)
    n, kept = backup_store(store.path, dest)
    print(f"wrote {dest}: {n} finished strings" + (f" and the saved state of {kept} unfinished ones" if kept else ""))
    return 0


def _run_store(args) -> int:
    """Every error of a store action is one line and exit status 2."""
    import sqlite3

    try:
        return int(args._store_run(args) or 0)
    except (ImportError, OSError, sqlite3.Error, RuntimeError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"accesslib store {args.store_command}: error: {msg}", file=sys.stderr)
        return 2


# --- check-model -----------------------------------------------------------------------------
def _add_check_model(p: argparse.ArgumentParser):
    p.add_argument("name", metavar="NAME",
                   help="embedded or offline short name, local directory, hub name, or tiny:FAMILY[:d]")
    p.add_argument("--against", metavar="PATH_OR_HUB_NAME",
                   help="compare the logits with this model (a local directory, or a hub name in the "
                        "local hub cache), loaded in float32")
    p.add_argument("--tokens", type=_POSITIVE_INT, default=20, help="greedy tokens per prompt (default 20)")
    p.add_argument("--support", action="store_true",
                   help="measure the final hidden state under every reading (before/after the final norm, "
                        "gain w or 1 + w, dtypes, last or all positions; docs/gemma.md)")
    p.add_argument("--dtypes", nargs="+", choices=("float32", "bfloat16", "float16"), default=["float32"],
                   help="--support: dtypes to run the model in (default float32)")
    p.add_argument("--lengths", type=_POSITIVE_INT, nargs="+", metavar="L", default=[4, 8, 16, 32, 64, 128],
                   help="--support: random-token sequence lengths (default 4 8 16 32 64 128)")
    p.add_argument("--per-length", type=_POSITIVE_INT, default=200, help="--support: sequences per length")
    p.add_argument("--untrained", action="store_true",
                   help="--support: measure a randomly initialised model of the same config instead")
    p.add_argument("--norm-weight", type=float, default=None,
                   help="--support: measure a copy with every norm weight set to this value (with "
                        "--untrained: of the untrained model; default: leave the weights)")
    p.add_argument("--seed", type=arg_type(check_seed), default=0, help="seed (0..2**64 - 1)")
    p.add_argument("--json", metavar="FILE", help="write everything printed as JSON here")
    p.add_argument("--threads", type=_POSITIVE_INT, help="torch CPU threads")
    p.add_argument("--no-progress", action="store_true")


def _run_check_model(args) -> int:
    import json
    import math

    from accesslib.models import check

    out = _output_file("--json", args.json) if args.json else None
    if (args.untrained or args.norm_weight is not None) and not args.support:
        fail("--support", "given with --untrained and --norm-weight", False)
    if args.against:   # a missing directory is refused before the (slow) model loads
        check.check_reference(args.against, what="--against")
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    lm = _load(args.name, "float32", "cpu")
    f = lm.facts
    print(f"model {f.name}: {f.family}, d={f.d}, |V|={f.vocab_size:,}, {f.n_params:,} parameters, {f.dtype} "
          f"(source {f.source})")
    rec = {"model": f.name, "facts": {k: getattr(f, k) for k in f.__dataclass_fields__}}
    conts = check.continuations(lm, n_tokens=args.tokens)
    print(f"greedy continuations ({args.tokens} tokens at most):")
    for c in conts:
        print(f"  {c.prompt!r} -> {c.text!r}")
    rec["continuations"] = [vars(c) for c in conts]
    fp = check.fingerprint(lm)
    print("logits fingerprint:")
    for line in fp.lines():
        print("  " + line)
    rec["fingerprint"] = fp.as_dict()
    if args.against:
        ref = check.load_reference(args.against, what="--against")
        cmp = check.compare_models(lm, ref)
        print(f"against {args.against}: {cmp.summary()}")
        rec["against"] = {"name": args.against, "fingerprint": check.fingerprint(ref, fp.ids).as_dict(),
                          "comparison": cmp.as_dict()}
    if args.support:
        from accesslib.engine.geometry import min_pairwise_cosine
        if args.untrained:
            model = check.untrained_like(lm, norm_weight=args.norm_weight, seed=args.seed)
        else:
            model = lm if args.norm_weight is None else check.with_norm_weight(lm, args.norm_weight)
        table = check.support_readings(model, lengths=args.lengths, per_length=args.per_length,
                                       dtypes=args.dtypes, seed=args.seed, min_cosine=min_pairwise_cosine,
                                       progress=not args.no_progress)
        weights = "as initialised" if args.norm_weight is None else args.norm_weight
        print("support readings" + (f" of an untrained copy (seed {args.seed}, norm weights {weights})"
                                    if args.untrained else "") +
              (f" of a copy with every norm weight {args.norm_weight}"
               if args.norm_weight is not None and not args.untrained else "") + ":")
        for line in table.lines():
            print("  " + line)
        rec["support"] = dict(table.as_dict(), untrained=bool(args.untrained), norm_weight=args.norm_weight)
    if out:
        def clean(v):   # NaN (a non-finite reading) as null: strict JSON
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v
        with open(out, "w") as fh:
            json.dump(clean(rec), fh, indent=1)
        print(f"wrote {out}")
    return 0


#: name -> (add_arguments(parser), run(args) -> exit code, one-line help): every subcommand
SUBCOMMANDS = {
    "cram": (_add_cram, _run_cram, "measure accessibility curves, n50 per m and the slope"),
    "geometry": (_add_geometry, _run_geometry,
                 "measure the support, decoder cells and effective eps; print every refined slope"),
    "bound": (_add_bound, _run_bound,
              "the counting bound at one setting (d, |V|, eps, r) or of a model: C, n* and n50 per m"),
    "sweep": (_add_sweep, _run_sweep,
              "run a cramming sweep (YAML file) on Dask: local processes or a cluster"),
    "app": (_add_app, _run_app, "serve the notebooks as Voila web apps on 127.0.0.1 (needs accesslib[apps])"),
    "store": (_add_store, _run_store,
              "the results store: export it (CSV, Parquet), summarise its curves, merge another in"),
    "check-model": (_add_check_model, _run_check_model,
                    "is a model the real one? greedy continuations, a logits fingerprint, a comparison "
                    "with another copy; the support under every reading"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="accesslib", description="How many outputs can a transformer generate?")
    parser.add_argument("--version", action="version", version=f"accesslib {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add, run, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        add(p)
        p.set_defaults(_run=run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"accesslib {args.command}: interrupted", file=sys.stderr)
        return 130
    except ValueError as e:  # argument checks, and the results store's StoreError (a ValueError)
        print(f"accesslib {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:
        print(f"accesslib {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    except Exception as e:  # a SQLite error outside the results store (which raises StoreError)
        import sqlite3
        if not isinstance(e, sqlite3.Error):
            raise
        print(f"accesslib {args.command}: error: SQLite: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
