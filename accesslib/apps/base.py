"""ipywidgets apps, one per notebook figure (CONVENTIONS.md, "Widgets and plots").

:class:`App` is the reusable base: a figure created once (ipympl canvas under
``%matplotlib widget``, a PNG image widget otherwise, so headless runs work), an error area
where a bad value shows a readable one-line message (never a traceback), and a status line.
Subclasses build controls, call :meth:`App.guard` around their update and repaint with
:meth:`App.redraw`.

:class:`BoundsApp` is the explorer of the counting bound of [A] (shared/PAPER.md section 2).
"""
from __future__ import annotations

import contextlib
import html
import io
import math

import numpy as np

import ipywidgets as W
import matplotlib
from matplotlib.figure import Figure

from accesslib.theory import bounds

from accesslib.plots import bounds as plotting

from accesslib.results import reference

_DESC = {"description_width": "150px"}


def ipympl_active():
    """True when matplotlib's backend is ipympl (``%matplotlib widget`` / ``ipympl``)."""
    backend = str(matplotlib.get_backend()).lower()
    return "ipympl" in backend or backend == "widget"


def make_figure(figsize, canvas="auto", dpi=100):
    """Create a figure once and the widget that shows it.

    canvas: "auto" (ipympl when the backend is ipympl, else "image"), "ipympl" (the interactive
    canvas widget), "image" (Agg rendered into an ``ipywidgets.Image``: no ipympl needed),
    "agg" (no view at all; benchmarks and tests). Returns (fig, view, mode).
    """
    if canvas not in {"auto", "ipympl", "image", "agg"}:
        raise ValueError(f"canvas must be one of 'auto', 'ipympl', 'image', 'agg'; got {canvas!r}")
    mode = canvas
    if mode == "auto":
        mode = "ipympl" if ipympl_active() else "image"
    if mode == "ipympl":
        try:
            from ipympl.backend_nbagg import new_figure_manager_given_figure
        except ImportError:  # graceful: the static image still works
            mode = "image"
    if mode == "ipympl":
        fig = Figure(figsize=figsize, dpi=dpi)
        # a manager without pyplot: no global figure list, nothing shown twice by the backend
        new_figure_manager_given_figure(id(fig), fig)
        view = fig.canvas
        view.header_visible = False
        view.footer_visible = False
        view.toolbar_visible = False
        view.resizable = False
        view.capture_scroll = False
        return fig, view, mode
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    view = W.Image(format="png", layout=W.Layout(max_width="100%")) if mode == "image" else None
    return fig, view, mode


