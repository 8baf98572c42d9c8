"""The 2-D decoder-cell explorer of notebook 05 (docs/paper.md, section 4).

A toy decoder in d = 2: a handful of tokens, each a row w_t (and bias b_t) of the
unembedding. Left: the cells greedy decoding uses (argmax_t w_t.x + b_t, a power diagram);
right: the paper's cells (nearest row, a Voronoi partition). Both agree exactly when every
row has the same norm and no bias. The eps-grid shows the packing count of the box.
Drag a row's tip (with ``%matplotlib widget``) or use the sliders.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W
import numpy as np

from accesslib.apps.base import App, BackgroundRun, exact_value, human_date, set_exact
from accesslib.plots import geometry as gp
from accesslib.plots.style import UI_COLORS

_DESC = {"description_width": "120px"}

#: five rows with unequal norms: argmax and Voronoi cells differ visibly
DEFAULT_ROWS = np.array([[0.9, 0.1], [0.0, 0.6], [-0.7, 0.5], [-0.4, -0.8], [0.5, -0.45]])


def mean_cost(shares) -> float:
    """Mean over the tokens of −ln p_t (nats): what a uniformly random token costs on average.
    Infinite when a token owns no cell (greedy decoding can never produce it)."""
    p = np.asarray(shares, dtype=float)
    if np.any(p <= 0):
        return math.inf
    return float(-np.mean(np.log(p)))


def _cost_text(shares) -> str:
    cost = mean_cost(shares)
    if math.isfinite(cost):
        return f"{cost:.3f} nats"
    empty = [str(t) for t in np.flatnonzero(np.asarray(shares) <= 0)]
    if len(empty) == 1:
        return f"∞ (token {empty[0]} owns no cell: it can never be produced)"
    return f"∞ (tokens {', '.join(empty)} own no cell: they can never be produced)"


class GeometryApp(App):
    """Argmax vs Voronoi cells of a 2-D decoder in the box [-1, 1]^2, with an eps-grid.

    Controls: the selected token, its row's angle and norm, its bias (argmax only), eps and
    "equal norms" (sets every row to the selected norm: the two panels then agree).
    Readout: each token's cell share under both rules and the mean cost -ln p per token.
    """

    figsize = (9.0, 4.5)    # with the controls and the share table: one 1280x800 screen
    export_name = "nb05-cells"

    def __init__(self, rows=None, *, eps=0.25, res=201, canvas="auto"):
        super().__init__(canvas=canvas)
        self.rows = np.array(DEFAULT_ROWS if rows is None else rows, dtype=float)
        if self.rows.ndim != 2 or self.rows.shape[1] != 2 or not 2 <= len(self.rows) <= 10:
            raise ValueError(f"rows must be [2..10, 2]; got shape {self.rows.shape}")
        self.bias = np.zeros(len(self.rows))
        self.lo, self.hi = (-1.0, -1.0), (1.0, 1.0)
        lay = W.Layout(width="420px")
        n = len(self.rows)
        self.token = W.Dropdown(options=[(f"token {t}", t) for t in range(n)], value=0,
                                description="selected token", style=_DESC, layout=lay)
        self.angle = W.FloatSlider(min=-180, max=180, step=1, description="angle (deg)", readout_format=".0f",
                                   style=_DESC, layout=lay)
        self.norm = W.FloatSlider(min=0.0, max=1.5, step=0.01, description="norm |w|",
                                  style=_DESC, layout=lay)
        self.b = W.FloatSlider(value=0.0, min=-1, max=1, step=0.01, description="bias b (argmax)",
                               style=_DESC, layout=lay)
        self.eps = W.FloatLogSlider(value=eps, base=10, min=-2, max=0, step=0.05,
                                    description="ε (grid)", readout_format=".3g", style=_DESC,
                                    layout=lay)
        set_exact(self.eps, eps)
        self.equal = W.Button(description="equal norms, no bias", layout=W.Layout(width="200px"))
        self.controls.children = [W.HBox([W.VBox([self.token, self.angle, self.norm]),
                                          W.VBox([self.b, self.eps, self.equal])])]
        ax1 = self.fig.add_subplot(1, 2, 1)
        ax2 = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.05, right=0.98, top=0.9, bottom=0.08, wspace=0.12)
        self.art = {a: gp.plot_cells_2d(ax, self.rows, self.bias, a, self.lo, self.hi, res, eps)
                    for a, ax in (("argmax", ax1), ("voronoi", ax2))}
        self._syncing = False
        self._drag = None
        self._sync_sliders()
        self.token.observe(lambda c: self._sync_sliders() or self.refresh(), names="value")
        for w in (self.angle, self.norm, self.b):
            w.observe(self._on_row, names="value")
        self.eps.observe(self.refresh, names="value")
        self.equal.on_click(lambda _: self.guard(self.equalise))
        if self.canvas_mode == "ipympl":
            self.fig.canvas.mpl_connect("button_press_event", self._press)
            self.fig.canvas.mpl_connect("motion_notify_event", self._move)
            self.fig.canvas.mpl_connect("button_release_event", lambda e: setattr(self, "_drag", None))
        self.refresh()

    # -- state ------------------------------------------------------------------------------
    def _sync_sliders(self):
        t = self.token.value
        x, y = self.rows[t]
        self._syncing = True
        try:
            # exact values: the browser's snapped echo (0.91 for a norm of 0.9055) is no move
            set_exact(self.angle, math.degrees(math.atan2(y, x)))
            set_exact(self.norm, min(self.norm.max, float(np.hypot(x, y))))
            set_exact(self.b, float(self.bias[t]))
        finally:
            self._syncing = False

    def _on_row(self, change):
        if self._syncing:
            return
        t = self.token.value
        # each slider's exact value where it only echoes one we set (the browser snapping 0.9055 to
        # 0.91), so an echo leaves the row as it was and a move changes only what was moved
        if change is not None and change.get("owner") is self.b:   # the bias alone: the row stays as it is
            bias, row = float(exact_value(self.b)), self.rows[t]
        else:
            a = math.radians(exact_value(self.angle))
            bias, row = self.bias[t], exact_value(self.norm) * np.array([math.cos(a), math.sin(a)])
        if bias == self.bias[t] and np.allclose(row, self.rows[t], rtol=0, atol=1e-12):
            return
        self.bias[t], self.rows[t] = bias, row
        self.refresh()

    def set_row(self, t, x, y, bias=None):
        """Move token t's row to (x, y) (and its bias); one update."""
        if not 0 <= int(t) < len(self.rows):
            raise ValueError(f"t must be in [0, {len(self.rows) - 1}]; got {t!r}")
        if not (np.isfinite(x) and np.isfinite(y)):
            raise ValueError(f"x and y must be finite; got {x!r}, {y!r}")
        self.rows[int(t)] = (float(x), float(y))
        if bias is not None:
            self.bias[int(t)] = float(bias)
        with self.hold():
            self.token.value = int(t)
            self._sync_sliders()
        return self

    def equalise(self):
        """Every row gets the selected row's norm and zero bias: argmax == Voronoi."""
        r = float(np.hypot(*self.rows[self.token.value]))
        if r == 0:
            raise ValueError("the selected row has norm 0: pick a row with norm > 0 first")
        self.rows *= r / np.maximum(np.hypot(self.rows[:, 0], self.rows[:, 1]), 1e-12)[:, None]
        self.bias[:] = 0.0
        with self.hold():
            self._sync_sliders()

    # -- dragging (ipympl only) -------------------------------------------------------------
    def _press(self, event):
        if event.inaxes is None or event.xdata is None:
            return
        d = np.hypot(self.rows[:, 0] - event.xdata, self.rows[:, 1] - event.ydata)
        t = int(np.argmin(d))
        if d[t] < 0.12:
            self._drag = t
            self.token.value = t

    def _move(self, event):
        if self._drag is None or event.xdata is None:
            return
        self.guard(self.set_row, self._drag, event.xdata, event.ydata)

    # -- update -----------------------------------------------------------------------------
    def update(self):
        eps = float(exact_value(self.eps))
        if not eps > 0:
            raise ValueError(f"ε must be > 0; got {eps}")
        t = self.token.value
        sh = {a: gp.update_cells_2d(art, self.rows, self.bias if a == "argmax" else None,
                                    eps=eps, selected=t) for a, art in self.art.items()}
        self.shares = sh
        cells = math.prod(1 + (h - l) / eps for l, h in zip(self.lo, self.hi))
        rows = "".join(
            f"<tr><td>{k}</td><td>{np.hypot(*self.rows[k]):.2f}</td><td>{self.bias[k]:+.2f}</td>"
            f"<td>{100 * sh['argmax'][k]:.1f}%</td><td>{100 * sh['voronoi'][k]:.1f}%</td></tr>"
            for k in range(len(self.rows)))

        self.values = dict(cost_argmax=mean_cost(sh["argmax"]), cost_voronoi=mean_cost(sh["voronoi"]),
                           ln_V=math.log(len(self.rows)), grid_cells=cells,
                           disagree=float(np.abs(sh["argmax"] - sh["voronoi"]).sum() / 2))
        v = self.values
        self.readout.value = (
            '<div style="display:flex;flex-wrap:wrap;gap:6px 24px;align-items:flex-start">'
            '<table style="font-size:90%;border-collapse:separate;border-spacing:12px 1px;text-align:right">'
            '<tr><th>token</th><th>|w|</th><th>b</th>'
            f"<th>argmax share</th><th>Voronoi share</th></tr>{rows}</table>"
            f'<div style="line-height:1.6">mean cost per token −⟨ln p⟩: argmax <b>{_cost_text(sh["argmax"])}</b>, '
            f'Voronoi <b>{_cost_text(sh["voronoi"])}</b> (uniform: ln|V| = {v["ln_V"]:.3f})<br>'
            f"area assigned differently: <b>{100 * v['disagree']:.1f}%</b><br>"
            f"ε-grid points in the box: (1 + 2/ε)² = <b>{cells:,.0f}</b></div></div>")
        self.set_status("left: what greedy decoding picks; right: what [A] measured. "
                        "Equal norms and no bias make them identical.")
        self.redraw()

    def data_rows(self) -> list[dict]:
        """Per token: its row (x, y, |w|), bias and its cell's share of the box under each rule;
        then a "summary" row: mean costs, ln|V|, the area assigned differently, ε-grid points."""
        sh = self.shares
        rows = [dict(panel="token", token=t, x=float(x), y=float(y), norm=float(np.hypot(x, y)),
                     bias=float(self.bias[t]), argmax_share=float(sh["argmax"][t]),
                     voronoi_share=float(sh["voronoi"][t])) for t, (x, y) in enumerate(self.rows)]
        rows.append(dict(panel="summary", eps=float(exact_value(self.eps)), **self.values))
        return rows


