"""Notebook 01: the counting bound explorer of [A] (docs/paper.md, section 2)."""
from __future__ import annotations

import math

import ipywidgets as W

from accesslib.apps.base import App, exact_value, is_echo, set_exact
from accesslib.plots import bounds as plotting
from accesslib.plots.style import animated
from accesslib.results import reference
from accesslib.theory import bounds

_DESC = {"description_width": "150px"}

CUSTOM = "custom"
#: ε from a number format: ε = r × its unit roundoff. [A]'s choice for every model is the fp16
#: roundoff (ε = r·2^-11), so "fp16" *is* the paper's setting: one button, not two.
DTYPE_OPTIONS = [("fp16 = [A]", bounds.PAPER_DTYPE), ("bf16", "bfloat16"), ("fp32", "float32"),
                 ("custom ε", CUSTOM)]
DTYPE_TOOLTIPS = ["ε = r·2⁻¹¹, half-precision (fp16) rounding: the choice of [A] for every model",
                  "ε = r·2⁻⁸, bfloat16 rounding (8 bits of mantissa)",
                  "ε = r·2⁻²⁴, float32 rounding (24 bits of mantissa)",
                  "set ε by hand with the ε slider"]
#: the preset menu's entry for settings that are not one of [A]'s models
NO_PRESET = "custom"
DEFAULT_PRESET = "EleutherAI/pythia-160m"
VOCAB_MAX = 1_000_000


def _short(name):
    return name.split("/")[-1]


def dtype_option(dtype):
    """The dtype button for a dtype name: every fp16 name is [A]'s choice (the same ε)."""
    key = bounds.canonical_dtype(dtype)
    return bounds.PAPER_DTYPE if key == "float16" else key


