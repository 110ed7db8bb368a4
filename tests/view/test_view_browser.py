"""`claw view` in a real headless Chromium: the page agrees with `claw report`, shows a run, filters."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from clawstore.testing.standin import StandIn
from tests.support import demo
from tests.support.claw import Claw
from tests.support.once import copied, made_once
from tests.support.workspace import SECRET, Workspace

FLAGS = ["--suite", "demo", "--run-profile", "std", "--evaluation-profile", "ev"]
SCRIPTS = "return [...document.querySelectorAll('script[src]')].map(e => e.src)"  # the shards the page loaded


def _make_page(made: Path) -> None:
    """The demo campaign built, reported and viewed against a stand-in: the workspace, store, page and report."""
    with StandIn() as standin, pytest.MonkeyPatch.context() as mp:
        for key, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
                           "CLAW_STORE": str(made / "store")}.items():
            mp.setenv(key, value)
        ws: Workspace = demo.write_workspace(made / "ws")
        mp.chdir(ws.root)
        demo.script(standin)
        claw = Claw(ws.root)
        code, _, err = claw("build", *FLAGS)
        assert code == 1, err  # open-tiny's haiku hits a provider error on purpose
        code, out, err = claw("report", *FLAGS, "--output", "json", "--no-chart")
        assert code == 0, err
        html = made / "view.html"
        code, _, err = claw("view", *FLAGS, "--out", str(html))
        assert code == 0, err
        assert f"wrote {html}" in err
        assert re.search(rf"wrote {re.escape(str(html))} \((\d+ KB|\d+\.\d MB), \d+ runs; their details in "
                         rf"{re.escape(str(html))}\.d/, (\d+ KB|\d+\.\d MB)\)", err), err
        (made / "report.json").write_text(out)


@pytest.fixture
def page(tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Made once in the run (tests/support/once.py: not a build, report and view in every test), copied for the
    test: its workspace, its store (where `env` points) and the page with its folder."""
    made = made_once(tmp_path_factory, "view-browser", _make_page)
    copied(made, tmp_path, "ws", "store", "view.html.d")
    shutil.copy2(made / "view.html", tmp_path / "view.html")
    monkeypatch.chdir(tmp_path / "ws")
    return tmp_path / "view.html", json.loads((made / "report.json").read_text())

