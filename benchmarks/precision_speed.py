"""What a lower precision buys a cramming step on this machine: the same strings crammed for a few
steps in float32, with bfloat16 autocast (float32 weights) and with bfloat16 weights (the engine
keeps the memory, the AdamW state and the loss in float32 in every case).

Workload: ``--strings`` uniform random-token targets at each of ``--lengths``, m = 1, the
published protocol's layout, optimiser and patience on accuracy (never reached in so few steps), no
greedy checks; one thread unless ``--threads``. Prints seconds per step (after ``--warmup`` steps
of the same strings, whose time is left out) and the ratio to float32.

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
    """Seconds per step of ``steps`` steps on ``targets``, after ``warmup`` steps of the same."""
    kw = dict(patience=10**9, autocast_dtype=autocast_dtype, first_token_as_input=True, patience_on="accuracy",
              init_scale="weights", verify=False, seed=0)
    if warmup:
        cram(lm, targets, 1, max_steps=warmup, **kw)
    t0 = time.perf_counter()
    cram(lm, targets, 1, max_steps=steps, **kw)
    return (time.perf_counter() - t0) / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--lengths", type=int, nargs="+", default=[17, 24, 32, 42])
    ap.add_argument("--strings", type=int, default=4, help="strings per length (default 4)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
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
        print(f"  {label:18s} {s:8.4f} s per step   {base / s:4.2f}x float32's speed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
