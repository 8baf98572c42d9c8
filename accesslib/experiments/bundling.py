"""Making results bundles: the measurements behind the pages that open complete.

A bundle (:mod:`accesslib.results.bundles`) keeps a model's accessibility curves, slope fit and
geometry; this module measures them (cramming curves, geometry report, effective eps, and
:func:`budget_check`: whether a longer step budget moves n50) and returns the bundle dict.
``scripts/make_bundles.py`` is its command line.
"""
from __future__ import annotations

import math
import time
from datetime import datetime, timezone

from accesslib.config import hardware
from accesslib.models import facts
from accesslib.results.bundles import (
    BUNDLE_VERSION,
    curve_record,
    effective_record,
    ended_under,
    finite_or_none,
    geometry_record,
    n50_moved,
    patience_stop,
    slope_record,
    with_propagated_stderr,
)
from accesslib.results.store import ResultsStore, canonical, inflight_key, target_hash


def crammed_memory(lm, n: int, *, source: str = "tokens", seed: int = 0, tries: int = 4,
                   prefix_ids=None, settings=None):
    """A memory vector (m = 1) that greedily produces an n-token target (after ``prefix_ids``),
    crammed with the fast protocol, or with ``settings`` (a bundle's protocol settings, its
    target layout included: ``add_special_tokens`` starts each target with the tokenizer's BOS,
    ``first_token_as_input`` gives the first target token after the memory): (memory [1, d],
    target ids), or None when none of ``tries`` targets could be crammed."""
    from accesslib.engine import cramming, targets

    n = max(2, int(n))
    opts = dict(cramming.PROTOCOLS["fast"]) if settings is None else dict(settings)
    specials = bool(opts.pop("add_special_tokens", False))
    opts.pop("prefix_ids", None)   # given explicitly
    tg, _ = targets.make_targets(source, n, tries, seed=seed, tokenizer=lm.tokenizer,
                                 vocab_size=facts.shared_vocab_size(lm.model),
                                 add_special_tokens=specials)
    res = cramming.cram(lm, tg, 1, seed=seed, prefix_ids=prefix_ids, **opts)
    for i, r in enumerate(res.strings):
        if r.success:
            return r.memory.reshape(1, -1), [int(t) for t in tg[i].tolist()]
    return None


def stored_memory(store, bundle: dict, near: float):
    """A memory the bundle's own run crammed (m = 1), read from the results store it was crammed
    into: of its successful strings, the one whose n is closest to ``near`` (the longer of two
    equally close, then the lowest sample). (memory [1, d], target ids, n, sample), or None
    when the store holds no crammed m = 1 string of this bundle with its memory."""
    import numpy as np

    from accesslib.experiments.curves import protocol_hash_for

    if not isinstance(store, ResultsStore):
        store = ResultsStore(store, readonly=True)
    settings = _base_settings(bundle["settings"], from_json=True)
    rows = [r for r in store.rows(memory=True, model=bundle["model"], m=1, source=bundle["source"],
                                  seed=int(bundle.get("seed", 0)), protocol_hash=protocol_hash_for(settings))
            if r["success"] and r.get("memory") is not None and r.get("target_ids")]
    if not rows:
        return None
    r = min(rows, key=lambda r: (abs(int(r["n"]) - near), -int(r["n"]), int(r.get("sample") or 0)))
    return (np.asarray(r["memory"], dtype=np.float32).reshape(1, -1), [int(t) for t in r["target_ids"]],
            int(r["n"]), int(r.get("sample") or 0))


def measure_effective_eps(lm, directions: int = 16, *, memory_n=None, source="tokens",
                          prefix_ids=None, seed=0, settings=None, crammed=None) -> dict:
    """The effective-eps part of a geometry record: thresholds over ``directions`` random
    directions around a memory crammed with ``memory_n`` tokens from ``source`` after
    ``prefix_ids`` (:func:`crammed_memory`, under ``settings`` when given, e.g. a little below
    n50 at m = 1 under the bundle's own protocol and layout), the output that must not change
    being those n tokens (less the first when ``settings`` give it as input: it is then given
    after the memory, as in cramming); without ``memory_n``, or when cramming fails, around a
    random memory vector (the cramming init), watching 4 tokens. ``crammed``: a memory crammed
    before and its target, e.g. one of the bundle's own strings (:func:`stored_memory`), used
    instead of cramming one."""
    import torch

    from accesslib.engine.geometry import effective_eps

    got = crammed[:2] if crammed is not None else (
        crammed_memory(lm, memory_n, source=source, seed=seed, prefix_ids=prefix_ids, settings=settings)
        if memory_n else None)
    given = 1 if (settings or {}).get("first_token_as_input") else 0
    if got is not None:
        mem, ids = got
        eff = effective_eps(lm, torch.as_tensor(mem), n_directions=int(directions), n_tokens=len(ids) - given,
                            prefix_ids=prefix_ids, given_ids=ids[:given] or None, seed=seed)
        around = f"a memory crammed with {len(ids)} tokens ({source})"
        if crammed is not None and len(crammed) > 3:
            around += f", string {crammed[3]} of n = {crammed[2]} of the bundle's own run"
        if given:
            around += ", the first given after it"
    else:
        eff = effective_eps(lm, n_directions=int(directions), prefix_ids=prefix_ids, seed=seed)
        around = "a random memory vector (4 tokens)"
    rec = effective_record(eff)
    rec.update(around=around, prefix_ids=list(prefix_ids or []))
    if got is not None and given:
        rec["given_ids"] = ids[:given]
    return rec


def measure_geometry(lm, model_name, *, seed=0, progress=True, effective_eps=16, memory_n=None,
                     memory_source="tokens", prefix_ids=None, memory_settings=None, crammed=None,
                     **options) -> dict:
    """:func:`geometry_record` of a fresh :func:`accesslib.engine.geometry.geometry_report` (``options``
    go to it) with :func:`measure_effective_eps` over ``effective_eps`` directions (0: none),
    around ``crammed`` when given (a memory crammed before, :func:`stored_memory`)."""
    from accesslib.engine.geometry import geometry_report

    rec = geometry_record(geometry_report(lm, name=model_name, progress=progress, seed=seed, **options))
    if effective_eps:
        rec["effective_eps"] = measure_effective_eps(lm, effective_eps, memory_n=memory_n,
                                                     source=memory_source, prefix_ids=prefix_ids,
                                                     seed=seed, settings=memory_settings, crammed=crammed)
    return rec


def bar_hooks(bar, on_string=None, every: float = 5.0):
    """(on_string, on_step) callbacks that keep a tqdm bar of strings moving between strings too:
    each finished string advances it (and goes on to ``on_string``); every ``every`` seconds the
    postfix shows the engine's step and how many strings are active, so an hour-long string of a
    real model on a CPU is seen to progress. (None, None) without a bar and ``on_string``."""
    if bar is None:
        return on_string, None
    last = [-math.inf]
    where = {}

    def string(row):
        bar.update(1)
        where.update(m=row["m"], n=row["n"])
        bar.set_postfix(where)
        if on_string is not None:
            on_string(row)

    def step(info):
        now = time.monotonic()
        if now - last[0] >= every:
            last[0] = now
            bar.set_postfix(dict(where, step=info.step, active=len(info.active)))

    return string, step


def _base_settings(settings: dict, *, from_json: bool) -> dict:
    """Cram settings as the engine takes them: lists back to tuples (betas), and for a bundle
    written before ``patience_on`` was a setting, the rule its strings were crammed with (loss)."""
    out = {k: (tuple(v) if k == "betas" and isinstance(v, list) else v) for k, v in settings.items()}
    if from_json:
        out.setdefault("patience_on", "loss")
    return out


def usable_n50(n50, se, k, status, lengths):
    """(n50, stderr) of a fit that locates a falling curve's midpoint among the lengths measured,
    else (None, None): a failed, flat or rising fit, or one that extrapolates (all strings crammed
    or none) says nothing a budget check can compare."""
    if status not in ("ok", "separated") or None in (n50, se, k) or not lengths:
        return None, None
    if not (k < 0 and math.isfinite(se) and min(lengths) <= n50 <= max(lengths)):
        return None, None
    return float(n50), float(se)


def n50_bounds(successes, totals, lengths) -> dict:
    """A one-sided n50 where a fit cannot locate it: every string crammed at the longest length
    measured gives {"n50_above": that length} (the 50% point lies beyond the grid), none crammed
    at the shortest gives {"n50_below": that length}; else {}. For a rung whose fit says nothing
    (:func:`usable_n50` gave None) but whose counts still say where n50 is not."""
    if not lengths or not totals:
        return {}
    pts = sorted(zip(lengths, successes, totals))
    (lo, s_lo, t_lo), (hi, s_hi, t_hi) = pts[0], pts[-1]
    if t_hi and s_hi == t_hi:
        return dict(n50_above=int(hi))
    if t_lo and s_lo == 0:
        return dict(n50_below=int(lo))
    return {}


def _n50_interval(r: dict):
    """(low, high) of a rung's n50: n50 -+ stderr, or the open side of a one-sided bound; None
    when the rung says nothing."""
    if r.get("n50") is not None and r.get("stderr") is not None:
        return r["n50"] - r["stderr"], r["n50"] + r["stderr"]
    if r.get("n50_above") is not None:
        return float(r["n50_above"]), math.inf
    if r.get("n50_below") is not None:
        return -math.inf, float(r["n50_below"])
    return None


def rungs_moved(a: dict, b: dict):
    """(moved, shift, shift_is_bound) between two rungs: :func:`n50_moved` where both have a
    fitted n50; where one (or both) has only a one-sided bound (:func:`n50_bounds`), moved is True
    when the two can no longer meet (the bound lies beyond the other's n50 by more than its stderr;
    shift: the least shift in that stderr), else None (cannot tell)."""
    if a.get("n50") is not None and b.get("n50") is not None:
        return (*n50_moved(a["n50"], a.get("stderr"), b["n50"], b.get("stderr")), False)
    ia, ib = _n50_interval(a), _n50_interval(b)
    if ia is None or ib is None or not (ib[0] > ia[1] or ib[1] < ia[0]):
        return None, None, False       # nothing to compare, or the two can still meet
    up = ib[0] > ia[1]                 # b certainly above a (else certainly below)
    if a.get("n50") is not None:       # a a point, b a bound: b - a is at least this far
        edge = ib[0] if up else ib[1]
        return True, ((edge - a["n50"]) / a["stderr"] if a["stderr"] else None), True
    if b.get("n50") is not None:       # a a bound, b a point
        edge = ia[1] if up else ia[0]
        return True, ((b["n50"] - edge) / b["stderr"] if b["stderr"] else None), True
    return True, None, False           # two bounds that cannot meet: moved, by an unknown amount


