"""This machine's fp32 matrix-multiply throughput (FLOP/s), the yardstick for achieved FLOP/s.

One n x n by n x n product costs 2 n^3 floating-point operations. We run products back to back
for about `seconds` and report the best rate over short windows (the best window is the closest
to what the hardware can do; the CPU may be shared with other work).

    python benchmarks/matmul_peak.py [--n 1024] [--seconds 2] [--device cpu]
    from benchmarks.matmul_peak import measure_matmul_flops
"""
from __future__ import annotations

import argparse
import time


def measure_matmul_flops(n: int = 1024, seconds: float = 2.0, device: str = "cpu",
                         dtype=None) -> float:
    """Best measured rate of n x n fp32 matmuls in FLOP/s (2 n^3 per product), over ~`seconds`."""
    import torch
    if n < 1 or seconds <= 0:
        raise ValueError(f"need n >= 1 and seconds > 0; got n={n}, seconds={seconds}")
    dtype = dtype or torch.float32
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    c = a @ b   # warm-up (thread pool, caches)
    sync()
    best = 0.0
    t_end = time.perf_counter() + seconds
    reps = 1
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        for _ in range(reps):
            c = a @ b
        sync()
        dt = time.perf_counter() - t0
        if dt < 0.05:
            reps *= 2     # windows of at least 50 ms, so timer noise does not matter
            continue
        best = max(best, reps * 2.0 * n ** 3 / dt)
    del c
    if best == 0.0:       # `seconds` shorter than one window: time a single window anyway
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync()
        best = reps * 2.0 * n ** 3 / (time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    import torch
    f = measure_matmul_flops(args.n, args.seconds, args.device)
    print(f"fp32 matmul {args.n}x{args.n} on {args.device} ({torch.get_num_threads()} threads): "
          f"{f / 1e9:.1f} GFLOP/s")
    return f


if __name__ == "__main__":
    main()
