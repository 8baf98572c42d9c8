"""How far float rounding moves one string's cramming trajectory: the same string crammed under
the same protocol and seed, alone on one thread (the reference), alone on one thread again, stopped
half-way and resumed from its kept state, alone on two threads, and beside batch-mates on one
thread.

The engine gives every string its own seeded start and optimiser, so these runs differ only in
the order of floating-point sums (torch picks its kernels by thread count and by CPU). A run
that repeats the reference must match it bit for bit, and so must a resumed one and batch-mates
of the same length; the others show how a last-bit difference grows over the steps. On the tiny embedded models it
stays small (1e-7 of the loss; the memory 4e-4 of its norm after 200 steps on two threads; there
padding to longer batch-mates reorders sums too: their lean forward). On Gemma-3-270M two threads
part from one at step 3, and at step 100 the loss differs by 23% and the memory by 92% of its
norm, while 16 batch-mates padded to n = 32 change nothing (docs/engine.md). Over a whole run a
string can cram at another step, or not at all (its string 0 at n = 6 of the ``gemma-n50`` grid:
crammed at step 280 in ``gemma-n50``, at 399 in ``gemma-9k``, stopped by patience at 567 alone on
one thread). So budgets are compared within one run (``accesslib store ladder`` reads every rung
from the same trajectories), and two runs of one protocol are two samples, to be compared by
their n50 and its standard error, not string by string.

Workload: ``--batch`` strings of ``--n`` tokens from ``--source`` (string 0 is the one followed;
with ``--mates-n``, one more run beside batch-mates of that length, so with padding), m = 1, [A]'s
protocol with ``--steps`` steps and no stop by patience, greedy checks on. Prints, for each run
against the reference: the first step whose loss differs, the relative loss difference at a few
steps, the end (crammed at step s, or not within the steps) and the relative difference of the
final memory.

    python benchmarks/rounding.py                                  # tiny-d32-v257, seconds
    python benchmarks/rounding.py --model gemma-3-270m --source glove100k --add-special-tokens \\
        --n 6 --steps 100 --batch 4 --mates-n 12                   # ~7 min on 2 cores
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from functools import partial

import torch

from accesslib.config import cpu_id, cpu_kernels, cpu_name, hardware
from accesslib.engine.cramming import PROTOCOLS, cram, engine_code
from accesslib.engine.targets import SOURCES, make_targets
from accesslib.models.loading import load_model
from accesslib.results.store import ResultsStore


def follow(lm, targets, steps: int, threads: int, resume_at: int | None = None) -> dict:
    """Cram ``targets`` (string 0 followed) under [A]'s protocol for at most ``steps`` steps, with
    no stop by patience, on ``threads`` threads: string 0's loss at each forward pass (before that
    step's update; one more pass than steps), its end and its final memory. ``resume_at``: stop the run after that many steps, keeping its state in a results
    store (as an interrupted run does), and go on from it in a second call."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    losses = []

    def on_step(info):
        if 0 in info.active:
            losses.append(float(info.losses[info.active.index(0)]))

    settings = {k: v for k, v in PROTOCOLS["paper"].items() if k not in ("max_steps", "patience")}
    run = partial(cram, lm, targets, 1, max_steps=steps, patience=steps + 1, seed=0, on_step=on_step, **settings)
    t0 = time.perf_counter()
    try:
        if resume_at is None:
            res = run()
        else:
            with tempfile.TemporaryDirectory() as d:
                kept = ResultsStore(os.path.join(d, "kept.sqlite"))
                run(stop=lambda: len(losses) >= resume_at, checkpoint=kept, checkpoint_every=0.0)
                first, losses[:] = list(losses), []
                res = run(checkpoint=kept)
                kept.close()
    finally:
        torch.set_num_threads(before)
    s0 = next(s for s in res.strings if s.index == 0)
    if resume_at is not None:   # one loss per forward pass, steps + 1 of them; the second call's
        losses[:0] = first[:int(s0.steps) + 1 - len(losses)]     # start at its kept state's step
    return dict(losses=losses, success=bool(s0.success), steps=int(s0.steps), memory=s0.memory.clone(),
                seconds=time.perf_counter() - t0, threads=threads, strings=len(targets))