def open_rung_moved(a: dict, b: dict):
    """(moved, shift) from a decided rung ``a`` to a rung ``b`` with strings still open: moved True
    when every way the open strings can end (``b``'s ``n50_range``, :func:`open_n50_range`; fitted
    here where ``b`` has none)
    puts n50 above ``a``'s by more than their combined stderr (ways with n50 past the longest
    length: by that length against ``a``'s stderr) and none puts it before the grid; ``shift``: the
    least of those shifts, in combined stderrs. None (cannot tell yet) otherwise, e.g. while some way
    of ending still meets ``a``, or past the limit on ways. Ways with no falling curve locate no
    n50 and are left out; the caller says how many (``n50_range["unlocated"]``)."""
    if a.get("n50") is None or not a.get("stderr") or not any(b.get("open") or []):
        return None, None
    rg = b.get("n50_range") if "located" in (b.get("n50_range") or {}) else \
        open_n50_range(b["lengths"], b["successes"], b["totals"], b["open"])
    if not rg or rg["below"] or (rg["low"] is None and not rg["above"]):
        return None, None
    least = least_shift(rg["located"], (a["n50"], a["stderr"]))
    shifts = [least] if least is not None else []
    if rg["above"]:
        shifts.append((max(b["lengths"]) - a["n50"]) / a["stderr"])
    least = min(shifts)
    return (True, least) if least > 1 else (None, None)


def budget_check(lm, bundle_or_curves, factor: int = 3, ms=None, *, samples: int | None = None, store=None,
                 progress: bool = False, on_string=None, batch_size: int | None = None, precision: float = 0.02,
                 command: str = "", max_steps: int | None = None, patience: int | None = None,
                 lengths: dict | None = None) -> dict:
    """Is n50 a property of the model or of the step budget? Re-measure it with ``factor`` times
    the budget and see whether it moves.

    ``bundle_or_curves``: a cramming bundle dict (:func:`make_cramming_bundle`) or the list of
    :class:`accesslib.experiments.curves.AccessibilityCurve` it was made from (then give
    ``samples``). For each m of ``ms`` (default: 1 and the largest m measured) the curve is
    measured again through one engine with the same source, seed (hence the same strings at
    each length), length search, strings per length and cram settings, except ``max_steps`` and
    ``patience``, both multiplied by ``factor`` (the store keeps those strings apart: the budget
    enters the protocol hash). The n50 at the original budget is the one recorded.

    n50 has *moved* when |n50_x - n50| > sqrt(stderr^2 + stderr_x^2) (their combined standard
    error); a bundle is budget-limited when it moved at any m checked. An n50 counts only when
    its fit locates a falling curve's midpoint among the lengths measured (else it is None and
    the m is *inconclusive*). Returns::

        {factor, ms: {"1": {n50, stderr, n50_3x, stderr_3x, shift, moved, lengths_3x,
         successes_3x, totals_3x, strings_crammed, strings_from_store}, ...},
         budget_limited, inconclusive: [m whose fit gave no n50 or stderr], settings, wall_time,
         created, hardware, command}

    (``shift``: the move in units of the combined stderr; ``settings``: source, samples, search,
    seed, protocol, max_steps and patience at both budgets.)

    ``max_steps`` / ``patience``: the larger budget given outright instead of ``factor`` times the
    bundle's (then ``factor`` records max_steps over the bundle's steps; patience defaults to the
    bundle's times that ratio, rounded). ``lengths`` ({m: [n, ...]}, grid search only): measure the
    larger budget at these lengths instead of the bundle's, e.g. where a longer budget moved the
    50% point beyond the bundle's grid. Either lets a check reuse strings a longer run left in
    ``store`` (same source, seed, samples, settings and lengths: nothing is crammed twice).
    """
    from accesslib._checks import check_int, check_int_list
    from accesslib.experiments.curves import accessibility_curves
    from accesslib.theory.stats import fit_n50

    if max_steps is None:
        factor = check_int("factor", factor, 2)
    if isinstance(bundle_or_curves, dict):
        b = bundle_or_curves
        base = {int(c["m"]): dict(c, n50=None, n50_stderr=None) for c in b["curves"]}
        for c in b["curves"]:
            n50, se = usable_n50(c["n50"], c["n50_stderr"], c.get("k"), c.get("fit_status"), c["lengths"])
            base[int(c["m"])].update(n50=n50, n50_stderr=se)
        name, source, seed, search = b["model"], b["source"], int(b.get("seed", 0)), b["search"]
        protocol, samples = b.get("protocol"), int(samples or b["samples"])
        settings = _base_settings(b["settings"], from_json=True)
    else:
        cs = list(bundle_or_curves)
        if not cs:
            raise ValueError("bundle_or_curves must be a bundle dict or a non-empty list of curves; got []")
        if samples is None:
            raise ValueError("samples must be given with a list of curves (strings per length); got None")
        base = {}
        for c in cs:
            fit = c.fit()
            n50, se = usable_n50(finite_or_none(fit.n50), finite_or_none(fit.stderr), finite_or_none(fit.k), fit.status, c.lengths)
            base[int(c.m)] = dict(m=c.m, n50=n50, n50_stderr=se, lengths=list(c.lengths))
        name, source, seed, search, protocol = cs[0].model, cs[0].source, cs[0].seed, cs[0].search, None
        settings = _base_settings(cs[0].settings, from_json=False)
        samples = check_int("samples", samples, 1)
    ms = sorted({1, max(base)} & set(base)) if ms is None else check_int_list("ms", ms, 1)
    missing = [m for m in ms if m not in base]
    if missing:
        raise ValueError(f"ms must be among the measured m {sorted(base)}; got {list(ms)}")
    if max_steps is None:
        longer = dict(settings, max_steps=int(settings["max_steps"]) * factor,
                      patience=int(settings["patience"]) * factor)
    else:
        steps0 = int(settings["max_steps"])
        max_steps = check_int("max_steps", max_steps, steps0 + 1)
        ratio = max_steps / steps0
        factor = int(ratio) if ratio == int(ratio) else round(ratio, 2)
        patience = (max(1, round(int(settings["patience"]) * ratio)) if patience is None
                    else check_int("patience", patience, 1))
        longer = dict(settings, max_steps=max_steps, patience=patience)
    if lengths is not None:
        if search != "grid":
            raise ValueError(f"lengths can be given for a grid search only; this bundle's search is {search!r}")
        lengths = {int(k): [check_int("lengths", n, 1) for n in v] for k, v in dict(lengths).items()}
        missing = [m for m in ms if m not in lengths]
        if missing:
            raise ValueError(f"lengths must give lengths for every m checked {list(ms)}; missing m = {missing}")
        lengths = {m: lengths[m] for m in ms}
    else:
        lengths = {m: base[m]["lengths"] for m in ms} if search == "grid" else None
    if isinstance(lm, str):
        from accesslib.models.loading import load_model
        lm = load_model(lm)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(desc=f"{name} budget x{factor}", unit="str")
    tick, on_step = bar_hooks(bar, on_string)

    t0 = time.perf_counter()
    try:
        curves = accessibility_curves(lm, ms, lengths, samples=samples, source=source, seed=seed, store=store,
                                      search=search, protocol=longer, model_name=name, on_string=tick,
                                      on_step=on_step, batch_size=batch_size, precision=precision)
    finally:
        if bar is not None:
            bar.close()
    out, inconclusive = {}, []
    for m, c in zip(ms, curves):
        fit = fit_n50(c)
        n50, se = base[m]["n50"], base[m]["n50_stderr"]
        n50_x, se_x = usable_n50(finite_or_none(fit.n50), finite_or_none(fit.stderr), finite_or_none(fit.k), fit.status, c.lengths)
        moved, shift = n50_moved(n50, se, n50_x, se_x)
        if moved is None or c.interrupted:
            inconclusive.append(int(m))
        out[str(m)] = dict(n50=n50, stderr=se, n50_3x=n50_x, stderr_3x=se_x, shift=shift,
                           moved=None if c.interrupted else moved, lengths_3x=list(c.lengths),
                           successes_3x=list(c.successes), totals_3x=list(c.totals),
                           strings_crammed=c.strings_crammed, strings_from_store=c.strings_from_store)
    wall = time.perf_counter() - t0
    return dict(factor=factor, ms=out, budget_limited=any(r["moved"] is True for r in out.values()),
                inconclusive=inconclusive,
                settings=dict(source=source, samples=samples, search=search, seed=seed, protocol=protocol,
                              max_steps=[int(settings["max_steps"]), longer["max_steps"]],
                              patience=[int(settings["patience"]), longer["patience"]]),
                wall_time=round(wall, 1), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                hardware=hardware(), command=command)


#: a budget ladder settles at a rung whose n50 stays within its standard error at the first rung
#: with at least this many times its steps
LADDER_FACTOR = 3


def ladder_verdict(rungs: list[dict]) -> dict:
    """Where n50 stops moving along rungs sorted by step budget (each with max_steps, n50, stderr).

    Each rung is compared with the first later rung that has at least :data:`LADDER_FACTOR` times
    its steps (``compared_with``: that rung's max_steps; ``moved``: |difference| > combined
    stderr, None when either n50 is missing; ``shift`` in combined stderrs). A rung without a
    fitted n50 may carry a one-sided bound (``n50_above`` / ``n50_below``, :func:`n50_bounds`):
    it counts as moved when the other rung's n50 lies beyond it by more than that n50's stderr
    (``shift``: at least that many, ``shift_is_bound`` True; see :func:`rungs_moved`), and as
    unknown otherwise. ``converged_at``: the smallest budget whose n50 did not move and above
    which no comparison moved it again (1000 -> 3000 still and 3000 -> 9000 moved: not settled);
    ``still_moving``: the largest comparison moved."""
    out = []
    for i, r in enumerate(rungs):
        j = next((j for j in range(i + 1, len(rungs))
                  if rungs[j]["max_steps"] >= LADDER_FACTOR * r["max_steps"]), None)
        if j is None:
            out.append(dict(compared_with=None, moved=None, shift=None, shift_is_bound=False))
            continue
        moved, shift, is_bound = rungs_moved(r, rungs[j])
        out.append(dict(compared_with=rungs[j]["max_steps"], moved=moved, shift=shift, shift_is_bound=is_bound))
    compared = [(r["max_steps"], v) for r, v in zip(rungs, out) if v["compared_with"] is not None]
    # n50 has settled at a budget only if no larger budget's comparison moved it again
    last_moved = max((steps for steps, v in compared if v["moved"] is True), default=None)
    settled = [steps for steps, v in compared if v["moved"] is False and (last_moved is None or steps > last_moved)]
    return dict(comparisons=out, converged_at=min(settled) if settled else None,
                still_moving=bool(compared and compared[-1][1]["moved"] is True))