class BoundsApp(App):
    """Explore the counting bound N <= (1 + 2r/eps)^(d*m) and its threshold n* = C*m.

    Sliders: d, |V| (log, with a box that takes the exact number), eps (log), r, m; dtype
    presets for eps (eps = r * unit roundoff, :func:`accesslib.theory.bounds.eps_for_dtype`;
    "fp16" is [A]'s choice); model presets from :mod:`accesslib.results.reference` (d, |V|,
    r = r_inf, eps = r * 2^-11 as in [A]). Moving d, |V|, r or eps away from the preset's
    values turns the preset menu to "custom" and puts the published comparison away (no
    measured slope belongs to a custom configuration); coming back to them brings it back.
    Panels: (a) log10 N, (b) log10 of the accessible-fraction bound against n with n* marked,
    (c) n* = C*m against m with the preset's published n50 points and the theory/experiment
    ratio.
    """

    export_name = "nb01-bounds"
    #: short enough that the controls and the whole figure fit one 1280x800 laptop screen
    figsize = (10.4, 5.2)

    def __init__(self, *, preset=DEFAULT_PRESET, m=1, canvas="auto"):
        super().__init__(canvas=canvas)
        self.models = {r["name"]: r for r in reference.models()}
        self.n50 = reference.n50_points()
        self._base = None          # the preset the settings came from (None: none)
        self._auto_preset = False  # True while the app itself moves the preset menu
        lay = W.Layout(width="460px")
        self.d = W.IntSlider(value=768, min=1, max=8192, step=1, description="d (model width)",
                             style=_DESC, layout=lay, continuous_update=True)
        # |V|: a log slider to sweep decades, and a box that holds the exact integer (a log
        # slider's own readout snaps a typed value to its step grid: 50304 would become 50307)
        self.vocab = W.FloatLogSlider(value=50304, base=10, min=math.log10(2), max=math.log10(VOCAB_MAX),
                                      step=0.0001, description="|V| (vocabulary)", readout=False,
                                      style=_DESC, layout=W.Layout(width="366px"))
        self.vocab_box = W.BoundedIntText(value=50304, min=2, max=VOCAB_MAX, step=1,
                                          layout=W.Layout(width="90px"), tooltip="|V|: type the exact number")
        self.m = W.IntSlider(value=m, min=0, max=64, step=1, description="m (prompt vectors)",
                             style=_DESC, layout=lay)
        self.r = W.FloatSlider(value=22.45, min=0, max=300, step=0.05, description="r (support radius)",
                               readout_format=".2f", style=_DESC, layout=lay)
        self.eps = W.FloatLogSlider(value=22.45 * 2.0**-11, base=10, min=-10, max=2, step=0.001,
                                    description="ε (precision)", readout_format=".3g",
                                    style=_DESC, layout=lay)
        self.dtype = W.ToggleButtons(options=DTYPE_OPTIONS, value=bounds.PAPER_DTYPE, tooltips=DTYPE_TOOLTIPS,
                                     style={"button_width": "84px"})
        self.preset = W.Dropdown(options=[NO_PRESET] + list(self.models), value=NO_PRESET,
                                 description="model preset", style=_DESC, layout=W.Layout(width="460px"))
        self.controls.children = [
            # the label outside the buttons: a ToggleButtons description sits above them
            W.HBox([self.preset, W.Label("ε from dtype", layout=W.Layout(margin="0 6px 0 16px")), self.dtype],
                   layout=W.Layout(flex_flow="row wrap", align_items="center")),
            W.HBox([W.VBox([self.d, W.HBox([self.vocab, self.vocab_box]), self.m]), W.VBox([self.r, self.eps])],
                   layout=W.Layout(flex_flow="row wrap")),
        ]
        set_exact(self.vocab, 50304)
        set_exact(self.eps, 22.45 * 2.0**-11)
        self._build_figure()
        self.d.observe(self.refresh, names="value")
        self.vocab.observe(self._on_vocab_slider, names="value")
        self.vocab_box.observe(self._on_vocab_box, names="value")
        self.m.observe(self.refresh, names="value")
        self.r.observe(self._on_r, names="value")
        self.eps.observe(self._on_eps, names="value")
        self.dtype.observe(self._on_dtype, names="value")
        self.preset.observe(self._on_preset, names="value")
        if preset not in (None, NO_PRESET):
            self.preset.value = preset   # sets d, |V|, r, eps and draws
        else:
            self.refresh()

    # -- figure -----------------------------------------------------------------------------
    def _build_figure(self):
        fig = self.fig
        gs = fig.add_gridspec(2, 2, height_ratios=[1, 4.6], hspace=0.62, wspace=0.24,
                              left=0.09, right=0.975, top=0.9, bottom=0.1)
        ax_a = fig.add_subplot(gs[0, :])
        ax_b = fig.add_subplot(gs[1, 0])
        ax_c = fig.add_subplot(gs[1, 1])
        p = self.params_unchecked()
        self._shown_preset = None
        self.art_a = plotting.plot_accessible_count(ax_a, 0.0)
        self.art_b = plotting.plot_fraction_bound(ax_b, 1, 768, 50304, 22.45 * 2.0**-11, 22.45)
        self.art_c = plotting.plot_threshold_vs_m(ax_c, 0.0, p["m"])

    def animated_artists(self):
        return [a for art in (self.art_a, self.art_b, self.art_c) for a in animated(art)]

    # -- parameters -------------------------------------------------------------------------
    def params_unchecked(self):
        return dict(d=int(self.d.value), vocab_size=int(self.vocab_box.value),
                    eps=float(exact_value(self.eps)), r=float(self.r.value), m=int(self.m.value))

    def params(self):
        """Current (d, vocab_size, eps, r, m), validated by accesslib.theory.bounds (ValueError)."""
        p = self.params_unchecked()
        if self.dtype.value != CUSTOM:
            # the dtype preset defines eps from r: r = 0 has no relative precision
            if p["r"] <= 0:
                raise ValueError(f"r must be > 0 when ε comes from a dtype (ε = r × unit roundoff); "
                                 f"got r = {p['r']:g}. Raise r, or choose 'custom ε'.")
            p["eps"] = bounds.eps_for_dtype(self.dtype.value, p["r"])
        return p

    def set(self, **values):
        """Set several controls at once (d, vocab_size, eps, r, m, dtype, preset); one update."""
        names = {"d": self.d, "vocab_size": self.vocab_box, "eps": self.eps, "r": self.r, "m": self.m,
                 "dtype": self.dtype, "preset": self.preset}
        unknown = set(values) - set(names)
        if unknown:
            raise ValueError(f"unknown control(s) {sorted(unknown)}; known: {sorted(names)}")
        # a preset first (it sets d, |V|, r, eps), then the explicit values over it
        order = sorted(values, key=lambda k: (k != "preset", k == "eps"))
        with self.hold():
            for k in order:
                if k == "preset" and self.preset.value == values[k]:
                    self._apply_preset(values[k])   # re-apply: the user may have moved sliders
                elif k == "eps":
                    set_exact(names[k], values[k])
                elif k == "dtype" and values[k] != CUSTOM:
                    names[k].value = dtype_option(values[k])
                else:
                    names[k].value = values[k]
        return self

    # -- callbacks --------------------------------------------------------------------------
    def _sync_eps(self):
        """With a dtype preset, eps follows r (eps = r * unit roundoff)."""
        if self.dtype.value == CUSTOM:
            return
        r = float(self.r.value)
        if r > 0:
            eps = bounds.eps_for_dtype(self.dtype.value, r)
            with self.hold():
                self._setting_eps = True
                try:
                    set_exact(self.eps, min(max(eps, 10.0**self.eps.min), 10.0**self.eps.max))
                finally:
                    self._setting_eps = False

    def _on_r(self, change):
        with self.hold():
            self._sync_eps()

    def _on_dtype(self, change):
        with self.hold():
            self._sync_eps()

    def _on_eps(self, change):
        if getattr(self, "_setting_eps", False):
            return
        if self.dtype.value != CUSTOM and is_echo(self.eps, change["new"]):
            return   # the browser snapped our value to its step grid: not a user move
        # the user moved eps by hand: it no longer follows a dtype
        if self.dtype.value != CUSTOM:
            with self.hold():
                self.dtype.value = CUSTOM
        else:
            self.refresh()

    def _on_vocab_slider(self, change):
        if is_echo(self.vocab, change["new"]):
            return   # our own value, snapped by the browser to the slider's grid
        n = min(max(int(round(change["new"])), self.vocab_box.min), self.vocab_box.max)
        self.vocab._accesslib_exact = float(n)
        if self.vocab_box.value == n:
            self.refresh()
        else:
            self.vocab_box.value = n   # -> _on_vocab_box -> refresh

    def _on_vocab_box(self, change):
        with self.hold():
            if exact_value(self.vocab) != change["new"]:
                set_exact(self.vocab, change["new"])

    def _on_preset(self, change):
        if self._auto_preset:
            return
        if change["new"] == NO_PRESET:
            self._base = None   # chosen by hand: stay custom even on a preset's values
        self._apply_preset(change["new"])

    def _apply_preset(self, name):
        if name == NO_PRESET:
            self.refresh()
            return
        row = self.models[name]
        self._base = name
        with self.hold():
            if self.preset.value != name:
                self._set_preset(name)
            self.d.value = row["d"]
            self.vocab_box.value = row["vocab_size"]
            set_exact(self.vocab, row["vocab_size"])
            if row.get("r_inf"):
                self.r.value = row["r_inf"]
            self.dtype.value = bounds.PAPER_DTYPE
            self._sync_eps()

    # -- presets ----------------------------------------------------------------------------
    def _set_preset(self, value):
        """Move the preset menu without applying a preset."""
        self._auto_preset = True
        try:
            self.preset.value = value
        finally:
            self._auto_preset = False

    def departures(self, p=None) -> list[str]:
        """What differs from the preset the settings came from ([] when they are its values): the
        names of the controls among d, |V|, r, ε moved away from [A]'s configuration."""
        if self._base is None:
            return ["no preset"]
        row, p = self.models[self._base], p or self.params_unchecked()
        out = [k for k, key in (("d", "d"), ("|V|", "vocab_size")) if p[key] != row[key]]
        if row.get("r_inf") and abs(p["r"] - row["r_inf"]) > self.r.step / 2 + 1e-9:
            out.append("r")
        if self.dtype.value != bounds.PAPER_DTYPE:
            out.append("ε")
        return out

    def _sync_preset(self, p):
        """The preset menu says "custom" as soon as d, |V|, r or ε leave the preset's values, and
        the preset's name again when they come back."""
        if self._base is None:
            return
        want = NO_PRESET if self.departures(p) else self._base
        if self.preset.value != want:
            self._set_preset(want)

    # -- the update -------------------------------------------------------------------------
    def _published(self):
        """The selected preset's published n50 points and measured slopes, per dataset."""
        name = self.preset.value
        if name == NO_PRESET:
            return {}, None
        row = self.models[name]
        out = {}
        for ds, key in (("PG19", "slope_pg19"), ("Random", "slope_random")):
            pts = [p for p in self.n50 if p["model"] == name and p["dataset"] == ds]
            out[ds] = dict(m=pts[0]["m"] if pts else [], n50=pts[0]["n50"] if pts else [],
                           slope=row.get(key), label=f"{ds}: n50 published ({_short(name)})")
        return out, row

    def update(self):
        p = self.params()
        self._sync_preset(p)
        d, V, eps, r, m = p["d"], p["vocab_size"], p["eps"], p["r"], p["m"]
        log10_n = bounds.log10_accessible(d, eps, r, m)
        C = bounds.slope(d, V, eps, r)
        ns = bounds.n_star(m, d, V, eps, r)
        n50 = bounds.n50_bound(m, d, V, eps, r)
        self.values = dict(log10_accessible=log10_n, C=C, n_star=ns, n50_bound=n50, **p)

        plotting.update_accessible_count(self.art_a, log10_n, extra=f"$= |V|^{{{ns:.1f}}}$")
        plotting.update_fraction_bound(self.art_b, m, d, V, eps, r)
        published, row = self._published()
        ratios = []
        if row is not None:
            for ds, key in (("PG19", "slope_pg19"), ("Random", "slope_random")):
                a = row.get(key)
                if a:
                    ratios.append((ds, a, bounds.theory_ratio(C, a)))
        # theory / experiment: the bound's slope C over the measured slope a
        self.ratio_text = "\n".join([f"C = {C:,.1f} tokens/vector"] + [
            f"C / a({ds}) = {q:.1f}×" for ds, a, q in ratios] + (
            ["custom settings:", "no published n50 to compare"] if row is None else []))
        ratio_html = "".join(f" &nbsp;·&nbsp; C / a({ds}) = <b>{q:.1f}×</b> (a = {a:g})"
                             for ds, a, q in ratios)
        if row is None:
            ratio_html = " &nbsp;·&nbsp; <i>custom settings: no published slope to compare with</i>"
        if self.preset.value != self._shown_preset:
            # new published series and legend: the background changes
            plotting.update_n50_points(self.art_c, published)
            self._shown_preset = self.preset.value
            self.invalidate()
        plotting.update_threshold_vs_m(self.art_c, C, m, text=self.ratio_text)

        self.readout.value = (
            '<div style="font-size:105%;line-height:1.6">'
            f"<b>log10 N = {log10_n:,.1f}</b> &nbsp;(at most 10<sup>{log10_n:,.1f}</sup> different outputs) "
            f"&nbsp;·&nbsp; C = <b>{C:,.1f}</b> tokens/vector &nbsp;·&nbsp; n* = C·m = <b>{ns:,.1f}</b> "
            f"&nbsp;·&nbsp; n50 ≤ {n50:,.1f}{ratio_html}</div>")
        eps_note = (f"ε = r·{bounds.UNIT_ROUNDOFF[bounds.canonical_dtype(self.dtype.value)]:.3g} "
                    f"({dict((v, k) for k, v in DTYPE_OPTIONS)[self.dtype.value]})"
                    if self.dtype.value != CUSTOM else f"ε = {eps:.3g} (custom)")
        if row is not None:
            model = f"preset {row['name']} ([A]'s values)"
            if not row.get("r_inf"):
                model += "; r_inf not published for this model, r kept"
        elif self._base is not None:
            model = (f"custom: {', '.join(self.departures(p))} moved away from {_short(self._base)}; "
                     "no published measurement to compare with")
        else:
            model = "custom settings: no published measurement to compare with"
        self.set_status(f"{model} · d = {d}, |V| = {V:,}, r = {r:g}, {eps_note}, m = {m} · "
                        f"1 + 2r/ε = {1 + 2 * r / eps:,.4g}")
        self.redraw()

    def data_rows(self) -> list[dict]:
        """A "settings" row (d, |V|, ε, r, m and the bound's C, n*, log10 N, n50 bound), then
        panel (b)'s curve (n, log10 of the reachable share) as drawn, then panel (c): n* = C·m
        at m = 0, 1, ... up to the axis and the preset's published n50 points."""
        v = self.values
        keys = ("d", "vocab_size", "eps", "r", "m", "C", "n_star", "log10_accessible", "n50_bound")
        rows = [dict(panel="settings", **{k: v[k] for k in keys})]
        n, y = self.art_b["line"].get_data()
        rows += [dict(panel="(b) reachable share", n=float(a), log10_fraction=float(b)) for a, b in zip(n, y)]
        m_max = self.art_c["ax"].get_xlim()[1]
        rows += [dict(panel="(c) n* = C·m", m=k, n_star=v["C"] * k) for k in range(int(m_max) + 1)]
        published, _ = self._published()
        for ds, data in published.items():
            rows += [dict(panel=f"(c) published n50 ({ds})", m=m, n50=y) for m, y in zip(data["m"], data["n50"])]
        return rows
