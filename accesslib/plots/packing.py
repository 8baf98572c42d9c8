"""Matplotlib drawing for notebook 07, "packing and precision" (docs/paper.md, section 2).

Same pattern as :mod:`accesslib.plots.bounds`: ``plot_x(ax, ...)`` draws once and returns a dict
of artists, ``update_x(artists, ...)`` moves them in place.

- Packing: eps-separated points in a radius-r ball (3-D seen from above, colour = height) and
  their log10 count against the bound (1 + 2r/eps)^d (line) and the grid and lattice counts.
- Precision: (a) the fraction of random directions that leave the input, and the greedy
  output, unchanged against the perturbation size; (b) distinct outputs against the number of
  prompts in a region.
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import Circle

from accesslib.plots.style import COLORS, STYLE

# ---------------------------------------------------------------------------------------------
# packing: the points in the ball, and the counts against r/eps
# ---------------------------------------------------------------------------------------------


def plot_ball_points(ax):
    """An empty scatter of packed points (coloured by height) inside a circle of radius 1."""
    ax.set_aspect("equal")
    points = ax.scatter([], [], s=12, c=[], cmap="viridis", vmin=-1, vmax=1, edgecolors="none")
    circle = Circle((0, 0), 1, fill=False, color=COLORS["predicted"], lw=1.5)
    ax.add_patch(circle)
    return dict(ax=ax, points=points, circle=circle)


def update_ball_points(art, points, r, eps, *, title=""):
    """Show ``points`` [k, 2 or 3] (the third coordinate as colour) in the radius-``r`` ball;
    marker area follows eps/r so the points stay visibly separated."""
    p = np.asarray(points, dtype=float)
    if p.size == 0:
        p = np.zeros((0, 2))
    art["points"].set_offsets(p[:, :2])
    art["points"].set_array(p[:, 2] / max(r, 1e-9) if p.shape[1] == 3 else np.zeros(len(p)))
    art["points"].set_sizes([max(2.0, 900.0 * (eps / max(r, eps)) ** 2)])
    art["circle"].set_radius(max(r, 1e-9))
    lim = max(r, eps) * 1.1
    ax = art["ax"]
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_title(title, fontsize=9)
    return art


def plot_packing_counts(ax, x_max=10.0):
    """log10 number of points against r/eps: the bound (line), grid and densest-lattice counts
    (markers), and a star for the packing shown."""
    (bound,) = ax.plot([], [], color=COLORS["predicted"], label="bound (1 + 2r/ε)^d", **STYLE["line"])
    (grid,) = ax.plot([], [], "o", color=COLORS["measured"], ms=4, label="grid εZ^d (exact)")
    (lattice,) = ax.plot([], [], "s", color=COLORS["random"], ms=4, mfc="none", label="densest lattice")
    (here,) = ax.plot([], [], "*", color=COLORS["current"], ms=13, label="your packing")
    ax.set_xlabel("r / ε")
    ax.set_ylabel("log10 number of points")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.set_xlim(0, x_max * 1.03)
    return dict(ax=ax, bound=bound, grid=grid, lattice=lattice, here=here)


def update_packing_curves(art, ratios, log10_bound, log10_grid, log10_lattice, *, y_max):
    """Set the three curves (one dimension d) against r/eps; y spans 0..``y_max``."""
    art["bound"].set_data(ratios, log10_bound)
    art["grid"].set_data(ratios, log10_grid)
    art["lattice"].set_data(ratios, log10_lattice)
    art["ax"].set_ylim(-0.1, float(y_max) * 1.05)
    return art


def update_packing_here(art, ratio, log10_count):
    """Move the star to the packing shown (r/eps, log10 of its number of points)."""
    art["here"].set_data([ratio], [log10_count])
    return art


# ---------------------------------------------------------------------------------------------
# precision: perturbations below eps, and distinct outputs of denser prompts
# ---------------------------------------------------------------------------------------------

def plot_perturbation(ax):
    """(a) Fractions of random directions with the input, and the greedy output, unchanged
    against perturbation size / eps (log x); the input precision eps marked."""
    (same_in,) = ax.plot([], [], "s", color=COLORS["random"], mfc="none", label="input unchanged (bit for bit)")
    (same_out,) = ax.plot([], [], "o", color=COLORS["measured"], label="same greedy output")
    eps_line = ax.axvline(1.0, **STYLE["threshold"], label="input precision ε")
    ax.set_xscale("log")
    ax.set_xlim(1e-2, 1e9)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("perturbation size / ε")
    ax.set_ylabel("fraction of random directions")
    ax.set_title("(a) prompts closer than ε", fontsize=STYLE["font"], loc="left")
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    return dict(ax=ax, same_input=same_in, same_output=same_out, eps_line=eps_line)


def update_perturbation(art, x, same_input, same_output):
    """Show the fractions at sizes ``x`` (in units of eps); x spans the data."""
    x = np.asarray(x, dtype=float)
    art["same_input"].set_data(x, same_input)
    art["same_output"].set_data(x, same_output)
    if x.size:
        art["ax"].set_xlim(x.min() / 2, x.max() * 2)
    return art


def plot_saturation(ax):
    """(b) Distinct greedy outputs against the number of prompts (log-log), with the diagonal
    'every prompt a new output'."""
    (diag,) = ax.plot([], [], **STYLE["refline"], label="every prompt a new output")
    (distinct,) = ax.plot([], [], "o-", color=COLORS["measured"], label="distinct outputs (measured)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(2, 2e4)
    ax.set_ylim(0.8, 2e4)
    ax.set_xlabel("number of prompts in the region (k²)")
    ax.set_ylabel("distinct greedy outputs")
    ax.set_title("(b) denser prompts, same outputs", fontsize=STYLE["font"], loc="left")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return dict(ax=ax, diag=diag, distinct=distinct)


def update_saturation(art, prompts, distinct):
    """Show the distinct-output counts for each number of prompts; axes span the data."""
    p = np.asarray(prompts, dtype=float)
    art["diag"].set_data(p, p)
    art["distinct"].set_data(p, distinct)
    if p.size:
        art["ax"].set_xlim(p.min() / 1.5, p.max() * 1.5)
        art["ax"].set_ylim(0.8, p.max() * 1.5)
    return art