def derived_rung(store, bundle: dict, m: int, max_steps: int, patience: int | None = None) -> dict:
    """The bundle's own curve at ``m`` as a run with ``max_steps`` steps and ``patience`` (default:
    the bundle's) would have measured it, read from its strings (``store`` must hold them): a
    string counts as crammed when it crammed within ``max_steps`` steps and the smaller patience
    would not have stopped it first. No string is crammed again.

    Exact only where the smaller run is a prefix of the bundle's: a protocol without a schedule
    (the learning rate does not depend on max_steps, e.g. "paper"), so that both runs take the
    same steps until the smaller one stops (the engine draws each string's start from the string
    alone; up to floating-point summation order, as between any two runs whose batches differ).
    A smaller patience needs patience on teacher-forced accuracy (the published rule) and each
    string's ``accuracy_history`` (:func:`patience_stop`). One difference remains, in the
    smaller run's favour: where it stops a string that is teacher-forced right (at its last step,
    or by patience after a greedy check failed) it asks greedy decoding once more, where the
    bundle's run may still be waiting (at most 64 steps) to ask again; a derived rung counts such
    a string as not crammed. Returns a ladder rung (see :func:`budget_ladder`) with
    ``derived_from`` the bundle's max_steps (and ``derived_patience_from`` its patience, where
    smaller)."""
    from accesslib._checks import check_int
    from accesslib.experiments.curves import protocol_hash_for

    settings = _base_settings(bundle["settings"], from_json=True)
    steps0, patience0 = int(settings["max_steps"]), int(settings["patience"])
    max_steps = check_int("max_steps", max_steps, 1)
    patience = patience0 if patience is None else check_int("patience", patience, 1)
    if max_steps > steps0 or patience > patience0 or (max_steps, patience) == (steps0, patience0):
        raise ValueError(f"a rung read from the bundle's strings must be smaller than its own "
                         f"{steps0} steps / patience {patience0} (neither larger, one of them smaller); "
                         f"got {max_steps} / {patience}")
    if settings.get("schedule") is not None:
        raise ValueError(f"a {max_steps}-step rung cannot be read from the {steps0}-step strings: their "
                         f"learning-rate schedule ({settings['schedule']!r}) stretches with max_steps, so a "
                         "shorter run is not a prefix of the longer one; measure it (give its own budget)")
    if patience < patience0 and settings.get("patience_on") != "accuracy":
        raise ValueError(f"a rung with patience {patience} is read from each string's accuracy history, which "
                         f"needs patience on teacher-forced accuracy; the bundle's strings watched "
                         f"{settings.get('patience_on')!r}: measure it (give its own budget)")
    own = {int(c["m"]): c for c in bundle["curves"]}
    if m not in own:
        raise ValueError(f"m must be among the bundle's measured m {sorted(own)}; got {m}")
    if store is None:
        raise ValueError(f"a {max_steps}-step rung is read from the steps of the bundle's strings: give the "
                         "results store they were crammed into (store=..., --store)")
    if not isinstance(store, ResultsStore):
        store = ResultsStore(store, readonly=True)
    ph = protocol_hash_for(settings)
    samples, lengths = int(bundle["samples"]), [int(n) for n in own[m]["lengths"]]
    successes, totals, short, unknown = [], [], [], 0
    for n in lengths:
        rows = [r for r in store.rows(model=bundle["model"], m=m, n=n, source=bundle["source"],
                                      seed=int(bundle.get("seed", 0)), protocol_hash=ph)
                if r.get("sample") is not None and int(r["sample"]) < samples]
        if len(rows) != samples:
            short.append(f"n = {n}: {len(rows)} of {samples}")
        under = [finished_under(r, max_steps, patience, patience0) for r in rows]
        unknown += under.count(None)
        successes.append(sum(v is True for v in under))
        totals.append(len(rows))
    if short:
        raise ValueError(f"the store {store.path} lacks strings of {bundle['model']}'s curve at m = {m} "
                         f"(protocol {ph}; {', '.join(short)}): run the bundle's command with this store first")
    if unknown:
        raise ValueError(f"{unknown} crammed strings of {bundle['model']}'s curve at m = {m} in {store.path} have "
                         f"no accuracy history (crammed before it was recorded), so patience {patience} cannot "
                         "be read from them: measure it (give its own budget)")
    extra = dict(derived_patience_from=patience0) if patience < patience0 else {}
    return measured_rung(max_steps, patience, lengths, successes, totals, derived_from=steps0, **extra,
                         strings_crammed=0, strings_from_store=sum(totals))


def finished_under(row: dict, max_steps: int, patience: int, patience0: int) -> bool | None:
    """Whether a finished string (a store row of a run with patience ``patience0``) would have
    crammed under a smaller budget of the same protocol: crammed within ``max_steps`` steps, and
    a smaller ``patience`` on teacher-forced accuracy (:func:`patience_stop`) would not have
    stopped it first. None when that patience cannot be read (crammed, but no accuracy history)."""
    if not (row["success"] and int(row["steps"]) <= max_steps):
        return False
    if patience >= patience0:
        return True
    if not row.get("accuracy_history"):
        return None
    return patience_stop(row["accuracy_history"], patience) >= int(row["steps"])


def kept_under(state: dict, max_steps: int, patience: int) -> bool | None:
    """A string still being crammed (a kept state, :func:`accesslib.engine.cramming.kept_states`)
    under a smaller budget of the same protocol: False where that budget would already have ended
    it uncrammed, None while it still could cram. A state kept at ``step`` s has been evaluated at
    steps 0 .. s-1 (the engine evaluates, then updates, then counts the step): the budget's last
    evaluation, at ``max_steps`` (or at the stop of its ``patience``, :func:`patience_stop`), can
    still cram it, so that evaluation must lie before s."""
    return False if ended_under(state["step"], state.get("accuracy_history"), max_steps, patience) else None


#: the most ways the open strings of a rung may end that :func:`open_n50_range` fits one by one
#: (about a millisecond each)
OPEN_WAYS_LIMIT = 5000


def open_n50_range(lengths, successes, totals, open_, limit: int = OPEN_WAYS_LIMIT, against=None) -> dict | None:
    """Where n50 can still end while ``open_`` strings per length may cram or fail: the curve
    fitted for every way they can end (each length's count from ``successes`` to ``successes +
    open``), or None when there are more than ``limit`` ways. Returns ``{ways, low, low_stderr,
    high, high_stderr, above, below, unlocated}``: the least and greatest n50 that a fit locates
    among the lengths (:func:`usable_n50`; None where none does) with their stderr, and how many
    ways locate none: a falling curve whose 50% point lies past the longest length (``above``:
    e.g. every string crammed there) or before the shortest (``below``), or no falling curve at
    all (``unlocated``: e.g. more crammed at a longer length than at a shorter one).

    ``located`` lists (n50, stderr) of every way that locates n50, so that a comparison reads them
    without fitting again (:func:`open_rung_moved`). ``against`` (n50, stderr) of another rung adds
    ``least_shift`` (:func:`least_shift`)."""
    import itertools

    from accesslib.theory.stats import fit_n50

    ways = math.prod(int(o) + 1 for o in open_)
    if ways > limit:
        return None
    located = []
    counts = dict(above=0, below=0, unlocated=0)
    for extra in itertools.product(*(range(int(o) + 1) for o in open_)):
        got = [int(a) + b for a, b in zip(successes, extra)]
        fit = fit_n50((list(lengths), got, list(totals)))
        n50, se = usable_n50(finite_or_none(fit.n50), finite_or_none(fit.stderr), finite_or_none(fit.k), fit.status,
                             lengths)
        if n50 is None:
            falling = fit.status in ("ok", "separated") and finite_or_none(fit.k) is not None and fit.k < 0 \
                and finite_or_none(fit.n50) is not None
            bound = n50_bounds(got, totals, lengths)
            if "n50_above" in bound or (falling and fit.n50 > max(lengths)):
                counts["above"] += 1
            elif "n50_below" in bound or (falling and fit.n50 < min(lengths)):
                counts["below"] += 1
            else:
                counts["unlocated"] += 1
            continue
        located.append((n50, se))
    lo = min(located, key=lambda f: f[0], default=None)
    hi = max(located, key=lambda f: f[0], default=None)
    out = dict(ways=ways, low=lo and lo[0], low_stderr=lo and lo[1], high=hi and hi[0], high_stderr=hi and hi[1],
               located=located, **counts)
    if against is not None:
        out["least_shift"] = least_shift(located, against)
    return out


def least_shift(located, against):
    """The least (n50 - ``against``'s n50) / combined stderr over ``located`` (n50, stderr) pairs
    (the ways of :func:`open_n50_range`), or None where there are none."""
    shifts = []
    for n50, se in located:
        comb = math.hypot(against[1], se)
        shifts.append((n50 - against[0]) / comb if comb > 0 else math.inf * (1 if n50 > against[0] else -1))
    return min(shifts, default=None)


