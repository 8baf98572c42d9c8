"""A sweep's budget check: is its n50 a property of the models or of the step budget?

:func:`budget_spec` is the same sweep at m = 1 and the largest m with ``factor`` times the step
budget and patience (every other setting the same, so the same strings: they are seeded by the
seed, length and source); it runs like any sweep (its rows go to the same store under their own
protocol hash) and :func:`budget_table` sets its n50 beside the sweep's own, with the verdict of
:func:`accesslib.experiments.bundling.budget_check`: *moved* when the two differ by more than
their combined standard error, a model whose n50 moved at any m checked is *budget-limited*.
``python -m accesslib sweep FILE --budget-check [FACTOR]`` runs both and prints the table.
"""
from __future__ import annotations

import math

from accesslib.experiments.sweep.jobs import engine_settings
from accesslib.experiments.sweep.spec import SweepSpec, load_spec

__all__ = ["budget_spec", "budget_table", "engine_steps", "format_budget"]


def budget_spec(spec, factor: int = 3) -> SweepSpec:
    """The sweep re-measured with ``factor`` times the step budget and patience, at m = 1 (or the
    smallest m) and the largest m; named ``<name>-budget-x<factor>``."""
    from accesslib._checks import check_int
    from accesslib.engine.cramming import protocol_settings

    spec = load_spec(spec)
    factor = check_int("factor", factor, 2)
    protocol, overrides = engine_settings(spec)
    base = protocol_settings(protocol, **overrides)
    engine = dict(spec.engine, max_steps=int(base["max_steps"]) * factor,
                  patience=int(base["patience"]) * factor)
    return spec.replace(m=sorted({min(spec.m), max(spec.m)}), engine=engine, name=f"{spec.name}-budget-x{factor}")


def budget_table(spec, factor: int = 3, store=None) -> list[dict]:
    """One dict per (model, m checked): n50 ± stderr at the sweep's budget and at ``factor`` times
    it (None where a fit does not locate a falling curve's midpoint among the lengths measured),
    ``shift`` (in combined stderrs), ``moved`` (None: not comparable), the strings at each budget,
    and per model ``verdict``: "budget-limited", "converged", "inconclusive" or "not measured"."""
    from accesslib.experiments.bundling import n50_moved, usable_n50
    from accesslib.experiments.sweep.results import sweep_curves
    from accesslib.theory.stats import fit_n50

    spec = load_spec(spec)
    check = budget_spec(spec, factor)
    base, longer = sweep_curves(spec, store), sweep_curves(check, store)
    steps = [int(s) for s in (engine_steps(spec), engine_steps(check))]

    def n50_of(curve):
        if not curve:
            return None, None
        fit = fit_n50(curve)
        finite = [None if not math.isfinite(v) else float(v) for v in (fit.n50, fit.stderr, fit.k)]
        return usable_n50(*finite, fit.status, sorted(curve))

    rows = []
    for model in spec.model_labels:
        for m in check.m:
            c0, c1 = base.get((model, m)) or {}, longer.get((model, m)) or {}
            (n50, se), (n50_x, se_x) = n50_of(c0), n50_of(c1)
            moved, shift = n50_moved(n50, se, n50_x, se_x)
            rows.append(dict(model=model, m=m, max_steps=steps, n50=n50, stderr=se, n50_x=n50_x, stderr_x=se_x,
                             shift=shift, moved=moved, strings=sum(t for _, t in c0.values()),
                             strings_x=sum(t for _, t in c1.values())))
    for model in spec.model_labels:
        mine = [r for r in rows if r["model"] == model]
        verdict = ("not measured" if not any(r["strings_x"] for r in mine) else
                   "budget-limited" if any(r["moved"] is True for r in mine) else
                   "inconclusive" if any(r["moved"] is None for r in mine) else "converged")
        for r in mine:
            r["verdict"] = verdict
    return rows


def engine_steps(spec) -> int:
    """The step budget (max_steps) of a sweep's engine settings."""
    from accesslib.engine.cramming import protocol_settings
    protocol, overrides = engine_settings(spec)
    return int(protocol_settings(protocol, **overrides)["max_steps"])


def format_budget(rows: list[dict]) -> str:
    """The budget table as aligned text, a verdict line per model (what the CLI prints)."""
    def fmt(v, se):
        return "-" if v is None else f"{v:.1f} +- {se:.1f}"

    if not rows:
        return ""
    s0, s1 = rows[0]["max_steps"]
    lines = [f"{'model':<28} {'m':>3} {f'n50, {s0} steps':>18} {f'n50, {s1} steps':>18} {'moved':>12}"]
    for r in rows:
        moved = "-" if r["moved"] is None else ("yes" if r["moved"] else "no") + f" ({r['shift']:+.1f})"
        lines.append(f"{r['model']:<28} {r['m']:>3} {fmt(r['n50'], r['stderr']):>18} "
                     f"{fmt(r['n50_x'], r['stderr_x']):>18} {moved:>12}")
    for model in dict.fromkeys(r["model"] for r in rows):
        lines.append(f"{model}: {next(r['verdict'] for r in rows if r['model'] == model)}")
    return "\n".join(lines)
