"""Notebook 03: predicted vs measured.

- :class:`PredictedApp`: one model's predicted lines n* = C*m (ball bound, and refined bounds when
  the bundle has them), each labelled where it ends, and one more at the precision a crammed
  memory actually resolves (the measured effective eps), against that model's measured n50 by
  m, the fitted slope, the theory/experiment ratio and the bundle's caveats (step budget
  included); [A]'s published models on a panel of their own, each under its own ball bound;
  eps and r sliders move the lines of the dtype's eps.
- :class:`SweepApp`: launch a small Dask sweep and watch its curves fill in.
"""
from __future__ import annotations

import html
import math
import time

import ipywidgets as W

from accesslib._checks import check_choice
from accesslib.apps.base import App, BackgroundRun, exact_value, human_date, set_exact
from accesslib.apps.nb02_cramming import curve_from_counts, curve_rows
from accesslib.apps.nb05_geometry import bundle_measured_eps, measured_eps_html
from accesslib.apps.policy import app_policy
from accesslib.config import FAST
from accesslib.plots import bounds as plotting
from accesslib.plots import cramming as cram_plots
from accesslib.plots.bounds import MEASURED_SUFFIX
from accesslib.results import bundles, reference
from accesslib.results.bundles import predicted_slopes
from accesslib.theory import bounds

_DESC = {"description_width": "120px"}

#: [A]'s protocol allows at most 3000 optimisation steps per string (docs/paper.md, section 5)
PAPER_MAX_STEPS = 3000
#: a bundle whose slowest successful string used this share of its step budget or more is
#: flagged as likely budget-limited (more steps would have crammed longer strings)
BUDGET_SHARE = 0.75
#: the name of the line at the measured effective eps ends with this (after the bound's name)
#: what a bundle's ``source`` means, in the reader's words
TARGETS = {"natural": "natural-text targets",
           "tokens": "uniform random token ids (each token costs the full ln|V|; harder than "
                     "[A]'s natural text and random words)",
           "words": "random-word targets (common words)",
           "words100k": "random-word targets (SCOWL's 100k words)",
           "glove100k": "random-word targets from [A]'s own list (GloVe's 100k most frequent words)"}


def _short(name):
    return name.split("/")[-1]


def bundle_caveats(bundle) -> dict:
    """What a reader must know before comparing a bundle's slope with [A]'s: the targets, the
    step budget, the strings per length, and whether the slope is limited by the budget.

    Everything comes from the bundle: ``max_steps`` from its settings, strings per length from
    its curves (the range of the totals), ``slowest`` = the most steps a successful example
    string needed. ``budget`` and ``budget_text``: :func:`accesslib.results.bundles.budget_status`
    (n50 re-measured with ``budget_factor`` times the steps: the check's, 3 when there is none).
    ``budget_suspect`` when the budget is below [A]'s and
    ``slowest`` used at least :data:`BUDGET_SHARE` of it. ``budget_limited`` when the check
    moved ("budget-limited"), or when the suspicion stands and no check settled it (not
    checked, inconclusive); a check that converged overrides the suspicion."""
    settings = bundle.get("settings") or {}
    max_steps = settings.get("max_steps")
    lo, hi = _strings_range(bundle)
    wins = [e["steps"] for e in bundle.get("examples") or [] if e.get("success") and e.get("steps") is not None]
    slowest = max(wins) if wins else None
    suspect = bool(max_steps and max_steps < PAPER_MAX_STEPS and slowest is not None
                   and slowest >= BUDGET_SHARE * max_steps)
    label, text = bundles.budget_status(bundle)
    limited = label == "budget-limited" or (suspect and label in ("not checked", "inconclusive"))
    source = bundle.get("source")
    factor = (bundle.get("budget_check") or {}).get("factor") or 3
    return dict(source=source, targets=TARGETS.get(source, f"{source} targets"), max_steps=max_steps,
                strings_min=lo, strings_max=hi,
                slowest=slowest, budget=label, budget_text=text, budget_suspect=suspect, budget_limited=limited,
                budget_factor=factor)


def _rung_point(m: int, rung: dict, label: str):
    """A ladder rung as a point (m, n50, stderr, label): a one-sided n50 (all crammed at its
    longest length, or none at its shortest) at that bound without an error bar, labelled
    "> n" or "< n"; None where it has neither."""
    if rung.get("n50") is not None:
        return int(m), float(rung["n50"]), float(rung.get("stderr") or 0.0), label
    for key, sign in (("n50_above", ">"), ("n50_below", "<")):
        if rung.get(key) is not None:
            return int(m), float(rung[key]), 0.0, f"{label}: {sign} {rung[key]}"
    return None


def ladder_points(bundle) -> list[tuple]:
    """The bundle's n50 at its ladder's m with the other step budgets (its budget ladder, the shipped
    rung left out: it is the measured marker), as (m, n50, stderr, label) in budget order
    (:func:`_rung_point`). [] without a ladder."""
    lad = bundle.get("budget_ladder") or {}
    rungs = sorted(lad.get("rungs") or [], key=lambda r: r["max_steps"])
    points = [_rung_point(lad["m"], r, bundles.rung_budget(r, rungs)) for r in rungs if not r.get("shipped")]
    return [p for p in points if p is not None]


#: a re-measurement's targets in a plot label
SHORT_TARGETS = {"natural": "natural text", "tokens": "random tokens", "words": "common words",
                 "words100k": "SCOWL words", "glove100k": "[A]'s words"}


def _protocol_name(rec) -> str:
    """A bundle's protocol in words: "[A]'s protocol" for "paper", else "the fast protocol"."""
    return "[A]'s protocol" if rec.get("protocol") == "paper" else f"the {rec.get('protocol')} protocol"


#: what names a second sample of the shipped curve among the re-measurements
_AGAIN = " (second run)"


