"""A head holding fewer results than its campaign says so: `claw report` (text and JSON) and `claw view`'s page give a
`Coverage:` line under `Head:` (how many of the campaign's model × case results the head holds, how many were never
built), and mark each model in the Model Summary when the models' case sets differ (their means are over different
cases). Before session 80 a filtered build's report said `Head: build … (complete; …)`, `Models: 2  Rows: 2` and
ranked the models on 1 case of 3 each, not a word of the 4 results never built. Builds and reports are real `claw`
processes against the stand-in server on 127.0.0.1; a head an older claw wrote (main before this change, extracted from
this repository's history: tests/support/oldclaw.py) carries no expectation and gets no line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import run_claw
from tests.support.browser import browser  # noqa: F401 - fixture
from tests.support.claw import env  # noqa: F401 - fixture
from tests.support.oldclaw import old_claw, old_clawstore
from tests.support.prepared import run_here
from tests.support.workspace import Workspace, many_cases
from tests.view.test_view_page import summary_of

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
# Main when session 80's coverage work began: its builds write no `expected` into the build log or the head.
BEFORE_COVERAGE = "d26f36b8"


def _three_cases(ws: Workspace) -> Workspace:
    ws.case("gamma", "Name a fruit.")  # alpha, beta, gamma × m1, m2: 6 results
    return ws


def _built(root: Path, *flags: str) -> None:
    """A build the test prepares with (in this process: tests/support/prepared.py)."""
    done = run_here(root, "build", *CAMPAIGN, *flags)
    assert done.code == 0, done


def _report(root: Path) -> tuple[list[str], dict]:
    """The report's text, by a real `claw` process, and its JSON through the same front in this process."""
    text = run_claw(root, "report", *CAMPAIGN, "--no-chart")
    assert text.code == 0 and "Traceback" not in text.stderr, text
    data = run_here(root, "report", *CAMPAIGN, "--output", "json", "--no-chart")
    assert data.code == 0, data
    return text.stdout.splitlines(), json.loads(data.stdout)


def _page(root: Path, tmp_path: Path) -> dict:
    page = tmp_path / "view.html"
    viewed = run_claw(root, "view", *CAMPAIGN, "--out", str(page))
    assert viewed.code == 0 and "Traceback" not in viewed.stderr, viewed
    return summary_of(page.read_text(encoding="utf-8"))


