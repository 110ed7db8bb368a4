"""`claw view`'s run page in a real headless Chromium for a run whose server sent no usage (an Ollama, a llama.cpp
without counts): its tokens are unknown, and the page says "unknown" as it says it of the cost. It read `– / –`,
which a reader takes for "none" (session 77's newcomer); a run that never ran (skipped) still reads `–`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw, claw, ws  # noqa: F401
from tests.support.workspace import Workspace

NO_USAGE = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None, "cost": None}


def _run_page(browser: Any, html: Path, case: str, model: str) -> str:
    browser.get(html.as_uri() + f"#case/{case}/model/{model}")
    title = f"Case {case} · model {model}"  # (the same page's other run: wait for this one's, not the last one's)
    WebDriverWait(browser, 10).until(lambda d: [e for e in d.find_elements(By.ID, "run-title") if e.text == title])
    WebDriverWait(browser, 10).until(lambda d: "TOKENS IN / OUT" in d.find_element(By.ID, "main").text.upper())
    return str(browser.find_element(By.ID, "main").text)


def test_a_run_without_usage_shows_its_tokens_unknown(ws: Workspace, claw: Claw, standin: StandIn,  # noqa: F811
                                                      browser: Any, tmp_path: Path) -> None:
    standin.script("vendor/m2", text("four", usage=NO_USAGE))
    code, out, err = claw.build()
    assert code == 0, out + err
    html = tmp_path / "view.html"
    code, _, err = claw("view", "--suite", "main", "--run-profile", "rp", "--out", str(html))
    assert code == 0, err
    silent = _run_page(browser, html, "alpha", "m2")
    assert "unknown / unknown" in silent and "– / –" not in silent, silent
    counted = _run_page(browser, html, "alpha", "m1")
    assert "unknown / unknown" not in counted and "– / –" not in counted, counted