def remeasured_points(bundle) -> list[tuple]:
    """The model's n50 measured again by other runs (the bundle's ``remeasured``,
    :func:`accesslib.results.bundles.add_remeasure`) as (m, n50, stderr, label), from
    :func:`accesslib.results.bundles.remeasure_rungs`, labelled with the run's targets and the budget ("[A]'s words, 3,000 /
    500"; at the largest m of a re-measurement with a slope, the slope too: ": a = 11.4 ± 1.4",
    :func:`remeasured_fits`). The runs of one source and seed (the same strings, other budgets) are taken together, by
    m and then by budget: a rung two runs share (the same budget and n50) is drawn once, and
    budgets with the same n50 and stderr at one m share one marker ("random tokens, 3,000 / 500 =
    9,000 / 500"). A replicate with another seed keeps markers of its own; a second sample of the
    shipped curve (:func:`accesslib.results.bundles.second_samples`) is labelled "(second run)", also
    where the run it was read from has the same rung ("[A]'s words, 3,000 / 500 (second run)")."""
    by_strings = {}   # (source, seed) -> [(m, rung, budget words)], first seen first
    slopes = {}       # (source, seed, largest m, budget words) -> the slope's words
    twins = bundles.second_samples(bundle)
    for rec in bundle.get("remeasured") or []:
        key = (rec.get("source"), rec.get("seed"))
        again = _AGAIN if any(rec is t for t in twins) else ""   # the shipped curve run again
        by_strings.setdefault(key, []).extend((m, r, words + again) for m, r, words in bundles.remeasure_rungs(rec))
        if (fit := _remeasured_fit(rec)) is not None:
            slopes[(*key, fit[1], fit[5])] = fit[6]
    out = []
    for (source, seed), rungs in by_strings.items():
        short = SHORT_TARGETS.get(source, str(source))
        rungs = sorted(rungs, key=lambda t: (t[0], t[1].get("max_steps") or 0, t[1].get("patience") or 0))
        groups = []   # [m, rung, [budget words]]: a larger budget that gave the same n50 joins the last
        for m, r, words in rungs:
            if groups and groups[-1][0] == m and _same_n50(groups[-1][1], r):
                # one budget read from a second run and from the run it was read from: named once,
                # as the second run
                bare = [w.removesuffix(_AGAIN) for w in groups[-1][2]]
                if words.removesuffix(_AGAIN) not in bare:
                    groups[-1][2].append(words)
                elif words.endswith(_AGAIN):
                    groups[-1][2][bare.index(words.removesuffix(_AGAIN))] = words
            else:
                groups.append([m, r, [words]])
        points = [_rung_point(m, r, f"{short}, {' = '.join(words)}"
                              + "".join(f": {slopes[source, seed, m, w]}" for w in words
                                        if (source, seed, m, w) in slopes))
                  for m, r, words in groups]
        out += [p for p in points if p is not None]
    return out


def remeasured_choices(bundle) -> list[tuple[str, str]]:
    """The re-measurements the plot can draw, as (label, value) options: "all", one per targets
    the bundle's re-measurements have, in their order ("[A]'s words only": value its source), and
    "none"; just "all" and "none" for a bundle without any."""
    sources = list(dict.fromkeys(rec.get("source") for rec in bundle.get("remeasured") or []))
    return ([("all", "all")] + [(f"{SHORT_TARGETS.get(s, str(s))} only", s) for s in sources]
            + [("none", "none")])


def remeasured_only(bundle, which: str = "all") -> dict:
    """``bundle`` with only the re-measurements that ``which`` picks (:func:`remeasured_choices`:
    "all", "none" or a source); the bundle itself is not changed."""
    check_choice("which", which, [v for _, v in remeasured_choices(bundle)])
    if which == "all":
        return bundle
    records = bundle.get("remeasured") or []
    return dict(bundle, remeasured=[rec for rec in records if which != "none" and rec.get("source") == which])


def remeasured_fits(bundle) -> list[tuple]:
    """The slope of each re-measurement of the model over two m or more (the bundle's
    ``remeasured`` with a ``slope``) as (m_lo, m_hi, a, b, source, budget words, slope words): the
    line n50 = a·m + b over the m it was fitted on, and what names it ("a = 11.4 ± 1.4"); the
    smaller budget first (:func:`_by_budget`)."""
    return [fit for rec in _by_budget(bundle.get("remeasured") or []) if (fit := _remeasured_fit(rec)) is not None]


def _by_budget(records) -> list:
    """Re-measurements by their step budget, then patience, smallest first (stable: at one budget
    the bundle's order), so that a slope under [A]'s 3000 / 500 is read before one at 9000 / 1500."""
    def budget(rec):
        settings = rec.get("settings") or {}
        return settings.get("max_steps") or 0, settings.get("patience") or 0
    return sorted(records, key=budget)


def _remeasured_fit(rec) -> tuple | None:
    """One re-measurement's slope as :func:`remeasured_fits` gives it; None without one over two m."""
    sl = rec.get("slope") or {}
    ms = [c["m"] for c in rec.get("curves") or [] if c.get("n50") is not None]
    if sl.get("slope") is None or len(set(ms)) < 2:
        return None
    settings, se = rec.get("settings") or {}, sl.get("slope_stderr")
    return (min(ms), max(ms), float(sl["slope"]), float(sl.get("intercept") or 0.0), rec.get("source"),
            bundles.budget_words(settings.get("max_steps"), settings.get("patience")),
            f"a = {sl['slope']:.1f}" + ("" if se is None else f" ± {se:.1f}"))


def _same_n50(a: dict, b: dict) -> bool:
    """Whether two rungs give the same n50: the same value and stderr, or the same one-sided bound,
    to 1e-9 relative (the same strings' fit read on two machines differs in its last digits)."""
    def same(x, y):
        if x is None or y is None:
            return x is y
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return all(same(a.get(k), b.get(k)) for k in ("n50", "stderr", "n50_above", "n50_below"))


