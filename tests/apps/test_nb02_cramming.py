"""Notebook 02's cramming app, headless: runs, Stop, public mode, bad input."""
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accesslib._checks import parse_int_list  # noqa: E402
from accesslib.apps.nb02_cramming import CrammingApp  # noqa: E402
from accesslib.apps.policy import public_policy  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results.store import ResultsStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_parse_int_list():
    """The apps' typed lists (m values, lengths) go through the one parser of accesslib._checks."""
    assert parse_int_list("4, 1;2 2", "m values") == [1, 2, 4]
    with pytest.raises(ValueError, match=re.escape(
            "m values must be whole numbers >= 1 separated by commas, e.g. '1, 2, 4'; got '1, two'")):
        parse_int_list("1, two", "m values")
    with pytest.raises(ValueError, match=re.escape(
            "lengths must be whole numbers >= 1 separated by commas, e.g. '1, 2, 4'; got '0, 3'")):
        parse_int_list("0, 3", "lengths")
    with pytest.raises(ValueError, match=re.escape(
            "m values must be whole numbers >= 1 separated by commas, e.g. '1, 2, 4'; got ' '")):
        parse_int_list(" ", "m values")


@pytest.fixture
def store(tmp_path):
    return ResultsStore(tmp_path / "r.sqlite")


def _app(store, **kw):
    app = CrammingApp(store=store, canvas="agg", fast=True, **kw)
    app.source.value = "tokens"   # random tokens: no two strings alike (each string is one store row)
    app.lengths.value = "2, 3"
    app.samples.value = 2
    app.max_steps.value = 40
    return app


def test_cramming_app_run_fills_store_table_and_curve(store):
    app = _app(store)
    assert app.curves == {}
    app.start()
    assert app.wait(timeout=300)
    assert app.last_error is None, app.last_error
    assert len(app.rows) == 4                        # 2 lengths x 2 strings
    assert store.count(model=embedded.DEFAULT) == 4
    assert set(app.curves) == {1} and app.curves[1]["lengths"] == [2, 3]
    assert sum(app.curves[1]["totals"]) == 4
    assert "greedy output" in app.table.value and app.table.value.count("<tr>") == 5
    assert app.loss_steps and all(v > 0 for v in app.loss_mean)
    # the plotted curve is the stored one
    line = app.art_curve["series"][1]["eb"].lines[0]
    assert list(line.get_xdata()) == [2, 3]
    # reopening (a new app on the same store) shows the earlier run without running anything
    again = _app(store)
    assert again.curves[1]["totals"] == app.curves[1]["totals"]
    assert "4 strings of these settings" in again.status.value
    # a Stop that reaches the kernel after the run ended (the button's state is synced late)
    # changes nothing: the summary stays, and the next run is not told to stop
    summary = app.status.value
    app.stop()
    assert app.status.value == summary and "finished" in summary
    assert not app.stop_requested
    # Download data: the stored counts the curve shows, and this run's loss
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO(app.data_csv())))
    acc = [r for r in rows if r["panel"] == "accessibility"]
    assert [(int(r["n"]), int(r["successes"]), int(r["strings"])) for r in acc] == list(
        zip(app.curves[1]["lengths"], app.curves[1]["successes"], app.curves[1]["totals"]))
    assert [float(r["fraction"]) for r in acc] == list(line.get_ydata())
    assert {(r["model"], r["source"], r["protocol"]) for r in acc} == {(embedded.DEFAULT, "tokens", "fast")}
    assert len([r for r in rows if r["panel"] == "loss"]) == len(app.loss_steps)
    assert app.figure_bytes("png").startswith(b"\x89PNG")


def test_cramming_app_stop_keeps_finished(store):
    app = _app(store)
    app.lengths.value = "2, 3, 4, 5, 6, 7"
    app.samples.value = 3
    app.start()
    app.stop()
    assert app.wait(timeout=300)
    assert "stopped" in app.status.value
    assert store.count(model=embedded.DEFAULT) == len(app.rows) < 18


def test_public_mode_refuses_and_runs_nothing(store):
    pol = public_policy([embedded.DEFAULT])
    app = _app(store, policy=pol)
    app.model.value = embedded.DEFAULT
    app.samples.value = 17
    app.run_button.click()
    assert "samples = 17 is over this server's cap of 16" in app.last_error
    assert app.runner.thread is None and store.count() == 0
    app.samples.value = 2
    app.lengths.value = "2, 100"
    app.run_button.click()
    assert "length = 100 is over" in app.last_error and store.count() == 0
    # the model list offers only allow-listed models
    assert list(app.model.options) == [embedded.DEFAULT]
    with pytest.raises(ValueError, match="not available on this public server"):
        pol.check_model("EleutherAI/pythia-160m")


def test_bad_m_shows_message(store):
    app = _app(store)
    app.ms.value = "1, x"
    app.run_button.click()
    assert app.last_error == ("m values must be whole numbers >= 1 separated by commas, "
                              "e.g. '1, 2, 4'; got '1, x'")
    assert app.runner.thread is None




