"""The description of a sweep: :class:`ModelSpec`, :class:`Job`, :class:`SweepSpec` and
:func:`load_spec` (YAML file, YAML text, dict), with every key checked on the way in.

Everything a run would reject is rejected here, before anything starts (``--dry-run`` runs the
same checks): types, ranges and the allowed keys at every level (the top level, a models entry,
``tiny:``, ``engine:`` (the settings :func:`accesslib.engine.cramming.cram` takes), ``search:``),
and sizes, computed without building anything (the limits ``MAX_*`` below). A YAML file is read
with a loader that refuses anchors and aliases (``&a`` / ``*a``: a few hundred bytes of nested
aliases expand to billions of values) and counts its values as it reads them. Messages are the
package's one line, "<name> must be <allowed>; got <value>", with the value cut to 80 characters.

Light on purpose (stdlib, accesslib._checks): yaml is imported to read a file, and the engine's
list of target sources and cram settings (which import torch) when a spec is checked.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sized

from accesslib._checks import check_choice, fail, fail_short

__all__ = ["ModelSpec", "Job", "SweepSpec", "load_spec", "DEVICES", "WRITE", "SEARCH_METHODS", "DTYPES",
           "MAX_FILE_BYTES", "MAX_YAML_VALUES", "MAX_LIST", "MAX_JOBS", "MAX_STRINGS", "MAX_TEXT",
           "MAX_LENGTH", "engine_keys", "tiny_keys"]

#: ``device``: "cuda:N" is accepted too
DEVICES = ("cpu", "cuda", "auto")
#: ``write``: who writes rows to the store (see the package docstring)
WRITE = ("auto", "worker", "client")
#: ``search: {method: ...}``: the adaptive length searches (a fixed grid is ``lengths:``)
SEARCH_METHODS = ("bisect", "paper")
#: ``dtype``: the model weights' dtype (accesslib.models.loading.torch_dtype)
DTYPES = ("float32", "bfloat16", "float16")

# --- limits, checked before anything is built (sizes are computed, never expanded) -----------
#: bytes of a sweep file (a sweep description is a few hundred)
MAX_FILE_BYTES = 1_000_000
#: values (scalars, lists, mappings) in one YAML description, counted while it is read
MAX_YAML_VALUES = 100_000
#: entries of one list (models, m, seeds, lengths, engine.prefix_ids) or values of one range
MAX_LIST = 10_000
#: jobs of one sweep (models x m x seeds x lengths, or models x m x seeds with a search)
MAX_JOBS = 10_000
#: strings of one sweep: jobs x samples (a search: per length it visits)
MAX_STRINGS = 1_000_000
#: characters of one text (a model name or path, the store path, the sweep's name)
MAX_TEXT = 1_000
#: the largest m, n (lengths), search.max_length and search.start
MAX_LENGTH = 100_000
#: the largest seed (seeds:, tiny.seed)
MAX_SEED = 2**32 - 1

# cram() parameters a sweep's engine: may not set: the job sets them (m, seed), or they are
# Python objects (callbacks, the model, the targets)
# (lean: which forward runs, with bit-identical results: an implementation choice, not a setting;
# checkpoint: the job's own results store keeps the strings still being crammed; extend, keep_final:
# going on from a smaller budget's finished strings, a choice of one run, not a setting of the
# measurement)
_ENGINE_RESERVED = ("model", "targets", "m", "seed", "on_step", "on_string", "stop", "lean", "checkpoint",
                    "extend", "keep_final")
# tiny_model's config overrides a sweep accepts besides its named parameters (any other key
# would be set on the transformers config and silently do nothing)
_TINY_CONFIG_KEYS = ("initializer_range",)


# --- checks of single values, in the package's message style, values cut to 80 characters ---
def _is_int(v) -> bool:
    import numbers
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and type(v).__name__ != "bool_"


def _is_real(v) -> bool:
    import numbers
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and type(v).__name__ != "bool_"


def _int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """A whole number >= low (the message of accesslib._checks.check_int), then <= high."""
    if not _is_int(value) or (low is not None and value < low):
        fail_short(name, "a whole number" + (f" >= {low}" if low is not None else ""), value)
    if high is not None and value > high:
        fail_short(name, f"a whole number in {low if low is not None else ''}..{high}", value)
    return int(value)


def _float(name: str, value, low: float, *, low_open: bool = False):
    """A finite number > low (or >= low); returned as given (the protocol hash sees the value)."""
    rel = ">" if low_open else ">="
    if not _is_real(value) or not math.isfinite(value):
        fail_short(name, f"a finite number {rel} {low:g}", value)
    if value < low or (low_open and value == low):
        fail_short(name, f"a number {rel} {low:g}", value)
    return value


def _choice(name: str, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        fail_short(name, f"one of {', '.join(map(repr, choices))}", value)
    return value


def _text(name: str, value, *, none: bool = False) -> str | None:
    if value is None and none:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        fail_short(name, f"a non-empty text of at most {MAX_TEXT:,} characters", value)
    return value


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        fail_short(name, "true or false", value)
    return value


def _keys(name: str, mapping: Mapping, allowed) -> None:
    """Unknown keys of ``mapping`` named with their path: '<name> keys must be among ...'."""
    unknown = [k for k in mapping if k not in allowed]
    if unknown:
        fail_short(f"{name} keys", f"among {', '.join(allowed)}", sorted(map(str, unknown)))


def _int_list(name: str, value, low: int = 1, high: int | None = None) -> list[int]:
    """accesslib._checks.check_int_list with sizes checked first: a range mapping {start, stop,
    step} (stop included) is counted arithmetically, a list by its length, before either is
    walked; order kept, repeats dropped."""
    allowed = f"a non-empty list of whole numbers >= {low}"
    if isinstance(value, Mapping):
        if not (set(value) <= {"start", "stop", "step"} and "stop" in value):
            fail_short(name, allowed + " or a range {start, stop, step}", value)
        start = _int(f"{name}.start", value.get("start", low))
        stop = _int(f"{name}.stop", value["stop"])
        step = _int(f"{name}.step", value.get("step", 1), 1)
        count = max(0, (stop - start) // step + 1)
        if count > MAX_LIST:
            fail_short(name, f"a range of at most {MAX_LIST:,} values", dict(value))
        value = range(start, stop + 1, step)
    elif _is_real(value):
        value = [value]
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, range, Sized)) \
            or isinstance(value, (Mapping, set, frozenset)):
        fail_short(name, allowed, value)
    if len(value) > MAX_LIST:
        fail_short(name, f"a list of at most {MAX_LIST:,} values", value)
    out = list(value)
    if not out:
        fail_short(name, allowed, out)
    for v in out:
        if not _is_real(v) or not float(v).is_integer() or v < low:
            fail_short(name, allowed, out)
        if high is not None and v > high:
            fail_short(name, f"a non-empty list of whole numbers in {low}..{high}", out)
    return list(dict.fromkeys(int(v) for v in out))


#: ``search`` options besides ``method`` and their checks
_SEARCH_OPTIONS = {
    "pilot": lambda name, v: _int(name, v, 1, MAX_STRINGS),
    "precision": lambda name, v: float(_float(name, v, 0, low_open=True)),
    "max_length": lambda name, v: _int(name, v, 1, MAX_LENGTH),
    "start": lambda name, v: _int(name, v, 1, MAX_LENGTH),
}
_MODEL_KEYS = ("name", "load", "path", "tiny")


# --- what engine: and tiny: accept, read from the functions that take them (lazily) ---------
@functools.lru_cache(maxsize=None)
def engine_keys() -> tuple[str, ...]:
    """The keys of a sweep's ``engine:``: ``protocol`` and the keyword settings of
    :func:`accesslib.engine.cramming.cram` (its signature), less the ones a job sets (m, seed)
    and the callbacks; and ``add_special_tokens`` (targets start with the tokenizer's BOS, as
    [A]'s code tokenizes them: :func:`accesslib.engine.targets.make_targets`)."""
    from accesslib.engine.cramming import PROTOCOLS, cram
    params = [p.name for p in inspect.signature(cram).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in _ENGINE_RESERVED]
    extra = [k for proto in PROTOCOLS.values() for k in proto if k not in params]
    return ("protocol", *params, *dict.fromkeys(extra), "add_special_tokens")


@functools.lru_cache(maxsize=None)
def tiny_keys() -> tuple[str, ...]:
    """The keys of a models entry's ``tiny:``: the parameters of
    :func:`accesslib.models.loading.tiny_model` and ``tiny_config`` (less dtype and device,
    the sweep's own keys) and the config overrides in ``_TINY_CONFIG_KEYS``."""
    from accesslib.models.loading import tiny_config, tiny_model
    out = []
    for fn in (tiny_model, tiny_config):
        out += [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in ("dtype", "device")]
    return tuple(dict.fromkeys(out + list(_TINY_CONFIG_KEYS)))


def _betas(name, v):
    if not isinstance(v, (list, tuple)) or len(v) != 2 or not all(
            _is_real(b) and math.isfinite(b) and 0 <= b < 1 for b in v):
        fail_short(name, "two numbers in [0, 1)", v)
    return v


def _schedule(name, v):
    from accesslib.engine.cramming import SCHEDULES
    if v is not None and (not isinstance(v, str) or v not in SCHEDULES):
        fail_short(name, f"one of {', '.join(map(repr, SCHEDULES))} or None to be stored", v)
    return v


def _autocast(name, v):
    return _choice(name, v, ("bfloat16", "float16", "float32"))


def _prefix_ids(name, v):
    return _int_list(name, v, 0)


#: checks of engine: values (None keeps the protocol's value); a cram() setting not listed here
#: takes a plain value (a number, true/false or a short text)
_ENGINE_CHECKS = {
    "lr": lambda n, v: _float(n, v, 0, low_open=True),
    "betas": _betas,
    "weight_decay": lambda n, v: _float(n, v, 0),
    "max_steps": lambda n, v: _int(n, v, 0, 10_000_000),
    "patience": lambda n, v: _int(n, v, 1, 10_000_000),
    "schedule": _schedule,
    "first_token_as_input": _bool,
    "verify": _bool,
    "autocast_dtype": _autocast,
    "init_std": lambda n, v: _float(n, v, 0, low_open=True),
    "eps": lambda n, v: _float(n, v, 0, low_open=True),
    "prefix_ids": _prefix_ids,
    "batch_size": lambda n, v: _int(n, v, 1, 100_000),
    "rows_per_pass": lambda n, v: _int(n, v, 1, 100_000),
    "profile": _bool,
    "patience_on": lambda n, v: _choice(n, v, ("loss", "accuracy")),
    "add_special_tokens": _bool,
    "checkpoint_every": lambda n, v: _float(n, v, 0),
}


def _check_settings(name: str, settings, allowed) -> dict:
    """A mapping of cram settings (engine:, or engine.protocol given as a mapping)."""
    if not isinstance(settings, Mapping):
        fail_short(name, "a mapping of cram() settings", settings)
    _keys(name, settings, allowed)
    out = dict(settings)
    for key, v in out.items():
        if v is None or key == "protocol":
            continue
        check = _ENGINE_CHECKS.get(key)
        if check is not None:
            check(f"{name}.{key}", v)
        elif not (isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= MAX_TEXT)):
            fail_short(f"{name}.{key}", "a number, true/false or a short text", v)
    return out


