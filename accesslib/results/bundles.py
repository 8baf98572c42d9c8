"""Precomputed results bundles: what the apps show the moment a page opens.

A bundle is a JSON file in ``accesslib/data/bundles/`` produced by ``scripts/make_bundles.py``
with the project's own engine (nothing hand-typed). Each states the model, settings, date,
hardware and wall time. Kinds:

- ``cram-<model>.json``: accessibility curves for m = 1..M, their n50 fits and the slope fit.

:func:`make_cramming_bundle` measures one; :func:`load` / :func:`available` read them back.
Reading needs only json and numpy (no torch).
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from accesslib.config import data_path

BUNDLE_VERSION = 1


def bundle_dir() -> Path:
    return data_path("bundles")


def _file_name(kind: str, model: str) -> str:
    return f"{kind}-{model.replace('/', '--')}.json"


def available(kind: str = "cram") -> list[str]:
    """Model names that have a bundle of ``kind``."""
    d = bundle_dir()
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.glob(f"{kind}-*.json")):
        try:
            out.append(json.loads(p.read_text())["model"])
        except (OSError, ValueError, KeyError):
            continue
    return out


def load(kind: str, model: str, directory: str | os.PathLike | None = None) -> dict:
    """The bundle of ``kind`` for ``model``; ValueError naming what exists when there is none."""
    p = Path(directory or bundle_dir()) / _file_name(kind, model)
    if not p.is_file():
        have = ", ".join(available(kind)) or "none"
        raise ValueError(f"no precomputed {kind!r} bundle for model {model!r} (have: {have}); "
                         "run scripts/make_bundles.py to make one")
    return json.loads(p.read_text())


def save(bundle: dict, directory: str | os.PathLike | None = None) -> Path:
    d = Path(directory or bundle_dir())
    d.mkdir(parents=True, exist_ok=True)
    p = d / _file_name(bundle["kind"], bundle["model"])
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(bundle, indent=1, default=float))
    os.replace(tmp, p)  # a reader never sees half a file
    return p


def hardware() -> dict:
    """What the numbers were measured on."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return dict(cpu=cpu, cores=os.cpu_count(), torch_threads=torch.get_num_threads(), device=dev,
                torch=torch.__version__, python=sys.version.split()[0], platform=platform.platform())


def _finite(x):
    return None if x is None or x != x or x in (float("inf"), float("-inf")) else float(x)


def curve_record(curve) -> dict:
    """A JSON-able summary of an :class:`accesslib.experiments.curves.AccessibilityCurve` with its fit."""
    fit = curve.fit()
    return dict(m=curve.m, lengths=list(curve.lengths), successes=list(curve.successes),
                totals=list(curve.totals), n50=_finite(fit.n50), n50_stderr=_finite(fit.stderr),
                k=_finite(fit.k), fit_status=fit.status, fit_message=fit.message,
                strings_crammed=curve.strings_crammed, strings_from_store=curve.strings_from_store,
                wall_time=round(curve.wall_time, 2), interrupted=curve.interrupted)


def slope_record(curves: list[dict]) -> dict | None:
    """fit_slope over the curves' n50 (weighted by their stderrs when all are finite)."""
    from accesslib.theory.stats import fit_slope

    pts = [(c["m"], c["n50"], c["n50_stderr"]) for c in curves if c["n50"] is not None]
    if len({p[0] for p in pts}) < 2:
        return None
    ms, ys, _ = zip(*pts)
    fit = fit_slope(ms, ys)
    return dict(slope=fit.slope, intercept=fit.intercept, r2=_finite(fit.r2),
                slope_stderr=_finite(fit.slope_stderr), n_points=fit.n_points, weighted=False)


