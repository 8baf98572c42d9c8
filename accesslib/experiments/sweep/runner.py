"""Running a sweep: on Dask distributed (a LocalCluster or any scheduler), or job after job in
this process; stopping it (Ctrl-C, a stop flag); a background run for notebooks (:class:`SweepRun`).

Jobs already complete in the store are skipped before anything starts; the rest are submitted
longest first, and each worker is set up by a worker plugin (torch threads, GPU, SIGINT).
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from accesslib._checks import fail_short
from accesslib.experiments.sweep.jobs import (
    JobResult,
    engine_settings,
    protocol_hash_of,
    run_job,
    setup_worker,
)
from accesslib.experiments.sweep.results import sweep_curves, sweep_table
from accesslib.experiments.sweep.spec import WRITE, Job, SweepSpec, load_spec
from accesslib.results.store import KEY_COLUMNS  # numpy + stdlib only

__all__ = ["SweepReport", "SweepRun", "run_sweep", "start_sweep", "default_workers", "known_rows",
           "job_done_in_store", "check_run", "DEFAULT_DASHBOARD"]

#: where a LocalCluster's dashboard listens unless asked otherwise: this machine only (the
#: dashboard has no login; the scheduler and the Voila app are local too)
DEFAULT_DASHBOARD = "127.0.0.1:0"

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# What the store already has
# --------------------------------------------------------------------------------------------
def known_rows(store, spec: SweepSpec, job: Job, ph: str) -> list[dict]:
    """Key columns + success of the finished strings a job may reuse (write="client")."""
    rows = store.rows(model=job.model, m=job.m, source=spec.source, seed=job.seed, protocol_hash=ph,
                      n=job.n)
    return [{c: r[c] for c in KEY_COLUMNS + ("success", "sample")} for r in rows]


def job_done_in_store(store, spec: SweepSpec, job: Job, ph: str) -> bool:
    """A fixed-length job is done when its ``samples`` strings are stored (searches must replay)."""
    if job.n is None:
        return False
    return store.count(model=job.model, m=job.m, n=job.n, source=spec.source, seed=job.seed,
                       protocol_hash=ph, sample=list(range(spec.samples))) >= spec.samples


# --------------------------------------------------------------------------------------------
# Dask: the worker plugin, the client
# --------------------------------------------------------------------------------------------
def _worker_plugin(torch_threads: int, gpu_per_worker: bool, local: bool = False):
    """A distributed WorkerPlugin running :func:`accesslib.experiments.sweep.jobs.setup_worker` on
    every worker, also on the ones that join later (a restarted worker after a crash,
    dask-jobqueue scaling up)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class AccesslibSweepSetup(WorkerPlugin):
        name = "accesslib-sweep-setup"

        def __init__(self, threads, gpus, local):
            self.threads, self.gpus, self.local = threads, gpus, local

        def setup(self, worker):
            setup_worker(self.threads, self.gpus, self.local)

    return AccesslibSweepSetup(torch_threads, gpu_per_worker, local)


