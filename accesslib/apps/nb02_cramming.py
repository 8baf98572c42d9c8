"""The cramming apps (notebooks 02-04): run cramming live, predicted vs measured, what sets the slope.

- :class:`CrammingApp` (02): pick a model, target source, m, lengths, samples; Run cramms in a
  background thread (Stop keeps what finished), with a progress bar, a live loss plot, a row
  per finished string and the accessibility curve filling in. Results go to the results store;
  reopening shows earlier runs of the same settings.
- :class:`PredictedApp` (03): the predicted line n* = C*m (ball bound, and refined bounds when
  the bundle has them) against measured n50 by m, the fitted slope and the theory/experiment
  ratio, with the paper's published points on the same axes; eps and r sliders move the line.
- :class:`SlopeApp` (04): over the embedded family, measured slope against d and against ln|V|
  next to the predicted C (proportional to d/ln|V|), and whether the ratio C/a stays constant.
"""
from __future__ import annotations

import html
import math
import threading
import time

import ipywidgets as W

from accesslib.theory import bounds

from accesslib.results import bundles, reference

from accesslib.plots import cramming as cram_plots, bounds as plotting
from accesslib.config import FAST
from accesslib.apps.policy import current_policy
from accesslib.apps.base import App

_DESC = {"description_width": "120px"}


def parse_int_list(text: str, name: str, *, low: int = 1) -> list[int]:
    """'1, 2, 4' -> [1, 2, 4]; a ValueError naming ``name`` otherwise."""
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"{name}: write whole numbers separated by commas, e.g. '1, 2, 4'; got {text!r}") from None
    if not values:
        raise ValueError(f"{name}: give at least one value")
    if min(values) < low:
        raise ValueError(f"{name} must be >= {low}; got {min(values)}")
    return sorted(set(values))


def model_choices(policy=None) -> list[str]:
    """The models offered: embedded family, offline real models when installed (policy-filtered)."""
    from accesslib.models import embedded

    names = list(embedded.names())
    try:
        from accesslib.models import gguf as realmodels
        names += [n for n in realmodels.available() if n not in names]
    except Exception:  # the optional extra is not installed
        pass
    if policy is not None and policy.public:
        names = [n for n in names if n in policy.allowed_models]
    return names


