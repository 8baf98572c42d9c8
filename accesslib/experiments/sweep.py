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
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from accesslib.results.store import KEY_COLUMNS as _KEY  # numpy + stdlib only

__all__ = ["SweepSpec", "ModelSpec", "Job", "JobResult", "SweepReport", "SweepRun", "load_spec",
           "run_job", "run_sweep", "start_sweep", "sweep_curves", "sweep_table", "format_table",
           "worker_model", "add_sweep_parser", "add_subcommand", "run_sweep_cli"]

log = logging.getLogger(__name__)

_DEVICES = ("cpu", "cuda", "auto")
_WRITE = ("auto", "worker", "client")


# --------------------------------------------------------------------------------------------
# The sweep description
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """One model of a sweep: a name for ``load_model`` (embedded, offline real, local dir, hub),
    or a tiny random model built from a config (``tiny={"family": ..., "d": ..., ...}``).

    ``name`` is what the store records; by default the loaded model's own name.
    """
    load: str | None = None
    tiny: tuple | None = None       # sorted (key, value) pairs of tiny_model keyword arguments
    name: str | None = None

    @classmethod
    def parse(cls, entry) -> "ModelSpec":
        if isinstance(entry, ModelSpec):
            return entry
        if isinstance(entry, str) and entry.strip():
            return cls(load=entry.strip())
        if isinstance(entry, Mapping):
            unknown = set(entry) - {"name", "load", "path", "tiny"}
            if unknown:
                raise ValueError(f"models: unknown keys {sorted(unknown)} in {dict(entry)}; allowed: "
                                 "name, load (or path), tiny")
            load = entry.get("load", entry.get("path"))
            tiny = entry.get("tiny")
            if (load is None) == (tiny is None):
                raise ValueError(f"models: each entry needs exactly one of 'load' and 'tiny', got {dict(entry)}")
            if tiny is not None:
                if not isinstance(tiny, Mapping) or "family" not in tiny:
                    raise ValueError(f"models: 'tiny' must be a mapping with at least 'family', got {tiny!r}")
                tiny = tuple(sorted(tiny.items()))
            return cls(load=str(load) if load is not None else None, tiny=tiny, name=entry.get("name"))
        raise ValueError(f"models: each entry must be a model name or a mapping, got {entry!r}")

    @property
    def label(self) -> str:
        """The model's store name (known without loading it)."""
        if self.name:
            return str(self.name)
        if self.load is not None:
            return self.load
        t = dict(self.tiny)
        return (f"tiny-{t['family']}-d{t.get('d', 32)}-v{t.get('vocab_size', 64)}"
                f"-l{t.get('layers', 2)}-s{t.get('seed', 0)}")

    def to_yaml(self):
        if self.tiny is None and self.name is None:
            return self.load
        out = {}
        if self.name:
            out["name"] = self.name
        if self.load is not None:
            out["load"] = self.load
        if self.tiny is not None:
            out["tiny"] = dict(self.tiny)
        return out


@dataclass(frozen=True)
class Job:
    """One unit of work: a (model, m, seed) adaptive search, or a (model, m, n, seed) batch."""
    model: str          # ModelSpec.label
    m: int
    n: int | None       # None: the spec's adaptive length search runs inside the job
    seed: int

    @property
    def key(self) -> str:
        """A readable, unique Dask key (the dashboard shows it)."""
        length = "search" if self.n is None else f"n{self.n}"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.model)
        return f"cram-{safe}-m{self.m}-{length}-s{self.seed}"