def remeasured_html(bundle, ball: float | None = None) -> str:
    """The re-measurements of the model (:func:`remeasured_points`): a summary line with each slope
    fitted over two m or more (its targets and budget, C/a with ``ball``, the ball bound's C at the
    sliders' ε and r, and its budget label), then, folded, one line per re-measurement: its
    protocol and targets, strings per length, its n50 by m (and by step budget where it has a
    ladder), its slope, its budget label, and where its whole bundle is. "" without any."""
    records = bundle.get("remeasured") or []
    if not records:
        return ""
    slopes = []
    for rec in _by_budget(records):
        if (fit := _remeasured_fit(rec)) is None:
            continue
        se = (rec.get("slope") or {}).get("slope_stderr")
        notes = ([f"C/a {ball / fit[2]:.1f}×"] if ball else []) + [html.escape(bundles.budget_status(rec)[0])]
        slopes.append(f"<b>a = {fit[2]:.2f}{'' if se is None else f' ± {se:.2f}'}</b> on "
                      f"{html.escape(SHORT_TARGETS.get(fit[4], str(fit[4])))} at {fit[5]}, m = {fit[0]}..{fit[1]}"
                      f" ({', '.join(notes)})")
    twins = bundles.second_samples(bundle)
    head = (f"<b>Re-measured</b> {len(records)} time{'s' if len(records) > 1 else ''} under other protocols, "
            "targets or step budgets" + (", or again under the same ones" if twins else "")
            + " (the orange squares" + (", their slopes the dashed lines): " if slopes else ")."))
    return (head + " · ".join(slopes)
            + f"<details><summary>each re-measurement</summary>{_remeasured_lines(records, ball, twins)}</details>")


def _remeasured_lines(records, ball, twins=()) -> str:
    """The folded lines of :func:`remeasured_html`, one per record; a second sample (``twins``:
    the same strings, protocol and budget run again) is named one."""
    lines = []
    for rec in records:
        again = (" (the same strings, protocol and budget as the shipped curve: a second run of it, whose "
                 "budget check counts for the shipped curve too)" if any(rec is t for t in twins) else "")
        settings = rec.get("settings") or {}
        label = bundles.budget_status(rec)[0]
        ladder = bundles.ladder_text(rec, own="the run's")
        lad_m = (rec.get("budget_ladder") or {}).get("m") if ladder else None
        per_m = "; ".join(f"m = {m}: {bundles.rung_n50_text(r)}" for m, r, _ in bundles.remeasure_rungs(rec) if m != lad_m)
        sl, se = ((rec.get("slope") or {}).get(k) for k in ("slope", "slope_stderr"))
        rf = rec.get("read_from") or {}
        lines.append(
            f"<b>Re-measured</b> under {html.escape(_protocol_name(rec))} with "
            f"{html.escape(TARGETS.get(rec.get('source'), str(rec.get('source')) + ' targets'))}, budget "
            f"{bundles.budget_words(settings.get('max_steps'), settings.get('patience'))} (steps / patience"
            + (f", read from the strings of a run with {bundles.budget_words(rf.get('max_steps'), rf.get('patience'))}"
               if rf else "") + "), "
            f"{_strings_text(*_strings_range(rec))} strings per length{again}: "
            + (html.escape(ladder) + " " if ladder else "")
            + (f"{html.escape(per_m)}. " if per_m else "")
            + (f"Slope a = {sl:.2f}{'' if se is None else f' ± {se:.2f}'}"
               + (f", ball bound C/a = <b>{ball / sl:.1f}×</b>" if ball else "") + ". " if sl else "")
            + f"Step budget: <b>{html.escape(label)}</b>. Made {human_date(rec.get('created'))}; "
            f"its whole bundle: {html.escape(str(rec.get('origin')))}.")
    return "<br>".join(lines)


def _strings_range(bundle) -> tuple:
    """(fewest, most) strings per length over the bundle's curves; (None, None) without any."""
    totals = [t for c in bundle.get("curves") or [] for t in c.get("totals") or []]
    return (min(totals), max(totals)) if totals else (None, None)


def _strings_text(lo, hi) -> str:
    """Strings per length as a range: "16", "4-32", or "?"."""
    return "?" if lo is None else f"{lo}" if lo == hi else f"{lo}-{hi}"


def caveats_html(cav) -> str:
    """The caveats of :func:`bundle_caveats` as short HTML lines."""
    strings = _strings_text(cav["strings_min"], cav["strings_max"])
    steps = "?" if cav["max_steps"] is None else f"{cav['max_steps']:,}"
    lines = [f"targets: {html.escape(cav['targets'])}",
             f"at most {steps} optimisation steps per string ([A]: up to {PAPER_MAX_STEPS:,})",
             f"{strings} strings per length, one attempt each ([A]: 20)",
             f"step budget ×{cav.get('budget_factor', 3)}: <b>{html.escape(cav['budget'])}</b>. "
             f"{html.escape(cav['budget_text'])}"]
    if cav["budget"] == "budget-limited":
        lines.append("<b>budget-limited</b>: its n50, a and C/a depend on the step budget: do not set C/a "
                     "against [A]'s 5-20×.")
    elif cav["budget_limited"]:   # suspected from the protocol, not settled by a check
        lines.append(f"<b>likely budget-limited</b>: a successful string needed {cav['slowest']} of its {steps} "
                     "steps, so its slope is likely limited by the step budget (longer strings may have "
                     "failed for lack of steps). Its a is a lower bound and C/a an upper bound: do not set "
                     "it against [A]'s 5-20×.")
    return "<br>".join(lines)