class App:
    """Base for every accesslib app: figure, error area, status line, guarded updates.

    Subclasses fill ``self.controls`` (a widget) and implement :meth:`update`; the page layout
    is ``self.widget`` (controls, readout, error area, figure, status), displayable directly.
    """

    figsize = (9.6, 7.0)

    def __init__(self, *, canvas="auto"):
        self.error = W.HTML(layout=W.Layout(display="none", margin="4px 0"))
        self.error.add_class("accesslib-error")
        self.status = W.HTML(layout=W.Layout(margin="2px 0"))
        self.status.add_class("accesslib-status")
        self.readout = W.HTML()
        self.readout.add_class("accesslib-readout")
        self.fig, self.view, self.canvas_mode = make_figure(self.figsize, canvas)
        self.last_error = None
        self._hold = 0
        self._bg = None          # cached background for blitting (see redraw)
        self._bg_key = None
        self.fig.canvas.mpl_connect("draw_event", self._on_draw)
        self.controls = W.VBox()
        parts = [self.controls, self.readout, self.error]
        if self.view is not None:
            parts.append(self.view)
        parts.append(self.status)
        self.widget = W.VBox(parts, layout=W.Layout(width="100%"))

    # -- display ----------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # -- messages ---------------------------------------------------------------------------
    def show_error(self, message):
        """Show ``message`` (plain text, escaped) in the error area; keep the last good figure."""
        self.last_error = str(message)
        self.error.value = (
            '<div style="color:#8a1c1c;background:#fdecea;border:1px solid #f5c2c0;'
            'border-radius:4px;padding:6px 10px">'
            f"<b>Cannot update:</b> {html.escape(self.last_error)}</div>")
        self.error.layout.display = None

    def clear_error(self):
        self.last_error = None
        self.error.value = ""
        self.error.layout.display = "none"

    def set_status(self, text):
        self.status.value = f'<span style="color:#555;font-size:90%">{html.escape(text)}</span>'

    # -- updates ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def hold(self):
        """Change several controls at once; one update at the end."""
        self._hold += 1
        try:
            yield
        finally:
            self._hold -= 1
        if not self._hold:
            self.refresh()

    def refresh(self, *_):
        """Run :meth:`update` unless held; errors become a message, never a traceback."""
        if self._hold:
            return False
        return self.guard(self.update)

    def guard(self, fn, *args, **kwargs):
        """Call ``fn``; a ValueError shows its message, anything else a short one-liner."""
        try:
            fn(*args, **kwargs)
        except ValueError as e:
            self.show_error(str(e))
            return False
        except Exception as e:  # never let a traceback reach the page
            self.show_error(f"unexpected {type(e).__name__}: {e}")
            return False
        self.clear_error()
        return True

    def update(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- drawing --------------------------------------------------------------------------
    def animated_artists(self):
        """Artists that change on every update; subclasses list them (others are background)."""
        return []

    def invalidate(self):
        """Say that the background changed (new series, labels...): next redraw is a full one."""
        self._bg = None

    def _layout_key(self):
        key = [tuple(self.fig.bbox.bounds)]
        for ax in self.fig.axes:
            key += [ax.get_xlim(), ax.get_ylim()]
        return tuple(key)

    def _on_draw(self, event):
        # After any full draw (ours, or one the browser asked ipympl for): keep the background
        # without the moving artists, then paint them on top.
        canvas = self.fig.canvas
        self._bg = canvas.copy_from_bbox(self.fig.bbox)
        self._bg_key = self._layout_key()
        self._draw_animated()

    def _draw_animated(self):
        for a in self.animated_artists():
            if a.get_visible():
                self.fig.draw_artist(a)

    def redraw(self):
        """Repaint the figure after an update.

        When no axis limit changed, only the moving artists are redrawn over the cached
        background (blitting: a few ms); otherwise a full draw (ipympl: when the browser asks).
        The image fallback then encodes the canvas as a PNG. An app that lists no animated
        artists gets a full draw every time (its cached background would be stale).
        """
        canvas = self.fig.canvas
        moving = self.animated_artists()
        for a in moving:
            a.set_animated(True)
        if moving and self._bg is not None and self._bg_key == self._layout_key():
            canvas.restore_region(self._bg)
            self._draw_animated()
            if self.canvas_mode == "ipympl":
                canvas.blit(self.fig.bbox)
        elif self.canvas_mode == "ipympl":
            self._bg = None
            canvas.draw_idle()
        else:
            canvas.draw()   # fires draw_event -> _on_draw
        if self.canvas_mode == "image":
            from PIL import Image

            buf = io.BytesIO()
            Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", compress_level=1)
            self.view.value = buf.getvalue()


# ---------------------------------------------------------------------------------------------
# 01: the counting bound explorer
# ---------------------------------------------------------------------------------------------

CUSTOM = "custom"
DTYPE_OPTIONS = [("custom ε", CUSTOM), ("float16", "float16"), ("bfloat16", "bfloat16"),
                 ("float32", "float32"), ("paper (fp16)", bounds.PAPER_DTYPE)]
NO_PRESET = "(none)"
DEFAULT_PRESET = "EleutherAI/pythia-160m"


def _set_exact(log_slider, value):
    """Set a log slider and remember the exact value.

    The browser snaps a value set from Python to the slider's step grid (10**(k*step)) and
    sends the snapped value back; :func:`_exact` then still returns the value we set (e.g.
    |V| = 50304, not 10**4.70 = 50119), until the user really moves the slider.
    """
    log_slider._accesslib_exact = float(value)
    log_slider.value = value


def _is_echo(log_slider, value):
    exact = getattr(log_slider, "_accesslib_exact", None)
    if exact is None or value <= 0 or exact <= 0:
        return False
    return abs(math.log(value, log_slider.base) - math.log(exact, log_slider.base)) <= log_slider.step / 2 + 1e-9


def _exact(log_slider):
    v = log_slider.value
    return log_slider._accesslib_exact if _is_echo(log_slider, v) else v


def _short(name):
    return name.split("/")[-1]


class BoundsApp(App):
    """Explore the counting bound N <= (1 + 2r/eps)^(d*m) and its threshold n* = C*m.

    Sliders: d, |V| (log), eps (log), r, m; dtype presets for eps (eps = r * unit roundoff,
    :func:`accesslib.theory.bounds.eps_for_dtype`); model presets from :mod:`accesslib.results.reference`
    (d, |V|, r = r_inf, eps = r * 2^-11 as in [A]). Panels: (a) log10 N, (b) log10 of the
    accessible-fraction bound against n with n* marked, (c) n* = C*m against m with the
    preset's published n50 points and the theory/experiment ratio.
    """

    def __init__(self, *, preset=DEFAULT_PRESET, m=1, canvas="auto"):
        super().__init__(canvas=canvas)
        self.models = {r["name"]: r for r in reference.models()}
        self.n50 = reference.n50_points()
        lay = W.Layout(width="460px")
        self.d = W.IntSlider(value=768, min=1, max=8192, step=1, description="d (model width)",
                             style=_DESC, layout=lay, continuous_update=True)
        self.vocab = W.FloatLogSlider(value=50304, base=10, min=math.log10(2), max=6, step=0.0001,
                                      description="|V| (vocabulary)", readout_format=",.0f",
                                      style=_DESC, layout=lay)
        self.m = W.IntSlider(value=m, min=0, max=64, step=1, description="m (prompt vectors)",
                             style=_DESC, layout=lay)
        self.r = W.FloatSlider(value=22.45, min=0, max=300, step=0.05, description="r (support radius)",
                               readout_format=".2f", style=_DESC, layout=lay)
        self.eps = W.FloatLogSlider(value=22.45 * 2.0**-11, base=10, min=-10, max=2, step=0.001,
                                    description="ε (precision)", readout_format=".3g",
                                    style=_DESC, layout=lay)
        self.dtype = W.ToggleButtons(options=DTYPE_OPTIONS, value=bounds.PAPER_DTYPE,
                                     description="ε from dtype", style={**_DESC, "button_width": "92px"})
        self.preset = W.Dropdown(options=[NO_PRESET] + list(self.models), value=NO_PRESET,
                                 description="model preset", style=_DESC, layout=W.Layout(width="460px"))
        self.controls.children = [
            W.HBox([self.preset]),
            self.dtype,
            W.HBox([W.VBox([self.d, self.vocab, self.m]), W.VBox([self.r, self.eps])]),
        ]
        _set_exact(self.vocab, 50304)
        _set_exact(self.eps, 22.45 * 2.0**-11)
        self._build_figure()
        self.d.observe(self.refresh, names="value")
        self.vocab.observe(self.refresh, names="value")
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
        gs = fig.add_gridspec(2, 2, height_ratios=[1, 3.4], hspace=0.55, wspace=0.28,
                              left=0.1, right=0.965, top=0.93, bottom=0.08)
        ax_a = fig.add_subplot(gs[0, :])
        ax_b = fig.add_subplot(gs[1, 0])
        ax_c = fig.add_subplot(gs[1, 1])
        p = self.params_unchecked()
        self._shown_preset = None
        self.art_a = plotting.plot_accessible_count(ax_a, 0.0)
        self.art_b = plotting.plot_fraction_bound(ax_b, 1, 768, 50304, 22.45 * 2.0**-11, 22.45)
        self.art_c = plotting.plot_threshold_vs_m(ax_c, 0.0, p["m"])

    def animated_artists(self):
        return [a for art in (self.art_a, self.art_b, self.art_c) for a in plotting.animated(art)]

    # -- parameters -------------------------------------------------------------------------
    def params_unchecked(self):
        return dict(d=int(self.d.value), vocab_size=int(round(_exact(self.vocab))),
                    eps=float(_exact(self.eps)), r=float(self.r.value), m=int(self.m.value))

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
        names = {"d": self.d, "vocab_size": self.vocab, "eps": self.eps, "r": self.r, "m": self.m,
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
                elif k in ("vocab_size", "eps"):
                    _set_exact(names[k], values[k])
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
                    _set_exact(self.eps, min(max(eps, 10.0**self.eps.min), 10.0**self.eps.max))
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
        if self.dtype.value != CUSTOM and _is_echo(self.eps, change["new"]):
            return   # the browser snapped our value to its step grid: not a user move
        # the user moved eps by hand: it no longer follows a dtype
        if self.dtype.value != CUSTOM:
            with self.hold():
                self.dtype.value = CUSTOM
        else:
            self.refresh()

    def _on_preset(self, change):
        self._apply_preset(change["new"])

    def _apply_preset(self, name):
        if name == NO_PRESET:
            self.refresh()
            return
        row = self.models[name]
        with self.hold():
            self.d.value = row["d"]
            _set_exact(self.vocab, row["vocab_size"])
            if row.get("r_inf"):
                self.r.value = row["r_inf"]
            self.dtype.value = bounds.PAPER_DTYPE
            self._sync_eps()

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
            f"C / a({ds}) = {q:.1f}×" for ds, a, q in ratios])
        ratio_html = "".join(f" &nbsp;·&nbsp; C / a({ds}) = <b>{q:.1f}×</b> (a = {a:g})"
                             for ds, a, q in ratios)
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
                    f"({self.dtype.value})" if self.dtype.value != CUSTOM else f"ε = {eps:.3g} (custom)")
        model = "no model preset" if row is None else f"preset {row['name']}"
        if row is not None and (row["d"] != d or row["vocab_size"] != V):
            model += " (d or |V| changed since)"
        if row is not None and not row.get("r_inf"):
            model += "; r_inf not published for this model, r kept"
        self.set_status(f"{model} · d = {d}, |V| = {V:,}, r = {r:g}, {eps_note}, m = {m} · "
                        f"1 + 2r/ε = {1 + 2 * r / eps:,.4g}")
        self.redraw()