@dataclass
class SweepSpec:
    """A sweep: models x m x (lengths or a length search) x seeds, ``samples`` strings each.

    engine: keyword arguments for :func:`accesslib.engine.cramming.cram` (max_steps, patience, lr, ...;
        ``protocol: published`` is the paper's settings, see :func:`engine_settings`).
    search: ``None`` with ``lengths`` given (fixed grid), else a mapping with ``method`` and the
        experiments module's search options (adaptive search, one job per (model, m, seed)).
    workers: worker processes of the LocalCluster (default: one per GPU, else one per
        ``torch_threads`` CPU cores). torch_threads: torch intra-op threads per worker.
    write: where rows are written ("worker", "client", or "auto", see the module docstring).
    model_cache: models each worker keeps loaded (least recently used dropped first).
    """
    models: list
    m: list
    source: str = "tokens"
    samples: int = 8
    seeds: list = field(default_factory=lambda: [0])
    lengths: list | None = None
    search: dict | None = None
    engine: dict = field(default_factory=dict)
    store: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    workers: int | None = None
    torch_threads: int = 1
    retries: int = 2
    write: str = "auto"
    model_cache: int = 2
    name: str = "sweep"

    def __post_init__(self):
        if isinstance(self.models, (str, Mapping)):
            self.models = [self.models]
        if not self.models:
            raise ValueError("models: give at least one model")
        self.models = [ModelSpec.parse(e) for e in self.models]
        labels = [ms.label for ms in self.models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"models: two entries have the same store name: {labels}")
        self.m = _int_list("m", self.m, lo=1)
        self.seeds = _int_list("seeds", self.seeds, lo=0)
        if not isinstance(self.samples, int) or isinstance(self.samples, bool) or self.samples < 1:
            raise ValueError(f"samples must be an integer >= 1 (strings per (m, n, seed)), got {self.samples!r}")
        from accesslib.engine import targets  # numpy/torch-free list of names
        if self.source not in targets.SOURCES:
            raise ValueError(f"source must be one of {targets.SOURCES}, got {self.source!r}")
        if (self.lengths is None) == (self.search is None):
            raise ValueError("give exactly one of 'lengths' (a fixed grid of n) and 'search' "
                             "(an adaptive length search)")
        if self.lengths is not None:
            self.lengths = sorted(set(_int_list("lengths", self.lengths, lo=1)))
        if self.search is not None:
            if isinstance(self.search, str):
                self.search = {"method": self.search}
            if not isinstance(self.search, Mapping):
                raise ValueError(f"search must be a mapping with a 'method', got {self.search!r}")
            self.search = dict(self.search)
            method = self.search.get("method", "bisect")
            if method not in ("bisect", "paper"):
                raise ValueError(f"search method must be 'bisect' or 'paper' (a fixed grid is "
                                 f"'lengths:'), got {method!r}")
            unknown = set(self.search) - {"method", "pilot", "precision", "max_length", "start"}
            if unknown:
                raise ValueError(f"search: unknown options {sorted(unknown)}; allowed: method, pilot, "
                                 "precision, max_length, start")
        if not isinstance(self.engine, Mapping):
            raise ValueError(f"engine must be a mapping of cram() settings, got {self.engine!r}")
        self.engine = dict(self.engine)
        if str(self.device).split(":")[0] not in _DEVICES:
            raise ValueError(f"device must be one of {_DEVICES}, got {self.device!r}")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 1):
            raise ValueError(f"workers must be an integer >= 1, got {self.workers!r}")
        if not isinstance(self.torch_threads, int) or self.torch_threads < 1:
            raise ValueError(f"torch_threads must be an integer >= 1, got {self.torch_threads!r}")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {self.retries!r}")
        if not isinstance(self.model_cache, int) or self.model_cache < 1:
            raise ValueError(f"model_cache must be an integer >= 1, got {self.model_cache!r}")
        if self.write not in _WRITE:
            raise ValueError(f"write must be one of {_WRITE}, got {self.write!r}")

    # --- helpers ------------------------------------------------------------------------
    @property
    def model_labels(self) -> list[str]:
        return [ms.label for ms in self.models]

    def model_spec(self, label: str) -> ModelSpec:
        for ms in self.models:
            if ms.label == label:
                return ms
        raise ValueError(f"model {label!r} is not in this sweep ({self.model_labels})")

    def jobs(self) -> list[Job]:
        """The sweep split into independent jobs, longest first (see the module docstring)."""
        out = []
        for label in self.model_labels:
            for m in self.m:
                for seed in self.seeds:
                    if self.lengths is None:
                        out.append(Job(label, m, None, seed))
                    else:
                        out += [Job(label, m, n, seed) for n in self.lengths]
        # Longest jobs first (cost grows with n); stable in the order above otherwise.
        return sorted(out, key=lambda j: -(j.n or 0))

    def store_path(self) -> Path:
        if self.store:
            return Path(os.path.expanduser(str(self.store)))
        from accesslib.results.store import default_path
        return default_path()

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["models"] = [ms.to_yaml() for ms in self.models]
        return {k: v for k, v in d.items() if v is not None}

    def replace(self, **changes) -> "SweepSpec":
        d = self.to_dict()
        d.update(changes)
        return SweepSpec(**d)


def _int_list(name, value, lo):
    if isinstance(value, (int,)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, Mapping) and set(value) <= {"start", "stop", "step"}:
        value = list(range(int(value.get("start", lo)), int(value["stop"]) + 1, int(value.get("step", 1))))
    try:
        out = [int(v) for v in value]
        ok = all(float(v) == int(v) for v in value)
    except (TypeError, ValueError):
        ok = False
    if not ok or not out or min(out) < lo:
        raise ValueError(f"{name} must be a non-empty list of integers >= {lo}, got {value!r}")
    return list(dict.fromkeys(out))


