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

On a public server (:mod:`accesslib.apps.policy`) every update and every background run
passes through :meth:`App.check_inputs` first: each input listed for the app in
``PUBLIC_CAPS`` is read from its widget as it is (whatever a browser sent) and one outside its
cap is a message, with nothing computed. Messages speak the reader's language
(:func:`error_message`), dates too (:func:`human_date`), and :data:`PAGE_CSS` keeps labels
and buttons whole at laptop width. A value set from Python goes through :func:`set_exact`,
and is read back with :func:`exact_value`: the browser snaps it to the slider's steps and
sends that back, which is not a move.
"""
from __future__ import annotations

import base64
import contextlib
import csv
import html
import io
import json
import math
import re
import threading
import time

import ipywidgets as W
import matplotlib
import numpy as np
from matplotlib.figure import Figure

from accesslib._checks import check_choice
from accesslib.apps.policy import Cap, Policy, app_policy, caps_for, check_app_inputs
from accesslib.plots.style import UI_COLORS

#: figure formats offered by the toolbar: extension -> MIME type
FIGURE_FORMATS = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}
#: a data: link larger than this is refused (browsers cap data URLs; 16 MB is far above any app's)
MAX_DOWNLOAD_BYTES = 16 * 1024 * 1024


#: The apps' page style, one rule per problem seen at laptop width (1280x800): a widget's label,
#: a slider's readout, a toggle or plain button never cuts its text ("paper (fp...", "write
#: each token k..."): each is at least as wide as its text (its set width stays the minimum,
#: so columns of labels stay aligned); rows of controls wrap instead of running off the window;
#: a figure never overflows the page's width. Scoped to ``.accesslib-app`` (every App's box).
PAGE_CSS = """
.accesslib-app .widget-inline-hbox > .widget-label,
.accesslib-app .widget-readout,
.accesslib-app .widget-toggle-button,
.accesslib-app .jupyter-button { min-width: fit-content !important; flex-shrink: 0; }
.accesslib-app .widget-toggle-button, .accesslib-app .jupyter-button { padding-left: 6px; padding-right: 6px; }
.accesslib-app .accesslib-controls .widget-hbox { flex-wrap: wrap; }
.accesslib-app .accesslib-figure { max-width: 100%; }
"""

#: exception classes named inside a message ("OSError: ..."): the reader needs what follows
_EXC_NAME = re.compile(r"\b(?:[A-Z][A-Za-z]*(?:Error|Exception|Warning)|[a-z_]+\.[A-Za-z_.]*Error):\s*")
#: a parenthesis that shows code: a call ``name()`` / ``pkg.mod.fn`` (the reader cannot act on it)
_CODE_PAREN = re.compile(r"\s*\((?=[^()]*(?:\b[A-Za-z_][\w.]*\(\)|\baccesslib\.[\w.]+))(?:[^()]|\(\))*\)")
#: a snake_case parameter name at the start of "<name> must be ..." / "<name> = ..."
_LEAD_NAME = re.compile(r"^([a-z]+(?:_[a-z0-9]+)+)(?= must | = | is )")
#: text about code (a call, a traceback): not shown to the reader
_CODE = re.compile(r"\b[A-Za-z_][\w.]*\(|Traceback|\bline \d+")
#: the longest message an app shows (the rest of a long library message is cut at a word)
MAX_MESSAGE = 300


def _plain(text: str) -> str:
    """A library message in the reader's words: the first line, without exception class names
    or code in parentheses, a leading snake_case name with spaces ("max_steps" -> "max steps"),
    at most :data:`MAX_MESSAGE` characters."""
    text = str(text).strip().splitlines()[0] if str(text).strip() else ""
    text = _EXC_NAME.sub("", text)
    text = _CODE_PAREN.sub("", text)
    text = _LEAD_NAME.sub(lambda m: m.group(1).replace("_", " "), text)
    text = re.sub(r"\s{2,}", " ", text).strip()
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE].rsplit(" ", 1)[0] + " ..."
    return text


def error_message(exc: BaseException) -> str:
    """The one line an app shows for an exception (never a traceback), in the reader's words:
    what went wrong and what to change, not which Python function raised it.

    A ValueError is a refused input: its message as the checks wrote it ("<name> must be
    <allowed>; got <value>", the caps' "... is over this server's cap of ...: set it to ...
    or less"), cleaned of exception class names and code (:func:`_plain`). Anything else is
    told by kind: not enough memory (choose smaller values), a number out of range (change a
    setting), a missing package (what to install), a file that cannot be read, a control
    that refused a value; any other failure is an internal error that names its exception
    class (for a bug report) and says that the last good result stays."""
    name = type(exc).__name__
    detail = _plain(exc)
    if isinstance(exc, ValueError):
        return detail or "this value cannot be used: change it and try again"
    if isinstance(exc, MemoryError) or name == "OutOfMemoryError":
        return "not enough memory for these settings: choose smaller values (fewer samples, shorter lengths) " \
               "and run again"
    if isinstance(exc, ArithmeticError):
        return (f"these settings cannot be computed ({detail or 'a number out of range'}; {name}): "
                "change one of them and try again")
    if isinstance(exc, ImportError):
        missing = getattr(exc, "name", None) or detail
        return (f"a package this page needs is not installed ({missing}): install the apps with "
                '`pip install "accesslib[apps]"` and reload the page')
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        return f"a file could not be used{where}: {_plain(exc.strerror or detail) or name}"
    if name == "TraitError":
        return f"this control cannot take that value: {detail}"
    if isinstance(exc, NotImplementedError):
        return f"not available here: {detail}" if detail else "not available here"
    # a bug: its class for the report; its text only when it is not about code
    said = "" if not detail or _CODE.search(detail) else f": {detail}"
    return (f"something went wrong inside the app ({name}{said}); "
            "the last good result stays on the page: change a setting or reload the page")


#: month names for :func:`human_date` (English, whatever the server's locale)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")


def human_date(value, *, time: bool = False) -> str:
    """A date as a reader writes it, for the lines that describe a shipped bundle or run:
    '2026-12-02T14:55:28+00:00' -> '2 December 2026'; with ``time=True``
    '2 December 2026, 14:55 UTC' (a time with a zone is told in UTC). Takes ISO 8601 text (a
    bundle's "created" or "date"), a datetime or a date, or seconds since 1970 (UTC); returns
    text that is no date as it is, and "unknown date" for None or ""."""
    import datetime as dt

    if value is None or (isinstance(value, str) and not value.strip()):
        return "unknown date"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = dt.datetime.fromtimestamp(value, tz=dt.timezone.utc)
    elif isinstance(value, str):
        text = value.strip()
        try:
            value = (dt.date.fromisoformat(text) if len(text) <= 10 else
                     dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            return text
    if not isinstance(value, dt.date):
        return str(value)
    if time and isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)   # one zone for every bundle line
    day = f"{value.day} {_MONTHS[value.month - 1]} {value.year}"
    if not time or not isinstance(value, dt.datetime):
        return day
    return f"{day}, {value:%H:%M}" + (" UTC" if value.tzinfo is not None else "")


def set_exact(slider, value):
    """Set a slider and remember the exact value.

    The browser snaps a value set from Python to the slider's step grid (``min + k*step``, or
    ``base**(min + k*step)`` on a log slider) and sends the snapped value back; :func:`exact_value`
    then still returns the value we set (e.g. |V| = 50304, not 10**4.70 = 50119; a row's norm
    0.9055, not 0.91), until the user really moves the slider.
    """
    slider._accesslib_exact = float(value)
    slider.value = value


def is_echo(slider, value):
    """True when ``value`` is within half a step of the value :func:`set_exact` set (in log units
    on a log slider): the browser's snapped echo, not a move."""
    exact = getattr(slider, "_accesslib_exact", None)
    if exact is None:
        return False
    if isinstance(slider, W.FloatLogSlider):
        if value <= 0 or exact <= 0:
            return False
        return abs(math.log(value, slider.base) - math.log(exact, slider.base)) <= slider.step / 2 + 1e-9
    return abs(float(value) - exact) <= slider.step / 2 + 1e-9


def exact_value(slider):
    """The slider's value, or the exact value set by :func:`set_exact` when it is only its echo."""
    v = slider.value
    return slider._accesslib_exact if is_echo(slider, v) else v


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


def _narrow(widget, low, high) -> None:
    """Narrow a numeric widget to [low, high]: a slider's or bounded field's min and max (a
    log slider's are exponents), a dropdown's options, a plain field's value."""
    if hasattr(widget, "options") and not isinstance(widget, W.Combobox):
        opts = list(widget.options)
        value = widget.value

        def ok(o):
            v = o[1] if isinstance(o, tuple) else o
            return isinstance(v, (int, float)) and (low is None or v >= low) and (high is None or v <= high)
        keep = [o for o in opts if ok(o)]
        if keep and len(keep) < len(opts):
            widget.options = keep
            kept = [o[1] if isinstance(o, tuple) else o for o in keep]
            widget.value = value if value in kept else kept[-1]
        return
    log = isinstance(widget, W.FloatLogSlider)

    def to_widget(x):
        return math.log(x, widget.base) if log else (int(x) if isinstance(widget.max, int) else x)
    def tighter(a, b):   # a is a tighter limit than b, beyond rounding (10**x is not exact)
        return abs(a - b) > 1e-9 * max(1.0, abs(a), abs(b))
    if hasattr(widget, "max") and hasattr(widget, "min"):
        if high is not None and (not log or high > 0) and to_widget(high) < widget.max \
                and tighter(to_widget(high), widget.max):
            widget.max = to_widget(high)
        if low is not None and (not log or low > 0) and to_widget(low) > widget.min \
                and tighter(to_widget(low), widget.min):
            widget.min = to_widget(low)
    elif isinstance(getattr(widget, "value", None), (int, float)) and not isinstance(widget.value, bool):
        if high is not None and widget.value > high:
            widget.value = type(widget.value)(high)
        if low is not None and widget.value < low:
            widget.value = type(widget.value)(low)


def _cap_text(cap: Cap, policy: Policy) -> str:
    """A cap a widget's range cannot show, in words: "eval lengths up to 300 (12 values)"."""
    low, high = cap.bounds(policy)
    if cap.kind == "list" and high is not None:
        return f"{cap.label} up to {high:,}" + (f" ({cap.max_items} values)" if cap.max_items else "")
    if cap.kind == "model" and policy.allowed_models:
        return f"{cap.label}: {', '.join(policy.allowed_models + cap.extra)}"
    return ""


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
        self.caps_note = W.HTML(layout=W.Layout(display="none", margin="2px 0"))
        self.caps_note.add_class("accesslib-caps")
        # a <style> applies from a hidden widget too: no space taken
        self.page_style = W.HTML(f"<style>{PAGE_CSS}</style>", layout=W.Layout(display="none"))
        self._policy = None      # see current_policy
        self._fitted = False     # see fit_to_caps
        self.toolbar = self._make_toolbar()
        self.controls.add_class("accesslib-controls")
        parts = [self.controls, self.caps_note, self.readout, self.error]
        if self.view is not None:
            self.view.add_class("accesslib-figure")
            parts.append(self.view)
        parts += [self.toolbar, self.status, self.page_style]
        self.widget = W.VBox(parts, layout=W.Layout(width="100%"))
        self.widget.add_class("accesslib-app")

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
        raise NotImplementedError("this page has no data to download")

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
        self.fit_to_caps()   # before the browser can send anything
        return self.widget._repr_mimebundle_(**kwargs)

    # -- public-mode caps -------------------------------------------------------------------
    def current_policy(self) -> Policy:
        """The app's policy: its own ``policy`` attribute when it has one (02, 03's sweep),
        else this process's (:func:`accesslib.apps.policy.app_policy`, read once)."""
        own = getattr(self, "policy", None)
        if isinstance(own, Policy):
            return own
        if self._policy is None:
            self._policy = app_policy()
        return self._policy

    def check_inputs(self, *, run: bool = False) -> None:
        """On a public server, every input of this app within its cap
        (:data:`accesslib.apps.policy.PUBLIC_CAPS`), read from the widgets as they are now,
        whatever a browser sent through the widget protocol (a slider's min and max travel
        with its value): ValueError naming the first input over its cap and what to set it to.
        ``run``: a computation is about to start (then a model outside the allow-list and a
        policy that could not be read are refused too). Every update (:meth:`refresh`) and
        every background run (:meth:`BackgroundRun.start`) passes through here."""
        check_app_inputs(self, self.current_policy(), run=run)

    def fit_to_caps(self) -> None:
        """On a public server, once, when the page is shown (before a browser can send anything):
        narrow each capped slider's or field's range (and a numeric dropdown's options) to its
        cap, so that the page opens within the caps and shows them, and say the caps a range
        cannot show (typed lists, models) in a note under the controls. Nothing on an open
        server. Code that builds an app without showing it keeps the ranges as built; the
        caps are checked all the same (:meth:`check_inputs`)."""
        if self._fitted:
            return
        self._fitted = True
        pol = self.current_policy()
        if not (pol.public or pol.error is not None):
            return
        caps = caps_for(self)
        before = {a: getattr(getattr(self, a, None), "value", None) for a in caps}
        self._hold += 1   # no update per narrowed widget: one at the end
        try:
            for attr, cap in caps.items():
                widget = getattr(self, attr, None)
                if isinstance(widget, W.Widget) and cap.kind == "number":
                    _narrow(widget, *cap.bounds(pol))
        finally:
            self._hold -= 1
        moved = any(getattr(getattr(self, a, None), "value", None) != v for a, v in before.items())
        if moved and type(self).update is not App.update:
            self.refresh()   # a value came down to its cap: the page shows what it will run
        if isinstance(getattr(self, "policy", None), Policy):
            return   # an app that holds its own policy prints it (02, 03's sweep)
        said = [_cap_text(c, pol) for c in caps.values() if c.kind != "number"]
        if any(said):
            self.caps_note.value = (f'<span style="color:{UI_COLORS["muted"]};font-size:90%">This public server '
                                    f'runs at most: {html.escape("; ".join(t for t in said if t))}.</span>')
            self.caps_note.layout.display = None

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
        """Run :meth:`update` unless held; errors become a message, never a traceback. On a
        public server the inputs are checked first (:meth:`check_inputs`): one over its cap is
        a message, and nothing is computed. A download link made before is taken away (it
        holds the figure as it was)."""
        if self._hold:
            return False
        if self.download.value:
            self.download.value = ""
        return self.guard(self._checked_update)

    def _checked_update(self):
        self.check_inputs()
        self.update()

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
        is already going, or on a public server when an input of the app is over its cap
        (:meth:`App.check_inputs`: nothing starts, the message says which and what to set)."""
        with self._lock:
            if self.running:
                raise ValueError("a run is already going: press Stop first")
        self.app.check_inputs(run=True)
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
