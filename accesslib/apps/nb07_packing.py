"""Apps of notebook 07, "packing and precision" (docs/paper.md, section 2).

:class:`PackingApp` - eps-separated points in a radius-r ball (2-D or 3-D; grid, densest
lattice or greedy random packing) and their count against the bound (1 + 2r/eps)^d.
:class:`PrecisionApp` - on a real model (the default embedded one): prompts closer than the
input precision give the same output, and distinct outputs saturate as prompts get denser.
It loads torch and the model only when Run is pressed.
"""
from __future__ import annotations

import ipywidgets as W
import numpy as np

from accesslib import config as _config
from accesslib._checks import check_int
from accesslib.apps.base import App, BackgroundRun
from accesslib.plots import packing as pk_plots
from accesslib.theory import packing

_DESC = {"description_width": "110px"}
#: the largest r/ε the packing app draws (the points stay countable on screen)
MAX_RATIO = 10.0


class PackingApp(App):
    """Left: the points in the ball (3-D: seen from above, colour = height). Right: log10 count."""

    figsize = (9.6, 4.6)
    export_name = "nb07-packing"

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
        self.ratios = np.linspace(0, 10, 41)
        self.art_ball = pk_plots.plot_ball_points(ax1)
        self.art_counts = pk_plots.plot_packing_counts(ax2, x_max=float(self.ratios[-1]))
        self.ax1, self.ax2 = ax1, ax2
        self.pts, self.here = self.art_ball["points"], self.art_counts["here"]
        for w in (self.r, self.eps, self.d, self.method):
            w.observe(self.refresh, names="value")
        self._curves_d = None
        self.refresh()

    def _curves(self, d):
        if self._curves_d != d:
            x = self.ratios
            self.curves = dict(r_over_eps=x, log10_bound=packing.log10_bound(x, 1.0, d),
                               log10_grid=np.log10(packing.count_curve(d, x, "grid")),
                               log10_lattice=np.log10(packing.count_curve(d, x, "lattice")))
            pk_plots.update_packing_curves(
                self.art_counts, x, self.curves["log10_bound"], self.curves["log10_grid"],
                self.curves["log10_lattice"], y_max=float(packing.log10_bound(x[-1] * 1.03, 1.0, d)))
            self._curves_d = d
            self.invalidate()

    def update(self):
        r, eps, d, method = float(self.r.value), float(self.eps.value), int(self.d.value), self.method.value
        self._curves(d)
        # the sliders' r = 10, ε = 1 reaches the kernel as ε = 10**(±1e-16): r/ε = 10 up to rounding is fine
        if r / eps > MAX_RATIO * (1 + 1e-9):
            raise ValueError(f"r/ε must be at most {MAX_RATIO:g} here (so the points stay countable on screen): "
                             f"lower r or raise ε; got r/ε = {r / eps:.3g}")
        p = packing.points(method, r, eps, d, seed=0)
        b = packing.bound(r, eps, d)
        self.shown = dict(r=r, eps=eps, d=d, method=method, points=p, bound=b)
        pk_plots.update_packing_here(self.art_counts, r / eps, np.log10(max(1, len(p))))
        name = {"grid": "grid", "lattice": packing.LATTICE_NAMES[d] + " lattice", "greedy": "greedy random"}[method]
        pk_plots.update_ball_points(self.art_ball, p, r, eps, title=f"{len(p):,} points, pairwise ≥ ε ({name})"
                                    + ("; colour = height" if d == 3 else ""))
        self.readout.value = (f"<b>{len(p):,}</b> ε-separated points in the radius-{r:g} ball "
                              f"(d = {d}) &nbsp;≤&nbsp; bound (1 + 2r/ε)^d = <b>{b:,.1f}</b> "
                              f"(count / bound = {len(p) / b:.2f})")
        self.invalidate()
        self.redraw()

    def data_rows(self) -> list[dict]:
        """Panel "counts": log10 of the bound (1 + 2r/ε)^d and of the grid and lattice counts
        against r/ε (d as chosen); panel "this packing": r, ε, d, method, points, bound;
        panel "points": the points' coordinates (x, y, and z in 3-D)."""
        sh, c = self.shown, self.curves
        rows = [dict(panel="counts", d=sh["d"], **{k: float(c[k][i]) for k in c}) for i in range(len(c["r_over_eps"]))]
        rows.append(dict(panel="this packing", d=sh["d"], r=sh["r"], eps=sh["eps"], r_over_eps=sh["r"] / sh["eps"],
                         method=sh["method"], points=len(sh["points"]), bound=sh["bound"],
                         log10_count=float(np.log10(max(1, len(sh["points"]))))))
        rows += [dict(panel="points", d=sh["d"], **dict(zip("xyz", map(float, q)))) for q in sh["points"]]
        return rows


