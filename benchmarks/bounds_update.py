"""Time from a slider change to the updated figure in the counting-bound app (notebook 01).

Each sample: set one slider value from Python (as a widget message would), which runs the
bounds, moves the artists and repaints the Agg canvas (blitting when no axis limit changed,
a full ``fig.canvas.draw()`` otherwise). Prints median and p95 wall and CPU times over
200 updates for three kinds of input:

  drag     one slider moved step by step (what a hand on a slider does)
  jumps    random values on random sliders (every update may rescale an axis)
  full     a forced full redraw each time (the cost when axes change)

Goal: under 50 ms per update on a 2-core machine. Usage:
    python benchmarks/bounds_update.py [--updates 200]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402

from accesslib.apps.nb01_bounds import BoundsApp  # noqa: E402


def _timed(app, changes):
    wall, cpu, full = [], [], 0
    draw = app.fig.canvas.draw
    counter = [0]

    def counting_draw(*a, **k):
        counter[0] += 1
        return draw(*a, **k)

    app.fig.canvas.draw = counting_draw
    try:
        for slider, value in changes:
            t0, c0 = time.perf_counter(), time.process_time()
            slider.value = value
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    finally:
        app.fig.canvas.draw = draw
    full = counter[0]
    return np.array(wall) * 1e3, np.array(cpu) * 1e3, full


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n = args.updates
    rng = np.random.default_rng(args.seed)

    app = BoundsApp(canvas="agg")
    app.fig.canvas.draw()
    scenarios = {}
    # drag: d from 700 upwards one step at a time, then m, r and |V| the same way
    drag = [(app.d, 700 + i) for i in range(n // 4)] + [(app.m, 1 + i % 64) for i in range(n // 4)]
    drag += [(app.r, 20.0 + 0.05 * i) for i in range(n // 4)]
    drag += [(app.vocab, 10 ** (4.5 + 0.002 * i)) for i in range(n - len(drag))]
    scenarios["drag"] = drag
    sliders = [(app.d, lambda: int(rng.integers(64, 8192))), (app.m, lambda: int(rng.integers(1, 64))),
               (app.vocab, lambda: float(10 ** rng.uniform(3, 6))), (app.r, lambda: float(rng.uniform(1, 300)))]
    scenarios["jumps"] = [(s, f()) for s, f in (sliders[int(rng.integers(len(sliders)))] for _ in range(n))]

    print(f"BoundsApp update = compute + redraw (Agg), {n} updates each, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'scenario':<8} {'median ms':>10} {'p95 ms':>8} {'median CPU ms':>14} {'p95 CPU ms':>11} {'full draws':>11}")
    for name, changes in scenarios.items():
        app.set(preset="EleutherAI/pythia-160m", m=1)
        app.fig.canvas.draw()
        wall, cpu, full = _timed(app, changes)
        print(f"{name:<8} {np.median(wall):10.1f} {np.percentile(wall, 95):8.1f} "
              f"{np.median(cpu):14.1f} {np.percentile(cpu, 95):11.1f} {full:>6}/{len(changes)}")
    # forced full redraw: invalidate the cached background before each change
    app.set(preset="EleutherAI/pythia-160m", m=1)
    changes = [(app.d, 700 + i) for i in range(max(20, n // 5))]
    wall, cpu = [], []
    for s, v in changes:
        app.invalidate()
        t0, c0 = time.perf_counter(), time.process_time()
        s.value = v
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    wall, cpu = np.array(wall) * 1e3, np.array(cpu) * 1e3
    print(f"{'full':<8} {np.median(wall):10.1f} {np.percentile(wall, 95):8.1f} "
          f"{np.median(cpu):14.1f} {np.percentile(cpu, 95):11.1f} {len(changes):>6}/{len(changes)}")
    print("goal: < 50 ms per update (median of 'drag')")


if __name__ == "__main__":
    main()