def published_html(match, bundle) -> str:
    """[A]'s measurement of the bundle's own model (:func:`accesslib.results.reference.published_match`)
    beside this bundle's: their slope (and their n50 where they published it) against ours, the
    targets compared, and the protocol differences that stay; "" when [A] did not measure it."""
    if match is None:
        return ""
    head = f"<b>[A] measured this model</b> ({html.escape(match['model'])}"
    if match["dataset"] is None:
        return f"{head}) on natural text and random words: {html.escape(match['targets'])}, nothing to set beside."
    curves = {c["m"]: c for c in bundle.get("curves") or [] if c.get("n50") is not None}
    theirs = match["points"] or {}
    per_m = []
    for m in sorted(set(curves) | set(theirs)):
        ours = (f"{curves[m]['n50']:.1f} ± {curves[m].get('n50_stderr') or float('nan'):.1f} here"
                if m in curves else "not measured here")
        per_m.append(f"m = {m}: {ours}" + (f", {theirs[m]} [A]" if m in theirs else ""))
    sl = bundle.get("slope") or {}
    a = sl.get("slope")
    one = bundles.single_point(bundle)
    if a and match["slope"]:
        ours_a = f"a = {a:.2f} ± {sl.get('slope_stderr') or float('nan'):.2f} (×{a / match['slope']:.2f} theirs)"
    elif one and match["slope"]:   # their line at that m, read as through the origin (no intercept published)
        ours_a = (f"no slope (one m); n50 at m = {one[0]} is ×{one[1] / (one[0] * match['slope']):.2f} their "
                  f"slope × m = {one[0] * match['slope']:.1f} (their line taken through 0)")
    else:
        ours_a = "no slope (one m)"
    settings = bundle.get("settings") or {}
    steps = settings.get("max_steps")
    dtype = (bundle.get("facts") or {}).get("dtype", "?")
    strings = _strings_text(*_strings_range(bundle))
    protocol = (f"here {html.escape(str(bundle.get('protocol')))} protocol, at most "
                f"{'?' if steps is None else f'{steps:,}'} steps, {strings} strings per length, "
                f"{html.escape(str(dtype))} on a CPU; [A]: at most {PAPER_MAX_STEPS:,} steps, 20 strings per length, "
                "fp16 autocast on a GPU")
    return (f"{head}, {match['dataset']}): slope <b>{match['slope']:.2f}</b> tokens/vector"
            + ("" if theirs else ", n50 per m not published") + f". Here: {ours_a}.<br>"
            + " · ".join(per_m) + f".<br>{html.escape(match['targets'][:1].upper() + match['targets'][1:])}; {protocol}.")


