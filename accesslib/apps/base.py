"""ipywidgets apps, one per notebook figure (CONTRIBUTING.md, "Widgets and plots").

:class:`App` is the reusable base: a figure created once (ipympl canvas under
``%matplotlib widget``, a PNG image widget otherwise, so headless runs work), an error area
where a bad value shows a readable one-line message (never a traceback), and a status line.
Subclasses build controls, call :meth:`App.guard` around their update and repaint with
:meth:`App.redraw`.

Every app also has a one-row toolbar under its figure: a format (PNG, SVG, PDF) and "Save
figure", and "Download data" (a CSV of the numbers the figure shows, from the app's
:meth:`App.data_rows`). A click makes the file in the kernel and shows a link to it (a
``data:`` URL with a ``download`` name such as ``accesslib-nb03-predicted.png``): the browser
saves it when the link is clicked, with no server route and no script, so it works in Voila,
JupyterLab and a static HTML export alike.

:class:`BackgroundRun` is the one background-run helper (CONTRIBUTING.md, "Adding an app"):
anything that computes for more than a moment runs through it, from a Run button, with a Stop
button, a progress bar and a final status; an App that has one (``self.runner``) answers
:meth:`App.stop`, :meth:`App.wait`, :attr:`App.is_running` and :attr:`App.stop_requested`.
"""
from __future__ import annotations

import base64
import contextlib
import csv
import html
import io
import json
import math
import threading
import time

import ipywidgets as W
import matplotlib
import numpy as np
from matplotlib.figure import Figure

from accesslib._checks import check_choice
from accesslib.plots.style import UI_COLORS

#: figure formats offered by the toolbar: extension -> MIME type
FIGURE_FORMATS = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}
#: a data: link larger than this is refused (browsers cap data URLs; 16 MB is far above any app's)
MAX_DOWNLOAD_BYTES = 16 * 1024 * 1024


def error_message(exc: BaseException) -> str:
    """The one line an app shows for an exception (never a traceback): a ValueError's message
    as it is (the checks' "<name> must be <allowed>; got <value>"), anything else named."""
    if isinstance(exc, ValueError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {exc}"


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


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return "" if math.isnan(v) else repr(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return json.dumps(np.asarray(v).tolist() if isinstance(v, np.ndarray) else list(v))
    return v


def rows_to_csv(rows) -> str:
    """CSV text of a list of dicts: the header is every key in order of first appearance; numbers
    keep full precision (``repr``), nan and None are empty cells, lists are JSON."""
    rows = list(rows)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in columns])
    return buf.getvalue()


def download_link(name: str, data: bytes, mime: str) -> str:
    """HTML of a link that saves ``data`` as the file ``name`` when clicked (a ``data:`` URL)."""
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise ValueError(f"{name} is {len(data) / 2**20:.0f} MB, too large for a download link "
                         f"(at most {MAX_DOWNLOAD_BYTES // 2**20} MB): save it from Python instead")
    size = f"{len(data) / 1024:.0f} kB" if len(data) >= 1024 else f"{len(data)} bytes"
    href = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return (f'<a download="{html.escape(name)}" href="{href}" title="save {html.escape(name)}" '
            f'style="color:{UI_COLORS["link"]};text-decoration:underline">⬇ {html.escape(name)}</a> '
            f'<span style="color:{UI_COLORS["muted"]};font-size:90%">({size}, made {time.strftime("%H:%M:%S")}: '
            f'click to save)</span>')


