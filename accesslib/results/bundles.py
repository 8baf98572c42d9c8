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
import math
import os
from pathlib import Path

import numpy as np

from accesslib.config import data_path
from accesslib.theory import bounds, refined

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


def finite_or_none(x):
    """x as a float, or None when it is None, NaN or infinite (JSON has no NaN)."""
    return None if x is None or x != x or x in (float("inf"), float("-inf")) else float(x)


def curve_record(curve) -> dict:
    """A JSON-able summary of an :class:`accesslib.experiments.curves.AccessibilityCurve` with its fit."""
    fit = curve.fit()
    return dict(m=curve.m, lengths=list(curve.lengths), successes=list(curve.successes),
                totals=list(curve.totals), n50=finite_or_none(fit.n50), n50_stderr=finite_or_none(fit.stderr),
                k=finite_or_none(fit.k), fit_status=fit.status, fit_message=fit.message,
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
    return dict(slope=fit.slope, intercept=fit.intercept, r2=finite_or_none(fit.r2),
                slope_stderr=finite_or_none(fit.slope_stderr), n_points=fit.n_points, weighted=False)


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
        rec.update(s_conv=sc.s_conv, s_conv_r2=finite_or_none(sc.r2), s_conv_zero_hit=sc.zero_hit,
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
        rec["effective_eps"] = effective_record(effective)
    return rec



def patience_stop(history, patience: int) -> int | None:
    """The step at which a run with ``patience`` on teacher-forced accuracy stops a string whose
    best accuracy rose at the steps of ``history`` (``StringResult.accuracy_history``: [step,
    accuracy] pairs, the first at step 0): the first step ``patience`` steps after a rise that
    is not followed by another within them. None for an empty history (nothing known)."""
    steps = [int(s) for s, _ in history]
    if not steps:
        return None
    for here, after in zip(steps, steps[1:]):
        if after - here > patience:
            return here + patience
    return steps[-1] + patience


def ended_under(step: int, history, max_steps: int, patience: int | None) -> bool:
    """Whether a budget of ``max_steps`` steps and ``patience`` on teacher-forced accuracy
    (:func:`patience_stop`; None: steps only) would already have ended, uncrammed, a string still
    being crammed that has been evaluated at steps 0 .. ``step`` - 1 with best-accuracy rises at
    ``history``: its last evaluation under that budget (at ``max_steps``, or where the patience
    stops it) lies before ``step``. False where it still could cram, and for patience without a
    history (nothing known)."""
    step = int(step)
    if step > max_steps:
        return True
    stop = patience_stop(history, patience) if history and patience is not None else None
    return stop is not None and stop < step


def longest_stall(history, steps: int) -> int | None:
    """The most steps a string went without a rise of its best teacher-forced accuracy: between two
    rises of ``history`` (``StringResult.accuracy_history``, [step, accuracy] pairs), or from the
    last rise to ``steps`` (where it crammed, or stopped). A string whose longest stall exceeds a
    run's patience is one that patience would have stopped (:func:`patience_stop`: a string crams
    under a patience exactly when none of its stalls exceeds it). None for an empty history."""
    if not history:
        return None
    marks = [int(s) for s, _ in history] + [int(steps)]
    return max(b - a for a, b in zip(marks, marks[1:]))


def single_point(bundle):
    """(m, n50, stderr) when the bundle measured one m only (no slope to fit, e.g. Gemma-3-270M
    at m = 1): the bound's own prediction there is n* = C·m, set against that n50 (n*/n50) in
    place of C/a; None when the bundle has a slope or no n50."""
    if (bundle.get("slope") or {}).get("slope"):
        return None
    pts = [c for c in bundle.get("curves") or [] if c.get("n50") is not None]
    if len(pts) != 1:
        return None
    c = pts[0]
    return int(c["m"]), float(c["n50"]), float(c.get("n50_stderr") or 0.0)


def effective_record(effective) -> dict:
    med = effective.quantiles()[1]
    return dict(rel=[float(x) if np.isfinite(x) else None for x in effective.rel],
                n_tokens=int(effective.n_tokens), t_max=float(effective.t_max),
                median=float(med) if np.isfinite(med) else None)



#: what a shipped bundle keeps of another run of its model (:func:`remeasure_record`)
REMEASURE_KEYS = ("source", "protocol", "settings", "samples", "search", "seed", "curves", "slope", "budget_check",
                  "budget_ladder", "created", "wall_time", "hardware", "command", "read_from")


def with_propagated_stderr(slope: dict | None, curves) -> dict | None:
    """``slope`` (a bundle's fit n50 = a*m + b) with the stderr its points' own n50 stderrs give
    the slope (:func:`accesslib.theory.stats.propagated_slope_stderr`; ``stderr_from`` says so) in
    place of the least-squares residual one, kept as ``slope_stderr_residual``: the stderr `store
    ladder` gives every budget read from one run, so that slopes read from the same strings at
    several budgets compare like with like. ``slope`` unchanged (a copy) where it has it already or
    a curve of the fit has no n50 stderr; None stays None."""
    if not slope:
        return slope
    slope = dict(slope)
    pts = [(c["m"], c.get("n50_stderr")) for c in curves if c.get("n50") is not None]
    if slope.get("stderr_from") or not pts or any(se is None for _, se in pts):
        return slope
    from accesslib.theory.stats import propagated_slope_stderr

    residual = slope.get("slope_stderr")
    se = propagated_slope_stderr(*zip(*pts))
    slope.update(slope_stderr=se if math.isfinite(se) else None, stderr_from="n50 stderrs")
    if residual is not None:
        slope["slope_stderr_residual"] = residual
    return slope


def remeasure_record(run: dict, origin: str) -> dict:
    """The bundle ``run`` of another measurement of a model (another protocol, target source or
    step budget) as the model's shipped bundle keeps it under ``"remeasured"``: its conditions,
    curves, slope and budget checks (:data:`REMEASURE_KEYS`), without its examples and geometry,
    and ``origin``: where its whole bundle and strings are. It reads like a bundle
    (:func:`budget_status`, :func:`ladder_text` take it). Its slope's stderr is the one its n50
    stderrs give it (:func:`with_propagated_stderr`), as for the budgets read from the same run
    (``make_bundles.py --read-budget``) beside it."""
    if run.get("kind") != "cram" or not run.get("curves"):
        raise ValueError("a re-measurement must be a cramming bundle with curves (kind 'cram'); got "
                         f"kind {run.get('kind')!r} with {len(run.get('curves') or [])} curves")
    rec = {k: json.loads(json.dumps(run[k])) for k in REMEASURE_KEYS if k in run}
    if rec.get("slope"):
        rec["slope"] = with_propagated_stderr(rec["slope"], rec["curves"])
    rec["origin"] = str(origin)
    return rec


def add_remeasure(bundle: dict, run: dict, origin: str) -> dict:
    """``bundle`` with ``run`` (a bundle of the same model) among its re-measurements, in place of
    an earlier record of the same run (source, protocol settings, seed and strings per length: a
    run that went on), at that record's place, so the order of the markers, lines and tables stays;
    returns the record."""
    if run.get("model") != bundle.get("model"):
        raise ValueError(f"the re-measurement is of model {run.get('model')!r}, the bundle of {bundle.get('model')!r}")
    rec = remeasure_record(run, origin)
    mine = run_conditions(rec)
    records = list(bundle.get("remeasured") or [])
    at = next((i for i, r in enumerate(records) if run_conditions(r) == mine), len(records))
    bundle["remeasured"] = records[:at] + [rec] + [r for r in records[at:] if run_conditions(r) != mine]
    return rec


def run_conditions(bundle: dict) -> list:
    """What makes two bundles (or re-measurement records) runs of the very same strings under the same
    protocol and budget: source, protocol, its settings (steps and patience included), seed and
    strings per length, JSON-normalised (tuples as lists)."""
    return [json.loads(json.dumps(bundle.get(k))) for k in ("source", "protocol", "settings", "seed", "samples")]


def add_budget_map(bundle: dict, mp: dict) -> dict:
    """``bundle`` with ``mp`` (a map of :func:`accesslib.experiments.bundling.budget_map`, of the
    bundle's model) under ``"budget_maps"``, in place of an earlier map of the same curve (source,
    protocol and m: a run read again as it went on); kept sorted by source, protocol and m. JSON
    round-tripped (tuples become lists); returns the record."""
    if mp.get("model") != bundle.get("model"):
        raise ValueError(f"the budget map is of model {mp.get('model')!r}, the bundle of {bundle.get('model')!r}")
    rec = json.loads(json.dumps(mp))

    def key(r):
        return r["source"], r["protocol_hash"], int(r["m"])

    kept = [r for r in bundle.get("budget_maps") or [] if key(r) != key(rec)]
    bundle["budget_maps"] = sorted(kept + [rec], key=key)
    return rec


def budget_words(max_steps, patience) -> str:
    """A budget in a label: "9,000 / 1,500", "9,000 steps" without a patience, "?" without steps."""
    if max_steps is None:
        return "?"
    return f"{max_steps:,} / {patience:,}" if patience is not None else f"{max_steps:,} steps"


def remeasure_rungs(rec) -> list[tuple]:
    """A re-measurement's n50 as (m, rung, budget words): its budget ladder's rungs at the ladder's
    m (smaller budgets read from its strings), and its curves at every other m (or at every m
    without a ladder) at the run's own budget; by m, then by budget."""
    settings = rec.get("settings") or {}
    lad = rec.get("budget_ladder") or {}
    rungs = sorted(lad.get("rungs") or [], key=lambda r: r["max_steps"])
    out = [(int(lad["m"]), r, budget_words(r.get("max_steps"), r.get("patience"))) for r in rungs]
    own = budget_words(settings.get("max_steps"), settings.get("patience"))
    out += [(int(c["m"]), dict(c, stderr=c.get("n50_stderr"), max_steps=settings.get("max_steps"),
                               patience=settings.get("patience")), own) for c in rec.get("curves") or []
            if not (rungs and c["m"] == lad.get("m"))]
    return sorted(out, key=lambda t: (t[0], t[1].get("max_steps") or 0))


#: Labels of :func:`budget_status`.
BUDGET_LABELS = ("converged", "budget-limited", "inconclusive", "not checked")


def _fmt(x, f=".1f") -> str:
    return format(x, f) if isinstance(x, (int, float)) else x if isinstance(x, str) else "?"


def budget_status(bundle: dict) -> tuple[str, str]:
    """Whether a bundle's n50 are a property of the model or of its step budget: (label, text).

    The bundle's own checks (:func:`own_budget_status`), and those of its second samples
    (:func:`second_samples`: re-measurements of the same strings under the same protocol and
    budget, whose own check, e.g. against a larger budget read from their strings, is evidence
    about that budget too): the label is the strongest of them ("budget-limited" over "converged"
    over "inconclusive" over "not checked"), the text says each.
    """
    label, text = own_budget_status(bundle)
    for rec in second_samples(bundle):
        other, said = own_budget_status(rec)
        if other == "not checked":
            continue
        text += (f" A second run of the same strings under the same protocol and budget "
                 f"({rec.get('origin') or 'another run'}) checked it too: {said}")
        label = max(label, other, key=_LABEL_RANK.index)
    return label, text


#: :func:`budget_status`'s labels, weakest first: a check that moved outweighs one that did not,
#: which outweighs one that could not tell.
_LABEL_RANK = ("not checked", "inconclusive", "converged", "budget-limited")


def second_samples(bundle: dict) -> list[dict]:
    """The bundle's re-measurements (``"remeasured"``) of the very same conditions: source, protocol
    and its settings (step budget and patience included), seed and strings per length. A second
    run of those strings differs from the bundle only by what the runs ran on (float rounding: see
    docs/engine.md), so a budget check of it speaks for the bundle's budget too."""
    mine = run_conditions(bundle)
    return [r for r in bundle.get("remeasured") or [] if run_conditions(r) == mine]


def open_n50_text(check_row: dict) -> str | None:
    """A budget check's larger-budget n50 where that budget's strings are still open (read from a run
    still going: its ``n50_3x_low``), "at least 17.2 (strings still being crammed)"; None without one."""
    low = check_row.get("n50_3x_low")
    return None if low is None else f"at least {low:.1f} (strings still being crammed)"


def own_budget_status(bundle: dict) -> tuple[str, str]:
    """:func:`budget_status` of the bundle's own checks, its second samples left out.

    Reads the bundle's "budget_check" (:func:`accesslib.experiments.bundling.budget_check`: n50
    re-measured with a larger step budget and patience) and its "budget_checks" (the same
    lengths and strings at both budgets, ``accesslib.experiments.beyond.budget_check``). A check
    *moved* when the two n50 differ by more than their combined standard error. Label:
    "budget-limited" when any check moved, "converged" when every check stayed within it,
    "inconclusive" when a check could not fit n50 (and none moved) or compared the steps at one
    patience only (a ladder's rungs that share a patience smaller than their steps: the patience
    is part of the budget, and it can move n50 where the steps do not), "not checked" without one.
    The text says it in a reader's words, with the n50 at both budgets, then the bundle's
    "budget_ladder" (:func:`ladder_text`) where it has one; a ladder without a budget check
    counts as the check of its shipped rung against the first rung with 3x its steps, or, where the
    shipped rung is the largest (smaller budgets read from its own strings), of the smaller rung
    where n50 settled (else the last comparison made below it).
    """
    rows = []   # (m, n50, n50 at the larger budget, moved, steps, larger steps, factor)
    chk = bundle.get("budget_check")
    if chk:
        st = chk.get("settings") or {}
        steps = st.get("max_steps") or [None, None]
        for m, r in sorted((chk.get("ms") or {}).items(), key=lambda kv: int(kv[0])):
            larger = r.get("n50_3x")
            if larger is None:   # read from a run whose strings are open: the least n50 they can give
                larger = open_n50_text(r)
            rows.append((int(m), r.get("n50"), larger, r.get("moved"), steps[0], steps[1], chk.get("factor")))
    for c in bundle.get("budget_checks") or []:
        shift = c.get("shift")
        steps = c.get("max_steps") or [None, None]
        rows.append((int(c["m"]), c["n50"][0], c["n50"][1], None if shift is None else abs(shift) > 1,
                     steps[0], steps[1], c.get("factor")))
    lad = bundle.get("budget_ladder") or {}
    ship = next((r for r in lad.get("rungs") or [] if r.get("shipped") and r.get("compared_with")), None)
    if not rows and ship is None:       # the shipped rung is the largest: the comparison below it
        # that settled (n50 stopped moving before the shipped budget), else the last one made
        below = [r for r in lad.get("rungs") or [] if r.get("compared_with") is not None]
        settled = [r for r in below if r["max_steps"] == lad.get("converged_at")]
        ship = (settled or below[-1:] or [None])[0]
    same_patience = None
    if not rows and ship is not None:   # a ladder without a budget check: that rung's comparison
        other = next(r for r in lad["rungs"] if r["max_steps"] == ship["compared_with"])
        ratio = other["max_steps"] / ship["max_steps"]
        rows.append((int(lad["m"]), ship.get("n50"), other.get("n50"), ship.get("moved"), ship["max_steps"],
                     other["max_steps"], int(ratio) if ratio == int(ratio) else round(ratio, 2)))
        same_patience = binding_shared_patience(ship, other)
    ladder = ladder_text(bundle)
    if ladder:
        label, text = _budget_status(rows, same_patience)
        return label, f"{text} {ladder}"
    label, text = _budget_status(rows)
    if chk and chk.get("read_from_run"):   # read_budget_bundle: both budgets from one run's strings
        st = chk.get("settings") or {}
        steps, pat = st.get("max_steps") or [None, None], st.get("patience") or [None, None]
        if None not in steps + pat:
            text += (f" Both budgets are read from the same strings, of one run of {steps[1]:,} steps with "
                     f"patience {pat[1]:,} (here {steps[0]:,} / {pat[0]:,}).")
            undecided = (bundle.get("read_from") or {}).get("undecided_ms") or []
            if undecided:
                text += (f" At m = {', '.join(map(str, undecided))} the run's own {steps[1]:,} / {pat[1]:,} "
                         "cannot be told yet: too many of its strings are still being crammed.")
    return label, text


def rung_n50_text(rung: dict) -> str:
    """A ladder rung's n50: "16.8 ± 1.6", or its one-sided bound where no fit located it ("> 20
    (all crammed at 20)", "< 10 (none crammed at 10)"), else "not located" with the counts at its
    shortest and longest lengths (e.g. fewer than half crammed at the shortest: the 50% point
    probably lies below the lengths measured, but the counts do not bound it)."""
    if rung.get("n50") is None and rung.get("n50_above") is not None:
        return f"> {rung['n50_above']} (all crammed at {rung['n50_above']})"
    if rung.get("n50") is None and rung.get("n50_below") is not None:
        return f"< {rung['n50_below']} (none crammed at {rung['n50_below']})"
    if rung.get("n50") is None and rung.get("lengths"):
        counts = list(zip(rung["lengths"], rung["successes"], rung["totals"]))
        ends = counts[:1] + counts[1:][-1:]   # the shortest and the longest length
        return "not located (" + ", ".join(f"{s}/{t} crammed at {n}" for n, s, t in ends) + ")"
    return f"{_fmt(rung.get('n50'))} ± {_fmt(rung.get('stderr'))}"


def open_range_text(rung: dict) -> str:
    """Where a rung with strings still being crammed can end (its ``n50_range``,
    :func:`accesslib.experiments.bundling.open_n50_range`): "29.1 to 45.8 or > 46 however the 11
    open strings end (16 of the 70 ways: no falling curve)"; "" without a range (too many ways)."""
    rg = rung.get("n50_range")
    if not rg:
        return ""
    lengths = rung["lengths"]
    parts = []
    if rg["below"]:
        parts.append(f"< {min(lengths)}")
    if rg["low"] is not None:
        parts.append(f"{rg['low']:.1f}" + (f" to {rg['high']:.1f}" if rg["high"] > rg["low"] else ""))
    if rg["above"]:
        parts.append(f"> {max(lengths)}")
    k = sum(rung.get("open") or [])
    text = (" or ".join(parts) or "not located") + (f" however the {k} open strings end" if k != 1 else
                                                     " however the open string ends")
    if rg["unlocated"]:
        text += f" ({rg['unlocated']} of the {rg['ways']} ways: no falling curve)"
    return text


def shift_text(shift: float) -> str:
    """A shift in combined stderrs: "+3.7"; two decimals near the threshold of 1, so that a shift
    just past it never reads "+1.0" (moved) beside one just below it (not moved)."""
    return f"{shift:+.2f}" if 0.95 <= abs(shift) < 1.05 else f"{shift:+.1f}"


def rung_shift_text(rung: dict) -> str:
    """A ladder rung's comparison: "yes (+3.3)", "no (+0.1)", "yes (at least +2.0)" against a
    one-sided bound, "yes" where two bounds cannot meet, "-" without a comparison."""
    if rung.get("moved") is None:
        return "-"
    word = "yes" if rung["moved"] else "no"
    if rung.get("shift") is None:
        return word
    return f"{word} ({'at least ' if rung.get('shift_is_bound') else ''}{shift_text(rung['shift'])})"


def rung_budget(rung: dict, rungs) -> str:
    """A ladder rung's budget in words: "3,000 steps", with its patience ("3,000 steps, patience
    500") where the ladder's ``rungs`` neither share one patience nor scale it with their steps."""
    text = f"{rung['max_steps']:,} steps"
    patience = [r.get("patience") for r in rungs]
    if None not in patience and len(set(patience)) > 1 \
            and len({p / r["max_steps"] for p, r in zip(patience, rungs)}) > 1:
        text += f", patience {rung['patience']:,}"
    return text


def rung_source(rung: dict) -> str:
    """Where a ladder rung that crammed nothing came from: " (read from the 9,000-step run)" (with
    its patience where the rung's is smaller), else ""."""
    if not rung.get("derived_from"):
        return ""
    p0 = rung.get("derived_patience_from")
    return f" (read from the {rung['derived_from']:,}-step run{f', patience {p0:,}' if p0 else ''})"


def binding_shared_patience(a: dict, b: dict) -> int | None:
    """The patience two ladder rungs ``a`` and ``b`` (the larger) share, where it can end a string
    before ``b``'s steps do: then comparing them checks the steps only, not the patience. None
    otherwise (different patiences, or one no shorter than the steps)."""
    p = a.get("patience")
    if p is None or p != b.get("patience") or int(p) >= int(b["max_steps"]):
        return None
    return int(p)


def ladder_text(bundle: dict, own: str = "shipped") -> str:
    """A bundle's budget ladder (:func:`accesslib.experiments.bundling.budget_ladder`) in a
    sentence: n50 at its m by step budget and where it stops moving; "" without a ladder.
    ``own``: the word for the bundle's own rung (a re-measurement's: "the run's")."""
    lad = bundle.get("budget_ladder")
    if not lad or not lad.get("rungs"):
        return ""
    rungs = lad["rungs"]
    steps = ", ".join(f"{rung_budget(r, rungs)} {rung_n50_text(r)}" + (f" ({own})" if r.get("shipped") else "")
                      + rung_source(r) for r in rungs)
    text = f"n50 at m = {lad['m']} by step budget: {steps}."
    if lad.get("converged_at") is not None:
        at = lad["converged_at"]
        r = next(r for r in rungs if r["max_steps"] == at)
        other = next((o for o in rungs if o["max_steps"] == r["compared_with"]), {})
        same = binding_shared_patience(r, other)
        text += (f" It settles at {at:,} steps: {r['compared_with']:,} steps move it by less than its "
                 "standard error" + (f", at the same patience ({same:,}), which was not checked."
                                     if same is not None else "."))
    elif lad.get("still_moving"):
        last = [r for r in rungs if r.get("compared_with") is not None][-1]
        text += (f" Still moving from {last['max_steps']:,} to {last['compared_with']:,} steps: no budget "
                 "measured here settles it yet.")
    else:
        text += " No rung has a larger budget to settle it yet."
    return text


def map_cell_text(cell: dict | None, lengths, *, stderr: bool = False) -> str:
    """A budget map cell (:func:`accesslib.experiments.bundling.budget_map`) in a few characters:
    "20.1" (with " ± 1.8" where ``stderr``), "> 46" / "< 10" for a one-sided n50, "≥ 42.9" while
    strings are open (the least n50 they can end at; "> 108" where every way puts it past the
    lengths), "open" where that cannot be said, "?" where crammed strings kept no accuracy history
    to read that patience from, "-" for a budget the run cannot read."""
    if cell is None:
        return "-"
    if cell.get("unreadable"):
        return "?"
    rg = cell.get("range")
    if "range" in cell:
        if rg and rg.get("below"):
            return "open"
        if rg and rg.get("low") is not None:
            return f"≥ {rg['low']:.1f}"
        if rg and rg.get("above"):
            return f"> {max(lengths)}"
        return "open"
    if cell.get("n50") is not None:
        return f"{cell['n50']:.1f}" + (f" ± {cell['stderr']:.1f}" if stderr and cell.get("stderr") is not None else "")
    if cell.get("n50_above") is not None:
        return f"> {cell['n50_above']}"
    if cell.get("n50_below") is not None:
        return f"< {cell['n50_below']}"
    return "not located"


def map_texts(mp: dict) -> list[list[str]]:
    """Every cell of a budget map in a few characters (:func:`map_cell_text`), one row per step
    budget: what :func:`accesslib.plots.cramming.draw_budget_map` writes in its table."""
    return [[map_cell_text(c, mp["lengths"]) for c in row] for row in mp["cells"]]


def n50_moved(n50, se, n50_x, se_x):
    """|n50_x - n50| > sqrt(se^2 + se_x^2), or None when a fit gave no n50 or no stderr."""
    if None in (n50, se, n50_x, se_x):
        return None, None
    comb = math.hypot(se, se_x)
    shift = (n50_x - n50) / comb if comb > 0 else None
    return (abs(n50_x - n50) > comb), shift


def cap_text(mp: dict, steps: int, patience: int, name: str) -> str:
    """What the step cap of one budget of a map did ("cut" of
    :func:`accesslib.experiments.bundling.cut_by_cap`), named ``name`` ("[A]'s 3,000 / 500"):
    whether it stopped strings that were still gaining accuracy; "" where the map lacks it."""
    if steps not in mp["steps"] or patience not in mp["patiences"]:
        return ""
    cell = mp["cells"][mp["steps"].index(steps)][mp["patiences"].index(patience)]
    if cell is None or cell.get("cut") is None:
        return ""
    total = sum(mp["totals"])
    cut, unknown, blind = cell["cut"], cell.get("cut_unknown") or 0, cell.get("cut_no_history") or 0
    why = "; ".join(t for t in (f"{unknown - blind} still being crammed short of it" if unknown > blind else "",
                                f"{blind} kept no accuracy history" if blind else "") if t)
    if cut == 0 and unknown == 0:
        return (f"{name}: its {steps:,}-step cap stopped none of the {total} strings while still gaining accuracy "
                f"(each crammed or ran out of patience first), so more steps cannot move n50 at patience "
                f"{patience:,}")
    if cut == 0:
        return (f"{name}: whether its {steps:,}-step cap stops strings still gaining accuracy cannot be told"
                f"{' yet' if unknown > blind else ''} (of the {total} strings, {why})")
    text = (f"{name}: its {steps:,}-step cap stopped {'at least ' if unknown else ''}{cut} of the {total} strings "
            f"while still gaining accuracy (within their patience of {patience:,})")
    if unknown:
        return text + f"; {unknown} cannot be told ({why})"
    settled = mp["settled"][mp["patiences"].index(patience)]
    if settled is not None and settled <= steps and steps < mp["steps"][-1]:
        return text + ("; none of them crammed" if cut > 1 else "; it did not cram") + (
            f" with more steps (n50 the same up to {mp['steps'][-1]:,})")
    # what more steps at the same patience did with them: every string the largest step budget
    # crams beyond this one, and every string still open there, is one this cap cut
    last = mp["cells"][-1][mp["patiences"].index(patience)]
    if steps < mp["steps"][-1] and last is not None and not last.get("unreadable"):
        gained, still = sum(last["successes"]) - sum(cell["successes"]), sum(last["open"])
        if settled is not None and settled > steps:
            did = f"with more steps {gained} of them crammed" if cut > 1 else "with more steps it crammed"
            did += f" by {settled:,} steps"
            moved, shift = n50_moved(cell.get("n50"), cell.get("stderr"), last.get("n50"), last.get("stderr"))
            if moved is None:
                return text + f"; {did}, and n50 is the same from there up to {mp['steps'][-1]:,}"
            by = f" ({shift:+.1f} combined standard errors)" if shift is not None else ""
            return (text + f"; {did}: n50 {cell['n50']:.1f} → {last['n50']:.1f}{by}, the same from there up "
                    f"to {mp['steps'][-1]:,}")
        if still and cut == 1:
            return text + f"; it is still being crammed short of {mp['steps'][-1]:,} steps"
        if still:
            return (text + f"; with more steps (up to {mp['steps'][-1]:,}) {gained or 'none'} of them crammed so "
                    f"far, {still} still being crammed")
    return text + ", so more steps could still cram " + ("them" if cut > 1 else "it")


def slope_entry_text(e: dict) -> str:
    """One budget's slope of :func:`accesslib.experiments.bundling.map_slopes` (or
    ``ladder_slopes``): "21.2 ± 2.3", "≥ 23.0" / "19.8 to 22.0" while strings are open (where it can
    still end), "open" where that cannot be told, "-" where no n50 is located at some m."""
    if e.get("slope") is not None:
        return f"{e['slope']:.1f}" + (f" ± {e['slope_stderr']:.1f}" if e.get("slope_stderr") is not None else "")
    rg = e.get("slope_range") or {}
    lo, hi = rg.get("low"), rg.get("high")
    if lo is not None and hi is not None:
        return f"{lo:.1f} to {hi:.1f}"
    if lo is not None:
        return f"≥ {lo:.1f}"
    if hi is not None:
        return f"≤ {hi:.1f}"
    return "open" if "open" in (e.get("why") or "") else "-"


def map_slope_lines(run: dict, steps) -> list[str]:
    """A run's slope a over its m at each of ``steps`` (step budgets of its maps), by patience
    (one entry of :func:`accesslib.experiments.bundling.map_slopes`): "slope a over m = 1, 2, 3 at
    3,000 steps, by patience: 11.8 ± 1.9 (100), ..."."""
    ms = ", ".join(map(str, run["ms"]))
    out = []
    for s in steps:
        row = [e for e in run["budgets"] if e["max_steps"] == s]
        if row:
            out.append(f"slope a over m = {ms} at {s:,} steps, by patience: " + ", ".join(
                f"{slope_entry_text(e)} ({e['patience']:,})" for e in sorted(row, key=lambda e: e["patience"])))
    return out


def budget_map_lines(mp: dict, mark=None) -> list[str]:
    """A budget map in sentences: per patience, where n50 stops moving as the steps grow (or that
    it still moves, or is not decided, at the run's steps); then n50 by patience at the run's
    steps; then what the step cap did at ``mark`` ((steps, patience): [A]'s, :func:`cap_text`)."""
    steps, pats, cells, lengths = mp["steps"], mp["patiences"], mp["cells"], mp["lengths"]
    s0 = steps[-1]
    out = []
    for j, p in enumerate(pats):
        col = [row[j] for row in cells]
        at = mp["settled"][j]
        if col[-1] is None:
            why = next((r for r in mp.get("refused") or [] if f"patience {p} " in r), "")
            out.append(f"patience {p:,}: cannot be read from this run" + (f" ({why})" if why else ""))
        elif col[-1].get("unreadable"):
            out.append(f"patience {p:,}: cannot be read: {col[-1]['unreadable']} crammed strings kept no accuracy "
                       "history to read a smaller patience from")
        elif at is None:
            out.append(f"patience {p:,}: not decided at {s0:,} steps (n50 {map_cell_text(col[-1], lengths)}, "
                       "strings still being crammed)")
        elif at == s0 and len(steps) > 1:
            prev = col[-2]
            out.append(f"patience {p:,}: still moving at {s0:,} steps ({map_cell_text(prev, lengths)} at "
                       f"{steps[-2]:,}, {map_cell_text(col[-1], lengths)} at {s0:,})")
        else:
            first = " (the least read)" if at == steps[0] else ""
            out.append(f"patience {p:,}: settled from {at:,} steps{first}: n50 {map_cell_text(col[-1], lengths)} "
                       f"up to {s0:,}")
    row = cells[-1]
    out.append(f"at {s0:,} steps, n50 by patience: " + ", ".join(
        f"{map_cell_text(c, lengths)} ({p:,})" for p, c in zip(pats, row)))
    if mark is not None and tuple(mark) != tuple(mp["run"]):
        out.append(cap_text(mp, *mark, f"[A]'s {mark[0]:,} / {mark[1]:,}"))
    out.append(cap_text(mp, *mp["run"], f"the run's {mp['run'][0]:,} / {mp['run'][1]:,}"))
    return [t for t in out if t]


def _budget_status(rows, same_patience=None) -> tuple[str, str]:
    """``same_patience``: the patience both budgets of the comparison share (a ladder's steps
    compared at one patience): a comparison that did not move is then "inconclusive", the text
    says the patience was not checked."""
    if not rows:
        return "not checked", ("Budget not checked: nobody has re-measured these n50 with a larger step budget "
                               "(scripts/make_bundles.py --add-budget-check).")
    moved = [r for r in rows if r[3] is True]
    unknown = [r for r in rows if r[3] is None]

    def say(rs):
        return "; ".join(f"m = {m}: {_fmt(a)} with {s0} steps, {_fmt(b)} with {s1}" for m, a, b, _, s0, s1, _ in rs)

    factor = rows[0][6]
    budget = (f"{factor}x the step budget" if same_patience is None else
              f"{factor}x the steps at the same patience ({same_patience:,})")
    if moved:
        return "budget-limited", (f"Budget-limited: with {budget} n50 moved by more than its "
                                  f"standard error ({say(moved)}), so these n50 measure the step budget as well "
                                  "as the model.")
    if unknown:
        return "inconclusive", (f"Budget check inconclusive: no n50 could be fitted at m = "
                                f"{', '.join(str(r[0]) for r in unknown)} ({say(unknown)}).")
    if same_patience is not None:   # the steps were checked, the patience was not: not the whole budget
        return "inconclusive", (f"Steps checked, patience not: with {budget} n50 moved by less than its "
                                f"standard error ({say(rows)}), but the patience was not tripled with the steps, "
                                "and under a patience rule a larger patience can move n50 where more steps alone "
                                "do not.")
    return "converged", f"Converged: with {budget} n50 moved by less than its standard error ({say(rows)})."


def predicted_slopes(bundle: dict, eps: float, r: float) -> dict:
    """Predicted slopes C (tokens per vector) for a bundle's model at precision eps, radius r.

    ball: :func:`accesslib.theory.bounds.slope`; box, cone, ellipsoid, cells: :mod:`accesslib.theory.refined`
    from the bundle's measured geometry (per-coordinate widths, principal semi-axes, cone
    half-angle, s_conv) when the bundle has it. The box and ellipsoid use the measured extents,
    so r moves only the ball, cone and cell lines.
    """
    f = bundle["facts"]
    d, V = f["d"], f["vocab_size"]
    out = {"ball": bounds.slope(d, V, eps, r)}
    geo = bundle.get("geometry") or {}
    if geo.get("widths"):
        out["box"] = refined.box_slope(geo["widths"], V, eps).C
    if geo.get("semi_axes"):
        out["ellipsoid"] = refined.ellipsoid_slope(geo["semi_axes"], V, eps).C
    if geo.get("phi") is not None and d >= 2:
        out["cone"] = refined.cone_slope(d, V, eps, r, geo["phi"]).C
    if geo.get("s_conv"):
        out["cells"] = refined.cell_slope(refined.ball_log_count(d, eps, r), geo["s_conv"]).C
    return out


def family_table(names, *, bound="ball", dtype="paper") -> list[dict]:
    """One row per model with a bundle: d, |V|, measured slope a (± stderr, R^2), the step budget
    and patience it was measured with, predicted C under ``bound`` with eps = r_inf * unit
    roundoff of ``dtype``, and C/a."""
    rows = []
    for name in names:
        b = load("cram", name)
        sl = b.get("slope") or {}
        geo = b.get("geometry") or {}
        r = geo.get("r_inf") or 1.0   # the paper's eps makes C_ball independent of r
        eps = bounds.eps_for_dtype(dtype, r)
        C = predicted_slopes(b, eps, r).get(bound)
        a = sl.get("slope")
        rows.append(dict(model=name, d=b["facts"]["d"], vocab_size=b["facts"]["vocab_size"],
                         ln_vocab=math.log(b["facts"]["vocab_size"]), slope=a,
                         slope_stderr=sl.get("slope_stderr"), r2=sl.get("r2"), C=C,
                         max_steps=b["settings"].get("max_steps"), patience=b["settings"].get("patience"),
                         ratio=(C / a) if (C and a and a > 0) else None))
    return rows
