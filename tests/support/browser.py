"""A real headless Chromium for the dashboard tests: Debian's /usr/bin/chromium, driven by Playwright.

No browser is ever downloaded: Playwright launches the system binary through `executable_path`
(`make test` installs Debian's chromium when it is missing, scripts/install-chromium.sh), with
the flags a closed network and a root user need. `screenshot(page, name)` writes
`build/screenshots/dashboard/<name>.png` (or under $MEMSVC_SCREENSHOTS) so a person can look.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("MEMSVC_SCREENSHOTS", ROOT / "build" / "screenshots" / "dashboard"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module: Playwright's sync API holds an event loop on this thread while it runs."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium (as root)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab in its own context: no token, cookie or storage carried over from another test."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert not errors, f"the page threw: {errors}"


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=path, full_page=True)
    return path
