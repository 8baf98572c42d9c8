"""The copy-task app of notebook 06 (docs/paper.md, section 7).

Left: training loss against step; right: exact-string accuracy against copy length (greedy
and teacher-forced), the training range shaded. On page load the figure shows the shipped run
(``accesslib/data/bundles/copy_run.json``, made by ``scripts/train_copy.py``); nothing is
trained or imported from torch until a button is pressed.

Run trains a fresh model in a background thread (progress bar, live loss), then evaluates it
length by length (the accuracy curve fills in live). Stop ends either phase cooperatively.
"Evaluate shipped model" runs the shipped weights live at the chosen lengths. With
``accesslib.config.FAST`` every workload is tiny (tests, nbval, browser checks).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import ipywidgets as W

from accesslib import config as _config
from accesslib._checks import check_choice, check_int, parse_int_list
from accesslib.apps.base import App, BackgroundRun, human_date
from accesslib.config import data_path
from accesslib.plots import copying as copy_plots

_DESC = {"description_width": "110px"}
BUNDLE = "copy_run.json"
WEIGHTS = "copy-task"
#: letters of the copy task's alphabet: a uniform guess costs ln 26 nats per letter
ALPHABET = 26


def load_bundle(path=None) -> dict | None:
    """The shipped copy run (dict as written by scripts/train_copy.py), or None if absent."""
    p = Path(path) if path is not None else data_path("bundles", BUNDLE)
    if not p.is_file():
        return None
    return json.loads(p.read_text())


def weights_dir() -> Path | None:
    """Directory of the shipped copy-model weights, or None if they are not installed."""
    p = data_path("models", WEIGHTS)
    return p if (p / "model.safetensors").is_file() else None


def first_below(lengths, acc, after, level=0.1):
    """First evaluated length > ``after`` whose accuracy is below ``level`` (None if none)."""
    for L, a in zip(lengths, acc):
        if a is not None and L > after and a < level:
            return int(L)
    return None


class CopyApp(App):
    """Train a small transformer to copy, watch the loss, then see accuracy collapse with length."""

    figsize = (9.6, 4.4)
    export_name = "nb06-copy"

    def __init__(self, *, bundle=None, fast=None, canvas="auto"):
        super().__init__(canvas=canvas)
        self.fast = _config.FAST if fast is None else bool(fast)
        self.bundle = load_bundle() if bundle is None else bundle
        self.result = None       # last TrainResult
        self.model = None        # last trained or loaded model
        self.steps_seen = []
        self.losses_seen = []
        self.acc_rows = []       # LengthAccuracy rows of the current evaluation
        self.shown = dict(loss=([], []), accuracy=([], [], [], 1, (0, 0)))   # what the figure shows
        self._last_draw = 0.0
        cfg = self._default_config()
        lay = W.Layout(width="300px")
        self.steps = W.IntText(value=40 if self.fast else 4000, description="max steps", style=_DESC, layout=lay)
        self.d = W.Dropdown(options=[16, 32, 64, 128], value=cfg["d"], description="width d", style=_DESC, layout=lay)
        self.layers = W.Dropdown(options=[1, 2, 3, 4], value=cfg["layers"], description="layers", style=_DESC, layout=lay)
        self.lr = W.FloatLogSlider(value=cfg["lr"], base=10, min=-4, max=-2, step=0.1, description="learning rate",
                                   readout_format=".1e", style=_DESC, layout=lay)
        self.max_len = W.IntSlider(value=cfg["max_len"], min=5, max=100, description="train up to",
                                   style=_DESC, layout=lay)
        self.lengths = W.Text(value="5, 10, 20" if self.fast else "10, 20, 30, 40, 50, 60, 70, 80, 100, 150, 200, 300",
                              description="eval lengths", style=_DESC, layout=W.Layout(width="600px"))
        self.n_eval = W.IntText(value=8 if self.fast else 100, description="strings/length", style=_DESC, layout=lay)
        self.run_btn = W.Button(description="Run (train)", button_style="primary", icon="play")
        self.eval_btn = W.Button(description="Evaluate shipped model", icon="check",
                                 layout=W.Layout(width="210px"), disabled=weights_dir() is None)
        self.progress = W.IntProgress(value=0, min=0, max=1, layout=W.Layout(width="300px"))
        self.runner = BackgroundRun(self, run_buttons=[self.run_btn, self.eval_btn], progress=self.progress,
                                    name="accesslib-copy")
        self.stop_btn = self.runner.stop_button
        self.controls.children = [
            W.HBox([W.VBox([self.d, self.layers, self.lr]), W.VBox([self.max_len, self.steps, self.n_eval])]),
            self.lengths,
            W.HBox([self.run_btn, self.eval_btn, self.stop_btn, self.progress]),
        ]
        self.run_btn.on_click(lambda _: self.start("train"))
        self.eval_btn.on_click(lambda _: self.start("shipped"))
        self._build_figure()
        self.show_bundle()

    # -- settings -----------------------------------------------------------------------------
    def _default_config(self):
        if self.fast:
            return dict(d=16, layers=1, lr=3e-3, max_len=6)
        c = (self.bundle or {}).get("config", {})
        return dict(d=int(c.get("d", 64)), layers=int(c.get("layers", 2)), lr=float(c.get("lr", 3e-3)),
                    max_len=int(c.get("max_len", 50)))

    def make_config(self):
        """The CopyConfig the Run button uses (ValueError with the field's name when invalid)."""
        from accesslib.engine.copying import CopyConfig

        d = int(self.d.value)
        heads = 2 if d <= 32 else 4
        kw = dict(d=d, heads=heads, intermediate=4 * d, layers=int(self.layers.value), lr=float(self.lr.value),
                  max_len=int(self.max_len.value), min_len=min(5, int(self.max_len.value)))
        if self.fast:
            # a small position table, but always room for 2L + 3 positions of the longest training copy
            kw.update(batch_size=8, warmup=5, eval_every=0, max_position=max(256, 2 * kw["max_len"] + 3))
        else:
            kw.update(eval_every=250)
        return CopyConfig(**kw).validate()

    # -- figure -------------------------------------------------------------------------------
    def _build_figure(self):
        fig = self.fig
        self.ax_loss = fig.add_subplot(1, 2, 1)
        self.ax_acc = fig.add_subplot(1, 2, 2)
        fig.subplots_adjust(left=0.08, right=0.98, top=0.85, bottom=0.13, wspace=0.25)
        self.art_loss = copy_plots.plot_training_loss(self.ax_loss, chance=math.log(ALPHABET),
                                                      chance_label=f"chance: ln {ALPHABET}")
        self.art_acc = copy_plots.plot_copy_accuracy(self.ax_acc)
        self.loss_line = self.art_loss["line"]
        self.greedy_pts, self.tf_pts = self.art_acc["greedy"], self.art_acc["teacher_forced"]
        self.title = fig.suptitle("", fontsize=10)

    def _set_loss(self, steps, losses):
        self.shown["loss"] = (list(steps), list(losses))
        copy_plots.update_training_loss(self.art_loss, steps, losses)

    def _set_accuracy(self, lengths, greedy, tf, n, train_range):
        self.shown["accuracy"] = (list(lengths), list(greedy), list(tf), n, tuple(train_range))
        copy_plots.update_copy_accuracy(self.art_acc, lengths, greedy, tf, n, train_range)

    def data_rows(self) -> list[dict]:
        """Panel "accuracy": exact-match accuracy (greedy, teacher-forced) by copy length, with the
        strings per length and the training range; panel "loss": training loss by step."""
        lengths, greedy, tf, n, (lo, hi) = self.shown["accuracy"]
        rows = [dict(panel="accuracy", length=L, greedy=g, teacher_forced=t, strings=n, train_min=lo, train_max=hi)
                for L, g, t in zip(lengths, greedy, tf)]
        steps, losses = self.shown["loss"]
        rows += [dict(panel="loss", step=s, loss=v) for s, v in zip(steps, losses)]
        return rows

    def show_bundle(self):
        """Draw the shipped run (no computation); a note if it is absent."""
        b = self.bundle
        if not b:
            self.title.set_text("no precomputed run shipped: press Run")
            self.redraw_now()
            return
        self._set_loss(b["loss"]["step"], b["loss"]["loss"])
        acc = b["accuracy"]
        self._set_accuracy(acc["lengths"], acc["greedy"], acc["teacher_forced"], acc["n"], b["train_range"])
        c = b["config"]
        below = b.get("first_length_below_10pct", {}).get("greedy")
        top = b["train_range"][1]
        self.title.set_text(
            f"shipped run: d={c['d']}, {c['layers']} layers, {b['steps_done']} steps, "
            f"{b['train_wall_time_s'] / 60:.1f} min wall / {b['train_cpu_time_s'] / 60:.1f} min CPU"
            + (f"\ngreedy accuracy < 10% from length {below} ({below / top:.1f}x the longest "
               f"training length, {top})" if below else ""))
        self.set_status(f"Showing the precomputed run of {human_date(b.get('date'))} "
                        f"({b.get('hardware', {}).get('cpu', 'CPU')}). Press Run to train your own.")
        self.redraw_now()

    def redraw_now(self):
        self._last_draw = time.monotonic()
        self.invalidate()   # limits may have moved: full draw
        self.redraw()

    def _maybe_redraw(self, every=0.5):
        if time.monotonic() - self._last_draw >= every:
            self.redraw_now()

    # -- running ------------------------------------------------------------------------------
    def start(self, what="train", *, wait=False):
        """Start training ('train') or the shipped model's evaluation ('shipped') in the
        background; False (and a message) when the inputs are bad or a run is going."""
        def go():
            check_choice("what", what, ("train", "shipped"))
            self._validate_inputs()
            self.runner.start(self._work_train if what == "train" else self._work_shipped,
                              on_done=lambda outcome: self.redraw_now())
        if not self.guard(go):
            return False
        if wait:
            self.wait()
        return True

    def _validate_inputs(self):
        check_int("max steps", int(self.steps.value), 1, 100_000)
        check_int("strings/length", int(self.n_eval.value), 1, 10_000)
        parse_int_list(self.lengths.value, "eval lengths", high=1000)
        self.make_config()

    def _on_step(self, s):
        self.steps_seen.append(s.step)
        self.losses_seen.append(s.loss)
        self.runner.set_progress(s.step)
        if s.step % 10 == 0 or s.step == s.steps:
            self.set_status(f"training: step {s.step}/{s.steps}, loss {s.loss:.4f}, "
                            f"{s.elapsed:.0f} s wall, {s.cpu_time:.0f} s CPU"
                            + (f"; teacher-forced accuracy at the longest training length {s.check_acc:.2f}"
                               if s.check_acc is not None else ""))
            self._set_loss(self.steps_seen, self.losses_seen)
            self._maybe_redraw()

    def _work_train(self, run):
        from accesslib.engine import copying as cp

        cfg = self.make_config()
        steps = int(self.steps.value)
        self.steps_seen, self.losses_seen = [], []
        run.set_progress(0, steps)
        self.title.set_text(f"your run: d={cfg.d}, {cfg.layers} layers, trained on lengths {cfg.min_len}..{cfg.max_len}")
        self._set_accuracy([], [], [], 1, (cfg.min_len, cfg.max_len))
        self._set_loss([], [])
        self.redraw_now()
        self.set_status("building the model...")
        res = cp.train(cfg, steps=steps, on_step=self._on_step, stop=run.stop_event)
        self.result, self.model = res, res.model
        self._set_loss(self.steps_seen, self.losses_seen)
        how = "stopped" if res.interrupted else ("reached 100% at the longest training length" if res.reached_target
                                                  else "used every step")
        self.title.set_text(f"your run: d={cfg.d}, {cfg.layers} layers, {res.steps_done} steps "
                            f"({how}), {res.wall_time:.0f} s wall / {res.cpu_time:.0f} s CPU")
        if res.interrupted:
            return f"trained for {res.steps_done} steps, not evaluated"
        return self._evaluate(run, res.model, (cfg.min_len, cfg.max_len))

    def _work_shipped(self, run):
        from accesslib.engine import copying as cp

        path = weights_dir()
        if path is None:
            raise ValueError("the shipped copy-model weights are not installed (accesslib/data/models/copy-task)")
        self.set_status("loading the shipped model...")
        self.model = cp.load_weights(path)
        tr = tuple((self.bundle or {}).get("train_range", (5, 50)))
        self.title.set_text("shipped model, evaluated live")
        return self._evaluate(run, self.model, tr)

    def _evaluate(self, run, model, train_range):
        """Accuracy length by length (the curve fills in live); returns the run's summary."""
        from accesslib.engine import copying as cp

        mp = getattr(model.config, "max_position_embeddings", None)
        # a copy example of length L takes 2L + 3 positions
        lengths = parse_int_list(self.lengths.value, "eval lengths", high=(mp - 3) // 2 if mp else None)
        n = int(self.n_eval.value)
        self.acc_rows = []
        run.set_progress(0, len(lengths))
        self._set_accuracy([], [], [], n, train_range)

        def on_length(r):
            self.acc_rows.append(r)
            run.set_progress(len(self.acc_rows))
            self._set_accuracy([x.length for x in self.acc_rows], [x.greedy for x in self.acc_rows],
                               [x.teacher_forced for x in self.acc_rows], n, train_range)
            self.set_status(f"evaluating: length {r.length}: greedy {r.greedy:.2f}, "
                            f"teacher-forced {r.teacher_forced:.2f} ({n} strings)")
            self.redraw_now()

        cp.evaluate(model, lengths, n=n, stop=run.stop_event, on_length=on_length)
        rows = self.acc_rows
        below = first_below([r.length for r in rows], [r.greedy for r in rows], train_range[1])
        return (("during evaluation; " if run.stop_requested else "")
                + (f"greedy accuracy falls below 10% at length {below} "
                   f"({below / train_range[1]:.1f}x the longest training length)" if below else
                   f"greedy accuracy stayed at or above 10% at every evaluated length ({len(rows)})"))