def live_ladder(store, budgets, *, keep_strings: bool = False, **filters) -> dict:
    """n50 by step budget read from a run that may still be going: for each curve in ``store``
    (model, m, source, protocol; ``filters`` as :meth:`ResultsStore.rows` takes them), the curve
    as a run with each smaller (max_steps, patience) of ``budgets`` would have measured it
    (:func:`finished_under`), from its finished strings and from the strings still being crammed
    (kept states, :func:`kept_under`: one that has run past a budget's steps, or past its patience,
    without cramming is a failure there already). The run's own budget is always the last rung.
    So a 9000-step run answers [A]'s 3000 / 500 as soon as its strings pass step 3000, hours before
    it ends. Exact where :func:`derived_rung` is (a protocol without a schedule; a smaller patience
    needs patience on accuracy), with the same one difference.

    A kept state belongs to the curve whose key names it (:func:`accesslib.results.store.inflight_key`
    of its model, m, target, source, seed and protocol); the states are read before the rows, and a
    state whose string has a row by then counts as that row, so a string that finishes meanwhile
    is counted once.

    A curve none of whose strings has finished yet is named by its kept states, as long as the
    store knows its run (model, source, protocol and seed from strings at another m: a run's m = 2
    after its m = 1).

    Returns ``{"curves": [...], "unclaimed": k, "unreadable": j}``: ``unclaimed`` kept states name
    no run the store knows (e.g. a run none of whose strings has finished), ``unreadable`` ones
    could not be read; one dict per curve: model, m, source,
    protocol_hash, max_steps, patience (the run's; None without recorded settings), finished, kept
    (strings of this curve still being crammed), kept_steps ((min, max) or None), refused (why a
    budget cannot be read from this curve: larger than the run's, a schedule, patience on the loss,
    no settings recorded; ValueError when no curve can read any of ``budgets``) and rungs
    (sorted by max_steps, each as :func:`measured_rung` gives it when every string is decided, with
    ``open`` per length: strings that may still cram; n50 and stderr None while any is open, and
    then ``if_all_fail`` and ``if_all_cram``: the rung if every open string failed, or crammed,
    and ``n50_range``: where n50 can still end (:func:`open_n50_range`, None past its limit);
    ``unknown``: crammed strings whose smaller patience cannot be read; ``own``: the run's budget).
    ``keep_strings``: each curve also holds its strings, ``strings = {"rows": [...], "kept": [...]}``
    (finished rows and kept states), for a caller that reads more from them (:func:`budget_map`).

    A larger run going on from a smaller one's strings in the same store (``make_bundles.py
    --extend-from``: the same protocol but for a larger max_steps and patience, the same seed) holds
    only the strings it has reached; the smaller run's other strings at that m are ``waiting``
    (their number, and ``extends``: the smaller run's (max_steps, patience)). A budget the smaller
    run can read decides them from its rows where the larger run goes on from their final states or
    takes them as they are; a larger one counts them open, so no n50 is claimed from the strings
    reached so far. Each string reads every budget from one trajectory (:func:`_within_parent`):
    ``restarts`` counts the strings the larger run crams again from the start (the smaller run kept
    no final state for them), read from its own steps, and ``parted`` those of them whose steps so
    far already differ from the smaller run's (another thread count or CPU rounds otherwise)."""
    from accesslib.engine.cramming import kept_states

    if not isinstance(store, ResultsStore):
        store = ResultsStore(store, readonly=True)
    budgets = sorted({(int(b[0]), int(b[1])) for b in budgets})
    if any(a < 1 or b < 1 for a, b in budgets):
        raise ValueError(f"budgets must be (max_steps, patience) pairs of whole numbers >= 1; got {budgets}")
    got = kept_states(store)            # before the rows: a string finishing meanwhile shows in both
    every = store.rows()
    finished = {inflight_key(r) for r in every}
    states = [k for k in got["states"] if k["key"] not in finished]
    curves: dict[tuple, list[dict]] = {}
    for r in store.rows(**filters) if filters else every:
        curves.setdefault((r["model"], int(r["m"]), r["source"], r["protocol_hash"]), []).append(r)
    # the runs the store knows (model, source, protocol, seed), at any m: a kept state names its
    # curve also before any string of that curve has finished (a run's m = 2 after its m = 1)
    known = sorted({(r["model"], r["source"], r["protocol_hash"], int(r["seed"])) for r in every})
    by_curve: dict[tuple, list[dict]] = {}
    claimed = 0
    for k in states:
        th = target_hash(k["ids"])
        for model, source, ph, sd in known:
            key = dict(model=model, m=k["m"], n=k["n"], source=source, target_hash=th, seed=sd, protocol_hash=ph)
            if inflight_key(key) == k["key"]:
                claimed += 1
                if _kept_passes(key, filters):
                    by_curve.setdefault((model, k["m"], source, ph), []).append(k)
                break
    for key in set(by_curve) - set(curves):
        curves[key] = []
    out = []
    for key, rows in sorted(curves.items()):
        model, m, source, ph = key
        mine = by_curve.get(key, [])
        settings = store.settings(ph) or {}
        steps = [k["step"] for k in mine]
        parent, theirs, waiting, restarts = _extended_run(store, key, settings, rows, mine, curves)
        curve = dict(model=model, m=m, source=source, protocol_hash=ph, max_steps=None, patience=None,
                     finished=len(rows), kept=len(mine), kept_steps=(min(steps), max(steps)) if steps else None,
                     waiting=len(waiting), extends=parent, refused=[], rungs=[], restarts=len(restarts),
                     parted=_parted(rows, mine, theirs, restarts))
        if keep_strings:
            curve["strings"] = dict(rows=rows, kept=mine, waiting=waiting, theirs=theirs, restarts=restarts)
        out.append(curve)
        if "max_steps" not in settings or "patience" not in settings:
            curve["refused"] = [f"the store {store.path} has no protocol settings for {model}'s curve at m = {m} "
                                f"({source}, protocol {ph}), so no budget can be read from it"] * len(budgets)
            continue
        steps0, patience0 = int(settings["max_steps"]), int(settings["patience"])
        curve.update(max_steps=steps0, patience=patience0)
        where = f"{model}'s curve at m = {m} ({source}, protocol {ph}: {steps0} steps, patience {patience0})"
        readable = []
        for a, b in budgets:
            if a > steps0 or b > patience0:
                curve["refused"].append(f"a budget read from a run cannot exceed the run's own: {a} / {b} is larger "
                                        f"than {where}; measure it (make_bundles.py --ladder)")
            elif (a, b) != (steps0, patience0) and settings.get("schedule") is not None:
                curve["refused"].append(f"{a} steps cannot be read from {where}: its learning-rate schedule "
                                        f"({settings['schedule']!r}) stretches with max_steps, so a shorter run is "
                                        "not a prefix of it")
            elif b < patience0 and settings.get("patience_on") != "accuracy":
                curve["refused"].append(f"patience {b} is read from accuracy histories, which needs patience on "
                                        f"teacher-forced accuracy; {where} watched {settings.get('patience_on')!r}")
            else:
                readable.append((a, b))
        lengths = sorted({int(r["n"]) for r in rows} | {k["n"] for k in mine} | {int(r["n"]) for r in waiting})
        strings = dict(rows=rows, kept=mine, waiting=waiting, theirs=theirs, restarts=restarts)
        for a, b in sorted(set(readable) | {(steps0, patience0)}):
            successes, totals, open_, unknown = [], [], [], 0
            outcomes = string_outcomes(strings, parent, patience0, a, b)
            for n in lengths:
                got_n = [o["crammed"] for o in outcomes if o["n"] == n]
                unknown += sum(v == "unknown" for v in got_n)
                successes.append(sum(v is True for v in got_n))
                totals.append(len(got_n))
                open_.append(sum(v is None for v in got_n))
            if any(open_) or unknown:
                rung = dict(max_steps=a, patience=b, lengths=lengths, successes=successes, totals=totals,
                            n50=None, stderr=None, shipped=False)
                if any(open_) and not unknown:   # where it can still end: every open string fails, or crams
                    rung["if_all_fail"] = measured_rung(a, b, lengths, successes, totals)
                    rung["if_all_cram"] = measured_rung(a, b, lengths, [s + o for s, o in zip(successes, open_)],
                                                        totals)
                    rung["n50_range"] = open_n50_range(lengths, successes, totals, open_)
            else:
                rung = measured_rung(a, b, lengths, successes, totals)
            rung.update(open=open_, unknown=unknown, own=(a, b) == (steps0, patience0))
            curve["rungs"].append(rung)
    if budgets and out and all(len(c["refused"]) == len(budgets) for c in out):
        raise ValueError(out[0]["refused"][0] + ("" if len(out) == 1 else
                                                 f" (and no other of the store's {len(out)} curves can be read either)"))
    return dict(curves=out, unclaimed=len(states) - claimed, unreadable=got["unreadable"])


def string_outcomes(strings: dict, parent, patience0: int, max_steps: int, patience: int) -> list[dict]:
    """Each string of a :func:`live_ladder` curve (``strings`` as ``keep_strings`` gives them,
    ``parent`` its ``extends``, ``patience0`` the run's patience) under the smaller budget
    (``max_steps``, ``patience``): ``{"n", "key" (length, target hash), "crammed", "steps"}``, where
    ``crammed`` is True (crammed within it, at ``steps``), False (failed there), None (still being
    crammed, or not reached yet, and may still cram within it) or "unknown" (crammed, but the
    smaller patience cannot be read: no accuracy history). Within the budget of the run a curve
    extends, each string is read from one trajectory (:func:`_within_parent`)."""
    rows, kept, theirs, waiting = strings["rows"], strings["kept"], strings["theirs"], strings["waiting"]
    within = parent is not None and max_steps <= parent[0] and patience <= parent[1]
    unknown = []
    if within:
        rows, kept, theirs, unknown = _within_parent(strings)

    def finished(r, p0):
        v = finished_under(r, max_steps, patience, p0)
        return dict(n=int(r["n"]), key=_row_key(r), crammed="unknown" if v is None else v,
                    steps=int(r["steps"]) if v is True else None)

    out = [finished(r, patience0) for r in rows]
    out += [dict(n=k["n"], key=_kept_key(k), crammed=kept_under(k, max_steps, patience), steps=None) for k in kept]
    if within:
        out += [finished(r, parent[1]) for r in theirs]
        out += [dict(n=int(r["n"]), key=_row_key(r), crammed=None, steps=None) for r in unknown]
    else:   # beyond it, a string not reached yet may still cram
        out += [dict(n=int(r["n"]), key=_row_key(r), crammed=None, steps=None) for r in waiting]
    return out


