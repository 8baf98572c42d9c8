"""App of notebook 08, "unbounded context": the mean-field view of attention, numerically.

Left: the last token's output (its d coordinates) for a random context and for a changed
context (every token written k times, the context permuted), with positions and a causal
mask as switches that break the invariance. Right: as the context grows (tokens drawn from a
fixed distribution p), the output approaches the mean-field output at p. Pure numpy: every
update is instant. See accesslib.theory.meanfield for what is and is not claimed.
"""
from __future__ import annotations

import ipywidgets as W
import numpy as np

from accesslib.theory import meanfield as mf
from accesslib.plots.bounds import COLORS, STYLE
from accesslib.apps.base import App

_DESC = {"description_width": "120px"}


class MeanFieldApp(App):
    figsize = (9.6, 4.4)

    def __init__(self, *, vocab_size=8, d=16, layers=2, seed=0, canvas="auto"):
        super().__init__(canvas=canvas)
        self.model = mf.PositionFreeTransformer.random(vocab_size=vocab_size, d=d, layers=layers, heads=2, seed=seed)
        lay = W.Layout(width="360px")
        self.N = W.IntSlider(value=40, min=2, max=400, description="context length N", style=_DESC, layout=lay)
        self.k = W.IntSlider(value=2, min=1, max=5, description="write each token k×", style=_DESC, layout=lay)
        self.permute = W.Checkbox(value=True, description="and permute the context")
        self.positions = W.Checkbox(value=False, description="add positions (sinusoidal)")
        self.causal = W.Checkbox(value=False, description="causal mask")
        self.seed = W.IntText(value=seed, description="context seed", style=_DESC, layout=lay)
        self.controls.children = [W.HBox([W.VBox([self.N, self.k, self.seed]),
                                          W.VBox([self.permute, self.positions, self.causal])])]
        a1 = self.fig.add_subplot(1, 2, 1)
        a2 = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.14, wspace=0.3)
        x = np.arange(d)
        (self.base_line,) = a1.plot(x, np.zeros(d), "-", color=COLORS["predicted"], lw=1.6, label="original context")
        (self.new_pts,) = a1.plot(x, np.zeros(d), "o", color=COLORS["pg19"], ms=6, mfc="none", mew=1.5,
                                  label="changed context")
        a1.set_xlabel("coordinate of the last token's output")
        a1.set_ylabel("value")
        a1.set_ylim(-3.5, 3.5)
        a1.legend(loc="upper right", fontsize=8, frameon=False)
        self.a1 = a1
        # right panel: computed once (fixed p, seeds): convergence to the mean-field output
        p = np.linspace(2, 1, vocab_size)
        self.p = p / p.sum()
        lengths = [4, 8, 16, 32, 64, 128, 256, 512]
        c = mf.convergence(self.model, self.p, lengths, query=0, repeats=4, seed=1)
        L = c["lengths"]
        a2.errorbar(L, c["out_dist"].mean(1), yerr=c["out_dist"].std(1), color=COLORS["measured"],
                    label="|output(N) − mean-field output at p|", **STYLE["marker"])
        a2.plot(L, c["tv"].mean(1), "s", color=COLORS["random"], mfc="none", label="distance of μ_N from p (TV)")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlabel("context length N (tokens drawn from p)")
        a2.set_title("(b) long contexts converge to a measure", fontsize=10, loc="left")
        a2.legend(loc="lower left", fontsize=8, frameon=False)
        self.convergence = c
        for w in (self.N, self.k, self.permute, self.positions, self.causal, self.seed):
            w.observe(self.refresh, names="value")
        self.refresh()

    def contexts(self):
        N, k = int(self.N.value), int(self.k.value)
        if not 2 <= N <= 2000:
            raise ValueError(f"context length N must be in 2..2000; got {N}")
        rng = np.random.default_rng(int(self.seed.value))
        ids = rng.integers(0, self.model.vocab_size, N)
        new = mf.duplicate(ids, k)
        if self.permute.value:
            new = np.concatenate([rng.permutation(new[:-1]), new[-1:]])   # query token stays last
        return ids, new

    def update(self):
        ids, new = self.contexts()
        kw = dict(positions=self.positions.value, causal=self.causal.value)
        a = mf.query_output(self.model, ids, **kw)
        b = mf.query_output(self.model, new, **kw)
        self.base_line.set_ydata(a)
        self.new_pts.set_ydata(b)
        diff = float(np.abs(a - b).max())
        self.max_diff = diff
        same = "the same" if diff < 1e-9 else "different"
        self.a1.set_title(f"(a) max |difference| = {diff:.2g}: {same}", fontsize=10, loc="left")
        broken = [w for w, on in (("positions", self.positions.value), ("a causal mask", self.causal.value)) if on]
        self.readout.value = (
            f"Context of N = {len(ids)} tokens vs {len(new)} tokens (each written {int(self.k.value)}×"
            f"{', permuted' if self.permute.value else ''}). Same empirical measure; the last token's output is "
            f"<b>{same}</b>" + (f" (with {' and '.join(broken)} the layer is no longer a function of the measure)."
                                if broken else " (position-free attention sees only the measure)."))
        self.redraw()
