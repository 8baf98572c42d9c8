"""Matplotlib drawing for the cramming apps (02-04): loss, accessibility curves, n50 vs m.

Same pattern and visual language as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once
and returns artists, ``update_x(artists, ...)`` moves them in place. Predicted = lines,
measured = markers with error bars; one colour per m (:func:`accesslib.plots.style.m_color`)
across panels.
"""
from __future__ import annotations

import math

import numpy as np

from accesslib.plots.style import COLORS, STYLE, budget_color, m_color, set_errorbar
from accesslib.theory.stats import binomial_stderr


# ---------------------------------------------------------------------------------------------
# live loss
# ---------------------------------------------------------------------------------------------
def plot_loss(ax):
    (line,) = ax.plot([], [], color=COLORS["measured"], lw=1.2, label="mean loss of active strings")
    (best,) = ax.plot([], [], color=COLORS["predicted"], lw=1.0, ls="--", label="best loss (median)")
    ax.set_yscale("log")
    ax.set_xlabel("optimisation step (all lengths, all m)")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title("live loss", fontsize=STYLE["font"])
    ax.legend(fontsize=8, loc="upper right")
    ax.set_xlim(0, 10)
    ax.set_ylim(1e-3, 10)
    hint = ax.text(0.5, 0.5, "press Run: the loss of the strings\nbeing crammed appears here",
                   transform=ax.transAxes, ha="center", va="center", fontsize=8.5, color=COLORS["reference"])
    return dict(ax=ax, line=line, best=best, hint=hint)


def update_loss(art, steps, losses, best):
    art["line"].set_data(steps, losses)
    art["best"].set_data(steps, best)
    ax = art["ax"]
    art["hint"].set_visible(not len(steps))
    if len(steps):
        ax.set_xlim(0, max(10, steps[-1] * 1.05))
        vals = np.asarray([v for v in list(losses) + list(best) if v > 0 and math.isfinite(v)])
        if vals.size:
            ax.set_ylim(max(1e-4, vals.min() / 2), max(1.0, vals.max() * 2))


# ---------------------------------------------------------------------------------------------
# accessibility curves: success fraction vs n, one colour per m, logistic fit as a line
# ---------------------------------------------------------------------------------------------
def plot_accessibility(ax):
    ax.set_xlabel("target length n (tokens)")
    ax.set_ylabel("fraction of strings crammed")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(0, 10)
    ax.axhline(0.5, **STYLE["refline"])
    ax.set_title(ACCESSIBILITY_TITLE, fontsize=STYLE["font"])
    return dict(ax=ax, series={})


ACCESSIBILITY_TITLE = "accessibility curve (markers: measured; lines: logistic fit)"


def set_accessibility_note(art, text):
    """Title the curve panel with ``text`` (e.g. "shipped curve, not your run" and the conditions
    it was measured under, in short lines); "" restores the usual title."""
    if text:
        art["ax"].set_title(text, fontsize=8, loc="center")
    else:
        art["ax"].set_title(ACCESSIBILITY_TITLE, fontsize=STYLE["font"])


def update_accessibility(art, curves):
    """``curves``: {m: dict(lengths, successes, totals, fit=(n50, k) or None)}; draws in place."""
    ax = art["ax"]
    xmax = 10.0
    gone = [m for m in art["series"] if m not in curves]
    for m in gone:   # a curve no longer shown (other settings, or the shipped one replaced)
        ser = art["series"].pop(m)
        for a in (ser["eb"], ser["fit"], ser["n50"]):
            a.remove()
    if gone:
        if art["series"]:
            ax.legend(fontsize=8, loc="upper right")
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    for m in sorted(curves):
        c = curves[m]
        n = np.asarray(c["lengths"], float)
        if n.size == 0:
            continue
        s, t = np.asarray(c["successes"], float), np.asarray(c["totals"], float)
        frac = s / np.maximum(t, 1)
        err = binomial_stderr(s, t)
        xmax = max(xmax, float(n.max()) * 1.1)
        if m not in art["series"]:
            col = m_color(m)
            eb = ax.errorbar(n, frac, yerr=err, color=col, label=f"m = {m}",
                             **{k: v for k, v in STYLE["marker"].items()})
            (fit,) = ax.plot([], [], color=col, **STYLE["fit"])
            n50 = ax.axvline(np.nan, color=col, lw=0.8, ls=":")
            art["series"][m] = dict(eb=eb, fit=fit, n50=n50)
            ax.legend(fontsize=8, loc="upper right")
        ser = art["series"][m]
        set_errorbar(ser["eb"], n, frac, err)
        fit = c.get("fit")
        if fit is not None and all(math.isfinite(v) for v in fit):
            x0, k = fit
            xs = np.linspace(0, max(xmax, x0 * 1.5), 200)
            ser["fit"].set_data(xs, 1 / (1 + np.exp(-k * (xs - x0))))
            ser["n50"].set_xdata([x0, x0])
        else:
            ser["fit"].set_data([], [])
            ser["n50"].set_xdata([np.nan, np.nan])
    ax.set_xlim(0, xmax)


