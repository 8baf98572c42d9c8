"""Matplotlib drawing for notebook 04, "what sets the slope?" (docs/paper.md, sections 4 and 6).

Same pattern as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once and returns a dict
of artists, ``update_x(artists, ...)`` moves them in place. Two panels of the measured slope a
(markers with error bars) next to the predicted C (line) against one model property (d, or
ln|V|), and one panel of the ratio C/a against d/ln|V| with its mean.
"""
from __future__ import annotations

import math

from matplotlib.ticker import NullFormatter, ScalarFormatter

from accesslib.plots.style import COLORS, STYLE, set_errorbar


def plot_slope_against(ax, *, xlabel, title):
    """Measured slope a (markers, error bars) and predicted C (line) against one property."""
    a = ax.errorbar([], [], yerr=[], color=COLORS["measured"], label="measured slope a", **STYLE["marker"])
    (C,) = ax.plot([], [], color=COLORS["predicted"], marker="_", ms=14, mew=2, lw=2, label="predicted C")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("tokens per vector (log)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=STYLE["font"])
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7.5, loc="best")
    return dict(ax=ax, a=a, C=C)


def update_slope_against(art, x, slope, slope_stderr, C):
    """Move the markers to (x, slope +- slope_stderr) and the line to (x, C); a missing C (None or
    0) draws no point there, a missing stderr no bar.

    The x range gets 10% padding, the y range a factor 2 either side of every value shown.
    """
    err = [e or 0.0 for e in slope_stderr]
    set_errorbar(art["a"], x, slope, err)
    art["C"].set_data(x, [c if c else float("nan") for c in C])
    ax = art["ax"]
    if len(x):
        pad = (max(x) - min(x)) * 0.1 or 1.0
        ax.set_xlim(min(x) - pad, max(x) + pad)
    vals = [v for v in list(slope) + list(C) if v]
    if vals:
        ax.set_ylim(min(vals) / 2, max(vals) * 2)
    return art


def plot_ratio(ax):
    """C/a (theory over experiment) against d/ln|V|: one marker per model, its mean as a line."""
    (points,) = ax.plot([], [], ls="none", marker="o", color=COLORS["measured"])
    mean = ax.axhline(float("nan"), **STYLE["refline"])
    ax.set_xlabel("d / ln|V|")
    ax.set_ylabel("C / a (theory / experiment)")
    ax.set_title("is the ratio constant?", fontsize=STYLE["font"])
    return dict(ax=ax, points=points, mean=mean, labels=[])


def update_ratio(art, x, ratio, names, mean):
    """Move the markers to (x, ratio) (None or 0: not shown), label each with its name, the line
    to ``mean``."""
    y = [float(r) if r else float("nan") for r in ratio]
    art["points"].set_data(x, y)
    art["mean"].set_ydata([mean, mean])
    ax = art["ax"]
    for t in art["labels"]:
        t.remove()
    # names of points in the right quarter go to their left: nothing is cut at the panel's edge
    right = 0.75 * max(x) if len(x) else 0.0
    art["labels"] = [ax.annotate(name, (xi, yi), fontsize=7, xytext=(-3, 3) if xi > right else (3, 3),
                                 ha="right" if xi > right else "left", textcoords="offset points")
                     for name, xi, yi in zip(names, x, y) if math.isfinite(yi)]
    good = [v for v in y if math.isfinite(v)]
    if good:
        ax.set_xlim(0, max(x) * 1.15)
        ax.set_ylim(0, max(good) * 1.3)
    return art
