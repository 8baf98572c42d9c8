"""Notebook 03: predicted vs measured.

- :class:`PredictedApp`: the predicted line n* = C*m (ball bound, and refined bounds when the
  bundle has them) against measured n50 by m, the fitted slope and the theory/experiment ratio,
  with the paper's published points; eps and r sliders move the lines.
- :class:`SweepApp`: launch a small Dask sweep and watch its curves fill in.
"""
from __future__ import annotations

import html
import math

import ipywidgets as W

from accesslib.apps.base import App, BackgroundRun
from accesslib.apps.nb02_cramming import curve_from_counts, curve_rows
from accesslib.apps.policy import app_policy
from accesslib.config import FAST
from accesslib.plots import cramming as cram_plots
from accesslib.plots.style import dataset_color
from accesslib.results import bundles, reference
from accesslib.results.bundles import predicted_slopes

_DESC = {"description_width": "120px"}


class PredictedApp(App):
    """n* = C*m (predicted lines) against measured n50 by m (markers with error bars)."""

    figsize = (10.0, 5.2)
    export_name = "nb03-predicted"

    def __init__(self, *, model=None, canvas="auto", published=True):
        super().__init__(canvas=canvas)
        from accesslib.models import embedded

        names = bundles.available("cram")
        if not names:
            raise ValueError("no precomputed cramming bundle is installed; run scripts/make_bundles.py")
        model = model if model in names else (embedded.DEFAULT if embedded.DEFAULT in names else names[0])
        self.model = W.Dropdown(options=names, value=model, description="model", style=_DESC)
        self.r = W.FloatLogSlider(value=1.0, base=10, min=-2, max=3, step=0.01, description="r (support)",
                                  readout_format=".3g", style=_DESC, layout=W.Layout(width="420px"))
        self.eps_rel = W.FloatLogSlider(value=2.0**-11, base=10, min=-8, max=-0.5, step=0.01,
                                        description="ε / r", readout_format=".3g", style=_DESC,
                                        layout=W.Layout(width="420px"))
        self.show_published = W.Checkbox(value=published, description="paper's published n50 points")
        self.controls.children = [W.HBox([self.model, self.show_published]), self.r, self.eps_rel]
        ax = self.fig.add_subplot(1, 1, 1)
        self.fig.subplots_adjust(left=0.09, right=0.7, bottom=0.11, top=0.95)
        self.art = cram_plots.plot_n50_vs_m(ax, m_max=5)
        pub, markers = {}, {}
        for p in reference.n50_points():
            label = f"{p['model'].split('/')[-1]} {p['dataset']} [A]"
            marker = markers.setdefault(p["model"], "s^Dv"[len(markers) % 4])   # one shape per model
            pub[label] = (p["m"], p["n50"], dataset_color(p["dataset"]), marker)
        cram_plots.plot_published(self.art, pub)
        self.model.observe(self._on_model, names="value")
        for w in (self.r, self.eps_rel, self.show_published):
            w.observe(self.refresh, names="value")
        self._on_model()

    def _on_model(self, *_):
        self.bundle = bundles.load("cram", self.model.value)
        geo = self.bundle.get("geometry") or {}
        with self.hold():
            if geo.get("r_inf"):
                self.r.value = geo["r_inf"]

    def update(self):
        b = self.bundle
        r = float(self.r.value)
        eps = r * float(self.eps_rel.value)
        slopes = predicted_slopes(b, eps, r)
        cram_plots.update_bound_lines(self.art, slopes)
        curves = [c for c in b["curves"] if c.get("n50") is not None]
        ms = [c["m"] for c in curves]
        n50 = [c["n50"] for c in curves]
        se = [c.get("n50_stderr") or 0.0 for c in curves]
        sl = b.get("slope") or {}
        cram_plots.update_measured(self.art, ms, n50, se, sl.get("slope"), sl.get("intercept"))
        for pts in self.art["published"].values():
            pts.set_visible(self.show_published.value)
        ys = list(n50) + [C * 5 for C in slopes.values() if C] + [C for C in slopes.values() if C]
        if self.show_published.value:
            ys += [y for p in reference.n50_points() for y in p["n50"]]
        cram_plots.set_y_range(self.art, ys)
        lines = [f"{b['model']}: d = {b['facts']['d']}, |V| = {b['facts']['vocab_size']}"]
        a = sl.get("slope")
        for name, C in slopes.items():
            ratio = f"  C/a = {C / a:6.1f}x" if a and a > 0 and C else ""
            lines.append(f"C_{name:<9} = {C:8.1f} tok/vec{ratio}")
        if a:
            lines.append(f"measured a = {a:.2f} ± {sl.get('slope_stderr') or float('nan'):.2f} "
                         f"(R² = {sl.get('r2') or float('nan'):.3f})")
        self.art["text"].set_text("\n".join(lines))
        self.values = dict(slopes=slopes, measured_slope=a, eps=eps, r=r,
                           measured=dict(m=ms, n50=n50, n50_stderr=se), fit=dict(sl))
        self.readout.value = (f"ε = {eps:.3g}, r = {r:.3g} &nbsp;·&nbsp; ball bound C = <b>{slopes['ball']:.1f}</b> "
                              f"tokens/vector" + (f" &nbsp;·&nbsp; measured a = <b>{a:.2f}</b> &nbsp;·&nbsp; "
                                                  f"ratio <b>{slopes['ball'] / a:.1f}×</b>" if a else ""))
        self.set_status(f"bundle: {b['samples']} strings per length, protocol {b['protocol']}, "
                        f"{b['hardware'].get('cpu', '?')}, {b['wall_time']:.0f} s, made {b['created']}")
        self.redraw()

    def data_rows(self) -> list[dict]:
        """Measured n50 ± stderr by m (the markers), the fitted slope a, and the predicted slope
        C of every bound at the sliders' ε and r with C/a (the lines); the model in every row."""
        v, model = self.values, self.bundle["model"]
        meas = v["measured"]
        rows = [dict(panel="measured n50", model=model, m=m, n50=y, n50_stderr=e)
                for m, y, e in zip(meas["m"], meas["n50"], meas["n50_stderr"])]
        a = v["measured_slope"]
        if a:
            rows.append(dict(panel="measured slope", model=model, slope=a, slope_stderr=v["fit"].get("slope_stderr"),
                             intercept=v["fit"].get("intercept"), r2=v["fit"].get("r2")))
        rows += [dict(panel="predicted slope", model=model, bound=name, C=C, eps=v["eps"], r=v["r"],
                      C_over_a=C / a if a and a > 0 and C else None) for name, C in v["slopes"].items()]
        return rows