def default_workers(spec: SweepSpec) -> int:
    """One worker per GPU (device cuda), else one per ``torch_threads`` CPU cores."""
    if spec.workers is not None:
        return spec.workers
    if spec.resolved_device().startswith("cuda"):
        import torch
        return max(1, torch.cuda.device_count())
    return max(1, (os.cpu_count() or 1) // spec.torch_threads)


def _make_client(spec: SweepSpec, scheduler, workers, dashboard_address: str = DEFAULT_DASHBOARD):
    """(client, cluster or None). scheduler None/"local": a LocalCluster of worker processes, its
    dashboard on ``dashboard_address`` (default: 127.0.0.1, a free port)."""
    from distributed import Client, LocalCluster
    if scheduler in (None, "local"):
        n = workers or default_workers(spec)
        threads = spec.torch_threads
        env = {v: str(threads) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=dashboard_address, silence_logs=logging.ERROR, env=env)
        return Client(cluster), cluster
    return Client(scheduler), None


def _check_scheduler(scheduler):
    if scheduler in (None, "local", "inprocess"):
        return
    if not isinstance(scheduler, str) or "://" not in scheduler or len(scheduler) > 1000:
        fail_short("scheduler", "None, 'local', 'inprocess' or an address like tcp://host:8786", scheduler)


def _check_dashboard(address) -> str:
    """``HOST:PORT`` for the LocalCluster's dashboard (port 0: any free one); None: 127.0.0.1."""
    if address is None:
        return DEFAULT_DASHBOARD
    allowed = "HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:8787; 0.0.0.0:8787 listens on every interface)"
    if not isinstance(address, str) or ":" not in address or len(address) > 300:
        fail_short("dashboard_address", allowed, address)
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535 or any(c.isspace() or c == "/" for c in host):
        fail_short("dashboard_address", allowed, address)
    return address


def check_run(spec, *, scheduler=None, client=None, store=None, write=None, dashboard_address=None):
    """Everything :func:`run_sweep` checks before it starts anything (the store, a cluster), also
    what ``--dry-run`` runs: the spec (:func:`load_spec`), the scheduler, ``write``, the dashboard
    address, and the protocol hash of the engine settings. Returns (spec, write mode, dashboard
    address, protocol hash, hashed settings); raises the package's one-line ValueError."""
    from accesslib.experiments.curves import hashed_settings

    spec = load_spec(spec)
    if store is not None:
        spec = spec.replace(store=os.fspath(store))
    mode = write or spec.write
    if not isinstance(mode, str) or mode not in WRITE:
        fail_short("write", f"one of {', '.join(map(repr, WRITE))}", mode)
    if client is None:
        _check_scheduler(scheduler)
    dashboard = _check_dashboard(dashboard_address)
    protocol, overrides = engine_settings(spec)
    settings = hashed_settings(protocol, overrides)   # refuses what cannot be hashed the same twice
    return spec, mode, dashboard, protocol_hash_of(spec), settings


# --------------------------------------------------------------------------------------------
# Running a sweep
# --------------------------------------------------------------------------------------------
@dataclass
class SweepReport:
    """The outcome of :func:`run_sweep`. ``table()`` gives n50 per (model, m) from the store."""
    spec: SweepSpec
    jobs: int
    skipped: int                      # jobs already complete in the store before this run
    done: int                         # jobs finished by this run
    crammed: int                      # strings crammed by this run
    from_store: int                   # strings reused from the store by the jobs that ran
    wall_time: float
    interrupted: bool = False
    failed: list = field(default_factory=list)   # (Job, error message)
    results: list = field(default_factory=list)  # JobResult of every job that ran
    dashboard_link: str | None = None

    @property
    def complete(self) -> bool:
        return not self.interrupted and not self.failed and self.skipped + self.done == self.jobs

    def table(self) -> list[dict]:
        return sweep_table(self.spec)


def run_sweep(spec, *, scheduler: str | None = None, workers: int | None = None, client=None,
              store: str | os.PathLike | None = None, progress: bool = True,
              on_job_done: Callable[[JobResult], None] | None = None, stop=None,
              write: str | None = None, on_start: Callable[[str], None] | None = None,
              dashboard_address: str | None = None) -> SweepReport:
    """Run a sweep (a spec, a dict or a YAML path) and return a :class:`SweepReport`.

    scheduler: None or "local": a ``LocalCluster`` (``workers`` processes, 1 thread each,
        ``spec.torch_threads`` torch threads each); "tcp://host:port": an existing scheduler
        (dask-jobqueue, dask-kubernetes, ``dask scheduler``); "inprocess": the jobs one after
        another in this process (no Dask; the single-process reference). ``client``: use this
        distributed.Client (not closed at the end).
    store: the results store path (default: the spec's ``store``).
    on_job_done(JobResult): called in this process after each job (live figures, logging).
    stop: threading.Event (or callable) that ends the sweep early: running jobs stop between
        steps and keep what they finished, waiting jobs are cancelled.
    write: "worker" / "client" / "auto" (see the package docstring).
    on_start(dashboard_link): called once the Dask client is up (the link is also printed).
    dashboard_address: "HOST:PORT" of a LocalCluster's dashboard; default 127.0.0.1 and a free
        port (this machine only: the dashboard has no login). "0.0.0.0:8787" opens it to the
        network.

    Everything is checked (:func:`check_run`) before the store is opened or a cluster started.

    Ctrl-C does the same as ``stop`` and closes the client and the LocalCluster cleanly; run
    the same sweep again to resume.
    """
    from accesslib.results.store import ResultsStore

    spec, mode, dashboard, ph, settings = check_run(spec, scheduler=scheduler, client=client, store=store,
                                                    write=write, dashboard_address=dashboard_address)
    store_path = spec.store_path()
    db = ResultsStore(store_path)   # creates the file and schema once, before workers race to
    if mode == "auto":
        mode = "worker" if (client is None and scheduler in (None, "local", "inprocess")) else "client"
    stop_fn = None
    if stop is not None:
        stop_fn = stop.is_set if isinstance(stop, threading.Event) else stop

    t0 = time.perf_counter()
    jobs = spec.jobs()
    todo = [j for j in jobs if not job_done_in_store(db, spec, j, ph)]
    report = SweepReport(spec, len(jobs), len(jobs) - len(todo), 0, 0, 0, 0.0)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(jobs), initial=report.skipped, unit="job", desc=spec.name,
                   dynamic_ncols=True)

    def finished(res: JobResult):
        if res.rows:
            db.add_many(res.rows, settings=settings)
        report.results.append(res)
        report.crammed += res.crammed
        report.from_store += res.from_store
        if res.interrupted:
            report.interrupted = True
        else:
            report.done += 1
        if bar is not None:
            bar.update(0 if res.interrupted else 1)
            bar.set_postfix(strings=report.crammed, refresh=False)
        if on_job_done is not None:
            on_job_done(res)

    def submit_args(job):
        if mode == "worker":
            return dict(store_path=str(store_path))
        return dict(store_path=None, known_rows=known_rows(db, spec, job, ph))

    try:
        if not todo:
            pass
        elif scheduler == "inprocess":
            _run_inprocess(spec, todo, submit_args, finished, stop, stop_fn, report)
        else:
            _run_dask(spec, todo, submit_args, finished, stop_fn, report, scheduler, workers, client, bar,
                      on_start, dashboard)
    finally:
        if bar is not None:
            bar.close()
        db.close()
        report.wall_time = time.perf_counter() - t0
    return report