# ---------------------------------------------------------------------------------------------
# 02: cramming live
# ---------------------------------------------------------------------------------------------
class CrammingApp(App):
    """Run cramming on a chosen model and watch the accessibility curve appear."""

    figsize = (10.0, 3.9)
    MAX_ROWS = 12

    def __init__(self, *, model=None, store=None, policy=None, canvas="auto", fast=FAST):
        super().__init__(canvas=canvas)
        from accesslib.models import embedded
        from accesslib.results.store import ResultsStore

        self.policy = policy or current_policy()
        self.store = store if isinstance(store, ResultsStore) else ResultsStore(store)
        self.fast = fast
        choices = model_choices(self.policy)
        model = model or embedded.DEFAULT
        if self.policy.public:
            self.model = W.Dropdown(options=choices, value=model if model in choices else choices[0],
                                    description="model", style=_DESC)
        else:  # free text too: a hub name or a local path
            self.model = W.Combobox(options=choices, value=model, ensure_option=False,
                                    description="model", placeholder="name, hub id or path", style=_DESC)
        devices = ["cpu"]
        import torch
        if torch.cuda.is_available():
            devices.append("cuda")
        self.device = W.Dropdown(options=devices, value="cpu", description="device", style=_DESC,
                                 layout=W.Layout(width="220px"))
        self.source = W.Dropdown(options=[("natural text (KJV, held out)", "natural"),
                                          ("random words", "words"), ("random tokens", "tokens")],
                                 value="natural", description="targets", style=_DESC)
        self.ms = W.Text(value="1" if fast else "1, 2", description="m values", style=_DESC,
                         layout=W.Layout(width="220px"))
        self.lengths = W.Text(value="auto", description="lengths", style=_DESC,
                              placeholder="auto, or e.g. 4, 8, 16", layout=W.Layout(width="300px"))
        self.samples = W.BoundedIntText(value=2 if fast else 8, min=1, max=256, description="strings/length",
                                        style=_DESC, layout=W.Layout(width="220px"))
        self.protocol = W.Dropdown(options=[("fast (ours)", "fast"), ("paper [A]", "paper")], value="fast",
                                   description="protocol", style=_DESC, layout=W.Layout(width="220px"))
        self.max_steps = W.BoundedIntText(value=30 if fast else 1000, min=1, max=100000,
                                          description="max steps", style=_DESC, layout=W.Layout(width="220px"))
        self.run_button = W.Button(description="Run", button_style="success", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.progress = W.IntProgress(value=0, min=0, max=1, description="strings", style=_DESC,
                                      layout=W.Layout(width="420px"))
        self.table = W.HTML()
        self.table.add_class("accesslib-results")
        note = W.HTML(f'<span style="color:#555;font-size:90%">{html.escape(self.policy.describe())}</span>')
        self.controls.children = [
            W.HBox([self.model, self.device]),
            W.HBox([self.source, self.protocol]),
            W.HBox([self.ms, self.lengths]),
            W.HBox([self.samples, self.max_steps]),
            W.HBox([self.run_button, self.stop_button, self.progress]),
            note,
        ]
        self.widget.children = tuple(self.widget.children) + (self.table,)
        ax_l = self.fig.add_subplot(1, 2, 1)
        ax_c = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.88, wspace=0.28)
        self.art_loss = cram_plots.plot_loss(ax_l)
        self.art_curve = cram_plots.plot_accessibility(ax_c)
        self._lock = threading.Lock()
        self._end_lock = threading.Lock()
        self._ended = True
        self._stop = threading.Event()
        self._thread = None
        self._models = {}
        self.loss_steps, self.loss_mean, self.loss_best = [], [], []
        self.rows = []
        self.curves = {}
        self.run_error = None
        self._last_draw = 0.0
        self.run_button.on_click(lambda _: self.guard(self.start))
        self.stop_button.on_click(lambda _: self.stop())
        for w in (self.model, self.source, self.protocol, self.max_steps):
            w.observe(self.refresh, names="value")
        self.refresh()

    # -- settings ---------------------------------------------------------------------------
    def request(self) -> dict:
        """The run the controls describe, validated (ValueError names the bad value)."""
        name = str(self.model.value).strip()
        ms = parse_int_list(self.ms.value, "m values")
        lengths_text = str(self.lengths.value).strip().lower()
        lengths = None if lengths_text in ("", "auto") else parse_int_list(self.lengths.value, "lengths")
        req = dict(model=name, ms=ms, lengths=lengths, samples=int(self.samples.value),
                   source=self.source.value, protocol=self.protocol.value,
                   max_steps=int(self.max_steps.value), device=self.device.value)
        self.policy.check_request(model=name, m=ms, lengths=lengths or [1], samples=req["samples"],
                                  max_steps=req["max_steps"])
        return req

    def _protocol_hash(self, req) -> str:
        from accesslib.engine.cramming import protocol_settings
        from accesslib.results.store import protocol_hash

        return protocol_hash(protocol_settings(req["protocol"], max_steps=req["max_steps"]))

    # -- what the store already has ---------------------------------------------------------
    def update(self):
        """Show the stored results of the current settings (earlier runs, or this one so far)."""
        req = self.request()
        ph = self._protocol_hash(req)
        curves = {}
        for run in self.store.runs():
            if run["model"] == req["model"] and run["source"] == req["source"] and run["protocol_hash"] == ph:
                m = int(run["m"])
                counts = self.store.curve(req["model"], m, req["source"], ph)
                curves[m] = self._curve_from_counts(counts)
        self.curves = curves
        self._draw_curves()
        stored = sum(sum(c["totals"]) for c in curves.values())
        if not self.is_running:
            self.set_status(f"{stored} strings of these settings in the results store "
                            f"({self.store.path})." if stored else
                            "No stored results for these settings yet: press Run.")

    @staticmethod
    def _curve_from_counts(counts: dict) -> dict:
        from accesslib.theory.stats import fit_n50

        lengths = sorted(counts)
        s = [counts[n][0] for n in lengths]
        t = [counts[n][1] for n in lengths]
        fit = fit_n50((lengths, s, t)) if lengths else None
        ok = fit is not None and fit.ok
        return dict(lengths=lengths, successes=s, totals=t, fit=(fit.n50, fit.k) if ok else None,
                    n50=fit.n50 if ok else float("nan"), n50_stderr=fit.stderr if ok else float("nan"))

    def _draw_curves(self):
        cram_plots.update_accessibility(self.art_curve, self.curves)
        bits = []
        for m in sorted(self.curves):
            c = self.curves[m]
            if math.isfinite(c["n50"]):
                bits.append(f"m={m}: n50 = {c['n50']:.1f} ± {c['n50_stderr']:.1f}")
        self.readout.value = ("<b>measured</b> " + " &nbsp;·&nbsp; ".join(bits)) if bits else ""
        self.redraw()

    # -- running ----------------------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self):
        """Validate, then cram in a background thread. Refusals are messages; nothing runs."""
        if self.is_running:
            raise ValueError("a run is already going: press Stop first")
        req = self.request()
        self._stop.clear()
        self.rows.clear()
        self.loss_steps, self.loss_mean, self.loss_best = [], [], []
        self.run_error = None
        self.progress.value = 0
        self.run_button.disabled, self.stop_button.disabled = True, False
        self._ended = False
        self._thread = threading.Thread(target=self._work, args=(req,), daemon=True, name="accesslib-cram")
        self._thread.start()

    def stop(self):
        """Ask the run to end after the current step; what finished is kept (in the store too)."""
        with self._end_lock:   # a click that arrives after the run ended must not hide its summary
            if self._ended:
                return
            self._stop.set()
            self.set_status("stopping after the current step ...")

    def wait(self, timeout=None) -> bool:
        """Block until the run ends (for scripts and tests); True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.is_running

    def _load(self, name, device):
        key = (name, device)
        if key not in self._models:
            from accesslib.models.loading import load_model
            self._models = {key: load_model(name, device=device)}  # keep one model in memory
        return self._models[key]

    def _work(self, req):
        t0 = time.perf_counter()
        try:
            with self.policy.run_slot():
                self.set_status(f"loading {req['model']} ...")
                lm = self._load(req["model"], req["device"])
                if req["device"] == "cpu" and lm.facts.n_params < 10_000_000:
                    # tiny models are bound by per-step overhead: one thread is as fast, and
                    # leaves the other cores to the page and to other visitors
                    import torch
                    torch.set_num_threads(1)
                from accesslib.experiments.curves import accessibility_curve

                per_m = req["samples"] * (len(req["lengths"]) if req["lengths"] else 6)
                self.progress.max = max(1, per_m * len(req["ms"]))
                max_length = self.policy.max_length or 1000
                for m in req["ms"]:
                    if self._stop.is_set():
                        break
                    self._current_m = m
                    self.set_status(f"cramming with m = {m} ...")
                    accessibility_curve(
                        lm, m, lengths=req["lengths"], samples=req["samples"], source=req["source"],
                        store=self.store, protocol=req["protocol"], max_steps=req["max_steps"],
                        max_length=max_length, on_string=self._on_string, on_step=self._on_step,
                        stop=self._stop)
        except ValueError as e:
            self.run_error = str(e)
        except Exception as e:  # shown in the page, never a traceback
            self.run_error = f"unexpected {type(e).__name__}: {e}"
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True
            self.guard(self.update)
            if self.run_error:
                self.show_error(self.run_error)
            done = len(self.rows)
            ok = sum(r["success"] for r in self.rows)
            with self._end_lock:
                self._ended = True
                how = "stopped" if self._stop.is_set() else "finished"
                self.set_status(f"{how}: {done} strings crammed this run ({ok} reproduced exactly by greedy "
                                f"decoding) in {time.perf_counter() - t0:.1f} s; results are in {self.store.path}")

    def _on_step(self, info):
        with self._lock:
            if not info.losses:
                return
            step = (self.loss_steps[-1] + 1) if self.loss_steps else 1
            finite = sorted(v for v in info.losses if math.isfinite(v))
            best = sorted(v for v in info.best_losses if math.isfinite(v))
            if not finite:
                return
            self.loss_steps.append(step)
            self.loss_mean.append(sum(finite) / len(finite))
            self.loss_best.append(best[len(best) // 2] if best else float("nan"))
            now = time.perf_counter()
            if now - self._last_draw < 0.4:
                return
            self._last_draw = now
        cram_plots.update_loss(self.art_loss, self.loss_steps, self.loss_mean, self.loss_best)
        self.redraw()

    def _on_string(self, row):
        with self._lock:
            self.rows.append(row)
            self.progress.max = max(self.progress.max, len(self.rows))
            self.progress.value = len(self.rows)
        self._render_table()
        self.guard(self.update)
        cram_plots.update_loss(self.art_loss, self.loss_steps, self.loss_mean, self.loss_best)
        self.redraw()

    def _decode(self, ids):
        lm = next(iter(self._models.values()), None)
        tok = getattr(lm, "tokenizer", None)
        if tok is None or ids is None:
            return " ".join(map(str, ids or []))
        return tok.decode(ids)

    def _render_table(self):
        cells = []
        for r in self.rows[-self.MAX_ROWS:][::-1]:
            mark = "✔" if r["success"] else "✘"
            colour = "#2a9d48" if r["success"] else "#c0392b"
            target = r.get("target_text") or self._decode(r.get("target_ids"))
            greedy = self._decode(r.get("greedy_ids"))
            cells.append(
                f"<tr><td style='color:{colour};font-weight:bold'>{mark}</td><td>{r['m']}</td><td>{r['n']}</td>"
                f"<td>{r['steps']}</td><td><code>{html.escape(repr(target))}</code></td>"
                f"<td><code>{html.escape(repr(greedy))}</code></td></tr>")
        self.table.value = (
            "<table style='font-size:85%;border-collapse:collapse' cellpadding='3'>"
            "<tr><th></th><th>m</th><th>n</th><th>steps</th><th>target</th><th>greedy output</th></tr>"
            + "".join(cells) + "</table>") if cells else ""


# ---------------------------------------------------------------------------------------------
# 03: predicted vs measured
# ---------------------------------------------------------------------------------------------


def predicted_slopes(bundle: dict, eps: float, r: float) -> dict:
    """Predicted slopes C (tokens per vector) for a bundle's model at precision eps, radius r.

    ball: :func:`accesslib.theory.bounds.slope`; box, cone, ellipsoid, cells: :mod:`accesslib.theory.refined`
    from the bundle's measured geometry (per-coordinate widths, principal semi-axes, cone
    half-angle, s_conv) when the bundle has it. The box and ellipsoid use the measured extents,
    so r moves only the ball, cone and cell lines.
    """
    from accesslib.theory import refined

    f = bundle["facts"]
    d, V = f["d"], f["vocab_size"]
    out = {"ball": bounds.slope(d, V, eps, r)}
    geo = bundle.get("geometry") or {}
    if geo.get("widths"):
        out["box"] = refined.box_slope(geo["widths"], V, eps).C
    if geo.get("semi_axes"):
        out["ellipsoid"] = refined.ellipsoid_slope(geo["semi_axes"], V, eps).C
    if geo.get("phi") is not None and d >= 2:
        out["cone"] = refined.cone_slope(d, V, eps, r, geo["phi"]).C
    if geo.get("s_conv"):
        out["cells"] = refined.cell_slope(refined.ball_log_count(d, eps, r), geo["s_conv"]).C
    return out


class PredictedApp(App):
    """n* = C*m (predicted lines) against measured n50 by m (markers with error bars)."""

    figsize = (10.0, 5.2)

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
            pub[label] = (p["m"], p["n50"], plotting.dataset_color(p["dataset"]), marker)
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
        self.values = dict(slopes=slopes, measured_slope=a, eps=eps, r=r)
        self.readout.value = (f"ε = {eps:.3g}, r = {r:.3g} &nbsp;·&nbsp; ball bound C = <b>{slopes['ball']:.1f}</b> "
                              f"tokens/vector" + (f" &nbsp;·&nbsp; measured a = <b>{a:.2f}</b> &nbsp;·&nbsp; "
                                                  f"ratio <b>{slopes['ball'] / a:.1f}×</b>" if a else ""))
        self.set_status(f"bundle: {b['samples']} strings per length, protocol {b['protocol']}, "
                        f"{b['hardware'].get('cpu', '?')}, {b['wall_time']:.0f} s, made {b['created']}")
        self.redraw()


# ---------------------------------------------------------------------------------------------
# 04: what sets the slope
# ---------------------------------------------------------------------------------------------
def family_table(names=None, *, bound="ball", dtype="paper") -> list[dict]:
    """One row per embedded model with a bundle: d, |V|, measured slope a (± stderr, R^2),
    predicted C under ``bound`` with eps = r_inf * unit roundoff of ``dtype``, and C/a."""
    from accesslib.models import embedded

    names = names if names is not None else [n for n in embedded.names() if n in bundles.available("cram")]
    rows = []
    for name in names:
        b = bundles.load("cram", name)
        sl = b.get("slope") or {}
        geo = b.get("geometry") or {}
        r = geo.get("r_inf") or 1.0   # the paper's eps makes C_ball independent of r
        eps = bounds.eps_for_dtype(dtype, r)
        C = predicted_slopes(b, eps, r).get(bound)
        a = sl.get("slope")
        rows.append(dict(model=name, d=b["facts"]["d"], vocab_size=b["facts"]["vocab_size"],
                         ln_vocab=math.log(b["facts"]["vocab_size"]), slope=a,
                         slope_stderr=sl.get("slope_stderr"), r2=sl.get("r2"), C=C,
                         ratio=(C / a) if (C and a and a > 0) else None))
    return rows


class SlopeApp(App):
    """Measured slope a against d and against ln|V| over the embedded family, next to C."""

    figsize = (10.5, 4.0)

    def __init__(self, *, canvas="auto"):
        super().__init__(canvas=canvas)
        self.bound = W.Dropdown(options=["ball", "box", "ellipsoid", "cone", "cells"], value="ball",
                                description="predicted C", style=_DESC)
        self.dtype = W.ToggleButtons(options=[("paper (fp16)", "paper"), ("bfloat16", "bfloat16"),
                                              ("float32", "float32")], value="paper",
                                     description="ε from", style={**_DESC, "button_width": "90px"})
        self.controls.children = [W.HBox([self.bound]), self.dtype]
        axes = [self.fig.add_subplot(1, 3, i) for i in (1, 2, 3)]
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.17, top=0.88, wspace=0.4)
        self.axes = axes
        for ax, xl in zip(axes[:2], ["d (model width), |V| fixed", "ln|V|, d fixed"]):
            ax.set_xlabel(xl)
            ax.set_ylabel("tokens per vector (log)")
            ax.set_yscale("log")
        axes[2].set_xlabel("d / ln|V|")
        axes[2].set_ylabel("C / a (theory / experiment)")
        axes[0].set_title("width", fontsize=10)
        axes[1].set_title("vocabulary", fontsize=10)
        axes[2].set_title("is the ratio constant?", fontsize=10)
        from accesslib.plots.bounds import COLORS, STYLE

        self._art = {}
        for i in (0, 1):
            ax = axes[i]
            self._art[i] = dict(
                a=ax.errorbar([], [], yerr=[], color=COLORS["measured"], label="measured slope a", **STYLE["marker"]),
                C=ax.plot([], [], color=COLORS["predicted"], marker="_", ms=14, mew=2, lw=2, label="predicted C")[0])
            from matplotlib.ticker import NullFormatter, ScalarFormatter
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.legend(fontsize=7.5, loc="best")
        self._ratio = axes[2].plot([], [], ls="none", marker="o", color=COLORS["measured"])[0]
        self._ratio_mean = axes[2].axhline(float("nan"), **STYLE["refline"])
        self._labels = []
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
        from accesslib.plots.cramming import _set_errorbar

        rows = [r for r in family_table(bound=self.bound.value, dtype=self.dtype.value) if r["slope"]]
        if not rows:
            raise ValueError("no embedded model has a cramming bundle with a slope fit yet; "
                             "run scripts/make_bundles.py")
        self.rows = rows
        by_d, by_v = self._groups(rows)
        for i, (grp, key) in enumerate([(by_d, "d"), (by_v, "ln_vocab")]):
            xs = [r[key] for r in grp]
            _set_errorbar(self._art[i]["a"], xs, [r["slope"] for r in grp],
                          [r["slope_stderr"] or 0.0 for r in grp])
            self._art[i]["C"].set_data(xs, [r["C"] if r["C"] else float("nan") for r in grp])
            ax = self.axes[i]
            vals = [v for r in grp for v in (r["slope"], r["C"]) if v]
            if xs:
                pad = (max(xs) - min(xs)) * 0.1 or 1.0
                ax.set_xlim(min(xs) - pad, max(xs) + pad)
            if vals:
                ax.set_ylim(min(vals) / 2, max(vals) * 2)
        x = [r["d"] / r["ln_vocab"] for r in rows]
        y = [r["ratio"] if r["ratio"] else float("nan") for r in rows]
        self._ratio.set_data(x, y)
        good = [v for v in y if math.isfinite(v)]
        mean = sum(good) / len(good) if good else float("nan")
        self._ratio_mean.set_ydata([mean, mean])
        for t in self._labels:
            t.remove()
        self._labels = [self.axes[2].annotate(r["model"].replace("tiny-", ""), (xi, yi), fontsize=7,
                                              xytext=(3, 3), textcoords="offset points")
                        for r, xi, yi in zip(rows, x, y) if math.isfinite(yi)]
        if good:
            self.axes[2].set_xlim(0, max(x) * 1.15)
            self.axes[2].set_ylim(0, max(good) * 1.3)
        spread = (max(good) / min(good)) if good else float("nan")
        self.readout.value = (
            "<table style='font-size:90%' cellpadding='3'><tr><th>model</th><th>d</th><th>|V|</th>"
            "<th>measured a</th><th>R²</th><th>C</th><th>C/a</th></tr>" + "".join(
                f"<tr><td>{r['model']}</td><td>{r['d']}</td><td>{r['vocab_size']}</td>"
                f"<td>{r['slope']:.2f} ± {(r['slope_stderr'] or float('nan')):.2f}</td>"
                f"<td>{(r['r2'] if r['r2'] is not None else float('nan')):.3f}</td>"
                f"<td>{(r['C'] or float('nan')):.1f}</td><td>{(r['ratio'] or float('nan')):.1f}</td></tr>"
                for r in rows) + "</table>"
            + f"<p>C/a ranges over a factor {spread:.2f} across the family (mean {mean:.1f}).</p>")
        self.values = dict(rows=rows, ratio_mean=mean, ratio_spread=spread)
        self.redraw()


# ---------------------------------------------------------------------------------------------
# 03 (second cell): launch a small Dask sweep and watch the curves fill in
# ---------------------------------------------------------------------------------------------
def default_sweep(fast: bool = FAST) -> dict:
    """A small sweep of the default model: m = 1, 2 on a fixed grid of lengths (natural text)."""
    from accesslib.models import embedded
    from accesslib.config import home

    return dict(name="notebook-sweep", models=[embedded.DEFAULT], m=[1, 2], source="natural",
                samples=2 if fast else 8, seeds=[0], lengths=[2, 4] if fast else [4, 6, 8, 10, 12, 16, 20],
                engine=dict(protocol="fast", max_steps=30 if fast else 1000),
                store=str(home() / "sweeps.sqlite"), torch_threads=1)


class SweepApp(App):
    """Run a sweep (accesslib.experiments.sweep) on a Dask LocalCluster from the page: progress, dashboard
    link, and the accessibility curves read from the results store after every job."""

    figsize = (7.5, 3.4)

    def __init__(self, *, spec=None, scheduler=None, policy=None, canvas="auto", fast=FAST):
        super().__init__(canvas=canvas)
        from accesslib.experiments.sweep import load_spec

        self.policy = policy or current_policy()
        self.spec = load_spec(spec if spec is not None else default_sweep(fast))
        self.scheduler = scheduler
        self.run = None
        self.run_button = W.Button(description="Launch sweep", button_style="success", icon="play")
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.progress = W.IntProgress(value=0, min=0, max=max(1, len(self.spec.jobs())), description="jobs",
                                      style=_DESC, layout=W.Layout(width="360px"))
        self.controls.children = [
            W.HTML(f"<span style='font-size:90%'>sweep: models {', '.join(self.spec.model_labels)}; "
                   f"m = {self.spec.m}; lengths {self.spec.lengths}; {self.spec.samples} strings each; "
                   f"store {html.escape(str(self.spec.store_path()))}</span>"),
            W.HBox([self.run_button, self.stop_button, self.progress])]
        ax = self.fig.add_subplot(1, 1, 1)
        self.fig.subplots_adjust(left=0.1, right=0.97, bottom=0.16, top=0.88)
        self.art = cram_plots.plot_accessibility(ax)
        self.run_button.on_click(lambda _: self.guard(self.start))
        self.stop_button.on_click(lambda _: self.run.stop() if self.run is not None else None)
        self.refresh()

    def start(self):
        if self.policy.public:
            raise ValueError("sweeps start worker processes: they are switched off on this public server")
        if self.run is not None and self.run.running:
            raise ValueError("a sweep is already running: press Stop first")
        from accesslib.experiments.sweep import start_sweep

        self.run = start_sweep(self.spec, on_job_done=lambda res: self.guard(self.update),
                               scheduler=self.scheduler, progress=False)
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.set_status("starting the Dask cluster ...")

    def wait(self, timeout=None):
        """Block until the sweep ends (scripts and tests); then show its final state."""
        if self.run is not None:
            self.run._thread.join(timeout)
        self.refresh()
        return self.run is None or not self.run.running

    def update(self):
        from accesslib.experiments.sweep import sweep_curves

        counts = self.run.curves() if self.run is not None else sweep_curves(self.spec)
        model = self.spec.model_labels[0]
        curves = {m: CrammingApp._curve_from_counts(c) for (mod, m), c in counts.items() if mod == model and c}
        self.curves = curves
        cram_plots.update_accessibility(self.art, curves)
        self.readout.value = " &nbsp;·&nbsp; ".join(
            f"m={m}: n50 = {c['n50']:.1f}" for m, c in sorted(curves.items()) if math.isfinite(c["n50"]))
        if self.run is not None:
            done, total = self.run.progress
            self.progress.max, self.progress.value = max(1, total), done
            link = self.run.dashboard_link
            state = "running" if self.run.running else "finished"
            if not self.run.running:
                self.run_button.disabled, self.stop_button.disabled = False, True
                if self.run.error is not None:
                    raise ValueError(f"the sweep failed: {self.run.error}")
            self.set_status(f"{state}: {done}/{total} jobs" + (f"; Dask dashboard: {link}" if link else ""))
        self.redraw()