# ---------------------------------------------------------------------------------------------
# the chosen model: cell shares and every refined slope
# ---------------------------------------------------------------------------------------------

TINY_RANDOM = "tiny random gpt_neox (from a config)"
#: the bars of the slope panel: every refinement at the dtype's ε, then the measured-ε bound
MEASURED_EPS = "measured ε"
SLOPE_ORDER = ("ball", "box", "cone", "ellipsoid", "cells", "box+cells", MEASURED_EPS)
#: which bound at the measured ε is drawn (the first the measurement allows): the box and the
#: cells on top of the counting bound, as far as the record has them
MEASURED_EPS_ORDER = ("box+cells", "cells", "box", "ball")


def model_choices():
    """Embedded models, then offline real ones, then any other model with a stored measurement
    (its geometry can be shown without the model installed), then a random tiny model."""
    out = []
    try:
        from accesslib.models import embedded
        out += embedded.names()
    except Exception:  # an optional module: the list just gets shorter
        pass
    try:
        from accesslib.models import gguf as realmodels
        out += realmodels.available()
    except Exception:
        pass
    from accesslib.results import bundles
    out += [n for n in bundles.available("cram") if n not in out]
    return out + [TINY_RANDOM]


def shipped_bundle(name):
    """``name``'s cramming bundle when it holds a geometry record the app can draw, else None
    (one file read)."""
    from accesslib.results import bundles
    try:
        b = bundles.load("cram", name)
    except ValueError:   # no bundle for this model
        return None
    rec = b.get("geometry") or {}
    return b if rec.get("cell_hits") and rec.get("slopes") else None


