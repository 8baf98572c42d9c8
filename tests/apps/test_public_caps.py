"""Public mode is enforced on the server for every app's every input (05 once accepted
10^7 samples and 06 100,000 steps when a browser sent them through the widget protocol).

The values are sent the way a browser sends them: a widget-protocol "update" message handled by
the widget itself (``Widget._handle_msg``), which may carry a new ``max`` with the ``value``
(a slider's limits are synced state too). Then Run is pressed (or, for an app that computes as
its controls move, the message itself is the request): nothing may run, and the page's error
area must say which input is over its cap and what to set it to.
"""
import html
import importlib

import matplotlib
import pytest

matplotlib.use("Agg")

import ipywidgets as W  # noqa: E402

from accesslib import apps  # noqa: E402
from accesslib.apps.policy import PUBLIC_CAPS, caps_for  # noqa: E402

#: inputs that can hold only the options the app made (ipywidgets checks a browser's index)
SELECTION = (W.Dropdown, W.ToggleButtons, W.RadioButtons, W.Select, W.SelectMultiple, W.Checkbox,
             W.ToggleButton)


def send(widget, **state):
    """What a browser's widget-protocol message does on the server: ``update`` with ``state``."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}},
                        "buffers": []})


@pytest.fixture
def public(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "1")
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))


def _make(name, **kw):
    cls = getattr(importlib.import_module(f"accesslib.apps.{apps._APPS[name]}"), name)
    app = cls(canvas="agg", **kw)
    app._repr_mimebundle_()   # shown on the page: the caps are fitted before any message
    return app


def _shows(app, *parts):
    """The page's error area is visible and says every one of ``parts``."""
    assert app.last_error is not None, "no message on the page"
    assert app.error.layout.display != "none"
    for part in parts:
        assert part in app.last_error, app.last_error
        assert html.escape(part) in app.error.value


def _inputs(widget):
    """Every value-holding widget inside ``widget`` (a box tree)."""
    for child in getattr(widget, "children", ()):
        if isinstance(child, W.Box):
            yield from _inputs(child)
        elif isinstance(child, W.ValueWidget) and not isinstance(child, (W.HTML, W.HTMLMath, W.Label,
                                                                          W.IntProgress, W.FloatProgress,
                                                                          W.Image)):
            yield child


def test_every_input_of_every_app_is_in_the_caps_table(public):
    """A number or text input without a cap fails here (a new slider must say its public range),
    and so does a cap whose input is gone (the table must not rot)."""
    for name in apps._APPS:
        if name == "App":
            continue
        assert name in PUBLIC_CAPS, f"{name} has no entry in PUBLIC_CAPS"
        app = _make(name)
        by_id = {id(v): k for k, v in vars(app).items() if isinstance(v, W.Widget)}
        caps = caps_for(app)
        for w in _inputs(app.controls):
            if isinstance(w, SELECTION):
                continue
            attr = by_id.get(id(w))
            assert attr is not None and attr in caps, (
                f"{name}: input {getattr(w, 'description', w)!r} ({type(w).__name__}) has no public cap")
        for attr in caps:
            assert isinstance(getattr(app, attr, None), W.ValueWidget), f"{name}.{attr}: capped but not an input"
        # the page opens within its caps: no message, every input passes as it is shown
        assert app.last_error is None, (name, app.last_error)
        app.check_inputs()


def test_cramming_02_refuses_values_over_the_caps_from_the_browser(public):
    from accesslib.results.store import ResultsStore

    app = _make("CrammingApp")
    assert app.samples.max == 16 and app.max_steps.max == 500   # the page shows the caps
    send(app.samples, max=10**7, value=10**7)
    app.run_button.click()
    _shows(app, "10000000 is over this server's cap of 16")
    assert app.runner.thread is None and ResultsStore().count() == 0
    send(app.samples, value=2)
    # a list within every cap but far too long to parse on a class server: the caps refuse it
    send(app.lengths, value="4, " * 20_000)
    app.run_button.click()
    _shows(app, "lengths: at most 200 characters on this server")
    assert app.runner.thread is None and ResultsStore().count() == 0


