"""The apps' one background-run helper (accesslib.apps.base.BackgroundRun), the plots' shared
helpers, and the one place for colours. Headless, no torch."""
import re
import threading
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import ipywidgets as W  # noqa: E402

from accesslib.apps.base import App, BackgroundRun  # noqa: E402

PKG = Path(__file__).resolve().parents[2] / "accesslib"


class Toy(App):
    """An app with two run buttons (the second disabled before any run), a progress bar and a
    runner; ``go(work)`` starts ``work`` the way the real apps do."""

    figsize = (2, 2)

    def __init__(self):
        super().__init__(canvas="agg")
        self.run_btn = W.Button(description="Run")
        self.other_btn = W.Button(description="Other", disabled=True)
        self.progress = W.IntProgress(value=0, min=0, max=1)
        self.runner = BackgroundRun(self, run_buttons=[self.run_btn, self.other_btn], progress=self.progress)
        self.stop_btn = self.runner.stop_button
        self.done_calls = []

    def update(self):
        pass

    def go(self, work, on_done=None):
        return self.guard(self.runner.start, work, on_done=on_done)


def _blocking_work(started, release=None):
    """Work that signals it started, then steps until Stop (or ``release``)."""
    def work(run):
        started.set()
        steps = 0
        while not run.stop_requested and not (release is not None and release.is_set()):
            steps += 1
            run.set_progress(min(steps, 5), 5)
            run.stop_event.wait(0.01)
        return f"{steps} steps"
    return work


def test_finished_run_sets_progress_status_and_gives_buttons_back():
    app = Toy()
    assert app.stop_btn.disabled and not app.is_running and app.runner.thread is None

    def work(run):
        assert app.run_btn.disabled and app.other_btn.disabled and not app.stop_btn.disabled
        run.set_progress(2, 3)
        run.set_progress(3)
        return "3 of 3 things"

    assert app.go(work)
    assert app.wait(10) and not app.is_running
    assert app.runner.outcome == "finished" and app.last_error is None
    assert "finished: 3 of 3 things" in app.status.value
    assert (app.progress.value, app.progress.max) == (3, 3)
    # the run buttons get back the state they had: the second one was disabled before the run
    assert not app.run_btn.disabled and app.other_btn.disabled and app.stop_btn.disabled


def test_progress_bar_grows_when_the_total_was_an_estimate():
    app = Toy()

    def work(run):
        run.set_progress(0, 2)
        run.set_progress(4)

    app.go(work)
    app.wait(10)
    assert (app.progress.value, app.progress.max) == (4, 4)


def test_without_a_summary_the_status_gives_the_time():
    app = Toy()
    app.go(lambda run: None)
    app.wait(10)
    assert re.search(r"finished in \d+\.\d s", app.status.value)


def test_stop_button_ends_the_run_and_says_stopped():
    app = Toy()
    started = threading.Event()
    app.go(_blocking_work(started))
    assert started.wait(10) and app.is_running
    app.stop_btn.click()
    assert app.stop_requested
    assert app.wait(10)
    assert app.runner.outcome == "stopped" and app.status.value.count("stopped: ") == 1
    assert "steps" in app.status.value and "stopping" not in app.status.value
    assert not app.run_btn.disabled and app.stop_btn.disabled


def test_a_stop_after_the_end_changes_nothing():
    """A Stop that reaches the kernel after the run ended (the button's disabled state arrives
    late in the browser) neither hides the summary nor leaves the flag set for the next run."""
    app = Toy()
    app.go(lambda run: "all done")
    app.wait(10)
    summary = app.status.value
    assert app.stop() is False
    assert app.runner.stop() is False
    assert app.status.value == summary and "finished: all done" in summary
    assert not app.stop_requested
    # the next run starts with the flag clear and ends "finished"
    app.go(lambda run: "again" if not run.stop_requested else "told to stop")
    app.wait(10)
    assert "finished: again" in app.status.value


