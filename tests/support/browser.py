"""Debian's headless Chromium driven by Selenium, for the workbench page's tests
and bench. Nothing is downloaded: the browser and its driver are the system's
(``make test`` installs ``chromium`` and ``chromium-driver`` when it may).

    with chromium() as driver:
        driver.get(url)
"""
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# This machine's network is closed: without the background-networking flags Chromium
# keeps trying (and failing) to reach Google's hosts.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -r tests/requirements.txt)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            return (f"{path} is missing: apt-get install {package} (make test does it "
                    "when run as root)")
    return None


@contextmanager
def chromium(width: int = 1280, height: int = 900, dark: bool = False,
             trace: str = "") -> Iterator[object]:
    """A fresh browser (its own empty profile); ``dark``: prefers-color-scheme dark;
    ``trace``: Chromium trace categories to record, which each
    ``driver.get_log("performance")`` hands over (``Tracing.dataCollected``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tg-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    if trace:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        options.add_experimental_option("perfLoggingPrefs", {
            "traceCategories": trace, "enableNetwork": False, "enablePage": False})
    if dark:
        options.add_argument("--force-dark-mode")
        options.add_argument("--blink-settings=preferredColorScheme=0")  # 0: dark
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_until(driver, check: Callable[[object], object], timeout: float, what: str) -> object:
    """Poll ``check(driver)`` until it returns something true; fail naming ``what``."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check)
    except TimeoutException:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; page "
                             f"status: {status_text(driver)!r}") from None


def status_text(driver) -> str:
    try:
        return driver.execute_script(
            "return document.getElementById('connection')?.textContent || ''")
    except Exception as error:  # the page may be gone
        return f"<{error}>"
