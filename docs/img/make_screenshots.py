"""Re-take the report screenshots of docs/reports.md (and the README).

    python docs/img/make_screenshots.py REPORT.html [--terminal REPORT.json]

Drives the headless Chromium that the tests use (``chromium`` and ``chromedriver`` on PATH,
selenium from the dev extras).  Writes report-*.png next to this file; with ``--terminal``
also terminal.svg, the terminal report of a saved JSON report at width 100."""

from __future__ import annotations

import argparse
import io
import re
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHOTS = {  # file -> (first section shown, viewport height)
    "report-overview.png": ("", 1500),
    "report-timeline.png": ("timeline", 900),
    "report-findings.png": ("findings", 1300),
    "report-request.png": ("request", 1100),
}


def browser(width: int, height: int, dark: bool = False):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
    ):
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='tt-shots-')}")
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts
    )
    if dark:
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
    return driver


def shoot(report: Path, out: Path, dark: bool = False) -> None:
    for name, (section, height) in SHOTS.items():
        driver = browser(1280, height, dark)
        try:
            driver.get(report.resolve().as_uri())
            if section:
                # the sticky navigation bar is 40 px high; keep the section title below it
                driver.execute_script(
                    "const s = document.getElementById(arguments[0]);"
                    "if (s) window.scrollTo(0, s.getBoundingClientRect().top + window.scrollY - 50);",
                    section,
                )
            target = out / (name.replace(".png", "-dark.png") if dark else name)
            driver.save_screenshot(str(target))
        finally:
            driver.quit()


def terminal_svg(saved_json: Path, out: Path) -> None:
    import orjson
    from rich.console import Console

    from tailtriage.renderers.terminal import TerminalRenderer
    from tailtriage.report import Report

    report = Report.from_dict(orjson.loads(saved_json.read_bytes()))
    console = Console(
        width=100,
        record=True,
        force_terminal=True,
        color_system="truecolor",
        file=io.StringIO(),
    )
    for part in TerminalRenderer(width=100, color=True).renderables(report):
        console.print(part)
    svg = console.export_svg(title="tailtriage triage")
    # rich links web fonts from a CDN; the docs stay offline like the reports: drop them
    svg = re.sub(r"@font-face \{.*?\}", "", svg, flags=re.S)
    (out / "terminal.svg").write_text(svg, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("report", type=Path)
    ap.add_argument("--terminal", type=Path)
    ap.add_argument("--dark", action="store_true")
    args = ap.parse_args()
    shoot(args.report, HERE, args.dark)
    if args.terminal:
        terminal_svg(args.terminal, HERE)


if __name__ == "__main__":
    main()