class PredictedApp(App):
    """One model's bounds n* = C*m (lines, labelled where they end) against its own measured n50
    by m (markers with error bars); [A]'s published models on a panel of their own, each under
    its own ball bound. Linear axes unless "log y"; the bundle's caveats beside its numbers."""

    figsize = (10.4, 4.3)
    export_name = "nb03-predicted"
    #: the two panels' positions [left, bottom, width, height], with and without [A]'s panel
    # left margin: a four-digit tick label and the axis label (n up to a few thousand) stay inside
    POS_BOTH = ([0.072, 0.12, 0.508, 0.8], [0.68, 0.12, 0.3, 0.8])
    POS_ALONE = [0.072, 0.12, 0.908, 0.8]

    def __init__(self, *, model=None, canvas="auto", published=True, map_where="below"):
        super().__init__(canvas=canvas)
        from accesslib.models import embedded

        #: where the readout's pointer says the budget map is ("below" in 03; "in notebook 03" elsewhere)
        self.map_where = map_where

        names = bundles.available("cram")
        if not names:
            raise ValueError("no precomputed cramming bundle is installed; run scripts/make_bundles.py")
        model = model if model in names else (embedded.DEFAULT if embedded.DEFAULT in names else names[0])
        self.model = W.Dropdown(options=names, value=model, description="model", style=_DESC,
                                layout=W.Layout(width="300px"))
        self.r = W.FloatLogSlider(value=1.0, base=10, min=-2, max=3, step=0.001, description="r (support)",
                                  readout_format=".3g", style=_DESC, layout=W.Layout(width="420px"))
        self.eps_rel = W.FloatLogSlider(value=2.0**-11, base=10, min=-8, max=-0.5, step=0.001,
                                        description="ε / r", readout_format=".3g", style=_DESC,
                                        layout=W.Layout(width="420px"))
        self.show_published = W.Checkbox(value=published, description="[A]'s models (right panel)",
                                         indent=False, layout=W.Layout(width="210px"))
        self.log_y = W.Checkbox(value=False, description="log y axis", indent=False,
                                layout=W.Layout(width="110px"))
        # which re-measurements the left panel draws (their squares, labels and dashed slopes): one
        # targets' runs alone read more easily than all of them; shown only for a model that has any
        self.remeasured_shown = W.Dropdown(options=[("all", "all")], value="all", description="re-measured",
                                           style=_DESC, layout=W.Layout(width="250px"))
        self.controls.children = [W.HBox([self.model, self.show_published, self.log_y, self.remeasured_shown],
                                         layout=W.Layout(flex_flow="row wrap")),
                                  W.HBox([self.r, self.eps_rel], layout=W.Layout(flex_flow="row wrap"))]
        ax, ax_pub = self.fig.add_axes(self.POS_BOTH[0]), self.fig.add_axes(self.POS_BOTH[1])
        self.art = plotting.plot_model_bounds(ax, m_max=5)
        self.published = {}
        for p in reference.n50_points():
            self.published.setdefault(p["model"], {})[p["dataset"]] = (p["m"], p["n50"])
        self.art_pub = plotting.plot_published_models(
            ax_pub, {_short(name): series for name, series in self.published.items()}, m_max=5)
        set_exact(self.eps_rel, 2.0**-11)   # the browser's snapped echo keeps [A]'s exact 2^-11
        self.model.observe(self._on_model, names="value")
        for w in (self.r, self.eps_rel, self.show_published, self.log_y, self.remeasured_shown):
            w.observe(self.refresh, names="value")
        self._on_model()

    def _on_model(self, *_):
        self.bundle = bundles.load("cram", self.model.value)
        self.published_match = reference.published_match(self.bundle["model"], self.bundle.get("source"))
        self.measured_eps = bundle_measured_eps(self.bundle)
        geo = self.bundle.get("geometry") or {}
        options = remeasured_choices(self.bundle)
        with self.hold():
            if geo.get("r_inf"):
                set_exact(self.r, geo["r_inf"])   # exactly r_inf, whatever grid the browser snaps to
            keep = self.remeasured_shown.value if self.remeasured_shown.value in [v for _, v in options] else "all"
            self.remeasured_shown.options = options
            self.remeasured_shown.value = keep
            self.remeasured_shown.layout.display = None if len(options) > 2 else "none"

    def published_slopes(self, eps_rel):
        """The ball bound C of each of [A]'s models with published n50 points, at ε = r·eps_rel
        (C then depends on d, |V| and eps_rel only)."""
        out = {}
        for name in self.published:
            row = reference.model(name)
            out[_short(name)] = bounds.slope(row["d"], row["vocab_size"], eps_rel, 1.0)
        return out

    def _layout(self):
        both = self.show_published.value
        self.art_pub["ax"].set_visible(both)
        self.art["ax"].set_position(self.POS_BOTH[0] if both else self.POS_ALONE)

    def update(self):
        b = self.bundle
        r = float(exact_value(self.r))
        eps_rel = float(exact_value(self.eps_rel))
        eps = r * eps_rel
        slopes = predicted_slopes(b, eps, r)
        me = self.measured_eps
        curves = [c for c in b["curves"] if c.get("n50") is not None]
        ms = [c["m"] for c in curves]
        n50 = [c["n50"] for c in curves]
        se = [c.get("n50_stderr") or 0.0 for c in curves]
        sl = b.get("slope") or {}
        a = sl.get("slope")
        log = bool(self.log_y.value)
        self._layout()
        facts = b["facts"]
        drawn = dict(slopes)
        if me.get("ok"):
            drawn[me["line"] + MEASURED_SUFFIX] = me["C"]
        for k in [k for k in self.art["bounds"] if k.endswith(MEASURED_SUFFIX) and k not in drawn]:
            self.art["bounds"].pop(k).remove()   # another model's measured-eps line
        plotting.update_model_bounds(
            self.art, drawn, ms, n50, se, fit=(a, sl.get("intercept") or 0.0) if a else None, log=log,
            title=f"{b['model']} (d = {facts['d']}, |V| = {facts['vocab_size']:,}): its bounds and its n50")
        self.ladder_points = ladder_points(b)
        plotting.update_ladder(self.art, self.ladder_points)
        shown = remeasured_only(b, self.remeasured_shown.value)
        self.remeasured_points = remeasured_points(shown)
        plotting.update_ladder(self.art, self.remeasured_points, "remeasured")
        self.remeasured_fits = remeasured_fits(shown)
        plotting.update_remeasured_fits(self.art, [f[:4] for f in self.remeasured_fits])
        pub = self.published_slopes(eps_rel)
        if self.show_published.value:
            plotting.update_published_models(self.art_pub, pub, log=log)
        self.caveats = bundle_caveats(b)
        self.values = dict(slopes=slopes, measured_slope=a, eps=eps, r=r, published_slopes=pub,
                           measured=dict(m=ms, n50=n50, n50_stderr=se), fit=dict(sl), caveats=self.caveats,
                           measured_eps=me, published_match=self.published_match)
        self.readout.value = self._readout(slopes, a, sl, eps, r) + map_pointer_html(b, where=self.map_where)
        self.set_status(f"bundle: {b['samples']} strings per length, protocol {b['protocol']}, "
                        f"{b['hardware'].get('cpu', '?')}, {b['wall_time']:.0f} s, made {human_date(b['created'])}")
        self.redraw()

    def _readout(self, slopes, a, sl, eps, r):
        """The numbers (measured a, every C with C/a) and, beside them, the bundle's caveats."""
        one = bundles.single_point(self.bundle)   # one m only: n* = C·m against its n50, in place of C/a

        def ratio(C):
            if a and a > 0:
                return f" ({C / a:.1f}×)"
            return f" ({C * one[0] / one[1]:.1f}×)" if one else ""

        ratios = " &nbsp;·&nbsp; ".join(f"{html.escape(name)} {C:,.1f}{ratio(C)}"
                                        for name, C in slopes.items() if C is not None)
        me = self.values["measured_eps"]
        budget = f"step budget ×{self.caveats.get('budget_factor', 3)}: <b>{html.escape(self.caveats['budget'])}</b>"
        if a:
            fit = (f"measured a = <b>{a:.2f} ± {sl.get('slope_stderr') or float('nan'):.2f}</b> tokens/vector "
                   f"(fitted slope, R² = {sl.get('r2') or float('nan'):.3f}; {budget}); ball bound C = "
                   f"<b>{slopes['ball']:,.1f}</b>, ratio C/a = <b>{slopes['ball'] / a:.1f}×</b>")
            head = "C in tokens/vector (C/a)"
        elif one:
            m1, n1, se1 = one
            fit = (f"one m only, no slope to fit: measured n50 = <b>{n1:.1f} ± {se1:.1f}</b> at m = {m1} "
                   f"({budget}); the ball bound there is n* = {m1}·C = <b>{m1 * slopes['ball']:,.1f}</b>, "
                   f"ratio n*/n50 = <b>{m1 * slopes['ball'] / n1:.1f}×</b>")
            head = f"C in tokens/vector (n*/n50 at m = {m1})"
        else:
            fit, head = f"no slope fit in this bundle ({budget})", "C in tokens/vector"
        eps_line = measured_eps_html(me)
        if one and me.get("ok"):
            eps_line += f" (n*/n50 at m = {one[0]}: <b>{me['C'] * one[0] / one[1]:.1f}×</b>)"
        return ("<div style='display:flex;flex-wrap:wrap;gap:2px 28px;align-items:flex-start;font-size:92%;"
                "line-height:1.4'>"
                f"<div style='max-width:620px'>{fit}<br>{head} at ε = {eps:.3g}, r = {r:.3g}:"
                f"<br>{ratios}<br>{eps_line}"
                + (" (the dotted line, fixed: it does not follow the sliders)" if me.get("ok") else "") + "</div>"
                "<div style='max-width:560px'><b>About this measurement:</b><br>"
                f"{caveats_html(self.caveats)}</div>"
                + (f"<div style='max-width:1200px'>{again}</div>" if (again := remeasured_html(self.bundle, slopes["ball"])) else "")
                + (f"<div style='max-width:1200px'>{pub}</div>" if (pub := published_html(self.published_match, self.bundle))
                   else "") + "</div>")

    def data_rows(self) -> list[dict]:
        """Measured n50 ± stderr by m (the markers), the fitted slope a with the budget check's
        label, the predicted slope C of every bound at the sliders' ε and r with C/a (the lines),
        every bound at the measured effective ε (one of them drawn), the model in every row; the
        bundle's n50 by step budget (its budget ladder: the hollow markers); then the ball bound of
        each of [A]'s models on the right panel at the same ε/r; the model's n50 re-measured by
        other runs (the hollow squares, :func:`remeasured_points`) and the slope of each that has
        one (the dashed lines, :func:`remeasured_fits`)."""
        v, model = self.values, self.bundle["model"]
        meas = v["measured"]
        rows = [dict(panel="measured n50", model=model, m=m, n50=y, n50_stderr=e)
                for m, y, e in zip(meas["m"], meas["n50"], meas["n50_stderr"])]
        a = v["measured_slope"]
        cav = v["caveats"]
        if a:
            rows.append(dict(panel="measured slope", model=model, slope=a, slope_stderr=v["fit"].get("slope_stderr"),
                             intercept=v["fit"].get("intercept"), r2=v["fit"].get("r2"), budget=cav["budget"],
                             budget_text=cav["budget_text"]))
        one = bundles.single_point(self.bundle)
        rows += [dict(panel="predicted slope", model=model, bound=name, C=C, eps=v["eps"], r=v["r"],
                      C_over_a=C / a if a and a > 0 and C else None,
                      **({"n_star_over_n50": C * one[0] / one[1], "at_m": one[0]} if one and C else {}))
                 for name, C in v["slopes"].items()]
        me = v["measured_eps"]
        if me.get("ok"):   # the dotted line (drawn = True) and the other bounds at the same measured ε
            rows += [dict(panel="predicted slope at the measured ε", model=model, bound=name, C=C,
                          drawn=name == me["line"], eps_rel=me["eps_rel"], eps=me["eps"], r=me["r"],
                          around=me["around"], C_over_a=me["ratios"].get(name)) for name, C in me["slopes"].items()]
        rows += [dict(panel="[A]'s model: ball bound", model=name, bound="ball", C=C)
                 for name, C in v["published_slopes"].items()]
        lad = self.bundle.get("budget_ladder") or {}
        rows += [dict(panel="n50 by step budget", model=model, m=lad["m"], max_steps=r["max_steps"],
                      patience=r["patience"], n50=r.get("n50"), n50_stderr=r.get("stderr"),
                      n50_above=r.get("n50_above"), n50_below=r.get("n50_below"), shipped=bool(r.get("shipped")),
                      read_from_steps=r.get("derived_from"), read_from_patience=r.get("derived_patience_from"),
                      compared_with=r.get("compared_with"),
                      moved=r.get("moved")) for r in lad.get("rungs") or []]
        rows += [dict(panel="n50 re-measured", model=model, m=m, n50=y, n50_stderr=e, label=label)
                 for m, y, e, label in self.remeasured_points]
        rows += [dict(panel="re-measured slope", model=model, m_from=lo, m_to=hi, slope=a, intercept=b, source=src,
                      budget=budget, label=text) for lo, hi, a, b, src, budget, text in self.remeasured_fits]
        pm = v["published_match"]
        if pm is not None and pm["dataset"] is not None:   # [A]'s measurement of this very model
            rows.append(dict(panel="[A]'s measurement of this model", model=pm["model"], dataset=pm["dataset"],
                             slope=pm["slope"], targets=pm["targets"], source=pm["source"]))
            rows += [dict(panel="[A]'s measurement of this model", model=pm["model"], dataset=pm["dataset"],
                          m=m, n50=n50, source=pm["source"]) for m, n50 in (pm["points"] or {}).items()]
        return rows


