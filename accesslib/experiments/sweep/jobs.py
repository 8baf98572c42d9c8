"""What one job of a sweep does, on a Dask worker or in this process: :func:`run_job`.

Also what a worker keeps and sets up: the per-process model cache (:func:`worker_model`) and
the worker set-up (:func:`setup_worker`: torch threads, SIGINT, which GPU), and the engine
settings and protocol hash of a spec (:func:`engine_settings`, :func:`protocol_hash_of`).
Dask pickles :func:`run_job` by its module path, ``accesslib.experiments.sweep.jobs.run_job``:
a worker imports this module, which imports torch only inside the functions that need it.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from accesslib.experiments.sweep.spec import Job, ModelSpec, SweepSpec
from accesslib.results.store import KEY_COLUMNS  # numpy + stdlib only

__all__ = ["worker_model", "setup_worker", "engine_settings", "protocol_hash_of", "JobResult", "run_job"]

_MODEL_CACHE: dict = {}           # per worker process: (ModelSpec, device, dtype) -> LoadedModel
_MODEL_LOCK = threading.Lock()
_WORKER_DEVICE: str | None = None  # set by setup_worker: this worker's GPU, e.g. "cuda:1"


def worker_model(ms: ModelSpec, device: str = "cpu", dtype: str = "float32", keep: int = 2):
    """The loaded model for ``ms``, loaded once per process and kept (the per-worker cache).

    At most ``keep`` models stay loaded (least recently used dropped first), so a GPU worker that
    walks through 8 models does not hold all of them; jobs are ordered model by model.
    """
    key = (ms, device, dtype)
    with _MODEL_LOCK:
        loaded = _MODEL_CACHE.pop(key, None)
        if loaded is None:
            while len(_MODEL_CACHE) >= max(1, keep):
                _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
                if device.startswith("cuda"):
                    import torch
                    torch.cuda.empty_cache()
            from accesslib.models import loading as models
            try:
                if ms.tiny is not None:
                    loaded = models.tiny_model(**dict(ms.tiny), dtype=dtype, device=device)
                else:
                    loaded = models.load_model(ms.load, dtype=dtype, device=device)
            except Exception as e:  # remembered: the next job of this model fails at once
                loaded = e
        _MODEL_CACHE[key] = loaded   # (re)inserted last: the most recently used
    if isinstance(loaded, Exception):
        raise loaded
    return loaded


def setup_worker(torch_threads: int, gpu_per_worker: bool, local: bool = False):
    """Per worker process: torch intra-op threads, and which GPU a LocalCluster worker uses
    (run on every worker by the runner's worker plugin).

    ``local``: a LocalCluster's worker ignores SIGINT. Ctrl-C in a terminal reaches every
    process of the foreground group; the client alone handles it (stops the jobs, closes the
    cluster, which ends its workers), instead of each worker dying with a traceback.
    """
    global _WORKER_DEVICE
    import torch
    torch.set_num_threads(int(torch_threads))
    if local and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if gpu_per_worker and torch.cuda.is_available() and torch.cuda.device_count() > 1:
        try:
            from distributed import get_worker
            name = get_worker().name
        except Exception:
            name = None
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
            _WORKER_DEVICE = f"cuda:{int(name) % torch.cuda.device_count()}"


def _job_device(spec: SweepSpec) -> str:
    dev = spec.resolved_device()
    if dev == "cuda" and _WORKER_DEVICE is not None:
        return _WORKER_DEVICE
    return dev


def engine_settings(spec: SweepSpec) -> tuple[str | dict, dict]:
    """(protocol, cram overrides) from the spec's ``engine`` mapping (``protocol`` defaults to "fast")."""
    eng = dict(spec.engine)
    protocol = eng.pop("protocol", "fast")
    return protocol, eng


def protocol_hash_of(spec: SweepSpec) -> str:
    """The store's protocol_hash of this sweep's rows: the one function
    :func:`accesslib.experiments.curves.protocol_hash_for` of the spec's engine settings (the
    hash accessibility_curve writes its rows under)."""
    from accesslib.experiments.curves import protocol_hash_for
    protocol, overrides = engine_settings(spec)
    return protocol_hash_for(protocol, overrides)


def _curve_kwargs(spec: SweepSpec, job: Job) -> dict:
    protocol, overrides = engine_settings(spec)
    kw = dict(samples=spec.samples, source=spec.source, seed=job.seed, protocol=protocol,
              model_name=job.model, **overrides)
    if job.n is not None:
        kw.update(lengths=[job.n], search="grid")
    else:
        opts = dict(spec.search)
        kw["search"] = opts.pop("method", "bisect")
        kw.update(opts)
    return kw


@dataclass
class JobResult:
    """What a finished job reports back (small: the rows stay in the store unless write="client")."""
    job: Job
    curve: dict                 # {n: (successes, total)} for this job's (model, m, seed)
    crammed: int                # strings crammed by this job (new rows)
    from_store: int             # strings found already done (resume)
    wall_time: float
    worker: str                 # host:pid that ran it
    interrupted: bool = False
    rows: list | None = None    # write="client": the new rows, memory included

    @property
    def successes(self) -> int:
        return sum(s for s, _ in self.curve.values())

    @property
    def strings(self) -> int:
        return sum(t for _, t in self.curve.values())


class _ThrottledStop:
    """A stop flag for cram() that asks a distributed.Event at most once a second."""

    def __init__(self, name: str):
        self.name, self._next, self._set = name, 0.0, False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self._set and now >= self._next:
            self._next = now + 1.0
            try:
                from distributed import Event
                self._set = Event(self.name).is_set()
            except Exception:  # not on a worker / scheduler gone: keep going
                self._set = False
        return self._set


def run_job(spec: SweepSpec, job: Job, *, store_path: str | None = None, known_rows: list | None = None,
            stop=None, on_string=None) -> JobResult:
    """Run one job: :func:`accesslib.experiments.curves.accessibility_curve` for (model, m, seed) at the
    job's length (or with the spec's length search), strings already in the store skipped.

    ``store_path``: the results store to read and write (write="worker"). ``None`` means the
    client writes: the job runs against a private temporary store pre-filled with
    ``known_rows`` (the key columns and success of the finished strings, which is all a search
    needs to replay its decisions) and returns its new rows, memory vectors included.
    ``stop``: threading.Event, callable or the name of a distributed.Event.
    """
    import socket
    import tempfile

    from accesslib.experiments.curves import accessibility_curve
    from accesslib.results.store import ResultsStore

    t0 = time.perf_counter()
    ms = spec.model_spec(job.model)
    loaded = worker_model(ms, _job_device(spec), spec.dtype, keep=spec.model_cache)
    if isinstance(stop, str):
        stop = _ThrottledStop(stop)
    tmpdir = None
    if store_path is not None:
        store = ResultsStore(store_path)
    else:
        tmpdir = tempfile.mkdtemp(prefix="accesslib-job-")
        store = ResultsStore(Path(tmpdir) / "job.sqlite")
        if known_rows:
            store.add_many(known_rows)
    try:
        curve = accessibility_curve(loaded, job.m, store=store, stop=stop, on_string=on_string,
                                    **_curve_kwargs(spec, job))
        rows = None
        if store_path is None:
            known = {tuple(r[c] for c in KEY_COLUMNS) for r in (known_rows or [])}
            rows = [r for r in store.rows(memory=True) if tuple(r[c] for c in KEY_COLUMNS) not in known]
            for r in rows:
                r.pop("id", None)
    finally:
        store.close()
        if tmpdir is not None:
            import shutil
            shutil.rmtree(tmpdir, ignore_errors=True)
    return JobResult(job=job, curve=curve.as_dict(), crammed=curve.strings_crammed,
                     from_store=curve.strings_from_store, wall_time=time.perf_counter() - t0,
                     worker=f"{socket.gethostname()}:{os.getpid()}", interrupted=curve.interrupted,
                     rows=rows)