def _extended_run(store, key, settings, rows, kept, curves):
    """((max_steps, patience), rows, waiting, restarts) of the run that the curve ``key`` goes on
    from: its budget, its rows at this m, those of them whose strings the curve has not reached yet
    (neither finished nor kept), and the (length, target hash) of its strings that the curve crams
    again from the start: neither taken as they are (:func:`accesslib.experiments.curves.carries_up`)
    nor gone on from the state they finished in (none kept in the store); (None, [], [], set())
    where the store holds no such run. The run it extends: the same model, m, source and seed, the
    same protocol settings but for a smaller max_steps and patience (the largest such run), without
    a schedule; the strings are matched by length and target."""
    from accesslib.experiments.curves import carries_up

    if not settings or settings.get("schedule") is not None or "max_steps" not in settings:
        return None, [], [], set()
    model, m, source, ph = key
    same = {k: v for k, v in settings.items() if k not in ("max_steps", "patience")}
    seeds = {int(r["seed"]) for r in rows}
    best = None
    for (model2, m2, source2, ph2), rows2 in curves.items():
        if (model2, m2, source2) != (model, m, source) or ph2 == ph or not rows2:
            continue
        s2 = store.settings(ph2) or {}
        if "max_steps" not in s2 or {k: v for k, v in s2.items() if k not in ("max_steps", "patience")} != same:
            continue
        budget = (int(s2["max_steps"]), int(s2["patience"]))
        if budget[0] > int(settings["max_steps"]) or budget[1] > int(settings["patience"]) or budget == (
                int(settings["max_steps"]), int(settings["patience"])):
            continue
        if seeds and {int(r["seed"]) for r in rows2} != seeds:
            continue
        if best is None or budget > best[0]:
            best = (budget, rows2, s2)
    if best is None:
        return None, [], [], set()
    reached = {_row_key(r) for r in rows} | {_kept_key(k) for k in kept}
    finals = store.final_keys()
    restarts = {_row_key(r) for r in best[1] if not carries_up(r, best[2]) and inflight_key(r) not in finals}
    return best[0], best[1], [r for r in best[1] if _row_key(r) not in reached], restarts


def _parted(rows, kept, theirs, restarts) -> int:
    """How many of the strings a curve crams again from the start (``restarts``; ``rows`` and
    ``kept`` its finished and kept strings, ``theirs`` the rows of the run it extends) have already
    taken other steps than that run did: their accuracy histories differ over the steps both cover
    (strings without a history on either side are not counted)."""
    if not restarts:
        return 0
    first = {_row_key(r): r for r in theirs}

    def rises(history, upto):
        return [(int(a), round(float(b), 5)) for a, b in history if int(a) < upto]

    n = 0
    for key, rec, step in ([(_row_key(r), r, int(r["steps"])) for r in rows]
                           + [(_kept_key(k), k, int(k["step"])) for k in kept]):
        old = first.get(key) if key in restarts else None
        if old is None or not (old.get("accuracy_history") and rec.get("accuracy_history")):
            continue
        upto = min(step, int(old["steps"]))
        n += rises(old["accuracy_history"], upto) != rises(rec["accuracy_history"], upto)
    return n


def _within_parent(strings: dict) -> tuple[list, list, list, list]:
    """How a reading within the budget of the run a curve extends takes each string of the curve
    (``strings`` of :func:`live_ladder` with ``keep_strings``): (rows, kept, theirs, unknown), so
    that every string reads all its budgets from one trajectory. The curve's own finished rows and
    kept states decide the strings they hold where they keep an accuracy history: one this run goes
    on from, or takes as it is, carries the other run's steps in it, and one it crams again from
    the start may part from that run (another thread count or CPU rounds otherwise, docs/engine.md,
    "Float rounding"), so its smaller budgets are its own. The rows of the run it extends
    (``theirs``) decide the others: those whose own record keeps no history, and those not reached
    yet that this run will go on from or take as they are. Those not reached yet that it will cram
    again from the start (``restarts``) are ``unknown``: open until it does."""
    theirs, restarts = strings["theirs"], strings.get("restarts", set())
    known = {_row_key(r) for r in theirs}
    rows = [r for r in strings["rows"] if r.get("accuracy_history") or _row_key(r) not in known]
    kept = [k for k in strings["kept"] if k.get("accuracy_history") or _kept_key(k) not in known]
    own = {_row_key(r) for r in rows} | {_kept_key(k) for k in kept}
    reached = {_row_key(r) for r in strings["rows"]} | {_kept_key(k) for k in strings["kept"]}
    unknown = [r for r in theirs if _row_key(r) not in reached and _row_key(r) in restarts]
    lost = {_row_key(r) for r in unknown}
    return rows, kept, [r for r in theirs if _row_key(r) not in own and _row_key(r) not in lost], unknown


def _row_key(row) -> tuple:
    """A finished string by its length and target (the same string in two runs of one store)."""
    return int(row["n"]), row["target_hash"]


def _kept_key(state) -> tuple:
    """A kept state by its length and target, as :func:`_row_key` names a finished string."""
    return state["n"], target_hash(state["ids"])


def ladder_slopes(curves) -> list[dict]:
    """The slope n50 = a*m + b at each step budget, from :func:`live_ladder` curves of one run
    (model, source, protocol) at two or more m: one dict per run with model, source,
    protocol_hash, ms, and ``budgets``: per (max_steps, patience) read at every m, ``slope``,
    ``intercept`` (the unweighted fit, as a bundle's slope is), ``slope_stderr``
    (:func:`accesslib.theory.stats.propagated_slope_stderr`: that fit's stderr from the n50
    stderrs; ``fit_slope``'s residual one is undefined with two m), ``r2`` (None with two m), or
    ``slope`` None, ``why``: the m whose rung still has strings open, or has no n50 located, and
    ``slope_range``: where the slope can still end however the open strings end
    (:func:`open_slope_range`; None where that cannot be told)."""
    from accesslib.theory.stats import fit_slope, propagated_slope_stderr

    runs: dict[tuple, list[dict]] = {}
    for c in curves:
        if c["rungs"]:
            runs.setdefault((c["model"], c["source"], c["protocol_hash"]), []).append(c)
    out = []
    for (model, source, ph), group in sorted(runs.items()):
        group = sorted(group, key=lambda c: c["m"])
        if len(group) < 2:
            continue
        shared = set.intersection(*({(r["max_steps"], r["patience"]) for r in c["rungs"]} for c in group))
        budgets = []
        for a, b in sorted(shared):
            rungs = [next(r for r in c["rungs"] if (r["max_steps"], r["patience"]) == (a, b)) for c in group]
            ms = [c["m"] for c in group]
            entry = dict(max_steps=a, patience=b, ms=ms, n50=[r["n50"] for r in rungs], slope=None, why=None)
            whys = [(what, [m for m, r in zip(ms, rungs) if test(r)]) for what, test in (
                ("strings still open", lambda r: any(r["open"])),
                ("crammed strings without an accuracy history", lambda r: r["unknown"] and not any(r["open"])),
                ("no n50 located", lambda r: r["n50"] is None and not any(r["open"]) and not r["unknown"]))]
            whys = [f"{what} at m = {', '.join(map(str, at))}" for what, at in whys if at]
            if whys:
                entry["why"] = "; ".join(whys)
                entry["slope_range"] = open_slope_range(ms, rungs)
            else:
                fit = fit_slope(ms, [r["n50"] for r in rungs])
                entry.update(slope=fit.slope, intercept=fit.intercept, r2=finite_or_none(fit.r2) if len(ms) > 2 else None,
                             slope_stderr=finite_or_none(propagated_slope_stderr(ms, [r["stderr"] for r in rungs])))
            budgets.append(entry)
        out.append(dict(model=model, source=source, protocol_hash=ph, ms=[c["m"] for c in group], budgets=budgets))
    return out


def open_slope_range(ms, rungs) -> dict | None:
    """Where the unweighted least-squares slope over ``ms`` can still end while some of its
    ``rungs`` have strings open: the slope is sum c_i n50_i with c_i = (m_i - mean m) / sum (m_j -
    mean m)^2, and each open rung's n50 lies in its ``n50_range`` (:func:`open_n50_range`; the
    rungs are of other strings, so their ranges combine freely). ``{low, high}``, each None where
    an open rung's n50 can go past its lengths on that side (``above`` / ``below`` ways); counted
    over the ways that locate n50. None where a rung is neither decided with an n50 nor open with a
    range (too many ways, crammed strings without a history, or no way located). The c_i are
    :func:`accesslib.theory.stats.slope_coefficients`."""
    from accesslib.theory.stats import slope_coefficients

    if len(set(ms)) < 2:
        return None
    low = high = 0.0
    for ci, r in zip(slope_coefficients(ms).tolist(), rungs):
        rg = r.get("n50_range")
        if not any(r.get("open") or []):
            if r.get("n50") is None:
                return None
            low = None if low is None else low + ci * r["n50"]     # None: past the lengths on that side
            high = None if high is None else high + ci * r["n50"]
            continue
        if r.get("unknown") or not rg or rg.get("low") is None:
            return None
        if ci == 0:   # the middle m of an odd count does not move the slope
            continue
        least = None if rg.get("below") else rg["low"]     # the n50 its open strings can end at, at least
        most = None if rg.get("above") else rg["high"]     # and at most
        lo_term, hi_term = (least, most) if ci >= 0 else (most, least)
        low = None if low is None or lo_term is None else low + ci * lo_term
        high = None if high is None or hi_term is None else high + ci * hi_term
    return dict(low=finite_or_none(low), high=finite_or_none(high))


