"""Apps of notebook 07, "packing and precision" (docs/paper.md, section 2).

:class:`PackingApp` - eps-separated points in a radius-r ball (2-D or 3-D; grid, densest
lattice or greedy random packing) and their count against the bound (1 + 2r/eps)^d.
:class:`PrecisionApp` - on a real model (the default embedded one): prompts closer than the
input precision give the same output, and distinct outputs saturate as prompts get denser.
It loads torch and the model only when Run is pressed.
"""
from __future__ import annotations

import threading

import ipywidgets as W
import numpy as np

from accesslib import config as _config
from accesslib.theory import packing
from accesslib.plots.bounds import COLORS, STYLE
from accesslib.apps.base import App

_DESC = {"description_width": "110px"}


class PackingApp(App):
    """Left: the points in the ball (3-D: seen from above, colour = height). Right: log10 count."""

    figsize = (9.6, 4.6)

    def __init__(self, *, r=3.0, eps=1.0, d=2, method="lattice", canvas="auto"):
        super().__init__(canvas=canvas)
        lay = W.Layout(width="380px")
        self.r = W.FloatSlider(value=r, min=0, max=10, step=0.1, description="r (radius)", style=_DESC, layout=lay)
        self.eps = W.FloatLogSlider(value=eps, base=10, min=-0.5, max=1, step=0.02, description="ε (separation)",
                                    readout_format=".3g", style=_DESC, layout=lay)
        self.d = W.ToggleButtons(options=[("2-D", 2), ("3-D", 3)], value=d, description="dimension", style=_DESC)
        self.method = W.ToggleButtons(options=[("grid εZ^d", "grid"), ("densest lattice", "lattice"),
                                               ("greedy random", "greedy")], value=method,
                                      description="packing", style=_DESC)
        self.controls.children = [W.HBox([W.VBox([self.r, self.eps]), W.VBox([self.d, self.method])])]
        ax1 = self.fig.add_subplot(1, 2, 1)
        ax2 = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.06, right=0.98, top=0.88, bottom=0.13, wspace=0.28)
        ax1.set_aspect("equal")
        self.pts = ax1.scatter([], [], s=12, c=[], cmap="viridis", vmin=-1, vmax=1, edgecolors="none")
        from matplotlib.patches import Circle

        self.circle = Circle((0, 0), 1, fill=False, color=COLORS["predicted"], lw=1.5)
        ax1.add_patch(self.circle)
        self.ax1, self.ax2 = ax1, ax2
        ratios = np.linspace(0, 10, 41)
        self.ratios = ratios
        (self.bound_line,) = ax2.plot([], [], color=COLORS["predicted"], label="bound (1 + 2r/ε)^d", **STYLE["line"])
        (self.grid_pts,) = ax2.plot([], [], "o", color=COLORS["measured"], ms=4, label="grid εZ^d (exact)")
        (self.lat_pts,) = ax2.plot([], [], "s", color=COLORS["random"], ms=4, mfc="none", label="densest lattice")
        (self.here,) = ax2.plot([], [], "*", color=COLORS["current"], ms=13, label="your packing")
        ax2.set_xlabel("r / ε")
        ax2.set_ylabel("log10 number of points")
        ax2.legend(loc="upper left", fontsize=8, frameon=False)
        ax2.set_xlim(0, 10.3)
        for w in (self.r, self.eps, self.d, self.method):
            w.observe(self.refresh, names="value")
        self._curves_d = None
        self.refresh()

    def _curves(self, d):
        if self._curves_d != d:
            x = self.ratios
            self.bound_line.set_data(x, packing.log10_bound(x, 1.0, d))
            self.grid_pts.set_data(x, np.log10(packing.count_curve(d, x, "grid")))
            self.lat_pts.set_data(x, np.log10(packing.count_curve(d, x, "lattice")))
            self.ax2.set_ylim(-0.1, float(packing.log10_bound(10.3, 1.0, d)) * 1.05)
            self._curves_d = d
            self.invalidate()

    def update(self):
        r, eps, d, method = float(self.r.value), float(self.eps.value), int(self.d.value), self.method.value
        self._curves(d)
        if r / eps > 10:
            raise ValueError(f"r/ε must be <= 10 here (so the points stay countable on screen); got {r / eps:.3g}")
        p = packing.points(method, r, eps, d, seed=0)
        self.pts.set_offsets(p[:, :2] if len(p) else np.zeros((0, 2)))
        self.pts.set_array(p[:, 2] / max(r, 1e-9) if d == 3 and len(p) else np.zeros(len(p)))
        self.pts.set_sizes([max(2.0, 900.0 * (eps / max(r, eps)) ** 2)])
        self.circle.set_radius(max(r, 1e-9))
        lim = max(r, eps) * 1.1
        self.ax1.set_xlim(-lim, lim)
        self.ax1.set_ylim(-lim, lim)
        b = packing.bound(r, eps, d)
        self.here.set_data([r / eps], [np.log10(max(1, len(p)))])
        name = {"grid": "grid", "lattice": packing.LATTICE_NAMES[d] + " lattice", "greedy": "greedy random"}[method]
        self.ax1.set_title(f"{len(p):,} points, pairwise ≥ ε ({name})" + ("; colour = height" if d == 3 else ""),
                           fontsize=9)
        self.readout.value = (f"<b>{len(p):,}</b> ε-separated points in the radius-{r:g} ball "
                              f"(d = {d}) &nbsp;≤&nbsp; bound (1 + 2r/ε)^d = <b>{b:,.1f}</b> "
                              f"(count / bound = {len(p) / b:.2f})")
        self.invalidate()
        self.redraw()