def _run_inprocess(spec, todo, submit_args, finished, stop, stop_fn, report):
    for job in todo:
        if stop_fn is not None and stop_fn():
            report.interrupted = True
            return
        try:
            finished(run_job(spec, job, stop=stop, **submit_args(job)))
        except KeyboardInterrupt:
            report.interrupted = True
            raise
        except Exception as e:  # one bad job does not end the sweep
            report.failed.append((job, f"{type(e).__name__}: {e}"))


def _run_dask(spec, todo, submit_args, finished, stop_fn, report, scheduler, workers, client, bar,
              on_start, dashboard=DEFAULT_DASHBOARD):
    import uuid

    from distributed import Event, wait

    own = client is None
    cluster = None
    futures: dict = {}
    remote_stop = None
    try:
        if own:
            client, cluster = _make_client(spec, scheduler, workers, dashboard)
        gpu_per_worker = cluster is not None and spec.resolved_device().startswith("cuda")
        client.register_plugin(_worker_plugin(spec.torch_threads, gpu_per_worker, local=cluster is not None))
        report.dashboard_link = client.dashboard_link
        msg = f"Dask dashboard: {client.dashboard_link}  ({len(todo)} jobs to run)"
        if bar is not None:
            bar.write(msg)
        else:
            log.info(msg)
        if on_start is not None:
            on_start(client.dashboard_link)
        token = uuid.uuid4().hex[:8]
        stop_name = f"accesslib-sweep-stop-{token}"
        remote_stop = Event(stop_name, client=client)
        for job in todo:
            fut = client.submit(run_job, spec, job, stop=stop_name, **submit_args(job),
                                key=f"{job.key}-{token}", pure=False, retries=spec.retries,
                                priority=job.n or job.m)  # long jobs first
            futures[fut] = job
        pending = set(futures)
        while pending:
            if stop_fn is not None and stop_fn():
                raise _StopRequested
            try:
                done, pending = wait(pending, timeout=0.5, return_when="FIRST_COMPLETED")
            except TimeoutError:
                continue
            for fut in done:
                job = futures[fut]
                if fut.status == "finished":
                    finished(fut.result())
                elif fut.status != "cancelled":
                    exc = fut.exception()
                    report.failed.append((job, f"{type(exc).__name__}: {exc}"))
    except (KeyboardInterrupt, _StopRequested) as e:
        report.interrupted = True
        _stop_remote(remote_stop, futures)
        if isinstance(e, KeyboardInterrupt):
            raise
    finally:
        if own and client is not None:
            with contextlib.suppress(Exception):
                client.close(timeout=10)
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=10)


