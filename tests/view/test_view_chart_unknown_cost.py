"""`claw view`'s score-vs-cost SVG in a real headless Chromium never draws an unknown cost as $0: a model whose cost is
wholly unknown (a self-hosted server with no price) is placed in a "cost unknown" lane right of the cost axis, not at
x = 0 where it read as the cheapest; a model whose cost is partly unknown is drawn at its known part with an arrow
pointing right ("at least"). The same campaign as the PNG chart's test (tests/query/test_chart_unknown_cost.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, ws  # noqa: F401
from tests.support.judging import EV
from tests.support.unpriced import AT_LEAST, UNKNOWN, build_unpriced
from tests.support.workspace import Workspace

BOX = "const b = arguments[0].getBBox(); return [b.x, b.y, b.width, b.height];"


def _box(browser: Any, css: str) -> list[float]:
    return [float(v) for v in browser.execute_script(BOX, browser.find_element(By.CSS_SELECTOR, css))]


def test_the_view_chart_puts_an_unknown_cost_apart_and_a_partial_one_at_least(
        ws: Workspace, claw: Claw, standin: StandIn, browser: Any, tmp_path: Path) -> None:  # noqa: F811
    build_unpriced(ws, standin, claw)
    html = tmp_path / "view.html"
    code, _, err = claw("view", "--suite", "main", "--run-profile", "rp", *EV, "--out", str(html))
    assert code == 0, err
    browser.get(html.as_uri())
    cost_axis_end = max(float(line.get_attribute("x2")) for line in
                        browser.find_elements(By.CSS_SELECTOR, "#chart line.axis"))
    unknown = browser.find_element(By.CSS_SELECTOR, f"#chart g[data-model='{UNKNOWN}'] circle")
    assert float(unknown.get_attribute("cx")) > cost_axis_end + 10  # beside the axis, apart: not at $0
    lanes = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#chart text") if t.text == "cost unknown"]
    assert lanes == ["cost unknown"]
    known = browser.find_element(By.CSS_SELECTOR, f"#chart g[data-model='{AT_LEAST}'] circle")
    cx, cy, r = (float(known.get_attribute(a)) for a in ("cx", "cy", "r"))
    assert cx < cost_axis_end
    x, y, width, height = _box(browser, f"#chart g[data-model='{AT_LEAST}'] .at-least")  # its arrow: at least
    assert x >= cx + r - 1 and width > 5 and y - 1 <= cy <= y + height + 1, (x, y, width, height, cx, cy, r)
    assert not browser.find_elements(By.CSS_SELECTOR, f"#chart g[data-model='{UNKNOWN}'] .at-least")
