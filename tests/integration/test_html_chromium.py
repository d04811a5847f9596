"""The HTML report in a real browser (headless Chromium through chromedriver): it loads
with no console errors and no network requests, its charts render, its interactions work,
and hostile strings from input are shown as text, never run."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from renderers.report_builders import (
    HOSTILE,
    HOSTILE_SCRIPT,
    make_compare_report,
    make_empty_report,
    make_hostile_report,
    make_huge_report,
    make_nonfinite_report,
    make_report,
)
from support import installed_binary
from tailtriage.renderers import write_report

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = installed_binary("chromium", "chromium")
CHROMEDRIVER = installed_binary("chromedriver", "chromium-driver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tt-chromium-")
    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_report(browser: Any, path: Path) -> dict[str, Any]:
    """Load ``path``; return the console messages and the URLs the page requested."""
    browser.get_log("browser")
    browser.get_log("performance")
    browser.get(path.as_uri())
    ready = browser.execute_script("return document.documentElement.getAttribute('data-ready')")
    console = browser.get_log("browser")
    requests = []
    for entry in browser.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] != "Network.requestWillBeSent":
            continue
        url, doc = msg["params"]["request"]["url"], msg["params"].get("documentURL", "")
        # the browser's own chrome:// pages (a new-tab page at start-up) are not the report's
        if doc == path.as_uri() or url.split(":", 1)[0] in ("http", "https", "ws", "wss", "ftp"):
            requests.append(url)
    return {"ready": ready, "console": console, "requests": requests}


def assert_clean_load(browser: Any, path: Path) -> None:
    result = open_report(browser, path)
    assert result["ready"] == "1", "the inline script did not run to its end"
    errors = [m for m in result["console"] if m["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors
    foreign = [u for u in result["requests"] if u != path.as_uri()]
    assert foreign == [], f"the report made network requests: {foreign}"


def scroll_to(browser: Any, element: Any) -> None:
    """Scroll ``element`` into view and let the scroll event fire (it hides the tooltip)."""
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    browser.execute_async_script("requestAnimationFrame(() => requestAnimationFrame(arguments[0]))")


def chart_sizes(browser: Any) -> dict[str, list[float]]:
    """Rendered width of the drawn content of every chart, by section id."""
    return browser.execute_script(
        """
        const out = {};
        document.querySelectorAll('section').forEach(s => {
          out[s.id] = Array.from(s.querySelectorAll('svg.chart')).map(svg => {
            const shapes = svg.querySelectorAll('rect,path,circle,line').length;
            const box = svg.getBoundingClientRect();
            return shapes > 0 ? box.width * box.height : 0;
          });
        });
        return out;"""
    )


def test_full_report_loads_clean_and_every_chart_renders(browser: Any, tmp_path: Path) -> None:
    path = write_report(make_report(), tmp_path / "report.html")
    assert_clean_load(browser, path)
    sizes = chart_sizes(browser)
    for sid in (
        "decomposition",
        "timeline",
        "request",
        "distributions",
        "replicas",
        "remediations",
    ):
        assert sizes.get(sid), f"no chart in section {sid}"
        assert all(area > 1000 for area in sizes[sid]), (sid, sizes[sid])
    text = browser.execute_script("return document.body.innerText")
    for needle in (
        "scaling_lag",
        "800.0 ms",
        "BREACHED",
        "vllm:num_requests_waiting",
        "Data quality",
    ):
        assert needle in text


def test_hostile_strings_are_text_not_code(browser: Any, tmp_path: Path) -> None:
    path = write_report(make_hostile_report(), tmp_path / "hostile.html")
    assert_clean_load(browser, path)
    state = browser.execute_script(
        """return {
          pwned: window.__pwned === undefined ? null : window.__pwned,
          imgs: document.querySelectorAll('img').length,
          scripts: document.querySelectorAll('script').length,
          text: document.body.innerText,
          tips: Array.from(document.querySelectorAll('[data-tip]')).map(e => e.getAttribute('data-tip')),
          data: JSON.parse(document.getElementById('report-data').textContent),
          title: document.title,
        }"""
    )
    assert state["pwned"] is None
    assert state["imgs"] == 0
    assert state["scripts"] == 2  # the JSON data block and the page's own script
    assert HOSTILE in state["text"] and HOSTILE_SCRIPT in state["text"]
    assert any(HOSTILE in t for t in state["tips"])  # replica name in a chart tooltip
    assert state["data"]["title"].endswith(HOSTILE_SCRIPT)  # the embedded JSON survives intact
    assert state["data"]["extra"]["analysis"]["notes"] == [HOSTILE_SCRIPT]
    assert HOSTILE_SCRIPT in state["title"]


def test_interactions_tooltip_tabs_copy(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    path = write_report(make_report(), tmp_path / "report.html")
    assert_clean_load(browser, path)
    seg = browser.find_element(By.CSS_SELECTOR, "#decomposition svg.chart rect.seg")
    scroll_to(browser, seg)
    ActionChains(browser).move_to_element(seg).perform()
    tip = browser.find_element(By.ID, "tt")
    assert tip.is_displayed()
    assert tip.get_attribute("textContent") == seg.get_attribute("data-tip")

    tab = browser.find_element(By.ID, "replica-tab-1")
    scroll_to(browser, tab)
    tab.click()
    assert browser.find_element(By.ID, "replica-panel-1").is_displayed()
    assert not browser.find_element(By.ID, "replica-panel-0").is_displayed()

    button = browser.find_element(By.CSS_SELECTOR, "button[data-copy]")
    scroll_to(browser, button)
    button.click()
    # the clipboard answers asynchronously: wait for the button to report the outcome
    WebDriverWait(browser, 10).until(lambda b: button.text != "Copy config")
    assert button.text in ("Copied", "Select and copy")
    errors = [m for m in browser.get_log("browser") if m["level"] == "SEVERE"]
    assert errors == []


@pytest.mark.parametrize("builder", [make_empty_report, make_compare_report, make_nonfinite_report])
def test_other_reports_load_clean(browser: Any, tmp_path: Path, builder: Any) -> None:
    assert_clean_load(browser, write_report(builder(), tmp_path / "other.html"))


def test_huge_report_is_small_and_loads_clean(browser: Any, tmp_path: Path) -> None:
    path = write_report(make_huge_report(), tmp_path / "huge.html")
    assert path.stat().st_size < 5_000_000
    assert_clean_load(browser, path)
    assert all(chart_sizes(browser).get("distributions", [0]))