# ---------------------------------------------------------------------------------------------
# a budget ladder read from a run: the curve as each step budget would have measured it
# ---------------------------------------------------------------------------------------------
def rung_label(rung) -> str:
    """A ladder rung's budget in a legend: "9,000 steps, patience 1,500 (the run)"."""
    return f"{rung['max_steps']:,} steps, patience {rung['patience']:,}" + (" (the run)" if rung.get("own") else "")


def plot_ladder(ax, curve, labels=None):
    """One curve of :func:`accesslib.experiments.bundling.live_ladder` on ``ax``: per step budget
    (light to dark: more steps) the fraction crammed at each length, markers with binomial error
    bars; strings still being crammed drawn as a thin bar up to where they would put the fraction
    if all of them crammed (a hollow marker at its top); a dotted line at each decided n50.
    ``labels``: one legend entry per rung (default: its budget; the command line adds its n50)."""
    rungs = curve["rungs"]
    if labels is None:
        labels = [rung_label(r) for r in rungs]
    k = len(rungs)
    spread = 0.012 * (max(curve["rungs"][0]["lengths"]) - min(curve["rungs"][0]["lengths"]) + 1)
    for i, r in enumerate(rungs):
        col = budget_color(i, k)
        n = np.asarray(r["lengths"], float) + (i - (k - 1) / 2) * spread   # side by side at each n
        s, t = np.asarray(r["successes"], float), np.maximum(np.asarray(r["totals"], float), 1)
        o = np.asarray(r.get("open") or [0] * len(s), float)
        ax.errorbar(n, s / t, yerr=binomial_stderr(s, t), color=col, label=labels[i],
                    **{kk: v for kk, v in STYLE["marker"].items()})
        up = o > 0
        if up.any():
            ax.vlines(n[up], (s / t)[up], ((s + o) / t)[up], color=col, lw=1.0, ls="--")
            ax.plot(n[up], ((s + o) / t)[up], ls="none", marker="o", ms=6, mfc="white", mec=col, mew=1.2)
        if r.get("n50") is not None:
            ax.axvline(r["n50"], color=col, lw=0.9, ls=":")
    ax.axhline(0.5, **STYLE["refline"])
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("target length n (tokens)")
    ax.set_ylabel("fraction of strings crammed")
    kept = f"; {curve['kept']} still being crammed" if curve.get("kept") else ""
    ax.set_title(f"{curve['model']}, m = {curve['m']}, {curve['source']} ({curve['finished']} strings "
                 f"finished{kept})", fontsize=STYLE["font"])
    # below the axes, where it hides no marker; the note on open strings closes it
    if any(any(r.get("open") or []) for r in rungs):
        ax.plot([], [], ls="--", marker="o", ms=6, mfc="white", mec=COLORS["reference"], color=COLORS["reference"],
                lw=1.0, label="strings still being crammed: where they would put each length if all of them crammed")
    handles, texts = ax.get_legend_handles_labels()
    order = sorted(range(len(texts)), key=lambda j: texts[j].startswith("strings still"))   # the note last
    ax.legend([handles[j] for j in order], [texts[j] for j in order], fontsize=7.5, loc="upper left",
              bbox_to_anchor=(0.0, -0.16), frameon=False)


# ---------------------------------------------------------------------------------------------
# a budget map read from a run: n50 over step budgets x patiences (which knob limits n50)
# ---------------------------------------------------------------------------------------------
def _cell_point(cell):
    """(n50, stderr, is_lower_bound) of a budget map cell for the lines panel, or None: a decided
    n50, or the least n50 its open strings can end at (a lower bound)."""
    if cell is None:
        return None
    if cell.get("n50") is not None:
        return cell["n50"], cell.get("stderr") or 0.0, False
    rg = cell.get("range")
    if "range" in cell and rg and rg.get("low") is not None and not rg.get("below"):
        return rg["low"], 0.0, True
    return None


