"""Matplotlib drawing for notebook 09, "beyond transformers": two twins on the same axes.

Same pattern as :mod:`accesslib.plots.cramming`: ``plot_x(ax)`` draws once and returns a dict
of artists, ``update_x(artists, ...)`` moves them in place. One colour per twin
(:data:`TWIN_COLORS`, from the shared palette), one marker per twin; measured = markers,
fitted = lines, the cap the final norm allows = a dotted line in the twin's colour.

* :func:`plot_twin_curves` - both twins' accessibility curves (success fraction against n),
  the m of each curve written at its 50% point (above for the transformer, below for the Mamba);
* :func:`plot_twin_n50` - n50 against m with each twin's fitted line a*m + b;
* :func:`plot_radius` - the radius of the hidden states against context length (log-log), the
  trained context as a vertical line.
"""
from __future__ import annotations

import math

import numpy as np

from accesslib.plots.style import COLORS, M_COLORS, STYLE
from accesslib.theory.stats import binomial_stderr

#: one colour per architecture (config model_type), from the shared palette
TWIN_COLORS = {"gpt_neox": M_COLORS[0], "mamba": M_COLORS[2]}
TWIN_MARKERS = {"gpt_neox": "o", "mamba": "s"}
TWIN_LABELS = {"gpt_neox": "transformer", "mamba": "Mamba"}
#: line style per radius kind: the final hidden state, the residual stream before the final
#: norm, Mamba's recurrent state
RADIUS_STYLES = {"final": "-", "residual": "--", "ssm": "-."}


def _color(family):
    return TWIN_COLORS.get(family, COLORS["measured"])


def _marker(family, **kw):
    return dict(STYLE["marker"], marker=TWIN_MARKERS.get(family, "o"), **kw)


def _logistic(x, x0, k):
    return 1 / (1 + np.exp(-k * (x - x0)))


# ----------------------------------------------------------------------------- accessibility
def plot_twin_curves(ax):
    """Accessibility curves of both twins (drawn by :func:`update_twin_curves`)."""
    ax.set_xlabel("target length n (tokens = bytes)")
    ax.set_ylabel("fraction of strings crammed")
    ax.set_ylim(-0.05, 1.05)
    ax.axhline(0.5, **STYLE["refline"])
    ax.set_title("(a) accessibility curves (m at each n50)", fontsize=STYLE["font"])
    return dict(ax=ax, artists=[])


def update_twin_curves(art, twins):
    """``twins``: [dict(family, label, curves=[dict(m, lengths, successes, totals, n50, k)])]."""
    ax = art["ax"]
    for a in art["artists"]:
        a.remove()
    art["artists"] = []
    xmax = 10.0
    for tw in twins:
        col, fam = _color(tw["family"]), tw["family"]
        first = True
        for c in tw["curves"]:
            n = np.asarray(c["lengths"], float)
            if n.size == 0:
                continue
            s, t = np.asarray(c["successes"], float), np.asarray(c["totals"], float)
            eb = ax.errorbar(n, s / np.maximum(t, 1), yerr=binomial_stderr(s, t), color=col,
                             label=tw["label"] if first else None, **_marker(fam, ms=5))
            art["artists"].append(eb)
            first = False
            xmax = max(xmax, float(n.max()) * 1.1)
            if c.get("n50") is not None and c.get("k") is not None and math.isfinite(c["n50"]):
                xs = np.linspace(0, max(float(n.max()), c["n50"]) * 1.4, 200)
                (ln,) = ax.plot(xs, _logistic(xs, c["n50"], c["k"]), color=col, **STYLE["fit"])
                tx = ax.annotate(str(c["m"]), (c["n50"], 0.5), fontsize=7, color=col, ha="center",
                                 xytext=(0, 5 if fam == "gpt_neox" else -12), textcoords="offset points")
                art["artists"] += [ln, tx]
    ax.set_xlim(0, xmax)
    if art["artists"]:
        ax.legend(fontsize=7.5, loc="upper right")
    return art


# ----------------------------------------------------------------------------- n50 against m
def plot_twin_n50(ax):
    ax.set_xlabel("m (memory vectors)")
    ax.set_ylabel("n50 (tokens)")
    ax.set_title("(b) n50 against m", fontsize=STYLE["font"])
    return dict(ax=ax, artists=[])