class PrecisionApp(App):
    """Run: (a) same output below the input precision; (b) distinct outputs vs number of prompts."""

    figsize = (9.6, 4.4)

    def __init__(self, model_name=None, *, fast=None, canvas="auto"):
        super().__init__(canvas=canvas)
        self.fast = _config.FAST if fast is None else bool(fast)
        self.model_name = model_name
        self.lm = None
        self._thread = None
        self.results = {}
        lay = W.Layout(width="330px")
        self.n = W.IntSlider(value=4 if self.fast else 8, min=1, max=32, description="output tokens n",
                             style=_DESC, layout=lay)
        self.width = W.FloatLogSlider(value=2.0, base=10, min=-1, max=1.5, step=0.05, description="region width",
                                      readout_format=".3g", style=_DESC, layout=lay)
        self.kmax = W.IntSlider(value=8 if self.fast else 64, min=4, max=128, description="grid k (max)",
                                style=_DESC, layout=lay)
        self.seed = W.IntText(value=0, description="seed", style=_DESC, layout=lay)
        self.run_btn = W.Button(description="Run", button_style="primary", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=2, layout=W.Layout(width="200px"))
        self.controls.children = [W.HBox([W.VBox([self.n, self.seed]), W.VBox([self.width, self.kmax])]),
                                  W.HBox([self.run_btn, self.progress])]
        self.run_btn.on_click(lambda _: self.start())
        a1 = self.fig.add_subplot(1, 2, 1)
        a2 = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.14, wspace=0.3)
        (self.same_in,) = a1.plot([], [], "s", color=COLORS["random"], mfc="none", label="input unchanged (bit for bit)")
        (self.same_out,) = a1.plot([], [], "o", color=COLORS["measured"], label="same greedy output")
        self.eps_line = a1.axvline(1.0, **STYLE["threshold"], label="input precision ε")
        a1.set_xscale("log")
        a1.set_xlim(1e-2, 1e9)
        a1.set_ylim(-0.05, 1.05)
        a1.set_xlabel("perturbation size / ε")
        a1.set_ylabel("fraction of random directions")
        a1.set_title("(a) prompts closer than ε", fontsize=10, loc="left")
        a1.legend(loc="lower left", fontsize=8, frameon=False)
        (self.diag,) = a2.plot([], [], **STYLE["refline"], label="every prompt a new output")
        (self.distinct,) = a2.plot([], [], "o-", color=COLORS["measured"], label="distinct outputs (measured)")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlim(2, 2e4)
        a2.set_ylim(0.8, 2e4)
        a2.set_xlabel("number of prompts in the region (k²)")
        a2.set_ylabel("distinct greedy outputs")
        a2.set_title("(b) denser prompts, same outputs", fontsize=10, loc="left")
        a2.legend(loc="upper left", fontsize=8, frameon=False)
        self.a1, self.a2 = a1, a2
        self.set_status("Press Run to load the model and measure (a few seconds on a CPU).")
        self.redraw()

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def update(self):
        pass

    def start(self, *, wait=False):
        if self.running:
            return False
        self.run_btn.disabled = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()
        return True

    def join(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self):
        try:
            self.guard(self._work)
        finally:
            self.run_btn.disabled = False

    def _load(self):
        if self.lm is None:
            from accesslib.models.loading import load_model, tiny_model

            if self.model_name == "tiny":
                self.lm = tiny_model("gpt_neox", d=16, vocab_size=32)
            else:
                from accesslib.models.loading import DEFAULT_MODEL

                self.lm = load_model(self.model_name or DEFAULT_MODEL)
        return self.lm

    def _work(self):
        from accesslib.engine import precision as pr
        from accesslib.engine.copying import torch_threads

        n, seed, width, kmax = int(self.n.value), int(self.seed.value), float(self.width.value), int(self.kmax.value)
        if not 1 <= n <= 32:
            raise ValueError(f"n must be in 1..32; got {n}")
        self.progress.value = 0
        self.set_status("loading the model...")
        lm = self._load()
        with torch_threads(1):
            self.set_status("(a) perturbing a prompt in random directions...")
            a = pr.perturbation_test(lm, n=n, directions=4 if self.fast else 16, seed=seed)
            self.progress.value = 1
            x = a["radii"] / a["eps"]
            self.same_in.set_data(x, a["same_input"])
            self.same_out.set_data(x, a["same_output"])
            self.a1.set_xlim(x.min() / 2, x.max() * 2)
            self.invalidate()
            self.redraw()
            self.set_status("(b) counting distinct outputs on denser grids...")
            ks = [k for k in (2, 4, 8, 16, 32, 64, 128) if k <= kmax]
            b = pr.saturation_test(lm, n=n, width=width, ks=ks, seed=seed)
        self.progress.value = 2
        self.results = dict(perturbation=a, saturation=b)
        p = b["prompts"].astype(float)
        self.diag.set_data(p, p)
        self.distinct.set_data(p, b["distinct"])
        self.a2.set_xlim(p.min() / 1.5, p.max() * 1.5)
        self.a2.set_ylim(0.8, p.max() * 1.5)
        name = lm.facts.name if hasattr(lm, "facts") else "model"
        self.fig.suptitle(f"{name} ({a['dtype']}), m = 1 memory vector, n = {n} tokens", fontsize=10)
        last_same = x[a["same_output"] >= 1.0].max() if np.any(a["same_output"] >= 1.0) else None
        self.readout.value = (
            f"(a) ε = max|z<sub>i</sub>| × unit roundoff = {a['eps']:.3g}. Output unchanged in every direction up to "
            f"{last_same:.3g} ε. " if last_same else "") + (
            f"(b) {int(p.max()):,} prompts gave {int(b['distinct'][-1])} distinct outputs "
            f"({int(b['distinct'][0])} with {int(p.min())}).")
        self.set_status("done.")
        self.invalidate()
        self.redraw()
