"""Real-browser test of the Voila apps (Debian chromium driven by Playwright)."""
import os

import pytest
from conftest import (
    app_url,
    assert_no_error,
    changed_png,
    figure_png,
    open_app,
    slider,
    slider_readout,
    wait_idle,
)

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("ACCESSLIB_SCREENSHOTS")   # a folder: keep screenshots to look at


def _readout(page):
    return page.locator(".accesslib-readout").first.inner_text()


def test_index_links_to_counting_bound(voila_server, page):
    page.goto(app_url(voila_server, "00-index.ipynb"))
    link = page.locator("a[href*='01-counting-bound.ipynb']").first
    link.wait_for(timeout=60000)
    assert "counting bound" in page.inner_text("body").lower()
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "00-index.png"), full_page=True)
    link.click()
    page.wait_for_url("**/voila/render/01-counting-bound.ipynb", timeout=60000)
    open_app(page, voila_server, "01-counting-bound.ipynb")
    assert_no_error(page)


def test_moving_a_slider_updates_readout_and_figure(voila_server, page):
    open_app(page, voila_server, "01-counting-bound.ipynb")
    assert_no_error(page)
    before_text = _readout(page)
    assert "log10 N = 2,774.4" in before_text          # pythia-160m preset, m = 1
    before_png = figure_png(page)
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "01-before.png"), full_page=True)

    # keyboard on the slider handle, as a user would: m from 1 to 3
    handle = slider(page, "m (prompt vectors)").locator(".noUi-handle").first
    handle.focus()
    handle.press("ArrowRight")
    handle.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.accesslib-readout').innerText.includes('8,323.1')",
        timeout=30000)
    wait_idle(page)
    assert slider_readout(page, "m (prompt vectors)").inner_text().strip() == "3"
    after_text = _readout(page)
    assert after_text != before_text
    assert "n* = C·m = 1,770.3" in after_text
    after_png = changed_png(page, before_png)
    assert_no_error(page)

    # the readout field of d: type a value
    ro = slider_readout(page, "d (model width)")
    ro.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("1536")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.accesslib-readout').innerText.includes('16,646.2')",
        timeout=30000)
    changed_png(page, after_png)
    assert_no_error(page)
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "01-after.png"), full_page=True)
    assert not [e for e in page.console_errors if "Traceback" in e]


def test_bad_value_shows_message_not_traceback(voila_server, page):
    open_app(page, voila_server, "01-counting-bound.ipynb")
    ro = slider_readout(page, "r (support radius)")
    ro.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("0")
    page.keyboard.press("Enter")
    err = page.locator(".accesslib-error")
    err.filter(has_text="r must be > 0").wait_for(timeout=30000)
    assert "Traceback" not in page.inner_text("body")