def default_sweep(fast: bool = FAST) -> dict:
    """A small sweep of the default model: m = 1, 2 on a fixed grid of lengths (natural text),
    stored in ``sweeps.sqlite`` next to the default results store."""
    from accesslib.models import embedded
    from accesslib.results.store import default_path

    return dict(name="notebook-sweep", models=[embedded.DEFAULT], m=[1, 2], source="natural",
                samples=2 if fast else 8, seeds=[0], lengths=[2, 4] if fast else [4, 6, 8, 10, 12, 16, 20],
                engine=dict(protocol="fast", max_steps=30 if fast else 1000),
                store=str(default_path("sweeps.sqlite")), torch_threads=1)


class SweepApp(App):
    """Run a sweep (accesslib.experiments.sweep) on a Dask LocalCluster from the page: progress, dashboard
    link, and the accessibility curves read from the results store after every job.

    The sweep runs in its own thread (:func:`accesslib.experiments.sweep.start_sweep`); the app's
    :class:`~accesslib.apps.base.BackgroundRun` watches it, so Run, Stop, the final status and
    :meth:`wait` work as in every other app."""

    figsize = (7.5, 3.4)
    export_name = "nb03-sweep"

    def __init__(self, *, spec=None, scheduler=None, policy=None, canvas="auto", fast=FAST):
        super().__init__(canvas=canvas)
        from accesslib.experiments.sweep import load_spec

        self.policy = policy or app_policy()  # a bad ACCESSLIB_PUBLIC: shown, every run refused
        self.spec = load_spec(spec if spec is not None else default_sweep(fast))
        self.scheduler = scheduler
        self.run = None          # the SweepRun of the last launch
        self.curves = {}
        self.run_button = W.Button(description="Launch sweep", button_style="success", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=max(1, len(self.spec.jobs())), description="jobs",
                                      style=_DESC, layout=W.Layout(width="360px"))
        self.runner = BackgroundRun(self, run_buttons=[self.run_button], progress=self.progress,
                                    name="accesslib-sweep-watch",
                                    stop_message="stopping: running jobs keep the strings they finished ...")
        self.stop_button = self.runner.stop_button
        self.controls.children = [
            W.HTML(f"<span style='font-size:90%'>sweep: models {html.escape(', '.join(map(str, self.spec.model_labels)))}; "
                   f"m = {html.escape(str(self.spec.m))}; lengths {html.escape(str(self.spec.lengths))}; "
                   f"{html.escape(str(self.spec.samples))} strings each; "
                   f"store {html.escape(str(self.spec.store_path()))}</span>"),
            W.HBox([self.run_button, self.stop_button, self.progress])]
        ax = self.fig.add_subplot(1, 1, 1)
        self.fig.subplots_adjust(left=0.1, right=0.97, bottom=0.16, top=0.88)
        self.art = cram_plots.plot_accessibility(ax)
        self.run_button.on_click(lambda _: self.guard(self.start))
        self.refresh()
        if self.policy.error is not None:
            self.show_error(self.policy.error)

    def start(self):
        if self.policy.error is not None:
            raise ValueError(self.policy.error)
        if self.policy.public:
            raise ValueError("sweeps start worker processes: they are switched off on this public server")
        self.runner.start(self._work, on_done=self._done)

    def _work(self, job):
        from accesslib.experiments.sweep import start_sweep

        self.run = None
        self.set_status("starting the Dask cluster ...")
        self.run = start_sweep(self.spec, on_job_done=lambda res: self.guard(self.update),
                               scheduler=self.scheduler, progress=False)
        job.on_stop(self.run.stop)   # Stop reaches the sweep's own stop flag
        try:
            self.run.wait()
        except Exception as e:   # the sweep's own error, raised again by wait
            raise ValueError(f"the sweep failed: {e}") from None

    def _done(self, outcome):
        self.guard(self.update)
        if self.run is None:
            return None
        done, total = self.run.progress
        link = self.run.dashboard_link
        return f"{done}/{total} jobs" + (f"; Dask dashboard: {link}" if link else "")

    def data_rows(self) -> list[dict]:
        """The sweep's accessibility counts per (m, n) from the results store, with n50."""
        return curve_rows(self.curves, **getattr(self, "shown", {}))

    def update(self):
        from accesslib.experiments.sweep import sweep_curves

        counts = self.run.curves() if self.run is not None else sweep_curves(self.spec)
        model = self.spec.model_labels[0]
        curves = {m: curve_from_counts(c) for (mod, m), c in counts.items() if mod == model and c}
        self.curves = curves
        self.shown = dict(model=model, source=self.spec.source)
        cram_plots.update_accessibility(self.art, curves)
        self.readout.value = " &nbsp;·&nbsp; ".join(
            f"m={m}: n50 = {c['n50']:.1f}" for m, c in sorted(curves.items()) if math.isfinite(c["n50"]))
        if self.run is not None:
            done, total = self.run.progress
            self.runner.set_progress(done, total)
            if self.run.running and not self.stop_requested:
                link = self.run.dashboard_link
                self.set_status(f"running: {done}/{total} jobs" + (f"; Dask dashboard: {link}" if link else ""))
        self.redraw()