def load_spec(description, /, **overrides) -> SweepSpec:
    """A :class:`SweepSpec` from a YAML file path, a YAML string, a dict or a SweepSpec.

    ``overrides`` replace top-level keys (e.g. ``store=...``, ``workers=2``). A relative
    ``store`` path in a file is taken relative to the current directory.
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(description, SweepSpec):
        return description.replace(**overrides) if overrides else description
    if isinstance(description, Mapping):
        data = dict(description)
    else:
        import yaml
        text = str(description)
        p = Path(os.path.expanduser(text))
        if "\n" not in text and p.suffix.lower() in (".yaml", ".yml", ".json"):
            if not p.is_file():
                raise ValueError(f"sweep file not found: {p}")
            text = p.read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f"sweep description is not valid YAML: {e}") from None
        if not isinstance(data, Mapping):
            raise ValueError("a sweep description must be a YAML mapping (models:, m:, ...)")
    data.update(overrides)
    known = {f.name for f in dataclasses.fields(SweepSpec)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown sweep keys {sorted(unknown)}; allowed: {sorted(known)}")
    for required in ("models", "m"):
        if required not in data:
            raise ValueError(f"a sweep needs '{required}'")
    return SweepSpec(**data)


# --------------------------------------------------------------------------------------------
# What one job does (runs on a worker, or in this process)
# --------------------------------------------------------------------------------------------
_MODEL_CACHE: dict = {}           # per worker process: (ModelSpec, device, dtype) -> LoadedModel
_MODEL_LOCK = threading.Lock()
_WORKER_DEVICE: str | None = None  # set by the worker plugin: this worker's GPU, e.g. "cuda:1"


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
    """The store's protocol_hash of this sweep's rows (the same one accessibility_curve writes)."""
    from accesslib.engine.cramming import protocol_settings
    from accesslib.results.store import protocol_hash
    protocol, overrides = engine_settings(spec)
    return protocol_hash(protocol_settings(protocol, **overrides))


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
            known = {tuple(r[c] for c in _KEY) for r in (known_rows or [])}
            rows = [r for r in store.rows(memory=True) if tuple(r[c] for c in _KEY) not in known]
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



def _known_rows(store, spec: SweepSpec, job: Job, ph: str) -> list[dict]:
    """Key columns + success of the finished strings a job may reuse (write="client")."""
    rows = store.rows(model=job.model, m=job.m, source=spec.source, seed=job.seed, protocol_hash=ph,
                      n=job.n)
    return [{c: r[c] for c in _KEY + ("success", "sample")} for r in rows]


def _job_done_in_store(store, spec: SweepSpec, job: Job, ph: str) -> bool:
    """A fixed-length job is done when its ``samples`` strings are stored (searches must replay)."""
    if job.n is None:
        return False
    return store.count(model=job.model, m=job.m, n=job.n, source=spec.source, seed=job.seed,
                       protocol_hash=ph, sample=list(range(spec.samples))) >= spec.samples


# --------------------------------------------------------------------------------------------
# Running a sweep on Dask
# --------------------------------------------------------------------------------------------
def _setup_worker(torch_threads: int, gpu_per_worker: bool, local: bool = False):
    """Per worker process: torch intra-op threads, and which GPU a LocalCluster worker uses.

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


