"""Matplotlib drawing of the bounds: notebook 01's three panels and notebook 03's predicted lines
against measured n50 (matplotlib only: no widgets, no torch).

Every figure element comes as a pair:

    plot_x(ax, ...)        draws it once and returns its artists (a small dict)
    update_x(artists, ...) moves those same artists in place (set_data, set_text, limits)

so that an App creates its figure once and never redraws from scratch. The caller decides
when to repaint (``fig.canvas.draw_idle()``).

One visual language everywhere (CONTRIBUTING.md, "Widgets and plots"): predicted quantities
are *lines*, measured or published ones are *markers* (with error bars when an uncertainty is
known), in the colours of :data:`accesslib.plots.style.COLORS`; counts are shown as log10.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.text import Text
from matplotlib.transforms import blended_transform_factory

from accesslib.plots.style import (
    BOUND_STYLES,
    COLORS,
    MEASURED_BOUND_STYLE,
    STYLE,
    bound_color,
    dataset_color,
    fmt_power10,
    set_errorbar,
    spread_positions,
    sticky_limit,
)
from accesslib.theory import bounds

#: log10 of the number of atoms in the observable universe, a yardstick for panel (a)
LOG10_ATOMS = 80.0


# ---------------------------------------------------------------------------------------------
# (a) the number of accessible sequences, as a log10 bar
# ---------------------------------------------------------------------------------------------

def plot_accessible_count(ax, log10_count, *, label="bound on accessible sequences"):
    """Horizontal bar of log10 N, N = (1+2r/eps)^(d*m) ([A] Theorem 4.5), with 10^80 for scale."""
    bar = ax.barh([-0.08], [max(log10_count, 0.0)], height=0.5, color=COLORS["predicted"],
                  label=label)[0]
    atoms = ax.axvline(LOG10_ATOMS, **STYLE["refline"])
    # above the bar, inside the (short) axes
    atoms_txt = ax.text(LOG10_ATOMS, 0.2, "  atoms in the universe ≈ $10^{80}$", fontsize=8,
                        color=COLORS["reference"], va="bottom", ha="left", clip_on=True)
    value_txt = ax.text(1.0, 1.04, "", transform=ax.transAxes, ha="right", va="bottom",
                        fontsize=12, fontweight="bold", color=COLORS["predicted"])
    ax.set_yticks([])
    ax.set_ylim(-0.5, 0.5)
    ax.set_xlabel("log10 (number of accessible sequences)  =  number of decimal digits",
                  fontsize=STYLE["font"])
    ax.set_title("(a) How many different outputs can the model give at most?", loc="left",
                 fontsize=STYLE["font"] + 1)
    artists = dict(ax=ax, bar=bar, atoms=atoms, atoms_txt=atoms_txt, value_txt=value_txt,
                   dynamic=("bar", "value_txt"))
    update_accessible_count(artists, log10_count)
    return artists


def update_accessible_count(artists, log10_count, *, extra=""):
    """Move the bar of :func:`plot_accessible_count` to a new log10 N."""
    v = max(float(log10_count), 0.0)
    artists["bar"].set_width(v)
    ax = artists["ax"]
    cur = ax.get_xlim()[1] if artists.get("placed") else None
    top = sticky_limit(cur, max(v * 1.02, LOG10_ATOMS * 1.25), headroom=1.15)
    if top != cur:
        ax.set_xlim(0, top)
        artists["placed"] = True
    artists["atoms_txt"].set_visible(LOG10_ATOMS < 0.6 * top)
    artists["value_txt"].set_text(f"N ≤ {fmt_power10(v)}" + (f"  {extra}" if extra else ""))
    return artists


# ---------------------------------------------------------------------------------------------
# (b) accessible fraction bound against n, n* marked
# ---------------------------------------------------------------------------------------------

def fraction_curve(m, d, vocab_size, eps, r, *, points=200, n_max=None):
    """(n, log10 fraction bound, n*) over 0..n_max (default about 2*n*), for plotting."""
    ns = float(bounds.n_star(m, d, vocab_size, eps, r))
    if n_max is None:
        n_max = max(2.0 * ns, ns + 10.0, 10.0)
    # the kink at n* must be a vertex of the polyline, whatever the sampling
    n = np.union1d(np.linspace(0.0, n_max, points), [min(ns, n_max)])
    return n, np.asarray(bounds.log10_accessible_fraction(n, m, d, vocab_size, eps, r)), ns


def plot_fraction_bound(ax, m, d, vocab_size, eps, r):
    """log10 of the accessible-fraction bound min(1, |V|^-(n - C m)) against n ([A] Cor. 4.6)."""
    n, y, ns = fraction_curve(m, d, vocab_size, eps, r)
    line, = ax.plot(n, y, color=COLORS["predicted"], label="bound on accessible fraction",
                    **STYLE["line"])
    vline = ax.axvline(ns, label="threshold n* = C·m", **STYLE["threshold"])
    # lower left: below the flat part and left of n*, where the curve never goes
    txt = ax.text(0.03, 0.2, "", transform=ax.transAxes, ha="left", va="bottom",
                  fontsize=STYLE["font"] - 1,
                  bbox=STYLE["textbox"])
    ax.set_xlabel("output length n (tokens)", fontsize=STYLE["font"])
    ax.set_ylabel("log10 (accessible fraction)", fontsize=STYLE["font"])
    ax.legend(loc="lower left", fontsize=STYLE["font"] - 1, frameon=True)
    ax.grid(alpha=0.3)
    ax.set_title("(b) Share of length-n outputs that are reachable", loc="left",
                 fontsize=STYLE["font"] + 1)
    artists = dict(ax=ax, line=line, vline=vline, txt=txt, dynamic=("line", "vline", "txt"))
    update_fraction_bound(artists, m, d, vocab_size, eps, r)
    return artists


def update_fraction_bound(artists, m, d, vocab_size, eps, r):
    """Move the curve and n* of :func:`plot_fraction_bound`; axes change only when needed."""
    ax = artists["ax"]
    ns = float(bounds.n_star(m, d, vocab_size, eps, r))
    placed = artists.get("placed")
    xcur = ax.get_xlim()[1] if placed else None
    xtop = sticky_limit(xcur, max(1.6 * ns, ns + 10.0, 10.0), headroom=1.25)
    n, y, ns = fraction_curve(m, d, vocab_size, eps, r, n_max=xtop)
    artists["line"].set_data(n, y)
    artists["vline"].set_xdata([ns, ns])
    lv = math.log10(float(vocab_size))
    artists["txt"].set_text(f"m = {float(m):g}:  n* = {ns:,.1f} tokens\nbeyond n*: ×1/{float(vocab_size):,.0f} per token\n"
                            f"(slope −log10|V| = −{lv:.2f})")
    depth = -float(y.min())
    ycur = -ax.get_ylim()[0] if placed else None
    ybot = sticky_limit(ycur, max(depth, 1.0), headroom=1.08)
    if xtop != xcur or ybot != ycur:
        ax.set_xlim(0, xtop)
        ax.set_ylim(-ybot, 0.06 * ybot)
        artists["placed"] = True
    return artists


# ---------------------------------------------------------------------------------------------
# (c) predicted n* = C m against m, with published n50 as markers
# ---------------------------------------------------------------------------------------------

def plot_threshold_vs_m(ax, C, m_current, *, m_max=None):
    """Predicted line n* = C*m against m (the bound), plus a marker at the current m.

    Published/measured n50 points are added with :func:`plot_n50_points` (markers).
    """
    line, = ax.plot([], [], color=COLORS["predicted"], label="bound n* = C·m", **STYLE["line"])
    here, = ax.plot([], [], "o", color=COLORS["current"], ms=6, zorder=5, label="current m")
    # lower right: between the bound line and the (much lower) measured points
    txt = ax.text(0.98, 0.15, "", transform=ax.transAxes, ha="right", va="bottom", multialignment="left",
                  fontsize=STYLE["font"] - 1,
                  bbox=STYLE["textbox"])
    ax.set_xlabel("number of prompt vectors m", fontsize=STYLE["font"])
    ax.set_ylabel("output length n (tokens)", fontsize=STYLE["font"])
    ax.set_title("(c) Longest fully reachable length vs prompt size", loc="left",
                 fontsize=STYLE["font"] + 1)
    ax.grid(alpha=0.3)
    artists = dict(ax=ax, line=line, here=here, txt=txt, points={}, fits={},
                   dynamic=("line", "here", "txt"))
    update_threshold_vs_m(artists, C, m_current, m_max=m_max)
    return artists


def plot_n50_points(artists, datasets):
    """Draw one marker series (+ a dash-dot fitted-slope line) per dataset on a (c) panel.

    ``datasets``: {name: dict(m=[...], n50=[...], err=None|[...], slope=None|a)}; ``slope`` is
    the published/measured fit n50 = a*m (dash-dot, in the dataset's colour), ``err`` optional
    error bars (published n50 read off a figure have none; measured ones do).
    Calling it again replaces the series (see :func:`update_n50_points`).
    """
    return update_n50_points(artists, datasets)


def update_n50_points(artists, datasets):
    """Replace the marker series and slope lines by ``datasets`` (see :func:`plot_n50_points`)."""
    ax = artists["ax"]
    for eb in artists["points"].values():
        eb.remove()
    for fit in artists["fits"].values():
        fit.remove()
    artists["points"], artists["fits"] = {}, {}
    xmax = ax.get_xlim()[1]
    for name, data in datasets.items():
        color = dataset_color(name)
        m = np.asarray(data.get("m") or [], dtype=float)
        y = np.asarray(data.get("n50") or [], dtype=float)
        if len(m):
            err = data.get("err")
            label = data.get("label") or f"{name}: n50 (published)"
            artists["points"][name] = ax.errorbar(
                m, y, yerr=None if err is None else np.asarray(err, dtype=float), color=color,
                label=label, zorder=4, **STYLE["marker"])
        a = data.get("slope")
        if a is not None:
            artists["fits"][name], = ax.plot([0.0, xmax], [0.0, a * xmax], color=color,
                                             label=f"{name}: measured slope {a:.1f}·m", **STYLE["fit"])
    _refresh_legend(artists)
    return artists


def _refresh_legend(artists):
    ax = artists["ax"]
    handles = [artists["line"], artists["here"]]
    for name in sorted(set(artists["points"]) | set(artists["fits"])):
        handles += [h for h in (artists["points"].get(name), artists["fits"].get(name)) if h is not None]
    ax.legend(handles=handles, labels=[h.get_label() for h in handles], loc="upper left",
              fontsize=STYLE["font"] - 2, frameon=True)


def update_threshold_vs_m(artists, C, m_current, *, m_max=None, text=""):
    """Move the predicted line to slope ``C`` and the current-m marker; y spans the line."""
    m_current = float(m_current)
    ax = artists["ax"]
    placed = artists.get("placed")
    xcur = ax.get_xlim()[1] if placed else None
    if m_max is None:
        m_max = sticky_limit(xcur, max(5.5, 1.05 * m_current), headroom=1.0)
    artists["line"].set_data([0.0, m_max], [0.0, C * m_max])
    artists["here"].set_data([m_current], [C * m_current])
    # keep published points visible even when the bound is tiny
    top = C * m_max
    for eb in artists["points"].values():
        top = max(top, float(np.max(eb.lines[0].get_ydata())))
    ycur = ax.get_ylim()[1] if placed else None
    # keep the line's right end in the upper half: the ratio box sits below it
    ytop = sticky_limit(ycur, max(top, 1.0), headroom=1.08, keep_down_to=0.5)
    if m_max != xcur or ytop != ycur:
        ax.set_xlim(0, m_max)
        ax.set_ylim(0, ytop)
        artists["placed"] = True
    for fit in artists["fits"].values():
        x, y = fit.get_data()
        if len(x) == 2 and x[1] > 0:
            a = y[1] / x[1]
            fit.set_data([0.0, m_max], [0.0, a * m_max])
    artists["txt"].set_text(text)
    return artists


# ---------------------------------------------------------------------------------------------
# notebook 03: one model's bounds n* = C·m against its own measured n50; [A]'s models apart
# ---------------------------------------------------------------------------------------------

#: the lines of notebook 03 run from m = 0 (m = 0.5 on a log axis) to m_max; their labels sit
#: to the right of m_max, inside the axes, so the x axis reaches m_max * LABEL_ROOM
LABEL_ROOM = 1.5


def plot_model_bounds(ax, *, m_max=5, title=""):
    """One model's panel: the bound lines n* = C·m (one per bound, added by
    :func:`update_model_bounds`, each labelled where it ends) and the measured n50 by m (markers
    with error bars) with its fitted line n50 = a·m + b."""
    measured = ax.errorbar([], [], yerr=[], color=COLORS["measured"], zorder=5,
                           label="measured n50 ± s.e.", **STYLE["marker"])
    (fit,) = ax.plot([], [], color=COLORS["measured"], label="fit n50 = a·m + b", **STYLE["fit"])
    # the same m's n50 at other step budgets (a bundle's budget ladder): hollow, beside it
    ladder = ax.errorbar([], [], yerr=[], color=COLORS["measured"], zorder=4,
                         label="n50 at other step budgets", **dict(STYLE["marker"], mfc="white",
                                                                   mec=COLORS["measured"], ms=6))
    # the model measured again by another run (another protocol, targets or budget): hollow squares
    remeasured = ax.errorbar([], [], yerr=[], color=COLORS["paper_rule"], zorder=4,
                             label="n50 re-measured by another run",
                             **dict(STYLE["marker"], marker="s", mfc="white", mec=COLORS["paper_rule"], ms=6))
    ax.set_xlabel("m (prompt vectors)", fontsize=STYLE["font"])
    ax.set_ylabel("output length n (tokens)", fontsize=STYLE["font"])
    ax.set_title(title, loc="left", fontsize=STYLE["font"])
    ax.grid(alpha=0.3)
    art = dict(ax=ax, m_max=m_max, bounds={}, labels={}, measured=measured, fit=fit, ladder=ladder,
               ladder_texts=[], ladder_points=[], remeasured=remeasured, remeasured_texts=[], remeasured_points=[],
               remeasured_fits=[])
    _model_legend(art)
    return art


def _model_legend(art):
    """The legend of :func:`plot_model_bounds`: the ladder's and the re-measurements' entries
    only while they have points."""
    handles = [art["measured"], art["fit"]] + [art[k] for k in ("ladder", "remeasured") if art[f"{k}_texts"]]
    handles += art.get("remeasured_fits", [])[:1]
    art["ax"].legend(handles=handles, loc="upper left", fontsize=8, frameon=True)


#: how far right of its m each further step budget's n50 is drawn (in m)
LADDER_STEP = 0.13
#: how far from its m the farthest of one m's markers may be drawn (in m): short of halfway to the
#: next m, whose markers on the other side then never meet these
LADDER_SPAN = 0.45


def update_ladder(art, points, which: str = "ladder"):
    """Draw ``points`` [(m, n50, stderr, label), ...] as hollow markers right of their m, each
    named by its ``label``: ``which`` "ladder" (n50 of one m at other step budgets, in budget
    order) or "remeasured" (the model measured again by other runs, drawn left of their m).
    Markers at one m are :data:`LADDER_STEP` apart, closer where more than fit in
    :data:`LADDER_SPAN`."""
    for t in art[f"{which}_texts"]:
        t.remove()
    art[f"{which}_texts"] = []
    side = -1 if which == "remeasured" else 1
    ranks = [sum(1 for q in points[:i] if q[0] == p[0]) for i, p in enumerate(points)]   # k-th point at its m
    step = min(LADDER_STEP, LADDER_SPAN / (max(ranks) + 1)) if points else LADDER_STEP   # closer where many
    xs = [p[0] + side * step * (k + 1) for k, p in zip(ranks, points)]
    ys = [p[1] for p in points]
    set_errorbar(art[which], xs, ys, [p[2] or 0.0 for p in points])
    color = COLORS["paper_rule"] if which == "remeasured" else COLORS["measured"]
    for x, (_, y, _, label) in zip(xs, points):
        art[f"{which}_texts"].append(art["ax"].annotate(
            label, (x, y), xytext=(LABEL_RIGHT_PT, LABEL_LIFT_PT), textcoords="offset points", fontsize=7,
            va="bottom", color=color, zorder=6, bbox=LABEL_BOX, arrowprops=dict(LEADER, color=color)))
    art[f"{which}_points"] = list(points)
    _place_marker_labels(art)
    _model_legend(art)
    return art


def update_remeasured_fits(art, fits):
    """Draw the slope of each re-measurement that has one (``fits`` [(m_lo, m_hi, a, b), ...]) as a
    thin dashed line n50 = a·m + b over the m it was fitted on, in the colour of its squares
    (:func:`update_ladder` with "remeasured", whose label at m_hi names the slope). Drawn through
    many points: straight on a linear axis, a curve on a log one."""
    for line in art["remeasured_fits"]:
        line.remove()
    art["remeasured_fits"] = []
    for lo, hi, a, b in fits:
        xs = np.linspace(lo, hi, 20)
        (line,) = art["ax"].plot(xs, np.maximum(a * xs + b, 1e-3), color=COLORS["paper_rule"], lw=1.1, ls="--",
                                 zorder=3, label="re-measured fit n50 = a·m + b")
        art["remeasured_fits"].append(line)
    _model_legend(art)
    return art


#: the least gap between two marker labels at one m, and a label's lift above its marker, and its
#: offset right of it (points)
LABEL_GAP_PT, LABEL_LIFT_PT, LABEL_RIGHT_PT = 9.0, 4.0, 4.0
#: a marker label's backing: readable where it crosses a bound line
LABEL_BOX = dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.75)
#: the thin line from a marker label pushed away from its marker back to it (shown only then)
LEADER = dict(arrowstyle="-", lw=0.5, alpha=0.6, shrinkA=0, shrinkB=3)


def _place_marker_labels(art):
    """Lift the labels of the ladder's and the re-measurements' markers (:func:`update_ladder`) so
    that none overlaps another: labels whose spans across the axis meet (those at one m, and a long
    one reaching the next m) are placed together, each just above its marker where there is room,
    else pushed up (or down, at the top) as little as its neighbours need, in the order of their
    n50 (:func:`spread_positions`); a label pushed off its marker by more than a label's gap gets
    a thin leader line back to it. A label that would run past the lines' end labels (at
    1.03·m_max, :func:`label_line_ends`) or the axes' right edge is moved left to end before them.
    For the axes as they are now: call it again when they change."""
    ax = art["ax"]
    texts = art["ladder_texts"] + art["remeasured_texts"]
    height = ax.bbox.height * 72.0 / ax.figure.dpi   # the axes' height in points
    if height <= 0 or not texts:
        return
    pt = 72.0 / ax.figure.dpi
    right = min(ax.bbox.x1, ax.transData.transform((art.get("m_max", math.inf) * 1.03, 0))[0]
                if math.isfinite(art.get("m_max", math.inf)) else ax.bbox.x1) * pt - 6.0
    for t in texts:   # from its place right of its marker, moved left as far as it must
        t.xyann = (LABEL_RIGHT_PT, t.xyann[1])
        x0, x1 = _label_span(ax, t)
        if x1 > right:
            t.xyann = (LABEL_RIGHT_PT - (x1 - right), t.xyann[1])
    to_axes = ax.transAxes.inverted()
    spans = sorted((_label_span(ax, t), k) for k, t in enumerate(texts))   # (x0, x1) in points, by x0
    groups, right = [], -math.inf
    for (x0, x1), k in spans:   # labels whose spans meet, directly or through others, form one group
        if x0 > right:
            groups.append([])
        groups[-1].append(texts[k])
        right = max(right, x1) if x0 <= right else x1
    for group in groups:
        at = [to_axes.transform(ax.transData.transform(t.xy))[1] for t in group]   # the markers, in axes height
        pos = spread_positions([a + LABEL_LIFT_PT / height for a in at], LABEL_GAP_PT / height, high=0.97)
        for t, a, y in zip(group, at, pos):
            t.xyann = (t.xyann[0], float((y - a) * height))
            if t.arrow_patch is not None:   # a leader back to the marker once pushed off it
                t.arrow_patch.set_visible(abs(t.xyann[1] - LABEL_LIFT_PT) > LABEL_GAP_PT
                                          or t.xyann[0] < LABEL_RIGHT_PT - LABEL_GAP_PT)


def _label_span(ax, text) -> tuple[float, float]:
    """(left, right) of a marker label across the figure, in points: its marker plus the label's
    offset, and its width as drawn (estimated from its length where nothing can draw it)."""
    dpi = ax.figure.dpi
    x0 = ax.transData.transform(text.xy)[0] * 72.0 / dpi + text.xyann[0]
    try:
        # the text's own box: an annotation's extent takes in its leader line too
        width = Text.get_window_extent(text, ax.figure.canvas.get_renderer()).width * 72.0 / dpi
    except Exception:   # a canvas without a renderer
        width = 0.6 * text.get_fontsize() * len(text.get_text())
    return x0, x0 + width


#: the name suffix of a bound drawn at a measured precision ("ball, measured ε")
MEASURED_SUFFIX = ", measured ε"


def update_model_bounds(art, slopes, m, n50, stderr, *, fit=None, log=False, title=None):
    """Move one model's panel: ``slopes`` {bound name: C or None} as lines n* = C·m, the measured
    ``n50`` ± ``stderr`` at ``m``, ``fit`` = (a, b) as the line a·m + b (None: no line); linear
    axes unless ``log``. Every line gets its name and slope at its right end; a name ending in
    ``MEASURED_SUFFIX`` is drawn in ``MEASURED_BOUND_STYLE``."""
    ax, m_max = art["ax"], art["m_max"]
    x0 = 0.5 if log else 0.0
    for name, C in slopes.items():
        if name not in art["bounds"]:
            style = dict(ls=BOUND_STYLES.get(name, "-"), lw=2.2 if name == "ball" else 1.6)
            if name.endswith(MEASURED_SUFFIX):    # its ε is measured, not the sliders': set apart
                style.update(MEASURED_BOUND_STYLE)
            (art["bounds"][name],) = ax.plot([], [], color=bound_color(name), zorder=3, **style)
        ok = C is not None and math.isfinite(C)
        xs = np.array([x0, m_max], dtype=float)
        art["bounds"][name].set_data((xs, C * xs) if ok else ([], []))
    m, n50 = np.asarray(m, float), np.asarray(n50, float)
    set_errorbar(art["measured"], m, n50, np.nan_to_num(np.asarray(stderr, float), nan=0.0))
    xs = np.linspace(x0, m_max, 20)
    art["fit"].set_data((xs, np.maximum(fit[0] * xs + fit[1], 1e-3)) if fit else ([], []))
    ys = [C * m_max for C in slopes.values() if C] + list(n50) + ([fit[0] * m_max + fit[1]] if fit else [])
    _set_n_axes(ax, ys, m_max, log)
    if title is not None:
        ax.set_title(title, loc="left", fontsize=STYLE["font"])
    items = [(name, C * m_max, f"{name}  C = {C:,.1f}", bound_color(name))
             for name, C in slopes.items() if C is not None and math.isfinite(C)]
    if fit:
        items.append(("fit", fit[0] * m_max + fit[1], f"measured  a = {fit[0]:.2f}", COLORS["measured"]))
    label_line_ends(art, items)
    return art


def plot_published_models(ax, models, *, m_max=5):
    """[A]'s published n50 by m (markers: colour = dataset, shape = model) under each model's own
    ball bound (lines, set by :func:`update_published_models`). ``models``: {label: {dataset:
    (m list, n50 list)}}, in drawing order."""
    art = dict(ax=ax, m_max=m_max, bounds={}, labels={}, points={})
    for k, (label, series) in enumerate(models.items()):
        (art["bounds"][label],) = ax.plot([], [], color=COLORS["predicted"], ls=("-", "--", "-.", ":")[k % 4],
                                          lw=1.8, zorder=3)
        for ds, (ms, n50) in series.items():
            (art["points"][(label, ds)],) = ax.plot(ms, n50, ls="none", marker="os^D"[k % 4], ms=6,
                                                    color=dataset_color(ds), mec="white", mew=0.6,
                                                    label=f"{label} {ds}", zorder=4)
    ax.set_xlabel("m (prompt vectors)", fontsize=STYLE["font"])
    ax.set_ylabel("output length n (tokens)", fontsize=STYLE["font"])
    ax.set_title("[A]'s models, each under its own ball bound", loc="left", fontsize=STYLE["font"])
    ax.grid(alpha=0.3)
    _published_legend(ax, log=False)
    return art


def _published_legend(ax, *, log):
    # linear: the upper left is empty (lines rise to the right); log: the lower right is
    ax.legend(loc="lower right" if log else "upper left", fontsize=7.5, frameon=True,
              title="published n50 [A]", title_fontsize=7.5)


def update_published_models(art, slopes, *, log=False):
    """Move the bound lines of :func:`plot_published_models` to ``slopes`` {label: C}, each
    labelled where it ends; linear axes unless ``log``."""
    ax, m_max = art["ax"], art["m_max"]
    x0 = 0.5 if log else 0.0
    xs = np.array([x0, m_max], dtype=float)
    for label, C in slopes.items():
        art["bounds"][label].set_data(xs, C * xs)
    ys = [C * m_max for C in slopes.values()]
    for pts in art["points"].values():
        ys += list(pts.get_ydata())
    _set_n_axes(ax, ys, m_max, log)
    _published_legend(ax, log=log)
    label_line_ends(art, [(label, C * m_max, f"{label}\nC = {C:,.0f}", COLORS["predicted"])
                          for label, C in slopes.items()])
    return art


def _set_n_axes(ax, ys, m_max, log):
    """Axes of a length-against-m panel: x from 0 (0.4 on log y) with room for the end labels,
    y from 0 to above every value (log: a factor 1.6 either side)."""
    ys = np.asarray([y for y in ys if y is not None and np.isfinite(y) and y > 0], float)
    top = float(ys.max()) if ys.size else 1.0
    ax.set_yscale("log" if log else "linear")
    if log:
        ax.set_ylim(max(0.3, float(ys.min()) / 1.6) if ys.size else 0.3, top * 1.6)
        ax.set_xlim(0.4, m_max * LABEL_ROOM)
        ax.set_xticks(range(1, m_max + 1))
    else:
        ax.set_ylim(0, top * 1.08)
        ax.set_xlim(0, m_max * LABEL_ROOM)
        ax.set_xticks(range(0, m_max + 1))


def label_line_ends(art, items, *, gap=0.065):
    """Label lines where they end (x = art["m_max"]): ``items`` [(key, y, text, colour)] in data
    units; labels are spread apart vertically (at least ``gap`` of the axes height) and keep
    the lines' order. Replaces the panel's earlier end labels."""
    ax = art["ax"]
    for t in art["labels"].values():
        t.remove()
    art["labels"] = {}
    if not items:
        return art
    to_axes = ax.transAxes.inverted()
    fy = [to_axes.transform(ax.transData.transform((art["m_max"], y)))[1] for _, y, _, _ in items]
    lines = [text.count("\n") + 1 for _, _, text, _ in items]
    pos = spread_positions(fy, gap * max(lines), low=0.03 + 0.035 * (max(lines) - 1),
                           high=0.97 - 0.035 * (max(lines) - 1))
    where = blended_transform_factory(ax.transData, ax.transAxes)
    for (key, _, text, color), y in zip(items, pos):
        art["labels"][key] = ax.text(art["m_max"] * 1.03, y, text, transform=where, color=color, fontsize=8,
                                     ha="left", va="center", clip_on=False)
    return art
