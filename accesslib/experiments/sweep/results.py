"""A sweep's results read back from the store: counts per (model, m), the n50 table and its text."""
from __future__ import annotations

import math
import os

from accesslib.experiments.sweep.jobs import protocol_hash_of
from accesslib.experiments.sweep.spec import load_spec

__all__ = ["sweep_curves", "sweep_table", "format_table"]


def sweep_curves(spec, store=None) -> dict[tuple[str, int], dict[int, tuple[int, int]]]:
    """Accessibility counts per (model, m) from the store, all of the spec's seeds pooled:
    ``{(model, m): {n: (successes, total)}}`` (only strings of the spec's protocol and source).

    ``store``: a ResultsStore, a path, or None (the spec's store)."""
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
    """One dict per (model, m): strings, successes, n50 and its stderr (``theory.stats.fit_n50``),
    plus per model the slope of n50 against m (``theory.stats.fit_slope``) when two m have an n50."""
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