def shipped_geometry(name):
    """The geometry record stored in ``name``'s cramming bundle, or None."""
    b = shipped_bundle(name)
    return None if b is None else b["geometry"]


def measured_eps_bound(d, vocab_size, r_inf, rel, *, widths=None, s_conv=None, t_max=1.0,
                       around="a memory vector", slope=None) -> dict:
    """The counting bound with the measured effective ε in place of the dtype's
    (:func:`accesslib.theory.refined.measured_eps_slopes`, ε = eps_rel·r_inf), at the median of
    the thresholds ``rel`` (one per direction, inf where the output never changed up to
    ``t_max``), and the drawn bound's C at their 10% and 90% quantiles. ``slope``: the measured
    slope a, for C/a.

    -> dict(ok=True, eps_rel, eps_rel_q10, eps_rel_q90, eps, r, directions, around, slopes
    {name: C}, line (the name drawn, the first of :data:`MEASURED_EPS_ORDER` there), C,
    C_range (C at the 90% and at the 10% threshold; None where a threshold is not finite),
    slope, ratio C/a, ratios {name: C/a}); or dict(ok=False, reason) when no finite median."""
    from accesslib.theory import refined
    from accesslib.theory.stats import threshold_quantiles

    rel = np.asarray([np.inf if x is None else x for x in rel], dtype=float)
    if rel.size == 0:
        return dict(ok=False, reason="no effective-ε thresholds were measured")
    q10, q50, q90 = (float(q) for q in threshold_quantiles(rel))
    if not math.isfinite(q50):
        return dict(ok=False, reason=(f"the output of {around} did not change for most directions up to a "
                                      f"relative move of {t_max:.3g}: no finite measured ε to count with"))

    def at(eps_rel):
        return {k: v.C for k, v in refined.measured_eps_slopes(d, vocab_size, eps_rel, r_inf, widths=widths,
                                                               s_conv=s_conv).items()}

    slopes = at(q50)
    line = next(k for k in MEASURED_EPS_ORDER if k in slopes)
    C_range = tuple(at(q)[line] if math.isfinite(q) else None for q in (q90, q10))
    good = slope is not None and slope > 0
    return dict(ok=True, eps_rel=q50, eps_rel_q10=q10, eps_rel_q90=q90, eps=q50 * r_inf, r=r_inf,
                directions=int(rel.size), around=around, slopes=slopes, line=line, C=slopes[line],
                C_range=C_range, slope=slope, ratio=slopes[line] / slope if good else None,
                ratios={k: C / slope for k, C in slopes.items()} if good else {})


