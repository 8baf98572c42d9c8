"""How much the layout of the output layer's input costs on a CPU (accesslib.engine.decoding.contiguous_head).

A model asked for the logits of its last K positions only (``logits_to_keep``) applies its head to
``hidden[:, -K:]``, a strided slice. On a CPU, ``F.linear`` of a strided [B, K, d] input and a 2-d
[V, d] weight runs as a batched product over a broadcast weight; the same input made contiguous
runs as one matrix product, with the same numbers. Prints the forward and forward+backward (the
gradient to the input, as cramming needs) times of both layouts and the largest difference of
their results, for a head of V x d over B x K positions.

Defaults: Gemma-3-270M's head (V = 262,144, d = 640), 8 strings of 24 positions, one thread.
Usage:
    python benchmarks/head_layout.py [--vocab 262144] [--d 640] [--rows 8] [--keep 24] [--threads 1]
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F


def _timed(fn, repeats: int) -> float:
    fn()                                   # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, default=262144)
    p.add_argument("--d", type=int, default=640)
    p.add_argument("--rows", type=int, default=8, help="strings in the batch")
    p.add_argument("--keep", type=int, default=24, help="positions whose logits are kept")
    p.add_argument("--extra", type=int, default=2, help="positions before them (memory, BOS)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    W = torch.randn(a.vocab, a.d, generator=g) / a.d ** 0.5
    H = torch.randn(a.rows, a.keep + a.extra, a.d, generator=g)
    strided = H[:, -a.keep:]
    assert not strided.is_contiguous()

    def fwd(x):
        return F.linear(x, W)

    def fwd_bwd(contiguous):
        h = H.detach().requires_grad_(True)
        x = h[:, -a.keep:]
        out = fwd(x.contiguous() if contiguous else x)
        (g,) = torch.autograd.grad(out.logsumexp(-1).sum(), h)
        return out.detach(), g

    diff_f = (fwd(strided) - fwd(strided.contiguous())).abs().max().item()
    (o1, g1), (o2, g2) = fwd_bwd(False), fwd_bwd(True)
    diff_b = max((o1 - o2).abs().max().item(), (g1 - g2).abs().max().item())
    rows = [("forward", _timed(lambda: fwd(strided), a.repeats), _timed(lambda: fwd(strided.contiguous()), a.repeats)),
            ("forward + backward", _timed(lambda: fwd_bwd(False), a.repeats),
             _timed(lambda: fwd_bwd(True), a.repeats))]
    print(f"head {a.vocab:,} x {a.d}, {a.rows} x {a.keep} positions, {a.threads} thread(s), "
          f"torch {torch.__version__}")
    print(f"{'':20s} {'strided (s)':>12s} {'contiguous (s)':>15s} {'speed-up':>9s}")
    for name, t_s, t_c in rows:
        print(f"{name:20s} {t_s:12.3f} {t_c:15.3f} {t_s / t_c:8.2f}x")
    print(f"largest difference: forward {diff_f:.3g}, forward + backward {diff_b:.3g}")


if __name__ == "__main__":
    main()
