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

from accesslib._checks import check_int
from accesslib.apps.base import App
from accesslib.plots import meanfield as mf_plots
from accesslib.theory import meanfield as mf

_DESC = {"description_width": "120px"}


class MeanFieldApp(App):
    figsize = (9.6, 4.4)
    export_name = "nb08-meanfield"

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
        self.art_out = mf_plots.plot_query_outputs(a1, d)
        self.base_line, self.new_pts = self.art_out["original"], self.art_out["changed"]
        self.a1 = a1
        # right panel: computed once (fixed p, seeds): convergence to the mean-field output
        p = np.linspace(2, 1, vocab_size)
        self.p = p / p.sum()
        lengths = [4, 8, 16, 32, 64, 128, 256, 512]
        c = mf.convergence(self.model, self.p, lengths, query=0, repeats=4, seed=1)
        self.art_conv = mf_plots.plot_convergence_to_measure(a2, c["lengths"], c["out_dist"], c["tv"])
        self.convergence = c
        for w in (self.N, self.k, self.permute, self.positions, self.causal, self.seed):
            w.observe(self.refresh, names="value")
        self.refresh()

    def contexts(self):
        N, k = check_int("context length N", int(self.N.value), 2, 2000), int(self.k.value)
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
        diff = float(np.abs(a - b).max())
        self.max_diff = diff
        self.outputs = (a, b, len(ids), len(new))
        mf_plots.update_query_outputs(self.art_out, a, b, diff)
        same = "the same" if diff < 1e-9 else "different"
        broken = [w for w, on in (("positions", self.positions.value), ("a causal mask", self.causal.value)) if on]
        self.readout.value = (
            f"Context of N = {len(ids)} tokens vs {len(new)} tokens (each written {int(self.k.value)}×"
            f"{', permuted' if self.permute.value else ''}). Same empirical measure; the last token's output is "
            f"<b>{same}</b>" + (f" (with {' and '.join(broken)} the layer is no longer a function of the measure)."
                                if broken else " (position-free attention sees only the measure)."))
        self.redraw()

    def data_rows(self) -> list[dict]:
        """Panel "(a) outputs": each coordinate of the last token's output for the original and
        the changed context (lengths N and N') and their difference; panel "(b) convergence":
        per context length, the output's distance from the mean-field output (mean and sd over
        repeats) and the measure's TV distance from p (mean)."""
        a, b, n0, n1 = self.outputs
        opts = dict(positions=bool(self.positions.value), causal=bool(self.causal.value))
        rows = [dict(panel="(a) outputs", coordinate=i, original=float(x), changed=float(y), difference=float(y - x),
                     N=n0, N_changed=n1, **opts) for i, (x, y) in enumerate(zip(a, b))]
        c = self.convergence
        dist, tv = np.asarray(c["out_dist"], dtype=float), np.asarray(c["tv"], dtype=float)
        rows += [dict(panel="(b) convergence", N=int(L), distance_mean=float(d.mean()), distance_sd=float(d.std()),
                      tv_mean=float(t.mean())) for L, d, t in zip(c["lengths"], dist, tv)]
        return rows
