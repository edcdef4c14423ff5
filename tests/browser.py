"""A real browser for the pages' tests: Debian's chromium, driven through its chromedriver.

``make test`` installs both when missing (``make browser``); here a missing one skips, naming
the command. Every wait is for a condition with a deadline (:func:`seen`), never a sleep.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 900

__all__ = ["By", "WebDriver", "chromium", "seen", "sign_in"]


@contextlib.contextmanager
def chromium(download_dir: Path | None = None) -> Iterator[WebDriver]:
    """A headless chromium of its own (a fresh profile: no cookie of another test)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("no chromium here: `make browser` (apt-get install chromium chromium-driver) installs it")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WIDTH},{HEIGHT}",
        "--hide-scrollbars",
        "--no-first-run",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def seen(driver: WebDriver, condition: Callable[[WebDriver], object], timeout_s: float, what: str) -> None:
    """Wait until ``condition`` holds in the page, ``timeout_s`` at most; fail saying ``what``. An
    element the page's script replaced while it was read is read again at the next look."""
    try:
        ignored = (StaleElementReferenceException,)
        WebDriverWait(driver, timeout_s, poll_frequency=0.1, ignored_exceptions=ignored).until(condition)
    except TimeoutException:
        pytest.fail(
            f"not within {timeout_s:g} s: {what}\n--- page text ---\n{driver.find_element(By.TAG_NAME, 'body').text[:3000]}"
        )


def click(driver: WebDriver, link_text: str, timeout_s: float = 5.0) -> None:
    """Click the link named ``link_text``, found again if the page's script replaced it meanwhile."""

    def clicked(d: WebDriver) -> bool:
        d.find_element(By.LINK_TEXT, link_text).click()
        return True

    seen(driver, clicked, timeout_s, f"a link {link_text!r} to click")


def sign_in(driver: WebDriver, base: str, token: str, page: str = "/ui/jobs") -> None:
    """Open ``page``, be sent to the sign-in form, sign in with ``token`` and come back."""
    driver.get(base + page)
    seen(driver, lambda d: d.find_elements(By.ID, "token"), 10, "the sign-in form")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form.sign-in button[type=submit]").click()
    seen(driver, lambda d: not d.find_elements(By.ID, "token"), 10, "signed in")


def screenshot(driver: WebDriver, folder: Path | None, name: str) -> None:
    """The whole page as ``folder/name.png`` when screenshots are asked for (``make screenshots``)."""
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    height = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]["height"]
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(height, 4000), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    (folder / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))