class _StopRequested(Exception):
    pass


def _stop_remote(event, futures):
    """Ask running jobs to stop between steps (they keep finished strings), cancel the rest."""
    with contextlib.suppress(Exception):
        if event is not None:
            event.set()
    with contextlib.suppress(Exception):
        running = [f for f in futures if f.status == "pending"]
        if running:
            from distributed import wait
            wait(running, timeout=5)   # give running jobs a moment to return what they have
    with contextlib.suppress(Exception):
        for f in futures:
            if f.status == "pending":
                f.cancel()


# --------------------------------------------------------------------------------------------
# A background run for notebooks
# --------------------------------------------------------------------------------------------
class SweepRun:
    """A sweep running in a background thread (for a notebook cell): watch, stop, wait.

    >>> run = start_sweep("examples/sweep-tiny.yaml", on_job_done=lambda r: redraw())  # doctest: +SKIP
    >>> run.progress        # (jobs done, jobs total)                                  # doctest: +SKIP
    >>> run.stop(); run.wait()                                                         # doctest: +SKIP
    """

    def __init__(self, spec, *, on_job_done=None, **run_kwargs):
        self.spec = load_spec(spec)
        # what run_sweep would refuse is refused here, in the caller's thread
        check_run(self.spec, **{k: run_kwargs[k] for k in ("scheduler", "client", "store", "write",
                                                           "dashboard_address") if k in run_kwargs})
        self.total = len(self.spec.jobs())
        self.done = 0
        self.report: SweepReport | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._user_cb = on_job_done
        self.dashboard_link: str | None = None
        self._kwargs = dict(run_kwargs)
        self._kwargs.setdefault("progress", True)
        self._thread = threading.Thread(target=self._main, name="accesslib-sweep", daemon=True)

    def _on_job_done(self, res: JobResult):
        if not res.interrupted:
            self.done += 1
        if self._user_cb is not None:
            try:
                self._user_cb(res)
            except Exception:  # a broken plot callback must not kill the sweep
                log.exception("on_job_done callback failed")

    def _on_start(self, link: str):
        self.dashboard_link = link

    def _main(self):
        try:
            self.report = run_sweep(self.spec, on_job_done=self._on_job_done, stop=self._stop,
                                    on_start=self._on_start, **self._kwargs)
            self.done = self.report.skipped + self.report.done
        except BaseException as e:  # reported through .error, shown by the notebook
            self.error = e

    def start(self) -> "SweepRun":
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def progress(self) -> tuple[int, int]:
        return self.done, self.total

    def stop(self):
        """Ask the sweep to stop (running jobs keep the strings they finished)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> SweepReport | None:
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.report

    def curves(self):
        """Current counts per (model, m) from the store (see :func:`sweep_curves`)."""
        return sweep_curves(self.spec)


def start_sweep(spec, *, on_job_done: Callable[[JobResult], None] | None = None, **run_kwargs) -> SweepRun:
    """Start :func:`run_sweep` in a background thread and return the :class:`SweepRun` at once.

    ``on_job_done(JobResult)`` runs in that thread after every job: update a figure there
    (ipympl's ``draw_idle`` is thread-safe enough for that) with ``run.curves()``.
    """
    return SweepRun(spec, on_job_done=on_job_done, **run_kwargs).start()