def _worker_plugin(torch_threads: int, gpu_per_worker: bool, local: bool = False):
    """A distributed WorkerPlugin running :func:`_setup_worker` on every worker, also on the ones
    that join later (a restarted worker after a crash, dask-jobqueue scaling up)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class AccesslibSweepSetup(WorkerPlugin):
        name = "accesslib-sweep-setup"

        def __init__(self, threads, gpus, local):
            self.threads, self.gpus, self.local = threads, gpus, local

        def setup(self, worker):
            _setup_worker(self.threads, self.gpus, self.local)

    return AccesslibSweepSetup(torch_threads, gpu_per_worker, local)


def default_workers(spec: SweepSpec) -> int:
    """One worker per GPU (device cuda), else one per ``torch_threads`` CPU cores."""
    if spec.workers is not None:
        return spec.workers
    if spec.resolved_device().startswith("cuda"):
        import torch
        return max(1, torch.cuda.device_count())
    return max(1, (os.cpu_count() or 1) // spec.torch_threads)


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


def _make_client(spec: SweepSpec, scheduler, workers):
    """(client, cluster or None). scheduler None/"local": a LocalCluster of worker processes."""
    from distributed import Client, LocalCluster
    if scheduler in (None, "local"):
        n = workers or default_workers(spec)
        threads = spec.torch_threads
        env = {v: str(threads) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR, env=env)
        return Client(cluster), cluster
    if not isinstance(scheduler, str) or "://" not in scheduler:
        raise ValueError(f"scheduler must be None/'local', 'inprocess' or an address like "
                         f"tcp://host:8786, got {scheduler!r}")
    return Client(scheduler), None


def run_sweep(spec, *, scheduler: str | None = None, workers: int | None = None, client=None,
              store: str | os.PathLike | None = None, progress: bool = True,
              on_job_done: Callable[[JobResult], None] | None = None, stop=None,
              write: str | None = None, on_start: Callable[[str], None] | None = None) -> SweepReport:
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
    write: "worker" / "client" / "auto" (see the module docstring).
    on_start(dashboard_link): called once the Dask client is up (the link is also printed).

    Ctrl-C does the same as ``stop`` and closes the client and the LocalCluster cleanly; run
    the same sweep again to resume.
    """
    from accesslib.results.store import ResultsStore
    from accesslib.engine.cramming import protocol_settings

    spec = load_spec(spec)
    if store is not None:
        spec = spec.replace(store=str(store))
    store_path = spec.store_path()
    db = ResultsStore(store_path)   # creates the file and schema once, before workers race to
    ph = protocol_hash_of(spec)
    protocol, overrides = engine_settings(spec)
    settings = protocol_settings(protocol, **overrides)
    mode = write or spec.write
    if mode not in _WRITE:
        raise ValueError(f"write must be one of {_WRITE}, got {mode!r}")
    if mode == "auto":
        mode = "worker" if (client is None and scheduler in (None, "local", "inprocess")) else "client"
    stop_fn = None
    if stop is not None:
        stop_fn = stop.is_set if isinstance(stop, threading.Event) else stop

    t0 = time.perf_counter()
    jobs = spec.jobs()
    todo = [j for j in jobs if not _job_done_in_store(db, spec, j, ph)]
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
        return dict(store_path=None, known_rows=_known_rows(db, spec, job, ph))

    try:
        if not todo:
            pass
        elif scheduler == "inprocess":
            _run_inprocess(spec, todo, submit_args, finished, stop, stop_fn, report)
        else:
            _run_dask(spec, todo, submit_args, finished, stop_fn, report, scheduler, workers, client, bar,
                      on_start)
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
                      on_start):
    import uuid
    from distributed import Event, wait

    own = client is None
    cluster = None
    futures: dict = {}
    remote_stop = None
    try:
        if own:
            client, cluster = _make_client(spec, scheduler, workers)
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
# Reading a sweep's results back; a background run for notebooks
# --------------------------------------------------------------------------------------------
def sweep_curves(spec, store=None) -> dict[tuple[str, int], dict[int, tuple[int, int]]]:
    """Accessibility counts per (model, m) from the store, all of the spec's seeds pooled:
    ``{(model, m): {n: (successes, total)}}`` (only strings of the spec's protocol and source)."""
    from accesslib.results.store import ResultsStore
    spec = load_spec(spec)
    db = store if store is not None and not isinstance(store, (str, os.PathLike)) else \
        ResultsStore(store or spec.store_path())
    ph = protocol_hash_of(spec)
    out = {}
    for model in spec.model_labels:
        for m in spec.m:
            curve: dict[int, list[int]] = {}
            for seed in spec.seeds:
                for n, (s, t) in db.curve(model, m, spec.source, ph, seed=seed).items():
                    if spec.lengths is not None and n not in spec.lengths:
                        continue
                    acc = curve.setdefault(n, [0, 0])
                    acc[0] += s
                    acc[1] += t
            out[(model, m)] = {n: (s, t) for n, (s, t) in sorted(curve.items())}
    return out


def sweep_table(spec, store=None) -> list[dict]:
    """One dict per (model, m): strings, successes, n50 and its stderr (``experiments.fit_n50``),
    plus per model the slope of n50 against m (``experiments.fit_slope``) when two m have an n50."""
    from accesslib.theory.stats import fit_n50, fit_slope
    spec = load_spec(spec)
    rows = []
    for (model, m), curve in sweep_curves(spec, store).items():
        fit = fit_n50(curve) if curve else None
        rows.append(dict(model=model, m=m, lengths=len(curve), strings=sum(t for _, t in curve.values()),
                         successes=sum(s for s, _ in curve.values()),
                         n50=fit.n50 if fit else float("nan"), stderr=fit.stderr if fit else float("nan"),
                         status=fit.status if fit else "no data"))
    for model in spec.model_labels:
        pts = [r for r in rows if r["model"] == model and math.isfinite(r["n50"])]
        slope = None
        if len({r["m"] for r in pts}) >= 2:
            slope = fit_slope([r["m"] for r in pts], [r["n50"] for r in pts])
        for r in rows:
            if r["model"] == model:
                r["slope"] = slope.slope if slope else float("nan")
                r["r2"] = slope.r2 if slope else float("nan")
    return rows