def default_sweep(fast: bool = FAST) -> dict:
    """A small sweep of the default model: m = 1, 2 on a fixed grid of lengths (natural text),
    stored in ``sweeps.sqlite`` next to the default results store."""
    from accesslib.models import embedded
    from accesslib.results.store import default_path

    return dict(name="notebook-sweep", models=[embedded.DEFAULT], m=[1, 2], source="natural",
                samples=2 if fast else 8, seeds=[0], lengths=[2, 4] if fast else [4, 6, 8, 10, 12, 16, 20],
                engine=dict(protocol="fast", max_steps=30 if fast else 1000),
                store=str(default_path("sweeps.sqlite")), torch_threads=1)


class SweepApp(App):
    """Run a sweep (accesslib.experiments.sweep) on a Dask LocalCluster from the page: progress, dashboard
    link, and the accessibility curves read from the results store after every job.

    The sweep runs in its own thread (:func:`accesslib.experiments.sweep.start_sweep`); the app's
    :class:`~accesslib.apps.base.BackgroundRun` watches it, so Run, Stop, the final status and
    :meth:`wait` work as in every other app."""

    figsize = (7.5, 3.4)
    export_name = "nb03-sweep"
    #: after Stop, the page waits at most this long (seconds) for the sweep to end before it
    #: turns idle again (the cluster then closes in the background)
    STOP_GRACE_S = 20.0

    def __init__(self, *, spec=None, scheduler=None, policy=None, canvas="auto", fast=FAST):
        super().__init__(canvas=canvas)
        from accesslib.experiments.sweep import load_spec

        self.policy = policy or app_policy()  # a bad ACCESSLIB_PUBLIC: shown, every run refused
        self.spec = load_spec(spec if spec is not None else default_sweep(fast))
        self.scheduler = scheduler
        self.run = None          # the SweepRun of the last launch
        self.closing = False     # True when the page turned idle before the last sweep had ended
        self._stopped_at = None
        self._final_status = ""
        self.curves = {}
        self.run_button = W.Button(description="Launch sweep", button_style="success", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=max(1, len(self.spec.jobs())), description="jobs",
                                      style=_DESC, layout=W.Layout(width="360px"))
        self.runner = BackgroundRun(self, run_buttons=[self.run_button], progress=self.progress,
                                    name="accesslib-sweep-watch",
                                    stop_message="stopping: running jobs keep the strings they finished ...")
        self.stop_button = self.runner.stop_button
        self.controls.children = [
            W.HTML(f"<span style='font-size:90%'>sweep: models {html.escape(', '.join(map(str, self.spec.model_labels)))}; "
                   f"m = {html.escape(str(self.spec.m))}; lengths {html.escape(str(self.spec.lengths))}; "
                   f"{html.escape(str(self.spec.samples))} strings each; "
                   f"store {html.escape(str(self.spec.store_path()))}</span>"),
            W.HBox([self.run_button, self.stop_button, self.progress])]
        ax = self.fig.add_subplot(1, 1, 1)
        self.fig.subplots_adjust(left=0.1, right=0.97, bottom=0.16, top=0.88)
        self.art = cram_plots.plot_accessibility(ax)
        self.run_button.on_click(lambda _: self.guard(self.start))
        self.refresh()
        if self.policy.error is not None:
            self.show_error(self.policy.error)

    def start(self):
        if self.policy.error is not None:
            raise ValueError(self.policy.error)
        if self.policy.public:
            raise ValueError("sweeps start worker processes: they are switched off on this public server")
        self.runner.start(self._work, on_done=self._done)

    def _work(self, job):
        from accesslib.experiments.sweep import start_sweep

        self.run = None
        self.closing = False
        self._stopped_at = None
        self.set_status("starting the Dask cluster ...")
        run = self.run = start_sweep(self.spec, on_job_done=lambda res: self.guard(self.update),
                                     scheduler=self.scheduler, progress=False)
        job.on_stop(self._note_stop)
        job.on_stop(run.stop)   # Stop reaches the sweep's own stop flag
        # Wait for the sweep; after Stop, for the running jobs to hand back what they have (the
        # sweep gives them a few seconds) but at most STOP_GRACE_S: closing the Dask cluster may
        # take longer, and the page must not stay busy meanwhile.
        try:
            while run.running:
                if self._stopped_at is not None and time.monotonic() - self._stopped_at > self.STOP_GRACE_S:
                    self.closing = True
                    return None
                run.wait(0.25)
            run.wait()
        except Exception as e:   # the sweep's own error, raised again by wait
            raise ValueError(f"the sweep failed: {e}") from None
        return None

    def _note_stop(self):
        self._stopped_at = time.monotonic()

    def _done(self, outcome):
        self.guard(self.update)
        if self.run is None:
            return None
        done, total = self.run.progress
        link = self.run.dashboard_link
        closing = "; the Dask cluster is still closing in the background" if self.closing else ""
        summary = f"{done}/{total} jobs" + (f"; Dask dashboard: {link}" if link and not self.closing else "") + closing
        self._final_status = f"{outcome}: {summary}"   # what BackgroundRun shows next
        return summary

    def data_rows(self) -> list[dict]:
        """The sweep's accessibility counts per (m, n) from the results store, with n50."""
        return curve_rows(self.curves, **getattr(self, "shown", {}))

    def update(self):
        from accesslib.experiments.sweep import sweep_curves

        counts = self.run.curves() if self.run is not None else sweep_curves(self.spec)
        model = self.spec.model_labels[0]
        curves = {m: curve_from_counts(c) for (mod, m), c in counts.items() if mod == model and c}
        self.curves = curves
        self.shown = dict(model=model, source=self.spec.source)
        cram_plots.update_accessibility(self.art, curves)
        self.readout.value = " &nbsp;·&nbsp; ".join(
            f"m={m}: n50 = {c['n50']:.1f}" for m, c in sorted(curves.items()) if math.isfinite(c["n50"]))
        if self.run is not None:
            done, total = self.run.progress
            self.runner.set_progress(done, total)
            if self.run.running and self.is_running and not self.stop_requested:
                link = self.run.dashboard_link
                self.set_status(f"running: {done}/{total} jobs" + (f"; Dask dashboard: {link}" if link else ""))
                if self.stop_requested or not self.is_running:
                    # Stop (or the end) came while this job's update ran: its status wins
                    self._restore_status()
        self.redraw()

    def _restore_status(self):
        if self.is_running:
            self.set_status(self.runner.stop_message)
        elif self._final_status:
            self.set_status(self._final_status)