def check_engine(engine) -> dict:
    """A sweep's ``engine:`` checked: known keys (:func:`engine_keys`), each value's type and
    range, ``protocol`` a name of ``PROTOCOLS`` (or a mapping of cram settings). Values are
    returned unchanged (the protocol hash is taken of them)."""
    from accesslib.engine.cramming import PROTOCOLS
    keys = engine_keys()
    out = _check_settings("engine", engine, keys)
    protocol = out.get("protocol", "fast")
    if isinstance(protocol, Mapping):
        _check_settings("engine.protocol", protocol, keys[1:])
    elif not isinstance(protocol, str) or protocol not in PROTOCOLS:
        fail_short("engine.protocol", f"one of {', '.join(map(repr, PROTOCOLS))} or a mapping of cram "
                   "settings", protocol)
    return out


def _check_tiny(name: str, tiny) -> tuple:
    if not isinstance(tiny, Mapping) or "family" not in tiny:
        fail_short("models tiny", "a mapping of tiny_model settings with at least 'family'", tiny)
    from accesslib.models.loading import FAMILIES
    _keys(name, tiny, tiny_keys())
    _choice(f"{name}.family", tiny["family"], FAMILIES)
    limits = {"d": (4, 65_536), "vocab_size": (2, 10_000_000), "layers": (1, 1_024), "seed": (0, MAX_SEED),
              "max_context": (1, 10_000_000)}
    for key, v in tiny.items():
        if key in limits:
            _int(f"{name}.{key}", v, *limits[key])
        elif key == "initializer_range":
            _float(f"{name}.{key}", v, 0, low_open=True)
        elif key != "family" and not (isinstance(v, (bool, int, float)) or
                                      (isinstance(v, str) and len(v) <= MAX_TEXT)):
            fail_short(f"{name}.{key}", "a number, true/false or a short text", v)
    return tuple(sorted(tiny.items()))


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
    def parse(cls, entry, where: str = "models entry") -> "ModelSpec":
        """A model name, a mapping (name, load or path, tiny) or a ModelSpec; ``where`` names the
        entry in messages (``models[2]``)."""
        if isinstance(entry, ModelSpec):
            return entry
        if isinstance(entry, str) and entry.strip():
            return cls(load=_text(where, entry.strip()))
        if isinstance(entry, Mapping):
            _keys(where, entry, _MODEL_KEYS)
            if "load" in entry and "path" in entry:
                fail_short(where, "a mapping with one of 'load' and 'path'", dict(entry))
            load = entry.get("load", entry.get("path"))
            tiny = entry.get("tiny")
            if (load is None) == (tiny is None):
                fail_short("models entry", "a mapping with exactly one of 'load' and 'tiny'", dict(entry))
            if load is not None:
                load = _text(f"{where}.load", load)
            if tiny is not None:
                tiny = _check_tiny(f"{where}.tiny", tiny)
            name = _text(f"{where}.name", entry.get("name"), none=True)
            return cls(load=load, tiny=tiny, name=name)
        fail_short("models entry", "a model name or a mapping (name, load or tiny)", entry)

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
        # every check runs here, before anything is built: a spec that exists is a spec that runs
        if isinstance(self.models, (str, Mapping)):
            self.models = [self.models]
        if not isinstance(self.models, (list, tuple)) or not self.models:
            fail_short("models", "a model or a non-empty list of models", self.models)
        if len(self.models) > MAX_LIST:
            fail_short("models", f"a list of at most {MAX_LIST:,} models", self.models)
        self.models = [ModelSpec.parse(e, f"models[{i}]") for i, e in enumerate(self.models)]
        labels = [ms.label for ms in self.models]
        if len(set(labels)) != len(labels):
            fail_short("models", "entries with distinct store names", labels)
        self.m = _int_list("m", self.m, 1, MAX_LENGTH)
        self.seeds = _int_list("seeds", self.seeds, 0, MAX_SEED)
        self.samples = _int("samples", self.samples, 1, MAX_STRINGS)
        from accesslib.engine import targets  # the names of the target sources
        _choice("source", self.source, targets.SOURCES)
        if (self.lengths is None) == (self.search is None):
            fail_short("lengths and search", "exactly one given: 'lengths' (a fixed grid of n) or 'search' (an "
                       "adaptive length search)", dict(lengths=self.lengths, search=self.search))
        if self.lengths is not None:
            self.lengths = sorted(set(_int_list("lengths", self.lengths, 1, MAX_LENGTH)))
        if self.search is not None:
            self.search = _check_search(self.search)
        self.engine = check_engine(self.engine)
        if not isinstance(self.device, str) or not (
                self.device in DEVICES or (self.device.startswith("cuda:") and self.device[5:].isdigit()
                                           and len(self.device) < 12)):
            fail_short("device", "one of 'cpu', 'cuda', 'cuda:N', 'auto'", self.device)
        if not isinstance(self.dtype, str) or self.dtype.lower().replace("torch.", "") not in DTYPES:
            fail_short("dtype", f"one of {', '.join(map(repr, DTYPES))}", self.dtype)
        self.store = _text("store", self.store, none=True)
        self.name = _text("name", self.name)
        if self.workers is not None:
            self.workers = _int("workers", self.workers, 1, 4_096)
        self.torch_threads = _int("torch_threads", self.torch_threads, 1, 1_024)
        self.retries = _int("retries", self.retries, 0, 100)
        self.model_cache = _int("model_cache", self.model_cache, 1, 64)
        _choice("write", self.write, WRITE)
        # sizes, counted: jobs and strings (never built here)
        jobs = len(self.models) * len(self.m) * len(self.seeds) * len(self.lengths or [None])
        if jobs > MAX_JOBS:
            fail_short("jobs", f"at most {MAX_JOBS:,} (models x m x seeds x lengths)", jobs)
        if jobs * self.samples > MAX_STRINGS:
            fail_short("strings", f"at most {MAX_STRINGS:,} (jobs x samples)", jobs * self.samples)

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
        fail_short("search", "a mapping with a 'method' (or a method name)", search)
    out = dict(search)
    method = out.get("method", "bisect")
    if not isinstance(method, str) or method not in SEARCH_METHODS:
        fail_short("search.method", "one of 'bisect', 'paper' (a fixed grid is 'lengths:')", method)
    unknown = [k for k in out if k != "method" and k not in _SEARCH_OPTIONS]
    if unknown:
        fail_short("search options", f"among method, {', '.join(_SEARCH_OPTIONS)}", sorted(map(str, unknown)))
    for key, check in _SEARCH_OPTIONS.items():
        if key in out:
            out[key] = check(f"search.{key}", out[key])
    return out