def geometry_record(report, effective=None) -> dict:
    """What the apps need of an :class:`accesslib.engine.geometry.GeometryReport` to redraw every
    refined bound at any eps: the measured support (widths, semi-axes, cone half-angle) and
    s_conv, plus the slopes at the report's own eps for the record. ``effective``: an
    :class:`accesslib.engine.geometry.EffectiveEps` to keep too (thresholds; null = no change up to
    t_max)."""
    st = report.stats
    rec = dict(r_inf=st.r_inf, r_2=st.r_2, min_cos=st.min_cos, phi=float(st.phi), n_samples=st.n,
               widths=[float(w) for w in st.widths], eps=report.eps, dtype=report.dtype,
               slopes={k: float(v.C) for k, v in report.slopes.items()})
    if st.axes is not None:
        rec["semi_axes"] = [float(a) for a in st.axes.semi_axes]
    if report.sconv is not None:
        sc, cells = report.sconv, report.cells
        hit = np.flatnonzero(cells.counts)
        rec.update(s_conv=sc.s_conv, s_conv_r2=_finite(sc.r2), s_conv_zero_hit=sc.zero_hit,
                   zero_hit_tokens=sc.n_zero, cells_n_samples=cells.n_samples,
                   cells_assign=cells.assign, cells_support=cells.support,
                   cells_sample_limited=bool(sc.sample_limited),
                   # sparse counts: every token's hits, so s_conv can be refitted under any rule
                   cell_hits={"tokens": [int(t) for t in hit],
                              "counts": [int(c) for c in cells.counts[hit]]})
        if report.sconv_drop is not None:
            rec["s_conv_drop"] = report.sconv_drop.s_conv
        if report.convergence:
            rec["s_conv_convergence"] = [dict(row) for row in report.convergence]
    if effective is not None:
        rec["effective_eps"] = _effective_record(effective)
    return rec


def crammed_memory(lm, n: int, *, source: str = "tokens", seed: int = 0, tries: int = 4,
                   prefix_ids=None):
    """A memory vector (m = 1) that greedily produces an n-token target (after ``prefix_ids``),
    crammed with the fast protocol: (memory [1, d], target ids), or None when none of
    ``tries`` targets could be crammed."""
    from accesslib.engine import cramming, targets

    n = max(2, int(n))
    tg, _ = targets.make_targets(source, n, tries, seed=seed, tokenizer=lm.tokenizer,
                                 vocab_size=lm.facts.vocab_size)
    res = cramming.cram(lm, tg, 1, seed=seed, prefix_ids=prefix_ids, **cramming.PROTOCOLS["fast"])
    for i, r in enumerate(res.strings):
        if r.success:
            return r.memory.reshape(1, -1), [int(t) for t in tg[i].tolist()]
    return None


def measure_effective_eps(lm, directions: int = 16, *, memory_n=None, source="tokens",
                          prefix_ids=None, seed=0) -> dict:
    """The effective-eps part of a geometry record: thresholds over ``directions`` random
    directions around a memory crammed with ``memory_n`` tokens from ``source`` after
    ``prefix_ids`` (:func:`crammed_memory`; e.g. a little below n50 at m = 1), the output
    that must not change being those n tokens; without ``memory_n``, or when cramming fails,
    around a random memory vector (the cramming init), watching 4 tokens."""
    from accesslib.engine.geometry import effective_eps

    got = crammed_memory(lm, memory_n, source=source, seed=seed, prefix_ids=prefix_ids) if memory_n else None
    if got is not None:
        mem, ids = got
        eff = effective_eps(lm, mem, n_directions=int(directions), n_tokens=len(ids),
                            prefix_ids=prefix_ids, seed=seed)
        around = f"a memory crammed with {len(ids)} tokens ({source})"
    else:
        eff = effective_eps(lm, n_directions=int(directions), prefix_ids=prefix_ids, seed=seed)
        around = "a random memory vector (4 tokens)"
    rec = _effective_record(eff)
    rec.update(around=around, prefix_ids=list(prefix_ids or []))
    return rec


def _effective_record(effective) -> dict:
    med = effective.quantiles()[1]
    return dict(rel=[float(x) if np.isfinite(x) else None for x in effective.rel],
                n_tokens=int(effective.n_tokens), t_max=float(effective.t_max),
                median=float(med) if np.isfinite(med) else None)