def _shown(tmp_path: Path, browser: Any) -> tuple[list[str], dict[str, str]]:  # noqa: F811
    """The page `_page` wrote, in headless Chromium: the header's coverage lines, each leaderboard model's Cases."""
    browser.get((tmp_path / "view.html").as_uri())
    lines = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#campaigns .coverage")]
    cells = {row.get_attribute("data-model"): row.find_element(By.CSS_SELECTOR, "td[data-col=cases]").text
             for row in browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")}
    return lines, cells


def _summary_rows(lines: list[str]) -> dict[str, str]:
    """The Model Summary's lines by model."""
    start = lines.index("Model Summary")
    return {line.split()[0]: line for line in lines[start + 3:] if line.strip() and line.split()[0] in ("m1", "m2")}


def test_a_filtered_build_says_the_head_holds_two_of_six_results(ws: Workspace, standin: StandIn, tmp_path: Path,
                                                                  browser: Any) -> None:  # noqa: F811
    _built(_three_cases(ws).root, "--case", "alpha")
    lines, data = _report(ws.root)
    head = next(at for at, line in enumerate(lines) if line.startswith("Head: "))
    assert lines[head + 1] == ("Coverage: 2 of 6 results (4 not built: claw status lists them; claw build without "
                               "--case/--model builds them)"), lines
    coverage = data["coverage"]
    assert {k: coverage[k] for k in ("expected", "results", "not_built", "cases_differ")} == \
        {"expected": 6, "results": 2, "not_built": 4, "cases_differ": False}, coverage
    assert coverage["models"] == {"m1": {"results": 1, "expected": 3}, "m2": {"results": 1, "expected": 3}}, coverage
    assert not any("not comparable" in line for line in lines), lines  # (the same case, alpha, for both)
    [campaign] = _page(ws.root, tmp_path)["campaigns"]
    assert campaign["coverage"]["not_built"] == 4 and campaign["coverage_text"].startswith("Coverage: 2 of 6"), campaign
    assert _shown(tmp_path, browser) == ([lines[head + 1]], {"m1": "1", "m2": "1"})  # (the same case: no mark)

    _built(ws.root)  # the whole campaign: nothing left to say
    lines, data = _report(ws.root)
    assert not any(line.startswith("Coverage:") for line in lines), lines
    assert data["coverage"]["not_built"] == 0 and data["coverage"]["results"] == 6, data["coverage"]
    [campaign] = _page(ws.root, tmp_path)["campaigns"]
    assert campaign["coverage_text"] is None, campaign
    assert _shown(tmp_path, browser) == ([], {"m1": "3", "m2": "3"})


def test_models_built_on_different_cases_are_marked_not_comparable(ws: Workspace, standin: StandIn, tmp_path: Path,
                                                                   browser: Any) -> None:  # noqa: F811
    _built(_three_cases(ws).root, "--model", "m1")  # m1 on its 3 cases
    _built(ws.root, "--model", "m2", "--case", "alpha")  # m2 on alpha alone
    lines, data = _report(ws.root)
    assert "Coverage: 4 of 6 results (2 not built" in "\n".join(lines), lines
    rows = _summary_rows(lines)
    assert "3/3" in rows["m1"] and "1/3" in rows["m2"], rows
    assert any("not comparable" in line for line in lines), lines
    coverage = data["coverage"]
    assert coverage["cases_differ"] is True, coverage
    assert coverage["models"] == {"m1": {"results": 3, "expected": 3}, "m2": {"results": 1, "expected": 3}}, coverage
    models = {m["model_id"]: m for m in _page(ws.root, tmp_path)["models"]}
    assert models["m1"]["expected_cases"] == 3 and models["m2"]["cases"] == 1, models
    [campaign] = _page(ws.root, tmp_path)["campaigns"]
    assert campaign["coverage"]["cases_differ"] is True, campaign
    shown, cells = _shown(tmp_path, browser)
    assert shown[0].startswith("Coverage: 4 of 6 results") and "not comparable" in shown[1], shown
    assert cells == {"m1": "3 of 3", "m2": "1 of 3"}, cells


def test_the_same_count_of_different_cases_is_marked(ws: Workspace, standin: StandIn) -> None:
    _built(_three_cases(ws).root, "--model", "m1", "--case", "alpha")
    _built(ws.root, "--model", "m2", "--case", "beta")  # 1 case each, not the same one
    lines, data = _report(ws.root)
    assert data["coverage"]["cases_differ"] is True, data["coverage"]
    assert any("not comparable" in line for line in lines), lines


def test_a_head_an_older_claw_wrote_gets_no_coverage_line(ws: Workspace, standin: StandIn, tmp_path: Path) -> None:
    old = old_clawstore(tmp_path / "old", BEFORE_COVERAGE)
    made = old_claw(old, _three_cases(ws).root, "build", *CAMPAIGN, "--case", "alpha")
    assert made.returncode == 0, made.stdout + made.stderr
    lines, data = _report(ws.root)
    assert not any(line.startswith("Coverage:") for line in lines), lines
    assert data["coverage"] is None, data
    [campaign] = _page(ws.root, tmp_path)["campaigns"]
    assert campaign["coverage"] is None and campaign["coverage_text"] is None, campaign

    # and the older claw reads the head this one writes (its log's and head's new field left alone)
    _built(ws.root, "--case", "beta")
    assert _report(ws.root)[1]["coverage"]["results"] == 4
    for command in (("report", *CAMPAIGN, "--no-chart"), ("status", *CAMPAIGN), ("fsck",)):
        read = old_claw(old, ws.root, *command)
        assert read.returncode == 0 and "Traceback" not in read.stderr, (command, read.stdout, read.stderr)
    made = old_claw(old, ws.root, "build", *CAMPAIGN, "--case", "gamma")
    assert made.returncode == 0, made.stdout + made.stderr


def test_a_build_max_cost_stopped_then_a_filtered_one_are_marked(tmp_path: Path, standin: StandIn,
                                                                 env: dict[str, str]) -> None:  # noqa: F811
    """The lead's case: a build `--max-cost` stopped (its head `stopped`), then a filtered build, whose head says
    `complete` (docs/building.md): the models' means are over different cases, and the report says so."""
    ws = many_cases(tmp_path / "ws", 3, concurrency=1)  # c000..c002 × m1, m2, one run at a time
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 1.0, "output": 1.0}) for m in d["models"]])
    # (the plan: about 0.003 USD; the first run costs 0.1, priced: nothing starts after it)
    standin.set_default(text("long", usage={"cost": None, "prompt_tokens": 10, "completion_tokens": 100_000}))
    stopped = run_claw(ws.root, "build", *CAMPAIGN, "--max-cost", "0.01")
    assert stopped.code == 1 and "Traceback" not in stopped.stderr, stopped
    lines, data = _report(ws.root)
    held = data["coverage"]["models"]
    assert data["head"]["state"] == "stopped" and data["coverage"]["not_built"] >= 1, data["coverage"]
    assert next(line for line in lines if line.startswith("Coverage: ")).startswith(
        f"Coverage: {data['coverage']['results']} of 6 results"), lines
    assert held["m2"]["results"] == 0 and "none of m2" in "\n".join(lines), (held, lines)  # (m1's runs come first)

    _built(ws.root, "--model", "m2", "--case", "c002")  # complete, its head says: m2 on one case, m1 on others
    lines, data = _report(ws.root)
    assert data["head"]["state"] == "complete" and data["coverage"]["cases_differ"] is True, data
    assert any("not comparable" in line for line in lines) and "1/3" in _summary_rows(lines)["m2"], lines
