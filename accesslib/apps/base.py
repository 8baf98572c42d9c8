"""ipywidgets apps, one per notebook figure (CONTRIBUTING.md, "Widgets and plots").

:class:`App` is the reusable base: a figure created once (ipympl canvas under
``%matplotlib widget``, a PNG image widget otherwise, so headless runs work), an error area
where a bad value shows a readable one-line message (never a traceback), and a status line.
Subclasses build controls, call :meth:`App.guard` around their update and repaint with
:meth:`App.redraw`.
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
