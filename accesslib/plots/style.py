"""One place for the colours and styles of every figure and app, and small generic plot helpers.

One visual language everywhere (CONTRIBUTING.md, "Widgets and plots"): predicted quantities are
*lines*, measured or published ones *markers* (with error bars when an uncertainty is known), in
the colours of :data:`COLORS`; counts are shown as log10. Every hex colour of ``accesslib.plots``
and ``accesslib.apps`` is defined here (the apps' HTML parts use :data:`UI_COLORS`).

The helpers (:func:`fmt_power10`, :func:`nice_ceil`, :func:`sticky_limit`, :func:`animated`,
:func:`set_errorbar`) serve every ``plot_x`` / ``update_x`` pair of the plots modules.
"""
from __future__ import annotations

import math

import numpy as np

#: Shared colours. Predicted = lines, measured/published = markers, same colour per dataset.
COLORS = {
    "predicted": "#1f4e9c",   # bounds (theory): deep blue lines
    "threshold": "#c0392b",   # n* = C*m marker lines
    "pg19": "#e07b00",        # natural text (PG19) measurements: orange
    "random": "#2a9d48",      # random-word strings: green
    "measured": "#6a3d9a",    # measurements made here (other apps)
    "paper_rule": "#e08214",  # the same measurement under [A]'s rule, next to ours
    "reference": "#7f7f7f",   # context lines (e.g. 10^80 atoms, chance level)
    "current": "#000000",     # "you are here" marker
}

#: Shared line/marker styles.
STYLE = {
    "line": dict(lw=2.2),
    "refline": dict(lw=1.0, ls=":", color=COLORS["reference"]),
    "threshold": dict(lw=1.4, ls="--", color=COLORS["threshold"]),
    "marker": dict(marker="o", ms=7, ls="none", mec="white", mew=0.8, capsize=3),
    "fit": dict(lw=1.2, ls="-."),
    "textbox": dict(boxstyle="round", fc="white", ec="0.8", alpha=0.9),
    "font": 10,
}

#: one colour per m (1, 2, 3, ...), reused by every cramming panel
M_COLORS = ["#6a3d9a", "#e07b00", "#2a9d48", "#c0392b", "#1f77b4", "#8c564b", "#e377c2", "#17becf"]

#: one colour per step budget of a ladder, smallest first (light to dark: more steps, darker)
BUDGET_COLORS = ["#9ecae1", "#4292c6", "#08519c", "#08306b", "#3f007d"]

#: one line style per refined bound (predicted lines)
BOUND_STYLES = {"ball": "-", "box": "--", "ellipsoid": "-.", "cone": ":", "cells": (0, (5, 1, 1, 1))}

#: a bound drawn at a measured precision (notebook 03's "..., measured ε" line): set apart from
#: the slider-driven bounds by a fine dotted, heavier line (its colour stays the bound's own)
MEASURED_BOUND_STYLE = dict(ls=(0, (1, 1.2)), lw=2.8)

#: one colour per refined bound: shades of the predicted blue, told apart further by their line
#: style and the label at each line's end (notebook 03)
BOUND_COLORS = {"ball": "#1f4e9c", "box": "#2b8cbe", "ellipsoid": "#0c7c7a", "cone": "#5e6fa8",
                "cells": "#08306b"}

#: one colour per token of the 2-D toy decoder (cells, rows)
TOKEN_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948", "#76b7b2",
                "#ff9da7", "#9c755f", "#bab0ac"]

#: colours of the apps' HTML: error area, status line, notes, result marks
UI_COLORS = {
    "error_text": "#8a1c1c",
    "error_background": "#fdecea",
    "error_border": "#f5c2c0",
    "muted": "#555555",       # status line and notes
    "success": "#2a9d48",     # a string crammed / reproduced
    "failure": "#c0392b",
    "warning": "#b35900",
    "link": "#1f4e9c",        # download links (the toolbar under each figure)
}


def m_color(m: int) -> str:
    """The colour of m memory vectors (m = 1, 2, ...), the same in every cramming panel."""
    return M_COLORS[(int(m) - 1) % len(M_COLORS)]


def budget_color(i: int, k: int) -> str:
    """The colour of the ``i``-th of ``k`` step budgets of a ladder (smallest first): the largest
    is always the darkest."""
    return BUDGET_COLORS[len(BUDGET_COLORS) - k + i] if k <= len(BUDGET_COLORS) else BUDGET_COLORS[min(i, len(BUDGET_COLORS) - 1)]