def test_a_second_start_is_refused_with_a_message():
    app = Toy()
    started, release = threading.Event(), threading.Event()
    app.go(_blocking_work(started, release))
    assert started.wait(10)
    assert app.go(lambda run: "never") is False
    assert app.last_error == "a run is already going: press Stop first"
    with pytest.raises(ValueError, match=r"^a run is already going: press Stop first$"):
        app.runner.start(lambda run: "never")
    release.set()
    assert app.wait(10) and app.runner.outcome == "finished"


@pytest.mark.parametrize("exc, message", [
    (ValueError("n must be a whole number in 1..32; got 40"), "n must be a whole number in 1..32; got 40"),
    (RuntimeError("boom"), "something went wrong inside the app (RuntimeError: boom); the last good result "
                           "stays on the page: change a setting or reload the page"),
])
def test_a_failure_is_one_line_in_the_error_area(exc, message):
    app = Toy()

    def work(run):
        raise exc

    app.go(work, on_done=lambda outcome: app.done_calls.append(outcome))
    assert app.wait(10)
    assert app.last_error == message and "Traceback" not in app.error.value
    assert app.runner.outcome == "failed" and app.done_calls == ["failed"]
    assert "failed after" in app.status.value
    assert not app.run_btn.disabled and app.stop_btn.disabled


def test_on_done_runs_after_the_end_and_its_summary_wins():
    app = Toy()
    seen = {}

    def on_done(outcome):
        seen.update(outcome=outcome, running=app.is_running, stop_disabled=app.stop_btn.disabled)
        assert app.stop() is False          # too late: the run has ended
        return "from on_done"

    app.go(lambda run: "from work", on_done=on_done)
    app.wait(10)
    # still "running" (the thread is finishing), Stop already off
    assert seen == dict(outcome="finished", running=True, stop_disabled=True)
    assert "finished: from on_done" in app.status.value


def test_on_stop_forwards_stop_to_a_wrapped_run():
    """A run that watches another background job (the Dask sweep) forwards Stop to it, whether
    Stop comes after or before the job was registered."""
    app = Toy()
    inner = threading.Event()
    registered = threading.Event()

    def work(run):
        run.on_stop(inner.set)
        registered.set()
        assert inner.wait(10)       # the wrapped job ends when told to stop
        return "inner stopped"

    app.go(work)
    assert registered.wait(10) and not inner.is_set()
    app.stop()
    assert app.wait(10) and "stopped: inner stopped" in app.status.value
    # registered after Stop: called at once
    calls = []
    started = threading.Event()

    def late(run):
        started.set()
        run.stop_event.wait(10)
        run.on_stop(lambda: calls.append(1))
    app.go(late)
    assert started.wait(10)
    app.stop()
    app.wait(10)
    assert calls == [1]


def test_an_app_without_a_runner_answers_the_same_api():
    class Still(App):
        figsize = (2, 2)

        def update(self):
            pass

    app = Still(canvas="agg")
    assert not app.is_running and not app.stop_requested
    assert app.stop() is False and app.wait(0) is True


# ---------------------------------------------------------------- plots helpers and colours



def test_an_app_may_call_its_data_view_without_breaking_the_image_fallback():
    """ModelGeometryApp keeps its shown measurement in ``view``; the PNG fallback still paints
    (it crashed at construction before)."""
    from accesslib.apps.nb05_geometry import TINY_RANDOM, ModelGeometryApp

    app = ModelGeometryApp(canvas="image", model=TINY_RANDOM)
    assert app.view is None and app.last_error is None
    assert app.view is None and app.widget.children.count(app._image) == 1
    assert app._image.value[:4] == b"\x89PNG"


# --- the toolbar: save the figure, download its data ----------------------------------------------
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def figure_kind(data: bytes) -> str:
    """'png', 'pdf' or 'svg' from a file's first bytes (anything else: '?')."""
    for kind, magic in MAGIC.items():
        if data.startswith(magic):
            return kind
    head = data[:400].lstrip()
    return "svg" if head.startswith(b"<?xml") and b"<svg" in data[:2000] else "?"


