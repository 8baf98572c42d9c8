"""Matplotlib drawing for the cramming apps (02-04): loss, accessibility curves, n50 vs m.

Same pattern and visual language as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once
and returns artists, ``update_x(artists, ...)`` moves them in place. Predicted = lines,
measured = markers with error bars; one colour per m (:func:`accesslib.plots.style.m_color`)
across panels.
"""
from __future__ import annotations

import math

import numpy as np

from accesslib.plots.style import BOUND_STYLES, COLORS, STYLE, m_color, set_errorbar
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
# predicted n* = C*m lines against measured n50 by m (log y: the bound is far above)
# ---------------------------------------------------------------------------------------------
def plot_n50_vs_m(ax, m_max=5):
    ax.set_yscale("log")
    ax.set_xlabel("m (memory vectors)")
    ax.set_ylabel("tokens (log scale)")
    ax.set_xlim(0.5, m_max + 0.5)
    ax.set_xticks(range(1, m_max + 1))
    art = dict(ax=ax, m_max=m_max, bounds={}, published={})
    eb = ax.errorbar([], [], yerr=[], color=COLORS["measured"], label="measured n50 (this project)",
                     zorder=5, **STYLE["marker"])
    (fit,) = ax.plot([], [], color=COLORS["measured"], **STYLE["fit"], label="fitted slope")
    art["measured"], art["fit"] = eb, fit
    art["text"] = ax.text(1.01, 0.0, "", transform=ax.transAxes, va="bottom", ha="left", fontsize=7.5,
                          family="monospace", bbox=STYLE["textbox"])
    return art


def update_bound_lines(art, slopes: dict):
    """``slopes``: {bound name: C or None}; a line n = C*m per bound, in place."""
    ax = art["ax"]
    ms = np.linspace(0.5, art["m_max"] + 0.5, 41)   # m > 0: the y axis is logarithmic
    for name, C in slopes.items():
        if name not in art["bounds"]:
            (line,) = ax.plot([], [], color=COLORS["predicted"], ls=BOUND_STYLES.get(name, "-"),
                              lw=2.0 if name == "ball" else 1.5, label=f"n* = C·m ({name} bound)")
            art["bounds"][name] = line
            _outside_legend(ax)
        if C is None or not math.isfinite(C):
            art["bounds"][name].set_data([], [])
        else:
            art["bounds"][name].set_data(ms, C * ms)


def update_measured(art, ms, n50s, stderrs, slope=None, intercept=None):
    ms, n50s = np.asarray(ms, float), np.asarray(n50s, float)
    se = np.nan_to_num(np.asarray(stderrs, float), nan=0.0)
    set_errorbar(art["measured"], ms, n50s, se)
    if slope is not None:
        xs = np.linspace(0.5, art["m_max"] + 0.5, 20)
        art["fit"].set_data(xs, np.maximum(slope * xs + intercept, 1e-3))
    else:
        art["fit"].set_data([], [])


def plot_published(art, datasets):
    """``datasets``: {label: (ms, n50s, color, marker)} published points as faint markers (drawn once)."""
    ax = art["ax"]
    for label, (ms, n50s, color, marker) in datasets.items():
        (pts,) = ax.plot(ms, n50s, ls="none", marker=marker, ms=5, color=color, alpha=0.5, label=label)
        art["published"][label] = pts
    _outside_legend(ax)


def _outside_legend(ax):
    """Legend to the right of the axes (the plot area is full of lines and points)."""
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def set_y_range(art, values):
    v = np.asarray([x for x in values if x is not None and math.isfinite(x) and x > 0], float)
    if v.size:
        art["ax"].set_ylim(max(0.5, v.min() / 2), v.max() * 2)