def optimiser_words(settings: dict) -> str:
    """A run's optimiser in words: "[A]'s optimiser (AdamW, lr 0.01, betas 0.9 / 0.9, no schedule)"
    where it is [A]'s, else its learning rate and schedule."""
    from accesslib.engine.cramming import PROTOCOLS

    paper = PROTOCOLS["paper"]
    lr, sched = settings.get("lr"), settings.get("schedule")
    same = (lr == paper["lr"] and list(settings.get("betas") or []) == list(paper["betas"])
            and settings.get("weight_decay") == paper["weight_decay"] and sched == paper.get("schedule"))
    if same:
        return "[A]'s optimiser (AdamW, lr 0.01, betas 0.9 / 0.9, no schedule)"
    return f"AdamW, lr {lr}" + (f", schedule {sched}" if sched else ", no schedule")


def map_pointer_html(bundle, where="below") -> str:
    """One line under the readout where the model's bundle keeps budget maps: which targets, and
    that the map (``where``: "below" in 03, "in notebook 03" where the app is shown elsewhere) says
    which knob of the budget limits its n50; "" without maps."""
    maps = bundle.get("budget_maps") or []
    if not maps:
        return ""
    sources = list(dict.fromkeys(SHORT_TARGETS.get(mp["source"], mp["source"]) for mp in maps))
    runs = sorted({tuple(mp["run"]) for mp in maps})
    return ("<div style='margin-top:4px'>Which knob of the step budget limits these n50, the steps or the "
            f"patience: the <b>budget map</b> {html.escape(where)} reads {html.escape(' and '.join(sources))} at every step "
            f"budget and patience of the {' and '.join(f'{s:,} / {p:,}' for s, p in runs)} "
            f"run{'s' if len({mp['source'] for mp in maps}) > 1 else ''}.</div>")