def link_payload(html_text: str):
    """(file name, MIME type, bytes) of the download link an app shows."""
    import base64
    m = re.search(r'<a download="([^"]+)" href="data:([^;]+);base64,([^"]+)"', html_text)
    assert m, html_text[:300]
    return m.group(1), m.group(2), base64.b64decode(m.group(3))


class Plotter(App):
    """A line drawn by blitting (animated) and its data."""

    figsize = (3, 2)
    export_name = "toy-line"

    def __init__(self, canvas="agg"):
        super().__init__(canvas=canvas)
        ax = self.fig.add_subplot(1, 1, 1)
        (self.line,) = ax.plot([0, 1, 2], [0, 1, 4])
        self.refresh()

    def animated_artists(self):
        return [self.line]

    def update(self):
        self.redraw()

    def data_rows(self):
        x, y = self.line.get_data()
        return [dict(x=float(a), y=float(b)) for a, b in zip(x, y)]


@pytest.mark.parametrize("canvas", ["agg", "image"])
def test_the_toolbar_saves_the_figure_in_every_format_with_the_moving_artists(canvas):
    import io

    import numpy as np
    from PIL import Image

    app = Plotter(canvas=canvas)
    assert app.toolbar in app.widget.children and len(app.toolbar.children) == 4   # one compact row
    assert [o[1] for o in app.figure_format.options] == ["png", "svg", "pdf"]
    for fmt in ("png", "svg", "pdf"):
        app.figure_format.value = fmt
        app.save_button.click()
        name, mime, data = link_payload(app.download.value)
        assert name == f"accesslib-toy-line.{fmt}" and figure_kind(data) == fmt
        assert mime == {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}[fmt]
        assert app.last_error is None
    # the blitted line is in the file (a white figure would be all white), and stays animated
    app.line.set_visible(False)
    blank = np.asarray(Image.open(io.BytesIO(app.figure_bytes("png"))).convert("L"))
    app.line.set_visible(True)
    drawn = np.asarray(Image.open(io.BytesIO(app.figure_bytes("png"))).convert("L"))
    assert (drawn != blank).sum() > 50 and app.line.get_animated()
    app.line.set_ydata([4, 1, 0])          # the page keeps working after a save
    app.refresh()
    assert app.last_error is None
    assert app.download.value == ""        # a control changed: the old figure's link is gone


def test_the_toolbar_downloads_the_data_as_csv():
    import csv
    import io

    app = Plotter()
    app.data_button.click()
    name, mime, data = link_payload(app.download.value)
    assert (name, mime) == ("accesslib-toy-line.csv", "text/csv")
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    assert [(float(r["x"]), float(r["y"])) for r in rows] == [(0, 0), (1, 1), (2, 4)]


def test_download_errors_are_one_line_next_to_the_buttons():
    app = Toy()   # no data_rows
    app.show_error("ε must be > 0; got 0")
    app.data_button.click()
    assert "No file: not available here: this page has no data to download" in app.download.value
    assert app.last_error == "ε must be > 0; got 0"   # a message about a control stays as it was
    app.save_button.click()
    assert "accesslib-figure.png" in app.download.value and app.last_error == "ε must be > 0; got 0"
    app.data_rows = lambda: []
    app.data_button.click()
    assert "No file: the figure shows no data yet (press Run first)" in app.download.value
    with pytest.raises(ValueError, match="figure format must be one of 'png', 'svg', 'pdf'; got 'jpg'"):
        app.figure_bytes("jpg")


def test_rows_to_csv_and_the_size_limit():
    import math

    from accesslib.apps import base
    text = base.rows_to_csv([dict(a=1, b=0.1), dict(b=math.nan, c=[1, 2], d=None, e=True)])
    assert text.splitlines() == ["a,b,c,d,e", "1,0.1,,,", ',,"[1, 2]",,True']
    with pytest.raises(ValueError, match="too large for a download link"):
        base.download_link("x.csv", b"x" * (base.MAX_DOWNLOAD_BYTES + 1), "text/csv")


