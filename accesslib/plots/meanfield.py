"""Matplotlib drawing for notebook 08, "unbounded context" (docs/paper.md, section 2, last paragraph).

Same pattern as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once and returns a dict
of artists, ``update_x(artists, ...)`` moves them in place. (a) The last token's output, its d
coordinates, for a context and for a changed one; (b) as the context grows, the distance of the
output from the mean-field output and of the context's measure from p (drawn once).
"""
from __future__ import annotations

import numpy as np

from accesslib.plots.style import COLORS, STYLE


def plot_query_outputs(ax, d):
    """The ``d`` coordinates of the last token's output: original context (line), changed
    context (open markers)."""
    x = np.arange(d)
    (original,) = ax.plot(x, np.zeros(d), "-", color=COLORS["predicted"], lw=1.6, label="original context")
    (changed,) = ax.plot(x, np.zeros(d), "o", color=COLORS["pg19"], ms=6, mfc="none", mew=1.5,
                         label="changed context")
    ax.set_xlabel("coordinate of the last token's output")
    ax.set_ylabel("value")
    ax.set_ylim(-3.5, 3.5)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    return dict(ax=ax, original=original, changed=changed)


def update_query_outputs(art, original, changed, max_diff):
    """Show both outputs; the title gives their largest difference ``max_diff``."""
    art["original"].set_ydata(original)
    art["changed"].set_ydata(changed)
    same = "the same" if max_diff < 1e-9 else "different"
    art["ax"].set_title(f"(a) max |difference| = {max_diff:.2g}: {same}", fontsize=STYLE["font"], loc="left")
    return art


def plot_convergence_to_measure(ax, lengths, out_dist, tv):
    """Against the context length N (log-log): the distance of the output from the mean-field
    output (mean +- sd over repeats, markers with error bars) and the total-variation distance
    of the context's empirical measure from p. ``out_dist``, ``tv``: [len(lengths), repeats]."""
    out_dist, tv = np.asarray(out_dist, dtype=float), np.asarray(tv, dtype=float)
    dist = ax.errorbar(lengths, out_dist.mean(1), yerr=out_dist.std(1), color=COLORS["measured"],
                       label="|output(N) − mean-field output at p|", **STYLE["marker"])
    (tv_pts,) = ax.plot(lengths, tv.mean(1), "s", color=COLORS["random"], mfc="none",
                        label="distance of μ_N from p (TV)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context length N (tokens drawn from p)")
    ax.set_title("(b) long contexts converge to a measure", fontsize=STYLE["font"], loc="left")
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    return dict(ax=ax, distance=dist, tv=tv_pts)