def test_geometry_05_refuses_cell_samples_and_samples_per_length_over_the_caps(public):
    app = _make("ModelGeometryApp")
    assert app.n_cells.max == 50_000 and app.per_length.max == 64   # the page shows the caps
    # a value alone is held to the slider's range, which the page narrowed to the cap
    send(app.per_length, value=10**7)
    assert app.per_length.value == 64
    send(app.n_cells, max=10**7, value=10**7)
    app.run_btn.click()
    _shows(app, "cell samples N = 10,000,000 is over this server's cap of 50,000: set it to 50,000 or less")
    assert app.runner.thread is None and app.report is None
    send(app.n_cells, value=2000)
    send(app.per_length, max=10**7, value=10**7)
    app.run_btn.click()
    _shows(app, "samples / length = 10,000,000 is over this server's cap of 64")
    assert app.runner.thread is None and app.report is None


@pytest.mark.parametrize("attr, state, says", [
    ("steps", dict(value=100_000), "max steps = 100,000 is over this server's cap of 4,000"),
    ("n_eval", dict(value=10_000), "strings/length = 10,000 is over this server's cap of 100"),
    ("lengths", dict(value="10, 1000"), "eval lengths = 1,000 is over this server's cap of 300"),
    ("max_len", dict(max=1000, value=120), "train up to = 120 is over this server's cap of 100"),
])
def test_copy_06_refuses_every_input_over_its_cap(public, attr, state, says):
    app = _make("CopyApp")
    send(getattr(app, attr), **state)
    app.run_btn.click()
    _shows(app, says)
    assert app.runner.thread is None and app.result is None and app.model is None


def test_copy_06_offers_only_the_widths_and_layers_a_class_server_runs(public):
    app = _make("CopyApp")
    assert list(app.d.options) == [16, 32, 64] and list(app.layers.options) == [1, 2]
    send(app.d, index=3)          # what was d = 128 before the page narrowed it: refused by ipywidgets
    send(app.layers, index=3)
    assert app.d.value <= 64 and app.layers.value <= 2
    app.d.value = 64   # within the caps: the check passes
    app.check_inputs(run=True)


def test_precision_07_refuses_inputs_over_the_caps(public):
    app = _make("PrecisionApp")
    send(app.n, max=10**6, value=10**6)
    app.run_btn.click()
    _shows(app, "output tokens n = 1,000,000 is over this server's cap of 32")
    assert app.runner.thread is None and app.lm is None and app.results == {}
    send(app.n, value=4, max=32)
    send(app.kmax, max=4096, value=4096)
    app.run_btn.click()
    _shows(app, "grid k (max) = 4,096 is over this server's cap of 128")
    assert app.runner.thread is None and app.lm is None


def test_packing_07_computes_nothing_for_a_radius_over_its_cap(public):
    """07's packing computes as its sliders move: the message is the request, and is refused."""
    app = _make("PackingApp")
    shown = dict(app.shown)
    send(app.r, max=10**5, value=10**5)
    _shows(app, "r (radius) = 100,000 is over this server's cap of 10: set it to 10 or less")
    assert app.shown["r"] == shown["r"] and len(app.shown["points"]) == len(shown["points"])
    send(app.r, value=2.0, max=10)
    assert app.last_error is None and app.shown["r"] == 2.0


def test_open_mode_keeps_every_range_and_caps_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv("ACCESSLIB_PUBLIC", raising=False)
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))
    app = _make("CopyApp")
    assert list(app.d.options) == [16, 32, 64, 128] and app.caps_note.layout.display == "none"
    app.steps.value = 100_000
    app.check_inputs(run=True)    # local: everything open


def test_a_bad_ACCESSLIB_PUBLIC_refuses_every_run(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "maybe")
    monkeypatch.setenv("ACCESSLIB_HOME", str(tmp_path))
    app = _make("PrecisionApp")
    app.run_btn.click()
    _shows(app, "ACCESSLIB_PUBLIC must be unset")
    assert app.runner.thread is None and app.lm is None
