"""Speed-up of a Dask sweep with 2 worker processes over 1 on this machine (issue 8).

Runs the same fixed sweep (examples/sweep-tiny.yaml, seeds 0 and 1: 20 jobs, 120 strings) twice
on a fresh LocalCluster, with 1 and then 2 workers (1 torch thread each), each into a fresh
results store, and prints both wall times (cluster start and worker imports included) and
their ratio, and whether the two stores hold the same per-string successes.

    .venv/bin/python benchmarks/sweep_speedup.py [--seeds 0 1] [--workers 1 2]

On a shared machine the figures depend on what else runs: look at the load average it prints.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accesslib import sweep  # noqa: E402
from accesslib.store import ResultsStore  # noqa: E402


def one(spec, workers: int, store: Path) -> dict:
    t0 = time.perf_counter()
    first = []
    report = sweep.run_sweep(spec.replace(store=str(store), workers=workers), progress=False,
                             on_job_done=lambda r: first.append(time.perf_counter()))
    assert report.complete, report.failed
    job_sum = sum(r.wall_time for r in report.results)
    with ResultsStore(store) as db:
        succ = {(r["m"], r["n"], r["seed"], r["sample"]): r["success"] for r in db.rows()}
    return dict(workers=workers, wall=report.wall_time, total=time.perf_counter() - t0,
                job_seconds=job_sum, strings=report.crammed, successes=succ)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(ROOT / "examples" / "sweep-tiny.yaml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    spec = sweep.load_spec(args.file, seeds=args.seeds)
    print(f"sweep: {args.file}, seeds {args.seeds}: {len(spec.jobs())} jobs, "
          f"{len(spec.jobs()) * spec.samples} strings; {os.cpu_count()} CPUs; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.workers:
            r = one(spec, w, Path(tmp) / f"w{w}.sqlite")
            results.append(r)
            print(f"{w} worker(s): {r['wall']:6.1f} s wall (cluster start included), "
                  f"{r['job_seconds']:6.1f} s of job time, {r['strings']} strings, "
                  f"load average now {os.getloadavg()[0]:.2f}", flush=True)
    base = results[0]
    for r in results[1:]:
        same = r["successes"] == base["successes"]
        print(f"speed-up {r['workers']} vs {base['workers']} worker(s): {base['wall'] / r['wall']:.2f}x "
              f"(same per-string successes: {same})")


if __name__ == "__main__":
    main()
