#!/usr/bin/env python
"""Train the copy-task model, evaluate it at lengths 10..several hundred, write the bundle.

    python scripts/train_copy.py                       # the shipped run (see CopyConfig defaults)
    python scripts/train_copy.py --fast                # a tiny smoke run (writes to --out only)

Writes accesslib/data/bundles/copy_run.json (config, subsampled loss curve, accuracy vs length
for greedy and teacher-forced exact match, wall and CPU time, threads, hardware, date, command)
and, if the weights are small (< 2 MB), accesslib/data/models/copy-task/ (safetensors) so the
notebook can evaluate the trained model live (docs/paper.md, section 7).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_LENGTHS = [10, 20, 30, 40, 50, 55, 60, 65, 70, 80, 90, 100, 125, 150, 200, 300, 400]
MAX_WEIGHT_BYTES = 2 * 1024 * 1024


def subsample_losses(losses, points=400):
    """Mean loss over consecutive windows: at most ``points`` (step, loss) pairs."""
    import numpy as np

    n = len(losses)
    if n == 0:
        return [], []
    w = max(1, -(-n // points))
    steps, vals = [], []
    for i in range(0, n, w):
        chunk = losses[i : i + w]
        steps.append(i + len(chunk))          # step at the end of the window (1-based)
        vals.append(round(float(np.mean(chunk)), 5))
    return steps, vals


def main(argv=None):
    from accesslib.config import hardware
    from accesslib.engine import copying as cp

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3000, help="maximum steps (stops early at target)")
    for f in fields(cp.CopyConfig):
        if f.name in ("target_acc",):
            continue
        typ = (lambda v: v.strip().lower() in ("1", "true", "yes", "on")) if isinstance(f.default, bool) else type(f.default)
        p.add_argument("--" + f.name.replace("_", "-"), type=typ, default=None)
    p.add_argument("--n-eval", type=int, default=100, help="strings per eval length")
    p.add_argument("--lengths", type=str, default=",".join(map(str, DEFAULT_LENGTHS)))
    p.add_argument("--out", type=Path, default=ROOT / "accesslib/data/bundles/copy_run.json")
    p.add_argument("--weights", type=Path, default=ROOT / "accesslib/data/models/copy-task")
    p.add_argument("--no-weights", action="store_true")
    p.add_argument("--fast", action="store_true", help="tiny smoke run")
    a = p.parse_args(argv)

    over = {f.name: getattr(a, f.name) for f in fields(cp.CopyConfig)
            if f.name != "target_acc" and getattr(a, f.name) is not None}
    if a.fast:
        over = {"d": 32, "intermediate": 64, "heads": 2, "max_len": 8, "batch_size": 16,
                "eval_every": 0, **over}
        a.steps, a.n_eval, lengths = min(a.steps, 30), min(a.n_eval, 8), [4, 8, 16]
    else:
        lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
    cfg = cp.CopyConfig(**over).validate()

    def on_step(s):
        if s.step % 100 == 0 or s.check_acc is not None:
            extra = f"  acc@{cfg.max_len} (teacher-forced) {s.check_acc:.3f}" if s.check_acc is not None else ""
            print(f"step {s.step:5d}/{s.steps}  loss {s.loss:.4f}  wall {s.elapsed:7.1f}s  "
                  f"cpu {s.cpu_time:7.1f}s{extra}", flush=True)

    load_before = os.getloadavg()
    started = _dt.datetime.now(_dt.timezone.utc)
    res = cp.train(cfg, steps=a.steps, on_step=on_step)
    load_after = os.getloadavg()
    print(f"trained: {res.steps_done} steps, wall {res.wall_time:.1f}s, cpu {res.cpu_time:.1f}s, "
          f"threads {res.threads}, target reached: {res.reached_target}", flush=True)

    t0, c0 = time.perf_counter(), time.process_time()
    acc = cp.evaluate(res.model, lengths, n=a.n_eval, threads=cfg.threads,
                      on_length=lambda r: print(f"  length {r.length:4d}: greedy {r.greedy:.2f}  "
                                                f"teacher-forced {r.teacher_forced:.2f}", flush=True))
    eval_wall, eval_cpu = time.perf_counter() - t0, time.process_time() - c0

    def first_below(key, level=0.1):
        for r in acc:
            if r.length > cfg.max_len and getattr(r, key) < level:
                return r.length
        return None

    steps, losses = subsample_losses(res.losses)
    import torch
    import transformers

    bundle = {
        "kind": "copy_run",
        "about": "Copy task of [A] (docs/paper.md, section 7): GPT-NeoX trained from scratch on "
                 "lengths min_len..max_len, exact-string accuracy vs length.",
        "config": res.summary()["config"],
        "steps_max": a.steps,
        "steps_done": res.steps_done,
        "reached_target": res.reached_target,
        "interrupted": res.interrupted,
        "checks": [{"step": s, "teacher_forced": t, "greedy": g} for s, t, g in res.checks],
        "loss": {"step": steps, "loss": losses, "window_mean": True},
        "accuracy": {"n": a.n_eval, "lengths": [r.length for r in acc],
                     "greedy": [r.greedy for r in acc], "teacher_forced": [r.teacher_forced for r in acc]},
        "train_range": [cfg.min_len, cfg.max_len],
        "first_length_below_10pct": {"greedy": first_below("greedy"),
                                     "teacher_forced": first_below("teacher_forced")},
        "train_wall_time_s": round(res.wall_time, 1),
        "train_cpu_time_s": round(res.cpu_time, 1),
        "eval_wall_time_s": round(eval_wall, 1),
        "eval_cpu_time_s": round(eval_cpu, 1),
        "torch_threads": res.threads,
        "hardware": {**hardware(), "load_avg_1min_before": round(load_before[0], 2),
                     "load_avg_1min_after": round(load_after[0], 2),
                     "note": "CPU shared with other jobs: wall time includes waiting; CPU time is this process only"},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "date": started.isoformat(timespec="seconds"),
        "command": "python scripts/train_copy.py " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:])),
        "weights": None,
    }
    if not a.no_weights and not a.fast:
        size = cp.save_weights(res.model, a.weights)
        if size > MAX_WEIGHT_BYTES:
            for f in a.weights.iterdir():
                f.unlink()
            a.weights.rmdir()
            print(f"weights {size / 1e6:.1f} MB > 2 MB: not kept", flush=True)
        else:
            w = a.weights.resolve()
            # repo-relative when the weights live in the repo (the shipped case), else absolute
            path = str(w.relative_to(ROOT)) if w.is_relative_to(ROOT) else str(w)
            bundle["weights"] = {"path": path, "bytes": size}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(bundle, indent=1) + "\n")
    print(f"wrote {a.out}", flush=True)
    return bundle


if __name__ == "__main__":
    main()
