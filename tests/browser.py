"""A real browser for tests: Debian's chromium, headless, driven by its chromedriver through Selenium; and
`make ui` started as a user starts it."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.helpers import free_port, quiet_env, wait_for_http

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
UI_LINK = re.compile(r"^MLflow UI, ringflow's training runs: (\S+)$", re.M)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium, 1600x1000, through its own chromedriver (no download of either)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(condition: Callable[[], Any], seconds: float = 60, what: str = "") -> Any:
    """A bounded wait (not a speed goal) for a page to show something: the condition's first true value."""
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"the page did not show {what} within {seconds:.0f} s"
        time.sleep(0.5)
    return found


@contextmanager
def make_ui(checkout: Path) -> Iterator[str]:
    """`make ui` in a checkout on a free port; the address it says to open, once the UI answers."""
    log_path = checkout / "make-ui.log"
    with open(log_path, "w") as log:
        ui = subprocess.Popen(["make", "ui", f"UI_PORT={free_port()}"], cwd=checkout, env=quiet_env(), stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
        try:
            link = wait_for(lambda: UI_LINK.search(log_path.read_text()), 120, "make ui's link")[1]
            wait_for_http(link.split("/#/")[0] + "/health", 120, ui)
            yield link
        finally:
            os.killpg(ui.pid, signal.SIGTERM)
            ui.wait(timeout=30)
