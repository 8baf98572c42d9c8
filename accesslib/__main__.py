"""Command line: ``python -m accesslib SUBCOMMAND ...`` (also installed as ``accesslib``).

    python -m accesslib cram --model NAME_OR_PATH --m 1 2 3 4 --samples 16 --source natural

crams strings for every m, writes every finished string to the results store at once (a
killed run started again resumes where it stopped), then prints n50 per m and the slope of
n50 against m (PAPER.md section 5).

Subcommands are registered in ``SUBCOMMANDS`` (name -> (add_arguments, run)); a module of the
package may also offer ``add_subcommand(subparsers)`` (adding its parser with
``set_defaults(_run=run)``) and be listed in ``PLUGIN_MODULES``.
Bad arguments give a one-line error and exit code 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

PLUGIN_MODULES = ("accesslib.sweep", "accesslib.geometry_cli")


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
    from . import models
    if name.startswith("tiny:"):
        parts = name.split(":")
        family = parts[1] if len(parts) > 1 else ""
        d = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 32
        if len(parts) > 3 or (len(parts) > 2 and not parts[2].isdigit()):
            raise ValueError(f"--model tiny:FAMILY[:d] expected, got {name!r}")
        return models.tiny_model(family, d=d)
    return models.load_model(name, dtype=dtype, device=device)


def _run_cram(args) -> int:
    from .experiments import accessibility_curve, fit_slope
    from .store import ResultsStore

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


#: name -> (add_arguments(parser), run(args) -> exit code, one-line help)
SUBCOMMANDS = {
    "cram": (_add_cram, _run_cram, "measure accessibility curves, n50 per m and the slope"),
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