def test_every_app_implements_its_data_and_names_its_files():
    import importlib
    import inspect

    from accesslib import apps
    names = {}
    for cls_name, module in apps._APPS.items():
        cls = getattr(importlib.import_module(f"accesslib.apps.{module}"), cls_name)
        if cls is App:
            continue
        assert inspect.getattr_static(cls, "data_rows") is not App.data_rows, f"{cls_name} has no data_rows"
        assert re.fullmatch(r"nb0[1-9]-[a-z-]+", cls.export_name), cls.export_name
        assert cls.export_name[:4] == f"nb{module[2:4]}", (cls_name, cls.export_name)
        names.setdefault(cls.export_name, cls_name)
    assert len(names) == len(apps._APPS) - 1   # each app its own file names


# --- messages in the reader's words, dates as a reader writes them --------------------------------
@pytest.mark.parametrize("exc, message", [
    # the checks' own style stays as it is
    (ValueError("n must be a whole number in 1..32; got 40"), "n must be a whole number in 1..32; got 40"),
    # a parameter's Python name reads as words
    (ValueError("max_steps must be a whole number >= 1; got 0"), "max steps must be a whole number >= 1; got 0"),
    # no exception class, no code in parentheses, one line
    (ValueError("could not load model 'x/y': OSError: We couldn't connect to the Hub.\nTraceback ..."),
     "could not load model 'x/y': We couldn't connect to the Hub."),
    (ValueError("model has no output embedding (get_output_embeddings() is None)"), "model has no output embedding"),
    (ValueError("model must be a LoadedModel (accesslib.models.loading.load_model) or a transformers model"),
     "model must be a LoadedModel or a transformers model"),
    (MemoryError(), "not enough memory for these settings: choose smaller values (fewer samples, shorter lengths) "
                    "and run again"),
    (ZeroDivisionError("division by zero"), "these settings cannot be computed (division by zero; "
                                            "ZeroDivisionError): change one of them and try again"),
    (ModuleNotFoundError("No module named 'ipympl'", name="ipympl"),
     'a package this page needs is not installed (ipympl): install the apps with `pip install "accesslib[apps]"` '
     "and reload the page"),
    (FileNotFoundError(2, "No such file or directory", "/data/run.json"),
     "a file could not be used (/data/run.json): No such file or directory"),
    (NotImplementedError("this page has no data to download"), "not available here: this page has no data to download"),
    # a bug: its class for a report, never the code it came from
    (TypeError("update() takes 1 positional argument but 2 were given"),
     "something went wrong inside the app (TypeError); the last good result stays on the page: change a setting "
     "or reload the page"),
])
def test_error_messages_say_what_to_change_not_which_function_failed(exc, message):
    from accesslib.apps.base import error_message

    assert error_message(exc) == message


def test_a_long_message_is_cut_at_a_word():
    from accesslib.apps.base import MAX_MESSAGE, error_message

    text = error_message(ValueError("word " * 200))
    assert len(text) <= MAX_MESSAGE + 4 and text.endswith("word ...")


@pytest.mark.parametrize("value, kw, text", [
    ("2026-12-02T14:55:28+00:00", {}, "2 December 2026"),
    ("2026-12-02T14:55:28+00:00", {"time": True}, "2 December 2026, 14:55 UTC"),
    ("2026-12-02T16:55:28+02:00", {"time": True}, "2 December 2026, 14:55 UTC"),
    ("2026-12-02T14:55:28Z", {"time": True}, "2 December 2026, 14:55 UTC"),
    ("2026-01-09", {"time": True}, "9 January 2026"),
    (0, {"time": True}, "1 January 1970, 00:00 UTC"),
    ("not a date", {}, "not a date"),
    (None, {}, "unknown date"),
    ("", {}, "unknown date"),
])
def test_human_date(value, kw, text):
    from accesslib.apps.base import human_date

    assert human_date(value, **kw) == text