def format_table(rows: list[dict]) -> str:
    """The n50 table as aligned text (what the CLI prints)."""
    lines = [f"{'model':<28} {'m':>3} {'strings':>8} {'success':>8} {'n50':>8} {'+-':>6}  status"]
    for r in rows:
        lines.append(f"{r['model']:<28} {r['m']:>3} {r['strings']:>8} {r['successes']:>8} "
                     f"{r['n50']:>8.1f} {r['stderr']:>6.1f}  {r['status']}")
    for model in dict.fromkeys(r["model"] for r in rows):
        r = next(x for x in rows if x["model"] == model)
        if math.isfinite(r.get("slope", float("nan"))):
            lines.append(f"{model}: n50 = {r['slope']:.2f} * m + b   (R^2 = {r['r2']:.3f})")
    return "\n".join(lines)


class SweepRun:
    """A sweep running in a background thread (for a notebook cell): watch, stop, wait.

    >>> run = start_sweep("examples/sweep-tiny.yaml", on_job_done=lambda r: redraw())  # doctest: +SKIP
    >>> run.progress        # (jobs done, jobs total)                                  # doctest: +SKIP
    >>> run.stop(); run.wait()                                                         # doctest: +SKIP
    """

    def __init__(self, spec, *, on_job_done=None, **run_kwargs):
        self.spec = load_spec(spec)
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


# --------------------------------------------------------------------------------------------
# Command line: python -m accesslib sweep FILE
# --------------------------------------------------------------------------------------------
def add_sweep_parser(subparsers):
    """Add the ``sweep`` subcommand to an argparse subparsers object; returns its parser."""
    p = subparsers.add_parser(
        "sweep", help="run a cramming sweep (YAML file) on Dask: local processes or a cluster",
        description="Run the sweep described in FILE (see examples/sweep-tiny.yaml) on a Dask "
                    "LocalCluster (default) or an existing scheduler; results go to the results "
                    "store; running the same command again resumes.")
    p.add_argument("file", help="sweep description (YAML)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address (tcp://host:8786); 'inprocess' runs the jobs here, "
                        "one after another; default: a LocalCluster")
    p.add_argument("--workers", type=int, default=None, help="LocalCluster worker processes")
    p.add_argument("--store", default=None, help="results store path (overrides the file)")
    p.add_argument("--write", choices=_WRITE, default=None,
                   help="who writes rows: each worker, or the client (multi-host clusters)")
    p.add_argument("--dry-run", action="store_true", help="list the jobs and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_sweep_cli, _run=run_sweep_cli)
    return p


#: The hook ``accesslib.cli`` looks for in its PLUGIN_MODULES (it lists accesslib.experiments.sweep).
add_subcommand = add_sweep_parser


def run_sweep_cli(args) -> int:
    """The ``sweep`` subcommand; returns the exit status (0 done, 1 failed jobs, 130 Ctrl-C)."""
    try:
        spec = load_spec(args.file, store=args.store, workers=args.workers)
    except ValueError as e:
        print(f"error: {e}")
        return 2
    if args.dry_run:
        jobs = spec.jobs()
        print(f"{len(jobs)} jobs, store {spec.store_path()}")
        for j in jobs:
            print(" ", j.key)
        return 0
    try:
        report = run_sweep(spec, scheduler=args.scheduler, progress=not args.no_progress,
                           write=args.write)
    except KeyboardInterrupt:
        print("\ninterrupted: finished strings are in the store; run the same command to resume")
        return 130
    except ValueError as e:
        print(f"error: {e}")
        return 2
    print(f"{report.done} jobs run, {report.skipped} already done, {report.crammed} strings crammed "
          f"in {report.wall_time:.1f} s; store {spec.store_path()}")
    for job, err in report.failed:
        print(f"failed: {job.key}: {err}")
    print(format_table(report.table()))
    if report.interrupted:
        print("interrupted: run the same command to resume")
        return 130
    return 1 if report.failed else 0
