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