class _Refused(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def _loader():
    """A yaml SafeLoader that refuses anchors and aliases and counts the values it reads."""
    import yaml

    class SweepLoader(yaml.SafeLoader):
        values = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            alias = isinstance(event, yaml.AliasEvent)
            if alias or getattr(event, "anchor", None) is not None:
                mark = event.start_mark
                what = f"{'an alias *' if alias else 'an anchor &'}{str(event.anchor)[:40]}"
                raise _Refused(f"sweep description must be YAML without anchors or aliases (&name, *name); "
                               f"got {what} at line {mark.line + 1}, column {mark.column + 1}")
            self.values += 1
            if self.values > MAX_YAML_VALUES:
                raise _Refused(f"sweep description must have at most {MAX_YAML_VALUES:,} YAML values; got "
                               f"more (line {event.start_mark.line + 1})")
            return super().compose_node(parent, index)

    return SweepLoader


def _read_yaml(text: str):
    import yaml
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise ValueError(f"sweep description must be at most {MAX_FILE_BYTES:,} bytes; got "
                         f"{len(text.encode('utf-8', 'replace')):,} bytes")
    loader = _loader()(text)
    try:
        return loader.get_single_data()
    except _Refused as e:
        raise ValueError(str(e)) from None
    except RecursionError:
        raise ValueError("sweep description is not valid YAML: nested too deeply") from None
    except (yaml.YAMLError, ValueError, TypeError) as e:
        # one line: yaml's messages span lines (the problem, then where)
        msg = " ".join(re.sub(r'\s*in "<unicode string>",', " at", str(e)).split()) or type(e).__name__
        msg = msg if len(msg) <= 200 else msg[:197] + "..."
        raise ValueError(f"sweep description is not valid YAML: {msg}") from None
    finally:
        loader.dispose()


def load_spec(description, /, **overrides) -> SweepSpec:
    """A :class:`SweepSpec` from a YAML file path, a YAML string, a dict or a SweepSpec, checked
    completely (see the module docstring: keys, types, ranges, sizes, no YAML aliases).

    ``overrides`` replace top-level keys (e.g. ``store=...``, ``workers=2``). A relative
    ``store`` path in a file is taken relative to the current directory.
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(description, SweepSpec):
        return description.replace(**overrides) if overrides else description
    if isinstance(description, Mapping):
        data = dict(description)
    else:
        text = os.fspath(description) if isinstance(description, os.PathLike) else str(description)
        p = Path(os.path.expanduser(text)) if "\n" not in text and len(text) < 4096 else None
        if p is not None and p.suffix.lower() in (".yaml", ".yml", ".json"):
            if not p.is_file():
                fail("sweep file", "an existing file", str(p))
            size = p.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ValueError(f"sweep file must be at most {MAX_FILE_BYTES:,} bytes; got {size:,} bytes")
            text = p.read_text(encoding="utf-8", errors="replace")
        data = _read_yaml(text)
        if not isinstance(data, Mapping):
            fail_short("sweep description", "a YAML mapping (models:, m:, ...)", data)
    data.update(overrides)
    known = [f.name for f in dataclasses.fields(SweepSpec)]
    _keys("sweep", data, known)
    for required in ("models", "m"):
        if required not in data:
            fail(required, "given (a sweep needs models and m)", None)
    return SweepSpec(**data)