def bundle_measured_eps(bundle) -> dict:
    """:func:`measured_eps_bound` from a cramming bundle: its geometry record's effective-ε
    thresholds (around a crammed memory), r_inf, widths and s_conv, and its fitted slope; or
    dict(ok=False, reason) naming what is missing."""
    geo = bundle.get("geometry") or {}
    e = geo.get("effective_eps") or {}
    if not e.get("rel") or not geo.get("r_inf"):
        return dict(ok=False, reason=f"{bundle['model']}'s bundle holds no measured effective ε "
                                     "(scripts/make_bundles.py --geometry-only --effective-eps 16 measures one)")
    f = bundle["facts"]
    return measured_eps_bound(int(f["d"]), int(f["vocab_size"]), float(geo["r_inf"]), e["rel"],
                              widths=geo.get("widths"), s_conv=geo.get("s_conv"), t_max=e.get("t_max", 1.0),
                              around=e.get("around", "a memory vector"),
                              slope=(bundle.get("slope") or {}).get("slope"))


def measured_eps_html(me) -> str:
    """One line for a readout: the bound at the measured ε, each refinement with C/a."""
    if not me.get("ok"):
        return f"no bound at a measured ε: {html.escape(str(me.get('reason', 'nothing measured')))}"
    lo, hi = me["C_range"]
    if lo is not None and hi is not None:
        rng = (f"; {lo:,.1f} to {hi:,.1f} over the 10-90% thresholds ({me['eps_rel_q90']:.3g} to "
               f"{me['eps_rel_q10']:.3g})")
    else:   # the 90% threshold is not finite (the output never changed): only the upper end
        rng = f"; at most {hi:,.1f} at the 10% threshold ({me['eps_rel_q10']:.3g})" if hi is not None else ""
    each = " · ".join(f"{html.escape(k)} {C:,.1f}" + (f" ({me['ratios'][k]:.1f}×)" if k in me["ratios"] else "")
                      for k, C in me["slopes"].items() if k != me["line"])
    ratio = f", <b>C/a = {me['ratio']:.1f}×</b> (a = {me['slope']:.2f})" if me["ratio"] is not None else ""
    return (f"bound at the measured ε (ε = {me['eps_rel']:.3g}·r<sub>∞</sub> = {me['eps']:.3g}, the median of "
            f"{me['directions']} directions around {html.escape(str(me['around']))}): "
            f"{html.escape(me['line'])} C = <b>{me['C']:,.1f}</b>{ratio}{rng}" + (f"; also {each}" if each else ""))


