"""Notebook 02: cramming live.

:class:`CrammingApp`: pick a model, target source, m, lengths, samples; Run crams in a
background thread (Stop keeps what finished), with a progress bar, a live loss plot, a row per
finished string and the accessibility curve filling in. Results go to the results store;
reopening shows earlier runs of the same settings. Until the first Run, settings the store holds
nothing for show the model's shipped curve (:func:`shipped_curves`, from its results bundle),
titled as shipped with the conditions it was measured under.
"""
from __future__ import annotations

import html
import math
import threading
import time

import ipywidgets as W

from accesslib._checks import parse_int_list
from accesslib.apps.base import App, BackgroundRun, human_date
from accesslib.apps.policy import app_policy
from accesslib.config import FAST
from accesslib.plots import cramming as cram_plots
from accesslib.plots.style import UI_COLORS

_DESC = {"description_width": "120px"}
#: the controls' two columns: names and free text (wide enough for every option), numbers
_WIDE, _NARROW = "400px", "250px"


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


def curve_from_counts(counts: dict) -> dict:
    """A store's counts {n: (successes, totals)} as the curve the accessibility panel draws,
    with the logistic n50 fit (:func:`accesslib.theory.stats.fit_n50`) where it converges."""
    from accesslib.theory.stats import fit_n50

    lengths = sorted(counts)
    s = [counts[n][0] for n in lengths]
    t = [counts[n][1] for n in lengths]
    fit = fit_n50((lengths, s, t)) if lengths else None
    ok = fit is not None and fit.ok
    return dict(lengths=lengths, successes=s, totals=t, fit=(fit.n50, fit.k) if ok else None,
                n50=fit.n50 if ok else float("nan"), n50_stderr=fit.stderr if ok else float("nan"))


def curve_rows(curves: dict, **settings) -> list[dict]:
    """The accessibility curves an app draws ({m: :func:`curve_from_counts`}) as rows for its
    CSV: the ``settings`` (model, source, protocol, ...), m, n, successes, strings, the
    fraction and the curve's n50 ± stderr."""
    rows = []
    for m in sorted(curves):
        c = curves[m]
        for n, s, t in zip(c["lengths"], c["successes"], c["totals"]):
            rows.append(dict(settings, m=m, n=n, successes=s, strings=t, fraction=s / t if t else float("nan"),
                             n50=c["n50"], n50_stderr=c["n50_stderr"]))
    return rows


SOURCE_NAMES = {"natural": "natural text", "words": "random words", "words100k": "random words (SCOWL 100k)",
                "glove100k": "[A]'s random words (GloVe 100k)", "tokens": "random tokens"}


def shipped_curves(model: str):
    """The accessibility curves shipped in ``model``'s results bundle (:mod:`accesslib.results.bundles`)
    as ``({m: curve_from_counts(...)}, conditions)``, the n50 fits recomputed from the stored
    counts; None when the model has no bundle. ``conditions``: model, source, protocol, max_steps,
    samples (strings per length and attempt), created (ISO date)."""
    from accesslib.results import bundles

    try:
        b = bundles.load("cram", model)
    except ValueError:   # no bundle for this model
        return None
    curves = {int(c["m"]): curve_from_counts({n: (s, t) for n, s, t in zip(c["lengths"], c["successes"], c["totals"])})
              for c in b.get("curves") or []}
    if not curves:
        return None
    totals = [t for c in curves.values() for t in c["totals"]]
    cond = dict(model=b["model"], source=b.get("source"), protocol=b.get("protocol"),
                max_steps=(b.get("settings") or {}).get("max_steps"), strings_min=min(totals),
                strings_max=max(totals), created=b.get("created"))
    return curves, cond


