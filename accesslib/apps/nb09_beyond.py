"""App of notebook 09, "beyond transformers": a Mamba and a transformer of the same width.

:class:`BeyondApp` reads the shipped bundles of the twins (:data:`accesslib.experiments.beyond.TWINS`):
their accessibility curves and n50 against m (cramming bundles ``cram-<model>.json``), the slope
a, R^2 and C/a (:func:`accesslib.experiments.beyond.twin_rows`), and the radius of the hidden
states against context length (radius bundles ``radius-<model>.json``), with the paper's caveat
about diverging hidden states tested on what was measured
(:func:`accesslib.experiments.beyond.divergence_verdict`). Nothing is computed when the page
opens: the controls only choose what is drawn.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W

from accesslib.apps.base import App
from accesslib.experiments import beyond
from accesslib.plots import beyond as beyond_plots
from accesslib.plots.beyond import TWIN_LABELS
from accesslib.results import bundles

_DESC = {"description_width": "110px"}
KINDS = ("final", "residual", "ssm")


def _fmt(v, f=".2f"):
    return format(v, f) if isinstance(v, (int, float)) and math.isfinite(v) else "–"


class BeyondApp(App):
    """Both twins' accessibility curves, n50 against m, C/a, and the radius against context length."""

    figsize = (12.0, 3.9)
    export_name = "nb09-beyond"

    def __init__(self, *, twins=None, canvas="auto"):
        super().__init__(canvas=canvas)
        self.twins = dict(twins or beyond.TWINS)
        self.bound = W.Dropdown(options=["ball", "box", "ellipsoid", "cone", "cells"], value="ball",
                                description="predicted C", style=_DESC)
        self.source = W.ToggleButtons(options=[("random tokens", "tokens"), ("held-out text", "natural")],
                                      value="tokens", description="radius inputs",
                                      style={**_DESC, "button_width": "110px"})
        self.norm = W.ToggleButtons(options=[("‖h‖₂", "r_2"), ("max |hᵢ|", "r_inf")], value="r_2",
                                    description="radius", style={**_DESC, "button_width": "80px"})
        self.kinds = W.SelectMultiple(options=[("final hidden state (what the bound counts)", "final"),
                                               ("before the final norm", "residual"),
                                               ("Mamba's recurrent state", "ssm")],
                                      value=("final", "residual"), rows=3, description="states",
                                      style=_DESC, layout=W.Layout(width="420px"))
        self.controls.children = [W.HBox([W.VBox([self.bound, self.norm, self.source]), self.kinds])]
        axes = [self.fig.add_subplot(1, 3, i) for i in (1, 2, 3)]
        self.fig.subplots_adjust(left=0.06, right=0.99, bottom=0.14, top=0.9, wspace=0.3)
        self._curves = beyond_plots.plot_twin_curves(axes[0])
        self._n50 = beyond_plots.plot_twin_n50(axes[1])
        self._radius = beyond_plots.plot_radius(axes[2])
        for w in (self.bound, self.source, self.norm, self.kinds):
            w.observe(self.refresh, names="value")
        self.refresh()

    # -- data ---------------------------------------------------------------------------------
    def _label(self, family):
        return TWIN_LABELS.get(family, family)

    def cram_twins(self):
        """Rows of :func:`accesslib.experiments.beyond.twin_rows` with each bundle's curves."""
        rows = beyond.twin_rows(list(self.twins.values()), bound=self.bound.value)
        for r in rows:
            r["curves"] = bundles.load("cram", r["model"])["curves"]
        return rows

    def radius_bundles(self) -> dict:
        have = set(bundles.available("radius"))
        return {n: bundles.load("radius", n) for n in self.twins.values() if n in have}

    def radius_series(self, rad):
        norm, src = self.norm.value, self.source.value
        suffix = "_2" if norm == "r_2" else "_inf"
        series, trained = [], None
        for name, b in rad.items():
            fam = b["facts"].get("family")
            c = next((c for c in b["curves"] if c["source"] == src), None)
            if c is None:
                continue
            if fam == "gpt_neox":
                trained = c.get("trained_context")
            for kind in self.kinds.value:
                key = "ssm_inf" if kind == "ssm" else kind + suffix
                if key not in c["max"]:
                    continue
                series.append(dict(family=fam, label=self._label(fam), kind=kind, lengths=c["lengths"],
                                   values=c["max"][key], mean=c["mean"][key],
                                   cap=c["cap"][norm] if kind == "final" else None, model=name, key=key))
        return series, trained

    # -- update -------------------------------------------------------------------------------
    def update(self):
        rows = self.cram_twins()
        rad = self.radius_bundles()
        if not rows and not rad:
            raise ValueError("the twins' results are not shipped yet: run scripts/make_bundles.py for "
                             + " and ".join(self.twins.values()))
        self.rows = rows
        beyond_plots.update_twin_curves(self._curves, [
            dict(family=r["family"], label=f"{self._label(r['family'])} ({r['model']})", curves=r["curves"])
            for r in rows])
        n50 = []
        for r in rows:
            ms = sorted(r["n50"])
            b = bundles.load("cram", r["model"])
            sl = b.get("slope") or {}
            n50.append(dict(family=r["family"], label=f"{self._label(r['family'])}: a = {_fmt(r['slope'])}",
                            ms=ms, n50=[r["n50"][m] for m in ms], n50_stderr=[r["n50_stderr"][m] for m in ms],
                            slope=sl.get("slope"), intercept=sl.get("intercept")))
        beyond_plots.update_twin_n50(self._n50, n50)
        self.series, trained = self.radius_series(rad)
        beyond_plots.update_radius(self._radius, self.series, norm=self.norm.value, trained_context=trained)
        self.verdicts = {n: beyond.divergence_verdict(b, self.source.value) for n, b in rad.items()
                         if any(c["source"] == self.source.value for c in b["curves"])}
        self.values = dict(rows=rows, verdicts=self.verdicts, caveat=self.caveat())
        self.readout.value = self._table(rows) + self._caveat_html()
        self.redraw()

    def caveat(self) -> dict:
        """The caveat of [A] against the measurement: for each twin, whether the final hidden
        state stayed bounded (growth exponent below BOUNDED_EXPONENT and under the final norm's
        cap) and how the states before the norm grew."""
        out = {}
        for name, v in self.verdicts.items():
            out[name] = dict(family=v["family"], final_bounded=bool(v["final_2"]["bounded"] and v["final_under_cap"]),
                             final_exponent=v["final_2"]["exponent"], residual_exponent=v["residual_2"]["exponent"],
                             residual_spread=v["residual_2"]["spread"],
                             ssm_exponent=(v.get("ssm_inf") or {}).get("exponent"),
                             lengths=(v["lengths"][0], v["lengths"][-1]))
        return out

    def _table(self, rows):
        from accesslib.models import embedded

        head = ("<table style='font-size:90%' cellpadding='3'><tr><th>twin</th><th>params</th>"
                "<th>held-out bits/byte</th><th>n50 at m = 1, 2, 3, 4</th><th>slope a</th><th>R²</th>"
                f"<th>C ({html.escape(self.bound.value)})</th><th>C/a</th><th>step budget ×3</th></tr>")
        body = []
        for r in rows:
            try:
                info = embedded.info(r["model"])
                params, bpb = f"{info['n_params']:,}", _fmt(info["heldout_bpb"], ".3f")
            except ValueError:
                params, bpb = "–", "–"
            n50 = ", ".join(_fmt(r["n50"][m], ".1f") for m in sorted(r["n50"]))
            body.append(f"<tr><td>{html.escape(self._label(r['family']))} ({html.escape(r['model'])})</td>"
                        f"<td>{params}</td><td>{bpb}</td><td>{n50}</td>"
                        f"<td>{_fmt(r['slope'])} ± {_fmt(r['slope_stderr'])}</td><td>{_fmt(r['r2'], '.3f')}</td>"
                        f"<td>{_fmt(r['C'], '.1f')}</td><td>{_fmt(r['ratio'], '.1f')}</td>"
                        f"<td>{html.escape(bundles.budget_status(bundles.load('cram', r['model']))[0])}</td></tr>")
        missing = [n for n in self.twins.values() if n not in {r["model"] for r in rows}]
        note = (f"<p>No cramming results shipped yet for {html.escape(', '.join(missing))}.</p>"
                if missing else "")
        return (head + "".join(body) + "</table>" if rows else "") + note

    def _caveat_html(self):
        if not self.verdicts:
            return "<p>No radius measurements shipped yet.</p>"
        parts = []
        for name, c in self.values["caveat"].items():
            v = self.verdicts[name]
            lo, hi = c["lengths"]
            s = (f"<b>{html.escape(self._label(c['family']))}</b>: from L = {lo} to {hi}, the final hidden "
                 f"state's ‖h‖₂ grows like L^{_fmt(c['final_exponent'], '+.2f')} "
                 f"({'bounded' if c['final_bounded'] else 'NOT bounded'}; its final norm caps it at "
                 f"{_fmt(v['cap']['r_2'], '.1f')}); before the final norm like L^{_fmt(c['residual_exponent'], '+.2f')} "
                 f"(largest/smallest {_fmt(c['residual_spread'], '.1f')}×)")
            if c["ssm_exponent"] is not None:
                s += f"; the recurrent state like L^{_fmt(c['ssm_exponent'], '+.2f')}"
            parts.append(s + ".")
        said = beyond.conclusion(self.values["rows"], self.verdicts)
        # the verdict in one line; the measurement behind it folded (the page fits a laptop screen)
        return ((f"<p><i>{html.escape(said)}</i></p>" if said else "")
                + "<details><summary>radius against context length: the measured growth</summary><p>"
                + "<br>".join(parts) + "</p></details>")

    def data_rows(self) -> list[dict]:
        """Panel (a)/(b): per twin and m, the n50 (± stderr), slope, R², C and C/a; panel (c): per
        twin, state and length, the max and mean radius over the samples and the cap."""
        out = []
        for r in self.values["rows"]:
            for m in sorted(r["n50"]):
                out.append(dict(panel="(a, b) cramming", model=r["model"], family=r["family"], m=m,
                                n50=r["n50"][m], n50_stderr=r["n50_stderr"][m], slope=r["slope"],
                                slope_stderr=r["slope_stderr"], r2=r["r2"], bound=self.bound.value, C=r["C"],
                                C_over_a=r["ratio"]))
        for s in self.series:
            for L, v, mu in zip(s["lengths"], s["values"], s["mean"]):
                out.append(dict(panel="(c) radius", model=s["model"], family=s["family"], state=s["kind"],
                                radius=s["key"], source=self.source.value, L=L, max=v, mean=mu, cap=s["cap"]))
        return out