def _eff_view(rel, t_max, around):
    from accesslib.theory.stats import describe_threshold, threshold_quantiles
    rel = np.asarray(rel, dtype=float)
    q10, q50, q90 = (describe_threshold(x, t_max) for x in threshold_quantiles(rel))
    return dict(q10=q10, q50=q50, q90=q90, directions=int(rel.size), around=around)


def view_from_report(rep, eff=None, slope=None) -> dict:
    """What :class:`ModelGeometryApp` shows, from a fresh :class:`accesslib.engine.geometry.GeometryReport`
    (and :class:`~accesslib.engine.geometry.EffectiveEps`, measured around a random memory
    vector); ``slope``: the model's measured slope a (its bundle's), for C/a."""
    st, sc = rep.stats, rep.sconv
    around = "a random memory vector"
    measured = (dict(ok=False, reason="the effective ε was not measured in this run") if eff is None else
                measured_eps_bound(rep.d, rep.vocab_size, st.r_inf, eff.rel, widths=st.widths, s_conv=sc.s_conv,
                                   t_max=eff.t_max, around=around, slope=slope))
    return dict(name=rep.name, source="", d=rep.d, vocab_size=rep.vocab_size, n=st.n, r_inf=st.r_inf,
                r_2=st.r_2, min_cos=st.min_cos, phi=float(st.phi), eps=rep.eps, dtype=rep.dtype,
                shares=rep.cells.shares, n_cells=rep.cells.n_samples, zero_hit=rep.cells.zero_hit,
                s_conv=sc.s_conv, s_conv_drop=(rep.sconv_drop or sc).s_conv, rule=sc.zero_hit,
                sample_limited=bool(sc.sample_limited), slopes={k: s.C for k, s in rep.slopes.items()},
                convergence=list(rep.convergence), measured=measured,
                eff=None if eff is None else _eff_view(eff.rel, eff.t_max, around))


def view_from_record(bundle) -> dict:
    """The same view from a bundle's geometry record (:func:`accesslib.results.bundles.geometry_record`):
    the stored hit counts give the histogram, the stored slopes the bars."""
    rec = bundle["geometry"]
    V = int(bundle["facts"]["vocab_size"])
    n_cells = int(rec["cells_n_samples"])
    counts = np.zeros(V)
    counts[np.asarray(rec["cell_hits"]["tokens"], dtype=int)] = rec["cell_hits"]["counts"]
    zero = int(np.sum(counts == 0))
    e = rec.get("effective_eps")
    eff = None
    if e and e.get("rel"):
        eff = _eff_view([np.inf if x is None else x for x in e["rel"]], e.get("t_max", 1.0),
                        e.get("around", "a memory vector"))
    return dict(name=bundle["model"], source=" (stored)", d=int(bundle["facts"]["d"]), vocab_size=V,
                n=int(rec["n_samples"]), r_inf=rec["r_inf"], r_2=rec["r_2"], min_cos=rec["min_cos"],
                phi=rec["phi"], eps=rec["eps"], dtype=rec.get("dtype", "paper"), shares=counts / n_cells,
                n_cells=n_cells, zero_hit=zero, s_conv=rec["s_conv"], s_conv_drop=rec.get("s_conv_drop"),
                rule=rec.get("s_conv_zero_hit", "drop"),
                sample_limited=bool(rec.get("cells_sample_limited")), slopes=dict(rec["slopes"]), eff=eff,
                convergence=list(rec.get("s_conv_convergence") or []), measured=bundle_measured_eps(bundle),
                created=bundle.get("created", "?"))