# --- public-mode caps: the one place every update and every run passes through --------------------
class Capped(Toy):
    """A Toy with a capped number field (a "steps" input) and an update that counts."""

    def __init__(self, policy):
        self.policy = policy
        super().__init__()
        self.steps = W.IntText(value=10)
        self.updates = 0

    def update(self):
        self.updates += 1


@pytest.fixture
def capped(monkeypatch):
    from accesslib.apps import policy as pol

    monkeypatch.setitem(pol.PUBLIC_CAPS, "Capped", {"steps": pol.Cap("max steps", 1, 100)})

    def make(public):
        return Capped(pol.public_policy(["m"]) if public else pol.Policy())
    return make


def test_a_run_over_a_cap_starts_nothing_and_says_what_to_set(capped):
    app = capped(public=True)
    app.steps.value = 5000
    ran = []
    assert app.go(lambda run: ran.append(1)) is False
    assert app.last_error == "max steps = 5,000 is over this server's cap of 100: set it to 100 or less"
    assert app.runner.thread is None and ran == [] and not app.run_btn.disabled
    app.steps.value = 0
    app.go(lambda run: ran.append(1))
    assert app.last_error == "max steps = 0 is under this server's lowest value 1: set it to 1 or more"
    app.steps.value = 100
    app.go(lambda run: ran.append(1))
    assert app.wait(10) and ran == [1] and app.last_error is None


def test_an_update_over_a_cap_computes_nothing(capped):
    app = capped(public=True)
    app.refresh()
    assert app.updates == 1
    app.steps.value = 101
    assert app.refresh() is False and app.updates == 1 and "over this server's cap of 100" in app.last_error
    app.steps.value = 100
    assert app.refresh() is True and app.updates == 2 and app.last_error is None


def test_an_open_server_caps_nothing(capped):
    app = capped(public=False)
    app.steps.value = 10**9
    assert app.refresh() is True and app.updates == 1
    assert app.go(lambda run: None) is True and app.wait(10)


def test_the_page_opens_within_its_caps_and_shows_them(monkeypatch):
    """Shown on a public server, each capped slider, field and numeric dropdown is narrowed to its
    cap (a log slider's exponents too); the caps a range cannot show are said under the controls."""
    import math

    from accesslib.apps import policy as pol

    class Page(Toy):
        def __init__(self):
            super().__init__()
            self.n = W.IntSlider(value=48, min=4, max=512)
            self.eps = W.FloatLogSlider(value=0.5, base=10, min=-2, max=0)
            self.steps = W.IntText(value=4000)
            self.width = W.Dropdown(options=[16, 32, 64, 128], value=128)
            self.lengths = W.Text(value="4, 8")

    monkeypatch.setitem(pol.PUBLIC_CAPS, "Page", {
        "n": pol.Cap("samples", 4, 64), "eps": pol.Cap("ε", 0.1, 1), "steps": pol.Cap("max steps", 1, 500),
        "width": pol.Cap("width d", 16, 64), "lengths": pol.Cap("lengths", 1, 300, kind="list", max_items=12)})
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "1")
    app = Page()
    app._repr_mimebundle_()
    assert (app.n.max, app.n.value) == (64, 48)
    assert app.eps.min == pytest.approx(math.log10(0.1)) and app.eps.value == pytest.approx(0.5)
    assert app.steps.value == 500
    assert list(app.width.options) == [16, 32, 64] and app.width.value == 64
    assert app.caps_note.layout.display is None
    assert "This public server runs at most: lengths up to 300 (12 values)." in app.caps_note.value
    app.check_inputs(run=True)   # everything within its caps once shown
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "0")
    open_page = Page()
    open_page._repr_mimebundle_()
    assert open_page.n.max == 512 and list(open_page.width.options) == [16, 32, 64, 128]
