"""Notebook 04: what sets the slope?

:class:`SlopeApp`: over the embedded family, measured slope against d and against ln|V| next to
the predicted C (proportional to d/ln|V|), and whether the ratio C/a stays constant; each
model's step-budget check (:func:`accesslib.results.bundles.budget_status`) beside its slope.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W

from accesslib.apps.base import App
from accesslib.plots import slope as slope_plots
from accesslib.results import bundles

_DESC = {"description_width": "120px"}


def family_models() -> list[str]:
    """The embedded transformers that have a shipped cramming bundle (the Mamba twin, which
    differs in architecture rather than in d or |V|, has notebook 09)."""
    from accesslib.models import embedded

    return [n for n in embedded.names() if n in bundles.available("cram")
            and bundles.load("cram", n)["facts"].get("family") != "mamba"]


def other_models() -> list[str]:
    """Embedded models of another architecture with a cramming bundle (the Mamba twin): shown in
    the table for comparison, kept out of the family's panels and its mean C/a."""
    from accesslib.models import embedded

    return [n for n in embedded.names() if n in bundles.available("cram") and n not in family_models()]


class SlopeApp(App):
    """Measured slope a against d and against ln|V| over the embedded family, next to C."""

    figsize = (10.5, 4.0)
    export_name = "nb04-slope"

    def __init__(self, *, canvas="auto"):
        super().__init__(canvas=canvas)
        self.bound = W.Dropdown(options=["ball", "box", "ellipsoid", "cone", "cells"], value="ball",
                                description="predicted C", style=_DESC)
        # fp16 is [A]'s choice (ε = r·2^-11): one button, named as in notebook 01
        self.dtype = W.ToggleButtons(options=[("fp16 = [A]", "paper"), ("bf16", "bfloat16"), ("fp32", "float32")],
                                     value="paper", style={"button_width": "84px"},
                                     tooltips=["ε = r·2⁻¹¹, half-precision rounding: [A]'s choice",
                                               "ε = r·2⁻⁸, bfloat16 rounding", "ε = r·2⁻²⁴, float32 rounding"])
        # the label outside the buttons: a ToggleButtons description sits above them
        self.controls.children = [W.HBox([self.bound, W.Label("ε from", layout=W.Layout(margin="0 6px 0 16px")),
                                          self.dtype], layout=W.Layout(flex_flow="row wrap", align_items="center"))]
        axes = [self.fig.add_subplot(1, 3, i) for i in (1, 2, 3)]
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.17, top=0.88, wspace=0.4)
        self.axes = axes
        self._art = {0: slope_plots.plot_slope_against(axes[0], xlabel="d (model width), |V| fixed",
                                                        title="width"),
                     1: slope_plots.plot_slope_against(axes[1], xlabel="ln|V|, d fixed", title="vocabulary")}
        self._ratio = slope_plots.plot_ratio(axes[2])
        self.bound.observe(self.refresh, names="value")
        self.dtype.observe(self.refresh, names="value")
        self.refresh()

    @staticmethod
    def _groups(rows):
        """Models varying d at the most common |V|, and varying |V| at the most common d."""
        from collections import Counter

        if not rows:
            return [], []
        v0 = Counter(r["vocab_size"] for r in rows).most_common(1)[0][0]
        d0 = Counter(r["d"] for r in rows).most_common(1)[0][0]
        by_d = sorted((r for r in rows if r["vocab_size"] == v0), key=lambda r: r["d"])
        by_v = sorted((r for r in rows if r["d"] == d0), key=lambda r: r["vocab_size"])
        return by_d, by_v

    def update(self):
        rows = [r for r in bundles.family_table(family_models(), bound=self.bound.value, dtype=self.dtype.value)
                if r["slope"]]
        if not rows:
            raise ValueError("no embedded model has a cramming bundle with a slope fit yet; "
                             "run scripts/make_bundles.py")
        others = [r for r in bundles.family_table(other_models(), bound=self.bound.value, dtype=self.dtype.value)
                  if r["slope"]]
        for group, other in ((rows, False), (others, True)):   # is each slope the model's, or its budget's?
            for r in group:
                b = bundles.load("cram", r["model"])
                r["budget"], r["budget_text"] = bundles.budget_status(b)
                if other:
                    r["family"] = b["facts"].get("family")
        self.rows, self.others = rows, others
        by_d, by_v = self._groups(rows)
        for i, (grp, key) in enumerate([(by_d, "d"), (by_v, "ln_vocab")]):
            slope_plots.update_slope_against(self._art[i], [r[key] for r in grp], [r["slope"] for r in grp],
                                             [r["slope_stderr"] for r in grp], [r["C"] for r in grp])
        x = [r["d"] / r["ln_vocab"] for r in rows]
        good = [r["ratio"] for r in rows if r["ratio"] and math.isfinite(r["ratio"])]
        mean = sum(good) / len(good) if good else float("nan")
        slope_plots.update_ratio(self._ratio, x, [r["ratio"] for r in rows],
                                 [r["model"].replace("tiny-", "") + (" (budget-limited)" if r["budget"] == "budget-limited"
                                                                     else "") for r in rows], mean)
        spread = (max(good) / min(good)) if good else float("nan")
        self.readout.value = (
            "<table style='font-size:90%;border-collapse:collapse'><tr><th>model</th><th>d</th><th>|V|</th>"
            "<th>measured a</th><th>R²</th><th>steps / patience</th><th>C</th><th>C/a</th>"
            "<th>step budget ×3</th></tr>"
            + "".join(self._row_html(r) for r in rows) + "".join(self._row_html(r, other=True) for r in others)
            + "</table>"
            + f"<div style='margin-top:4px'>C/a ranges over a factor {spread:.2f} across the family "
              f"(mean {mean:.1f})" + (": the transformers only; the other architecture is compared with its "
                                      "transformer twin in notebook 09" if others else "")
            + ".</div>" + self._budget_html(rows + others))
        self.values = dict(rows=rows, others=others, ratio_mean=mean, ratio_spread=spread)
        self.redraw()

    @staticmethod
    def _row_html(r, other=False) -> str:
        """One model's row of the table; ``other``: another architecture, in italics, out of the family."""
        td = "<td style='padding:0 8px;line-height:1.3'>"
        name = html.escape(str(r["model"])) + (f" ({html.escape(str(r['family']))}, not in the family)" if other else "")
        budget = (f"{r['max_steps']:,} / {r['patience']:,}" if r.get("max_steps") and r.get("patience") else "?")
        return (("<tr style='font-style:italic'>" if other else "<tr>")
                + f"{td}{name}</td>{td}{r['d']}</td>{td}{r['vocab_size']}</td>"
                f"{td}{r['slope']:.2f} ± {(r['slope_stderr'] or float('nan')):.2f}</td>"
                f"{td}{(r['r2'] if r['r2'] is not None else float('nan')):.3f}</td>{td}{budget}</td>"
                f"{td}{(r['C'] or float('nan')):.1f}</td>{td}{(r['ratio'] or float('nan')):.1f}</td>"
                f"<td style='padding:0 8px;line-height:1.3' title='{html.escape(r['budget_text'], quote=True)}'>"
                f"{html.escape(r['budget'])}</td></tr>")

    @staticmethod
    def _budget_html(rows) -> str:
        """Each model's budget check in words, folded; a warning line when a slope is budget-limited."""
        limited = [r["model"] for r in rows if r["budget"] == "budget-limited"]
        warn = (f"<div><b>budget-limited</b>: {html.escape(', '.join(limited))}: their n50 and slopes depend on "
                "the step budget, so their C/a is not the model's alone.</div>" if limited else "")
        return (warn + "<details><summary style='cursor:pointer'>step budget ×3: what each label means</summary>"
                "<div style='font-size:90%;line-height:1.4;margin-left:14px'>" + "<br>".join(
                    f"<b>{html.escape(r['model'])}</b>: {html.escape(r['budget_text'])}" for r in rows)
                + "</div></details>")

    def data_rows(self) -> list[dict]:
        """The family table as shown: per model d, |V|, ln|V|, measured slope a ± stderr, R²,
        the predicted C (bound and ε as chosen), C/a and the budget check's label and words, with
        the mean C/a in every row."""
        return [dict(r, bound=self.bound.value, eps_from=self.dtype.value, d_over_ln_vocab=r["d"] / r["ln_vocab"],
                     ratio_mean=self.values["ratio_mean"], in_family=r in self.values["rows"])
                for r in self.values["rows"] + self.values["others"]]
