"""Matplotlib drawing for the geometry app (numpy + matplotlib only: no torch, no widgets).

Same pattern as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once and returns a dict
of artists, ``update_x(artists, ...)`` moves them in place. Covers the 2-D toy decoder
(argmax cells vs Voronoi cells, docs/paper.md, section 4, with an eps-grid) and the cell-share
histogram, s_conv convergence and slope bars of a real model.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import ListedColormap

from accesslib.plots.style import COLORS, token_color

ASSIGN_TITLES = {"argmax": "argmax of logits (greedy decoding)",
                 "voronoi": "nearest decoder row (Voronoi, [A])"}


def cells_on_grid(W, b=None, lo=(-1.0, -1.0), hi=(1.0, 1.0), res=301, assign="argmax"):
    """Token index on a res x res grid of the 2-D box [lo, hi]: argmax (W x + b) or nearest row.

    Returns (index [res, res] with rows along x2, shares [|V|]: the fraction of grid points of
    each token, i.e. its cell area / box area up to the grid resolution).
    """
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[1] != 2 or W.shape[0] < 1:
        raise ValueError(f"W must be [|V| >= 1, 2] for the 2-D toy; got shape {W.shape}")
    if assign not in ASSIGN_TITLES:
        raise ValueError(f"assign must be one of {tuple(ASSIGN_TITLES)}; got {assign!r}")
    if int(res) < 2:
        raise ValueError(f"res must be >= 2; got {res!r}")
    xs = np.linspace(lo[0], hi[0], int(res))
    ys = np.linspace(lo[1], hi[1], int(res))
    X, Y = np.meshgrid(xs, ys)
    pts = np.stack([X.ravel(), Y.ravel()], 1)
    if assign == "voronoi":
        score = pts @ W.T - 0.5 * np.sum(W**2, 1)   # nearest row = argmax x.w - |w|^2/2
    else:
        score = pts @ W.T + (0.0 if b is None else np.asarray(b, dtype=float))
    idx = score.argmax(1)
    shares = np.bincount(idx, minlength=W.shape[0]) / idx.size
    return idx.reshape(int(res), int(res)), shares


def _cmap(n):
    return ListedColormap([token_color(i) for i in range(n)])


def plot_cells_2d(ax, W, b=None, assign="argmax", lo=(-1.0, -1.0), hi=(1.0, 1.0), res=301,
                  eps=None, selected=0):
    """Cells of a 2-D decoder in the box, its rows as arrows, optional eps-grid; -> artists."""
    W = np.asarray(W, dtype=float)
    idx, shares = cells_on_grid(W, b, lo, hi, res, assign)
    n = W.shape[0]
    img = ax.imshow(idx, origin="lower", extent=(lo[0], hi[0], lo[1], hi[1]), cmap=_cmap(n),
                    vmin=-0.5, vmax=n - 0.5, alpha=0.55, interpolation="nearest")
    arrows = ax.quiver(np.zeros(n), np.zeros(n), W[:, 0], W[:, 1], color=[token_color(i) for i in range(n)],
                       angles="xy", scale_units="xy", scale=1, width=0.012, zorder=3)
    tips = ax.plot(W[:, 0], W[:, 1], "o", ms=9, mec="black", mfc="none", zorder=4)[0]
    sel = ax.plot([W[selected, 0]], [W[selected, 1]], "o", ms=14, mec="black", mfc="none", mew=2,
                  zorder=4)[0]
    labels = [ax.text(0, 0, "", ha="center", va="center", fontsize=9, fontweight="bold", zorder=5)
              for _ in range(n)]
    grid = ax.plot([], [], "-", color="black", lw=0.4, alpha=0.35, zorder=2)[0]
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_title(ASSIGN_TITLES[assign], fontsize=10)
    art = dict(ax=ax, img=img, arrows=arrows, tips=tips, sel=sel, labels=labels, grid=grid,
               assign=assign, lo=tuple(lo), hi=tuple(hi), res=res)
    update_cells_2d(art, W, b, eps=eps, selected=selected)
    return art


def _grid_path(lo, hi, eps, max_lines=80):
    """Polyline of the eps-grid lines inside the box (NaN-separated); empty if too dense."""
    nx = int((hi[0] - lo[0]) / eps) + 1
    ny = int((hi[1] - lo[1]) / eps) + 1
    if nx + ny > max_lines:
        return np.array([]), np.array([])
    xs, ys = [], []
    for x in lo[0] + eps * np.arange(nx):
        xs += [x, x, np.nan]
        ys += [lo[1], hi[1], np.nan]
    for y in lo[1] + eps * np.arange(ny):
        xs += [lo[0], hi[0], np.nan]
        ys += [y, y, np.nan]
    return np.array(xs), np.array(ys)


def update_cells_2d(art, W, b=None, eps=None, selected=0):
    """Recompute the cells for new rows W (and bias b) and move every artist in place.

    Returns the cell shares (fractions of the box area) of each token.
    """
    W = np.asarray(W, dtype=float)
    idx, shares = cells_on_grid(W, b, art["lo"], art["hi"], art["res"], art["assign"])
    art["img"].set_data(idx)
    art["arrows"].set_UVC(W[:, 0], W[:, 1])
    art["tips"].set_data(W[:, 0], W[:, 1])
    art["sel"].set_data([W[selected, 0]], [W[selected, 1]])
    res = art["res"]
    xs = np.linspace(art["lo"][0], art["hi"][0], res)
    ys = np.linspace(art["lo"][1], art["hi"][1], res)
    for t, lab in enumerate(art["labels"]):
        if shares[t] > 0:
            r, c = np.nonzero(idx == t)
            lab.set_position((xs[int(np.median(c))], ys[int(np.median(r))]))
            lab.set_text(f"{t}\n{100 * shares[t]:.0f}%")
        else:
            lab.set_text("")
    gx, gy = _grid_path(art["lo"], art["hi"], eps) if eps else (np.array([]), np.array([]))
    art["grid"].set_data(gx, gy)
    art["shares"] = shares
    return shares


def plot_share_histogram(ax, shares=None, n_samples=None, bins=40):
    """Histogram of log10 p_t over tokens (zero-hit tokens counted in the text); -> artists.
    ``shares=None``: empty axes with a note (nothing measured yet), see :func:`clear_share_histogram`."""
    ax.set_xlabel(r"$\log_{10}$ cell share $p_t$")
    ax.set_ylabel("tokens")
    art = dict(ax=ax, bars=None, uniform=ax.axvline(0, color=COLORS["predicted"], lw=1.6, ls="--",
                                                       label="uniform 1/|V|"),
               text=ax.text(0.02, 0.97, "", transform=ax.transAxes, va="top", fontsize=8), bins=bins)
    ax.legend(loc="center right", fontsize=8)
    if shares is None:
        clear_share_histogram(art)
    else:
        update_share_histogram(art, shares, n_samples)
    return art


def clear_share_histogram(art, note="nothing measured yet:\npress Run"):
    """Empty the histogram (bars at zero height, no uniform line) and show ``note`` instead."""
    for rect in art["bars"] or []:
        rect.set_height(0)
    art["uniform"].set_xdata([np.nan, np.nan])
    art["text"].set_text(note)
    return art


def update_share_histogram(art, shares, n_samples=None):
    """Refill the histogram bars (same artist count) and the uniform-share line."""
    p = np.asarray(shares, dtype=float)
    hit = p[p > 0]
    ax = art["ax"]
    lp = np.log10(hit) if hit.size else np.array([0.0])
    counts, edges = np.histogram(lp, bins=art["bins"])
    if art["bars"] is None:
        art["bars"] = ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge",
                             color=COLORS["measured"], alpha=0.8)
    else:
        for rect, c, x0, w in zip(art["bars"], counts, edges[:-1], np.diff(edges)):
            rect.set_x(x0)
            rect.set_width(w)
            rect.set_height(c)
    art["uniform"].set_xdata([np.log10(1.0 / p.size)] * 2)
    ax.set_xlim(min(edges[0], np.log10(1.0 / p.size)) - 0.2, max(edges[-1], 0) + 0.1)
    ax.set_ylim(0, max(1, counts.max()) * 1.4)   # headroom for the note
    zero = int(np.sum(p == 0))
    note = f"{hit.size:,} tokens hit, {zero:,} never hit"
    if n_samples:
        note += f"\nN = {n_samples:,} samples:\nshares below {1 / n_samples:.1e} unresolved"
    art["text"].set_text(note)
    return art


def plot_slope_bars(ax, kinds, *, hatched=()):
    """Bars of the predicted slope C (tokens per vector) under each refinement; -> artists.
    ``hatched``: kinds drawn hatched and lighter (a bound set apart, e.g. at a measured eps)."""
    x = np.arange(len(kinds))
    bars = ax.bar(x, np.zeros(len(kinds)), color=COLORS["predicted"], alpha=0.85)
    for bar, k in zip(bars, kinds):
        if k in hatched:
            bar.set(hatch="///", alpha=0.45, edgecolor=COLORS["predicted"])
    # anchored at their right end: the last label stays inside the figure
    ax.set_xticks(x, kinds, rotation=20, fontsize=9, ha="right", rotation_mode="anchor")
    ax.set_ylabel("predicted C (tokens per vector)")
    texts = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=8) for i in x]
    return dict(ax=ax, bars=bars, texts=texts, kinds=list(kinds))


def update_slope_bars(art, values):
    """Set bar heights from ``values`` {kind: C}; missing kinds show as empty."""
    top = 0.0
    for bar, t, k in zip(art["bars"], art["texts"], art["kinds"]):
        v = float(values.get(k, 0.0))
        bar.set_height(v)
        t.set_position((bar.get_x() + bar.get_width() / 2, v))
        t.set_text(f"{v:,.0f}" if k in values else "")
        top = max(top, v)
    art["ax"].set_ylim(0, max(1.0, top) * 1.15)
    return art


def plot_convergence(ax):
    """s_conv against the number of cell samples n (log axis); -> artists for
    :func:`update_convergence`."""
    ax.set_xscale("log")
    ax.set_xlabel("cell samples n (first n of N)")
    ax.set_ylabel(r"$s_{conv}$ (nats per token)")
    art = dict(ax=ax,
               bound=ax.plot([], [], "o-", color=COLORS["measured"], lw=1.6, ms=4, label="95% upper shares")[0],
               drop=ax.plot([], [], "s--", color=COLORS["paper_rule"], lw=1.2, ms=3, label="[A]: never-hit dropped")[0],
               floor=ax.plot([], [], ":", color=COLORS["reference"], lw=1.2, label=r"$-\ln(n/3)$: resolution")[0],
               lnv=ax.axhline(0, color=COLORS["predicted"], lw=1.2, ls="-.", label=r"$-\ln|V|$"),
               text=ax.text(0.03, 0.04, "", transform=ax.transAxes, fontsize=8, va="bottom"))
    ax.legend(loc="upper right", fontsize=7)
    return art


def update_convergence(art, rows, vocab_size):
    """Draw :func:`accesslib.theory.stats.sconv_convergence` rows; one row (N within one chunk)
    draws the point and says that no check was possible."""
    from accesslib.theory.stats import zero_hit_share
    ax = art["ax"]
    n = np.array([r["n"] for r in rows], dtype=float)
    sb = np.array([r["s_conv"] for r in rows], dtype=float)
    sd = np.array([r["s_conv_drop"] for r in rows], dtype=float)
    art["bound"].set_data(n, sb)
    art["drop"].set_data(n, sd)
    lnv = -math.log(vocab_size)
    art["lnv"].set_ydata([lnv, lnv])
    if n.size:
        grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 40)
        art["floor"].set_data(grid, [math.log(zero_hit_share(int(g))) for g in grid])
        ax.set_xlim(grid[0], grid[-1])
        vals = np.concatenate([sb, sd, [lnv]])
        ax.set_ylim(vals.min() - 0.6, vals.max() + 0.9)
    art["text"].set_text("" if n.size != 1 else "N fits in one chunk: raise N to see convergence")
    return art


def clear_convergence(art):
    """Empty the s_conv panel (nothing measured yet)."""
    for k in ("bound", "drop", "floor"):
        art[k].set_data([], [])
    art["lnv"].set_ydata([np.nan, np.nan])
    art["text"].set_text("")
    return art
