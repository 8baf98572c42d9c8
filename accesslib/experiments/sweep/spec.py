"""The description of a sweep: :class:`ModelSpec`, :class:`Job`, :class:`SweepSpec` and
:func:`load_spec` (YAML file, YAML text, dict), with every key checked on the way in.

Light on purpose (stdlib, accesslib._checks): yaml is imported to read a file, and the engine's
list of target sources (which imports torch) when a spec is checked.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from accesslib._checks import check_choice, check_float, check_int, check_int_list, fail

__all__ = ["ModelSpec", "Job", "SweepSpec", "load_spec", "DEVICES", "WRITE", "SEARCH_METHODS"]

#: ``device``: "cuda:N" is accepted too
DEVICES = ("cpu", "cuda", "auto")
#: ``write``: who writes rows to the store (see the package docstring)
WRITE = ("auto", "worker", "client")
#: ``search: {method: ...}``: the adaptive length searches (a fixed grid is ``lengths:``)
SEARCH_METHODS = ("bisect", "paper")
#: ``search`` options besides ``method`` and their checks
_SEARCH_OPTIONS = {
    "pilot": lambda name, v: check_int(name, v, 1),
    "precision": lambda name, v: check_float(name, v, 0, low_open=True),
    "max_length": lambda name, v: check_int(name, v, 1),
    "start": lambda name, v: check_int(name, v, 1),
}
_MODEL_KEYS = ("name", "load", "path", "tiny")


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
            unknown = set(entry) - set(_MODEL_KEYS)
            if unknown:
                fail("models entry", "a mapping with keys name, load (or path), tiny", dict(entry))
            load = entry.get("load", entry.get("path"))
            tiny = entry.get("tiny")
            if (load is None) == (tiny is None):
                fail("models entry", "a mapping with exactly one of 'load' and 'tiny'", dict(entry))
            if tiny is not None:
                if not isinstance(tiny, Mapping) or "family" not in tiny:
                    fail("models tiny", "a mapping of tiny_model settings with at least 'family'", tiny)
                tiny = tuple(sorted(tiny.items()))
            return cls(load=str(load) if load is not None else None, tiny=tiny, name=entry.get("name"))
        fail("models entry", "a model name or a mapping (name, load or tiny)", entry)

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
        ``protocol: paper`` is the paper's settings, see
        :func:`accesslib.experiments.sweep.jobs.engine_settings`).
    search: ``None`` with ``lengths`` given (fixed grid), else a mapping with ``method`` and the
        experiments module's search options (adaptive search, one job per (model, m, seed)).
    workers: worker processes of the LocalCluster (default: one per GPU, else one per
        ``torch_threads`` CPU cores). torch_threads: torch intra-op threads per worker.
    write: where rows are written ("worker", "client", or "auto", see the package docstring).
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
        if not isinstance(self.models, (list, tuple)) or not self.models:
            fail("models", "a model or a non-empty list of models", self.models)
        self.models = [ModelSpec.parse(e) for e in self.models]
        labels = [ms.label for ms in self.models]
        if len(set(labels)) != len(labels):
            fail("models", "entries with distinct store names", labels)
        self.m = check_int_list("m", self.m, 1)
        self.seeds = check_int_list("seeds", self.seeds, 0)
        self.samples = check_int("samples", self.samples, 1)
        from accesslib.engine import targets  # the names of the target sources
        check_choice("source", self.source, targets.SOURCES)
        if (self.lengths is None) == (self.search is None):
            fail("lengths and search", "exactly one given: 'lengths' (a fixed grid of n) or 'search' (an "
                 "adaptive length search)", dict(lengths=self.lengths, search=self.search))
        if self.lengths is not None:
            self.lengths = sorted(set(check_int_list("lengths", self.lengths, 1)))
        if self.search is not None:
            self.search = _check_search(self.search)
        if not isinstance(self.engine, Mapping):
            fail("engine", "a mapping of cram() settings", self.engine)
        self.engine = dict(self.engine)
        if str(self.device).split(":")[0] not in DEVICES:
            fail("device", "one of 'cpu', 'cuda', 'cuda:N', 'auto'", self.device)
        if self.workers is not None:
            self.workers = check_int("workers", self.workers, 1)
        self.torch_threads = check_int("torch_threads", self.torch_threads, 1)
        self.retries = check_int("retries", self.retries, 0)
        self.model_cache = check_int("model_cache", self.model_cache, 1)
        check_choice("write", self.write, WRITE)

    # --- helpers ------------------------------------------------------------------------
    @property
    def model_labels(self) -> list[str]:
        return [ms.label for ms in self.models]

    def model_spec(self, label: str) -> ModelSpec:
        check_choice("model", label, self.model_labels)
        return self.models[self.model_labels.index(label)]

    def jobs(self) -> list[Job]:
        """The sweep split into independent jobs, longest first (see the package docstring)."""
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


def _check_search(search) -> dict:
    """``search:`` as a dict {method, options...}: a method name alone is allowed."""
    if isinstance(search, str):
        search = {"method": search}
    if not isinstance(search, Mapping):
        fail("search", "a mapping with a 'method' (or a method name)", search)
    out = dict(search)
    method = out.get("method", "bisect")
    if method not in SEARCH_METHODS:
        fail("search.method", "one of 'bisect', 'paper' (a fixed grid is 'lengths:')", method)
    unknown = set(out) - {"method", *_SEARCH_OPTIONS}
    if unknown:
        fail("search options", f"among method, {', '.join(_SEARCH_OPTIONS)}", sorted(unknown))
    for key, check in _SEARCH_OPTIONS.items():
        if key in out:
            out[key] = check(f"search.{key}", out[key])
    return out


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
                fail("sweep file", "an existing file", str(p))
            text = p.read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f"sweep description is not valid YAML: {e}") from None
        if not isinstance(data, Mapping):
            fail("sweep description", "a YAML mapping (models:, m:, ...)", data)
    data.update(overrides)
    known = [f.name for f in dataclasses.fields(SweepSpec)]
    unknown = set(data) - set(known)
    if unknown:
        fail("sweep keys", f"among {', '.join(known)}", sorted(unknown))
    for required in ("models", "m"):
        if required not in data:
            fail(required, "given (a sweep needs models and m)", None)
    return SweepSpec(**data)