def test_open_without_a_browser_says_so_and_where_the_page_is(page: tuple[Path, dict[str, Any]],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER", "false")  # a browser command that cannot open anything
    html = page[0].with_name("again.html")
    code, _, err = Claw(Path.cwd())("view", *FLAGS, "--out", str(html), "--open")
    assert code == 0, err
    assert err.strip().splitlines()[-1] == (f"claw: note: no browser could be opened here (set $BROWSER to choose "
                                            f"one); the page is {html}")


def shots_dir(tmp_path: Path) -> Path:
    """Screenshots go to $CLAW_SCREENSHOTS (the docs script sets docs/img) or the test's temp dir."""
    target = Path(os.environ.get("CLAW_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def cells(driver: Any, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def test_page_names_nothing_remote_and_loads_only_its_own_shards(page: tuple[Path, dict[str, Any]]) -> None:
    html = page[0].read_text(encoding="utf-8")
    assert html.count("<script") == 2  # the summary data and the page's own script
    # The data may quote URLs (an endpoint, an error); the page itself names none but the SVG namespace.
    code = re.sub(r'(<script type="application/json"[^>]*>).*?</script>', r"\1</script>", html, flags=re.S)
    for remote in ("http://", "https://", "//cdn", "<link", "src=", "import(", "fetch(", "XMLHttpRequest"):
        assert remote not in code.replace("http://www.w3.org/2000/svg", ""), remote
    # One script source is set, a shard of the folder beside the page: the name is encoded, never a URL.
    assert re.findall(r"\.src = [^;]*;", code) == ['.src = encodeURIComponent(S.details.dir) + "/" + name;']


def test_leaderboard_run_page_and_filters_in_chromium(page: tuple[Path, dict[str, Any]], browser: Any,
                                                      tmp_path: Path) -> None:
    html, report = page
    shots = shots_dir(tmp_path)
    browser.get(html.as_uri())
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    rows = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
    shown = {r.get_attribute("data-model"): r for r in rows}
    assert set(shown) == set(demo.MODELS)
    for model in report["models"]:
        row = shown[model["model_id"]]
        col = {td.get_attribute("data-col"): td.text for td in row.find_elements(By.CSS_SELECTOR, "td[data-col]")}
        assert col["mean_score"] == f"{model['mean_score']:.2f}"
        if model["total_cost_usd"] is None:  # the failed run reported no cost: unknown, never 0
            sources = model["cost_sources"]
            assert col["total_cost_usd"] == (f"≥{model['known_cost_usd']:.5f}\n({sources['unknown']} of "
                                             f"{sum(sources.values())} unknown)")  # (the notes on a line of their own)
        else:
            assert col["total_cost_usd"] == f"{model['total_cost_usd']:.5f}"
        if model["run_cost_usd"] is not None:
            assert col["run_cost_usd"] == f"{model['run_cost_usd']:.5f}"
        assert col["mean_latency_s"] == f"{model['mean_latency_s']:.1f}"
        assert col["cases"] == str(model["cases"])
        assert col["runs_failed"] == str(model["runs_failed"])
        verdicts = [r["passed"] for r in report["rows"]
                    if r["model_id"] == model["model_id"] and r["passed"] is not None]
        assert col["pass_rate"].endswith(f"({sum(verdicts)}/{len(verdicts)})")
    assert [r.get_attribute("data-model") for r in rows][0] == "acme-large"  # best score first
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart g[data-model] circle")) == 3
    browser.save_screenshot(str(shots / "view-leaderboard.png"))

    browser.find_element(By.ID, "nav-matrix").click()
    matrix = browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    assert {r.get_attribute("data-model") for r in matrix} == set(demo.MODELS)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#matrix td.cell a")) == 12
    browser.save_screenshot(str(shots / "view-matrix.png"))

    assert browser.execute_script(SCRIPTS) == []  # no run opened yet: no shard loaded
    cell = browser.find_element(By.CSS_SELECTOR, "#matrix tr[data-model='acme-large'] td[data-case='notes_file'] a")
    cell.click()
    WebDriverWait(browser, 5).until(lambda d: d.find_elements(By.ID, "run-title"))
    assert browser.execute_script("return location.hash") == "#case/notes_file/model/acme-large"
    assert browser.execute_script(SCRIPTS) == [html.with_name("view.html.d").as_uri() + "/details-00000.js"]
    body = browser.find_element(By.ID, "main").text
    labels = body.lower()  # the labels are drawn in capitals
    assert labels.index("tool call · write_file") < labels.index("tool result · success") < labels.index(
        "tool call · read_file") < labels.index("final answer")
    assert "ship on friday" in body
    assert demo.answer("acme-large", "notes_file") in body
    assert body.count("Judge main · repetition") == 2
    assert "The reply is correct and complete. (good)" in body
    assert "task: the reply is correct and complete." in body  # per-dimension evidence
    checks = cells(browser, "table.checks tbody td:nth-child(3)")
    assert checks == ["passed", "passed"]
    assert "method median over 2 of 2 judge iterations → final score 9.00 against the pass threshold 5.0" in body
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(height + 120, 2400))  # the whole run page, judge reasoning included
    browser.save_screenshot(str(shots / "view-run.png"))
    browser.set_window_size(1280, 900)

    # A stable anchor opens the same page directly.
    browser.get(html.as_uri() + "#case/capital/model/open-tiny")
    WebDriverWait(browser, 5).until(lambda d: d.find_elements(By.ID, "run-title"))
    assert "The reply does not answer what was asked. (poor)" in browser.find_element(By.ID, "main").text

    browser.get(html.as_uri() + "#matrix")
    Select(browser.find_element(By.ID, "f-tag")).select_by_value("tools")
    shown_cases = {c.get_attribute("data-case") for c in browser.find_elements(By.CSS_SELECTOR, "#matrix td.cell")}
    assert shown_cases == {"notes_file"}
    Select(browser.find_element(By.ID, "f-tag")).select_by_value("")
    Select(browser.find_element(By.ID, "f-verdict")).select_by_value("fail")
    failing = {r.get_attribute("data-model") for r in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")}
    assert failing == {"open-tiny"}
    assert browser.find_element(By.ID, "f-count").text.startswith("3 of 12")


def test_opening_a_run_loads_its_shard_and_shows_its_answer(page: tuple[Path, dict[str, Any]], browser: Any,
                                                            tmp_path: Path) -> None:
    html, _ = page
    # An odd name (a space, '#', '%', non-ASCII): the page still finds its folder.
    odd = tmp_path / "odd dir" / "a #1 100% é.html"
    odd.parent.mkdir()
    code, _, err = Claw(Path.cwd())("view", *FLAGS, "--out", str(odd))
    assert code == 0, err
    browser.get(odd.as_uri() + "#case/capital/model/acme-large")
    WebDriverWait(browser, 5).until(lambda d: d.find_elements(By.ID, "run-title"))
    assert demo.answer("acme-large", "capital") in browser.find_element(By.ID, "main").text
    loaded = browser.execute_script(SCRIPTS)
    assert len(loaded) == 1 and loaded[0].endswith("/details-00000.js") and "%20%231%20100%25%20" in loaded[0]


def test_a_page_without_its_folder_or_with_a_later_views_shards_says_so(page: tuple[Path, dict[str, Any]],
                                                                        browser: Any, tmp_path: Path) -> None:
    html, _ = page
    alone = tmp_path / "alone" / "view.html"  # mailed without its folder
    alone.parent.mkdir()
    alone.write_bytes(html.read_bytes())
    browser.get(alone.as_uri() + "#case/capital/model/acme-large")
    WebDriverWait(browser, 5).until(lambda d: "Cannot show" in d.find_element(By.ID, "main").text)
    assert "view.html.d/details-00000.js was not found" in browser.find_element(By.ID, "main").text
    assert not browser.find_elements(By.ID, "run-title")
    shard = html.with_name("view.html.d") / "details-00000.js"  # rewritten by a view of other builds
    shard.write_text(re.sub(r'^clawDetails\("[0-9a-f]+"', 'clawDetails("0123456789abcdef01234567"', shard.read_text()))
    browser.get(html.as_uri() + "#case/capital/model/acme-large")
    WebDriverWait(browser, 5).until(lambda d: "Cannot show" in d.find_element(By.ID, "main").text)
    assert "belongs to a later claw view of this path: reload the page" in browser.find_element(By.ID, "main").text
