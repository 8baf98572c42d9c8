"""Speed-up of a Dask sweep with 2 worker processes over 1 on this machine.

Runs the same fixed sweep (examples/sweep-tiny.yaml, seeds 0-3: 40 jobs, 240 strings) twice, on
a fresh LocalCluster with 1 and then 2 workers (1 torch thread each), each into a fresh results
store. Prints the sweep's wall time (workers started and warm), the cluster start-up (processes,
torch + transformers imports), their ratios, and whether the two stores hold the same
per-string successes.

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

from accesslib.experiments import sweep  # noqa: E402
from accesslib.results.store import ResultsStore  # noqa: E402


def one(spec, workers: int, store: Path) -> dict:
    import logging

    from distributed import Client, LocalCluster
    t0 = time.perf_counter()
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR, env=env) as cluster, Client(cluster) as client:
        # workers import torch + transformers once (what every sweep pays at start)
        client.run(lambda: __import__("accesslib.models.loading"))
        start = time.perf_counter() - t0
        report = sweep.run_sweep(spec.replace(store=str(store)), client=client, write="worker",
                                 progress=False)
    assert report.complete, report.failed
    job_sum = sum(r.wall_time for r in report.results)
    with ResultsStore(store) as db:
        succ = {(r["m"], r["n"], r["seed"], r["sample"]): r["success"] for r in db.rows()}
    return dict(workers=workers, start=start, wall=report.wall_time, total=time.perf_counter() - t0,
                job_seconds=job_sum, strings=report.crammed, successes=succ)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(ROOT / "examples" / "sweep-tiny.yaml"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
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
            print(f"{w} worker(s): sweep {r['wall']:6.1f} s wall, cluster start {r['start']:5.1f} s, "
                  f"total {r['total']:6.1f} s; {r['job_seconds']:6.1f} s of job time, {r['strings']} "
                  f"strings; load average now {os.getloadavg()[0]:.2f}", flush=True)
    base = results[0]
    for r in results[1:]:
        same = r["successes"] == base["successes"]
        print(f"speed-up {r['workers']} vs {base['workers']} worker(s): sweep {base['wall'] / r['wall']:.2f}x, "
              f"total with cluster start {base['total'] / r['total']:.2f}x (same per-string successes: {same})")


if __name__ == "__main__":
    main()