def budget_map(store, steps, patiences, **filters) -> dict:
    """Which knob of a step budget limits n50: n50 over a grid of step budgets and patiences, read
    from one run's strings (:func:`live_ladder` on every pair; the run's own steps and patience
    join the axes, pairs past the run's are left out), also while the run is going.

    Every cell is read from the same strings, so two cells differ only by the strings one lets
    cram that the other stops first: down a column (more steps at one patience) n50 stops
    changing once every string has crammed or run out of patience before the step cap, and that
    step budget is where the column *settles*.

    Returns ``{"maps": [...], "unclaimed", "unreadable"}`` (as :func:`live_ladder`); one map per
    curve with model, m, source, protocol_hash, settings (the protocol's, as the store keeps
    them), run ((max_steps, patience) of the run), finished, kept, kept_steps, steps and
    patiences (the axes, ascending), lengths, totals (strings per length), ``cells`` (one row per
    step budget, one cell per patience: :func:`_map_cell` with ``cut`` of :func:`cut_by_cap`,
    ``cut_unknown`` (its open and no-history strings together) and ``cut_no_history``; None where
    the run cannot read that budget, e.g. a smaller patience of a run with patience on the loss),
    ``settled`` (per patience: the least step budget from which n50 no longer changes up to the
    run's steps, None while strings are open at the run's steps or a cell is missing) and
    ``refused`` (why budgets of the grid cannot be read from this run, :func:`live_ladder`'s words).
    ValueError when no curve can read any budget of the grid but its own (:func:`live_ladder`'s
    words for the first budget it refused)."""
    steps = sorted({int(s) for s in steps})
    patiences = sorted({int(p) for p in patiences})
    if not steps or not patiences or min(steps + patiences) < 1:
        raise ValueError(f"a budget map needs step budgets and patiences, whole numbers >= 1; got steps "
                         f"{steps or 'none'} and patiences {patiences or 'none'}")
    if not isinstance(store, ResultsStore):
        store = ResultsStore(store, readonly=True)
    # each run's own steps and patience join the axes: its budget first (no budget read), then the grid
    runs = {(c["max_steps"], c["patience"]) for c in live_ladder(store, [], **filters)["curves"]
            if c["max_steps"] is not None}
    more_s, more_p = sorted(set(steps) | {a for a, _ in runs}), sorted(set(patiences) | {b for _, b in runs})
    got = live_ladder(store, [(s, p) for s in more_s for p in more_p], keep_strings=True, **filters)
    maps = []
    store_settings = {c["protocol_hash"]: store.settings(c["protocol_hash"]) for c in got["curves"]}
    for c in got["curves"]:
        if c["max_steps"] is None:
            continue
        s0, p0 = c["max_steps"], c["patience"]
        rungs = {(r["max_steps"], r["patience"]): r for r in c["rungs"]}
        axis_s = sorted({s for s in steps if s <= s0} | {s0})
        axis_p = sorted({p for p in patiences if p <= p0} | {p0})
        cells = [[_map_cell(rungs.get((s, p))) for p in axis_p] for s in axis_s]
        for s, row in zip(axis_s, cells):
            for p, cell in zip(axis_p, row):
                if cell is not None:
                    cut, still, blind = _cut_of_curve(c, s, p, p0)
                    cell.update(cut=cut, cut_unknown=still + blind, cut_no_history=blind)
        own = rungs[(s0, p0)]
        settled = [_settled(axis_s, [row[j] for row in cells]) for j in range(len(axis_p))]
        maps.append(dict(model=c["model"], m=c["m"], source=c["source"], protocol_hash=c["protocol_hash"],
                         settings=canonical(store_settings[c["protocol_hash"]]), run=(s0, p0),
                         finished=c["finished"], kept=c["kept"], kept_steps=c["kept_steps"],
                         waiting=c["waiting"], extends=c["extends"], steps=axis_s,
                         patiences=axis_p, lengths=own["lengths"], totals=own["totals"], cells=cells,
                         settled=settled, refused=list(dict.fromkeys(c["refused"]))))
    if maps and all(c is None or (s, p) == tuple(mp["run"]) for mp in maps
                    for s, row in zip(mp["steps"], mp["cells"]) for p, c in zip(mp["patiences"], row)):
        raise ValueError(next((r for mp in maps for r in mp["refused"]), "no budget of the grid can be read")
                         + ("" if len(maps) == 1 else f" (and no other of the store's {len(maps)} curves can be "
                                                      "read either)"))
    return dict(maps=maps, unclaimed=got["unclaimed"], unreadable=got["unreadable"])


def map_slopes(maps) -> list[dict]:
    """The slope n50 = a*m + b at every cell of :func:`budget_map` maps of one run at two or more
    m (:func:`ladder_slopes` on the cells): per run, per (max_steps, patience) the slope with its
    stderr, or while strings are open where it can still end (``slope_range``). How the measured
    slope itself depends on each knob of the budget."""
    curves = [dict(model=mp["model"], source=mp["source"], protocol_hash=mp["protocol_hash"], m=int(mp["m"]),
                   rungs=[dict(max_steps=s, patience=p, n50=c["n50"], stderr=c["stderr"], open=c["open"],
                               unknown=c.get("unreadable", 0), n50_range=c.get("range"))
                          for s, row in zip(mp["steps"], mp["cells"]) for p, c in zip(mp["patiences"], row)
                          if c is not None])
              for mp in maps]
    return ladder_slopes(curves)


def _cut_of_curve(curve, max_steps, patience, patience0):
    """:func:`cut_by_cap` of a :func:`live_ladder` curve (with its strings), read as its rungs are:
    within the budget of a run it extends, each string from one trajectory (:func:`_within_parent`)."""
    st, parent = curve["strings"], curve.get("extends")
    if parent is None:
        return cut_by_cap(st, max_steps, patience, patience0)
    if max_steps <= parent[0] and patience <= parent[1]:
        rows, kept, theirs, unknown = _within_parent(st)
        mine, other = cut_by_cap(dict(rows=rows, kept=kept), max_steps, patience, patience0), cut_by_cap(
            dict(rows=theirs, kept=[]), max_steps, patience, parent[1])
        cut, still, blind = (a + b for a, b in zip(mine, other))
        return cut, still + len(unknown), blind   # a string not reached yet that starts again: open
    cut, still, blind = cut_by_cap(st, max_steps, patience, patience0)
    return cut, still + len(st["waiting"]), blind   # a string not reached yet cannot be told


def cut_by_cap(strings: dict, max_steps: int, patience: int, patience0: int) -> tuple[int, int, int]:
    """How many of a curve's strings (``{"rows", "kept"}`` of :func:`live_ladder` with
    ``keep_strings``; a run with patience ``patience0``) a budget of ``max_steps`` / ``patience``
    would end at its step cap while still gaining: not crammed by then, and its best teacher-forced
    accuracy rose within the last ``patience`` steps (:func:`patience_stop` falls after the cap).
    Only such strings can cram with more steps at that patience, so none cut means n50 at that
    patience cannot move with more steps. Returns (cut, open, no_history): the strings that cannot
    be told yet (still being crammed short of that budget), and those that cannot be told at all
    (kept no accuracy history: strings crammed before the history was kept)."""
    cut = still = blind = 0
    for row in strings["rows"]:
        crammed = finished_under(row, max_steps, patience, patience0)
        history = row.get("accuracy_history")
        if crammed is None or (not crammed and not history):
            blind += 1
        elif not crammed:
            cut += patience_stop(history, patience) > max_steps
    for state in strings["kept"]:
        history = state.get("accuracy_history")
        if not ended_under(state["step"], history, max_steps, patience):
            still += 1             # open short of this budget
        elif not history:
            blind += 1
        else:
            cut += patience_stop(history, patience) > max_steps
    return cut, still, blind


def _map_cell(rung: dict | None) -> dict | None:
    """A :func:`budget_map` cell from a :func:`live_ladder` rung: successes and open (per length),
    n50 and stderr (or the one-sided n50_above / n50_below) once decided; while strings are open,
    where n50 can still end (low, high, above, below of :func:`open_n50_range`, None past its
    limit); ``unreadable``: crammed strings whose smaller patience cannot be read (no accuracy
    history), n50 None; None for a budget the run cannot read."""
    if rung is None:
        return None
    cell = dict(successes=list(rung["successes"]), open=list(rung.get("open") or [0] * len(rung["successes"])),
                n50=rung.get("n50"), stderr=rung.get("stderr"))
    for k in ("n50_above", "n50_below"):
        if rung.get(k) is not None:
            cell[k] = rung[k]
    rg = rung.get("n50_range")
    if rung.get("unknown"):
        cell["n50"] = cell["stderr"] = None
        cell["unreadable"] = int(rung["unknown"])
    elif any(cell["open"]):
        cell["n50"] = cell["stderr"] = None
        cell["range"] = {k: rg[k] for k in ("low", "high", "above", "below")} if rg else None
    return cell


def _settled(steps, column) -> int | None:
    """The least of ``steps`` from which a :func:`budget_map` column's cells (one per step budget)
    all hold the same counts, every string decided; None where its last cell is open or missing."""
    last = column[-1]
    if last is None or any(last["open"]) or "range" in last or last.get("unreadable"):
        return None
    at = steps[-1]
    for s, cell in zip(reversed(steps[:-1]), reversed(column[:-1])):
        if cell is None or any(cell["open"]) or cell.get("unreadable") or cell["successes"] != last["successes"]:
            break
        at = s
    return at


