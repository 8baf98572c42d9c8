"""Two runs of one protocol compared at one step budget, string by string and by n50.

Float rounding parts two runs of the same protocol on the same strings (another thread count,
another CPU: docs/engine.md, "Float rounding"): a string crams at another step, or not at all. So
two runs are two samples of the optimisation, and :func:`compare_runs` says how far apart they lie:
for each curve (model, m, source) both stores hold, the strings both crammed (and how many at the
very same step, as a bit-identical run would), the ones only one crammed, and the two n50 with
their difference in combined standard errors. Each store is read as ``accesslib store ladder``
reads it (:func:`accesslib.experiments.bundling.live_ladder`), so a run still going counts its
undecided strings as open, and a run with a larger budget is read at the smaller one.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from accesslib._checks import fail
from accesslib.experiments.bundling import live_ladder, string_outcomes
from accesslib.results.store import describe_ran_on


def _curves_at(store, budget: tuple[int, int], filters: dict) -> dict:
    """{(model, m, source): curve} of the curves of ``store`` that can read ``budget`` (the one with
    the smallest own budget where several runs of a curve can: the run nearest to it)."""
    got = live_ladder(store, [budget], keep_strings=True, **filters)
    out: dict = {}
    for c in got["curves"]:
        rung = next((r for r in c["rungs"] if (r["max_steps"], r["patience"]) == budget), None)
        if rung is None:
            continue
        key = (c["model"], c["m"], c["source"])
        if key not in out or (c["max_steps"], c["patience"]) < (out[key]["max_steps"], out[key]["patience"]):
            out[key] = dict(c, rung=rung)
    return out


def _side(path, curve: dict) -> dict:
    st = curve["strings"]
    ran_on = Counter(describe_ran_on(s.get("ran_on")) for s in st["rows"] + st["kept"] + st["theirs"])
    return dict(store=str(path), protocol_hash=curve["protocol_hash"], max_steps=curve["max_steps"],
                patience=curve["patience"], rung=curve["rung"], ran_on=dict(sorted(ran_on.items())))


def compare_runs(store_a, store_b, budget, **filters) -> list[dict]:
    """Compare the runs in two store files (paths) at ``budget`` = (max_steps, patience).

    One dict per curve (model, m, source) both can read at that budget, in that order: ``model``,
    ``m``, ``source``, ``budget``; ``a`` and ``b`` (``store``, ``protocol_hash``, the run's own
    ``max_steps`` and ``patience``, ``rung``: the curve at ``budget``, as ``store ladder`` reads
    it, and ``ran_on``: its strings counted by what they ran on, finished or kept mid-way,
    :func:`accesslib.results.store.describe_ran_on`); ``strings``: how many strings (length and target) both hold, and of those ``both``
    (crammed in both), ``same_step`` (of those, at the same step in both), ``only_a``, ``only_b``,
    ``neither`` (failed in both) and ``open`` (still open, or unreadable, in either); ``only_in_a``
    / ``only_in_b``: strings one run holds and the other does not; ``n50_diff`` (a's n50 less b's)
    and ``z`` (that difference over the root of the sum of the squared standard errors), None while
    either rung has no n50. ``filters``: model, m, source, as ``store ladder`` takes them.
    ValueError when no curve can be read at ``budget`` in both."""
    if (not isinstance(budget, (tuple, list)) or len(budget) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in budget)):
        fail("budget", "a (max_steps, patience) pair of whole numbers >= 1", budget)
    budget = (int(budget[0]), int(budget[1]))
    paths = [Path(store_a), Path(store_b)]
    if paths[0].resolve() == paths[1].resolve():
        fail("the other store", "a different file from the store", str(store_b))
    sides = [_curves_at(p, budget, filters) for p in paths]
    out = []
    for key in sorted(set(sides[0]) & set(sides[1])):
        a, b = sides[0][key], sides[1][key]
        oa, ob = ({o["key"]: o for o in string_outcomes(c["strings"], c["extends"], c["patience"], *budget)}
                  for c in (a, b))
        common = set(oa) & set(ob)
        counts = dict(both=0, same_step=0, only_a=0, only_b=0, neither=0, open=0)
        for k in common:
            x, y = oa[k]["crammed"], ob[k]["crammed"]
            if not (isinstance(x, bool) and isinstance(y, bool)):
                counts["open"] += 1
            elif x and y:
                counts["both"] += 1
                counts["same_step"] += oa[k]["steps"] == ob[k]["steps"]
            else:
                counts["only_a" if x else "only_b" if y else "neither"] += 1
        ra, rb = a["rung"], b["rung"]
        diff = z = None
        if ra.get("n50") is not None and rb.get("n50") is not None:
            diff = ra["n50"] - rb["n50"]
            se = math.hypot(ra.get("stderr") or 0.0, rb.get("stderr") or 0.0)
            z = diff / se if se > 0 else None
        out.append(dict(model=key[0], m=key[1], source=key[2], budget=budget, a=_side(paths[0], a),
                        b=_side(paths[1], b), strings=len(common), **counts, only_in_a=len(oa) - len(common),
                        only_in_b=len(ob) - len(common), n50_diff=diff, z=z))
    if not out:
        only = [f"{p}: {', '.join(f'{m} m={mm} {s}' for m, mm, s in sorted(side)) or 'none'}"
                for p, side in zip(paths, sides)]
        raise ValueError(f"no curve (model, m, source) can be read at {budget[0]} / {budget[1]} in both stores "
                         f"(curves that can: {'; '.join(only)})")
    return out
