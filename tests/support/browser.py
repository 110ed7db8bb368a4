"""A real headless Chromium (Debian's chromium + chromium-driver) driven by Selenium, for page tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
# Root in a container: no sandbox; nothing may reach the network or pop up first-run work.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900"]


def chromium_available() -> bool:
    return Path(CHROMIUM).exists() and Path(DRIVER).exists()


def start_chromium(profile: Path, width: int = 1280, height: int = 900) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag if not flag.startswith("--window-size") else f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(options=options, service=Service(DRIVER))


@pytest.fixture
def browser() -> Iterator[Any]:
    if not chromium_available():
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    profile = Path(tempfile.mkdtemp(prefix="claw-chromium-"))
    driver = start_chromium(profile)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
