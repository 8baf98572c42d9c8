"""Sweeps beyond one process: resumable cramming sweeps on Dask distributed.

A *sweep* is the paper's measurement grid (docs/paper.md, section 5): for every model and
every number of memory vectors m, the fraction of target strings of length n that can be crammed,
for many n, ``samples`` strings per (m, n) and seed. It is described by a small YAML file (or a
dict, see :func:`load_spec` and ``examples/sweep-tiny.yaml``), split into independent *jobs*
(:meth:`SweepSpec.jobs`) and run on Dask distributed (:func:`run_sweep`): a ``LocalCluster`` of
worker processes by default, or any running scheduler (``scheduler="tcp://host:8786"``), which
covers dask-jobqueue on SLURM/PBS and dask-kubernetes.

Job granularity (why it is what it is):

* fixed length grid (``lengths: [...]``): one job per (model, m, n, seed). The jobs are
  independent, so every worker stays busy until the last few; the longest ones (large n) are
  submitted first (Dask ``priority``), which keeps the tail short.
* adaptive length search (``search: ...``, the experiments module's searches): which n comes next
  depends on the success at the previous n, so the search is sequential per (model, m, seed):
  one job runs the whole search. There are fewer, longer jobs (models x m x seeds of them).

Resume is exact at the level of single strings: each string is written to the results store
(:class:`accesslib.results.store.ResultsStore`, unique key (model, m, n, source, target_hash, seed,
protocol_hash)) the moment it finishes, and a job first asks the store which of its strings are
done and crams only the rest. A rerun of an interrupted sweep (Ctrl-C, scheduler killed) therefore
redoes nothing; a worker that dies mid-job has its job rescheduled by Dask on another worker
(up to ``distributed.scheduler.allowed-failures`` deaths, default 3; exceptions are retried
``retries`` times), and the retry crams only the strings the dead worker had not finished. The
engine's per-string seeding makes the retried strings' results identical to an uninterrupted run.
An adaptive search replays its decisions from stored strings, so it resumes the same way.

Where rows are written (``write``): ``"worker"`` (default on a LocalCluster): each worker writes
its strings itself (SQLite WAL: many processes on one host may write to one file). ``"client"``
(default with an external scheduler): workers return their rows and the client process writes
them: SQLite must not be shared across hosts (NFS/Lustre locking is unreliable), and only the
client is sure to see the store's disk. Then a lost job redoes the strings it had not returned.

Models are loaded once per worker process and kept (:func:`worker_model`, a per-process cache).

The modules: :mod:`.spec` (the description: :class:`SweepSpec`, :func:`load_spec`), :mod:`.jobs`
(what one job runs, on a worker or here: :func:`run_job`), :mod:`.runner` (Dask, stopping,
:func:`run_sweep`, :func:`start_sweep`), :mod:`.results` (:func:`sweep_curves`, :func:`sweep_table`), :mod:`.budget`
(the budget check: :func:`budget_spec`, :func:`budget_table`).
The command line ``python -m accesslib sweep FILE`` is in :mod:`accesslib.cli`.
"""
from __future__ import annotations

from accesslib.experiments.sweep.budget import budget_spec, budget_table, engine_steps, format_budget
from accesslib.experiments.sweep.jobs import (
    JobResult,
    engine_settings,
    protocol_hash_of,
    run_job,
    setup_worker,
    worker_model,
)
from accesslib.experiments.sweep.results import format_table, sweep_curves, sweep_table
from accesslib.experiments.sweep.runner import (
    DEFAULT_DASHBOARD,
    SweepReport,
    SweepRun,
    check_run,
    default_workers,
    known_rows,
    run_sweep,
    start_sweep,
)
from accesslib.experiments.sweep.spec import DEVICES, WRITE, Job, ModelSpec, SweepSpec, load_spec

__all__ = ["SweepSpec", "ModelSpec", "Job", "JobResult", "SweepReport", "SweepRun", "load_spec",
           "run_job", "run_sweep", "start_sweep", "sweep_curves", "sweep_table", "format_table",
           "worker_model", "setup_worker", "engine_settings", "protocol_hash_of", "default_workers",
           "known_rows", "check_run", "DEFAULT_DASHBOARD", "DEVICES", "WRITE", "budget_spec", "budget_table",
           "engine_steps", "format_budget"]
