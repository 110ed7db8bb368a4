"""`claw view`'s run page in a real headless Chromium for an OpenClaw run its container's crash left unfinished: its
tokens and cost unknown, with what its transcript shows answered as their known part (`≥`), never `–` alone nor a
plain number read as whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from clawstore.testing.standin import StandIn
from tests.builder.test_build_openclaw import docker, oc  # noqa: F401 - the OpenClaw campaign fixtures
from tests.builder.test_openclaw_unfinished_spend import UNFINISHED, one_run
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw, claw, ws  # noqa: F401
from tests.support.workspace import Workspace


def test_a_crashed_runs_page_shows_its_tokens_and_cost_known_part(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn, browser: Any,  # noqa: F811
        tmp_path: Path) -> None:
    one_run(oc, docker, UNFINISHED["crashed"][0])
    code, out, err = claw.build("--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    code, out, err = claw("query", "select input_tokens_known, output_tokens_known, cost_known_usd from runs",
                          "--format", "json")
    assert code == 0, out + err
    [known] = json.loads(out)
    assert known["input_tokens_known"] > 0 and known["output_tokens_known"] > 0, known
    html = tmp_path / "view.html"
    code, _, err = claw("view", "--suite", "main", "--run-profile", "rp", "--out", str(html))
    assert code == 0, err
    browser.get(html.as_uri() + "#case/oc_a/model/m1")
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "run-title"))
    text = browser.find_element(By.ID, "main").text
    assert f"≥{known['input_tokens_known']} / ≥{known['output_tokens_known']}" in text, text  # (before: – / –)
    assert f"unknown, ≥{known['cost_known_usd']:.5f}" in text, text