def draw_budget_map(ax_lines, ax_grid, mp, texts, mark=None):
    """A :func:`accesslib.experiments.bundling.budget_map` map on two axes, cleared first (its
    grid differs from map to map). ``ax_lines``: n50 against the step budget (log axis), one line
    per patience (light to dark: larger patience); a hollow marker with an arrow up where strings
    are still open (the least n50 they can end at). ``ax_grid``: the same cells as a table
    coloured by n50, open cells hatched, each cell reading its entry of ``texts`` (one row per step
    budget: :func:`accesslib.results.bundles.map_texts`). ``mark`` (steps, patience): a budget
    ringed on both (e.g. [A]'s 3000 / 500)."""
    steps, pats, cells = mp["steps"], mp["patiences"], mp["cells"]
    points = [[_cell_point(c) for c in row] for row in cells]
    at = (steps.index(mark[0]), pats.index(mark[1])) if mark is not None and mark[0] in steps and mark[1] in pats \
        else None   # the ringed cell (row, column)
    ax_lines.clear()
    ax_grid.clear()
    k = len(pats)
    for j, p in enumerate(pats):
        col = budget_color(j, k)
        pts = [(s, row[j]) for s, row in zip(steps, points)]
        pts = [(s, q) for s, q in pts if q is not None]
        if not pts:
            continue
        nudge = 1.035 ** (j - (k - 1) / 2)   # side by side at each step budget
        pts = [(s * nudge, q) for s, q in pts]
        ys = [q[0] for _, q in pts]
        ax_lines.plot([s for s, _ in pts], ys, color=col, lw=1.2, label=f"patience {p:,}")
        firm = [(s, q) for s, q in pts if not q[2]]
        if firm:
            ax_lines.errorbar([s for s, _ in firm], [q[0] for _, q in firm], yerr=[q[1] for _, q in firm],
                              color=col, **STYLE["marker"])
        low = [(s, q) for s, q in pts if q[2]]
        if low:
            ax_lines.plot([s for s, _ in low], [q[0] for _, q in low], ls="none", marker="o", ms=7, mfc="white",
                          mec=col, mew=1.3)
            ax_lines.plot([s for s, _ in low], [q[0] for _, q in low], ls="none", marker=r"$\uparrow$", ms=11,
                          color=col, transform=ax_lines.transData + _lift(ax_lines, 11))
    ax_lines.set_xscale("log")
    tops = [q[0] + q[1] for row in points for q in row if q is not None]
    if tops:   # room above for the arrows of open strings
        lo, hi = ax_lines.get_ylim()
        ax_lines.set_ylim(lo, max(hi, max(tops) + 0.22 * (max(tops) - lo)))
    ax_lines.set_xticks(steps)
    ax_lines.set_xticklabels([f"{s:,}" for s in steps], rotation=45, ha="right", fontsize=8)
    ax_lines.minorticks_off()
    ax_lines.set_xlabel("step budget (steps)")
    ax_lines.set_ylabel("n50 (tokens)")
    ax_lines.set_title("n50 against the step budget, one line per patience", fontsize=STYLE["font"])
    if any(q is not None and q[2] for row in points for q in row):
        ax_lines.plot([], [], ls="none", marker="o", ms=7, mfc="white", mec=COLORS["reference"],
                      label="strings still open: n50 at least")
    if at is not None:
        q = points[at[0]][at[1]]
        if q is not None:
            ax_lines.plot([mark[0]], [q[0]], ls="none", marker="o", ms=15, mfc="none", mec=COLORS["current"],
                          mew=1.2, label=f"{mark[0]:,} / {mark[1]:,} ([A]'s)")
    ax_lines.legend(fontsize=7.5, loc="best", frameon=False)

    vals = np.array([[c["n50"] if c is not None and c.get("n50") is not None else np.nan for c in row]
                     for row in cells], float)
    shown = np.ma.masked_invalid(vals)
    ax_grid.imshow(shown, origin="lower", cmap="Blues", aspect="auto",
                   vmin=np.nanmin(vals) * 0.8 if np.isfinite(vals).any() else 0,
                   vmax=np.nanmax(vals) * 1.25 if np.isfinite(vals).any() else 1)
    hi = np.nanmax(vals) if np.isfinite(vals).any() else 0
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            text = texts[i][j]
            dark = c is not None and c.get("n50") is not None and c["n50"] > 0.55 * hi + 0.45 * np.nanmin(vals)
            if c is None or c.get("n50") is None:   # no decided n50: hatched
                ax_grid.add_patch(_cell_box(j, i, fill=False, hatch="///", ec="0.8", lw=0))
            ax_grid.text(j, i + (0.12 if c and c.get("cut") else 0), text, ha="center", va="center", fontsize=8,
                         color="white" if dark else "black")
            if c and c.get("cut"):   # strings this step cap stopped while they were still gaining
                ax_grid.text(j, i - 0.24, f"{c['cut']}{'+' if c.get('cut_unknown') else ''} cut", ha="center",
                             va="center", fontsize=6.5, color="white" if dark else COLORS["reference"])
    if at is not None:
        ax_grid.add_patch(_cell_box(at[1], at[0], fill=False, ec=COLORS["current"], lw=2.0))
    ax_grid.set_xticks(range(len(pats)))
    ax_grid.set_xticklabels([f"{p:,}" for p in pats], fontsize=8)
    ax_grid.set_yticks(range(len(steps)))
    ax_grid.set_yticklabels([f"{s:,}" for s in steps], fontsize=8)
    ax_grid.set_xlabel("patience (steps without progress)")
    ax_grid.set_ylabel("step budget")
    ax_grid.set_title("n50 at each budget (≥: strings still open; cut: stopped\nby the step cap while still "
                      "gaining accuracy)", fontsize=STYLE["font"] - 1)


def _lift(ax, points):
    """A transform that moves a marker ``points`` up (the arrow above a lower bound)."""
    import matplotlib.transforms as mtransforms

    return mtransforms.ScaledTranslation(0, points / 72, ax.figure.dpi_scale_trans)


def _cell_box(j, i, **style):
    """The square of a budget map cell (column ``j``, row ``i``), drawn with ``style``."""
    import matplotlib.patches as mpatches

    return mpatches.Rectangle((j - 0.5, i - 0.5), 1, 1, **style)