def token_color(t: int) -> str:
    """The colour of token ``t`` of the 2-D toy decoder."""
    return TOKEN_COLORS[int(t) % len(TOKEN_COLORS)]


def dataset_color(dataset):
    """Colour of a dataset name ('PG19', 'Random', anything else -> measured)."""
    return COLORS.get(str(dataset).lower(), COLORS["measured"])


# ---------------------------------------------------------------------------------------------
# formatting and axis limits
# ---------------------------------------------------------------------------------------------

def fmt_power10(log10_value, digits=4):
    """'10^2,774' style text for a log10 count (mathtext), without ever forming the number."""
    if not math.isfinite(log10_value):
        return "?"
    if log10_value < 6:
        return f"{10.0 ** log10_value:,.{max(0, digits - 1)}g}".replace("e+0", "e")
    return rf"$10^{{{log10_value:.0f}}}$"


_NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_ceil(x):
    """Smallest 'round' number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of 10) >= x."""
    if x <= 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(x))
    return next(k * p for k in _NICE if k * p >= x * (1 - 1e-12))


def sticky_limit(current, needed, *, headroom=1.1, keep_down_to=0.3):
    """An axis limit that changes rarely, so that most updates keep the same ticks.

    Keep ``current`` while ``needed`` fits in it and still fills at least ``keep_down_to`` of
    it; otherwise jump to a round number above ``needed * headroom``. Stable axes let an app
    repaint only the moving artists (blitting), which is what keeps a slider under 50 ms.
    """
    needed = float(needed)
    if current is not None and needed <= current and needed >= keep_down_to * current:
        return current
    return nice_ceil(max(needed, 1e-9) * headroom)


# ---------------------------------------------------------------------------------------------
# artists
# ---------------------------------------------------------------------------------------------

def animated(artists):
    """The artists of one panel that change on every update (drawn over a cached background).

    ``artists``: a ``plot_x`` dict with ``ax`` and ``dynamic`` (the keys of the moving artists);
    ``legend_dynamic`` adds the axis legend.
    """
    keys = artists.get("dynamic", ())
    out = [artists[k] for k in keys if artists.get(k) is not None]
    leg = artists["ax"].get_legend()
    if artists.get("legend_dynamic") and leg is not None:
        out.append(leg)
    return out


def bound_color(name) -> str:
    """Colour of a refined bound's line (ball, box, ellipsoid, cone, cells; others: predicted)."""
    return BOUND_COLORS.get(str(name), COLORS["predicted"])


def spread_positions(ys, gap, *, low=0.0, high=1.0):
    """Positions near ``ys`` (same order) at least ``gap`` apart, inside [low, high] when they fit.

    For labels placed at the ends of lines (axes fractions): the order of the lines is kept,
    a label moves only as far as its neighbours push it; equal ys keep their given order. NaN
    stays NaN.
    """
    ys = np.asarray(ys, dtype=float)
    out = ys.copy()
    idx = [i for i in np.argsort(ys, kind="stable") if np.isfinite(ys[i])]   # ties keep their order
    if not idx:
        return out
    pos = [max(float(ys[i]), low) for i in idx]
    for k in range(1, len(pos)):                    # push up from the bottom
        pos[k] = max(pos[k], pos[k - 1] + gap)
    pos[-1] = min(pos[-1], high)
    for k in range(len(pos) - 2, -1, -1):           # then down from the top
        pos[k] = min(pos[k], pos[k + 1] - gap)
    for i, p in zip(idx, pos):
        out[i] = p
    return out


def set_errorbar(container, x, y, yerr):
    """Move an errorbar container (line, caps, bars) of ``ax.errorbar`` to new data in place."""
    line, caps, (bars,) = container.lines[0], container.lines[1], container.lines[2]
    x, y, yerr = (np.asarray(v, float) for v in (x, y, yerr))
    line.set_data(x, y)
    bars.set_segments([np.array([[xi, yi - ei], [xi, yi + ei]]) for xi, yi, ei in zip(x, y, yerr)])
    if caps:
        caps[0].set_data(x, y - yerr)
        caps[1].set_data(x, y + yerr)
