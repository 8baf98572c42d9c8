"""Matplotlib drawing for notebook 06, the copy task (docs/paper.md, section 7).

Same pattern as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once and returns a dict
of artists, ``update_x(artists, ...)`` moves them in place. (a) the training loss against the
step, with the chance level; (b) exact-string accuracy against copy length, greedy generation
(small filled dots, binomial error bars) and teacher-forced (large hollow squares beneath, so
both stay visible where they coincide), the training lengths shaded.
"""
from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from accesslib.plots.style import COLORS, STYLE
from accesslib.theory.stats import binomial_stderr


def plot_training_loss(ax, *, chance, chance_label):
    """Training loss against step (log y), with the loss of a uniform guess ``chance``."""
    (line,) = ax.plot([], [], color=COLORS["measured"], lw=1.4, label="training loss")
    ax.axhline(chance, **STYLE["refline"])
    ax.text(0.98, chance, chance_label, ha="right", va="bottom", fontsize=8, color=COLORS["reference"],
            transform=ax.get_yaxis_transform())
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss on the copied part (nats/token)")
    ax.set_title("(a) training", fontsize=STYLE["font"], loc="left")
    return dict(ax=ax, line=line, chance=float(chance))


def update_training_loss(art, steps, losses):
    """Move the loss curve; the axes follow the data (and keep the chance level in view)."""
    art["line"].set_data(steps, losses)
    if len(steps):
        lo, hi = float(np.min(losses)), float(np.max(losses))
        art["ax"].set_xlim(0, max(10, steps[-1] * 1.05))
        art["ax"].set_ylim(max(1e-4, lo * 0.7), max(hi, art["chance"]) * 1.3)
    return art


#: marker sizes (points): the hollow teacher-forced square encloses the greedy dot
TF_MARKER_SIZE = 9.0
GREEDY_MARKER_SIZE = 4.5


def plot_copy_accuracy(ax, train_range=(5, 50)):
    """Exact-string accuracy against copy length (log x): greedy and teacher-forced; the
    training lengths ``train_range`` shaded, 10% marked."""
    shade = ax.axvspan(*train_range, color=COLORS["predicted"], alpha=0.10, lw=0, label="training lengths")
    ax.axhline(0.1, lw=0.8, ls=":", color=COLORS["reference"])
    err = LineCollection([], colors=COLORS["pg19"], lw=1.0)
    ax.add_collection(err)
    # the two series often coincide (exact-string success is the same event under both, up to
    # rounding): teacher-forced as large hollow squares underneath, greedy as small filled dots
    # on top, so each stays visible where they agree
    (tf,) = ax.plot([], [], "s--", color=COLORS["random"], ms=TF_MARKER_SIZE, mfc="none", mew=1.4, lw=0.8,
                    zorder=2, label="teacher-forced (all argmax)")
    (greedy,) = ax.plot([], [], "o-", color=COLORS["pg19"], ms=GREEDY_MARKER_SIZE, mec="white", mew=0.6,
                        lw=0.8, zorder=3, label="greedy generation")
    ax.set_xscale("log")
    ax.set_ylim(-0.04, 1.04)
    ax.set_xlim(4, 500)
    ax.set_xlabel("copy length (letters)")
    ax.set_ylabel("exact-string accuracy")
    ax.set_title("(b) accuracy vs length", fontsize=STYLE["font"], loc="left")
    ax.legend(handles=[greedy, tf, shade], loc="lower left", fontsize=8, frameon=False)
    return dict(ax=ax, shade=shade, err=err, greedy=greedy, teacher_forced=tf)


def update_copy_accuracy(art, lengths, greedy, teacher_forced, n, train_range):
    """Move both accuracy series (None: not measured), the greedy error bars (binomial, ``n``
    strings per length) and the shaded training range."""
    lengths = np.asarray(lengths, dtype=float)
    g = np.array([np.nan if x is None else x for x in greedy], dtype=float)
    t = np.array([np.nan if x is None else x for x in teacher_forced], dtype=float)
    art["greedy"].set_data(lengths, g)
    art["teacher_forced"].set_data(lengths, t)
    se = binomial_stderr(np.nan_to_num(g) * n, n)
    art["err"].set_segments([[(L, a - s), (L, a + s)] for L, a, s in zip(lengths, g, se) if np.isfinite(a)])
    _set_span(art["shade"], *train_range)
    if len(lengths):
        art["ax"].set_xlim(min(4, lengths.min() * 0.8), max(100, lengths.max() * 1.25))
    return art


def _set_span(span, lo, hi):
    """Move an ``axvspan`` to [lo, hi] (a Rectangle in matplotlib >= 3.9, a Polygon before)."""
    if hasattr(span, "set_width"):
        span.set_x(lo)
        span.set_width(hi - lo)
    else:
        (_, y0), (_, y1) = span.get_xy()[:2]
        span.set_xy([[lo, y0], [lo, y1], [hi, y1], [hi, y0], [lo, y0]])
