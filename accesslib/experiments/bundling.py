"""Making results bundles: the measurements behind the pages that open complete.

A bundle (:mod:`accesslib.results.bundles`) keeps a model's accessibility curves, slope fit and
geometry; this module measures them (cramming curves, geometry report, effective eps) and
returns the bundle dict. ``scripts/make_bundles.py`` is its command line.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone

from accesslib.config import hardware
from accesslib.models import facts
from accesslib.results.bundles import (
    BUNDLE_VERSION,
    curve_record,
    effective_record,
    geometry_record,
    slope_record,
)


def crammed_memory(lm, n: int, *, source: str = "tokens", seed: int = 0, tries: int = 4,
                   prefix_ids=None):
    """A memory vector (m = 1) that greedily produces an n-token target (after ``prefix_ids``),
    crammed with the fast protocol: (memory [1, d], target ids), or None when none of
    ``tries`` targets could be crammed."""
    from accesslib.engine import cramming, targets

    n = max(2, int(n))
    tg, _ = targets.make_targets(source, n, tries, seed=seed, tokenizer=lm.tokenizer,
                                 vocab_size=facts.shared_vocab_size(lm.model))
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
    rec = effective_record(eff)
    rec.update(around=around, prefix_ids=list(prefix_ids or []))
    return rec


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
    from accesslib.experiments.curves import accessibility_curves
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
        bar = tqdm(desc=f"{model_name}", unit="str")
    kw = dict(cram_overrides)
    lengths = kw.pop("lengths", None)
    # one engine for every m: their length searches share its batch (continuous batching)
    cs = accessibility_curves(lm, [int(m) for m in ms], lengths, samples=samples, source=source, seed=seed,
                              store=store, search=search, protocol=protocol,
                              on_string=(lambda row: (bar.update(1), bar.set_postfix(m=row["m"], n=row["n"])))
                              if bar is not None else None, **kw)
    settings = cs[0].settings if cs else None
    for m, c in zip(ms, cs):
        curves.append(curve_record(c))
        # a few examples near n50 for the page: target text and what greedy decoding gave
        tok = lm.tokenizer
        for n in sorted(c.results, key=lambda n: abs(n - (curves[-1]["n50"] or n)))[:1]:
            for row in c.results[n][:examples]:
                greedy = tok.decode(row["greedy_ids"]) if tok is not None and row.get("greedy_ids") else None
                ex.append(dict(m=int(m), n=int(n), success=bool(row["success"]), steps=int(row["steps"]),
                               target=row.get("target_text"), greedy=greedy))
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
