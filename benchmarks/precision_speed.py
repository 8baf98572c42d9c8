"""What a lower precision buys a cramming step on this machine: the same strings crammed for a few
steps in float32, with bfloat16 autocast (float32 weights) and with bfloat16 weights (the engine
keeps the memory, the AdamW state and the loss in float32 in every case).

Workload: ``--strings`` uniform random-token targets at each of ``--lengths``, m = 1, the
published protocol's layout, optimiser and patience on accuracy (never reached in so few steps), no
greedy checks; one thread unless ``--threads``. Prints seconds per step (after ``--warmup`` steps,
whose time is left out, as are the run's set-up and wrap-up) and the ratio to float32.

    python benchmarks/precision_speed.py                           # SmolLM2-135M, ~5 min on one core
    python benchmarks/precision_speed.py --model tiny-d64-v257 --steps 20
"""
from __future__ import annotations

import argparse
import random
import time

import torch

from accesslib.engine.cramming import cram
from accesslib.models.loading import load_model

SETTINGS = (("float32", None, None), ("bfloat16 autocast", None, "bfloat16"), ("bfloat16 weights", "bfloat16", None))


def step_seconds(lm, targets, steps: int, warmup: int, autocast_dtype) -> float:
    """Seconds per step of ``steps`` steps on ``targets`` after ``warmup`` steps, in one run: the
    time between the ends of step ``warmup`` and of the last step (each step's end as ``on_step``
    sees it), so the run's set-up and wrap-up are not counted."""
    ends = []
    cram(lm, targets, 1, max_steps=warmup + steps, patience=10**9, autocast_dtype=autocast_dtype,
         first_token_as_input=True, patience_on="accuracy", init_scale="weights", verify=False, seed=0,
         on_step=lambda info: ends.append(time.perf_counter()))
    if len(ends) < warmup + steps:
        raise RuntimeError(f"the run stopped after {len(ends)} of {warmup + steps} steps (a string crammed?)")
    return (ends[warmup + steps - 1] - (ends[warmup - 1] if warmup else ends[0])) / (steps - (0 if warmup else 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--lengths", type=int, nargs="+", default=[17, 24, 32, 42])
    ap.add_argument("--strings", type=int, default=4, help="strings per length (default 4)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2, help="steps left out first (default 2)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.warmup < 0 or args.steps < (1 if args.warmup else 2):
        ap.error(f"--steps must be at least 1 after a warm-up, 2 without one (the time between step ends); "
                 f"got --steps {args.steps} --warmup {args.warmup}")
    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    base = None
    for label, dtype, autocast_dtype in SETTINGS:
        lm = load_model(args.model, dtype=dtype)
        if base is None:
            vocab = lm.model.get_input_embeddings().weight.shape[0]
            targets = [[rng.randrange(vocab) for _ in range(n)] for n in args.lengths for _ in range(args.strings)]
            print(f"{args.model}: {len(targets)} random-token strings (n = {', '.join(map(str, args.lengths))}), "
                  f"m = 1, {args.steps} steps after {args.warmup} of warm-up, {args.threads} thread(s)")
        s = step_seconds(lm, targets, args.steps, args.warmup, autocast_dtype)
        base = base or s
        print(f"  {label:18s} {s * 1000:10.1f} ms per step   {base / s:4.2f}x float32's speed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