def shipped_label(cond) -> str:
    """A shipped curve's conditions, in short lines (what the reader's run may differ in)."""
    strings = (f"{cond['strings_min']}" if cond["strings_min"] == cond["strings_max"]
               else f"{cond['strings_min']}-{cond['strings_max']}")
    steps = f"at most {cond['max_steps']:,} steps, " if cond.get("max_steps") else ""
    return (f"{cond['model']}, {SOURCE_NAMES.get(cond['source'], str(cond['source']))}, "
            f"{cond['protocol']} protocol,\n{steps}{strings} strings per length, "
            f"made {human_date(cond.get('created'))}")


class CrammingApp(App):
    """Run cramming on a chosen model and watch the accessibility curve appear."""

    figsize = (10.0, 3.8)   # with the controls: one 1280x800 screen
    export_name = "nb02-cramming"
    MAX_ROWS = 12

    def __init__(self, *, model=None, store=None, policy=None, canvas="auto", fast=FAST):
        super().__init__(canvas=canvas)
        from accesslib.models import embedded
        from accesslib.results.store import ResultsStore

        self.policy = policy or app_policy()  # a bad ACCESSLIB_PUBLIC: shown, every run refused
        self.store = store if isinstance(store, ResultsStore) else ResultsStore(store)
        self.fast = fast
        choices = model_choices(self.policy)
        model = model or embedded.DEFAULT
        if self.policy.public:
            self.model = W.Dropdown(options=choices, value=model if model in choices else choices[0],
                                    description="model", style=_DESC, layout=W.Layout(width=_WIDE))
        else:  # free text too: a hub name or a local path
            self.model = W.Combobox(options=choices, value=model, ensure_option=False, layout=W.Layout(width=_WIDE),
                                    description="model", placeholder="name, hub id or path", style=_DESC)
        devices = ["cpu"]
        import torch
        if torch.cuda.is_available():
            devices.append("cuda")
        self.device = W.Dropdown(options=devices, value="cpu", description="device", style=_DESC,
                                 layout=W.Layout(width=_NARROW))
        # weights' dtype: auto = bfloat16 on cuda, float32 on cpu (memory vectors, optimiser and
        # loss stay float32 either way)
        self.dtype = W.Dropdown(options=[("auto", "auto"), ("float32", "float32"), ("bfloat16", "bfloat16")],
                                value="auto", description="dtype", style=_DESC, layout=W.Layout(width=_NARROW))
        self.source = W.Dropdown(options=[("natural text (KJV, held out)", "natural"),
                                          ("random words", "words"),
                                          ("[A]'s random words (GloVe 100k)", "glove100k"),
                                          ("random tokens", "tokens")],
                                 value="natural", description="targets", style=_DESC, layout=W.Layout(width=_WIDE))
        self.ms = W.Text(value="1" if fast else "1, 2", description="m values", style=_DESC, layout=W.Layout(width=_NARROW))
        self.lengths = W.Text(value="auto", description="lengths", style=_DESC,
                              placeholder="auto, or e.g. 4, 8, 16", layout=W.Layout(width=_WIDE))
        self.samples = W.BoundedIntText(value=2 if fast else 8, min=1, max=256, description="strings/length",
                                        style=_DESC, layout=W.Layout(width=_WIDE))
        self.protocol = W.Dropdown(options=[("fast (ours)", "fast"), ("paper [A]", "paper")], value="fast",
                                   description="protocol", style=_DESC, layout=W.Layout(width=_NARROW))
        self.max_steps = W.BoundedIntText(value=30 if fast else 1000, min=1, max=100000,
                                          description="max steps", style=_DESC, layout=W.Layout(width=_NARROW))
        self.run_button = W.Button(description="Run", button_style="success", icon="play")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="strings", style=_DESC,
                                      layout=W.Layout(width="420px"))
        self.runner = BackgroundRun(self, run_buttons=[self.run_button], progress=self.progress,
                                    name="accesslib-cram")
        self.stop_button = self.runner.stop_button
        self.table = W.HTML()
        self.table.add_class("accesslib-results")
        note = W.HTML(f'<span style="color:{UI_COLORS["muted"]};font-size:90%">'
                      f'{html.escape(self.policy.describe())}</span>')
        self.controls.children = [
            W.HBox([self.model, self.device, self.dtype]),
            W.HBox([self.source, self.protocol]),
            W.HBox([self.lengths, self.ms]),
            W.HBox([self.samples, self.max_steps]),
            W.HBox([self.run_button, self.stop_button, self.progress]),
            note,
        ]
        self.widget.children = tuple(self.widget.children) + (self.table,)
        ax_l = self.fig.add_subplot(1, 2, 1)
        ax_c = self.fig.add_subplot(1, 2, 2)
        self.fig.subplots_adjust(left=0.075, right=0.985, bottom=0.14, top=0.84, wspace=0.24)
        self.art_loss = cram_plots.plot_loss(ax_l)
        self.art_curve = cram_plots.plot_accessibility(ax_c)
        self._lock = threading.Lock()
        self._models = {}
        self.loss_steps, self.loss_mean, self.loss_best = [], [], []
        self.rows = []
        self.curves = {}
        self.shown = {}
        self._last_draw = 0.0
        self.origin = "store"        # what the curve panel shows: "store" or "shipped" (the bundle)
        self.shipped_until_run = True   # the shipped curve stands in for an empty store until Run
        self.run_button.on_click(lambda _: self.guard(self.start))
        for w in (self.model, self.source, self.protocol, self.max_steps):
            w.observe(self.refresh, names="value")
        self.refresh()
        if self.policy.error is not None:
            self.show_error(self.policy.error)

    # -- settings ---------------------------------------------------------------------------
    def request(self) -> dict:
        """The run the controls describe, validated (ValueError names the bad value)."""
        name = str(self.model.value).strip()
        ms = parse_int_list(self.ms.value, "m values")
        lengths_text = str(self.lengths.value).strip().lower()
        lengths = None if lengths_text in ("", "auto") else parse_int_list(self.lengths.value, "lengths")
        req = dict(model=name, ms=ms, lengths=lengths, samples=int(self.samples.value),
                   source=self.source.value, protocol=self.protocol.value,
                   max_steps=int(self.max_steps.value), device=self.device.value,
                   dtype=None if self.dtype.value == "auto" else self.dtype.value)
        self.policy.check_request(model=name, m=ms, lengths=lengths or [1], samples=req["samples"],
                                  max_steps=req["max_steps"])
        return req

    def _protocol_hash(self, req) -> str:
        from accesslib.experiments.curves import protocol_hash_for

        return protocol_hash_for(req["protocol"], {"max_steps": req["max_steps"]})

    # -- what the store already has ---------------------------------------------------------
    def update(self):
        """Show the stored results of the current settings (earlier runs, or this one so far)."""
        req = self.request()
        ph = self._protocol_hash(req)
        curves = {}
        for run in self.store.runs(cached=True):  # reads only the rows added since
            if run["model"] == req["model"] and run["source"] == req["source"] and run["protocol_hash"] == ph:
                m = int(run["m"])
                counts = self.store.curve(req["model"], m, req["source"], ph)
                curves[m] = curve_from_counts(counts)
        stored = sum(sum(c["totals"]) for c in curves.values())
        shipped = shipped_curves(req["model"]) if not stored and self.shipped_until_run else None
        if shipped is not None and (shipped[1]["source"], shipped[1]["protocol"]) != (req["source"], req["protocol"]):
            shipped = None   # measured on other targets or another protocol: not shown in their place
        if shipped is not None:   # nothing measured here yet: the model's shipped curve, labelled
            curves, cond = shipped
            self.origin = "shipped"
            self.shown = dict(origin="shipped bundle", **{k: cond[k] for k in ("model", "source", "protocol",
                                                                                "max_steps")})
            note = "shipped curve, not your run (press Run for yours):\n" + shipped_label(cond)
        else:
            self.origin = "store"
            self.shown = dict(origin="results store", model=req["model"], source=req["source"],
                              protocol=req["protocol"], max_steps=req["max_steps"], protocol_hash=ph)
            note = ""
        self.curves = curves
        cram_plots.set_accessibility_note(self.art_curve, note)
        self._draw_curves()
        if self.is_running:
            return
        if shipped is not None:
            self.set_status("Showing the curve shipped with the model (see its conditions in the figure); "
                            "press Run to measure with the settings above.")
        else:
            self.set_status(f"{stored} strings of these settings in the results store "
                            f"({self.store.path})." if stored else
                            "No stored results for these settings yet: press Run.")

    def data_rows(self) -> list[dict]:
        """Panel "accessibility": the stored counts per (m, n) of the shown settings with each
        curve's n50; panel "loss": this run's loss against step (mean, and median best)."""
        rows = [dict(panel="accessibility", **r) for r in curve_rows(self.curves, **self.shown)]
        with self._lock:
            rows += [dict(panel="loss", step=s, mean_loss=a, median_best_loss=b)
                     for s, a, b in zip(self.loss_steps, self.loss_mean, self.loss_best)]
        return rows

    def _draw_curves(self):
        cram_plots.update_accessibility(self.art_curve, self.curves)
        bits = []
        for m in sorted(self.curves):
            c = self.curves[m]
            if math.isfinite(c["n50"]):
                bits.append(f"m={m}: n50 = {c['n50']:.1f} ± {c['n50_stderr']:.1f}")
        head = "<b>shipped</b> (not your run)" if self.origin == "shipped" else "<b>measured</b>"
        self.readout.value = (head + " " + " &nbsp;·&nbsp; ".join(bits)) if bits else ""
        self.redraw()

    # -- running ----------------------------------------------------------------------------
    def start(self):
        """Validate, then cram in the background (:class:`~accesslib.apps.base.BackgroundRun`).
        Refusals are messages; nothing runs. Stop keeps what finished (in the store too)."""
        req = self.request()
        self.runner.start(lambda run: self._work(run, req), on_done=self._done)
        self.shipped_until_run = False   # from now on the panel shows measured strings only
        self.guard(self.update)

    def _load(self, name, device, dtype=None):
        key = (name, device, dtype)
        if key not in self._models:
            from accesslib.models.loading import load_model
            self._models = {key: load_model(name, dtype=dtype, device=device)}  # keep one model in memory
        return self._models[key]

    def _work(self, run, req):
        with self._lock:
            self.rows.clear()
            self.loss_steps, self.loss_mean, self.loss_best = [], [], []
        with self.policy.run_slot():
            self.set_status(f"loading {req['model']} ...")
            lm = self._load(req["model"], req["device"], req["dtype"])
            if req["device"] == "cpu" and lm.facts.n_params < 10_000_000:
                # tiny models are bound by per-step overhead: one thread is as fast, and
                # leaves the other cores to the page and to other visitors
                import torch
                torch.set_num_threads(1)
            from accesslib.experiments.curves import accessibility_curves

            per_m = req["samples"] * (len(req["lengths"]) if req["lengths"] else 6)
            run.set_progress(0, per_m * len(req["ms"]))
            max_length = self.policy.max_length or 1000
            self.set_status(f"cramming with m = {', '.join(map(str, req['ms']))} ...")
            # one engine for every m: their strings share its batch
            accessibility_curves(
                lm, req["ms"], lengths=req["lengths"], samples=req["samples"], source=req["source"],
                store=self.store, protocol=req["protocol"], max_steps=req["max_steps"],
                max_length=max_length, on_string=self._on_string, on_step=self._on_step,
                stop=run.stop_event)

    def _done(self, outcome):
        self.guard(self.update)
        ok = sum(r["success"] for r in self.rows)
        return (f"{len(self.rows)} strings crammed this run ({ok} reproduced exactly by greedy decoding) "
                f"in {self.runner.elapsed:.1f} s; results are in {self.store.path}")

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
            self.runner.set_progress(len(self.rows))
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
            colour = UI_COLORS["success"] if r["success"] else UI_COLORS["failure"]
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