class ModelGeometryApp(App):
    """Support statistics, decoder-cell shares and refined slopes of a chosen model.

    Run (background thread) samples final hidden states on random tokens
    (:func:`accesslib.engine.geometry.sample_support`), fits the support
    (:func:`~accesslib.engine.geometry.support_stats`), draws Monte Carlo cell shares in the box
    (:func:`~accesslib.engine.geometry.cell_shares`, argmax or Voronoi) and fits s_conv. Left: the
    histogram of log10 p_t; middle: s_conv refitted on the first n of the N samples (does N
    suffice?); right: the slope C under each refinement (bars: predicted), the last (hatched) at
    the measured effective ε in place of the dtype's (:func:`measured_eps_bound`).

    Choosing a model (and opening the page, with the default model) draws the measurement
    stored in its bundle when it has one, else empty panels; nothing is computed until Run.
    The readout is one line (model, s_conv, tokens never hit); support, both s_conv rules, the
    convergence and the effective ε are folded in an HTML ``<details>``.
    """

    figsize = (10.0, 3.7)   # fits a 1280 px wide screen
    export_name = "nb05-model-geometry"

    def __init__(self, *, model=None, canvas="auto"):
        super().__init__(canvas=canvas)
        from accesslib.config import FAST
        choices = model_choices()
        lay = W.Layout(width="420px")
        if model not in choices:
            from accesslib.models import embedded
            model = embedded.DEFAULT if embedded.DEFAULT in choices else choices[0]
        self.model = W.Dropdown(options=choices, value=model, description="model", style=_DESC, layout=lay)
        self.per_length = W.IntSlider(value=8 if FAST else 48, min=4, max=512, step=4,
                                      description="samples / length", style=_DESC, layout=lay)
        self.n_cells = W.IntSlider(value=2000 if FAST else 16384, min=1000, max=200_000, step=1000,
                                   description="cell samples N", style=_DESC, layout=lay)
        self.assign = W.ToggleButtons(options=[("argmax (greedy)", "argmax"), ("Voronoi ([A])", "voronoi")],
                                      value="argmax", description="cells", style=_DESC)
        self.run_btn = W.Button(description="Run", button_style="primary")
        self.shipped_btn = W.Button(description="Stored measurement", disabled=True)
        self.progress = W.IntProgress(value=0, min=0, max=5, layout=W.Layout(width="200px"))
        self.runner = BackgroundRun(self, run_buttons=[self.run_btn], progress=self.progress,
                                    name="accesslib-geometry")
        self.stop_btn = self.runner.stop_button
        self.controls.children = [W.HBox([W.VBox([self.model, self.per_length, self.n_cells]),
                                          W.VBox([self.assign, W.HBox([self.run_btn, self.stop_btn, self.shipped_btn]),
                                                  self.progress])])]
        ax1 = self.fig.add_subplot(1, 3, 1)
        ax3 = self.fig.add_subplot(1, 3, 2)
        ax2 = self.fig.add_subplot(1, 3, 3)
        # laid out at each draw: tick labels as wide as a large vocabulary's counts stay inside
        self.fig.set_layout_engine("constrained", w_pad=0.04, wspace=0.04)
        self.hist = gp.plot_share_histogram(ax1)
        self.conv = gp.plot_convergence(ax3)
        self.bars = gp.plot_slope_bars(ax2, SLOPE_ORDER, hatched=(MEASURED_EPS,))
        self.report = None
        self.eff = None
        self.view = None
        self.run_btn.on_click(lambda _: self.guard(self.start))
        self.shipped_btn.on_click(lambda _: self.guard(self.show_shipped))
        self.model.observe(self._on_model, names="value")
        self._on_model()   # the chosen model's stored measurement, drawn at once (nothing computed)

    def update(self):
        v = self.view
        if v is None:
            return
        gp.update_share_histogram(self.hist, v["shares"], v["n_cells"])
        me = v.get("measured") or {}
        gp.update_slope_bars(self.bars, dict(v["slopes"], **({MEASURED_EPS: me["C"]} if me.get("ok") else {})))
        gp.update_convergence(self.conv, v.get("convergence") or [], v["vocab_size"])
        warn = ""
        if v["sample_limited"]:
            from accesslib.theory.stats import zero_hit_share
            warn = (f"<br><span style='color:{UI_COLORS['warning']}'>⚠ "
                    f"{v['zero_hit'] / v['vocab_size']:.0%} of the tokens were never hit: the cell bound is set "
                    f"by N (|s<sub>conv</sub>| ≈ ln(N/3) = {-math.log(zero_hit_share(v['n_cells'])):.2f}) "
                    "and tightens as N grows</span>")
        eff = ""
        if v.get("eff") is not None:
            e = v["eff"]
            eff = (f"<br>effective ε (smallest relative change of {html.escape(str(e['around']))} that "
                   f"changes the greedy output, {e['directions']} directions): median "
                   f"<b>{html.escape(str(e['q50']))}</b> (10-90%: {html.escape(str(e['q10']))} to "
                   f"{html.escape(str(e['q90']))}) vs ε/r<sub>∞</sub> = "
                   f"{v['eps'] / v['r_inf']:.3g} from {html.escape(str(v['dtype']))}")
        conv = v.get("convergence") or []
        if len(conv) > 1:
            from accesslib.theory.stats import describe_convergence
            steps = " → ".join(f"{r['s_conv']:.2f}" for r in conv)
            conv = (f"<br>s<sub>conv</sub> on the first n of the N samples (n = {conv[0]['n']:,} ... "
                    f"{conv[-1]['n']:,}, each about twice the last): {steps}; {describe_convergence(conv)}")
        else:
            conv = ""
        if v["rule"] == "bound":
            rule = "shares at their 95% upper bounds"
            if v["s_conv_drop"] is not None:
                rule += f"; [A]'s rule, never-hit tokens dropped: {v['s_conv_drop']:.2f}"
        else:
            rule = "[A]'s rule: never-hit tokens dropped"
        # short readout: the numbers the panels show; the rest folded (a <details> the reader opens)
        self.readout.value = (
            f"<b>{html.escape(str(v['name']))}</b>{html.escape(str(v['source']))}: d = {v['d']}, "
            f"|V| = {v['vocab_size']:,} · s<sub>conv</sub> = <b>{v['s_conv']:.2f}</b> nats/token "
            f"(ln|V| = {math.log(v['vocab_size']):.2f}) · {v['zero_hit']:,} of {v['vocab_size']:,} tokens "
            f"never hit in N = {v['n_cells']:,}{warn}"
            "<details><summary style='cursor:pointer'>more: support, both s<sub>conv</sub> rules, "
            "convergence, effective ε and the bound at it</summary><div style='line-height:1.5;margin:2px 0 0 14px'>"
            f"support from {v['n']:,} hidden states: r<sub>∞</sub> = {v['r_inf']:.3g}, r<sub>2</sub> = "
            f"{v['r_2']:.3g}, min cos = {v['min_cos']:.3f} (φ = {math.degrees(v['phi']):.1f}°) · "
            f"ε = {v['eps']:.3g}<br>s<sub>conv</sub>: {rule}{conv}{eff}<br>{measured_eps_html(me)}</div></details>")
        self.invalidate()
        self.redraw()

    def data_rows(self) -> list[dict]:
        """What the three panels show: the histogram's bins (log10 p_t range, tokens), s_conv on
        the first n cell samples, the slope C of every bound; then a "summary" row (model, d,
        |V|, support statistics, ε, s_conv, tokens never hit). Empty before a measurement."""
        v = self.view
        if v is None:
            return []
        rows = [dict(panel="share histogram", log10_share_from=float(b.get_x()),
                     log10_share_to=float(b.get_x() + b.get_width()), tokens=int(round(b.get_height())))
                for b in self.hist["bars"] or []]
        rows += [dict(panel="s_conv vs samples", n=r["n"], s_conv=r["s_conv"], s_conv_drop=r.get("s_conv_drop"),
                      zero_hit=r.get("zero_hit")) for r in v.get("convergence") or []]
        rows += [dict(panel="slope", bound=k, C=v["slopes"].get(k)) for k in SLOPE_ORDER if k in v["slopes"]]
        me = v.get("measured") or {}
        if me.get("ok"):   # the last bar: every bound at the measured ε, the drawn one first
            rows += [dict(panel="slope at the measured ε", bound=k, C=C, drawn=k == me["line"], eps_rel=me["eps_rel"],
                          eps=me["eps"], directions=me["directions"], around=me["around"], slope=me["slope"],
                          C_over_a=me["ratios"].get(k))
                     for k, C in sorted(me["slopes"].items(), key=lambda kv: kv[0] != me["line"])]
        keys = ("d", "vocab_size", "n", "r_inf", "r_2", "min_cos", "phi", "eps", "dtype", "s_conv", "s_conv_drop",
                "rule", "n_cells", "zero_hit")
        rows.append(dict(panel="summary", model=v["name"] + v["source"], **{k: v.get(k) for k in keys}))
        return rows

    @staticmethod
    def _measured_slope(name):
        """The slope a fitted in ``name``'s cramming bundle (for C/a), or None without one."""
        b = shipped_bundle(name)
        return None if b is None else (b.get("slope") or {}).get("slope")

    def _on_model(self, *_):
        """A new model: its stored measurement when its bundle has one, else empty panels."""
        if self.is_running:   # the figure belongs to the run; the button state comes back after it
            return
        has = shipped_bundle(self.model.value) is not None
        self.shipped_btn.disabled = not has
        self.shipped_btn.tooltip = ("show the measurement stored with this model's bundle" if has else
                                    "no stored measurement for this model: press Run")
        if has:
            self.guard(self.show_shipped)
        else:
            self.clear()

    def clear(self):
        """Empty panels and readout (no measurement of the chosen model is shown)."""
        self.report, self.eff, self.view = None, None, None
        gp.clear_share_histogram(self.hist, f"nothing measured for\n{self.model.value} yet:\npress Run")
        gp.clear_convergence(self.conv)
        gp.update_slope_bars(self.bars, {})
        self.readout.value = ""
        self.set_status(f"no stored measurement of {self.model.value}: press Run to measure it")
        self.invalidate()
        self.redraw()

    def show_shipped(self):
        """Draw the geometry stored in the chosen model's bundle (no computation)."""
        name = self.model.value
        bundle = shipped_bundle(name)
        if bundle is None:
            self.set_status(f"{name} has no stored geometry: press Run to measure it")
            return
        self.report, self.eff = None, None
        self.view = view_from_record(bundle)
        self.set_status(f"stored measurement of {name} (made {human_date(self.view['created'])}); "
                        "press Run to measure again with the settings above")
        self.update()

    def start(self, wait=False):
        """Measure in the background (``wait=True``: and block until done)."""
        self.runner.start(self._work)
        if wait:
            self.wait()

    def _work(self, run):
        from accesslib.engine import geometry
        name = self.model.value
        self.set_status(f"loading {name} ...")
        if name == TINY_RANDOM:
            from accesslib.models.loading import tiny_model
            lm = tiny_model("gpt_neox", d=64, vocab_size=512)
        else:
            from accesslib.models.gguf import NotInstalledError
            from accesslib.models.loading import load_model
            try:
                lm = load_model(name)
            except NotInstalledError as e:   # offered for its stored measurement only
                raise ValueError(f"{name} is not installed here, so it cannot be measured: {e}; "
                                 "its stored measurement needs nothing: press Stored measurement") from None
        run.set_progress(1)
        if run.stop_requested:
            return "after loading the model"
        self.set_status("sampling hidden states on random tokens ...")
        x = geometry.sample_support(lm, [4, 16, 64], self.per_length.value, progress=False)
        run.set_progress(2)
        if run.stop_requested:
            return "after sampling hidden states"
        self.set_status("Monte Carlo cell shares ...")
        self.report = geometry.geometry_report(lm, name=name, samples=x, n_cells=self.n_cells.value,
                                               assign=self.assign.value, progress=False)
        self.eff = None
        self.view = view_from_report(self.report)
        run.set_progress(4)
        if run.stop_requested:
            self.update()
            return "before the effective-ε measurement"
        self.set_status("effective ε: perturbing a memory vector until the greedy output changes ...")
        self.eff = geometry.effective_eps(lm, n_directions=8, n_tokens=4)
        self.view = view_from_report(self.report, self.eff, slope=self._measured_slope(name))
        run.set_progress(5)
        self.update()
        return None