def compare(ref: dict, other: dict, at=(1, 10, 30, 100, 300, 1000)) -> dict:
    """How ``other`` departs from ``ref``: the first step whose loss differs (None if none of the
    common steps does; step k's loss is the one its k-th forward pass computes, before that step's
    update, so step 1's is the initial memory's), |loss difference| / reference loss at the steps
    of ``at`` both reached, both ends, and ||memory difference|| / ||reference memory||."""
    common = min(len(ref["losses"]), len(other["losses"]))
    first = next((i + 1 for i in range(common) if ref["losses"][i] != other["losses"][i]), None)
    rel = {s: abs(other["losses"][s - 1] - ref["losses"][s - 1]) / max(abs(ref["losses"][s - 1]), 1e-30)
           for s in at if s <= common}
    mem = float((other["memory"] - ref["memory"]).norm() / ref["memory"].norm().clamp_min(1e-30))
    return dict(first_differing_step=first, relative_loss_difference=rel, end=_end(other), reference_end=_end(ref),
                relative_memory_difference=mem)


def _end(run: dict) -> str:
    return f"crammed at step {run['steps']}" if run["success"] else f"not crammed in {run['steps']} steps"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny-d32-v257")
    ap.add_argument("--source", default="tokens", choices=SOURCES)
    ap.add_argument("--add-special-tokens", action="store_true",
                    help="targets start with the tokenizer's leading special tokens ([A]'s layout, e.g. Gemma's <bos>)")
    ap.add_argument("--n", type=int, default=8, help="target length (default 8)")
    ap.add_argument("--steps", type=int, default=200, help="at most this many steps per run (default 200)")
    ap.add_argument("--batch", type=int, default=4, help="strings in the batch-mates run, string 0 among them (default 4)")
    ap.add_argument("--mates-n", type=int, help="also a run beside batch-mates of this length (padding: the "
                    "batch's rows are as long as its longest string)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the targets (default 0)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    for name, value, least in (("--n", args.n, 2), ("--steps", args.steps, 1), ("--batch", args.batch, 2),
                               ("--mates-n", args.mates_n, 2)):
        if value is not None and value < least:
            ap.error(f"{name} must be a whole number >= {least}; got {value}")
    lm = load_model(args.model)
    vocab = lm.model.get_input_embeddings().weight.shape[0]
    ids, _ = make_targets(args.source, args.n, args.batch, seed=args.seed, tokenizer=lm.tokenizer,
                          vocab_size=vocab, add_special_tokens=args.add_special_tokens)
    targets = ids.tolist()
    alone = targets[:1]
    runs = [("again", 1, alone, None), ("stopped and resumed", 1, alone, max(1, args.steps // 2)),
            ("2 threads", 2, alone, None), ("batch-mates", 1, targets, None)]     # label, threads, batch, resume_at
    if args.mates_n is not None:
        longer, _ = make_targets(args.source, args.mates_n, args.batch, seed=args.seed + 1, tokenizer=lm.tokenizer,
                                 vocab_size=vocab, add_special_tokens=args.add_special_tokens)
        runs.append((f"batch-mates of n = {args.mates_n}", 1, alone + longer.tolist()[1:], None))
    print(f"{args.model}: string 0 of {args.batch} {args.source} strings of n = {args.n}, [A]'s protocol, "
          f"at most {args.steps} steps, no stop by patience; torch {torch.__version__}, {cpu_name()} "
          f"({cpu_id()}, {cpu_kernels()} kernels), engine {engine_code()}")
    ref = follow(lm, alone, args.steps, 1)
    print(f"  reference (alone, 1 thread): {_end(ref)}, {ref['seconds']:.1f} s")
    out = dict(model=args.model, source=args.source, n=args.n, steps=args.steps, batch=args.batch,
               mates_n=args.mates_n, seed=args.seed, hardware=hardware(), engine=engine_code(),
               reference_end=_end(ref), runs={})
    for label, threads, batch, resume_at in runs:
        run = follow(lm, batch, args.steps, threads, resume_at)
        got = compare(ref, run)
        out["runs"][label] = got
        first = got["first_differing_step"]
        rel = ", ".join(f"{v:.1e} at {s}" for s, v in got["relative_loss_difference"].items())
        print(f"  {label} ({run['strings']} string{'s' if run['strings'] > 1 else ''}, {threads} thread"
              f"{'s' if threads > 1 else ''}): {got['end']}, "
              + ("loss identical at every step" if first is None else f"loss first differs at step {first}")
              + f"; relative loss difference {rel}; final memory differs by {got['relative_memory_difference']:.1e}"
              f" of its norm; {run['seconds']:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