def update_twin_n50(art, twins):
    """``twins``: [dict(family, label, ms, n50, n50_stderr, slope, intercept)] (slope None: no line)."""
    ax = art["ax"]
    for a in art["artists"]:
        a.remove()
    art["artists"] = []
    top, mmax = 1.0, 1
    for tw in twins:
        col, fam = _color(tw["family"]), tw["family"]
        ms = np.asarray(tw["ms"], float)
        y = np.asarray([v if v is not None else np.nan for v in tw["n50"]], float)
        se = np.nan_to_num(np.asarray([v if v is not None else np.nan for v in tw["n50_stderr"]], float))
        eb = ax.errorbar(ms, y, yerr=se, color=col, label=tw["label"], **_marker(fam))
        art["artists"].append(eb)
        if len(ms):
            mmax = max(mmax, int(ms.max()))
        if np.isfinite(y).any():
            top = max(top, float(np.nanmax(y + se)))
        if tw.get("slope") is not None:
            xs = np.linspace(0, mmax + 0.5, 20)
            (ln,) = ax.plot(xs, tw["slope"] * xs + tw["intercept"], color=col, **STYLE["fit"])
            art["artists"].append(ln)
    ax.set_xlim(0, mmax + 0.5)
    ax.set_xticks(range(1, mmax + 1))
    ax.set_ylim(0, top * 1.15)
    if art["artists"]:
        ax.legend(fontsize=7.5, loc="upper left")
    return art


# ----------------------------------------------------------------------------- radius
def plot_radius(ax):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length L (tokens)")
    ax.set_title("(c) hidden-state radius vs context", fontsize=STYLE["font"])
    return dict(ax=ax, artists=[])


def update_radius(art, series, *, norm: str = "r_2", trained_context=None):
    """``series``: [dict(family, label, kind ("final" | "residual" | "ssm"), lengths, values,
    cap or None)]: one line with markers per entry, the cap as a dotted line in the same colour,
    the trained context (if given) as a vertical line."""
    ax = art["ax"]
    for a in art["artists"]:
        a.remove()
    art["artists"] = []
    vals = []
    for s in series:
        col = _color(s["family"])
        (ln,) = ax.plot(s["lengths"], s["values"], color=col, ls=RADIUS_STYLES.get(s["kind"], "-"),
                        marker=TWIN_MARKERS.get(s["family"], "o"), ms=4, lw=1.4,
                        label=f"{s['label']}: {s['kind']}")
        art["artists"].append(ln)
        vals += [v for v in s["values"] if v and v > 0]
        if s.get("cap"):
            cap = ax.axhline(s["cap"], color=col, lw=0.9, ls=":")
            art["artists"].append(cap)
            vals.append(s["cap"])
    if trained_context:
        vl = ax.axvline(trained_context, **STYLE["refline"])
        # along the line, on its left: a legend in the lower right leaves it readable
        tx = ax.annotate(f"trained context {trained_context}", (trained_context, 0.02),
                         xycoords=("data", "axes fraction"), fontsize=7, color=COLORS["reference"],
                         xytext=(-2, 0), textcoords="offset points", rotation=90, ha="right",
                         va="bottom")
        art["artists"] += [vl, tx]
    ax.set_ylabel(("r_2 = ||h||_2" if norm == "r_2" else "r_inf = max |h_i|") + " (log)")
    if vals:
        ax.set_ylim(min(vals) / 2, max(vals) * 2)
    lengths = [L for s in series for L in s["lengths"]]
    if lengths:
        ax.set_xlim(min(lengths) / 1.5, max(lengths) * 1.5)
    if art["artists"]:
        ax.legend(fontsize=6.5, loc="best")
    return art


def draw_summary_figure(fig, twins_curves, twins_n50, radius_series, *, norm="r_2", trained_context=None):
    """All three panels on a fresh figure (the static version of notebook 09's figure)."""
    axes = [fig.add_subplot(1, 3, i) for i in (1, 2, 3)]
    update_twin_curves(plot_twin_curves(axes[0]), twins_curves)
    update_twin_n50(plot_twin_n50(axes[1]), twins_n50)
    update_radius(plot_radius(axes[2]), radius_series, norm=norm, trained_context=trained_context)
    return axes