def read_budget_bundle(store, model: str, max_steps: int, patience: int, *, source: str | None = None,
                       run_budget=None, ms=None, facts: dict | None = None, command: str = "") -> dict:
    """A cramming bundle of ``model`` at a smaller budget (``max_steps`` / ``patience``) read from
    the strings of a larger run in ``store``, also one still going (:func:`live_ladder`): every m
    of the run (or ``ms``) at that budget, its n50 and the slope over m, as if a run with that
    budget had measured it. So [A]'s 3000 / 500 at m = 1 and 2 comes out of a 9000 / 1500 run as
    soon as its strings have passed step 3000 or stopped, days before the run ends. The slope's
    stderr is the one its n50 stderrs give it (``stderr_from``), as ``store ladder`` says it; with
    three m or more the least-squares residual one is kept too (``slope_stderr_residual``).

    The bundle records ``read_from`` (the run's budget, its store, strings finished and still
    being crammed) and a ``budget_check`` against the run's own budget at each m where that can
    already be told (its rung decided, or moved however its open strings end:
    :func:`rungs_moved`, :func:`open_rung_moved`). ``facts``: the model's facts (d, vocab_size,
    ...; default: its shipped cramming bundle's, else the loaded model's).

    ``run_budget`` ((max_steps, patience)) picks the run by its own budget where the store holds
    several of one source (a 27000 / 4500 run going on in the 9000 / 1500 run's store).

    ValueError, naming what is wrong, when the store holds no run of ``model`` (and ``source``),
    holds several (give ``source`` or ``run_budget``), cannot read that budget (:func:`live_ladder`'s reasons), or
    has strings of an m still open at that budget (how many, at which steps)."""
    from accesslib._checks import check_int, check_int_list
    from accesslib.engine.cramming import PROTOCOLS

    max_steps, patience = check_int("max_steps", max_steps, 1), check_int("patience", patience, 1)
    if not isinstance(store, ResultsStore):
        store = ResultsStore(store, readonly=True)
    filters = dict(model=model) if source is None else dict(model=model, source=source)
    if not store.count(**filters):
        raise ValueError(f"the store {store.path} holds no finished string of {model!r}"
                         + ("" if source is None else f" with source {source!r}")
                         + "; a run must finish at least one string at each m before a budget can be read from it")
    live = _one_run(live_ladder(store, [(max_steps, patience)], **filters)["curves"], store, model, run_budget)
    curves = sorted(live, key=lambda c: c["m"])
    if ms is not None:
        ms = check_int_list("ms", ms, 1)
        missing = sorted(set(ms) - {c["m"] for c in curves})
        if missing:
            raise ValueError(f"ms must be among the m of the run in {store.path} ({sorted(c['m'] for c in curves)}); "
                             f"got {ms}")
        curves = [c for c in curves if c["m"] in ms]
    if any(c["refused"] for c in curves):
        raise ValueError(next(c["refused"][0] for c in curves if c["refused"]))
    rungs, open_ = {}, []
    for c in curves:
        rung = next(r for r in c["rungs"] if (r["max_steps"], r["patience"]) == (max_steps, patience))
        if any(rung["open"]) or rung["unknown"]:
            why = []
            if any(rung["open"]):
                steps = c["kept_steps"] or (0, 0)
                why.append(f"{sum(rung['open'])} strings still open (its strings being crammed are at steps "
                           f"{steps[0]:,} to {steps[1]:,})")
            if rung["unknown"]:
                why.append(f"{rung['unknown']} crammed strings without an accuracy history")
            open_.append(f"m = {c['m']}: {' and '.join(why)}")
        rungs[c["m"]] = rung
    if open_:
        raise ValueError(f"{max_steps:,} / {patience:,} is not decided yet in {store.path}: " + "; ".join(open_)
                         + f". Read it once every string has passed step {max_steps:,} or stopped "
                         "(`accesslib store ladder` shows how far they are), or leave that m out")
    run0 = curves[0]
    steps0, patience0 = run0["max_steps"], run0["patience"]
    settings = dict(store.settings(run0["protocol_hash"]) or {}, max_steps=max_steps, patience=patience)
    base = {k: v for k, v in settings.items() if k not in ("max_steps", "patience", "prefix_ids")}
    protocol = next((name for name, p in PROTOCOLS.items()
                     if all(canonical(base.get(k)) == canonical(v) for k, v in p.items()
                            if k not in ("max_steps", "patience"))),
                    "custom")
    recs = [dict(m=m, lengths=r["lengths"], successes=r["successes"], totals=r["totals"], n50=r["n50"],
                 n50_stderr=r["stderr"], **{k: r[k] for k in ("n50_above", "n50_below") if r.get(k) is not None},
                 strings_crammed=0, strings_from_store=sum(r["totals"]), wall_time=0.0, interrupted=False)
            for m, r in sorted(rungs.items())]
    check, undecided = ({}, []) if (max_steps, patience) == (steps0, patience0) else _against_own(curves, rungs)
    # the stderr the n50 stderrs give it, as `store ladder` says it (with two m the only one)
    slope = with_propagated_stderr(slope_record(recs), recs)
    seeds = sorted({int(r["seed"]) for r in store.rows(**filters, protocol_hash=run0["protocol_hash"])})
    samples = max(t for x in recs for t in x["totals"])
    if facts is None:
        facts = _model_facts(model)
    ratio = steps0 / max_steps
    bundle = dict(kind="cram", version=BUNDLE_VERSION, model=model, facts=dict(facts), source=run0["source"],
                  samples=samples, search="grid", seed=seeds[0] if len(seeds) == 1 else seeds, protocol=protocol,
                  settings=settings, curves=recs, slope=slope, examples=[], geometry=None,
                  created=datetime.now(timezone.utc).isoformat(timespec="seconds"), hardware=hardware(),
                  wall_time=0.0, command=command, budget_check=None,
                  read_from=dict(max_steps=steps0, patience=patience0, store=str(store.path),
                                 finished=sum(c["finished"] for c in curves), kept=sum(c["kept"] for c in curves),
                                 undecided_ms=undecided))
    if check:
        bundle["budget_check"] = dict(
            factor=int(ratio) if ratio == int(ratio) else round(ratio, 2), ms=check,
            budget_limited=any(v["moved"] is True for v in check.values()),
            inconclusive=[int(m) for m, v in check.items() if v["moved"] is None],
            settings=dict(source=run0["source"], samples=samples, search="grid", seed=bundle["seed"],
                          protocol=protocol, max_steps=[max_steps, steps0], patience=[patience, patience0]),
            wall_time=0.0, created=bundle["created"], hardware=bundle["hardware"], command=command,
            read_from_run=True)
    return bundle


def _one_run(live: list[dict], store, model: str, run_budget) -> list[dict]:
    """The curves of :func:`live_ladder` that belong to one run (source and protocol): those of
    ``run_budget`` ((max_steps, patience)) where given; ValueError naming the runs when there are
    several, or none of that budget."""
    def budget_of(c):
        return "no recorded budget" if c["max_steps"] is None else f"{c['max_steps']:,} / {c['patience']:,}"

    if run_budget is not None:
        want = tuple(int(x) for x in run_budget)
        picked = [c for c in live if (c["max_steps"], c["patience"]) == want]
        if not picked:
            raise ValueError(f"the store {store.path} holds no run of {model!r} with the budget "
                             f"{want[0]:,} / {want[1]:,}; its runs: "
                             + ", ".join(sorted({f"{c['source']}, {budget_of(c)}" for c in live})))
        live = picked
    runs = list(dict.fromkeys((c["source"], c["protocol_hash"], budget_of(c)) for c in sorted(
        live, key=lambda c: (c["source"], c["max_steps"] or 0, c["patience"] or 0, c["protocol_hash"]))))
    if len(runs) > 1:
        raise ValueError(f"the store {store.path} holds {len(runs)} runs of {model!r} "
                         f"({', '.join(f'{s}, {b} (protocol {h})' for s, h, b in runs)}); name one by its source "
                         "or its own budget (run_budget; make_bundles.py --read-from STEPS/PATIENCE)")
    return live


def _against_own(curves: list[dict], rungs: dict) -> tuple[dict, list[int]]:
    """A read budget's rung at each m (``rungs``) against the run's own rung there: where that can
    be told already (the own rung decided: :func:`rungs_moved`; still open, but moved however its
    open strings end: :func:`open_rung_moved`), a budget check entry as :func:`budget_check` gives
    one (plus ``open_3x``); the m where it cannot be told yet."""
    check, undecided = {}, []
    for c in curves:
        r, own = rungs[c["m"]], next(x for x in c["rungs"] if x["own"])
        low = None
        if any(own["open"]) or own["unknown"]:
            moved, shift = open_rung_moved(r, own)
            if moved is None:
                undecided.append(c["m"])
                continue
            rg = own.get("n50_range") or {}
            low = rg.get("low") if not rg.get("below") else None   # the least n50 its open strings can give
        else:
            moved, shift, _ = rungs_moved(r, own)
        row = check[str(c["m"])] = dict(
            n50=r["n50"], stderr=r["stderr"], n50_3x=own.get("n50"), stderr_3x=own.get("stderr"), shift=shift,
            moved=moved, lengths_3x=own["lengths"], successes_3x=own["successes"], totals_3x=own["totals"],
            open_3x=own["open"], strings_crammed=0, strings_from_store=sum(own["totals"]))
        if low is not None:
            row["n50_3x_low"] = low
    return check, undecided


def _model_facts(model: str) -> dict:
    """A model's facts as a bundle keeps them: from its shipped cramming bundle, else the loaded model."""
    from accesslib.results import bundles

    try:
        return dict(bundles.load("cram", model)["facts"])
    except (ValueError, KeyError):
        from accesslib.models.loading import load_model

        return facts_record(load_model(model).facts)


def facts_record(f) -> dict:
    """A model's facts (:class:`accesslib.models.loading.ModelFacts`) as a cramming bundle keeps them."""
    return dict(d=f.d, vocab_size=f.vocab_size, dtype=f.dtype, family=f.family, max_context=f.max_context)


def _kept_passes(key: dict, filters: dict) -> bool:
    """Whether a kept string (its store key: model, m, n, source, target_hash, seed, protocol_hash)
    passes the row ``filters`` of :func:`live_ladder` as its row will (a list, tuple or set: any
    of its values; None: no filter); a filter on a column a kept string has no value for yet
    (success, steps, ...) leaves it out."""
    for column, want in filters.items():
        if want is None:
            continue
        if column not in key:
            return False
        have = key[column]
        if not (have in want if isinstance(want, (list, tuple, set, frozenset)) else have == want):
            return False
    return True


def _derivable(settings: dict, max_steps: int, patience: int) -> bool:
    """Whether a (max_steps, patience) rung is a prefix of a run with ``settings`` (bundle settings
    as :func:`_base_settings` gives them), to be read by :func:`derived_rung`."""
    steps0, patience0 = int(settings["max_steps"]), int(settings["patience"])
    return (settings.get("schedule") is None and max_steps < steps0 and patience <= patience0
            and (patience == patience0 or settings.get("patience_on") == "accuracy"))


def measured_rung(max_steps: int, patience: int, lengths, successes, totals, **extra) -> dict:
    """A ladder rung (not the shipped one) from its counts per length: the logistic fit's n50 and
    stderr where :func:`usable_n50` keeps them, else the one-sided bound of :func:`n50_bounds`;
    ``extra`` (where its strings came from) is recorded as given."""
    from accesslib.theory.stats import fit_n50

    lengths, successes, totals = list(lengths), list(successes), list(totals)
    fit = fit_n50((lengths, successes, totals))
    n50, se = usable_n50(finite_or_none(fit.n50), finite_or_none(fit.stderr), finite_or_none(fit.k), fit.status,
                         lengths)
    return dict(max_steps=max_steps, patience=patience, lengths=lengths, successes=successes, totals=totals,
                n50=n50, stderr=se, shipped=False, **extra,
                **({} if n50 is not None else n50_bounds(successes, totals, lengths)))


