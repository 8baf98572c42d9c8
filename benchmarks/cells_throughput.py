"""Decoder-cell Monte Carlo throughput against this machine's matmul throughput.

Throughput counts 2 flops per multiply-add on both sides: the cell step does
samples x |V| x d multiply-adds (one logit per sample and token); the reference is a square
fp32 torch.matmul (``benchmarks/matmul_peak.measure_matmul_flops`` when it exists).
Goal: at least half the matmul throughput.

    .venv/bin/python benchmarks/cells_throughput.py [--d 576 --vocab 49152 --samples 8192]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from accesslib.engine.geometry import cell_shares  # noqa: E402


def matmul_flops(n=1024, repeats=20):
    """fp32 flops/s of an n x n matmul (2 n^3 flops), best of ``repeats``."""
    try:
        from benchmarks.matmul_peak import measure_matmul_flops
        return float(measure_matmul_flops()), "benchmarks.matmul_peak.measure_matmul_flops"
    except Exception:
        pass
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best, f"torch.matmul {n}x{n} fp32, best of {repeats}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=576, help="hidden width (SmolLM2-135M: 576)")
    ap.add_argument("--vocab", type=int, default=49152, help="|V| (SmolLM2: 49152)")
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--sample-chunk", type=int, default=2048)
    ap.add_argument("--vocab-chunk", type=int, default=None)
    ap.add_argument("--assign", default="argmax", choices=["argmax", "voronoi"])
    args = ap.parse_args(argv)
    peak, how = matmul_flops()
    g = torch.Generator().manual_seed(0)
    W = torch.randn(args.vocab, args.d, generator=g) * 0.05
    lo, hi = -torch.ones(args.d), torch.ones(args.d)
    # warm-up (allocations, thread pool)
    cell_shares(W, None, n_samples=args.sample_chunk, lo=lo, hi=hi, progress=False,
                sample_chunk=args.sample_chunk, vocab_chunk=args.vocab_chunk)
    t0 = time.perf_counter()
    c = cell_shares(W, None, n_samples=args.samples, lo=lo, hi=hi, assign=args.assign,
                    progress=False, sample_chunk=args.sample_chunk, vocab_chunk=args.vocab_chunk)
    wall = time.perf_counter() - t0
    mc = c.flops / c.seconds
    mc_wall = c.flops / wall
    out = {
        "d": args.d, "vocab": args.vocab, "samples": args.samples, "assign": args.assign,
        "threads": torch.get_num_threads(), "matmul_flops": peak, "matmul_how": how,
        "cells_flops": mc, "cells_flops_incl_sampling": mc_wall,
        "samples_x_V_x_d_per_s": mc / 2, "ratio": mc / peak, "ratio_incl_sampling": mc_wall / peak,
        "goal_met": mc / peak >= 0.5,
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
