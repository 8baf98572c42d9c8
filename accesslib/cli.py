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

Every subcommand is in ``SUBCOMMANDS`` (name -> (add_arguments, run, help)); the modules it runs
are imported when the subcommand runs, so ``--help`` stays fast. Bad arguments give a one-line
error and exit code 2 (argument values are checked by :mod:`accesslib._checks`, in its one style).
"""
from __future__ import annotations

import argparse
import sys

from accesslib._checks import arg_type, check_float, check_int, fail

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
    p.add_argument("--source", choices=("natural", "words", "tokens"), default="natural",
                   help="target strings: natural text, random words, uniform random tokens")
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
    p.add_argument("--seed", type=_COUNT, default=0, help="seed of the targets and the initial memory")
    p.add_argument("--precision", type=_POSITIVE_FLOAT, default=0.02,
                   help="bisect search: target relative stderr of n50 (default 0.02)")
    p.add_argument("--max-length", type=_POSITIVE_INT, default=1000, help="longest target (default 1000)")
    p.add_argument("--store", help="results store file (default: ACCESSLIB_HOME/results.sqlite)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--threads", type=_POSITIVE_INT, help="torch CPU threads")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _load(name: str, dtype: str, device: str):
    from accesslib.models import loading as models
    if name.startswith("tiny:"):
        parts = name.split(":")
        family = parts[1] if len(parts) > 1 else ""
        d = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 32
        if len(parts) > 3 or (len(parts) > 2 and not parts[2].isdigit()):
            fail("--model", "tiny:FAMILY or tiny:FAMILY:d for a tiny random model", name)
        return models.tiny_model(family, d=d)
    return models.load_model(name, dtype=dtype, device=device)


def _run_cram(args) -> int:
    from accesslib.experiments.curves import accessibility_curve
    from accesslib.results.store import ResultsStore
    from accesslib.theory.stats import fit_slope

    if args.search == "grid" and not args.lengths:
        fail("--lengths", "given with --search grid", args.lengths)
    if args.lengths and args.search not in (None, "grid"):
        fail("--search", "grid (or left out) when --lengths is given", args.search)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    lm = _load(args.model, args.dtype, args.device)
    store = ResultsStore(args.store) if args.store else ResultsStore()
    overrides = dict(max_steps=args.max_steps, patience=args.patience, lr=args.lr)
    if args.bos:
        from accesslib.engine.cramming import default_prefix
        overrides["prefix_ids"] = default_prefix(lm) or None
    total = len(args.m) * len(args.lengths) * args.samples if args.lengths else None
    bar = None
    if not args.no_progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, unit="str", desc="cram", file=sys.stderr)

    def on_string(row):
        if bar is not None:
            bar.update(1)
            bar.set_postfix(m=row["m"], n=row["n"], ok=int(row["success"]))

    fits, ms = [], []
    print(f"model {lm.facts.name} (d={lm.facts.d}, |V|={lm.facts.vocab_size}), source {args.source}, "
          f"protocol {args.protocol}, store {store.path}", flush=True)
    try:
        for m in args.m:
            if bar is not None:
                bar.set_description(f"cram m={m}")
            start = None  # bisect: start near the n50 that the last m predicts (n50 ~ m)
            if not args.lengths and args.search in (None, "bisect") and fits and fits[-1].ok:
                start = max(2, int(fits[-1].n50 * m / ms[-1]))
            curve = accessibility_curve(lm, m, lengths=args.lengths, start=start, samples=args.samples, source=args.source,
                                        seed=args.seed, store=store, search=args.search, protocol=args.protocol,
                                        precision=args.precision, max_length=args.max_length,
                                        on_string=on_string, **overrides)
            if bar is not None and curve.strings_from_store:
                bar.update(curve.strings_from_store)
            fit = curve.fit()
            fits.append(fit)
            ms.append(m)
            pts = ", ".join(f"{n}:{s}/{t}" for n, s, t in zip(curve.lengths, curve.successes, curve.totals))
            line = (f"m={m}: n50 = {fit.n50:.1f} +- {fit.stderr:.1f}  (k={fit.k:.3g}, {fit.method})"
                    if fit.ok else f"m={m}: n50 not found: {fit.message}")
            (bar.write if bar is not None else print)(
    f"{line}; {curve.strings_crammed} crammed, {curve.strings_from_store} from store; {pts}")
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"interrupted: finished strings are in {store.path}; run the same command again to resume",
              file=sys.stderr)
        return 130
    if bar is not None:
        bar.close()
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
    p.add_argument("--seed", type=_COUNT, default=0)
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
    p.add_argument("--dry-run", action="store_true", help="list the jobs and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _run_sweep(args) -> int:
    """Exit status 0 done, 1 failed jobs, 130 interrupted (a bad description: 2, from main)."""
    from accesslib.experiments import sweep

    spec = sweep.load_spec(args.file, store=args.store, workers=args.workers)
    if args.dry_run:
        jobs = spec.jobs()
        print(f"{len(jobs)} jobs, store {spec.store_path()}")
        for j in jobs:
            print(" ", j.key)
        return 0
    try:
        report = sweep.run_sweep(spec, scheduler=args.scheduler, progress=not args.no_progress,
                                 write=args.write)
    except KeyboardInterrupt:
        print("\ninterrupted: finished strings are in the store; run the same command to resume")
        return 130
    print(f"{report.done} jobs run, {report.skipped} already done, {report.crammed} strings crammed "
          f"in {report.wall_time:.1f} s; store {spec.store_path()}")
    for job, err in report.failed:
        print(f"failed: {job.key}: {err}")
    print(sweep.format_table(report.table()))
    if report.interrupted:
        print("interrupted: run the same command to resume")
        return 130
    return 1 if report.failed else 0


#: name -> (add_arguments(parser), run(args) -> exit code, one-line help): every subcommand
SUBCOMMANDS = {
    "cram": (_add_cram, _run_cram, "measure accessibility curves, n50 per m and the slope"),
    "geometry": (_add_geometry, _run_geometry,
                 "measure the support, decoder cells and effective eps; print every refined slope"),
    "sweep": (_add_sweep, _run_sweep,
              "run a cramming sweep (YAML file) on Dask: local processes or a cluster"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="accesslib", description="How many outputs can a transformer generate?")
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
    except ValueError as e:
        print(f"accesslib {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:
        print(f"accesslib {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