def budget_ladder(lm, bundle: dict, budgets, m: int = 1, *, lengths=None, store=None, progress: bool = False,
                  on_string=None, batch_size: int | None = None, command: str = "") -> dict:
    """n50 at one m by step budget: the bundle's own curve and the same curve measured again with
    each (max_steps, patience) of ``budgets``: same source, seed (hence the same strings), strings
    per length and settings otherwise. Where :func:`budget_check` asks one question (does 3x the
    budget move n50?), the ladder shows the whole way: at which budget n50 stops moving.

    ``lengths``: the lengths of the larger budgets (grid bundles only; default the bundle's at m),
    e.g. where a longer budget moves the 50% point past the bundle's grid; a budget given as
    (max_steps, patience, lengths) has lengths of its own (the same strings at the lengths both
    measure, more where it needs them). Strings already in
    ``store`` (same protocol and target) are read back, not crammed again. Returns::

        {m, rungs: [{max_steps, patience, lengths, successes, totals, n50, stderr, shipped,
         strings_crammed, strings_from_store, compared_with, moved, shift}, ...],
         converged_at, still_moving, settings, wall_time, created, hardware, command}

    sorted by max_steps; the bundle's own rung has ``shipped`` True. ``converged_at`` and
    ``still_moving``: :func:`ladder_verdict`. An n50 counts only where its fit locates a falling
    curve's midpoint among the lengths measured (else None); a rung without one whose strings all
    crammed at its longest length (or none at its shortest) has ``n50_above`` (``n50_below``) that
    length instead (:func:`n50_bounds`), e.g. a larger budget that moved n50 past the grid.

    A budget below the bundle's with the bundle's patience (or a smaller one, under patience on
    accuracy), under a protocol without a schedule ("paper"), is a prefix of the bundle's own run:
    its rung is read from the steps the bundle's strings took (:func:`derived_rung`,
    ``derived_from``; ``store`` must hold them) and nothing is crammed. So a bundle measured with
    9000 steps and patience 1500 has [A]'s 3000 / 500 and a 1000 / 500 rung for free."""
    from accesslib._checks import check_int
    from accesslib.experiments.curves import accessibility_curves

    m = check_int("m", m, 1)
    own = {int(c["m"]): c for c in bundle["curves"]}
    if m not in own:
        raise ValueError(f"m must be among the bundle's measured m {sorted(own)}; got {m}")
    settings = _base_settings(bundle["settings"], from_json=True)
    steps0 = int(settings["max_steps"])
    pairs, own_lengths = [], {}
    for b in budgets:
        if not isinstance(b, (list, tuple)) or len(b) not in (2, 3):
            raise ValueError(f"budgets must be (max_steps, patience) pairs or (max_steps, patience, lengths); got {b!r}")
        pairs.append((check_int("max_steps", b[0], 1), check_int("patience", b[1], 1)))
        if len(b) == 3:
            if bundle["search"] != "grid":
                raise ValueError(f"lengths can be given for a grid search only; this bundle's search is "
                                 f"{bundle['search']!r}")
            own_lengths[pairs[-1][0]] = [check_int("lengths", n, 1) for n in b[2]]
    if not pairs:
        raise ValueError("budgets must give at least one (max_steps, patience) pair; got none")
    same = [s for s, _ in pairs if s == steps0]
    if same or len({s for s, _ in pairs}) != len(pairs):
        raise ValueError(f"budgets must have distinct max_steps other than the bundle's {steps0}; got "
                         f"{[s for s, _ in pairs]}")
    search = bundle["search"]
    if lengths is not None:
        if search != "grid":
            raise ValueError(f"lengths can be given for a grid search only; this bundle's search is {search!r}")
        lengths = [check_int("lengths", n, 1) for n in lengths]
    else:
        lengths = list(own[m]["lengths"]) if search == "grid" else None
    c0 = own[m]
    n50, se = usable_n50(c0["n50"], c0["n50_stderr"], c0.get("k"), c0.get("fit_status"), c0["lengths"])
    rungs = [dict(max_steps=steps0, patience=int(settings["patience"]), lengths=list(c0["lengths"]),
                  successes=list(c0["successes"]), totals=list(c0["totals"]), n50=n50, stderr=se,
                  shipped=True, strings_crammed=None, strings_from_store=None,
                  **({} if n50 is not None else n50_bounds(c0["successes"], c0["totals"], c0["lengths"])))]
    name, samples = bundle["model"], int(bundle["samples"])
    t0 = time.perf_counter()
    for steps, patience in sorted(pairs):
        if _derivable(settings, steps, patience) and steps not in own_lengths:
            rungs.append(derived_rung(store, bundle, m, steps, patience))   # a prefix of the bundle's run
            continue
        if isinstance(lm, str):    # loaded only for a rung that crams
            from accesslib.models.loading import load_model
            lm = load_model(lm)
        at = own_lengths.get(steps, lengths)
        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(desc=f"{name} m={m} {steps} steps", unit="str")
        tick, on_step = bar_hooks(bar, on_string)
        try:
            (c,) = accessibility_curves(lm, [m], {m: at} if at else None, samples=samples,
                                        source=bundle["source"], seed=int(bundle.get("seed", 0)), store=store,
                                        search=search, protocol=dict(settings, max_steps=steps, patience=patience),
                                        model_name=name, on_string=tick, on_step=on_step, batch_size=batch_size)
        finally:
            if bar is not None:
                bar.close()
        rungs.append(measured_rung(steps, patience, c.lengths, c.successes, c.totals,
                                   strings_crammed=c.strings_crammed, strings_from_store=c.strings_from_store))
        if c.interrupted:
            raise RuntimeError(f"the {steps}-step curve was interrupted; its strings are in the store, run again")
    rungs.sort(key=lambda r: r["max_steps"])
    verdict = ladder_verdict(rungs)
    for r, v in zip(rungs, verdict.pop("comparisons")):
        r.update(v)
    return dict(m=m, rungs=rungs, **verdict,
                settings=dict(source=bundle["source"], samples=samples, search=search,
                              seed=int(bundle.get("seed", 0)), protocol=bundle.get("protocol"),
                              factor=LADDER_FACTOR),
                wall_time=round(time.perf_counter() - t0, 1),
                created=datetime.now(timezone.utc).isoformat(timespec="seconds"), hardware=hardware(),
                command=command)


class RunHeld(Exception):
    """A run with ``hold_at`` set strings aside (:func:`make_cramming_bundle`): their states are in
    the store, the smaller budget can be read (``accesslib store ladder``, ``--read-budget``), and
    the same run without ``hold_at`` goes on from them. ``held``: how many."""

    def __init__(self, model: str, held: int, hold_at: dict, store):
        self.model, self.held, self.hold_at = model, held, dict(hold_at)
        path = getattr(store, "path", store)
        super().__init__(
            f"{model}: {held} string(s) set aside, their outcome within {hold_at['max_steps']:,} steps and "
            f"patience {hold_at['patience']:,} known (failed there) and their state kept in {path}; no bundle "
            f"written. Read that budget with `accesslib store ladder --budget {hold_at['max_steps']}/"
            f"{hold_at['patience']} --store {path}`; the same command without the hold goes on from them")


def make_cramming_bundle(model_name: str, ms=(1, 2, 3, 4), *, samples: int = 16, source: str = "natural",
                         protocol: str = "fast", search: str = "bisect", seed: int = 0, store=None,
                         examples: int = 3, progress: bool = True, command: str = "", geometry: bool = True,
                         geometry_options: dict | None = None, budget_check: bool | int = False,
                         extend_from: dict | None = None, keep_final: bool = False, hold_at: dict | None = None,
                         **cram_overrides) -> dict:
    """Measure accessibility curves of ``model_name`` for each m and return the bundle dict.

    Uses :func:`accesslib.experiments.curves.accessibility_curve` (strings go to ``store`` when given,
    so an interrupted run resumes) and :func:`fit_slope`. ``cram_overrides`` (e.g. max_steps)
    are recorded in the settings; ``lengths`` (search="grid") may be a dict {m: lengths};
    ``prefix_ids="bos"`` puts the model's BOS token before the memory.
    With ``geometry`` the model's support and decoder cells are
    measured too (:func:`accesslib.engine.geometry.geometry_report`), so the apps can draw the
    refined bounds; ``geometry`` may also be a geometry record measured before (a dict).
    With ``budget_check`` (True: factor 3, or the factor) the bundle's "budget_check" holds
    :func:`budget_check` of the curves just measured (None when not checked). ``extend_from``
    ({"max_steps": .., "patience": ..}): strings a run with that smaller budget finished in
    ``store`` go on from where it left them (:func:`accessibility_curves`); the bundle records it.
    ``keep_final`` (with a store): keep the state each string finished in, so that a larger budget
    can go on from this run. ``hold_at`` ({"max_steps": .., "patience": ..}, a smaller budget; with
    a store): cram each string only until its outcome within that budget is known and set the
    others aside, kept in the store (:func:`accesslib.experiments.curves.accessibility_curves`);
    raises :class:`RunHeld` when any was, since the curves are then not the run's.
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
    tick, on_step = bar_hooks(bar)
    cs = accessibility_curves(lm, [int(m) for m in ms], lengths, samples=samples, source=source, seed=seed,
                              store=store, search=search, protocol=protocol, on_string=tick, on_step=on_step,
                              extend_from=extend_from, keep_final=keep_final, hold_at=hold_at, **kw)
    held = sum(c.engine.held for c in cs[:1] if c.engine is not None)   # one engine for every m
    if held:
        if bar is not None:
            bar.close()
        raise RunHeld(model_name, held, hold_at, store)
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
        # around a memory crammed as the curves' strings were: source, prefix, protocol, layout
        opts = dict(memory_n=int(0.75 * n50s[0]) if n50s else None, memory_source=source,
                    prefix_ids=(settings or {}).get("prefix_ids"),
                    memory_settings=settings or None)
        opts.update(geometry_options or {})
        geo = measure_geometry(lm, model_name, seed=seed, progress=progress, **opts)
    elif isinstance(geometry, dict):   # a record measured before (python -m accesslib geometry --out)
        geo = geometry
    bundle = dict(kind="cram", version=BUNDLE_VERSION, model=model_name, facts=facts_record(lm.facts),
                  source=source, samples=samples, search=search, seed=seed, protocol=protocol,
                  settings=canonical(settings or {}),
                  curves=curves, slope=slope_record(curves), examples=ex, geometry=geo,
                  created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  hardware=hardware(), wall_time=round(time.perf_counter() - t0, 1), command=command,
                  budget_check=None)
    if extend_from:   # its wall time is that of the steps beyond the smaller budget
        bundle["extended_from"] = dict(extend_from, strings=sum(c.strings_extended for c in cs),
                                       carried=sum(c.strings_carried for c in cs))
    if budget_check:
        # the module's function (the keyword of the same name shadows it here)
        from accesslib.experiments.bundling import budget_check as check
        factor = 3 if budget_check is True else int(budget_check)
        bundle["budget_check"] = check(lm, cs, factor, samples=samples, store=store, progress=progress,
                                       precision=float(kw.get("precision", 0.02)), command=command)
        bundle["budget_check"]["settings"]["protocol"] = protocol
    return bundle