class App:
    """Base for every accesslib app: figure, error area, status line, guarded updates, and the
    toolbar that saves the figure and downloads its data.

    Subclasses fill ``self.controls`` (a widget), implement :meth:`update` and :meth:`data_rows`
    (the numbers the figure shows) and set :attr:`export_name`; the page layout is
    ``self.widget`` (controls, readout, error area, figure, toolbar, status), displayable
    directly.
    """

    figsize = (9.6, 7.0)
    #: names the downloaded files: ``accesslib-<export_name>.png`` / ``.csv``
    export_name = "figure"
    _exporting = False   # True while figure_bytes draws (see _on_draw)

    def __init__(self, *, canvas="auto"):
        self.error = W.HTML(layout=W.Layout(display="none", margin="4px 0"))
        self.error.add_class("accesslib-error")
        self.status = W.HTML(layout=W.Layout(margin="2px 0"))
        self.status.add_class("accesslib-status")
        self.readout = W.HTML()
        self.readout.add_class("accesslib-readout")
        self.fig, self.view, self.canvas_mode = make_figure(self.figsize, canvas)
        # redraw's own reference: an app may use the name ``view`` for its data (ModelGeometryApp)
        self._image = self.view if self.canvas_mode == "image" else None
        self.last_error = None
        self._errors_shown = 0   # counts show_error calls (see guard)
        self._hold = 0
        self._bg = None          # cached background for blitting (see redraw)
        self._bg_key = None
        self.fig.canvas.mpl_connect("draw_event", self._on_draw)
        self._exporting = False
        self.controls = W.VBox()
        self.toolbar = self._make_toolbar()
        parts = [self.controls, self.readout, self.error]
        if self.view is not None:
            parts.append(self.view)
        parts += [self.toolbar, self.status]
        self.widget = W.VBox(parts, layout=W.Layout(width="100%"))

    # -- save the figure, download its data -------------------------------------------------
    def _make_toolbar(self):
        small = dict(height="28px", margin="0 6px 0 0")
        self.figure_format = W.Dropdown(options=[(k.upper(), k) for k in FIGURE_FORMATS], value="png",
                                        layout=W.Layout(width="72px", **small),
                                        tooltip="format of the saved figure")
        self.save_button = W.Button(description="Save figure", icon="image", layout=W.Layout(width="auto", **small),
                                    tooltip="make the figure file; then click its link to save it")
        self.data_button = W.Button(description="Download data", icon="table", layout=W.Layout(width="auto", **small),
                                    tooltip="the numbers the figure shows, as CSV; then click its link")
        self.download = W.HTML(layout=W.Layout(margin="0 0 0 4px"))
        self.download.add_class("accesslib-download")
        self.save_button.on_click(lambda _: self._offer(self.offer_figure))
        self.data_button.on_click(lambda _: self._offer(self.offer_data))
        bar = W.HBox([self.figure_format, self.save_button, self.data_button, self.download],
                     layout=W.Layout(align_items="center", flex_flow="row wrap", margin="2px 0"))
        bar.add_class("accesslib-toolbar")
        return bar

    def file_name(self, ext: str) -> str:
        """``accesslib-<export_name>.<ext>``, the name a download is saved under."""
        return f"accesslib-{self.export_name}.{ext}"

    def data_rows(self) -> list[dict]:
        """The numbers the figure shows, one dict per row (the same keys in related rows; a
        ``panel`` or ``kind`` key tells the parts of a figure apart). Every app implements it."""
        raise NotImplementedError(f"{type(self).__name__} has no data to download")

    def data_csv(self) -> str:
        """:meth:`data_rows` as CSV text (header = every key; full precision)."""
        rows = self.data_rows()
        if not rows:
            raise ValueError("the figure shows no data yet (press Run first)")
        return rows_to_csv(rows)

    def figure_bytes(self, fmt: str = "png", *, dpi: int = 150) -> bytes:
        """The figure as it is now, as a PNG, SVG or PDF file's bytes.

        The moving artists (drawn by blitting, so ``animated``) are drawn as ordinary ones for
        the file; the page's view is untouched."""
        check_choice("figure format", fmt, tuple(FIGURE_FORMATS))
        moving = self.fig.findobj(lambda a: a.get_animated())
        buf = io.BytesIO()
        self._exporting = True
        try:
            for a in moving:
                a.set_animated(False)
            self.fig.savefig(buf, format=fmt, dpi=dpi, facecolor="white")
        finally:
            for a in moving:
                a.set_animated(True)
            self._exporting = False
            self._bg = None   # the canvas was redrawn at another size: no stale background
        return buf.getvalue()

    def offer_figure(self, fmt: str | None = None) -> str:
        """Make the figure file (the toolbar's format unless ``fmt``) and show its link; returns
        the file name."""
        fmt = fmt or self.figure_format.value
        name = self.file_name(fmt)
        self.download.value = download_link(name, self.figure_bytes(fmt), FIGURE_FORMATS[fmt])
        return name

    def offer_data(self) -> str:
        """Make the CSV of :meth:`data_rows` and show its link; returns the file name."""
        name = self.file_name("csv")
        self.download.value = download_link(name, self.data_csv().encode("utf-8"), "text/csv")
        return name

    def _offer(self, fn):
        # the message goes next to the buttons, not into the error area: a download neither
        # shows nor clears a message about the controls
        try:
            fn()
        except Exception as e:
            self.download.value = (f'<span style="color:{UI_COLORS["warning"]};font-size:90%">'
                                   f"No file: {html.escape(error_message(e))}</span>")

    # -- display ----------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # -- messages ---------------------------------------------------------------------------
    def show_error(self, message):
        """Show ``message`` (plain text, escaped) in the error area; keep the last good figure."""
        self._errors_shown += 1
        self.last_error = str(message)
        c = UI_COLORS
        self.error.value = (
            f'<div style="color:{c["error_text"]};background:{c["error_background"]};'
            f'border:1px solid {c["error_border"]};border-radius:4px;padding:6px 10px">'
            f"<b>Cannot update:</b> {html.escape(self.last_error)}</div>")
        self.error.layout.display = None

    def clear_error(self):
        self.last_error = None
        self.error.value = ""
        self.error.layout.display = "none"

    def set_status(self, text):
        self.status.value = f'<span style="color:{UI_COLORS["muted"]};font-size:90%">{html.escape(text)}</span>'

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
        """Run :meth:`update` unless held; errors become a message, never a traceback. A
        download link made before is taken away (it holds the figure as it was)."""
        if self._hold:
            return False
        if self.download.value:
            self.download.value = ""
        return self.guard(self.update)

    def guard(self, fn, *args, **kwargs):
        """Call ``fn``; a ValueError shows its message, anything else a short one-liner
        (:func:`error_message`). True when ``fn`` returned normally; then an earlier message is
        cleared, but not one shown meanwhile (a background run that ``fn`` started and that
        failed at once)."""
        shown = self._errors_shown
        try:
            fn(*args, **kwargs)
        except Exception as e:  # never let a traceback reach the page
            self.show_error(error_message(e))
            return False
        if self._errors_shown == shown:
            self.clear_error()
        return True

    def update(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- background runs (see BackgroundRun) --------------------------------------------------
    runner = None   # the app's BackgroundRun, if it computes in the background

    @property
    def is_running(self) -> bool:
        """True while the app's background run has not ended."""
        return self.runner is not None and self.runner.running

    @property
    def stop_requested(self) -> bool:
        """True when Stop was pressed during the current (or last) run."""
        return self.runner is not None and self.runner.stop_requested

    def stop(self) -> bool:
        """Press Stop: ask the run to end after its current step (False if none is going)."""
        return self.runner is not None and self.runner.stop()

    def wait(self, timeout=None) -> bool:
        """Block until the background run has ended (scripts and tests); True when it has."""
        return self.runner is None or self.runner.wait(timeout)

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
        # without the moving artists, then paint them on top. Not while saving a file: that
        # draw is at another size, maybe on another canvas (SVG, PDF).
        if self._exporting:
            return
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
        if self._image is not None:
            from PIL import Image

            buf = io.BytesIO()
            Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", compress_level=1)
            self._image.value = buf.getvalue()


class BackgroundRun:
    """The one background-run helper of the apps: worker thread, stop flag, Run/Stop buttons,
    progress bar, final status, and :meth:`wait` for scripts and tests.

    An app makes one in its constructor, ``self.runner = BackgroundRun(self, run_buttons=[...],
    progress=...)``, puts ``self.runner.stop_button`` on the page, and starts a run from its Run
    button with ``self.runner.start(work, on_done=...)`` (through :meth:`App.guard`: a refusal is a
    message). Then, in a daemon thread:

    1. ``work(run)`` computes. It checks :attr:`stop_requested` between steps (or passes
       :attr:`stop_event` to an engine loop that takes a stop Event), reports with
       :meth:`set_progress`, may set intermediate statuses, and may return a one-line summary.
       An exception ends it; its message goes to the app's error area (:func:`error_message`:
       one line, never a traceback).
    2. The run ends: outcome "failed" (an exception), "stopped" (Stop was pressed before the
       end) or "finished". From here on Stop changes nothing.
    3. ``on_done(outcome)`` (optional) redraws and may return the summary (else ``work``'s).
    4. The error, if any, is shown; the status becomes ``"<outcome>: <summary>"`` (without a
       summary: "finished in 2.5 s", "stopped after 1.0 s"); the Run buttons get back their
       state from before the run (the Stop button was disabled at the end).

    Stop sets the flag and the status "stopping ..." only while the run has not ended: a click
    that reaches the kernel after the end (the button's disabled state arrives late) neither
    hides the final summary nor leaves the flag set for the next run. A run that wraps another
    background job with its own stop (a Dask sweep) forwards Stop with :meth:`on_stop`.
    """

    def __init__(self, app, *, run_buttons=(), stop_button=None, progress=None, name="accesslib-run",
                 stop_message="stopping after the current step ..."):
        self.app = app
        self.run_buttons = list(run_buttons)
        if stop_button is None:
            stop_button = W.Button(description="Stop", button_style="danger", icon="stop")
        self.stop_button = stop_button
        self.stop_button.disabled = True
        self.stop_button.on_click(lambda _: self.stop())
        self.progress = progress
        self.name = name
        self.stop_message = stop_message
        self.stop_event = threading.Event()
        self.thread = None
        self.outcome = None      # "finished" | "stopped" | "failed" once a run has ended
        self.result = None       # what work returned
        self.error = None        # the message of the exception that ended the run
        self.elapsed = 0.0       # seconds from start to end
        self._lock = threading.Lock()
        self._ended = True
        self._on_stop = []
        self._t0 = 0.0
        self._was_disabled = []

    # -- state ------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True from :meth:`start` until the worker thread has finished (final status set)."""
        return not self._ended or (self.thread is not None and self.thread.is_alive())

    @property
    def stop_requested(self) -> bool:
        return self.stop_event.is_set()

    # -- control ----------------------------------------------------------------------------
    def start(self, work, *, on_done=None):
        """Run ``work(self)`` in a daemon thread (see the class docstring); ValueError when a run
        is already going."""
        with self._lock:
            if self.running:
                raise ValueError("a run is already going: press Stop first")
            self._ended = False
        self.stop_event.clear()
        self._on_stop = []
        self.outcome = self.result = self.error = None
        self.elapsed = 0.0
        self._t0 = time.perf_counter()
        self._was_disabled = [b.disabled for b in self.run_buttons]
        for b in self.run_buttons:
            b.disabled = True
        self.stop_button.disabled = False
        if self.progress is not None:
            self.progress.value = 0
        self.app.clear_error()
        self.thread = threading.Thread(target=self._main, args=(work, on_done), daemon=True, name=self.name)
        try:
            self.thread.start()
        except RuntimeError as e:   # no thread to be had: nothing runs, the buttons come back
            with self._lock:
                self._ended = True
            self._give_buttons_back()
            raise ValueError(f"cannot start a background run: {e}") from None
        return self

    def stop(self) -> bool:
        """Ask the run to end after its current step; False (and nothing changed) when no run is
        going, including a Stop that arrives after the run ended."""
        with self._lock:
            if self._ended:
                return False
            self.stop_event.set()
            hooks = list(self._on_stop)
            self.app.set_status(self.stop_message)
        for fn in hooks:
            self._call(fn)
        return True

    def on_stop(self, fn):
        """Call ``fn()`` when Stop is pressed during this run (at once if it already was)."""
        with self._lock:
            self._on_stop.append(fn)
            now = self.stop_event.is_set()
        if now:
            self._call(fn)

    def wait(self, timeout=None) -> bool:
        """Block until the run has ended (final status set); True when it has."""
        if self.thread is not None:
            self.thread.join(timeout)
        return not self.running

    def set_progress(self, value, total=None):
        """Move the progress bar to ``value`` (of ``total`` when given; the bar grows if needed)."""
        bar = self.progress
        if bar is None:
            return
        value = int(value)
        if total is not None:
            bar.max = max(1, int(total), value)
        elif value > bar.max:
            bar.max = value
        bar.value = value

    # -- the worker thread -------------------------------------------------------------------
    def _call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # a failing hook is a message, never a traceback
            self.error = self.error or error_message(e)
            return None

    def _main(self, work, on_done):
        try:
            self.result = work(self)
        except Exception as e:  # shown in the page, never a traceback
            self.error = error_message(e)
        finally:
            self._finish(on_done)

    def _finish(self, on_done):
        with self._lock:   # from here on a Stop is too late (see stop)
            self._ended = True
            self.outcome = "failed" if self.error else ("stopped" if self.stop_event.is_set() else "finished")
        self.elapsed = time.perf_counter() - self._t0
        self.stop_button.disabled = True
        summary = self._call(on_done, self.outcome) if on_done is not None else None
        if summary is None and isinstance(self.result, str):
            summary = self.result
        if self.error:
            self.app.show_error(self.error)
        if summary:
            self.app.set_status(f"{self.outcome}: {summary}")
        else:
            since = "in" if self.outcome == "finished" else "after"
            self.app.set_status(f"{self.outcome} {since} {self.elapsed:.1f} s")
        self._give_buttons_back()

    def _give_buttons_back(self):
        self.stop_button.disabled = True
        for b, was in zip(self.run_buttons, self._was_disabled):
            b.disabled = was
