"""Command line: ``python -m accesslib SUBCOMMAND ...`` (also installed as ``accesslib``).

    python -m accesslib cram --model NAME_OR_PATH --m 1 2 3 4 --samples 16 --source natural

crams strings for every m, writes every finished string to the results store at once (a
killed run started again resumes where it stopped), then prints n50 per m and the slope of
n50 against m (docs/paper.md, section 5).

    python -m accesslib geometry --model NAME_OR_PATH --cells 100000 --out geometry.json

measures the support of the final hidden states, the decoder-cell shares and the effective
eps, prints every refined slope (and its ratio to a measured slope when one is known) and
writes the record the apps read (docs/paper.md, sections 3-4).

Subcommands are registered in ``SUBCOMMANDS`` (name -> (add_arguments, run)); a module of the
package may also offer ``add_subcommand(subparsers)`` (adding its parser with
``set_defaults(_run=run)``) and be listed in ``PLUGIN_MODULES``.
Bad arguments give a one-line error and exit code 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

PLUGIN_MODULES = ("accesslib.experiments.sweep",)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2 (argparse's default prints the usage too)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
    return v


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {v}")
    return v


# --- cram ------------------------------------------------------------------------------------
def _add_cram(p: argparse.ArgumentParser):
    p.add_argument("--model", required=True,
                   help="embedded or offline short name, local directory, hub name, or tiny:FAMILY[:d] "
                        "(a random tiny model, e.g. tiny:gpt_neox)")
    p.add_argument("--m", type=_positive_int, nargs="+", default=[1, 2, 3, 4], metavar="M",
                   help="numbers of memory vectors (default 1 2 3 4)")
    p.add_argument("--samples", type=_positive_int, default=16, help="strings per length (default 16)")
    p.add_argument("--source", choices=("natural", "words", "tokens"), default="natural",
                   help="target strings: natural text, random words, uniform random tokens")
    p.add_argument("--lengths", type=_positive_int, nargs="+", metavar="N",
                   help="measure exactly these lengths (search=grid); default: adaptive search")
    p.add_argument("--search", choices=("bisect", "paper", "grid"),
                   help="length search (default bisect, or grid when --lengths is given)")
    p.add_argument("--protocol", choices=("paper", "fast"), default="paper",
                   help="cramming settings: [A]'s published protocol or the engine's fast one")
    p.add_argument("--max-steps", type=_positive_int, help="override the protocol's step limit")
    p.add_argument("--patience", type=_positive_int, help="override the protocol's patience")
    p.add_argument("--lr", type=_positive_float, help="override the protocol's learning rate")
    p.add_argument("--bos", action="store_true",
                   help="put the model's BOS token before the memory (real models use it as an "
                        "attention sink)")
    p.add_argument("--seed", type=int, default=0, help="seed of the targets and the initial memory")
    p.add_argument("--precision", type=_positive_float, default=0.02,
                   help="bisect search: target relative stderr of n50 (default 0.02)")
    p.add_argument("--max-length", type=_positive_int, default=1000, help="longest target (default 1000)")
    p.add_argument("--store", help="results store file (default: ACCESSLIB_HOME/results.sqlite)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--threads", type=_positive_int, help="torch CPU threads")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _load(name: str, dtype: str, device: str):
    from accesslib.models import loading as models
    if name.startswith("tiny:"):
        parts = name.split(":")
        family = parts[1] if len(parts) > 1 else ""
        d = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 32
        if len(parts) > 3 or (len(parts) > 2 and not parts[2].isdigit()):
            raise ValueError(f"--model tiny:FAMILY[:d] expected, got {name!r}")
        return models.tiny_model(family, d=d)
    return models.load_model(name, dtype=dtype, device=device)


def _run_cram(args) -> int:
    from accesslib.experiments.curves import accessibility_curve
    from accesslib.theory.stats import fit_slope
    from accesslib.results.store import ResultsStore

    if args.search == "grid" and not args.lengths:
        raise ValueError("--search grid needs --lengths")
    if args.lengths and args.search not in (None, "grid"):
        raise ValueError(f"--lengths goes with --search grid, not {args.search}")
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
    p.add_argument("--lengths", type=_positive_int, nargs="+", metavar="L",
                   help="random-token sequence lengths for the support (default 4, 8, ... up to "
                        "min(1024, context))")
    p.add_argument("--per-length", type=_positive_int, default=None,
                   help="support samples per length (default 256)")
    p.add_argument("--support-samples", default=None, metavar="FILE.npy",
                   help="reuse the support samples in this file when it exists, else measure "
                        "them and save them there (reruns with other cell settings are cheap)")
    p.add_argument("--cells", type=int, default=None, metavar="N",
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
    p.add_argument("--effective-eps", type=int, default=16, metavar="K",
                   help="random directions for the effective eps (0: skip)")
    p.add_argument("--slope", type=_positive_float, default=None,
                   help="a measured slope (tokens per vector) to divide by; default: the "
                        "model's shipped cramming bundle, when there is one")
    p.add_argument("--out", default=None, help="write the geometry record (JSON) here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch CPU threads")
    p.add_argument("--no-progress", action="store_true")


def _run_geometry(args) -> int:
    import json
    import math
    import os

    from accesslib.results import bundles

    from accesslib.engine import geometry

    if args.cells is not None and args.cells < 0:
        raise ValueError(f"--cells must be >= 0; got {args.cells}")
    if args.effective_eps < 0:
        raise ValueError(f"--effective-eps must be >= 0; got {args.effective_eps}")
    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise ValueError(f"--out: folder {os.path.dirname(os.path.abspath(args.out))} does not exist")
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
            raise ValueError(f"--support-samples {args.support_samples}: expected [N, d={lm.facts.d}] "
                             f"samples, got shape {samples.shape}")
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


#: name -> (add_arguments(parser), run(args) -> exit code, one-line help)
SUBCOMMANDS = {
    "cram": (_add_cram, _run_cram, "measure accessibility curves, n50 per m and the slope"),
    "geometry": (_add_geometry, _run_geometry,
                 "measure the support, decoder cells and effective eps; print every refined slope"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="accesslib", description="How many outputs can a transformer generate?")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add, run, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        add(p)
        p.set_defaults(_run=run)
    for mod in PLUGIN_MODULES:
        try:
            module = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(module, "add_subcommand"):
            module.add_subcommand(sub)
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