class PrecisionApp(App):
    """Run: (a) same output below the input precision; (b) distinct outputs vs number of prompts."""

    figsize = (9.6, 4.4)
    export_name = "nb07-precision"

    def __init__(self, model_name=None, *, fast=None, canvas="auto"):
        super().__init__(canvas=canvas)
        self.fast = _config.FAST if fast is None else bool(fast)
        self.model_name = model_name
        self.lm = None
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
        self.runner = BackgroundRun(self, run_buttons=[self.run_btn], progress=self.progress,
                                    name="accesslib-precision", stop_message="stopping after the current test ...")
        self.stop_btn = self.runner.stop_button
        self.controls.children = [W.HBox([W.VBox([self.n, self.seed]), W.VBox([self.width, self.kmax])]),
                                  W.HBox([self.run_btn, self.stop_btn, self.progress])]
        self.run_btn.on_click(lambda _: self.start())
        a1 = self.fig.add_subplot(1, 2, 1)
        a2 = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.14, wspace=0.3)
        self.art_a = pk_plots.plot_perturbation(a1)
        self.art_b = pk_plots.plot_saturation(a2)
        self.a1, self.a2 = a1, a2
        self.same_in, self.same_out = self.art_a["same_input"], self.art_a["same_output"]
        self.diag, self.distinct = self.art_b["diag"], self.art_b["distinct"]
        self.set_status("Press Run to load the model and measure (a few seconds on a CPU).")
        self.redraw()

    def update(self):
        pass

    def data_rows(self) -> list[dict]:
        """Panel "(a) perturbation": per size / ε the fractions of directions with the input and
        the greedy output unchanged; panel "(b) saturation": distinct outputs per number of
        prompts. Empty before Run."""
        rows = []
        a, b = self.results.get("perturbation"), self.results.get("saturation")
        if a is not None:
            x = np.asarray(a["radii"]) / a["eps"]
            rows += [dict(panel="(a) perturbation", size_over_eps=float(r), eps=float(a["eps"]),
                          same_input=float(si), same_output=float(so))
                     for r, si, so in zip(x, a["same_input"], a["same_output"])]
        if b is not None:
            rows += [dict(panel="(b) saturation", prompts=int(p), distinct=int(k))
                     for p, k in zip(b["prompts"], b["distinct"])]
        return rows

    def start(self, *, wait=False):
        """Measure in the background (``wait=True``: and block until done); False (and a
        message) when a run is already going."""
        if not self.guard(self.runner.start, self._work):
            return False
        if wait:
            self.wait()
        return True

    def _load(self):
        if self.lm is None:
            from accesslib.models.loading import load_model, tiny_model

            if self.model_name == "tiny":
                self.lm = tiny_model("gpt_neox", d=16, vocab_size=32)
            else:
                from accesslib.models.loading import DEFAULT_MODEL

                self.lm = load_model(self.model_name or DEFAULT_MODEL)
        return self.lm

    def _work(self, run):
        from accesslib.engine import precision as pr
        from accesslib.engine.copying import torch_threads

        n, seed, width, kmax = int(self.n.value), int(self.seed.value), float(self.width.value), int(self.kmax.value)
        check_int("n", n, 1, 32)
        self.set_status("loading the model...")
        lm = self._load()
        with torch_threads(1):
            self.set_status("(a) perturbing a prompt in random directions...")
            a = pr.perturbation_test(lm, n=n, directions=4 if self.fast else 16, seed=seed)
            run.set_progress(1)
            x = a["radii"] / a["eps"]
            pk_plots.update_perturbation(self.art_a, x, a["same_input"], a["same_output"])
            self.invalidate()
            self.redraw()
            self.results = dict(perturbation=a)
            if run.stop_requested:
                return "after (a), before counting distinct outputs"
            self.set_status("(b) counting distinct outputs on denser grids...")
            ks = [k for k in (2, 4, 8, 16, 32, 64, 128) if k <= kmax]
            b = pr.saturation_test(lm, n=n, width=width, ks=ks, seed=seed)
        run.set_progress(2)
        self.results = dict(perturbation=a, saturation=b)
        p = b["prompts"].astype(float)
        pk_plots.update_saturation(self.art_b, p, b["distinct"])
        name = lm.facts.name if hasattr(lm, "facts") else "model"
        self.fig.suptitle(f"{name} ({a['dtype']}), m = 1 memory vector, n = {n} tokens", fontsize=10)
        last_same = x[a["same_output"] >= 1.0].max() if np.any(a["same_output"] >= 1.0) else None
        self.readout.value = (
            f"(a) ε = max|z<sub>i</sub>| × unit roundoff = {a['eps']:.3g}. Output unchanged in every direction up to "
            f"{last_same:.3g} ε. " if last_same else "") + (
            f"(b) {int(p.max()):,} prompts gave {int(b['distinct'][-1])} distinct outputs "
            f"({int(b['distinct'][0])} with {int(p.min())}).")
        self.invalidate()
        self.redraw()
        return None
