"""Notebook 06's copy-task app, headless: the shipped run, a fast training run, Stop and bad input."""




def _bundle():
    return {"config": {"d": 16, "layers": 1, "lr": 3e-3, "max_len": 6}, "steps_done": 10,
            "loss": {"step": [5, 10], "loss": [3.0, 2.0]}, "train_range": [5, 50],
            "accuracy": {"n": 4, "lengths": [10, 50, 100], "greedy": [1.0, 1.0, 0.0],
                         "teacher_forced": [1.0, 1.0, 0.25]},
            "first_length_below_10pct": {"greedy": 100}, "train_wall_time_s": 60, "train_cpu_time_s": 30}


def test_app_shows_bundle_on_load_without_training():
    from accesslib.apps.nb06_copy import CopyApp

    app = CopyApp(bundle=_bundle(), fast=True, canvas="agg")
    assert list(app.loss_line.get_xdata()) == [5, 10]
    assert list(app.greedy_pts.get_ydata()) == [1.0, 1.0, 0.0]
    assert "greedy accuracy < 10% from length 100" in app.title.get_text()
    assert app.result is None and not app.is_running


def test_app_run_in_fast_mode_updates_plot():
    from accesslib.apps.nb06_copy import CopyApp

    app = CopyApp(bundle=_bundle(), fast=True, canvas="agg")
    app.steps.value = 12
    app.lengths.value = "3, 7"
    app.n_eval.value = 3
    app.run_btn.click()
    app.wait(120)
    assert not app.is_running and app.last_error is None
    assert list(app.loss_line.get_xdata()) == list(range(1, 13))      # the live curve replaced the bundle's
    assert list(app.greedy_pts.get_xdata()) == [3, 7]
    assert app.result.steps_done == 12 and app.progress.value == 2
    assert not app.run_btn.disabled and app.stop_btn.disabled


def test_app_stop_and_bad_input():
    from accesslib.apps.nb06_copy import CopyApp

    app = CopyApp(bundle=_bundle(), fast=True, canvas="agg")
    app.steps.value = 100_000
    app.start("train")
    deadline = __import__("time").monotonic() + 60
    while not app.steps_seen and __import__("time").monotonic() < deadline:
        __import__("time").sleep(0.05)
    app.stop_btn.click()
    app.wait(60)
    assert not app.is_running
    assert app.result.interrupted and app.result.steps_done < 100_000
    assert "stopped" in app.status.value
    app.lengths.value = "10, x"
    assert app.start("train") is False
    assert app.last_error == ("eval lengths must be whole numbers in 1..1000 separated by commas, "
                              "e.g. '1, 2, 4'; got '10, x'")
    assert "Traceback" not in app.error.value