def budget_map_models() -> list[str]:
    """The models whose shipped bundle keeps a budget map (:func:`accesslib.results.bundles.add_budget_map`)."""
    return [n for n in bundles.available("cram") if bundles.load("cram", n).get("budget_maps")]


class BudgetMapApp(App):
    """Which knob of the step budget limits a measured n50: one run's n50 over step budgets and
    patiences (a bundle's ``budget_maps``, read from the run's strings), as lines (n50 against the
    steps, one per patience) and as a table coloured by n50; [A]'s 3000 / 500 ringed. The readout
    says, per patience, from which step budget n50 stops moving, and how it grows with patience."""

    figsize = (10.5, 4.3)
    export_name = "nb03-budget-map"
    #: the budget ringed on both panels: [A]'s protocol
    MARK = (PAPER_MAX_STEPS, 500)
    #: the map shown first (the notebook's text reads it): two kinds of targets, m = 1..3
    DEFAULT_MODEL = "smollm2-135m"

    def __init__(self, *, model=None, canvas="auto"):
        super().__init__(canvas=canvas)
        names = budget_map_models()
        if not names:
            raise ValueError("no shipped cramming bundle keeps a budget map; add one with scripts/make_bundles.py "
                             "--add-budget-map MODEL --store RUN.sqlite --map-steps ... --map-patience ...")
        first = model if model in names else self.DEFAULT_MODEL if self.DEFAULT_MODEL in names else names[0]
        self.model = W.Dropdown(options=names, value=first, description="model",
                                style=_DESC, layout=W.Layout(width="300px"))
        self.source = W.Dropdown(description="targets", style={"description_width": "60px"},
                                 layout=W.Layout(width="260px"))
        # the label outside the buttons: a ToggleButtons description sits above them
        self.m = W.ToggleButtons(style={"button_width": "44px"}, tooltips=[])
        self.controls.children = [W.HBox([self.model, self.source, W.Label("m", layout=W.Layout(margin="0 6px 0 16px")),
                                          self.m],
                                         layout=W.Layout(flex_flow="row wrap", align_items="center"))]
        self.ax_lines, self.ax_grid = self.fig.add_subplot(1, 2, 1), self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.07, right=0.98, bottom=0.2, top=0.87, wspace=0.28)
        self.model.observe(self._on_model, names="value")
        self.source.observe(self._on_source, names="value")
        self.m.observe(self.refresh, names="value")
        self._on_model()

    def _maps(self):
        return self.bundle.get("budget_maps") or []

    def _on_model(self, *_):
        self.bundle = bundles.load("cram", self.model.value)
        sources = list(dict.fromkeys(mp["source"] for mp in self._maps()))
        with self.hold():
            self.source.options = [(SHORT_TARGETS.get(s, s), s) for s in sources]
            self.source.value = sources[0]
        self._on_source()

    def _on_source(self, *_):
        ms = sorted({int(mp["m"]) for mp in self._maps() if mp["source"] == self.source.value})
        with self.hold():
            keep = self.m.value if self.m.value in ms else ms[0]
            self.m.options = [(str(m), m) for m in ms]
            self.m.value = keep
        self.refresh()

    def current_map(self) -> dict:
        """The map shown: the selected model, targets and m."""
        return next(mp for mp in self._maps() if mp["source"] == self.source.value and int(mp["m"]) == self.m.value)

    def update(self):
        mp = self.current_map()
        cram_plots.draw_budget_map(self.ax_lines, self.ax_grid, mp, bundles.map_texts(mp), mark=self.MARK)
        s0, p0 = mp["run"]
        kept = (f"; {mp['kept']} still being crammed (steps {mp['kept_steps'][0]:,} to {mp['kept_steps'][1]:,}) "
                f"when this map was read, {human_date(mp['created'], time=True)}" if mp["kept"] else "")
        lines = bundles.budget_map_lines(mp, self.MARK)   # one line per patience first, then the rest
        from accesslib.experiments.bundling import map_slopes

        def ul(items):
            return ("<ul style='margin:2px 0 0 0;padding-left:18px'>"
                    + "".join(f"<li>{html.escape(t)}</li>" for t in items) + "</ul>")

        same = [m for m in self._maps() if m["source"] == mp["source"] and m["protocol_hash"] == mp["protocol_hash"]]
        slopes = [line for run in map_slopes(same)
                  for line in bundles.map_slope_lines(run, sorted({self.MARK[0], s0} & set(mp["steps"])))]
        self.readout.value = (
            f"<div><b>{html.escape(mp['model'])}</b>, m = {mp['m']}, {html.escape(TARGETS.get(mp['source'], mp['source']))}"
            f"; {html.escape(optimiser_words(mp.get('settings') or {}))}; every cell read from the same "
            f"run of {s0:,} steps with patience {p0:,}: {mp['finished']} strings finished{html.escape(kept)}. "
            f"A patience of P ends a string after P steps without a gain in teacher-forced accuracy.</div>"
            + ul(lines[len(mp["patiences"]):] + slopes)
            + "<details><summary style='cursor:pointer'>per patience: from which step budget n50 stops moving"
              "</summary>" + ul(lines[:len(mp["patiences"])]) + "</details>")
        self.values = dict(map=mp, lines=lines, slopes=slopes)
        self.redraw()

    def data_rows(self) -> list[dict]:
        """Every cell of the map shown: steps, patience, n50 (decided) with its stderr, the least n50
        open strings can end at, and the counts per length."""
        mp = self.values["map"]
        rows = []
        for s, row in zip(mp["steps"], mp["cells"]):
            for p, c in zip(mp["patiences"], row):
                rg = (c or {}).get("range") or {}
                rows.append(dict(model=mp["model"], m=mp["m"], source=mp["source"], max_steps=s, patience=p,
                                 n50=(c or {}).get("n50"), stderr=(c or {}).get("stderr"),
                                 n50_at_least=rg.get("low"), open_strings=sum((c or {}).get("open") or []),
                                 lengths=" ".join(map(str, mp["lengths"])),
                                 crammed=" ".join(map(str, (c or {}).get("successes") or [])),
                                 totals=" ".join(map(str, mp["totals"])), read=mp.get("created")))
        return rows
