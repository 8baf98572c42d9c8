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
    (RuntimeError("boom"), "unexpected RuntimeError: boom"),
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
    png = app.widget.children[3].value
    assert png[:4] == b"\x89PNG"