def measure_geometry(lm, model_name, *, seed=0, progress=True, effective_eps=16, memory_n=None,
                     memory_source="tokens", prefix_ids=None, **options) -> dict:
    """:func:`geometry_record` of a fresh :func:`accesslib.engine.geometry.geometry_report` (``options``
    go to it) with :func:`measure_effective_eps` over ``effective_eps`` directions (0: none)."""
    from accesslib.engine.geometry import geometry_report

    rec = geometry_record(geometry_report(lm, name=model_name, progress=progress, seed=seed, **options))
    if effective_eps:
        rec["effective_eps"] = measure_effective_eps(lm, effective_eps, memory_n=memory_n,
                                                     source=memory_source, prefix_ids=prefix_ids,
                                                     seed=seed)
    return rec


def make_cramming_bundle(model_name: str, ms=(1, 2, 3, 4), *, samples: int = 16, source: str = "natural",
                         protocol: str = "fast", search: str = "bisect", seed: int = 0, store=None,
                         examples: int = 3, progress: bool = True, command: str = "", geometry: bool = True,
                         geometry_options: dict | None = None, **cram_overrides) -> dict:
    """Measure accessibility curves of ``model_name`` for each m and return the bundle dict.

    Uses :func:`accesslib.experiments.curves.accessibility_curve` (strings go to ``store`` when given,
    so an interrupted run resumes) and :func:`fit_slope`. ``cram_overrides`` (e.g. max_steps)
    are recorded in the settings; ``lengths`` (search="grid") may be a dict {m: lengths};
    ``prefix_ids="bos"`` puts the model's BOS token before the memory.
    With ``geometry`` the model's support and decoder cells are
    measured too (:func:`accesslib.engine.geometry.geometry_report`), so the apps can draw the
    refined bounds; ``geometry`` may also be a geometry record measured before (a dict).
    """
    from accesslib.experiments.curves import accessibility_curve
    from accesslib.models.loading import load_model

    lm = load_model(model_name)
    if cram_overrides.get("prefix_ids") == "bos":   # the model's BOS token before the memory
        from accesslib.engine.cramming import default_prefix
        cram_overrides["prefix_ids"] = default_prefix(lm) or None
    t0 = time.perf_counter()
    curves, ex = [], []
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(ms), desc=f"{model_name}", unit="m")
    settings = None
    for m in ms:
        kw = dict(cram_overrides)
        if isinstance(kw.get("lengths"), dict):   # grid lengths per m
            kw["lengths"] = kw["lengths"][m]
        c = accessibility_curve(lm, int(m), samples=samples, source=source, seed=seed, store=store,
                                search=search, protocol=protocol, **kw)
        settings = c.settings
        curves.append(curve_record(c))
        # a few examples near n50 for the page: target text and what greedy decoding gave
        tok = lm.tokenizer
        for n in sorted(c.results, key=lambda n: abs(n - (curves[-1]["n50"] or n)))[:1]:
            for row in c.results[n][:examples]:
                greedy = tok.decode(row["greedy_ids"]) if tok is not None and row.get("greedy_ids") else None
                ex.append(dict(m=int(m), n=int(n), success=bool(row["success"]), steps=int(row["steps"]),
                               target=row.get("target_text"), greedy=greedy))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(n50=curves[-1]["n50"])
    if bar is not None:
        bar.close()
    geo = None
    if geometry is True:
        n50s = [c["n50"] for c in curves if c["m"] == 1 and c["n50"]]
        opts = dict(memory_n=int(0.75 * n50s[0]) if n50s else None, memory_source=source,
                    prefix_ids=(settings or {}).get("prefix_ids"))
        opts.update(geometry_options or {})
        geo = measure_geometry(lm, model_name, seed=seed, progress=progress, **opts)
    elif isinstance(geometry, dict):   # a record measured before (python -m accesslib geometry --out)
        geo = geometry
    f = lm.facts
    return dict(kind="cram", version=BUNDLE_VERSION, model=model_name,
                facts=dict(d=f.d, vocab_size=f.vocab_size, dtype=f.dtype, family=f.family,
                           max_context=f.max_context),
                source=source, samples=samples, search=search, seed=seed, protocol=protocol,
                settings={k: (list(v) if isinstance(v, tuple) else v) for k, v in (settings or {}).items()},
                curves=curves, slope=slope_record(curves), examples=ex, geometry=geo,
                created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                hardware=hardware(), wall_time=round(time.perf_counter() - t0, 1), command=command)
